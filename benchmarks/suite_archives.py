#!/usr/bin/env python
"""What the test suite reads from an EMPTY package cache, compared with the list set-up fetches (tests/archives.py).

Runs each test file that can read a release archive (its text names a reader: `release_source`, `fetch_package`,
`port_release`, ...), one by one and in one process each (no xdist), with all four caches moved to a fresh folder;
a `sitecustomize` audit hook in the children records every archive under the package cache that is opened. Then:
the archives downloaded (count, MB) and each file's wall time; the archives opened that the list lacks (a test the
list lags) and the ones listed that nothing opened. Never touches ~/.cache/omni-npu-port. Slow (minutes; downloads
about a GB on the first file that reads each release): run it alone, narrowly with `--files`.
Exit status: 0 when what was opened equals the list, 1 otherwise.
Usage: python benchmarks/suite_archives.py [--root DIR] [--files tests/test_x.py ...] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READERS = re.compile(r"release_source|real_release_port|port_release|fetch_release|open_release|fetch_package|"
                     r"cached_release|torch_npu_wheel|check_ops|--release|cached_trees|omni_releases|previous_release|"
                     r"release_gap_fill|vllm-omni==|vllm-ascend==")
HOOK = '''import os, sys
_log, _root = os.environ.get("ONP_ARCHIVE_LOG"), os.environ.get("OMNI_NPU_PORT_CACHE")
if _log and _root:
    _root, _seen = os.path.realpath(_root) + os.sep, set()
    def _hook(event, args):
        if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)): return
        try: p = os.path.realpath(os.fsdecode(args[0]))
        except Exception: return
        if p.startswith(_root) and p.endswith((".whl", ".tar.gz")) and p not in _seen:
            _seen.add(p)
            with open(_log, "a") as f:
                f.write(os.path.basename(p) + "\\t" + os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0] + "\\n")
    sys.addaudithook(_hook)
'''


def reader_files() -> list[str]:
    "The test files whose text names a reader of release archives."
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    return [str(p.relative_to(ROOT)) for p in tests if READERS.search(p.read_text())]


def archives(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*") if p.name.endswith((".whl", ".tar.gz"))} if folder.is_dir() else set()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="a new or empty folder for the caches (default: a fresh temporary one)")
    ap.add_argument("--files", nargs="+", help="the test files to run (default: every file that names a reader)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    root = Path(args.root or tempfile.mkdtemp(prefix="onp-suite-archives-"))
    if root.exists() and any(root.iterdir()): ap.error(f"{root} is not empty: give a new or empty folder")
    (root / "hook").mkdir(parents=True)
    (root / "hook" / "sitecustomize.py").write_text(HOOK)
    pkgs, log = root / "pkgs", root / "opened.tsv"
    env = {**os.environ, "OMNI_NPU_PORT_CACHE": str(pkgs), "OMNI_NPU_PORT_SDIST_CACHE": str(root / "sdist-py"),
           "OMNI_NPU_PORT_TRANSLATION_CACHE": str(root / "translations"),
           "OMNI_NPU_PORT_JUDGE_CACHE": str(root / "judge-src"), "ONP_ARCHIVE_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(root / "hook")])}
    rows = []
    for f in args.files or reader_files():
        before, t0 = archives(pkgs), time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", f, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                           check=False, cwd=ROOT, env=env, capture_output=True, text=True)
        said = (r.stdout.strip().splitlines() or [""])[-1]
        rows.append({"file": f, "seconds": round(time.monotonic() - t0, 1), "rc": r.returncode, "result": said,
                     "downloaded": sorted(archives(pkgs) - before)})
        print(f"{f}: {rows[-1]['seconds']} s, {said}; downloaded {len(rows[-1]['downloaded'])}", flush=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from archives import suite_archives, unlisted
    opened = sorted({line.split("\t")[0] for line in log.read_text().splitlines()} if log.is_file() else set())
    got = sorted(archives(pkgs))
    size = sum((pkgs / n).stat().st_size for n in got)
    listed = suite_archives()
    lacking = [n for n in opened if unlisted(n)]
    unread = [f"{s} ({k or 'either'})" for s, k in listed if not any(not unlisted(n, [(s, k)]) for n in opened)]
    out = {"archives": len(got), "MB": round(size / 1e6, 1), "seconds": round(sum(r["seconds"] for r in rows), 1),
           "opened": opened, "listed_not_opened": unread, "opened_not_listed": lacking, "files": rows}
    print(f"downloaded {len(got)} archives, {size / 1e6:,.1f} MB; opened {len(opened)}; listed {len(listed)}; "
          f"opened but not listed: {lacking or 'none'}; listed but not opened: {unread or 'none'}")
    if args.json: Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if not lacking and not unread else 1


if __name__ == "__main__":
    sys.exit(main())
