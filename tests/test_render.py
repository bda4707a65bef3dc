"""docs.render: the HTML of each result object — escaped, diagnostics beside their source lines, conflicts highlighted —
and core.display: the registry through which the result classes render themselves without importing docs."""
import importlib
import re
import sys
import types

import pytest

from omni_npu_port.core import display
from omni_npu_port.core.diagnostics import Diagnostic
from omni_npu_port.docs import render
from omni_npu_port.port.audit import Finding
from omni_npu_port.port.method import PortResult
from omni_npu_port.sources.conformance import Conformance
from omni_npu_port.translate.diagnostics import TranslateDiagnostic
from omni_npu_port.translate.engine import Translation


def rows_of(page: str) -> list[str]:
    "The table rows of a rendering, each from `<tr` to `</tr>`."
    return re.findall(r"<tr[ >].*?</tr>", page, flags=re.DOTALL)


def source_row(page: str, line: int) -> str:
    "The side-by-side row whose source (left) line number is `line`."
    hits = [r for r in rows_of(page) if re.match(rf'<tr class="\w+"><td class="ln">{line}</td>', r)]
    assert len(hits) == 1, f"{len(hits)} rows for source line {line}"
    return hits[0]


HOSTILE = '<script>alert("x")</script> & a < b'


# ------------------------------------------------------------------------------------------------ escaping
def test_text_is_escaped_everywhere_and_nothing_runs_scripts():
    t = Translation("a<b>.py", f"x = 1\ny = '{HOSTILE}'\n", f"x = 2\ny = '{HOSTILE}'\n",
                    [TranslateDiagnostic("ONP1002", HOSTILE, line=2)])
    pages = [render.html_translation(t),
             render.html_port(PortResult(f"def f():\n    return '{HOSTILE}'\n", [Diagnostic("ONP4006", HOSTILE, where="<f>")], "merge", "<f>")),
             render.html_audit([Finding("ONP4121", HOSTILE, line=3, cls="<C>", method="<m>", detail=[HOSTILE])]),
             render.html_conformance([Conformance("fc.x", "vllm", "0.18.0", HOSTILE, "changed", "changed", True, [HOSTILE])]),
             render.html_doctor({"platform": {"error": HOSTILE, "versions": {"torch": HOSTILE}}, "warnings": [HOSTILE], "sources": []}),
             render.render(object())]
    for page in pages:
        assert "<script" not in page, page[:300]
        assert HOSTILE not in page and "a<b>.py" not in page
        assert "&lt;script&gt;" in page or "&lt;object" in page
    assert "a&lt;b&gt;.py" in pages[0] and "&lt;f&gt;" in pages[1] and "&lt;C&gt;" in pages[2]


def test_tables_escape_cells_but_not_html_cells():
    t = render.table(["a", "<b>"], [["<i>x</i>", render.Html("<i>y</i>")]])
    assert "&lt;i&gt;x&lt;/i&gt;" in t and "<i>y</i>" in t and "<th>&lt;b&gt;</th>" in t
    assert repr(render.Html("<p>x</p>")) == "Html(8 characters)"     # Jupyter's plain-text twin stays short
    assert render.Html("<p>x</p>")._repr_html_() == "<p>x</p>"


# ------------------------------------------------------------------------------------------------ translation
def test_each_diagnostic_sits_on_the_row_of_its_source_line():
    src = "".join(f"line{i} = {i}\n" for i in range(1, 41))
    out = src.replace("line5 = 5", "line5 = 50").replace("line30 = 30\n", "# ONP2999: note\nline30 = 30\n")
    diags = [TranslateDiagnostic("ONP1002", "five rewritten", line=5), TranslateDiagnostic("ONP2005", "thirty: act", line=30),
             TranslateDiagnostic("ONP2020", "twenty, unchanged and far from a change", line=20),
             TranslateDiagnostic("ONP9001", "the whole file", line=0)]
    page = render.html_translation(Translation("f.py", src, out, diags))
    assert "five rewritten" in source_row(page, 5) and "thirty: act" in source_row(page, 30)
    assert "far from a change" in source_row(page, 20)               # never folded away
    assert 'class="src del">line5 = 5<' in source_row(page, 5) and 'class="src add">line5 = 50<' in source_row(page, 5)
    head = page[:page.index("<table")]
    assert "the whole file" in head                                    # a diagnostic without a line: above the table
    assert all("the whole file" not in r for r in rows_of(page))
    skips = [r for r in rows_of(page) if 'class="skip"' in r]
    assert skips and all("unchanged lines" in r for r in skips)
    assert len(rows_of(render.html_translation(Translation("f.py", src, out, diags), context=None))) == 1 + 41   # header + every row


def test_inserted_lines_have_no_source_number_and_bytes_are_decoded():
    t = Translation("b.py", b"import torch\n", b"import torch\nimport torch_npu\n", [])
    page = render.html_translation(t)
    ins = [r for r in rows_of(page) if 'class="insert"' in r]
    assert len(ins) == 1 and '<td class="ln"></td>' in ins[0] and "import torch_npu" in ins[0]


def test_diff_rows_pair_changes_and_fold_only_far_unchanged_stretches():
    rows = render.diff_rows(["a", "b", "c"], ["a", "B", "c", "d"])
    assert [r[0] for r in rows] == ["equal", "replace", "equal", "insert"]
    assert rows[1][1:] == (2, "b", 2, "B") and rows[3][1:] == (None, "", 4, "d")
    same = [f"x{i}" for i in range(100)]
    folded = render.folded(render.diff_rows(same, same), set(), 3)
    assert folded == [("skip", 100, 1, 100)]
    kept = render.folded(render.diff_rows(same, same), {50}, 2)
    assert [r[1] for r in kept if r[0] == "equal"] == [48, 49, 50, 51, 52]


# ------------------------------------------------------------------------------------------------ port
def test_conflict_regions_markers_and_fences_are_highlighted():
    code = ("class A:\n    def f(self):\n"
            "    <<<<<<< NPU base  (ONP4001 conflict)\n        x = 1 < 2\n    =======\n        x = 2\n        y = 3\n"
            "    >>>>>>> omni GPU\n"
            "        # ---------------------------------------Omni-new----------------------------------------------\n"
            "        z = 4\n"
            "        # ---------------------------------------Omni-new----------------------------------------------\n"
            "        # <<<<<<< ONP4001 conflict: NPU (kept)\n        w = 1\n        # ======= omni (commented out)\n"
            "        # w = 2\n        # >>>>>>>\n        return x\n")
    page = render.html_port(PortResult(code, [Diagnostic("ONP4001", "conflict", where="f", line=3),
                                         Diagnostic("ONP4001", "conflict", where="f", line=12)], "class", "A"))
    kinds = {int(n): k for k, n in re.findall(r'<tr class="(\w*)"><td class="ln">(\d+)</td>', page)}
    assert [kinds[n] for n in (3, 4, 5, 6, 7, 8)] == ["mark", "npu", "mark", "omni", "omni", "mark"]
    assert kinds[9] == kinds[11] == "fence" and kinds[10] == "" and kinds[17] == ""
    assert [kinds[n] for n in (12, 13, 14, 15, 16)] == ["mark", "npu", "mark", "omni", "mark"]
    assert "x = 1 &lt; 2" in page and "2 conflict(s)" in page
    assert page.count(">ONP4001</code>") == 2                           # the diagnostics table


def test_a_lone_separator_outside_a_conflict_is_plain_code():
    assert render.conflict_kinds(["x = 1", "=======", "y = 2"]) == ["", "", ""]


# ------------------------------------------------------------------------------------------------ audit, doctor, bench
def test_audit_table_puts_warnings_before_notes_and_counts_the_gate():
    fs = [Finding("ONP4101", "a note", level="info"), Finding("ONP4121", "drift", line=4, cls="N", method="m", detail=["+ x()", "+ y()"]),
          Finding("ONP4120", "pattern", cls="N", method="k")]
    page = render.html_audit(fs)
    body = page[page.index("<tbody>"):]
    assert body.index("drift") < body.index("a note") and body.index("pattern") < body.index("a note")
    assert "2 fail the CI gate" in page and "<summary>2 line(s)</summary>" in page and "+ y()" in page
    assert "3 finding(s)" in page and "onp-audit" in render.render(fs)
    assert "0 finding(s)" in render.html_audit([])


def test_doctor_report_shows_platform_warnings_and_hides_records_that_do_not_apply():
    res = [Conformance("fc.a", "vllm_ascend", "0.18.0", "m.f", "ok", "ok", True).to_dict(),
           Conformance("fc.b", "vllm_ascend", "0.18.0", "m.g", "missing", "missing", True, ["not found"]).to_dict(),
           Conformance("fc.c", "vllm_ascend", "0.18.0", None, "n/a", None, False).to_dict()]
    report = {"platform": {"backend": "cpu", "device": "cpu", "versions": {"torch": "2.13.0"}}, "warnings": ["pairing off"],
              "sources": [{"package": "vllm-ascend", "version": "0.18.0", "version_from": "source", "kind": "directory",
                           "origin": "/x", "summary": {"ok": 1, "missing": 1, "n/a": 1}, "results": res}]}
    page = render.html_doctor(report)
    assert "fc.a" in page and "fc.b" in page and "fc.c" not in page and "1 record(s) that do not hold" in page
    assert '<span class="sev sev-missing">missing</span>' in page and "warning: pairing off" in page and "2.13.0" in page
    assert "fc.c" in render.html_doctor(report, show_na=True)
    assert "onp-doctor" in render.render(report) and "onp-platform" in render.render(report["platform"])


def bench_result(graphs: bool) -> dict:
    stats = lambda p50: {"p10": p50 * 0.9, "p50": p50, "p90": p50 * 1.1, "p99": p50 * 1.3, "mean": p50, "n": 5,
                         "p50_ci": [p50 * 0.95, p50 * 1.05]}
    rows = [{"batch": b, "mode": "graph" if graphs else "eager", "reason": "" if graphs else "no graphs on cpu",
             "capture_s": 0.5 if graphs else None, "graph_pool_bytes": None, "eager_ms": stats(2.0 * b),
             "replay_ms": stats(0.5 * b) if graphs else None, "speedup": 4.0 if graphs else None,
             "parity": {"ok": b == 1, "max_abs_diff": 0.0} if graphs else None} for b in (1, 2)]
    return {"device": {"backend": "cuda" if graphs else "cpu", "device": "cuda:0" if graphs else "cpu", "supports_graphs": graphs},
            "shapes": {"preset": "small", "dtype": "float32"}, "results": rows,
            "harness": {"overhead_fraction": 0.001, "target_fraction": 0.02}, "notes": ["batch 2: <differs>"]}


def test_bench_table_has_replay_columns_only_where_graphs_were_captured():
    g, e = render.html_bench(bench_result(True)), render.html_bench(bench_result(False))
    assert "replay p50 ms" in g and "speed-up" in g and "4.00" in g and "sev-fail" in g and "sev-ok" in g
    assert "replay" not in e and "eager only: cpu has no device graphs" in e and "no graphs on cpu" in e
    assert "eager p10 ms" in e and "0.10% of the eager step" in e and "batch 2: &lt;differs&gt;" in e
    assert "eager p50 95 % CI" in e and "1.900–2.100" in e and "replay p50 95 % CI" in g and "0.475–0.525" in g
    old = bench_result(False)                                     # a result from before the intervals: no CI column
    for x in old["results"]: del x["eager_ms"]["p50_ci"], x["eager_ms"]["p10"]
    assert "95 % CI" not in render.html_bench(old) and "eager p10 ms" not in render.html_bench(old)
    assert "onp-bench" in render.render(bench_result(False))


def test_bench_plot_is_inlined_as_a_png():
    page = render.html_bench(bench_result(True), plot=True)
    assert '<img alt="benchmark plot" src="data:image/png;base64,' in page


# ------------------------------------------------------------------------------------------------ big tables
def test_big_tables_go_through_itables_only_where_installed(monkeypatch):
    seen = {}
    fake_pd = types.SimpleNamespace(DataFrame=lambda data, columns: seen.setdefault("df", (data, columns)))
    fake_it = types.SimpleNamespace(to_html_datatable=lambda df, allow_html: "<table id=itables>")
    monkeypatch.setitem(sys.modules, "pandas", fake_pd)
    monkeypatch.setitem(sys.modules, "itables", fake_it)
    rows = [["<x>", i] for i in range(render.BIG_TABLE + 1)]
    monkeypatch.setattr(render, "itables_available", lambda: False)
    assert "<table id=itables>" not in render.table(["a", "b"], rows)
    monkeypatch.setattr(render, "itables_available", lambda: True)
    assert render.table(["a", "b"], rows) == "<table id=itables>"
    assert seen["df"][0][0] == ["&lt;x&gt;", "0"]                        # escaped before itables sees it (allow_html)
    assert "<table id=itables>" not in render.table(["a", "b"], rows[:render.BIG_TABLE])
    assert "<table id=itables>" not in render.table(["a", "b"], rows, interactive=False)


# ------------------------------------------------------------------------------------------------ the registry
@pytest.mark.parametrize("key", sorted(render.RENDERERS))
def test_every_registered_renderer_names_a_real_class(key):
    module, _, name = key.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    # the registry holds a renderer for it (a notebook test run in this process may have registered its own copy)
    assert display.class_key(cls) == key and key in display.HTML_RENDERERS
    assert render.RENDERERS[key].__module__ == "omni_npu_port.docs.render"


def test_result_classes_render_themselves_through_the_registry():
    from omni_npu_port.bench.result import BenchResult
    p = PortResult("def f():\n    return 1\n", [], "merge", "f")
    assert p._repr_html_() == render.html_port(p)._repr_html_()              # as Jupyter shows it: the style inlined
    assert "_repr_html_" in vars(BenchResult)


def test_without_a_renderer_the_repr_is_used_and_providers_load_once(monkeypatch, tmp_path):
    p = PortResult("x = 1\n", [], "merge", "x")
    monkeypatch.setattr(display, "HTML_RENDERERS", {})
    monkeypatch.setattr(display, "HTML_PROVIDERS", [])
    assert p._repr_html_() is None                                      # Jupyter falls back to the plain repr
    (tmp_path / "onp_test_provider.py").write_text(
        "from omni_npu_port.core.display import register_html\n"
        "LOADS = globals().get('LOADS', 0) + 1\n"
        "register_html('omni_npu_port.port.method.PortResult', lambda r: '<p>' + r.name + '</p>')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(display, "HTML_PROVIDERS", ["onp_test_provider"])
    assert p._repr_html_() == "<p>x</p>" and display.HTML_PROVIDERS == []
    assert p._repr_html_() == "<p>x</p>" and sys.modules["onp_test_provider"].LOADS == 1
    monkeypatch.delitem(sys.modules, "onp_test_provider")


def test_importing_render_pulls_in_no_torch_or_libcst():
    import subprocess
    code = "import sys, omni_npu_port.docs.render; print(sorted(m for m in ('torch', 'libcst') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_translate_run_has_a_row_per_file_and_its_diagnostics_with_path_and_line(tmp_path):
    from omni_npu_port.translate.rules import compile_rules
    from omni_npu_port.translate.run import translate_paths
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n")
    (tmp_path / "src" / "b.py").write_text("x = '<b>'\n")
    run = translate_paths([tmp_path / "src"], compile_rules("vllm-ascend==0.18.0"), outdir=tmp_path / "out")
    page = render.html_run(run)
    rows = [r for r in rows_of(page) if "<td>" in r]
    files = [r for r in rows if "src/a.py" in r or "src/b.py" in r]
    assert len(files) == 2 and "<code>src/a.py</code>" in files[0] and "<td>out/a.py</td>" in files[0]
    assert f"paths below <code>{tmp_path}" in page and "2 file(s)" in page
    assert "<code>" + str(tmp_path / "src" / "a.py") + ":5</code>" in page      # the diagnostic's path:line, folded
    assert "<summary>" in page and "ONP1002" in page and "a device call was renamed" in page   # codes with their titles


# ------------------------------------------------------------------------------------------------ inline style
def cell_style(page: str, cls: str) -> dict:
    "The inline declarations of the first `<td class=\"{cls}...\"` of a displayed page, as a dict (the last value wins)."
    m = re.search(rf'<td class="{cls}[^"]*" style="([^"]*)"', page)
    assert m, f"no styled td.{cls}"
    return dict(d.split(":", 1) for d in m.group(1).split(";"))


def test_views_carry_their_style_inline_so_host_stylesheets_and_sanitizers_cannot_undo_it():
    "JupyterLab's td{text-align:right} and an untrusted notebook's lost <style> leave the inline style in force."
    t = Translation("f.py", "def f():\n    if x < 1:\n        torch.cuda.synchronize()\n",
                    "def f():\n    if x < 1:\n        torch.npu.synchronize()\n", [TranslateDiagnostic("ONP1002", "renamed", line=3)])
    shown = render.html_translation(t)._repr_html_()
    src = cell_style(shown, "src")
    assert src["text-align"] == "left" and src["white-space"] == "pre-wrap" and "monospace" in src["font-family"]
    assert "        torch.npu.synchronize()" in shown.replace("<wbr>", "")   # indentation kept, as text
    assert re.search(r'<table class="diff" style="[^"]*table-layout:auto;width:100%', shown)   # the cell's width
    port = render.html_port(PortResult("class A:\n" + "    x = 1  # " + "y" * 400 + "\n", [], "class", "A"))._repr_html_()
    assert cell_style(port, "src")["white-space"] == "pre-wrap" and "table-layout:auto;width:100%" in port
    num = render.table(["n"], [[3]], numeric=(0,))
    assert "text-align:right" in re.search(r'<td class=num style="([^"]*)"', render.wrap("t", num)._repr_html_()).group(1)
    # every element of a view is styled without the <style> block: strip it, as a sanitizer does
    bare = re.sub(r"<style>.*?</style>", "", shown, flags=re.S)
    assert all(' style="' in tag for tag in re.findall(r"<t[dh]\b[^>]*>", bare))


def test_inline_styles_follow_the_cascade_and_keep_an_elements_own_style():
    rules = ((".a td", "color:red;padding:1px"), ("td.b", "color:blue"), (".a .b", "color:green"), ("p", "margin:0"))
    out = render.inline_styles('<div class="a"><table><tr><td class="b" style="padding:9px">x</td><td>y</td></tr></table>'
                          '<script>if (a<b) {}</script></div>', rules)
    assert '<td class="b" style="color:green;padding:9px">x</td>' in out    # equal specificity: the later rule; own style last
    assert '<td style="color:red;padding:1px">y</td>' in out and "<script>if (a<b) {}</script>" in out


def test_the_plain_text_twin_reads_as_a_table():
    page = render.wrap("t", render.table(["file", "lines"], [["a.py", 3], ["<b>.py", 10]], numeric=(1,)))
    text = render.html_text(page)
    assert text.splitlines() == ["file | lines", "a.py | 3", "<b>.py | 10"] and "{" not in text
    from IPython.lib.pretty import pretty
    assert pretty(page) == text                                            # what Jupyter stores as text/plain


def test_views_show_paths_as_the_reader_knows_them_never_a_working_path(tmp_path, monkeypatch):
    "Shown in Jupyter, a path under the cwd reads relative, one under $HOME as `~/...`; code and stored data keep theirs."
    home, work = tmp_path / "home" / "ada", tmp_path / "work" / "checkout"
    (work / "nbs").mkdir(parents=True)
    (work / "pyproject.toml").write_text("")
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work / "nbs")
    res = [Conformance("fc.a", "vllm_ascend", "0.18.0", "m.f", "ok", "ok", True).to_dict()]
    source = lambda origin: {"package": "vllm", "version": "0.18.0", "version_from": "source", "kind": "directory",
                             "origin": str(origin), "summary": {"ok": 1}, "results": res}
    outside = tmp_path / "elsewhere" / "vllm"
    report = {"platform": {"backend": "cpu", "device": "cpu", "versions": {}}, "warnings": [],
              "sources": [source(work / "nbs" / "stack" / "vllm"), source(home / "src" / "vllm"),
                          source(work / "tests" / "vllm"), source(outside)]}
    page = render.html_doctor(report)
    shown = page._repr_html_().replace("<wbr>", "")        # the break points `soft_breaks` adds
    assert "(directory: stack/vllm)" in shown and "(directory: ~/src/vllm)" in shown
    assert "(directory: ../tests/vllm)" in shown and f"(directory: {outside})" in shown   # the checkout; elsewhere as is
    assert str(work) not in shown and str(home) not in shown and str(work) in page        # the data keeps its paths
    from IPython.lib.pretty import pretty
    assert "(directory: ~/src/vllm)" in pretty(page) and str(home) not in pretty(page)    # the text/plain twin too
    # code is never rewritten: a path in a source line stays as written
    code = render.wrap("port", render.code_table(f'ROOT = "{home}/models"\n'))
    assert f"{home}/models" in code._repr_html_().replace("<wbr>", "")
    # a folder that only starts like home (a neighbour) is not under it
    assert render.shown_path(f"{home}x/y", render.path_prefixes(home=str(home))) == f"{home}x/y"
