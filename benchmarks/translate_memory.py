"""Peak memory of a translate run per input byte on generated worst shapes (issue 33, part 3).

Each shape is generated at a few sizes and translated in a fresh child process (`translate_source`, the rules of
`--target`): the child records its resident size (VmRSS) and address space (VmSize) after import, then the peak of
each (VmHWM, VmPeak) after the run; the growth of each over the file's size is its bytes per input byte. Address
space is what an `RLIMIT_AS` cap counts and resident memory what the machine's free memory counts, so the larger of
the two is the figure the up-front check must bound: `translate.engine.parse_estimate` (PARSE_BYTES_PER_BYTE per
byte, PARSE_BYTES_PER_LEVEL more per byte per level of brackets around it). A row whose peak is over its estimate is
a miss (exit 1); a case whose estimate is over --max-mb is not run (deep nesting takes tens of KB per byte).

Shapes (each holds a GPU-ism in every statement, so every statement goes through libcst):
- functions: small functions each with a few GPU-isms (the old worst case of benchmarks/robustness.py --memory);
- call-per-line: one GPU call per line;
- huge-call: one statement, a call with one GPU-call argument per line;
- huge-list: one statement, a list literal of GPU calls on one line;
- deep: one statement per line, each a GPU call nested in 60 calls (within the depth the translator accepts);
- concat: statements that are each a chain of 150 string concatenations beside a GPU call;
- unary-chain, lambda-chain, not-chain: one statement per line, each a GPU call behind 200 unary minuses, 45
  lambdas or 90 `not`s (nesting without brackets);
- implicit-concat: one statement, a GPU call beside an implicit concatenation of string literals, one per line.
- deep-string: one statement per line, a GPU call with a 250-byte string argument inside 35 calls (the estimate
  counts a string literal as its quotes at each level: this shape measures that it may).

Run:  PYTHONPATH=. .venv/bin/python benchmarks/translate_memory.py [--sizes 30000 250000 1000000]
      [--shapes huge-call ...] [--max-mb 3000] [--json F]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

G = "torch.cuda.current_device()"


def _repeat(head: str, unit, tail: str, size: int) -> str:
    "`head` + units `unit(i)` until the text is about `size` bytes + `tail`."
    parts, i, n = [head], 0, len(head) + len(tail)
    while n < size:
        s = unit(i); parts.append(s); n += len(s); i += 1
    return "".join(parts) + tail


SHAPES = {   # name -> size -> the file's text
    "functions": lambda n: _repeat("import torch\n", lambda i: (
        f"def f{i}(x):\n    y = torch.cuda.current_device()\n    if torch.cuda.is_available():\n"
        f"        x = x.cuda()\n    return x + {i}\n\n"), "", n),
    "call-per-line": lambda n: _repeat("import torch\n", lambda i: "torch.cuda.synchronize()\n", "", n),
    "huge-call": lambda n: _repeat("import torch\nx = f(\n", lambda i: f"    {G},\n", ")\n", n),
    "huge-list": lambda n: _repeat("import torch\nx = [", lambda i: f"{G}, ", "]\n", n),
    "deep": lambda n: _repeat("import torch\n", lambda i: "x = " + "f(" * 60 + G + ")" * 60 + "\n", "", n),
    "concat": lambda n: _repeat("import torch\n", lambda i: f"x = ({G}, " + " + ".join(['"ab"'] * 150) + ")\n", "", n),
    "unary-chain": lambda n: _repeat("import torch\n", lambda i: "x = " + "-" * 200 + G + "\n", "", n),
    "lambda-chain": lambda n: _repeat("import torch\n", lambda i: "x = " + "lambda: " * 45 + G + "\n", "", n),
    "not-chain": lambda n: _repeat("import torch\n", lambda i: "x = " + "not " * 90 + G + "\n", "", n),
    "implicit-concat": lambda n: _repeat(f"import torch\nx = ({G},\n", lambda i: '     "abcdefgh"\n', ")\n", n),
    "deep-string": lambda n: _repeat("import torch\n", lambda i: "x = " + "f(" * 35 + G.replace("()", '("' + "a" * 250 + '")')
                                     + ")" * 35 + "\n", "", n),
}

CHILD = """
import ctypes, gc, json, sys
from omni_npu_port.translate.engine import translate_source
from omni_npu_port.translate.rules import compile_rules
def status(key): return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
rules = compile_rules(sys.argv[2]); data = open(sys.argv[1], "rb").read()
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)           # memory freed so far goes back to the system
open("/proc/self/clear_refs", "w").write("5")                  # the resident peak (VmHWM) starts again from here
rss, vm = status("VmRSS:"), status("VmSize:")
t = translate_source(data, rules, sys.argv[1])
print(json.dumps({"rss": status("VmHWM:") - rss, "vm": status("VmPeak:") - vm,
                  "code": t.error.code if t.error else ("changed" if t.changed else "same")}))
"""


def measure(text: str, target: str) -> dict:
    "Peak growth of resident memory and address space of one `translate_source` run in a fresh child process."
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "m.py"; f.write_text(text)
        p = subprocess.run([sys.executable, "-c", CHILD, str(f), target], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    if p.returncode: return {"error": f"exit {p.returncode}: {p.stderr.strip()[-200:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    import ast
    from omni_npu_port.translate.engine import (PARSE_BYTES_PER_BYTE, PARSE_BYTES_PER_LEVEL, PARSE_BYTES_PER_NODE,
                                                nesting_suspect, parse_estimate)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[30_000, 250_000, 1_000_000], help="input sizes in bytes")
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    ap.add_argument("--max-mb", type=int, default=3000, help="skip a case whose estimate is over this many MiB")
    ap.add_argument("--target", default="vllm-ascend==0.18.0")
    ap.add_argument("--json", metavar="F", help="write the rows as JSON")
    args = ap.parse_args()
    print(f"peak memory per input byte of translate_source (fresh child each) against the up-front estimate "
          f"(PARSE_BYTES_PER_BYTE = {PARSE_BYTES_PER_BYTE}, PARSE_BYTES_PER_LEVEL = {PARSE_BYTES_PER_LEVEL}, "
          f"PARSE_BYTES_PER_NODE = {PARSE_BYTES_PER_NODE})")
    print("| shape | bytes | resident MiB | per byte | address space MiB | per byte | estimate per byte | outcome |\n"
          "|---|---:|---:|---:|---:|---:|---:|---|")
    rows = []
    for shape in args.shapes:
        for size in args.sizes:
            text = SHAPES[shape](size)
            data = text.encode()
            n = len(data)   # the estimate as translate_source makes it: a file nesting_suspect flags, `ast` walked
            est = parse_estimate(data, ast.parse(data) if nesting_suspect(data) else None)
            r = {"shape": shape, "bytes": n, "estimate": est}
            if est > args.max_mb << 20:
                print(f"| {shape} | {n} | | | | | {est / n:.0f} | not run: estimate {est >> 20} MiB > --max-mb |")
                continue
            r.update(measure(text, args.target)); rows.append(r)
            if "error" in r: print(f"| {shape} | {n} | | | | | {est / n:.0f} | {r['error']} |", flush=True); continue
            r["per_byte"] = round(max(r["rss"], r["vm"]) / n, 1)
            print(f"| {shape} | {n} | {r['rss'] / 2**20:.0f} | {r['rss'] / n:.0f} | {r['vm'] / 2**20:.0f} | "
                  f"{r['vm'] / n:.0f} | {est / n:.0f} | {r['code']} |", flush=True)
    done = [r for r in rows if "per_byte" in r]
    if done:
        worst = max(done, key=lambda r: r["per_byte"])
        tight = max(done, key=lambda r: max(r["rss"], r["vm"]) / r["estimate"])
        print(f"\nworst: {worst['shape']} at {worst['bytes']} bytes, {worst['per_byte']} bytes per byte; closest "
              f"to its estimate: {tight['shape']} at {tight['bytes']} bytes, "
              f"{max(tight['rss'], tight['vm']) / tight['estimate']:.0%} of it")
    if args.json: Path(args.json).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if "error" in r or max(r["rss"], r["vm"]) > r["estimate"]]
    print("estimate an upper bound on every shape: " + ("MISSED " + ", ".join(f"{r['shape']} {r['bytes']}" for r in bad)
                                                        if bad else "yes"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
