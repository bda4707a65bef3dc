"""Regenerate the JupyterLab screenshots the docs show (nbs/images/jupyterlab-*.png) from a fresh run (issue 34).

    python scripts/screenshots.py [--keep DIR]

Runs `tests/test_workbook.py::test_every_view_reads_well_in_jupyterlab[trusted]` (the workbook executed offline on
the fixtures, then opened in JupyterLab in headless Chromium, every view measured) with its screenshots written to
a new temporary folder; so every count and path in them is this run's. Only when the test passes is each image the
docs reference (`images/jupyterlab-*.png` in nbs/**/*.ipynb and README.md) replaced in nbs/images/, atomically.
Exit status: 0 written; 1 the test failed (nothing replaced); 3 a referenced image was not produced, or pytest is
missing.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_workbook.py::test_every_view_reads_well_in_jupyterlab[trusted]"
REF = re.compile(r"images/(jupyterlab-[\w-]+\.png)")


def referenced(root: Path | None = None) -> list[str]:
    "The JupyterLab screenshots the docs name: `images/jupyterlab-*.png` in the notebooks and the README."
    root = root or ROOT
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "nbs").rglob("*.ipynb"))
             if ".ipynb_checkpoints" not in p.parts]
    if (root / "README.md").is_file(): texts.append((root / "README.md").read_text(encoding="utf-8"))
    return sorted({m for t in texts for m in REF.findall(t)})


def take(out: Path) -> int:
    "Run the JupyterLab test with its screenshots written to `out`; pytest's exit status."
    env = {**os.environ, "OMNI_NPU_PORT_SCREENSHOTS": str(out)}
    cmd = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"]
    print("screenshots: running", " ".join(cmd[2:]), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="take the screenshots into this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from omni_npu_port.core.io import write_atomic
    names = referenced()
    if not names:
        print("screenshots: the docs reference no images/jupyterlab-*.png; nothing to do", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="onp-shots-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        rc = take(out)
        if rc != 0:
            print(f"screenshots: {TEST} failed (exit {rc}); nbs/images/ left as it was", file=sys.stderr)
            return 1 if rc == 1 else 3
        missing = [n for n in names if not (out / n).is_file()]
        if missing:
            print(f"screenshots: the docs reference {', '.join(missing)}, which the test did not take "
                  f"(it takes {', '.join(sorted(p.name for p in out.glob('*.png')))}); nbs/images/ left as it was",
                  file=sys.stderr)
            return 3
        for n in names:
            data = (out / n).read_bytes()
            write_atomic(ROOT / "nbs" / "images" / n, data)
            print(f"screenshots: nbs/images/{n} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
