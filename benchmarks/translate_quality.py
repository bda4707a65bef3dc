"""Quality of `omni-npu-port translate` against a hand-written port.

Translates the three GPU model runners of vLLM-Omni 0.16.0 and compares every card-pattern site in the
hand-written NPU runners of the same release (method by method) with the translator's output:

- converted: the NPU form is in the translated method (same count, up to the NPU count)
- flagged:   not converted, but a diagnostic of that pattern's record marks the method
- missed:    neither
- extra:     translator forms or flags beyond the NPU sites (a pattern the hand port lacks, or noise)

Run:  .venv/bin/python benchmarks/translate_quality.py [--wheel PATH] [--target vllm-ascend==0.18.0] [--json OUT]
The wheel is read from ~/.cache/omni-npu-port/pkgs (else: pip download --no-deps vllm-omni==0.16.0).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omni_npu_port.core.catalog import CATALOG  # noqa: E402
from omni_npu_port.translate.engine import compile_rules, translate_source  # noqa: E402

PAIRS = [("vllm_omni/worker/gpu_model_runner.py", "vllm_omni/platforms/npu/worker/npu_model_runner.py"),
         ("vllm_omni/worker/gpu_ar_model_runner.py", "vllm_omni/platforms/npu/worker/npu_ar_model_runner.py"),
         ("vllm_omni/worker/gpu_generation_model_runner.py", "vllm_omni/platforms/npu/worker/npu_generation_model_runner.py")]
CACHE = Path.home() / ".cache" / "omni-npu-port" / "pkgs"


def wheel_path(given: str | None) -> Path:
    if given: return Path(given)
    found = sorted(CACHE.glob("vllm_omni-0.16.0-*.whl"))
    if found: return found[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(CACHE), "vllm-omni==0.16.0"], check=True)
    return sorted(CACHE.glob("vllm_omni-0.16.0-*.whl"))[0]


def leaf(s: str) -> str: return s.rsplit(".", 1)[-1]


class Forms(cst.BatchableCSTVisitor):
    """Counts the NPU form of each card record per method (class-level function) of a module."""
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self):
        super().__init__()
        self.counts = defaultdict(Counter)      # method -> record -> count
        self.method = "<module>"
        self.depth = 0
        fc = CATALOG["fc.import"].npu_symbol
        self.fc = fc
        self.mapping = {}                        # npu symbol -> record (reference sites)
        for p in CATALOG:
            if p.kind in ("rename", "class-swap") and p.npu_symbol and p.gpu_symbol:
                self.mapping.setdefault(p.npu_symbol, p.id)
        self.insert = {CATALOG[r].npu_symbol: r for r in ("rope.update-cos-sin", "attn.state-select", "pa.using-paged-attention")}
        self.insert[CATALOG["gparams.update-full"].npu_symbol] = "gparams.update-full"
        self.base = "NPUModelRunner"

    def q(self, node):
        return {x.name for x in self.get_metadata(QualifiedNameProvider, node, set())}

    def visit_FunctionDef(self, node):
        self.depth += 1
        if self.depth == 1:
            self.method = node.name.value
            names = [p.name.value for p in node.params.params]
            if node.name.value == "_model_forward" and "num_tokens_padded" in names: self.counts[self.method]["sig.model-forward"] += 1
            if node.name.value == "_dummy_run" and "with_prefill" in names: self.counts[self.method]["sig.dummy-run"] += 1

    def leave_FunctionDef(self, node):
        self.depth -= 1
        if self.depth == 0: self.method = "<module>"

    def visit_ImportFrom(self, node):
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar): return
        mod = cst.Module([]).code_for_node(node.module)
        for a in node.names:
            full = f"{mod}.{a.name.value}"
            for p in CATALOG:
                if p.kind == "import" and p.npu_symbol == full: self.counts["<module>"][p.id] += 1

    def visit_Call(self, node):
        c = self.counts[self.method]
        qs = self.q(node.func)
        if self.fc in qs:
            kws = {a.keyword.value for a in node.args if a.keyword}
            if "aclgraph_runtime_mode" in kws: c["fc.runtime-mode-kwarg"] += 1
            if "num_actual_tokens" in kws: c["fc.num-actual-tokens"] += 1
            if "model_instance" in kws: c["fc.model-instance"] += 1
        f = node.func
        if isinstance(f, cst.Attribute):
            if isinstance(f.value, cst.Name) and f.value.value == self.base: c["sig.explicit-base-call"] += 1
            if f.attr.value == "_update_full_graph_params_if_needed": c["gparams.update-full"] = 1
            if f.attr.value == "_model_forward" and (any(a.keyword and a.keyword.value == "num_tokens_padded" for a in node.args)
                                                     or (node.args and not node.args[0].keyword
                                                         and cst.Module([]).code_for_node(node.args[0].value) == "num_tokens_padded")):
                c["sig.model-forward"] += 1
            if f.attr.value == "_determine_batch_execution_and_padding" and any(
                    a.keyword and a.keyword.value == "force_uniform_decode" and cst.Module([]).code_for_node(a.value) == "True" for a in node.args):
                c["graph.talker-mtp-uniform-decode"] += 1
        for s in qs:
            if s in self.insert: c[self.insert[s]] = 1

    def visit_Attribute(self, node): self._ref(node)
    def visit_Name(self, node): self._ref(node)

    def _ref(self, node):
        for s in self.q(node):
            if s in self.mapping: self.counts[self.method][self.mapping[s]] += 1
            if s in self.insert and self.insert[s] == "attn.state-select": self.counts[self.method]["attn.state-select"] = 1


def forms(code: str) -> dict:
    v = Forms()
    MetadataWrapper(cst.parse_module(code)).visit_batched([v])
    return v.counts


def method_of_line(code: str) -> list:
    """[(start, end, name)] of class-level methods (and top-level functions) by line."""
    w = MetadataWrapper(cst.parse_module(code))
    pos = w.resolve(PositionProvider)
    out = []
    for st in w.module.body:
        for f in (st.body.body if isinstance(st, cst.ClassDef) else [st]):
            if isinstance(f, cst.FunctionDef):
                r = pos[f]; out.append((r.start.line, r.end.line, f.name.value))
    return out


def compare(gpu_code: str, npu_code: str, rules):
    t = translate_source(gpu_code, rules)
    assert t.error is None, t.error
    spans = method_of_line(gpu_code)
    flags = defaultdict(Counter)
    alias = {"gparams.if-needed": "gparams.update-full"}
    for d in t.diagnostics:
        if d.severity in ("manual", "unsupported") and d.record:
            m = next((n for a, b, n in spans if a <= d.line <= b), "<module>")
            flags[m][alias.get(d.record, d.record)] += 1
    npu, tr = forms(npu_code), forms(t.code)
    methods = set(npu) & ({n for _, _, n in spans} | {"<module>"})
    rows = []
    for m in sorted(methods):
        for rec in sorted(set(npu[m]) | set(flags[m]) | set(tr[m])):
            n, f = npu[m][rec], flags[m][rec]
            conv = min(n, tr[m][rec])
            fl = min(n - conv, f)
            rows.append(dict(method=m, record=rec, npu_sites=n, converted=conv, flagged=fl, missed=n - conv - fl,
                             extra=max(0, tr[m][rec] - n) + (f - fl)))
    return rows, t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel"); ap.add_argument("--target", default="vllm-ascend==0.18.0"); ap.add_argument("--json")
    args = ap.parse_args(argv)
    rules = compile_rules(args.target)
    z = zipfile.ZipFile(wheel_path(args.wheel))
    all_rows = []
    for g, n in PAIRS:
        rows, t = compare(z.read(g).decode(), z.read(n).decode(), rules)
        for r in rows: r["file"] = Path(g).name
        all_rows += rows
    tot = Counter()
    for r in all_rows:
        for k in ("npu_sites", "converted", "flagged", "missed", "extra"): tot[k] += r[k]
    print(f"{'file':32} {'method':30} {'record':34} npu conv flag miss extra")
    for r in all_rows:
        print(f"{r['file']:32} {r['method']:30} {r['record']:34} {r['npu_sites']:3} {r['converted']:4} {r['flagged']:4} {r['missed']:4} {r['extra']:5}")
    s = tot["npu_sites"] or 1
    print(f"\nTOTAL: {tot['npu_sites']} NPU card-pattern sites: {tot['converted']} converted ({100*tot['converted']/s:.0f}%), "
          f"{tot['flagged']} flagged ({100*tot['flagged']/s:.0f}%), {tot['missed']} missed ({100*tot['missed']/s:.0f}%); "
          f"{tot['extra']} extra forms/flags beyond the hand port")
    if args.json: Path(args.json).write_text(json.dumps({"rows": all_rows, "totals": tot}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
