"""Output that fits: the catalog follows the terminal's width and never splits a word (issue 34, part 3)."""
import re

import pytest

from omni_npu_port.cli.catalog import COLUMNS, record_cells
from omni_npu_port.cli.main import main
from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.core.display import wrap_pieces

WORD = re.compile(r"[A-Za-z0-9_]+")   # a run no line may break inside


def words(text: str) -> set[str]:
    return set(WORD.findall(text))


def catalog_at(width: int, monkeypatch, capsys, *args) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["catalog", *args]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_catalog_fits_the_terminal_and_splits_no_word(width, monkeypatch, capsys):
    lines = catalog_at(width, monkeypatch, capsys)
    assert max(map(len, lines)) <= width, [l for l in lines if len(l) > width][:3]
    cells = [c for p in CATALOG for c in record_cells(p)]
    expected = words(" ".join(cells))
    shown = words("\n".join(lines))
    assert expected <= shown, sorted(expected - shown)[:10]          # every word of every record is there, whole
    fragments = shown - expected - words(" ".join(COLUMNS) + f" {len(CATALOG)} of patterns every field json GPU NPU")
    assert not fragments, sorted(fragments)[:10]                     # and nothing that is a piece of one


def test_the_check_sees_a_split_word():
    "The fragments check is not vacuous: a word cut at the line end leaves pieces that are no word of the catalog."
    cells = " ".join(c for p in CATALOG for c in record_cells(p))
    cut = [w for w in sorted(words(cells)) if len(w) > 12][0]
    shown = words(f"{cut[:5]}\n{cut[5:]}")
    assert not shown <= words(cells) or cut not in shown


def test_a_wide_terminal_gets_the_table_a_narrow_one_the_blocks(monkeypatch, capsys):
    wide = catalog_at(400, monkeypatch, capsys, "--family", "device-ops")
    assert any(all(h in l for h in COLUMNS) for l in wide)           # the header row of the table
    narrow = catalog_at(80, monkeypatch, capsys, "--family", "device-ops")
    assert not any(all(h in l for h in COLUMNS) for l in narrow) and "every field: --json" in narrow[0]
    ids = [p.id for p in CATALOG.select(family="device-ops")]
    assert [l.split(":")[0] for l in narrow if l.split(":")[0] in ids] == ids


def test_wrapping_breaks_only_between_pieces():
    sym = "vllm_ascend.ascend_forward_context.set_ascend_forward_context(attn_metadata, vllm_config, num_tokens=n)"
    for width in (30, 40, 60):   # no narrower than its longest piece, `set_ascend_forward_context(`
        lines = wrap_pieces(sym, width)
        assert all(len(l) <= width for l in lines) and "".join(lines).replace(" ", "") == sym.replace(" ", "")
        assert words("\n".join(lines)) == words(sym)
