"""Generalization: the source tools on code of shapes none of the other benchmarks use (issue 13).

Drives `omni-npu-port translate`, `port`, `port --class`, `audit` and `doctor` through the command line, each in a
fresh process (so it keeps working while the library's APIs move), and measures, per fixture class and overall:

- silent GPU-isms: a catalog GPU symbol left in translated code (not in comments or strings) with neither a
  rewrite nor a diagnostic at its statement. Found here with `ast`, independently of the tool: imports are
  resolved the way Python binds them (`import a.b as c`, `from m import x as y`, `from m import *`), and a name
  whose leaf is a catalog vllm GPU symbol and that comes from a vllm module counts (a re-export). A diagnostic
  counts where the report puts one on the statement's lines (mapped from input to output lines) or an `# ONPxxxx`
  comment sits on or right above the statement. Also: `translate --check` exiting 0 while GPU-isms remain.
- refusals: a command that errors (exit 2/3, a traceback) or answers nothing (no code, no JSON, `--against`
  without scores) for an input it should handle.
- unparsable: `port --prefer npu` / `--prefer omni` outputs that do not compile (`compile()`: the parser, and the
  checks after it such as a repeated keyword argument).
- conflicts per method: `<<<<<<<` markers in the default (`--prefer markers`) port, per ported method; and the lines
  inside them per ported method (two narrow conflicts are better than one that holds the whole method).
- super skips: in a class port, an explicit `Base.method(self, ...)` that names a vllm / vllm-ascend class where
  Python's MRO of the omni class reaches an omni class first (e.g. `NPUModelRunner.__init__` inside the AR runner).
- undefined names: names the module of a class port (`--prefer npu`) uses but never binds (ruff's F821), e.g. a
  parameter renamed in the signature but not at its uses; (unsaid): of those, the ones no ONP4025 of the port names.
- false orphans: audit findings that a method has no GPU counterpart where the GPU class inherits it (another file).
- doctor: refusals, and whether a versionless checkout gets a version (given with `@X`, or inferred and said so),
  and vllm's version read from its `__version__ = version = '...'` form.

Fixture classes (tests/fixtures/generalize/, small files written for this benchmark, no copies of real files):
reexport (re-exported imports), inherited (methods the NPU base inherits from vllm's runner), omni_only (methods
neither vllm nor vllm-ascend has), hierarchy (runner classes three levels deep across files, NPU side mirrored),
old_layout (NPU runners in vllm_omni/worker/npu/), versionless (a vllm-ascend checkout without a version file).

`--pypi`: every vLLM-Omni release on PyPI with the vllm / vllm-ascend pairing the catalog's OMNI_PAIRING records
(`--releases` to limit): translate of the omni GPU runners, the method port of each method the hand-written
OmniNPUModelRunner and the omni GPU runner both define, the class port of each runner pair in the catalog's
OMNI_RUNNERS, and the port's similarity to the hand copies as port_quality measures it (its `run`, in-process).

Targets (issue 13): silent GPU-isms 0, refusals 0, unparsable --prefer outputs 0, on the fixtures and every release.
Run:  .venv/bin/python benchmarks/generalize.py [--fixtures] [--pypi [--releases 0.16.0 0.18.0]] [-j N] [--library DIR] [--json F]
      [--no-judge] [--no-releases]  (the fixture part without basedpyright / without reading real releases: the test's)
(--library DIR: measure the tools of another commit, e.g. DIR from `git archive REV omni_npu_port | tar -x -C DIR`.)
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from omni_npu_port.core.catalog import CATALOG, OMNI_PAIRING, OMNI_RUNNERS  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "generalize"
STACK = FIX / "stack"
TARGET = "vllm-ascend==0.18.0"                  # the fixtures' NPU side is written in this release's shape
CLASSES = ("reexport", "inherited", "omni_only", "hierarchy", "old_layout", "versionless")
GPU_BASE, NPU_BASE = "GPUModelRunner", "NPUModelRunner"
PACKAGES = ("vllm", "vllm_ascend")              # the bases' packages; everything else is omni's


def cli() -> list[str]:
    "The command line that runs omni-npu-port in a fresh process."
    exe = ROOT / ".venv" / "bin" / "omni-npu-port"
    if exe.exists(): return [str(exe)]
    return [sys.executable, "-c", "import sys; from omni_npu_port.cli.main import entry; sys.exit(entry())"]


LIBRARY: str | None = None                      # --library: the omni_npu_port package the commands run (its parent folder)


def call(args: list[str], timeout: float = 600) -> dict:
    "Run `omni-npu-port ARGS`; rc, stdout, stderr, seconds, and whether it refused (exit ≥ 2 or a traceback)."
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [LIBRARY, os.environ.get("PYTHONPATH")]))} if LIBRARY else None
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cli() + args, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", f"timed out after {timeout} s"
    refused = rc not in (0, 1) or "Traceback (most recent call last)" in err
    return {"args": args, "rc": rc, "stdout": out, "stderr": err[-2000:], "seconds": time.perf_counter() - t0,
            "refused": refused}


def load_json(text: str):
    "The JSON a command printed, or None."
    try: return json.loads(text)
    except (ValueError, TypeError): return None


# ---------------------------------------------------------------------------------------------------- GPU-isms
def gpu_symbols() -> set[str]:
    "Catalog GPU symbols that are names in code (functions, classes, modules' members), not methods of a class."
    out = set()
    for p in CATALOG:
        s = p.gpu_symbol
        if not s or "." not in s: continue
        parent = s.rsplit(".", 1)[0].rsplit(".", 1)[-1]
        if parent[:1].isupper(): continue           # GPUModelRunner._dummy_run, CUDAGraphWrapper.clear_graphs
        if s.rsplit(".", 1)[-1] in ("GPUModelRunner", "CUDAGraphMode"): continue   # bases and enums NPU code shares
        out.add(s)
    return out


def bindings(tree: ast.AST) -> tuple[dict[str, str], list[str], set[str], dict[str, int]]:
    "Names bound by imports (name -> dotted), modules star-imported, names defined in the module itself, import lines."
    bound, stars, local, where = {}, [], set(), {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                name = a.asname or a.name.split(".")[0]
                bound[name], where[name] = (a.name if a.asname else name), n.lineno
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
            for a in n.names:
                if a.name == "*": stars.append(n.module); where.setdefault(f"*{n.module.split('.')[0]}", n.lineno)
                else: bound[a.asname or a.name] = f"{n.module}.{a.name}"; where[a.asname or a.name] = n.lineno
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): local.add(n.name)
        elif isinstance(n, ast.Assign):
            local.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return bound, stars, local, where


def dotted(node: ast.AST, bound: dict[str, str]) -> str | None:
    "The dotted name an expression `a.b.c` resolves to through the module's imports, else None."
    parts = []
    while isinstance(node, ast.Attribute): parts.append(node.attr); node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound: return None
    return ".".join([bound[node.id], *reversed(parts)])


def find_gpuisms(code: str, symbols: set[str] | None = None) -> list[dict]:
    "Catalog GPU symbols used (or imported) in `code`: line, column, the symbol, how it was reached."
    symbols = gpu_symbols() if symbols is None else symbols
    leaves = {s.rsplit(".", 1)[1]: s for s in symbols if s.startswith("vllm.")}
    tree = ast.parse(code)
    bound, stars, local, where = bindings(tree)
    vstars = [m for m in stars if m.split(".")[0] == "vllm"]
    hits = []

    def match(d: str) -> str | None:
        if d in symbols: return d
        if d.split(".")[0] == "vllm" and d.rsplit(".", 1)[-1] in leaves: return leaves[d.rsplit(".", 1)[-1]]
        return None

    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and not n.level and n.module:
            for a in n.names:
                if a.name != "*" and (s := match(f"{n.module}.{a.name}")):
                    hits.append({"line": n.lineno, "col": n.col_offset, "symbol": s, "via": "import"})
        elif isinstance(n, (ast.Attribute, ast.Name)) and isinstance(getattr(n, "ctx", None), ast.Load):
            d, root = dotted(n, bound), n
            while isinstance(root, ast.Attribute): root = root.value
            if d and (s := match(d)):
                hits.append({"line": n.lineno, "col": n.col_offset, "symbol": s, "import_line": where.get(root.id),
                             "via": "name" if isinstance(n, ast.Name) else "attribute"})
            elif isinstance(n, ast.Name) and n.id not in bound and n.id not in local and vstars and n.id in leaves:
                hits.append({"line": n.lineno, "col": n.col_offset, "symbol": leaves[n.id], "via": "star", "import_line": where.get("*vllm")})
    return sorted(hits, key=lambda h: (h["line"], h["col"]))


def statement_lines(tree: ast.AST) -> dict[int, tuple[int, int]]:
    "Line -> (first, last) line of the innermost statement holding it (a compound statement: its header only)."
    span = {}
    def visit(stmts):
        for s in stmts:
            body = [b for f in ("body", "orelse", "finalbody", "handlers") for b in getattr(s, f, []) or []]
            last = (min(b.lineno for b in body) - 1) if body else s.end_lineno
            first = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
            for ln in range(first, max(first, last) + 1): span[ln] = (first, max(first, last))
            for f in ("body", "orelse", "finalbody"): visit(getattr(s, f, []) or [])
            for h in getattr(s, "handlers", []) or []: visit(h.body)
    visit(tree.body)
    return span


def out_to_in(src: str, out: str) -> dict[int, int]:
    "Output line -> input line (1-based), by aligning the two texts' lines."
    a, b = [l.strip() for l in src.splitlines()], [l.strip() for l in out.splitlines()]
    m = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(j2 - j1):
            m[j1 + k + 1] = (i1 + min(k, max(i2 - i1 - 1, 0)) + 1) if i2 > i1 else i1 + 1
    return m


ONP = re.compile(r"#.*\bONP\d{4}\b")


def silent_gpuisms(src: str, out: str, diagnostics: list[dict]) -> tuple[list[dict], list[dict]]:
    "(every GPU-ism left in `out`, those with neither a diagnostic at their statement nor an ONP comment on or above it)."
    hits = find_gpuisms(out)
    if not hits: return [], []
    tree, lines = ast.parse(out), out.splitlines()
    span, back = statement_lines(tree), out_to_in(src, out)
    diag_lines = {d.get("line") for d in diagnostics if d.get("line")}
    def flagged(line: int) -> bool:
        first, last = span.get(line, (line, line))
        if {back.get(l) for l in range(first, last + 1)} & diag_lines: return True
        if any(ONP.search(lines[l - 1]) for l in range(first, last + 1)): return True
        k = first - 1                                              # the comment block right above the statement
        while k >= 1 and lines[k - 1].lstrip().startswith("#"):
            if ONP.search(lines[k - 1]): return True
            k -= 1
        return False
    silent = [dict(h, import_flagged=bool(h.get("import_line")) and flagged(h["import_line"])) for h in hits if not flagged(h["line"])]
    return hits, silent


# ---------------------------------------------------------------------------------------------------- classes
def class_index(*roots: Path) -> dict[str, dict]:
    "Every class in the .py files under `roots`: name -> {bases (names), methods, package, file}."
    idx = {}
    for root in roots:
        for f in sorted(root.rglob("*.py")):
            tree = ast.parse(f.read_text())
            for n in tree.body:
                if isinstance(n, ast.ClassDef):
                    idx[n.name] = {"bases": [b.id if isinstance(b, ast.Name) else ast.unparse(b).rsplit(".", 1)[-1] for b in n.bases],
                                   "methods": [m.name for m in n.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))],
                                   "package": f.relative_to(root).parts[0], "file": str(f)}
    return idx


def mro(name: str, idx: dict) -> list[str]:
    "C3 linearization of `name` over the index (unknown bases end the chain)."
    if name not in idx: return [name]
    seqs = [mro(b, idx) for b in idx[name]["bases"]] + [list(idx[name]["bases"])]
    out = [name]
    while any(seqs):
        seqs = [s for s in seqs if s]
        head = next(s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs))
        out.append(head)
        seqs = [s[1:] if s[0] == head else s for s in seqs]
    return out


def next_definer(cls: str, method: str, idx: dict) -> str | None:
    "The class Python's super() reaches for `method` from `cls` (the first after it in its MRO that defines it)."
    return next((c for c in mro(cls, idx)[1:] if method in idx.get(c, {}).get("methods", ())), None)


def super_skips(code: str, gpu_cls: str, idx: dict) -> list[str]:
    """Explicit `Base.m(self, ...)` calls in a ported class that name a vllm / vllm-ascend class where the omni MRO reaches an omni class first.

    A method ported from an omni ancestor (a class port takes every omni override in the MRO) is judged from that ancestor."""
    try: tree = ast.parse(code)
    except SyntaxError: return []
    skips = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for c in ast.walk(fn):
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                    and c.args and isinstance(c.args[0], ast.Name) and c.args[0].id == "self"):
                named, m = c.func.value.id, c.func.attr
                owner = next((c for c in mro(gpu_cls, idx) if m in idx.get(c, {}).get("methods", ())), gpu_cls)
                reach = next_definer(owner, m, idx) if fn.name == m else None
                if reach and idx[reach]["package"] not in PACKAGES and idx.get(named, {}).get("package") in PACKAGES:
                    skips.append(f"{fn.name}: {named}.{m}(self, ...) skips {reach}.{m}")
    return skips


def parses(code: str) -> bool:
    "Whether a module, a class or a method (indented or not) compiles (ast.parse alone lets `f(a=1, a=2)` through)."
    for text in (code, textwrap.dedent(code), "class _C:\n" + textwrap.indent(textwrap.dedent(code), "    ")):
        try: compile(text, "<port>", "exec", dont_inherit=True); return True
        except (SyntaxError, ValueError): pass
    return False


def undefined_names(code: str) -> list[str] | None:
    "Names a module uses but never binds (ruff's F821), as 'line: message'; None where ruff is not installed."
    ruff = shutil.which("ruff") or str(ROOT / ".venv" / "bin" / "ruff")
    if not Path(ruff).exists(): return None
    p = subprocess.run([ruff, "check", "--isolated", "--select", "F821", "--output-format", "json", "--stdin-filename", "port.py", "-"],
                       input=code, capture_output=True, text=True)
    found = load_json(p.stdout)
    return None if found is None else [f"{d['location']['row']}: {d['message']}" for d in found]


def conflicts_per_method(code: str) -> dict[str, int]:
    "`<<<<<<<` markers under each `def` of a (possibly unparsable) port."
    out, cur, lines = {}, "<module>", code.splitlines()
    defs = [re.match(r"(\s*)(?:async\s+)?def\s+\w+", l) for l in lines]
    top = min((len(m.group(1)) for m in defs if m), default=0)      # the methods' own indentation: nested defs stay inside
    for line in lines:
        if (m := re.match(r"(\s*)(?:async\s+)?def\s+(\w+)", line)) and len(m.group(1)) == top: cur = m.group(2); out.setdefault(cur, 0)
        elif line.startswith("<<<<<<<") or line.lstrip().startswith("<<<<<<< "): out[cur] = out.get(cur, 0) + 1
    return out


def conflict_lines(code: str) -> int:
    "Lines between `<<<<<<<` and `>>>>>>>` markers (both sides): how much a reader must resolve, beside how many conflicts."
    n, inside = 0, False
    for line in code.splitlines():
        s = line.lstrip()
        if s.startswith("<<<<<<<"): inside = True
        elif s.startswith(">>>>>>>"): inside = False
        elif inside and not s.startswith("======="): n += 1
    return n


# ---------------------------------------------------------------------------------------------------- jobs
def translate_job(cls: str, srcs: list[Path], target: str = TARGET, sources=()) -> dict:
    "translate SRCS -o OUT --report, and --check (with --source S for each of `sources`): GPU-isms left, silent ones, refusals, --check's exit."
    with tempfile.TemporaryDirectory() as d:
        rep, out = Path(d) / "r.json", Path(d) / "out"
        common = [str(s) for s in srcs] + ["--target", target, "-q"] + [a for x in sources for a in ("--source", str(x))]
        r = call(["translate", *common, "-o", str(out), "--report", str(rep)])
        chk = call(["translate", *common, "--check", "--report", str(Path(d) / "c.json")])
        report = load_json(rep.read_text()) if rep.exists() else None
        files, gpuisms, silent, failed = [], 0, [], 0
        for f in (report or {}).get("files", []):
            src = Path(f["path"]).read_text()
            text = Path(f["output"]).read_text() if f.get("output") and Path(f["output"]).exists() else src
            if f.get("status") == "failed" or not parses(text):
                failed += 1; continue
            hits, quiet = silent_gpuisms(src, text, f.get("diagnostics", []))
            gpuisms += len(hits)
            silent += [dict(h, file=f["path"]) for h in quiet]
    refusals = int(r["refused"] or report is None) + int(chk["refused"]) + failed
    return {"class": cls, "kind": "translate --source" if sources else "translate", "what": ", ".join(s.name for s in srcs), "gpuisms": gpuisms,
            "silent": silent, "refusals": refusals, "check_rc": chk["rc"],
            "check_passed_with_gpuisms": int(chk["rc"] == 0 and gpuisms > 0),
            "errors": [(x["stderr"].strip().splitlines() or [f"exit {x['rc']}"])[-1] for x in (r, chk) if x["refused"]]}


def port_job(cls: str, gpu_base: str, gpu_omni: str, npu_base: str, against: str | None = None,
             klass: bool = False, idx: dict | None = None, gpu_cls: str | None = None, extra=()) -> dict:
    "One port (method or --class) with --prefer markers (and --against), npu and omni: refusals, parse, conflicts."
    base = (["--class"] if klass else []) + ["--gpu-base", gpu_base, "--gpu-omni", gpu_omni, "--npu-base", npu_base, *extra, "--json"]
    runs = {p: call(["port", *base, "--prefer", p] + (["--against", against] if against and p == "markers" else []))
            for p in ("markers", "npu", "omni")}
    kind = ("port --class" if klass else "port") + (" --into" if "--into" in extra else "")
    res = {"class": cls, "kind": kind, "what": gpu_omni.split(":", 1)[1],
           "refusals": 0, "unparsable": [], "conflicts": {}, "errors": [], "super_skips": [], "against": None}
    for p, r in runs.items():
        j = load_json(r["stdout"])
        if r["refused"] or not j or not j.get("code"):
            res["refusals"] += 1; res["errors"].append(f"--prefer {p}: " + (r["stderr"].strip().splitlines() or ["no output"])[-1])
            continue
        if p == "markers":
            res["conflicts"] = {m: n for m, n in conflicts_per_method(j["code"]).items() if m != "<module>"}
            res["conflict_lines"] = conflict_lines(j["code"])
            res["methods"] = len((j.get("stats") or {}).get("styles") or {}) or max(len(res["conflicts"]), 1)
            if against:
                scores = (j.get("against") or {}).get("scores") if klass else j.get("against")
                res["against"] = scores
                if not scores: res["refusals"] += 1; res["errors"].append("--against: no scores")
        elif not parses(j["code"]): res["unparsable"].append(p)
        if p == "npu" and klass and idx and gpu_cls: res["super_skips"] = super_skips(j["code"], gpu_cls, idx)
        if p == "npu" and klass:   # a module: its names must be bound, or the port must say which are not (ONP4025)
            res["undefined"] = undefined_names(j["code"]) or []
            said = {d["message"].rsplit("`", 2)[-2] for d in j.get("diagnostics", []) if d.get("code") == "ONP4025" and "`" in d["message"]}
            res["undefined_unsaid"] = [u for u in res["undefined"] if u.rsplit("`", 2)[-2] not in said]
    res["n_conflicts"] = sum(res["conflicts"].values())
    return res


def audit_job(cls: str, gpu: Path, npu: Path, idx: dict, extra=()) -> dict:
    "audit --gpu --npu --json: refusals, and findings that a method lacks a GPU counterpart the GPU class inherits."
    r = call(["audit", "--gpu", str(gpu), "--npu", str(npu), *map(str, extra), "--json"])
    found = load_json(r["stdout"])
    false = []
    for f in found if isinstance(found, list) else []:
        npu_cls, m = f.get("cls"), f.get("method")
        gpu_cls = npu_cls and npu_cls.replace("OmniNPU", "OmniGPU").replace("NPU", "GPU")
        if f.get("code") == "ONP4204" and gpu_cls in idx and m in {x for c in mro(gpu_cls, idx) for x in idx.get(c, {}).get("methods", [])}:
            false.append(f"{npu_cls}.{m}")
    return {"class": cls, "kind": "audit", "what": f"{gpu.name} / {npu.name}", "refusals": int(r["refused"] or found is None),
            "false_orphans": false, "findings": len(found) if isinstance(found, list) else None,
            "errors": [(r["stderr"].strip().splitlines() or [""])[-1]] if r["refused"] else []}


def doctor_job(cls: str, source: str, expect_version: str | None, package: str) -> dict:
    "doctor --json --source SOURCE: refusals, the version it reports (and where from) against the one expected."
    r = call(["doctor", "--json", "--source", source])
    j = load_json(r["stdout"])
    srcs = [s for s in (j or {}).get("sources", []) if s.get("package") in (package, package.replace("_", "-"))]
    s = srcs[0] if srcs else {}
    version, said = s.get("version"), s.get("version_from")
    # a version must be there, equal the one expected, and, where the source has no version file and none was given, be called inferred
    ok = bool(version) and (expect_version is None or version == expect_version) and (expect_version is not None or said == "inferred")
    return {"class": cls, "kind": "doctor", "what": source.replace(str(FIX) + "/", ""), "refusals": int(r["refused"] or not srcs),
            "version": version, "version_from": said, "expected": expect_version, "version_said": ok,
            "version_ok": None if expect_version is None else version == expect_version,
            "summary": s.get("summary"), "errors": [(r["stderr"].strip().splitlines() or [""])[-1]] if r["refused"] else []}


def versionless(tree: Path, tmp: Path | None = None) -> Path:
    "A copy of a fixture tree without its version files, as a git checkout comes (a new temporary folder in `tmp`)."
    dest = Path(tempfile.mkdtemp(prefix="onp-versionless-", dir=tmp)) / tree.name
    shutil.copytree(tree, dest, ignore=shutil.ignore_patterns("_version.py", "version.py", "__pycache__"))
    return dest


def fixture_jobs(quick: bool = False, judge: bool = True, releases: bool = True, tmp: Path | None = None) -> list:
    ("Every fixture job: (function, args); `quick`: the first job of each class and kind only; not `judge`: class "
     "ports with --no-judge; not `releases`: audits on the fixture stack (--source) from omni_old (--from).")
    v, a = STACK / "vllm", STACK / "vllm_ascend"
    no_judge = () if judge else ("--no-judge",)
    audit_extra = () if releases else ("--source", v, a, "--from", STACK / "omni_old")
    jobs = [(translate_job, ("reexport", sorted((FIX / "reexport").glob("*.py")))),
            (translate_job, ("reexport", sorted((FIX / "reexport").glob("*.py")), TARGET, [v]))]   # the re-exporting source at hand
    for tree, cls in (("omni_new", "hierarchy"), ("omni_old", "old_layout")):
        o = STACK / tree
        idx = class_index(v, a, o)
        gpu_files = sorted(p for p in (o / "vllm_omni" / "worker").glob("gpu_*.py"))
        jobs.append((translate_job, (cls, gpu_files)))
        for m in idx["OmniGPUModelRunner"]["methods"]:             # method ports of the omni runner
            kind = ("inherited" if m in idx[GPU_BASE]["methods"] and m not in idx[NPU_BASE]["methods"] else
                    "omni_only" if m not in idx[GPU_BASE]["methods"] and m not in idx[NPU_BASE]["methods"] else None)
            if kind:
                jobs.append((port_job, (kind, f"{v}:{GPU_BASE}.{m}", f"{o}:OmniGPUModelRunner.{m}", f"{a}:{NPU_BASE}.{m}",
                                        f"{o}:OmniNPUModelRunner.{m}")))
        gpu_classes = [c for c, e in idx.items() if e["package"] == "vllm_omni" and GPU_BASE in mro(c, idx) and NPU_BASE not in mro(c, idx)]
        for g in sorted(gpu_classes, key=lambda c: (-len(mro(c, idx)), c)):   # every omni GPU runner class, deepest first
            n = "OmniNPUModelRunner" if g == "OmniGPUModelRunner" else g.replace("GPU", "NPU")
            jobs.append((port_job, (cls, f"{v}:{GPU_BASE}", f"{o}:{g}", f"{a}:{NPU_BASE}", f"{o}:{n}" if n in idx else None,
                                    True, idx, g, ("--class-name", n, *no_judge))))
        deep = max(gpu_classes, key=lambda c: (len(mro(c, idx)), c))         # the class port landing in its NPU mirror
        n = deep.replace("GPU", "NPU")
        if n in idx:
            jobs.append((port_job, (cls, f"{v}:{GPU_BASE}", f"{o}:{deep}", f"{a}:{NPU_BASE}", None, True, idx, deep,
                                    ("--class-name", n, "--into", f"{o}:{n}", *no_judge))))
        jobs.append((audit_job, (cls, o, o, idx, audit_extra)))            # the tree, found by layout or by class
        npu_ar = next(f for f in o.rglob("npu_ar_model_runner.py"))
        gpu_ar = o / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
        jobs.append((audit_job, (cls, gpu_ar, npu_ar, idx, audit_extra)))   # files
    bare = versionless(a, tmp)   # the fixture states its version; a git checkout states none
    jobs += [(doctor_job, ("versionless", str(bare), None, "vllm_ascend")),
             (doctor_job, ("versionless", f"{bare}@0.18.0", "0.18.0", "vllm_ascend")),
             (doctor_job, ("versionless", str(v), "0.18.0", "vllm"))]
    if quick:
        seen, kept = set(), []
        for j in jobs:
            key = (j[1][0], j[0].__name__, len(j[1]) > 5 and j[1][5], len(j[1]) > 3 and bool(j[1][3]))   # class, command, --class, --source
            if key not in seen: seen.add(key); kept.append(j)
        jobs = kept
    return jobs


# ---------------------------------------------------------------------------------------------------- PyPI
def extract(archive: Path, dest: Path, top: str = "vllm_omni/") -> Path:
    "The .py files of package `top` in a wheel or sdist, under dest (returns the folder holding `top`)."
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                if n.startswith(top) and n.endswith(".py"): z.extract(n, dest)
        return dest
    with tarfile.open(archive) as t:
        members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(".py") and f"/{top}" in m.name]
        t.extractall(dest, members=members, filter="data")
    roots = {Path(m.name.split(f"/{top}")[0]) for m in members}
    return dest / min(roots, key=lambda p: len(p.parts)) if roots else dest


def release_pairings() -> dict[str, tuple]:
    "The catalog's OMNI_PAIRING (vLLM-Omni -> (vllm, [vllm-ascend ...], where written)), as benchmarks/port_quality.py reads it."
    return {omni: (vllm, list(ascends), ev) for omni, (vllm, ascends, ev) in OMNI_PAIRING.items()}


def pypi_jobs(releases: list[str], tmp: Path) -> tuple[list[tuple], list[dict]]:
    "The jobs of every chosen vLLM-Omni release (with each vllm-ascend it pairs with), and the pairings."
    from omni_npu_port.sources.fetch import fetch_package
    jobs, pairs = [], []
    for omni in releases:
        vllm, ascends, _ = release_pairings()[omni]
        o_arch = fetch_package(f"vllm-omni=={omni}")
        o = extract(Path(o_arch), tmp / f"omni-{omni}")
        idx = class_index(o)
        for name, pkg in ((GPU_BASE, "vllm"), (NPU_BASE, "vllm_ascend")):   # the bases, enough for super_skips
            idx.setdefault(name, {"bases": [], "methods": [], "package": pkg, "file": ""})
        v = str(fetch_package(f"vllm=={vllm}"))
        for asc in ascends:
            a = str(fetch_package(f"vllm-ascend=={asc}"))
            pairs.append({"vllm_omni": omni, "vllm": vllm, "vllm_ascend": asc})
            cls, target = f"{omni}/{asc}", f"vllm-ascend=={asc}"
            gpu_files = sorted({Path(idx[g]["file"]) for _, g, _, _ in OMNI_RUNNERS if g in idx})
            jobs.append((translate_job, (cls, gpu_files, target)))
            if "OmniNPUModelRunner" in idx:
                hand = set(idx["OmniNPUModelRunner"]["methods"])
                for m in [m for m in idx["OmniGPUModelRunner"]["methods"] if m in hand and m != "__init__"]:
                    jobs.append((port_job, (cls, f"{v}:{GPU_BASE}.{m}", f"{o_arch}:OmniGPUModelRunner.{m}",
                                            f"{a}:{NPU_BASE}.{m}", f"{o_arch}:OmniNPUModelRunner.{m}")))
            for _, g, _, n in OMNI_RUNNERS:
                if g in idx:
                    jobs.append((port_job, (cls, f"{v}:{GPU_BASE}", f"{o_arch}:{g}", f"{a}:{NPU_BASE}",
                                            f"{o_arch}:{n}" if n in idx else None, True, idx, g, ("--class-name", n))))
    return jobs, pairs


def similarity_rows(pairs: list[dict]) -> list[dict]:
    "port_quality's measure (benchmarks/port_quality.py --json, run with the same library): the markers port's text ratio to each hand method."
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [LIBRARY, os.environ.get("PYTHONPATH")]))} if LIBRARY else None
    out = []
    for p in pairs:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "port_quality.py"), "--releases", p["vllm_omni"],
               "--vllm-ascend", p["vllm_ascend"], "--no-update", "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        res = load_json(r.stdout)
        if r.returncode or not isinstance(res, list) or not res:
            out.append({**p, "error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}); continue
        out.append({**p, "rows": {x["method"]: {"port": x.get("port_markers"), "npu_base": x.get("npu_base"),
                                                "omni_translated": x.get("omni_translated"), "conflicts": x.get("conflicts")}
                                  for x in res[0]["rows"]}})
    return out


# ---------------------------------------------------------------------------------------------------- report
def summarize(results: list[dict], classes) -> dict:
    "Per class and overall: silent GPU-isms, refusals, unparsable --prefer outputs, conflicts per method, and the rest."
    def agg(rs):
        ports = [r for r in rs if r["kind"].startswith("port")]
        methods = sum(r.get("methods", 0) for r in ports)
        return {"jobs": len(rs), "silent_gpuisms": sum(len(r.get("silent", [])) for r in rs),
                "silent_import_flagged": sum(h.get("import_flagged", False) for r in rs for h in r.get("silent", [])),
                "gpuisms_left": sum(r.get("gpuisms", 0) for r in rs), "refusals": sum(r["refusals"] for r in rs),
                "unparsable": sum(len(r.get("unparsable", [])) for r in rs),
                "conflicts": sum(r.get("n_conflicts", 0) for r in ports), "ported_methods": methods,
                "conflicts_per_method": round(sum(r.get("n_conflicts", 0) for r in ports) / methods, 3) if methods else None,
                "conflict_lines_per_method": round(sum(r.get("conflict_lines", 0) for r in ports) / methods, 1) if methods else None,
                "check_passed_with_gpuisms": sum(r.get("check_passed_with_gpuisms", 0) for r in rs),
                "super_skips": sum(len(r.get("super_skips", [])) for r in rs),
                "undefined_names": sum(len(r.get("undefined", [])) for r in rs),
                "undefined_unsaid": sum(len(r.get("undefined_unsaid", [])) for r in rs),
                "false_orphans": sum(len(r.get("false_orphans", [])) for r in rs),
                "doctor_wrong_version": sum(r.get("version_ok") is False for r in rs),
                "doctor_version_issues": sum(r["kind"] == "doctor" and not r.get("version_said") for r in rs)}
    per = {c: agg([r for r in results if r["class"] == c]) for c in classes}
    return {"per_class": per, "overall": agg(results)}


COLS = ("jobs", "silent_gpuisms", "silent_import_flagged", "refusals", "unparsable", "conflicts_per_method",
        "conflict_lines_per_method", "check_passed_with_gpuisms",
        "super_skips", "undefined_names", "undefined_unsaid", "false_orphans", "doctor_version_issues")
HEAD = ("jobs", "silent", "(imp. fl.)", "refused", "unparsable", "confl/meth", "lines/meth", "check 0", "super", "undefined", "(unsaid)", "orphans", "version")


def print_table(title: str, summary: dict):
    print(f"\n{title}")
    print(f"{'class':<22}" + "".join(f"{h:>11}" for h in HEAD))
    for name, row in [*summary["per_class"].items(), ("overall", summary["overall"])]:
        f = lambda x: "n/a" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)
        print(f"{name:<22}" + "".join(f"{f(row[c]):>11}" for c in COLS))


def print_details(results: list[dict]):
    for r in results:
        notes = [f"silent {h['symbol']} at {Path(h['file']).name}:{h['line']} ({h['via']}"
             f"{', its import flagged' if h.get('import_flagged') else ''})" for h in r.get("silent", [])]
        notes += [f"unparsable --prefer {p}" for p in r.get("unparsable", [])] + r.get("errors", []) + r.get("super_skips", [])
        notes += [f"false orphan {x}" for x in r.get("false_orphans", [])] + [f"undefined {x}" for x in r.get("undefined", [])]
        if r["kind"] == "doctor": notes.append(f"version {r['version']} ({r['version_from']}), expected {r['expected']}")
        if r.get("n_conflicts"): notes.append(f"{r['n_conflicts']} conflict(s): {r['conflicts']}")
        for i, n in enumerate(notes or ["ok"]):
            print(f"  {(r['class'] + ' ' + r['kind'] + ' ' + r['what'])[:70]:<72}{n}" if i == 0 else f"  {'':<72}{n}")


def run_jobs(jobs, workers: int) -> list[dict]:
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        return list(ex.map(lambda j: j[0](*j[1]), jobs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", action="store_true", help="the fixture part (the default when --pypi is not given)")
    ap.add_argument("--pypi", action="store_true", help="every vLLM-Omni release on PyPI (slow; --releases limits it)")
    ap.add_argument("--releases", nargs="+", help="vLLM-Omni releases for --pypi (default: every one port_quality records)")
    ap.add_argument("--quick", action="store_true", help="--fixtures: the first job of each class and kind only (the test's)")
    ap.add_argument("--no-judge", action="store_true",
                    help="--fixtures: class ports with `port --no-judge` (no basedpyright run; nothing reads its "
                         "verdict)")
    ap.add_argument("--no-releases", action="store_true",
                    help="--fixtures: audits port on the fixture's own vllm / vllm-ascend (--source) from its "
                         "older tree omni_old (--from), not on the real releases `--from auto` fetches")
    ap.add_argument("--no-similarity", action="store_true", help="--pypi: skip port_quality's similarity measure")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="commands run at once (default: CPUs)")
    ap.add_argument("--library", metavar="DIR", help="run the commands with the omni_npu_port package under DIR (e.g. "
                    "`git archive REV omni_npu_port | tar -x -C DIR`: a commit's tools); default: this checkout's")
    ap.add_argument("--details", action="store_true", help="print every job's findings")
    ap.add_argument("--json", metavar="F", help="write the full report to F")
    args = ap.parse_args(argv)
    global LIBRARY
    if args.library:
        LIBRARY = str(Path(args.library).resolve())
        if not (Path(LIBRARY) / "omni_npu_port" / "cli" / "main.py").is_file():
            ap.error(f"--library {args.library}: no omni_npu_port/cli/main.py under it")
    report = {"target": TARGET, "library": LIBRARY or str(ROOT), "gpu_symbols": sorted(gpu_symbols())}
    t0 = time.perf_counter()
    if args.fixtures or not args.pypi:
        with tempfile.TemporaryDirectory(prefix="onp-generalize-") as d:   # the versionless copy goes with it
            results = run_jobs(fixture_jobs(args.quick, not args.no_judge, not args.no_releases, Path(d)), args.jobs)
        report["fixtures"] = {"results": results, **summarize(results, CLASSES)}
        print_table("fixtures (tests/fixtures/generalize): targets silent 0, refused 0, unparsable 0", report["fixtures"])
        if args.details: print_details(results)
    if args.pypi:
        known = release_pairings()
        releases = args.releases or list(known)
        bad = [r for r in releases if r not in known]
        if bad: ap.error(f"no pairing recorded for vllm-omni {', '.join(bad)} (the catalog's OMNI_PAIRING)")
        with tempfile.TemporaryDirectory() as d:
            jobs, pairs = pypi_jobs(releases, Path(d))
            results = run_jobs(jobs, args.jobs)
        names = [f"{p['vllm_omni']}/{p['vllm_ascend']}" for p in pairs]
        report["pypi"] = {"pairs": pairs, "results": results, **summarize(results, names)}
        print_table("PyPI releases (vllm-omni/vllm-ascend): targets silent 0, refused 0, unparsable 0", report["pypi"])
        if args.details: print_details(results)
        if not args.no_similarity:
            report["pypi"]["similarity"] = sim = similarity_rows(pairs)
            print("\nsimilarity of the port (--prefer markers) to the hand-written NPU methods (port_quality's measure)")
            for s in sim:
                if "error" in s: print(f"  {s['vllm_omni']}/{s['vllm_ascend']}: {s['error']}"); continue
                cells = ", ".join(f"{m} {r['port']:.3f}" for m, r in s["rows"].items() if r["port"] is not None)
                print(f"  {s['vllm_omni']}/{s['vllm_ascend']}: {cells}")
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"\n{report['seconds']} s; silent = catalog GPU symbols left with no rewrite and no diagnostic at their statement (imp. fl.: of those, the ones whose "
          "import is flagged); refused = a command "
          "that errored or answered nothing; unparsable = --prefer npu/omni outputs that do not compile; confl/meth = conflict "
          "markers per ported method; lines/meth = lines inside them per ported method; check 0 = `translate --check` exiting 0 with GPU-isms left; super = super() calls "
          "ported to a vllm-ascend base where the MRO reaches an omni class first; undefined = names a class port's module "
          "(--prefer npu) uses but never binds (ruff F821; unsaid: no ONP4025 names it); orphans = audit findings that a method "
          "has no GPU counterpart where the GPU class inherits it; version = doctor sources with no version, a wrong one, or a guess not called inferred")
    if args.json: Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
