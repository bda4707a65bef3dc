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


# --- bench: parity failures explained and non-zero, progress when piped, a table of 120 columns -------------------
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
    tol = f"tolerance {harness.TOLERANCES['bfloat16']:g}"
    assert len(fails) == 2 and all("bfloat16" in l and tol in l for l in fails)
    assert all(re.search(r"output \d+ \(floating, [\d×]+\) differs by up to 0\.5", l) for l in fails), fails
    assert "batch 1" in fails[0] and "batch 2" in fails[1] and "--dtype float32" in fails[0]
    assert "FAIL" in out


def test_agreeing_replay_exits_0_and_progress_goes_to_stderr_as_lines(monkeypatch, capsys):
    "The run at 200 columns: progress lines on stderr, and the table within 120 columns (a wider terminal's case)."
    rc, out, err = bench_with(eager_replay_capture, monkeypatch, capsys, "--dtype", "float32")
    assert rc == 0 and "parity FAIL" not in err
    steps = [l for l in err.splitlines() if re.match(r"omni-npu-port bench: +\d+\.\d s  ", l)]
    assert any("capturing" in l for l in steps) and any("batch 2" in l for l in steps), err
    assert "\r" not in err and "\x1b[" not in err                   # lines, no live bar
    assert "replay" in out and max(map(len, out.splitlines())) <= 120, [l for l in out.splitlines() if len(l) > 120][:2]


def test_bench_table_fits_120_columns(monkeypatch, capsys):
    "At 120 columns (at 200: the run above)."
    rc, out, _ = bench_with(eager_replay_capture, monkeypatch, capsys, "--dtype", "float32", width=120)
    assert rc == 0 and "replay" in out
    assert max(map(len, out.splitlines())) <= 120, [l for l in out.splitlines() if len(l) > 120][:2]


def test_modes_explain_a_failing_mode_exit_1_and_fit_120_columns(monkeypatch, capsys):
    "bench --mode: the modes' rows (a fixture result, one row failing parity as compare_outputs reports it)."
    from omni_npu_port.bench import modes
    eager = (torch.zeros(2, 3), torch.tensor([1, 2]))
    fail = harness.compare_outputs(eager, (torch.full((2, 3), 0.3), torch.tensor([1, 2])), "bfloat16")
    ok = harness.compare_outputs(eager, eager, "bfloat16")
    rows = [modes._row("code-predictor", m, 8, p50_ms=12.345, p90_ms=23.456,
                       compile_s=108.2 if "compiled" in m else None, capture_s=1.23 if "graph" in m else None,
                       pool_bytes=3 << 30 if "graph" in m else None, parity=fail if m == "compiled" else ok,
                       ops_per_call=1234, kernels_per_call=456.0, kernel_ms=9.876, roofline_ms=1.0, over_roofline=12.3)
            for m in modes.MODES]
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


# --- JupyterLab: no view breaks a word, trusted or not; an untrusted catalog says how to trust it ---------------------
WORDS_SPLIT = """() => [...document.querySelectorAll('.jp-OutputArea-output .onp')]
  .filter(v => !v.parentElement.closest('.onp')).map(v => {
  const walker = document.createTreeWalker(v, NodeFilter.SHOW_TEXT), split = [];
  let words = 0;
  while (walker.nextNode()) {
    const n = walker.currentNode, re = /[A-Za-z0-9_]+/g;
    for (let m; (m = re.exec(n.data));) {
      const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      const rects = [...r.getClientRects()].filter(x => x.width > 0);
      if (!rects.length) continue;   // not shown (a hidden row, a style block)
      words++;
      if (new Set(rects.map(x => Math.round(x.top))).size > 1) split.push(m[0]);
    }
  }
  const hint = v.querySelector('.trust');
  return {kind: v.className, words, split: split.slice(0, 10), hint: hint ? hint.getClientRects().length > 0 : null,
          hintText: hint ? hint.textContent : ''};
})"""


def views_notebook():
    "A notebook whose outputs are views as Jupyter stores them: a translation with long dotted names, then the catalog."
    import nbformat
    from omni_npu_port.docs.render import html_pattern_table, html_translation
    from omni_npu_port.translate.engine import translate_source
    from omni_npu_port.translate.rules import compile_rules
    gpu = ("import torch\nfrom vllm.forward_context import set_forward_context\n\n\n"
           "def execute_model(self, scheduler_output, intermediate_tensors=None):\n"
           "    with set_forward_context(attn_metadata, self.vllm_config,\n"
           "                             num_tokens=num_tokens_padded_for_cudagraph_capture):\n"
           "        self.model_runner_output_with_a_long_name.execute_model_and_sample_tokens_for_the_talker()\n"
           "        torch.cuda.synchronize()\n")
    tr = translate_source(gpu, compile_rules("vllm-ascend==0.18.0"), path="runner.py")
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": kernel})
    for view in (html_translation(tr), html_pattern_table()):
        out = nbformat.v4.new_output("display_data", data={"text/html": view._repr_html_(), "text/plain": "view"})
        nb.cells.append(nbformat.v4.new_code_cell("view", outputs=[out]))
    return nb


@pytest.fixture(scope="module")
def views_lab(jupyterlab):
    "The views notebook in the session's JupyterLab, signed (trusted) and not (untrusted)."
    import nbformat
    from nbformat.sign import NotebookNotary
    folder = jupyterlab.root / "views"
    folder.mkdir()
    nb, other = views_notebook(), views_notebook()
    NotebookNotary(data_dir=str(jupyterlab.data)).sign(nb)
    nbformat.write(nb, folder / "trusted.ipynb")
    other.cells.insert(0, nbformat.v4.new_markdown_cell("A copy nobody signed."))   # signatures are of the content
    nbformat.write(other, folder / "untrusted.ipynb")
    return jupyterlab




@pytest.mark.parametrize("which", ["trusted", "untrusted"])
def test_no_view_breaks_a_word_in_jupyterlab(views_lab, lab_page, which):
    ("In a narrow JupyterLab every word of every view sits on one line; only the untrusted catalog shows the trust "
     "hint. The views need no kernel: none starts.")
    assert lab_page.open(f"views/{which}.ipynb", 720, 900) is None
    page = lab_page.page
    page.wait_for_selector(".jp-OutputArea-output .onp-patterns", timeout=90_000)
    page.wait_for_timeout(500)
    views = page.evaluate(WORDS_SPLIT)
    assert {v["kind"].split()[-1] for v in views} == {"onp-translation", "onp-patterns"}, views
    for v in views:
        assert v["words"] > 50 and not v["split"], f"{which}: {v['kind']} breaks words: {v['split']}"
    [cat] = [v for v in views if "onp-patterns" in v["kind"]]
    assert "Trust this notebook (File > Trust Notebook)" in cat["hintText"]
    assert cat["hint"] is (which == "untrusted"), f"{which}: the hint is {'shown' if cat['hint'] else 'hidden'}"
