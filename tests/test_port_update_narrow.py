"""Issue 32: a conflict of the update narrowed to the statements both sides changed (ONP4542): the people's other edits
carried onto the new port's lines, an edit both sides made taken once, and the stale-name rule (ONP4541) settling only
the small conflict that reads a dropped name. Fixtures written for these tests (a runner whose block NEW re-nests)."""
from omni_npu_port.port.merge import merge_hunks, render
from omni_npu_port.port.update_release import (MethodUpdate, carry_edits, fragment_compiles, merge_method,
                                               narrow_conflict, settle_conflicts)

# NEW's port re-nests the block under `with ctx():`; it rewrites the copy call (as the people did) and the model call
BASE = ("def f(self, n):\n    self.warm(n)\n    a = 1\n    copy_snapshot(self.loc)\n    b = 2\n"
        "    y = self.model(n)\n    return y + a + b\n")
NEW = ("def f(self, n):\n    with ctx():\n        self.warm(n)\n        a = 1\n        self.loc.copy()\n"
       "        b = 2\n        y = self.model(n, fast=True)\n    return y + a + b\n")
PEOPLE = BASE.replace("    self.warm(n)\n", "").replace("copy_snapshot(self.loc)", "self.loc.copy()")
KNOWN = {"warm", "loc", "copy", "model", "ctx", "copy_snapshot"}


def _merged(base, new, people, known=None):
    m = MethodUpdate("R", "f", "merged")
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", (set(), set()), known)
    return "\n".join(lines) + "\n", m, [d.code for d in diags]


def _conflict(base, new, people):
    return next(h for h in merge_hunks(base, new, people) if h.kind == "conflict")


def test_an_edit_both_sides_made_is_taken_once_and_the_other_edits_carried():
    h = _conflict(BASE, NEW, PEOPLE)
    assert carry_edits(h.base, h.omni, h.npu) is None   # the copy call: the base's statement is gone from the new side
    code, m, codes = _merged(BASE, NEW, PEOPLE)
    assert codes == ["ONP4542"] and m.conflicts == 0
    assert "with ctx():" in code and code.count("self.loc.copy()") == 1 and "self.warm" not in code
    assert "model(n, fast=True)" in code and "copy_snapshot" not in code


def test_a_statement_both_sides_changed_stays_a_small_conflict():
    people = PEOPLE.replace("model(n)", "model(n, old=True)")
    code, m, codes = _merged(BASE, NEW, people)
    assert sorted(codes) == ["ONP4001", "ONP4542"] and m.conflicts == 1
    assert "        y = self.model(n, old=True)" in code and "# y = self.model(n, fast=True)" in code
    assert "with ctx():" in code and "        b = 2" in code and "self.warm" not in code
    assert code.count("<<<<<<<") == 1 and code.index("b = 2") < code.index("<<<<<<<")   # only that statement


def test_a_region_with_no_statement_to_anchor_on_stays_one_conflict():
    one = [f"def f(self, n):\n    y = self.model(n{a})\n    return y\n" for a in ("", ", fast=True", ", old=True")]
    h = _conflict(*one)
    assert narrow_conflict(h.base, h.omni, h.npu) is None
    code, m, codes = _merged(*one)
    assert "ONP4542" not in codes and m.conflicts == 1


def test_the_stale_name_rule_settles_only_the_small_conflict_that_reads_the_dropped_name():
    base = BASE.replace("    b = 2\n", "    b = self.flag\n    c = 4\n")
    people = PEOPLE.replace("    b = 2\n", "    b = self.old_flag\n    c = 4\n")   # their stack called it so
    people = people.replace("model(n)", "model(n, old=True)")
    new = NEW.replace("        b = 2\n", "        b = self.flag + 1\n        c = 4\n")
    code, m, codes = _merged(base, new, people, KNOWN | {"flag"})
    assert "ONP4541" in codes and "ONP4542" in codes and "old_flag" not in code and "b = self.flag + 1" in code
    assert "        y = self.model(n, old=True)" in code and code.count("<<<<<<<") == 1   # the other one stays
    code, _, codes = _merged(base, new, people, KNOWN | {"flag", "old_flag"})   # NEW's stack has it: both stay
    assert "ONP4541" not in codes and "b = self.old_flag" in code and code.count("<<<<<<<") == 2


def test_fragment_compiles_opens_the_depths_a_cut_leaves_and_rejects_a_bad_dedent():
    assert fragment_compiles(["        x = 1", "    y = 2"]) and fragment_compiles(["    return 1"])
    assert not fragment_compiles(["    if x:", "    y = 2"])
    assert not fragment_compiles(["        if x:", "                y = 1", "            z = 2"])


def test_a_block_header_the_people_removed_carries_its_body_at_their_depth():
    base = ("def f(self, n, skip):\n    a = 1\n    if skip:\n        x = 0\n    else:\n        x = n\n    b = 2\n"
            "    return x + a + b\n")
    people = base.replace("    if skip:\n        x = 0\n    else:\n        x = n\n", "    x = n\n")
    new = ("def f(self, n, skip):\n    with ctx():\n        a = 1\n        if skip:\n            x = 0\n        else:\n"
           "            x = n\n        b = 3\n    return x + a + b\n")
    code, m, codes = _merged(base, new, people)
    assert codes == ["ONP4511"] and m.conflicts == 0 and "if skip" not in code and "else" not in code
    assert "\n        x = n\n        b = 3\n" in code
    compile(code, "<f>", "exec")
    code, m, codes = _merged(base, new, base)   # the people changed nothing: the new port's lines
    assert code == new and "ONP4542" not in codes


def test_the_settled_hunks_render_the_new_sides_lines_with_one_diagnostic():
    hs, settled = settle_conflicts(merge_hunks(BASE, NEW, PEOPLE.replace("model(n)", "model(n, old=True)")))
    assert [c for c, _, _ in settled] == ["ONP4542"] and [h.kind for h in hs].count("conflict") == 1
    lines, _ = render(hs, ("people", "new"), False, "comment")
    compile("\n".join(lines) + "\n", "<f>", "exec")


def test_a_small_conflict_has_whole_statements_on_each_side():
    base = "def f(self, x):\n    self.setup(x)\n    y = self.model(x)\n    return y\n"
    people = base.replace("setup(x)", "setup(x, npu=True)")
    new = "def f(self, x):\n    with self.ctx(x):\n        y = self.model(x)\n    return y\n"
    h = _conflict(base, new, people)
    assert narrow_conflict(h.base, h.omni, h.npu) is None   # the new side's `with` would be cut from its body
    code, m, codes = _merged(base, new, people)
    assert m.conflicts == 1 and "ONP4542" not in codes
