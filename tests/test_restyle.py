"""scripts/restyle.py: ruff's fixes and formatting of the exported code, written back into the notebook cells they came
from, and an export that reproduces them (issue 34 part 6). Run on a small nbdev project this test writes."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from project_scripts import load_script

from tests.test_ruff import needs_ruff

ROOT = Path(__file__).resolve().parents[1]
restyle = load_script("scripts/restyle.py")

LONG_CALL = ("    return helper(\"a port of the talker's forward context\", "
             "\"onto the NPU model runner of vllm-ascend\", first_try, second_try, third_try)\n")


def test_relative_imports_are_made_absolute_in_their_package():
    "Top-level `from .`/`from ..` imports, one line or many, get the package's name; a function's own import stays."
    code = ("from .. import __version__\nfrom .x import (a,\n                b)\nimport os\n"
            "def f():\n    from .y import c\n")
    assert restyle.absolute_imports(code, "demo.sub") == (
        "from demo import __version__\nfrom demo.sub.x import (a,\n                b)\nimport os\n"
        "def f():\n    from .y import c\n")


def test_a_cell_splits_into_directives_code_and_trailing_blanks():
    assert restyle.split_leading("#| export\n\nx = 1\ny = 2\n\n") == ("#| export\n\n", "x = 1\ny = 2", "\n\n")
    assert restyle.split_leading("x = 1") == ("", "x = 1", "")


def test_cells_are_read_by_their_markers():
    text = ('"""doc"""\n\n# %% auto #0\n__all__ = [\'f\']\n\n# %% ../nbs/a.ipynb #c1\nimport os\n\n\n'
            "# %% ../nbs/a.ipynb #c2\ndef f(): pass\n")
    assert restyle.cells(text) == {("auto", "0"): "__all__ = ['f']", ("../nbs/a.ipynb", "c1"): "import os",
                                   ("../nbs/a.ipynb", "c2"): "def f(): pass"}
    assert [r[1:] for r in restyle.cell_rows(text)] == [("0", 4, 4), ("c1", 7, 7), ("c2", 11, 11)]
    assert list(restyle.trailing_newlines(text).values()) == [0, 1, 0]   # c1's source ends with a newline


def _cell(source: str, cell_id: str, kind: str = "code") -> dict:
    extra = {"execution_count": None, "outputs": []} if kind == "code" else {}
    return {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source.splitlines(keepends=True), **extra}


def _notebook(path: Path, cells: list[dict]):
    nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                      "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n")


def demo_project(root: Path) -> Path:
    "A two-notebook nbdev project: an unsorted import block, a regex flag alias, one long call, an example cell."
    (root / "nbs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.0.1"\n\n[tool.nbdev]\nlib_path = "demo"\nnbs_path = "nbs"\n'
        'jupyter_hooks = false\nclean_ids = true\n\n[tool.ruff]\nline-length = 120\ntarget-version = "py310"\n\n'
        '[tool.ruff.lint]\nextend-select = ["E501"]\nignore = ["RUF022"]\nunfixable = ["F401", "I001"]\n')
    _notebook(root / "nbs" / "util.ipynb", [_cell("#| default_exp util", "a0000001"),
                                            _cell("#| export\ndef helper(*args): return args", "a0000002")])
    _notebook(root / "nbs" / "core.ipynb", [
        _cell("# Core\n> the demo's core", "b0000001", "markdown"),
        _cell("#| default_exp core", "b0000002"),
        _cell("#| export\nimport re\nimport os\nfrom demo.util import helper\n", "b0000003"),   # a blank line after
        _cell("#| export\nPATTERN = re.compile('npu', re.I)\nHOME = os.sep", "b0000004"),
        _cell("#| export\ndef describe(first_try, second_try, third_try):\n" + LONG_CALL, "b0000005"),
        _cell("describe(1, 2, 3)   # an example: not exported, never touched", "b0000006")])
    return root


def _tool(name: str) -> Path:
    return Path(sys.executable).parent / name


@needs_ruff
@pytest.mark.skipif(not _tool("nbdev-export").exists(), reason="nbdev is not installed (dev extras)")
def test_restyle_fixes_the_notebooks_and_the_export_reproduces_ruff(tmp_path):
    "Imports sorted (asked for), a safe fix and a long call split land in their cells; a second run has nothing to do."
    root = demo_project(tmp_path / "demo")
    script = [sys.executable, str(ROOT / "scripts" / "restyle.py"), "--root", str(root)]
    r = subprocess.run([*script, "--sort-imports"], check=False, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    cells = {c["id"]: "".join(c["source"]) for c in json.loads((root / "nbs" / "core.ipynb").read_text())["cells"]}
    # sorted, still absolute, and the blank line ruff drops after an import block dropped in the cell too
    assert cells["b0000003"] == "#| export\nimport os\nimport re\n\nfrom demo.util import helper"
    assert cells["b0000004"].startswith("#| export\nPATTERN = re.compile('npu', re.IGNORECASE)")  # safe fix
    assert cells["b0000005"].startswith("#| export\ndef describe(") and LONG_CALL not in cells["b0000005"]
    assert max(map(len, cells["b0000005"].splitlines())) <= 120
    assert cells["b0000006"] == "describe(1, 2, 3)   # an example: not exported, never touched"
    lib = (root / "demo" / "core.py").read_text()
    assert "from .util import helper" in lib and "re.IGNORECASE" in lib
    again = subprocess.run(script, check=False, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "0 notebooks written" in again.stdout and "left 0 " in again.stdout, again.stdout


def _split_all(text: str, limit: int) -> str:
    "`text` with every line over `limit` split by the restyle step, bottom up, as the script does."
    for row in range(len(text.splitlines()), 0, -1):
        new = restyle.split_line(text, row, limit)
        if new is not None:
            assert restyle.same_values(text, new), new
            text = new
    return text


def _values(text: str) -> list:
    "Every string constant and f-string of a module, compiled: what a split must leave unchanged."
    import ast
    tree = ast.parse(text)
    return [ast.dump(n) for n in ast.walk(tree) if isinstance(n, (ast.Constant, ast.JoinedStr))]


STRINGS = '''def port(path, n):
    raise ValueError(f"{path}: the talker's forward context cannot go onto the NPU runner {n} times; pass --from")
NAMES = ["a long string in a list literal, which must be cut into parenthesized pieces (ISC004)", 2]
NOTE = "a top-level string long enough to need parentheses around its pieces, cut at word boundaries"
STEP = 1   # a trailing comment that takes this line over the limit, moved onto lines of its own above
JOINED = (
    f"{NOTE} a string already joined to the next one inside parentheses of its own, "
    "and the next one"
)
MAP = {"k": f"{{braces}} stay literal, {n!r:>{width}} is a field and the rest of this text runs on past the limit"}
'''


def test_long_strings_split_at_words_with_their_values_unchanged():
    "Strings cut after spaces (f-strings between fields only), collection items and top-level ones parenthesized."
    out = _split_all(STRINGS, 70)
    assert max(map(len, out.splitlines())) <= 70, out
    assert _values(out) == _values(STRINGS)   # the same constants, f-strings and their fields
    import ast
    assert {n.value for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Constant) and isinstance(n.value, str)} \
        == {n.value for n in ast.walk(ast.parse(STRINGS)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert 'NAMES = [("a long string' in out and 'NOTE = ("a top-level' in out   # ISC004: no bare pieces in a list
    assert 'raise ValueError(f"{path}: the' in out and "ValueError((" not in out   # a call's argument: no parentheses
    assert "{n!r:>{width}}" in out   # a replacement field is never cut
    assert "JOINED = (\n    (" not in out   # a piece of a concatenation gets no parentheses of its own
    assert "# a trailing comment" in out.splitlines()[out.splitlines().index("STEP = 1") - 2]
    piece_without_field = [line for line in out.splitlines() if line.strip().startswith('"') and "{" in line]
    assert not piece_without_field, piece_without_field   # a piece with no field is no f-string; `{{` became `{`


def test_lines_it_must_not_split():
    "A short line, a pragma comment, a triple-quoted string, a string with no space, a narrow column: left as they are."
    assert restyle.split_line("x = 'short'\n", 1, 70) is None
    pragma = "from a import b  # noqa: F401  (a re-export that the notebook's readers import from this very module)\n"
    assert restyle.split_line(pragma, 1, 70) is None
    assert restyle.split_line('x = """' + "word " * 20 + '"""\n', 1, 70) is None
    assert restyle.split_line("x = '" + "a" * 90 + "'\n", 1, 70) is None
    narrow = "value = some_function_name(first_argument, second_argument, 'a string cut here would be silly')\n"
    assert restyle.split_line(narrow, 1, 70) is None   # fewer than MIN_PIECE columns left for its pieces
    assert restyle.split_line("x = f'{a_very_long_field_expression_that_fills_the_whole_line_by_itself + b}'\n", 1,
                              40) is None   # no cut outside the field


def test_a_split_that_would_take_a_cell_past_60_lines_is_refused(tmp_path):
    "The cell's line count is kept within tests/test_style.py's limit: the long string stays, the cell is named."
    body = "".join(f"x{i} = {i}\n" for i in range(58))
    module = tmp_path / "m.py"
    module.write_text("# %% ../nbs/m.ipynb #c0000001\n" + body + "NOTE = '" + "word " * 40 + "'\n")
    done, refused = restyle.split_long_lines(module, [60], 120)
    assert done == 0 and refused == ["m.ipynb #c0000001: splitting its long strings would pass 60 lines"]
    module.write_text("# %% ../nbs/m.ipynb #c0000001\nNOTE = '" + "word " * 40 + "'\n")
    assert restyle.split_long_lines(module, [2], 120) == (1, [])
    assert max(map(len, module.read_text().splitlines())) <= 120
