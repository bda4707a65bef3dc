"""Issue 32: a read NEW's stack removed, retaken (ONP4563): where the judge finds `self.X` in no class of the updated
runner's order, in a statement the tool's port of PREV wrote the same way, and the new port replaced that one
expression (with statements binding what it reads), the people's statement gets the new port's expression; put back
where the judge finds no fewer errors (ONP4564).

Fixtures are written here: a tiny NEW stack (`vllm_ascend` with a base runner that has `new_bufs`, no `old_bufs`)."""
import ast
from textwrap import dedent
from types import SimpleNamespace

import pytest
from ready_stack import update_stack

from omni_npu_port.port import judge as J
from omni_npu_port.port.update_release import removed_read_units, replacement, retake_removed_reads, self_read

BASE = '''
class Bufs:
    pre: int = 0


class Base:
    def new_bufs(self) -> Bufs:
        return Bufs()

    def run(self, n: int, bufs: int) -> int:
        return n + bufs
'''
MODULE = "vllm_omni.npu.runner"


def runner(method: str) -> str:
    "A runner module whose method `f` has the given (8-space indented) body lines."
    return ("from vllm_ascend.base import Base\n\n\nclass NPURunner(Base):\n    def f(self, n):\n"
            + dedent(method).strip("\n").replace("\n", "\n        ").join(["        ", "\n"]))


PREV_PORT = runner("m = n + 1\nout = self.run(m, self.old_bufs())\nreturn out")   # the tool's port of PREV
NEW_PORT = runner("m = n + 1\nbufs = self.new_bufs()\nout = self.run(m, bufs.pre)\nreturn out")
PEOPLE = runner("m = n + 2  # NPU: one more\nout = self.run(m, self.old_bufs())\nreturn out")


def method(code: str) -> dict:
    return {"f": dedent("\n".join(code.split("\n")[4:]))}


def gone(line: int, name: str = "old_bufs", cls: str = "NPURunner"):
    return SimpleNamespace(code="ONP4443", line=line, column=1, where=f"{cls}.f",
                           message=f'Cannot access attribute "{name}" for class "{cls}"')


def test_the_new_ports_expression_and_its_bindings_replace_the_removed_read():
    units = removed_read_units(PEOPLE, "NPURunner", [gone(7)], method(PREV_PORT), method(NEW_PORT))
    assert [(u[0], u[1], u[4], u[5]) for u in units] == [(6, 7, "old_bufs", "self.new_bufs().pre")]
    assert units[0][2] == ["        out = self.run(m, self.new_bufs().pre)"]   # NEW's binding, read once: put in


def test_a_binding_read_twice_is_placed_before_the_statement():
    two = NEW_PORT.replace("self.run(m, bufs.pre)", "self.run(m, bufs.pre + bufs.pre)")
    units = removed_read_units(PEOPLE, "NPURunner", [gone(7)], method(PREV_PORT), method(two))
    assert units[0][2] == ["        bufs = self.new_bufs()", "        out = self.run(m, bufs.pre + bufs.pre)"]


def test_not_taken_where_new_still_reads_it_changed_more_or_the_base_never_read_it():
    read = self_read(ast.parse("out = self.run(m, self.old_bufs())").body[0], "old_bufs", 1)
    new_f, base_f = method(NEW_PORT)["f"], method(PREV_PORT)["f"]
    assert replacement(base_f, new_f, read, "old_bufs") == ("bufs.pre", ["bufs = self.new_bufs()"], 4)
    assert replacement(base_f, new_f.replace("return out", "return self.old_bufs()"), read, "old_bufs") is None
    assert replacement(base_f, new_f.replace("self.run(m,", "self.run(n,"), read, "old_bufs") is None
    assert replacement(base_f.replace("self.old_bufs()", "0"), new_f, read, "old_bufs") is None
    assert removed_read_units(PEOPLE, "Other", [gone(7, cls="Other")], method(PREV_PORT), method(NEW_PORT)) == []


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    return update_stack(tmp_path_factory.mktemp("upremoved"), BASE)


def retaken(stack, code: str, new: str = NEW_PORT):
    "The update `code` judged on the NEW stack, then its removed reads retaken: (runner, the pass's return)."
    r = SimpleNamespace(cls="NPURunner", module=MODULE, code=code, gpu="G", diagnostics=[], not_ready=[], judge=None)
    def rejudge():
        got, _ = J.judge_modules({MODULE: r.code}, {MODULE: []}, [stack, stack / "omni"], stack / "omni")
        r.judge = got[MODULE]
        r.diagnostics += r.judge.port + r.judge.excluded
        return []
    rejudge()
    ports = lambda c: SimpleNamespace(runners=[SimpleNamespace(cls="NPURunner", code=c, gpu="G")])
    return r, retake_removed_reads([r], ports(new), ports(PREV_PORT), None, rejudge)


@pytest.mark.slow
def test_the_judge_finds_the_retaken_statement_clean(stack):
    r, got = retaken(stack, PEOPLE)
    assert got == [] and not r.judge.port and "# NPU: one more" in r.code and "self.new_bufs().pre" in r.code
    assert [d.code for d in r.diagnostics] == ["ONP4563"]


@pytest.mark.slow
def test_a_replacement_the_judge_rejects_too_is_put_back(stack):
    worse = NEW_PORT.replace("self.new_bufs()", "self.newer_bufs()")   # NEW's read: also unknown on this stack
    r, _ = retaken(stack, PEOPLE, worse)
    assert r.code == PEOPLE and sorted(d.code for d in r.diagnostics) == ["ONP4443", "ONP4564"]
