"""Throughput of `omni-npu-port translate` beside a regex baseline in the style of `torch.utils.hipify`.

Both run, in one process, over every .py file of a large real tree: the vLLM-Omni 0.16.0 and vllm-ascend
0.18.0 wheels (read from ~/.cache/omni-npu-port/pkgs; else `pip download --no-deps`). Files are read into
memory first, so both sides measure translation, not disk I/O. Nothing is written.

The baseline is what hipify-python does: one regex built from a trie of every GPU name in the mapping
(here the catalog's GPU symbols, their leaves and the renamed keywords), applied with `re.sub` and a
dictionary lookup to every file, whether it mentions a GPU name or not. It has no notion of scope,
strings or comments; it is the speed bar, not a quality bar.

The headline is one process. A second row runs N processes (`translate -j N`; N defaults to the CPU count,
which is what the CLI does by default; `--jobs 1` drops the row); `--whole` adds a
row for translating every pre-filtered file whole (`translate_source(..., chunks=False)`, the path taken
before statement chunking; slow). `--verify` checks, before timing, that chunked and whole-file translation
agree byte for byte (output and every diagnostic) on every pre-filtered file of the tree plus vllm 0.15.0's
wheel, for three targets (about a minute). `--digest FILE` checks a change byte for byte: over every file of the
same set and targets it takes a SHA-256 of each translation (output, every diagnostic, the error, whether it was
parsed); FILE absent, it writes them (before the change), present, it compares and lists the files that differ.

`--derived` adds a row for the translator as the CLI runs it: with the derived rules on (`rules.derived`,
translate.derived; they need the target's sources in the package cache).

The "floor" rows time what a translation of this design cannot skip: the pre-filter over every file, and
CPython's `symtable` (its cheapest whole-file syntax check) over each file the translator changes.

Like with like: the one-process rows are CPU time of this process (`time.process_time`), not wall time, so the
load other processes put on a shared machine does not count against either side; the regex and the translator
run in alternating rounds (regex, translator, regex, ...), best of `--repeat` each, so a slow stretch hits both.
Both read the same bytes from memory, fresh each round: the translator keeps nothing from one file or round to
the next but what it derives from the rules (the compiled rule set, its pre-filter tables and chunk plan, built on
the first file and reused, as in a CLI run); no translation is cached by content in these rows (the cold figure).

The "kept" rows are the CLI's kept translations (`translate.kept`, issue 33), in a fresh temporary cache folder, CPU
time again, in alternating rounds with the regex: "cold, keeping" is a first run that also writes each entry; "warm"
a second run over the same bytes (every file answered from its entry, a quiet one from the quiet set); "one file
edited" a run where one changed file's bytes differ (a new edit each round: that file alone is translated anew).
Each warm translation is compared, byte for byte (output, every diagnostic, error, parsed, encoding), with the fresh
one: a difference fails the run. `--verify` makes the same comparison over its whole set and three targets. The `-j N` row is wall time (its
work runs in other processes), and so is the regex time its ratio is taken against (timed again beside it).
`--phases` adds the CPU time of each phase of the one-process run (each timed in place, best of `--repeat`):
where the translator's time goes.

`--cold` times the CLI's cold run with the derived rules on, as `translate --check --no-cache` runs it: each round a
fresh process (a process keeps what its index answered, so only a new one is cold), CPU time of the translation in it
(imports and reading the tree aside), no translation kept; "target kept" with a temporary judge cache that an untimed
first run filled (the target's index and its answers, as any run after the first finds them), "nothing kept" with an
empty one each round. `--cold DIR` also times an earlier checkout of this code (e.g. `git archive` of a commit) the
same way, its own judge cache, in the same alternating rounds, so before and after are measured side by side.

Run:  .venv/bin/python benchmarks/translate_speed.py [--repeat 5] [--target vllm-ascend==0.18.0] [--jobs 2] [--whole]
      [--verify] [--digest FILE] [--derived] [--phases] [--cold [DIR]]
Target (issue 33): translator throughput >= the baseline's (1.0), one process.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import symtable
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omni_npu_port.core.catalog import CATALOG  # noqa: E402
from omni_npu_port.translate.engine import compile_rules, might_apply, translate_source  # noqa: E402
from omni_npu_port.translate.run import translate_many  # noqa: E402
from omni_npu_port.translate.kept import KeptFiles  # noqa: E402
from omni_npu_port.core.io import claim_cache  # noqa: E402

CACHE = Path.home() / ".cache" / "omni-npu-port" / "pkgs"
WHEELS = [("vllm_omni-0.16.0-*.whl", "vllm-omni==0.16.0"), ("vllm_ascend-0.18.0-*.whl", "vllm-ascend==0.18.0")]


def wheel(pattern: str, spec: str) -> Path:
    found = sorted(CACHE.glob(pattern))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(CACHE), spec], check=True)
        found = sorted(CACHE.glob(pattern))
    return found[0]


def load_tree() -> list[tuple[str, bytes]]:
    files = []
    for pattern, spec in WHEELS:
        z = zipfile.ZipFile(wheel(pattern, spec))
        files += [(f"{spec}/{n}", z.read(n)) for n in z.namelist() if n.endswith(".py")]
    return files


TARGETS = ("vllm-ascend==0.18.0", "vllm-ascend==0.13.0", "vllm-ascend==main")


def with_vllm(files):
    "The tree plus every .py file of vllm 0.15.0's archive."
    from omni_npu_port.sources.fetch import fetch_package
    path = fetch_package("vllm==0.15.0")           # the smallest archive PyPI has, cached
    if path.suffix == ".whl":
        z = zipfile.ZipFile(path)
        files = files + [(f"vllm==0.15.0/{n}", z.read(n)) for n in z.namelist() if n.endswith(".py")]
    else:
        import tarfile
        with tarfile.open(path) as t:
            files = files + [(f"vllm==0.15.0/{m.name}", t.extractfile(m).read()) for m in t.getmembers()
                             if m.isfile() and m.name.endswith(".py")]
    return files


def same(t) -> tuple:
    "All of a translation that a run reports or writes."
    return (t.output, [d.to_dict() for d in t.diagnostics], t.error and t.error.to_dict(), t.parsed, t.encoding)


def kept_folder(root: Path) -> KeptFiles:
    "Kept translations in a new fingerprint-like folder of a claimed cache root under `root`."
    return KeptFiles(Path(tempfile.mkdtemp(dir=claim_cache(root, "translations"), prefix="")) / "kept")


def verify(files) -> int:
    """Chunked vs whole-file translation on every pre-filtered file (plus vllm 0.15.0), three targets; and every file's
    kept translation (a second run through `translate.kept`) vs its fresh one: the number that differ."""
    files, bad, root = with_vllm(files), 0, Path(tempfile.mkdtemp(prefix="onp-kept-verify-"))
    try:
        for target in TARGETS:
            rules = compile_rules(target)
            cand = [(n, d) for n, d in files if might_apply(rules, d)]
            for name, data in cand:
                a, b = translate_source(data, rules, name), translate_source(data, rules, name, chunks=False)
                if (a.output, [d.to_dict() for d in a.diagnostics], a.error is None) != \
                   (b.output, [d.to_dict() for d in b.diagnostics], b.error is None):
                    bad += 1; print(f"  differs: {target} {name}")
            print(f"verify {target}: {len(cand)} pre-filtered files, chunked and whole-file translation agree on "
                  f"{len(cand) - bad}")
            k, was = kept_folder(root), bad
            for name, data in files: k.translate(data, rules, name)
            k.finish()
            for name, data in files:
                if same(k.translate(data, rules, name)) != same(translate_source(data, rules, name)):
                    bad += 1; print(f"  kept differs: {target} {name}")
            print(f"verify {target}: {len(files)} files, {k.hits} answered from kept entries; kept and fresh "
                  f"translation agree on {len(files) - (bad - was)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return bad


def digest(files, path: Path) -> int:
    """Write (path absent) or compare (present) a SHA-256 per target and file of each translation (output, every
    diagnostic, the error) and whether it was parsed: the number whose translation differs (parsing is counted apart)."""
    import hashlib, json
    got = {}
    for target in TARGETS:
        rules = compile_rules(target)
        for name, data in with_vllm(files):
            t = translate_source(data, rules, name)
            key = repr((t.output, [d.to_dict() for d in t.diagnostics], t.error and t.error.to_dict()))
            got[f"{target} {name}"] = [hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest(), t.parsed]
    if not path.exists():
        path.write_text(json.dumps(got, indent=0, sort_keys=True))
        print(f"digest: {len(got)} translations written to {path}"); return 0
    want = json.loads(path.read_text())
    bad = sorted(k for k in want.keys() | got.keys() if (want.get(k) or [None])[0] != (got.get(k) or [None])[0])
    parsed = {k: (want[k][1], got[k][1]) for k in want.keys() & got.keys() if want[k][1] != got[k][1]}
    for k in bad[:50]: print(f"  differs: {k}")
    print(f"digest: {len(got)} translations, {len(got) - len(bad)} the same as {path}, {len(bad)} differ; "
          f"parsed before, not now: {sum(a and not b for a, b in parsed.values())}; "
          f"parsed now, not before: {sum(b and not a for a, b in parsed.values())}")
    return len(bad)


def kept_rows(files, rules, regex, fresh: dict, repeat: int, root: Path, label: str = "") -> tuple[float, int]:
    """Print the kept-translation rows (CPU s, each alternating with the regex): cold while keeping, warm, one file
    edited. (warm ratio to the regex, the number of warm translations that differ from `fresh`)."""
    lines, made = sum(d.count(b"\n") for _, d in files), []
    def cold():
        made.append(kept_folder(root))
        out = [made[-1].translate(d, rules, n) for n, d in files]
        made[-1].finish()   # as a CLI run ends: the quiet files' keys kept, the folder bounded
        return out
    (t_rc, _), (t_cold, _) = alternating([regex, cold], repeat)
    k = made[-1]
    hits0, quiet0 = k.hits, k.quiet_hits
    (t_rw, _), (t_warm, warm) = alternating([regex, lambda: [k.translate(d, rules, n) for n, d in files]], repeat)
    hits, quiet = (k.hits - hits0) // repeat, (k.quiet_hits - quiet0) // repeat
    bad = [n for (n, _), t in zip(files, warm) if same(t) != same(fresh[n])]
    for n in bad[:20]: print(f"  kept differs from fresh: {n}")
    edited, rounds, written = next(i for i, (n, _) in enumerate(files) if fresh[n].changed), iter(range(10**9)), []
    def one_edit():
        items = list(files)
        n, d = items[edited]
        items[edited] = (n, d + f"# edit {next(rounds)}\n".encode())
        before = k.written
        out = [k.translate(d, rules, n) for n, d in items]
        k.finish()
        written.append(k.written - before)
        return out
    (t_re, _), (t_e, _) = alternating([regex, one_edit], repeat)
    print(f"kept translations{label} (translate.kept: CPU s, each row alternating with the regex):")
    print(f"{'  cold, keeping each result':34}{t_cold:9.3f}{lines / t_cold:12,.0f}   {made[0].written} entries "
          f"written   (ratio {t_rc / t_cold:.2f} to the regex's {t_rc:.3f} s)")
    print(f"{'  warm: the same tree again':34}{t_warm:9.3f}{lines / t_warm:12,.0f}   {hits} files from entries, "
          f"{quiet} from the quiet set, {len(bad)} differ from the fresh run   "
          f"(ratio {t_rw / t_warm:.2f} to {t_rw:.3f} s)")
    print(f"{'  warm, one file edited':34}{t_e:9.3f}{lines / t_e:12,.0f}   {files[edited][0].split('/')[-1]} "
          f"translated anew ({max(written)} entry written a round)   (ratio {t_re / t_e:.2f} to {t_re:.3f} s)")
    return t_rw / t_warm, len(bad)


def hipify_style_regex():
    """The mapping and the trie-built regex, as torch.utils.hipify.hipify_python builds them."""
    mapping = {}
    for p in CATALOG:
        if p.gpu_symbol and p.npu_symbol and p.kind in ("import", "rename", "class-swap"):
            mapping[p.gpu_symbol] = p.npu_symbol
            mapping.setdefault(p.gpu_symbol.rsplit(".", 1)[-1], p.npu_symbol.rsplit(".", 1)[-1])
        for k, v in p.rename.items(): mapping[k] = v
    try:
        from torch.utils.hipify.hipify_python import Trie  # the trie hipify uses for its big regex
        trie = Trie()
        for k in mapping: trie.add(k)
        alternation = trie.export_to_regex()
    except Exception:
        alternation = "|".join(map(re.escape, sorted(mapping, key=len, reverse=True)))
    rx = re.compile(rf"(?<=\W)({alternation})(?=\W)")
    return rx, mapping


def run_regex(files, rx, mapping):
    n = 0
    for _, data in files:
        text = data.decode("utf-8", errors="replace")
        out = rx.sub(lambda m: mapping[m.group(0)], text)
        n += out != text
    return n


def run_translator(files, rules, **kw):
    changed = parsed = failed = 0
    for name, data in files:
        t = translate_source(data, rules, name, **kw)
        changed += t.changed; parsed += t.parsed; failed += t.error is not None
    return changed, parsed, failed


def run_pool(files, rules, jobs):
    ts = translate_many([(d, n) for n, d in files], rules, jobs=jobs)
    return sum(t.changed for t in ts), sum(t.parsed for t in ts), sum(t.error is not None for t in ts)


def best(fn, repeat, clock=time.perf_counter):
    times, res = [], None
    for _ in range(repeat):
        t0 = clock(); res = fn(); times.append(clock() - t0)
    return min(times), res


def alternating(fns, repeat):
    "[(best CPU seconds, result)] of each of `fns`, run in alternating rounds (a slow stretch hits every side)."
    times, res = [[] for _ in fns], [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time(); res[i] = fn(); times[i].append(time.process_time() - t0)
    return [(min(t), r) for t, r in zip(times, res)]


# the phases of one translation, as (label, module, attribute): each is timed where it is called (CPU, inclusive)
PHASES = [("pre-filter (every file)", "engine", "might_apply"), ("nesting guard", "engine", "nesting_check"),
          ("memory guard", "engine", "_memory_check"), ("scanner: select_statements", "chunking", "select_statements"),
          ("  of which cut_function", "chunking", "cut_function"), ("  of which _find_hits", "chunking", "_find_hits"),
          ("libcst parse of the chunks", "chunking.cst", "parse_module"),
          ("rules, edits, positions: translate_module", "chunking", "translate_module"),
          ("  of which the rules' traversal", "cst_fast.BatchVisitor", "run"),
          ("splicing the output", "chunking.ChunkLayout", "output"),
          ("symtable: python_rejects", "engine", "python_rejects")]


def phases(files, rules, repeat):
    "[(label, best CPU seconds)] of each phase of `run_translator(files, rules)`, and the best total."
    import importlib, types
    from collections import Counter
    spent, undo = Counter(), []
    def timed(label, fn):
        def wrapper(*a, **k):
            t0 = time.process_time()
            try: return fn(*a, **k)
            finally: spent[label] += time.process_time() - t0
        return wrapper
    for label, where, name in PHASES:
        mod, _, attr = where.partition(".")
        owner = importlib.import_module(f"omni_npu_port.translate.{mod}")
        for a in attr.split(".") if attr else []:
            owner = getattr(owner, a)
        if isinstance(owner, types.ModuleType) and owner.__name__ == "libcst":   # chunking's own view of libcst
            chunking = importlib.import_module("omni_npu_port.translate.chunking")
            view = types.SimpleNamespace(**{k: getattr(owner, k) for k in dir(owner) if not k.startswith("__")})
            setattr(view, name, timed(label, getattr(owner, name)))
            undo.append((chunking, "cst", owner)); chunking.cst = view; continue
        undo.append((owner, name, getattr(owner, name))); setattr(owner, name, timed(label, getattr(owner, name)))
    try:
        rows, total = None, None
        for _ in range(repeat):
            spent.clear(); t0 = time.process_time(); run_translator(files, rules); t = time.process_time() - t0
            if total is None or t < total: total, rows = t, dict(spent)
    finally:
        for owner, name, was in reversed(undo): setattr(owner, name, was)
    return [(label, rows.get(label, 0.0)) for label, _, _ in PHASES], total


COLD_CHILD = """
import sys, time, zipfile
sys.path.insert(0, sys.argv[1])
from omni_npu_port.translate.engine import compile_rules, translate_source
from omni_npu_port.port.derived_check import kept_index
files = []
for spec, path in zip(sys.argv[3::2], sys.argv[4::2]):
    z = zipfile.ZipFile(path)
    files += [(f"{spec}/{n}", z.read(n)) for n in z.namelist() if n.endswith(".py")]
rules = compile_rules(sys.argv[2]); rules.derived = True; rules.index_source = kept_index   # as the CLI sets them
t0 = time.process_time()
for name, data in files: translate_source(data, rules, name)
try: from omni_npu_port.translate.derived import keep_learned
except ImportError: keep_learned = None   # an earlier checkout: it keeps no answers
if keep_learned: keep_learned(rules)
print(time.process_time() - t0)
"""


def cold_run(code: Path, target: str, judge: Path) -> float:
    "CPU seconds of one cold translation of the tree by the code at `code`, in a fresh process, `judge` its cache."
    args = [a for pattern, spec in WHEELS for a in (spec, str(wheel(pattern, spec)))]
    env = {**os.environ, "OMNI_NPU_PORT_JUDGE_CACHE": str(judge)}
    out = subprocess.run([sys.executable, "-c", COLD_CHILD, str(code), target, *args], env=env, check=True,
                         capture_output=True, text=True, cwd=code)
    return float(out.stdout.split()[-1])


def cold_rows(files, rx, mapping, target: str, repeat: int, before: Path | None) -> None:
    "Print the CLI's cold rows (derived rules on; each round fresh processes, alternating with the regex)."
    lines, here = sum(d.count(b"\n") for _, d in files), Path(__file__).resolve().parents[1]
    root = Path(tempfile.mkdtemp(prefix="onp-cold-bench-"))
    sides = [("this code, target kept", here, root / "kept"), ("this code, nothing kept", here, None)]
    if before is not None: sides.insert(0, (f"{before.name}, target kept", before.resolve(), root / "before"))
    try:
        for _, code, judge in sides:
            if judge is not None: cold_run(code, target, judge)   # the first run: it keeps the target's index
        times = [[] for _ in range(len(sides) + 1)]
        for r in range(repeat):
            t0 = time.process_time(); run_regex(files, rx, mapping); times[0].append(time.process_time() - t0)
            for i, (_, code, judge) in enumerate(sides):
                times[i + 1].append(cold_run(code, target, judge or root / f"empty{r}-{i}"))
        t_re = min(times[0])
        print(f"the CLI's cold run, derived rules on (CPU s of the translation, each round fresh processes; regex "
              f"{t_re:.3f} s in the same rounds):")
        for (label, _, _), ts in zip(sides, times[1:]):
            print(f"  {label:40}{min(ts):9.3f}{lines / min(ts):12,.0f}   (ratio {t_re / min(ts):.3f}; rounds "
                  f"{', '.join(f'{t:.2f}' for t in ts)})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", default="vllm-ascend==0.18.0")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="also time N processes (default: the CPU count, as the CLI)")
    ap.add_argument("--whole", action="store_true", help="also time whole-file translation (no chunks; slow)")
    ap.add_argument("--verify", action="store_true", help="first check chunked == whole-file translation (about a minute)")
    ap.add_argument("--derived", action="store_true", help="also time the derived rules on, as the translate CLI runs")
    ap.add_argument("--phases", action="store_true", help="also print the CPU time of each phase of the translator")
    ap.add_argument("--cold", nargs="?", const="", metavar="DIR",
                    help="time the CLI's cold run (derived rules on) in fresh processes; DIR: an earlier checkout too")
    ap.add_argument("--digest", type=Path, metavar="FILE",
                    help="write (absent) or compare (present) every translation's SHA-256 (before/after a change), then stop")
    args = ap.parse_args(argv)
    files = load_tree()
    if args.digest: return 1 if digest(files, args.digest) else 0
    if args.verify and verify(files): return 1
    if args.cold is not None:
        rx, mapping = hipify_style_regex()
        cold_rows(files, rx, mapping, args.target, args.repeat, Path(args.cold) if args.cold else None)
        return 0
    lines = sum(d.count(b"\n") for _, d in files)
    mb = sum(len(d) for _, d in files) / 1e6
    rules = compile_rules(args.target)
    rx, mapping = hipify_style_regex()
    run_translator(files[:1], rules)   # the rule set's tables (pre-filter, chunk plan) are built once, as in a CLI run
    (t_re, n_re), (t_tr, (changed, parsed, failed)) = alternating(
        [lambda: run_regex(files, rx, mapping), lambda: run_translator(files, rules)], args.repeat)
    t_pf, passed = best(lambda: sum(might_apply(rules, d) for _, d in files), args.repeat, time.process_time)
    pl = sum(d.count(b"\n") for _, d in files if might_apply(rules, d))
    fresh = {name: translate_source(data, rules, name) for name, data in files}
    out = {name: t.changed for name, t in fresh.items()}
    changed_files = [(n, d) for n, d in files if out[n]]
    t_st, _ = best(lambda: [symtable.symtable(d, n, "exec") for n, d in changed_files], args.repeat, time.process_time)
    print(f"tree: {len(files)} .py files, {lines} lines, {mb:.1f} MB (vllm-omni 0.16.0 + vllm-ascend 0.18.0)")
    print(f"{'':34}{'CPU s':>9}{'lines/s':>12}   (one process: CPU time, regex and translator in alternating rounds)")
    print(f"{'regex baseline (hipify style)':34}{t_re:9.3f}{lines / t_re:12,.0f}   {n_re} files changed")
    print(f"{'omni-npu-port translate':34}{t_tr:9.3f}{lines / t_tr:12,.0f}   {changed} files changed, "
          f"{parsed} parsed, {failed} skipped")
    print(f"{'  of which the text pre-filter':34}{t_pf:9.3f}{lines / t_pf:12,.0f}   {passed} files ({pl} lines) passed it")
    print(f"{'  floor: pre-filter + symtable':34}{t_pf + t_st:9.3f}{lines / (t_pf + t_st):12,.0f}   symtable alone "
          f"{t_st:.3f} s on the {len(changed_files)} changed files   (ratio {t_re / (t_pf + t_st):.2f})")
    root = Path(tempfile.mkdtemp(prefix="onp-kept-bench-"))
    try:
        warm_ratio, kept_bad = kept_rows(files, rules, lambda: run_regex(files, rx, mapping), fresh, args.repeat, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.jobs > 1:
        # wall time on both sides: the pool's work runs in other processes (the regex timed again, just before)
        (t_rw, _), (t_j, (changed_j, _, failed_j)) = [
            best(lambda: run_regex(files, rx, mapping), args.repeat),
            best(lambda: run_pool(files, rules, args.jobs), args.repeat)]
        print(f"{f'  same, {args.jobs} processes (wall)':34}{t_j:9.3f}{lines / t_j:12,.0f}   "
              f"{changed_j} files changed, {failed_j} skipped"
              f"   (ratio {t_rw / t_j:.2f} to the regex's {t_rw:.3f} s wall)")
    if args.derived:
        with_derived = compile_rules(args.target)
        with_derived.derived = True
        run_translator(files[:1], with_derived)   # the target's sources are read once per process, not timed
        t_d, (changed_d, _, _) = best(lambda: run_translator(files, with_derived), args.repeat, time.process_time)
        print(f"{'  derived rules on (as the CLI)':34}{t_d:9.3f}{lines / t_d:12,.0f}   {changed_d} files changed"
              f"   (ratio {t_re / t_d:.2f})")
        fresh_d = {name: translate_source(data, with_derived, name) for name, data in files}
        root = Path(tempfile.mkdtemp(prefix="onp-kept-bench-"))
        try:
            _, bad_d = kept_rows(files, with_derived, lambda: run_regex(files, rx, mapping), fresh_d, args.repeat,
                                 root, ", derived rules on")
            kept_bad += bad_d
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if args.whole:
        t_w, (changed_w, parsed_w, _) = best(lambda: run_translator(files, rules, chunks=False), 1, time.process_time)
        print(f"{'  whole files (chunks=False)':34}{t_w:9.3f}{lines / t_w:12,.0f}   {changed_w} files changed, "
              f"{parsed_w} parsed   (ratio {t_re / t_w:.2f})")
    if args.phases:
        rows, total = phases(files, rules, args.repeat)
        print(f"phases of the one-process run (CPU s, each timed in place; total {total:.3f}, regex {t_re:.3f}):")
        for label, t in rows:
            print(f"  {label:44}{t:7.3f}  {t / total:6.1%}")
    ratio = (lines / t_tr) / (lines / t_re)
    print(f"translator / baseline throughput, one process (the baseline is one process): {ratio:.2f} (target >= 1.0) -> "
          f"{'OK' if ratio >= 1 else 'BELOW TARGET'}")
    print(f"translator / baseline throughput, warm (kept translations, second run; not the cold figure): "
          f"{warm_ratio:.2f}; kept == fresh: {'OK' if not kept_bad else f'{kept_bad} DIFFER'}")
    if args.jobs > 1:
        print(f"translator / baseline throughput, {args.jobs} processes (the CLI's default -j here; wall time): "
              f"{t_rw / t_j:.2f} -> {'OK' if t_rw / t_j >= 1 else 'BELOW TARGET'}")
    return 1 if kept_bad else 0


if __name__ == "__main__":
    sys.exit(main())
