"""Issue 32: the judge of an update (`port --release NEW --from PREV`): the people's runner it carries is an input,
checked on its own release's sources; an error the update carries unchanged from it is inherited, one NEW's change
brings is the update's; the carried imports NEW no longer defines are said at their line.

Fixtures are written here: two tiny stacks (PREV's and NEW's `vllm_ascend`, each with an omni tree) in a temp folder."""
from pathlib import Path
from textwrap import dedent

import pytest

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.port import judge as J
from omni_npu_port.port.locate import port_diagnostic
from omni_npu_port.port.update_release import placed_imports

DRAFTER = '''
class Drafter:
    def dummy_run(self, num_tokens):
        return num_tokens
'''
PREV_ASCEND = DRAFTER + '''
class Gone:
    pass

def helper(a):
    return a
'''
NEW_ASCEND = DRAFTER + '''
def helper(a, *, b=0):
    return a
'''
# the people's runner of PREV: its `dummy_run` call passes a keyword the drafter lacks (an error on PREV already)
PEOPLE = '''
from vllm_ascend.drafter import Drafter, Gone, helper


class NPURunner:
    def __init__(self):
        self.drafter = Drafter()

    def _dummy_run(self, n):
        self.drafter.dummy_run(n, with_prefill=True)
        return Gone, helper(1)
'''
# the update on NEW: the people's statements carried unchanged, one call of its own that does not bind
UPDATE = '''
from vllm_ascend.drafter import Drafter, Gone, helper


class NPURunner:
    def __init__(self):
        self.drafter = Drafter()

    def _dummy_run(self, n):
        self.drafter.dummy_run(n, with_prefill=True)
        helper(1, c=2)
        return Gone, helper(1)

    def capture(self, n):
        self.drafter.dummy_run(n, with_prefill=True)
'''
MODULE = "vllm_omni.npu.runner"


def _line(text, needle):
    return next(i for i, l in enumerate(dedent(text).splitlines(), 1) if needle in l)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    root = tmp_path_factory.mktemp("upjudge")
    for side, ascend in (("prev", PREV_ASCEND), ("new", NEW_ASCEND)):
        for rel, text in {"vllm_ascend/__init__.py": "", "vllm_ascend/drafter.py": ascend,
                          "omni/vllm_omni/__init__.py": "", "omni/vllm_omni/npu/__init__.py": ""}.items():
            (root / side / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / side / rel).write_text(dedent(text))
    people = root / "prev/omni/vllm_omni/npu/runner.py"
    people.write_text(dedent(PEOPLE))
    return root, people


@pytest.fixture(scope="module")
def judged(stacks):
    "The people's runner checked on PREV's sources; the update judged on NEW's with and without its keys."
    root, people = stacks
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(root / "cache"))
        theirs = J.input_errors([people], [root / "prev", root / "prev/omni"])
        again = J.input_errors([people], [root / "prev", root / "prev/omni"], exe=str(root / "no-such-checker"))
        keys = {e.key for e in theirs[str(people.resolve())]}
        new = [root / "new", root / "new/omni"]
        got, _ = J.judge_modules({MODULE: dedent(UPDATE)}, {MODULE: []}, new, root / "new/omni", known={MODULE: keys})
        alone, _ = J.judge_modules({MODULE: dedent(UPDATE)}, {MODULE: []}, new, root / "new/omni")
    return theirs, again, got[MODULE], alone[MODULE]


def _at(diags, needle):
    return sorted(d.code for d in diags if d.line == _line(UPDATE, needle))


@pytest.mark.slow
def test_an_error_carried_unchanged_from_the_peoples_runner_is_inherited(judged):
    theirs, again, j, _ = judged
    assert [e.code for e in next(iter(theirs.values()))] == ["ONP4442"]   # on PREV: only the drafter call
    assert again == theirs                                                 # kept: no checker asked the second time
    carried = [d for d in j.inherited if d.line == _line(UPDATE, "    self.drafter.dummy_run")]
    assert [d.code for d in carried] == ["ONP4445"] and "people's runner" in carried[0].message


@pytest.mark.slow
def test_what_new_changed_under_a_carried_statement_stays_the_updates(judged):
    _, _, j, _ = judged
    assert _at(j.port, "import Drafter, Gone") == ["ONP4444"]   # `Gone` resolves on PREV, not on NEW
    assert _at(j.port, "helper(1, c=2)") == ["ONP4442"]          # the update's own call
    capture = [d for d in j.port if d.where == "NPURunner.capture"]
    assert [d.code for d in capture] == ["ONP4442"]              # the same call in a method the people lack: the update's


@pytest.mark.slow
def test_without_the_peoples_keys_the_carried_error_is_the_updates(judged):
    _, _, _, alone = judged
    assert "ONP4442" in _at(alone.port, "with_prefill=True") and not alone.inherited


def test_a_kept_or_taken_import_is_said_at_its_line_a_dropped_one_without():
    said = [port_diagnostic(c, f"{code_info(c).title}: `{n}` (from m import {n})")
            for c, n in (("ONP4522", "Gone"), ("ONP4520", "Moved"), ("ONP4521", "Unused"), ("ONP4522", "Nowhere"))]
    placed_imports("import os\nfrom m import Gone\nfrom n import Moved as Moved\n\n\nclass R:\n    pass\n", said)
    assert [d.line for d in said] == [2, 3, None, None]
    placed_imports("class R(:\n", said[3:])   # no parse: left as it is
    assert said[3].line is None


def test_the_peoples_runner_is_an_input_only_where_the_update_carried_it(tmp_path, monkeypatch):
    from types import SimpleNamespace as NS
    from omni_npu_port.port import update_release as U
    for rel in ("omni/vllm_omni/__init__.py", "omni/vllm_omni/a.py", "omni/vllm_omni/b.py", "omni/vllm_omni/c.py",
                "vllm-1.0/vllm/__init__.py", "vllm-ascend-1.0rc1/vllm_ascend/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    asked = []
    def checked(files, sources):
        asked.append((sorted(Path(f).name for f in files), [Path(s).name for s in sources]))
        return {f: [NS(key=("stmt", "f", "rule", Path(f).stem))] for f in files}
    monkeypatch.setattr(U, "input_errors", checked)
    runners = [NS(module="new.a", gpu="g.A", cls="A", diagnostics=[]),
               NS(module="new.b", gpu="g.B", cls="B", diagnostics=[port_diagnostic("ONP4501", "not carried")]),
               NS(module="new.c", gpu="g.C", cls="C", diagnostics=[])]
    base = NS(runners=[NS(gpu="g.A", cls="A", hand="vllm_omni.a.A"), NS(gpu="g.B", cls="B", hand="vllm_omni.b.B"),
                       NS(gpu="g.C", cls="C", hand=None)], vllm="1.0", vllm_ascend="1.0rc1")
    src = lambda spec: tmp_path / spec.replace("==", "-")
    got = U.people_errors(runners, base, tmp_path / "omni", src)
    assert got == {"new.a": {("stmt", "f", "rule", "a")}}                  # b not carried (ONP4501), c has no hand
    assert asked == [(["a.py"], ["vllm-ascend-1.0rc1", "vllm-1.0", "omni"])]   # on PREV's own stack


CARRIED = '''class R:
    def f(self, n, ids):
        with ctx(
            n,
            input_ids=ids,
            other=1,
            keep=2,
        ):
            return n
'''


def _no_param(name, line, column=13):
    from types import SimpleNamespace as NS
    return NS(code="ONP4442", line=line, column=column, where="R.f",
              message=f'call-does-not-bind: No parameter named "{name}" (basedpyright reportCallIssue)')


def test_keywords_news_callee_lacks_are_dropped_where_no_new_call_can_be_taken():
    from omni_npu_port.port.update_release import retake_calls
    no_call = "class R:\n    def f(self, n, ids):\n        return n\n"
    code, said, moved = retake_calls(CARRIED, "R", no_call, [_no_param("input_ids", 5), _no_param("other", 6)])
    assert "input_ids" not in code and "other=1" not in code and "            keep=2,\n        ):" in code
    assert [d.code for d in said] == ["ONP4526"] and said[0].line == 3 and moved == [(8, -2)]
    compile(code, "m", "exec")


def test_the_new_ports_call_is_taken_before_keywords_are_dropped():
    from omni_npu_port.port.update_release import retake_calls
    new = "class R:\n    def f(self, n, ids):\n        with ctx(n, keep=2):\n            return n\n"
    code, said, _ = retake_calls(CARRIED, "R", new, [_no_param("input_ids", 5)])
    assert "with ctx(n, keep=2):" in code and [d.code for d in said] == ["ONP4523"]


def test_a_new_call_reading_an_unbound_name_falls_back_to_the_dropped_keywords():
    from omni_npu_port.port.update_release import retake_calls
    new = "class R:\n    def f(self, n, ids):\n        meta = g()\n        with ctx(n, meta=meta):\n            return n\n"
    code, said, _ = retake_calls(CARRIED, "R", new, [_no_param("input_ids", 5)])
    assert "meta" not in code and "input_ids" not in code and "other=1," in code
    assert [d.code for d in said] == ["ONP4526"]


def test_keywords_are_not_dropped_from_one_line_calls_or_calls_with_another_error():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import retake_calls
    no_call = "class R:\n    def f(self, n, ids):\n        return n\n"
    one_line = "class R:\n    def f(self, n, ids):\n        ctx(n, input_ids=ids)\n"
    code, said, _ = retake_calls(one_line, "R", no_call, [_no_param("input_ids", 3, 16)])
    assert code == one_line and [d.code for d in said] == ["ONP4524"]
    positional = NS(code="ONP4442", line=4, column=13, where="R.f", message="Expected 0 positional arguments")
    code, said, _ = retake_calls(CARRIED, "R", no_call, [_no_param("input_ids", 5), positional])
    assert code == CARRIED and [d.code for d in said] == ["ONP4524"]


def test_a_name_the_modules_own_statements_read_gets_its_import_back():
    from omni_npu_port.port.update_release import keep_imports, module_units, module_unbound
    new_side = "from typing import TYPE_CHECKING, Any\n\n\nclass G:\n    pass\n"
    merged = ("from typing import Any\n\nif TYPE_CHECKING:\n    from x import Y\n\n\nclass R:\n"
              "    def f(self) -> Any:\n        return 1\n")
    assert module_unbound(merged) == ["TYPE_CHECKING"]
    top = module_units(merged, "R", {"f": "f"})[0]
    got, said = keep_imports(merged, "R", top, [module_units(new_side, "G", {})[0]])
    assert "from typing import TYPE_CHECKING , Any" in [u.key for u in got] and said[0].code == "ONP4508"
    later = merged.replace("    from x import Y\n", "    from x import Y\nimport os\n")   # an import after the reader
    got, _ = keep_imports(later, "R", module_units(later, "R", {"f": "f"})[0], [module_units(new_side, "G", {})[0]])
    keys = [u.key for u in got]
    assert keys.index("from typing import TYPE_CHECKING , Any") < next(i for i, k in enumerate(keys) if "if" in k.split())
    bound = merged.replace("from typing import Any\n", "from typing import TYPE_CHECKING, Any\n")
    assert module_unbound(bound) == [] and module_unbound("x = len([])\nclass R:\n    def f(self): return y\n") == []
