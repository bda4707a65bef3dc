"""Issue 32: the update's merge rule for people's lines written on an older stack (ONP4540, ONP4541): a people's edit
that reads, in place of an attribute NEW's stack has, one that no source of NEW's stack mentions nor the runner defines,
gives way to the new port's lines. Fixtures written for these tests (a forward context whose flag was renamed)."""
from pathlib import Path

from omni_npu_port.port.merge import keep_side, merge_hunks
from omni_npu_port.port.update_release import (MethodUpdate, decide_method, defined_names, drop_stale, merge_method,
                                               stack_words, stale_reads)
from omni_npu_port.sources.symbols import SymbolIndex

STACK = Path(__file__).parent / "fixtures" / "generalize" / "stack"
KNOWN = {"get_forward_context", "flash_comm_v1_enabled", "all_gather", "numel", "model", "prep", "record"}
BASE = ("def f(self, x):\n    if get_forward_context().flash_comm_v1_enabled:\n        x = all_gather(x)\n"
        "    return self.model(x)\n")
OLD_NAME = BASE.replace("flash_comm_v1_enabled", "sp_enabled")   # the people's stack called the flag so


def _merged(new, people, known=KNOWN):
    m = MethodUpdate("R", "f", "merged")
    lines, diags = merge_method(m, BASE, new, people, ("people", "new"), "comment", (set(), set()), known)
    return "\n".join(lines) + "\n", m, [d.code for d in diags]


def test_a_peoples_edit_that_reads_a_name_gone_from_the_stack_takes_the_new_ports_lines():
    code, m, codes = _merged(BASE, OLD_NAME)
    assert "flash_comm_v1_enabled" in code and "sp_enabled" not in code and codes == ["ONP4540"]
    assert m.people == 0 and m.conflicts == 0


def test_a_peoples_edit_that_reads_a_name_the_stack_still_has_stays_theirs():
    code, m, codes = _merged(BASE, OLD_NAME, KNOWN | {"sp_enabled"})
    assert "sp_enabled" in code and codes == [] and m.people >= 1
    code, m, codes = _merged(BASE, OLD_NAME, None)   # no stack given: the rule is off
    assert "sp_enabled" in code and codes == []


def test_a_name_the_runner_defines_is_known():
    assert {"R", "f", "sp_enabled", "y", "np"} <= defined_names(
        "import numpy as np\nclass R:\n    def f(self, y):\n        self.sp_enabled = y\n")
    code, _, codes = _merged(BASE, OLD_NAME, KNOWN | defined_names("class R:\n    sp_enabled = False\n"))
    assert "sp_enabled" in code and codes == []


def test_a_read_added_without_replacing_one_stays_the_peoples():
    added = BASE.replace("all_gather(x)", "all_gather(x).to(x.dtype)")   # torch's `to`: the stack need not mention it
    code, _, codes = _merged(BASE, added)
    assert ".to(x.dtype)" in code and codes == []
    local = BASE.replace("return self.model(x)", "return self.model(x).sp_enabled")   # a read added, none replaced
    assert stale_reads(local.split("\n"), KNOWN, BASE.split("\n")) == set()   # of a call of the runner's attribute: not looked at


def test_a_conflict_whose_peoples_side_reads_a_gone_name_takes_the_new_side():
    new = BASE.replace("_enabled:", "_enabled and x.numel():")
    code, m, codes = _merged(new, OLD_NAME)
    assert codes == ["ONP4541"] and "x.numel()" in code and "sp_enabled" not in code and m.conflicts == 0


def test_a_conflict_whose_new_side_reads_an_unknown_name_too_stays_a_conflict():
    new = BASE.replace("_enabled:", "_enabled and get_forward_context().brand_new:")
    code, m, codes = _merged(new, OLD_NAME)
    assert m.conflicts == 1 and "ONP4001" in codes and "ONP4541" not in codes
    assert "sp_enabled" in keep_side(code) and "brand_new" in keep_side(code, 1)


def test_a_deletion_reads_nothing_and_stays_the_peoples():
    deleted = "def f(self, x):\n    return self.model(x)\n"
    hunks, said = drop_stale(merge_hunks(BASE, BASE, deleted), KNOWN)
    assert said == []
    m = MethodUpdate("R", "f", "")
    lines, _ = decide_method(m, BASE, BASE, deleted, ("p", "n"), "comment", (set(), set()), KNOWN)
    assert "flash_comm_v1_enabled" not in "\n".join(lines)


def test_the_stack_words_are_every_identifier_of_the_sources():
    ix = SymbolIndex.open(str(STACK / "vllm_ascend"), str(STACK / "vllm"))
    words = stack_words(ix)
    assert "NPUModelRunner" in words and "sp_enabled_never_written_anywhere" not in words
    assert stack_words(ix) is words and stack_words(None) == frozenset()   # read once per stack; none: nothing known


def test_a_conflict_over_lines_whose_name_new_dropped_takes_the_new_side():
    "The previous port read the name too (the older stack had it); NEW's stack dropped it and rewrote the lines."
    base = "def f(self, x):\n    self.maybe_setup(x)\n    y = self.model(x)\n    return y\n"
    people = "def f(self, x):\n    self.maybe_setup(x, npu=True)\n    y = self.model(x)\n    return y\n"
    new = "def f(self, x):\n    with self.ctx(x):\n        y = self.model(x)\n    return y\n"
    known = {"model", "ctx"}
    m = MethodUpdate("R", "f", "merged")
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", (set(), set()), known)
    assert [d.code for d in diags] == ["ONP4541"] and "maybe_setup" not in "\n".join(lines) and m.conflicts == 0
    m = MethodUpdate("R", "f", "merged")   # NEW's stack still has it: the conflict stays, the people's side live
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", (set(), set()),
                                known | {"maybe_setup"})
    assert m.conflicts == 1 and "ONP4541" not in [d.code for d in diags]
    assert "npu=True" in keep_side("\n".join(lines) + "\n")


def test_a_name_the_people_only_add_stays_theirs_even_in_a_conflict():
    "Neither a rename nor a name NEW dropped: it may be defined where the stack's files do not show (a conflict stays)."
    base = "def f(self, x):\n    self.out.pop(x, None)\n    return x\n"
    people = "def f(self, x):\n    self.out.pop(x, self.npu_default)\n    return x\n"
    new = "def f(self, x):\n    self.out.pop(x, [])\n    return x\n"
    m = MethodUpdate("R", "f", "merged")
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", (set(), set()), {"out", "pop"})
    assert m.conflicts == 1 and not {"ONP4540", "ONP4541"} & {d.code for d in diags}
    assert "self.npu_default" in keep_side("\n".join(lines) + "\n")
