"""Robustness of the translator (issue 14): comments and strings over real trees, pathological nesting, a long fuzz.

Three parts, each printing a table:

- trees: every .py file of real vllm, vllm-ascend and vllm-omni releases (from the package cache,
  `omni_npu_port.sources.fetch.fetch_package`; read with `open_source`, never installed or imported) through
  `translate_source`. For every file the translator changes, the COMMENT and STRING tokens of input and output are
  compared (`translate.engine.token_changes`): a comment or string of the input that the output lost or repeats
  counts (a string may go only inside an argument a rule drops: those are listed). Also counted: outputs that do not
  parse, translations that change on a second pass, exceptions, and files skipped with an ONP9xxx code.
- nesting: pathological inputs (an 84 KB chain `a + a + ...` of matched calls, 1000 nested parentheses, deep calls,
  a long `or` chain, deep blocks) with the time each takes and the code it gets. Target: each under 2 s, what CPython
  rejects is ONP9001, nothing crashes the process (each case runs in a child process).
- fuzz: the robustness suite's properties (tests/test_robustness.py: no exception escapes, outputs parse, idempotent,
  comments and strings kept, untouched files byte-identical) on many more hypothesmith programs and mutated runner files
  than CI runs.

- memory (issue 22): the peak memory `translate_source` takes per byte of input, each file in a fresh child process
  (its peak RSS less the RSS after import, over the file's size): the largest files a rule acts on in real releases,
  and generated worst cases (every function rewritten: all of the file goes through libcst). Target: at most 100x on
  the real files. The worst case is printed beside it with the guard that bounds it: a file whose libcst tree the
  memory left cannot hold is refused before libcst runs (ONP9006, `translate.engine.parse_estimate`), and a
  file past OMNI_NPU_PORT_MAX_FILE_MB is never read (ONP9003). The port too: `port_release` of the test fixture
  release with its AR runner module padded with GPU-ist methods (parse, locate, symbol index, merge, the translator),
  whose peak per byte must stay under the guard `port.release.PORT_BYTES_PER_BYTE` that refuses a runner module the
  memory left cannot port (ONP4304, before `ast` reads it).

Targets: 0 in every column of the trees table but `changed` and `skipped`; nesting cases under 2 s; 0 fuzz failures;
memory per input byte at most 100x on real files.
Run:  .venv/bin/python benchmarks/robustness.py [--trees] [--nesting] [--fuzz N] [--memory] [--releases vllm-ascend==0.18.0 ...] [--all-cached]
(no part named: all four, the default release list, --fuzz 500.)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from omni_npu_port.sources.fetch import CACHE_DIR, fetch_package, release_of  # noqa: E402
from omni_npu_port.sources.readers import open_source  # noqa: E402
from omni_npu_port.translate.engine import might_apply, token_changes, translate_source  # noqa: E402
from omni_npu_port.translate.rules import compile_rules  # noqa: E402

RELEASES = ["vllm==0.18.0", "vllm==0.34.0", "vllm-ascend==0.13.0", "vllm-ascend==0.18.0", "vllm-ascend==0.23.0",
            "vllm-ascend==0.30.0rc2", "vllm-omni==0.16.0", "vllm-omni==0.22.0", "vllm-omni==0.30.0"]


def parses(text) -> bool:
    import ast
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError): return False
    return True


def tree_row(spec: str, rules, details: list) -> dict:
    "One release: the counts of the trees table."
    tree = open_source(fetch_package(spec))
    row = Counter(release=0)
    t0 = time.perf_counter()
    for name in tree.reader.names():
        if not name.endswith(".py"): continue
        data = tree.reader.read(name)
        if data is None: continue
        row["files"] += 1
        if not might_apply(rules, data): continue
        row["pre-filtered"] += 1
        try: t = translate_source(data, rules, name)
        except Exception as e:   # noqa: BLE001  (counted, never raised: this is what the benchmark looks for)
            row["exceptions"] += 1; details.append(f"{spec} {name}: {type(e).__name__}: {e}"); continue
        if t.error is not None: row["skipped"] += 1; details.append(f"{spec} {name}: {t.error.code} {t.error.message}"); continue
        if not t.changed: continue
        row["changed"] += 1
        ch = token_changes(data, t.output)
        if ch is None: row["untokenizable"] += 1; continue
        for (kind, text), n in ch["lost"].items():
            row[f"{kind.lower()}s lost"] += n; details.append(f"{spec} {name}: lost {kind} {text[:80]!r}")
        for (kind, text), n in ch["repeated"].items():
            row[f"{kind.lower()}s repeated"] += n; details.append(f"{spec} {name}: repeated {kind} {text[:80]!r}")
        if not parses(t.output): row["unparsable"] += 1; details.append(f"{spec} {name}: output does not parse")
        again = translate_source(t.output, rules, name)
        if again.error is not None or again.output != t.output:
            row["not idempotent"] += 1; details.append(f"{spec} {name}: a second pass changes it")
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


TREE_COLUMNS = ["files", "pre-filtered", "changed", "skipped", "comments lost", "comments repeated", "strings lost",
                "strings repeated", "unparsable", "not idempotent", "exceptions", "seconds"]


def trees(specs, target: str) -> tuple[list, list]:
    rules, rows, details = compile_rules(target), [], []
    print(f"trees: every .py file, translated for {target}; comments and strings compared on every changed file")
    print("| release | " + " | ".join(TREE_COLUMNS) + " |\n|---|" + "---:|" * len(TREE_COLUMNS))
    for spec in specs:
        try: row = tree_row(spec, rules, details)
        except Exception as e:   # noqa: BLE001  (a release that cannot be fetched or read: said, not fatal)
            print(f"| {spec} | could not be read: {type(e).__name__}: {e} |"); continue
        rows.append({"release": spec, **{c: row[c] for c in TREE_COLUMNS}})
        print(f"| {spec} | " + " | ".join(str(row[c]) for c in TREE_COLUMNS) + " |", flush=True)
    total = {c: sum(r[c] for r in rows) for c in TREE_COLUMNS}
    print("| **all** | " + " | ".join(str(round(total[c], 1)) for c in TREE_COLUMNS) + " |")
    for d in details: print("  " + d)
    return rows, details


HEAD = "import torch\ntorch.cuda.synchronize()\n"
X = "torch.cuda.synchronize()"
NESTING = {   # name -> the file's text
    "chain of 3,500 matched calls, one 84 KB line": HEAD + "x = " + " + ".join([X] * 3500) + "\n",
    "chain of 2,000 matched calls over 2,000 lines": HEAD + "x = (\n" + " +\n".join(["    " + X] * 2000) + "\n)\n",
    "1,000 nested parentheses": HEAD + "x = " + "(" * 1000 + "1" + ")" * 1000 + "\n",
    "3,000 nested calls": HEAD + "x = " + "f(" * 3000 + X + ")" * 3000 + "\n",
    "150 nested calls": HEAD + "x = " + "f(" * 150 + X + ")" * 150 + "\n",
    "30,000 `or`s": HEAD + "x = " + " or ".join([X] * 30000) + "\n",
    "10,000 unary minus": HEAD + "x = " + "-" * 10000 + X + "\n",
    "10,000 attributes": HEAD + "x = " + X + ".a" * 10000 + "\n",
    "3,000 nested lambdas": HEAD + "x = " + "lambda: " * 3000 + X + "\n",
    "300 nested blocks": HEAD + "def f():\n" + "".join("    " * (i + 1) + "with a:\n" for i in range(300)) + "    " * 301 + X + "\n",
}
CHILD = r'''
import sys, time, json
sys.path.insert(0, sys.argv[1])
from omni_npu_port.translate.engine import translate_source
src = sys.stdin.read()
t0 = time.perf_counter(); t = translate_source(src)
print(json.dumps({"seconds": time.perf_counter() - t0, "code": t.error.code if t.error else ("changed" if t.changed else "same"),
                  "message": t.error.message if t.error else ""}))
'''


def nesting(limit: float = 2.0) -> list:
    print(f"\nnesting: each case in a child process (a crash is reported, not fatal); target under {limit:.0f} s")
    print("| input | size | seconds | outcome |\n|---|---:|---:|---|")
    rows = []
    for name, src in NESTING.items():
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], input=src, capture_output=True, text=True, timeout=120)
            r = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else \
                {"seconds": None, "code": f"process died (exit {p.returncode})", "message": p.stderr.strip()[-200:]}
        except subprocess.TimeoutExpired: r = {"seconds": None, "code": "over 120 s", "message": ""}
        secs = "—" if r["seconds"] is None else f"{r['seconds']:.2f}"
        ok = r["seconds"] is not None and r["seconds"] < limit
        rows.append({"input": name, "bytes": len(src), **r, "ok": ok})
        print(f"| {name} | {len(src) / 1000:.0f} KB | {secs}{'' if ok else ' (over)'} | {r['code']} {r['message'][:90]} |", flush=True)
    return rows


def fuzz(n: int) -> dict:
    "The suite's properties on `n` examples per strategy: the failures found (hypothesis stops at the first of each)."
    import warnings
    warnings.simplefilter("ignore", SyntaxWarning)   # hypothesmith compiles what it generates
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    import hypothesmith
    sys.path.insert(0, str(ROOT / "tests"))
    import test_robustness as R
    cfg = settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def programs(p, where): R.check_translation(R.placed(p, where))
    def modules(p): R.check_translation(R.placed(p, "before"))
    def mutations(data): R.check_translation(data)
    cases = {
        "hypothesmith programs (grammar), placed before/after/in a method": given(
            hypothesmith.from_grammar(), st.sampled_from(["before", "after", "method"]))(programs),
        "hypothesmith modules (libcst nodes)": given(hypothesmith.from_node())(modules),
        "mutated runner file": given(R.mutated())(mutations),
    }
    print(f"\nfuzz: {n} examples per strategy (the properties of tests/test_robustness.py)")
    print("| strategy | examples | seconds | result |\n|---|---:|---:|---|")
    out = {}
    for name, fn in cases.items():
        t0 = time.perf_counter()
        try: cfg(fn)(); result = "held"
        except Exception as e:   # noqa: BLE001  (hypothesis re-raises the shrunk failing example)
            result = f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"
        out[name] = result
        print(f"| {name} | {n} | {time.perf_counter() - t0:.0f} | {result} |", flush=True)
    return out


MEMORY_RELEASES = ["vllm==0.18.0", "vllm-ascend==0.18.0", "vllm-omni==0.30.0"]
MEMORY_TARGET = 100   # bytes of peak memory per byte of input, on real files
_CHILD = """
import ctypes, gc, sys
from omni_npu_port.translate.engine import translate_source
from omni_npu_port.translate.rules import compile_rules
def status(key): return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
rules = compile_rules(sys.argv[2]); data = open(sys.argv[1], "rb").read()
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)           # memory freed so far goes back to the system
open("/proc/self/clear_refs", "w").write("5")                  # the peak (VmHWM) starts again from here
base = status("VmRSS:")
t = translate_source(data, rules, sys.argv[1])
print(base, status("VmHWM:"), t.error.code if t.error else "-", int(t.changed))
"""


def generated(size: int) -> bytes:
    "A module of about `size` bytes in which every function holds GPU-isms: the whole file goes through libcst."
    parts, i, n = ["import torch\n"], 0, 0
    while n < size:
        s = (f"def f{i}(x):\n    y = torch.cuda.current_device()\n    if torch.cuda.is_available():\n"
             f"        x = x.cuda()\n    return x + {i}\n\n")
        parts.append(s); n += len(s); i += 1
    return "".join(parts).encode()


def memory(target: str, per_release: int = 3) -> list:
    "Rows (case, bytes, peak MiB, bytes per byte, code): the real files a rule acts on, largest first, and generated ones."
    import tempfile
    rules, cases = compile_rules(target), []
    for spec in MEMORY_RELEASES:
        tree = open_source(fetch_package(spec))
        sizes = []
        for name in tree.reader.names():
            if name.endswith(".py") and (data := tree.reader.read(name)) and might_apply(rules, data): sizes.append((len(data), name, data))
        cases += [(f"{spec} {name}", data) for _, name, data in sorted(sizes, key=lambda x: -x[0])[:per_release]]
    cases += [(f"generated worst case, {n // 1000} KB", generated(n)) for n in (100_000, 300_000, 1_000_000)]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for case, data in cases:
            f = Path(d) / "m.py"; f.write_bytes(data)
            p = subprocess.run([sys.executable, "-c", _CHILD, str(f), target], capture_output=True, text=True,
                               env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
            if p.returncode: rows.append({"case": case, "bytes": len(data), "error": p.stderr[-300:]}); continue
            base, peak, code, changed = p.stdout.split()
            extra = (int(peak) - int(base)) * 1024
            rows.append({"case": case, "bytes": len(data), "peak_mib": round(extra / 2**20, 1), "per_byte": round(extra / len(data), 1),
                         "code": code, "real": not case.startswith("generated")})
    print(f"\nmemory per input byte (translate_source, fresh process each; target <= {MEMORY_TARGET}x on real files)")
    print(f"{'case':<70} {'bytes':>9} {'peak MiB':>9} {'per byte':>9} code")
    for r in rows:
        if "error" in r: print(f"{r['case']:<70} {r['bytes']:>9} failed: {r['error']}"); continue
        print(f"{r['case'][:70]:<70} {r['bytes']:>9} {r['peak_mib']:>9} {r['per_byte']:>8}x {r['code']}")
    return rows


_PORT_CHILD = """
import ctypes, gc, shutil, sys, tempfile
from pathlib import Path
from omni_npu_port.port.release import port_release
fix, size = Path(sys.argv[1]), int(sys.argv[2])
omni = shutil.copytree(fix / "omni", Path(tempfile.mkdtemp()) / "omni")
ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
parts, i, n = [ar.read_text()], 0, 0
while n < size:   # methods of the runner class, each with GPU-isms: all of them go through the port and the translator
    s = f"\\n    def extra_{i}(self, x):\\n        if torch.cuda.is_available():\\n            x = x.cuda()\\n        return x + {i}\\n"
    parts.append(s); n += len(s); i += 1
text = "".join(parts); ar.write_text(text)
def status(key): return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
open("/proc/self/clear_refs", "w").write("5")
base = status("VmRSS:")
res = port_release(omni, sources=[fix / "vllm", fix / "vllm_ascend", fix / "vllm_old"], history=["0.17.0"])
bad = [d.code for d in res.diagnostics if d.severity == "error"]
print(len(text.encode()), base, status("VmHWM:"), bad[0] if bad else "-", len(res.runners))
"""


def port_memory(sizes=(100_000, 250_000)) -> list:
    "Rows like `memory`'s for `port_release` of the test fixture release whose AR runner module is padded to each size."
    from omni_npu_port.port.release import PORT_BYTES_PER_BYTE
    rows = []
    for size in sizes:
        p = subprocess.run([sys.executable, "-c", _PORT_CHILD, str(ROOT / "tests" / "fixtures" / "release"), str(size)],
                           capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
        case = f"port --release, a {size // 1000} KB runner module"
        if p.returncode: rows.append({"case": case, "bytes": size, "error": p.stderr[-300:]}); continue
        n, base, peak, code, ported = p.stdout.split()
        extra = (int(peak) - int(base)) * 1024
        rows.append({"case": case, "bytes": int(n), "peak_mib": round(extra / 2**20, 1), "per_byte": round(extra / int(n), 1),
                     "code": code, "guard": PORT_BYTES_PER_BYTE, "port": True})
    print(f"\nmemory per input byte of the port (port_release, fresh process each; guard: a runner module whose size times "
          f"PORT_BYTES_PER_BYTE = {PORT_BYTES_PER_BYTE} is past the memory left is ONP4304 before it is parsed)")
    for r in rows:
        if "error" in r: print(f"{r['case']:<70} {r['bytes']:>9} failed: {r['error']}"); continue
        print(f"{r['case'][:70]:<70} {r['bytes']:>9} {r['peak_mib']:>9} {r['per_byte']:>8}x {r['code']}")
    return rows


def cached_releases() -> list[str]:
    "Every vllm / vllm-ascend / vllm-omni release the package cache holds, as `dist==version`."
    seen = set()
    for f in sorted(Path(CACHE_DIR).expanduser().glob("*")):
        r = release_of(f.name)
        if r and r[0] in ("vllm", "vllm-ascend", "vllm-omni"): seen.add(f"{r[0]}=={r[1]}")
    return sorted(seen)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", action="store_true", help="comments and strings over real releases")
    ap.add_argument("--nesting", action="store_true", help="pathological nesting, timed")
    ap.add_argument("--fuzz", type=int, metavar="N", help="the suite's properties on N examples per strategy")
    ap.add_argument("--memory", action="store_true", help="peak memory per input byte of translate (issue 22)")
    ap.add_argument("--releases", nargs="+", help=f"releases for --trees (default: {' '.join(RELEASES)})")
    ap.add_argument("--all-cached", action="store_true", help="--trees over every release in the package cache")
    ap.add_argument("--target", default="vllm-ascend==0.18.0", help="the translation target (default vllm-ascend==0.18.0)")
    ap.add_argument("--json", metavar="F", help="write the results as JSON")
    args = ap.parse_args()
    every = not (args.trees or args.nesting or args.fuzz or args.memory)
    res = {}
    if args.trees or every:
        specs = cached_releases() if args.all_cached else (args.releases or RELEASES)
        res["trees"], res["tree_details"] = trees(specs, args.target)
    if args.nesting or every: res["nesting"] = nesting()
    if args.fuzz or every: res["fuzz"] = fuzz(args.fuzz or 500)
    if args.memory or every: res["memory"] = memory(args.target) + port_memory()
    if args.json: Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    bad = any(r[c] for r in res.get("trees", ()) for c in TREE_COLUMNS[4:-1]) or \
        not all(r["ok"] for r in res.get("nesting", ())) or any(v != "held" for v in res.get("fuzz", {}).values()) or \
        any(r.get("real") and ("error" in r or r["per_byte"] > MEMORY_TARGET) for r in res.get("memory", ())) or \
        any(r.get("port") and ("error" in r or r["per_byte"] > r["guard"]) for r in res.get("memory", ()))
    print("\nrobustness targets: " + ("MISSED" if bad else "met"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
