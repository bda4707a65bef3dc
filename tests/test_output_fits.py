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


# --- bench: parity failures explained and non-zero, progress when piped, a table of 120 columns ------------------------
import functools  # noqa: E402

import torch  # noqa: E402

from omni_npu_port.bench import harness  # noqa: E402
from omni_npu_port.bench.graph_runner import eager_replay_capture  # noqa: E402

BENCH = ["bench", "--device", "cpu", "--small", "--batch-sizes", "1,2", "--iters", "2", "--warmup", "0"]


def drifting_capture(runner, batch):
    "The CPU capture double, with a replay whose floating outputs drift by 0.5 from eager's (a broken graph)."
    cap = eager_replay_capture(runner, batch)
    replay = cap.replay
    def drifted():
        replay()
        for o in cap.outputs:
            if o.is_floating_point(): o.add_(0.5)
    cap.replay = drifted
    return cap


def bench_with(capture, monkeypatch, capsys, *extra, width=200):
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setattr("omni_npu_port.cli.bench.run_bench", functools.partial(harness.run_bench, capture=capture))
    rc = main(BENCH + list(extra))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_parity_failure_is_explained_and_exits_1(monkeypatch, capsys):
    rc, out, err = bench_with(drifting_capture, monkeypatch, capsys, "--dtype", "bfloat16")
    assert rc == 1
    fails = [l for l in err.splitlines() if "parity FAIL" in l]
    assert len(fails) == 2 and all("bfloat16" in l and f"tolerance {harness.TOLERANCES['bfloat16']:g}" in l for l in fails)
    assert all(re.search(r"output \d+ \(floating, [\d×]+\) differs by up to 0\.5", l) for l in fails), fails
    assert "batch 1" in fails[0] and "batch 2" in fails[1] and "--dtype float32" in fails[0]
    assert "FAIL" in out


def test_agreeing_replay_exits_0_and_progress_goes_to_stderr_as_lines(monkeypatch, capsys):
    rc, out, err = bench_with(eager_replay_capture, monkeypatch, capsys, "--dtype", "float32")
    assert rc == 0 and "parity FAIL" not in err
    steps = [l for l in err.splitlines() if re.match(r"omni-npu-port bench: +\d+\.\d s  ", l)]
    assert any("capturing" in l for l in steps) and any("batch 2" in l for l in steps), err
    assert "\r" not in err and "\x1b[" not in err                   # lines, no live bar


@pytest.mark.parametrize("width", [120, 200])
def test_bench_table_fits_120_columns(width, monkeypatch, capsys):
    rc, out, _ = bench_with(eager_replay_capture, monkeypatch, capsys, "--dtype", "float32", width=width)
    assert rc == 0 and "replay" in out
    assert max(map(len, out.splitlines())) <= 120, [l for l in out.splitlines() if len(l) > 120][:2]


def test_modes_explain_a_failing_mode_exit_1_and_fit_120_columns(monkeypatch, capsys):
    "bench --mode: the modes' rows (a fixture result, one row failing parity as compare_outputs reports it)."
    from omni_npu_port.bench import modes
    eager = (torch.zeros(2, 3), torch.tensor([1, 2]))
    fail = harness.compare_outputs(eager, (torch.full((2, 3), 0.3), torch.tensor([1, 2])), "bfloat16")
    ok = harness.compare_outputs(eager, eager, "bfloat16")
    rows = [modes._row("code-predictor", m, 8, p50_ms=12.345, p90_ms=23.456, compile_s=108.2 if "compiled" in m else None,
                       capture_s=1.23 if "graph" in m else None, pool_bytes=3 << 30 if "graph" in m else None,
                       parity=fail if m == "compiled" else ok, ops_per_call=1234, kernels_per_call=456.0, kernel_ms=9.876,
                       roofline_ms=1.0, over_roofline=12.3) for m in modes.MODES]
    result = {"device": {"backend": "cuda", "device": "cuda:0", "ops": "fused", "supports_graphs": True},
              "shapes": "full", "dtype": "bfloat16", "copy_bandwidth_gbs": 2000.0, "rows": rows}
    monkeypatch.setattr(modes, "run_modes", lambda **kw: result)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(BENCH + ["--mode", "all"]) == 1
    out, err = capsys.readouterr()
    assert max(map(len, out.splitlines())) <= 120 and "FAIL" in out
    [line] = [l for l in err.splitlines() if "parity FAIL" in l]
    assert "code-predictor / compiled / batch 8" in line and "up to 0.3" in line and "tolerance 0.0625" in line


def test_modes_on_cpu_show_progress_lines_and_exit_0(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["bench", "--device", "cpu", "--small", "--batch-sizes", "1", "--iters", "1", "--warmup", "0",
                 "--mode", "eager,graph", "--dtype", "float32"]) == 0
    out, err = capsys.readouterr()
    assert any(re.match(r"omni-npu-port bench: +\d+\.\d s  code-predictor: eager", l) for l in err.splitlines()), err
    assert max(map(len, out.splitlines())) <= 120 and "no device graphs" in " ".join(out.split())
