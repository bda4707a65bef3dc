"""Port quality on real sources: how close `omni-npu-port port` gets to vLLM-Omni's hand-written NPU runner.

For each ported method of `OmniNPUModelRunner` (vllm-omni 0.16.0), the difflib ratio (over lines) against the
hand-written NPU method of
  - the port with conflicts left as git markers (`--prefer markers`, the default; markers count as lines),
  - the port with conflicts resolved by policy: `--prefer npu` (keep the NPU base's side) and `--prefer omni`
    (keep the omni GPU method's side); each resolution adds a one-line `# ONP4008` note,
  - baseline 1: vllm-ascend's `NPUModelRunner.<method>` alone,
  - baseline 2: the omni GPU method alone, translated (in its module's import context, same target),
plus the wall time of a whole-class port (`port_class`, translator on). Every port runs the translator
(`omni_npu_port.translate`) for the target `vllm-ascend==<the NPU base version>`.

Sources are read from ~/.cache/omni-npu-port/pkgs and downloaded there (PyPI) when missing.
Usage: python benchmarks/port_quality.py [--vllm 0.15.0 0.16.0 ...] [--vllm-ascend 0.15.0rc1 0.16.0rc1 ...] [--json]
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import time

from omni_npu_port.conformance import fetch_package
from omni_npu_port.port import known_ascend, locate, port_class, port_method, rules_for, translate_located

METHODS = ("_dummy_run", "_model_forward", "load_model", "_talker_mtp_forward")
POLICIES = ("markers", "npu", "omni")

def ratio(a: str, b: str) -> float:
    "difflib similarity of two texts, line by line."
    return difflib.SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False).ratio()

def run(vllm: str, ascend: str, omni: str) -> dict:
    v, a, o = (str(fetch_package(s)) for s in (f"vllm=={vllm}", f"vllm-ascend=={ascend}", f"vllm-omni=={omni}"))
    rows = []
    for m in METHODS:
        go = locate(f"{o}:OmniGPUModelRunner.{m}")
        hand = locate(f"{o}:OmniNPUModelRunner.{m}").method_source
        try: nb = locate(f"{a}:NPUModelRunner.{m}")
        except ValueError: nb = None
        try: gb = locate(f"{v}/vllm/v1/worker/gpu_model_runner.py:GPUModelRunner.{m}")
        except ValueError: gb = None
        rules = rules_for(f"vllm-ascend=={known_ascend(ascend)}")   # what the port itself uses (target_of)
        omni_t = translate_located(go, rules)[0]
        row = {"method": m, "npu_base": ratio(nb.method_source, hand) if nb else None, "omni_translated": ratio(omni_t, hand)}
        if nb and gb:
            for pol in POLICIES:
                r = port_method(gb, go, nb, target=rules, prefer=pol)
                row[f"port_{pol}"] = ratio(r.code, hand)
                if pol == "markers": row.update(style=r.style, conflicts=r.conflicts)
                if pol == "npu": row["resolved"] = sum(d.code == "ONP4008" for d in r.diagnostics)
        else:   # omni-only method: the translated omni method is the port
            row.update(style="omni-only", conflicts=0, resolved=0, **{f"port_{p}": row["omni_translated"] for p in POLICIES})
        rows.append(row)
    t0 = time.perf_counter()
    cls = port_class(locate(f"{v}:GPUModelRunner", False), locate(f"{o}:OmniGPUModelRunner", False),
                     locate(f"{a}:NPUModelRunner", False))
    return {"vllm": vllm, "vllm_ascend": ascend, "vllm_omni": omni, "rows": rows,
            "class_port_seconds": time.perf_counter() - t0, "class_ported": cls.stats["styles"]}

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", nargs="+", default=["0.15.0", "0.16.0"], help="GPU base release(s) (vllm sdists/wheels)")
    ap.add_argument("--vllm-ascend", nargs="+", default=["0.15.0rc1", "0.16.0rc1"],
                    help="NPU base release(s); vllm-omni 0.16.0 was written against vllm 0.15.0 + vllm-ascend 0.15.0rc1")
    ap.add_argument("--vllm-omni", default="0.16.0")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = [run(v, asc, args.vllm_omni) for v in args.vllm for asc in args.vllm_ascend]
    if args.json:
        print(json.dumps(results, indent=2)); return 0
    f = lambda x: "  n/a" if x is None else f"{x:.3f}"
    for res in results:
        print(f"\nvllm {res['vllm']} + vllm-ascend {res['vllm_ascend']} → vllm-omni {res['vllm_omni']} OmniNPUModelRunner"
              " (translator on)")
        print(f"{'method':<22}{'style':<14}{'confl':>6}{'markers':>9}{'npu':>8}{'omni':>8}{'NPU base':>10}{'omni tr.':>10}")
        for r in res["rows"]:
            print(f"{r['method']:<22}{r['style']:<14}{r['conflicts']:>6}{f(r['port_markers']):>9}{f(r['port_npu']):>8}"
                  f"{f(r['port_omni']):>8}{f(r['npu_base']):>10}{f(r['omni_translated']):>10}")
        print(f"markers / npu / omni = the port with --prefer markers (conflicts left as markers) / npu / omni. "
              f"Whole-class port: {res['class_port_seconds']:.2f} s, ported "
              f"{', '.join(f'{k} ({v})' for k, v in res['class_ported'].items())}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
