"""Figures the README and stored notebook outputs state about the code (pattern count, release list) match the code:
adding a record or a release without re-running the cell that shows it fails here, naming the place."""
import json
import re
from pathlib import Path

import pytest

from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.core.releases import RELEASES

ROOT = Path(__file__).resolve().parents[1]
COUNT = re.compile(r"(\d+) patterns in (\d+) families|Catalog\((\d+) patterns, (\d+) families\)")
SPAN = re.compile(r"from (\d[\w.]*) to (\d[\w.]*) \((\d+) releases")
FIG = re.compile(r"<!-- fig:[\w-]+ -->(.*?)<!-- /fig -->")   # docs.site's figure markers: the value between them is what a reader sees


def _texts():
    "(where, text) for the README and every stored output and markdown cell of every notebook."
    yield "README.md", FIG.sub(r"\1", (ROOT / "README.md").read_text(encoding="utf-8"))
    for nb in sorted((ROOT / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts: continue
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            where = f"{nb.relative_to(ROOT)} cell {i}"
            if c["cell_type"] == "markdown": yield where, FIG.sub(r"\1", "".join(c["source"]))
            for o in c.get("outputs", []):
                data = o.get("data", {})
                yield where, "".join(o.get("text", "")) + "".join(data.get("text/plain", "")) + "".join(data.get("text/markdown", ""))


def test_pattern_counts_stated_match_the_catalog():
    want, seen = (len(CATALOG), len(CATALOG.families())), 0
    for where, text in _texts():
        for m in COUNT.finditer(text):
            got = tuple(int(x) for x in (m[1], m[2]) if x) or tuple(int(x) for x in (m[3], m[4]))
            seen += 1
            assert got == want, f"{where} says {m[0]!r}; the catalog has {want[0]} patterns in {want[1]} families: re-run that cell"
    assert seen >= 2, "no stated pattern count found: the README and the catalog notebook show one"


def test_release_spans_stated_match_the_releases_table():
    numbered = [v for v in RELEASES.ascend if v != "main"]
    seen = 0
    for where, text in _texts():
        for m in SPAN.finditer(text):
            if m[1] not in RELEASES.ascend: continue          # another package's span (vllm, vLLM-Omni)
            seen += 1
            assert (m[1], m[2], int(m[3])) == (numbered[0], numbered[-1], len(numbered)), \
                f"{where} says {m[0]!r}; the releases table has {numbered[0]} to {numbered[-1]} ({len(numbered)} releases)"
    assert seen >= 1, "no stated release span found: the README states one"


def test_the_check_can_fail(tmp_path):
    "The checks are not vacuous: a stale figure is caught."
    stale = f"{len(CATALOG) - 1} patterns in {len(CATALOG.families())} families"
    m = COUNT.search(stale)
    assert (int(m[1]), int(m[2])) != (len(CATALOG), len(CATALOG.families()))
