"""Issue 32: judge-driven repair of an update (`port --release NEW --from PREV`): where basedpyright finds an error
the people's edit of a method makes on NEW, the new port's version of that hunk is taken (ONP4530), or where the
people deleted a binding, its reads dropped (ONP4532); judged again, and put back where it is not clean either
(ONP4531); an error the new port has too, or one inherited, takes nothing.

Fixtures are written here: a tiny NEW stack (`vllm_ascend` with a base runner that has `fresh`, no `old`/`other`)."""
from textwrap import dedent
from types import SimpleNamespace

import pytest
from ready_stack import update_stack

from omni_npu_port.port import judge as J
from omni_npu_port.port.update_release import repair_judged

BASE = '''
class Base:
    def fresh(self, n, cap=None):
        return n
'''
MODULE = "vllm_omni.npu.runner"


def runner(method: str) -> str:
    "A runner module whose method `f` has the given (8-space indented) body lines."
    return ("from vllm_ascend.base import Base\n\n\nclass NPURunner(Base):\n    def f(self, n):\n"
            + dedent(method).strip("\n").replace("\n", "\n        ").join(["        ", "\n"]))


NEW = runner("m = n\nk = self.fresh(n)\nreturn m + k")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    return update_stack(tmp_path_factory.mktemp("uprepair"), BASE)


def repaired(stack, code: str, new: str = NEW, known=None):
    "The update `code` judged on the NEW stack, then repaired from the new port `new`: (runner, the repair's return)."
    r = SimpleNamespace(cls="NPURunner", module=MODULE, code=code, gpu="", diagnostics=[], not_ready=[], judge=None)
    def rejudge():
        got, _ = J.judge_modules({MODULE: r.code}, {MODULE: []}, [stack, stack / "omni"], stack / "omni",
                                 known={MODULE: known} if known else None)
        r.judge = got[MODULE]
        r.diagnostics += r.judge.port + r.judge.excluded
        return []
    rejudge()
    return r, repair_judged([r], SimpleNamespace(runners=[SimpleNamespace(code=new)]), None, rejudge)


def codes(r):
    return sorted(d.code for d in r.diagnostics)


@pytest.mark.slow
def test_a_peoples_statement_the_judge_rejects_takes_the_new_ports_version(stack):
    r, got = repaired(stack, runner("m = n\nk = self.old(n)\nreturn m + k"))
    assert got == [] and "self.fresh(n)" in r.code and "self.old" not in r.code
    assert codes(r) == ["ONP4530"] and not r.judge.port


@pytest.mark.slow
def test_a_peoples_deletion_of_what_binds_a_read_name_takes_the_new_ports_lines(stack):
    r, _ = repaired(stack, runner("m = n\nreturn m + k"))
    assert r.code == NEW and codes(r) == ["ONP4530"]


@pytest.mark.slow
def test_a_flag_the_people_deleted_has_its_reads_dropped_not_its_binding_restored(stack):
    flagged = runner("m = n\nk = self.fresh(n)\nif k:\n    m = 0\nreturn self.fresh(m, cap=k)")   # the new port
    r, _ = repaired(stack, runner("m = n\nif k:\n    m = 0\nreturn self.fresh(m, cap=k)"), flagged)
    assert r.code == runner("m = n\nreturn self.fresh(m)") and codes(r) == ["ONP4532", "ONP4532"]
    assert not r.judge.port


@pytest.mark.slow
def test_no_clean_side_puts_the_peoples_edit_back_and_says_why(stack):
    ours = runner("m = n\nk = self.old(n)\nreturn m + k")
    r, _ = repaired(stack, ours, runner("m = n\nk = self.other(n)\nreturn m + k"))
    assert r.code == ours and codes(r) == ["ONP4443", "ONP4531"]
    assert "the judge finds an error in the new port's version" in next(d.message for d in r.diagnostics
                                                                        if d.code == "ONP4531")


@pytest.mark.slow
def test_an_error_the_new_port_has_too_takes_nothing(stack):
    ours = runner("m = n\nk = self.old(n)\nreturn m + k")
    r, got = repaired(stack, ours, ours)
    assert got is None and r.code == ours and codes(r) == ["ONP4443"]


@pytest.mark.slow
def test_an_error_inherited_from_an_input_takes_nothing(stack, tmp_path, monkeypatch):
    ours = runner("m = n\nk = self.old(n)\nreturn m + k")
    people = tmp_path / "runner.py"   # the people's runner, with the same error on its own release
    people.write_text(ours)
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    keys = {e.key for e in J.input_errors([people], [stack, stack / "omni"])[str(people.resolve())]}
    r, got = repaired(stack, ours, known=keys)
    assert keys and got is None and r.code == ours and not r.judge.port and r.judge.inherited
