"""The last unguarded inputs (issue 34, part 5): each case stops with one coded line naming the file (exit 2 or 3),
loses nothing, and has a fixture where the guard must fire and one where it must not."""
import ast
import contextlib
import io
import re
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main

STACK = Path(__file__).parent / "fixtures" / "generalize" / "stack"


def run(argv):
    "`main(argv)` as a shell runs it: (exit code, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def one_line(err, cmd, *words):
    "stderr is exactly one error line of `cmd`, naming every word, with no traceback."
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"omni-npu-port {cmd}: error: "), err
    for w in words: assert str(w) in err, (w, err)


# --- 1. a runner indented with tabs ---------------------------------------------------------------------------------------
def _port_stack(omni: Path, out: Path):
    from omni_npu_port.port.locate import forget_trees
    from omni_npu_port.port.release import port_release
    forget_trees()
    return port_release(str(omni), target="vllm-ascend==0.18.0", sources=(str(STACK / "vllm"), str(STACK / "vllm_ascend")),
                        out=out, history=[])


def _tabbed(text: str, mixed: bool) -> str:
    "Every four spaces of indentation a tab, or (`mixed`) the first level a tab and the rest spaces: valid Python both."
    out = []
    for l in text.split("\n"):
        body = l.lstrip(" ")
        n = len(l) - len(body)
        out.append(("\t" + " " * (n - 4) if mixed else "\t" * (n // 4) + " " * (n % 4)) + body if n >= 4 else l)
    return "\n".join(out)


def test_a_tab_indented_runner_ports_as_its_spaces_version(tmp_path):
    "The fixture stack's omni runners with tabs (mixed with spaces, as Python allows) port to the same code as with spaces."
    from omni_npu_port.port.merge import keep_side
    omni = shutil.copytree(STACK / "omni_new", tmp_path / "tabs", ignore=shutil.ignore_patterns("__pycache__"))
    for i, f in enumerate(sorted((omni / "vllm_omni" / "worker").glob("gpu*.py"))):
        t = _tabbed(f.read_text(), mixed=bool(i % 2))
        assert ast.dump(ast.parse(t)) == ast.dump(ast.parse(f.read_text())) and re.search(r"(?m)^\t", t)
        f.write_text(t)
    spaces, tabs = _port_stack(STACK / "omni_new", tmp_path / "a"), _port_stack(omni, tmp_path / "b")
    assert len(tabs.runners) == len(spaces.runners) == 4 and tabs.lost == spaces.lost == 0
    for s, t in zip(spaces.runners, tabs.runners):
        assert s.path == t.path and "\t" not in re.sub(r"(?s)'''.*?'''|\"\"\".*?\"\"\"", "", t.code)
        assert ast.dump(ast.parse(keep_side(t.code))) == ast.dump(ast.parse(keep_side(s.code)))


def test_tabs_are_read_once_as_python_reads_them_and_spaces_are_left_alone(tmp_path):
    "A module read from a source comes back with spaces for tabs (the same tree); one without tabs comes back unchanged."
    from omni_npu_port.sources.readers import open_source, read_module_file
    pkg = tmp_path / "vllm_omni"; pkg.mkdir()
    tab = "class R:\n\tdef f(self):\n\t\ts = '''a\n\tb'''\n\t\treturn s\n"
    spaced = "class R:\n  def f(self):\n    return 1  # two spaces\n"
    (pkg / "__init__.py").write_text(""); (pkg / "tab.py").write_text(tab); (pkg / "spaced.py").write_text(spaced)
    tree = open_source(str(tmp_path))
    got = tree.module_source("vllm_omni.tab")
    assert not re.search(r"(?m)^\s*\t", got.replace("\tb'''", "")) and "\tb'''" in got   # a string keeps its tab
    assert ast.dump(tree.module_ast("vllm_omni.tab")) == ast.dump(ast.parse(tab))
    assert tree.module_source("vllm_omni.spaced") == spaced and read_module_file(pkg / "spaced.py")[0] == spaced
    assert "\n        return s" in read_module_file(pkg / "tab.py")[0]
