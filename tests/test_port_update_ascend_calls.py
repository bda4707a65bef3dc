"""ONP4491 (issue 32): a call of the runner's own method whose arguments or assigned names vllm-ascend changed since
PREV is taken as NEW has it where the people kept the old call; calls on other objects, calls the people edited and
calls that would read an unbound name keep the people's lines. Fixtures: three-way method texts written here, with
vllm-ascend's NEW and PREV method lines given as the `ascend` key sets the update passes."""
from omni_npu_port.port.update_release import AscendChange, MethodUpdate, _key, ascend_calls, merge_method

BASE = ("def f(self, x):\n    a = self.pad(x,\n        1)\n    self.mgr.init(x)\n    b = self.step(a)\n"
        "    return b\n")
PEOPLE = BASE.replace("    return b\n", "    torch.npu.synchronize()  # the people's\n    return b\n")
NEW = BASE.replace("        1)", "        self.loc, 1)").replace("init(x)", "init(x, self.n)")


def _keys(text: str) -> set[str]: return {_key(l) for l in text.split("\n")}


def _merge(base: str, new: str, people: str, ascend):
    m = MethodUpdate("R", "f", "merged")
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", ascend)
    return "\n".join(lines), sorted(d.code for d in diags)


def test_an_own_method_call_vllm_ascend_changed_is_taken_and_another_objects_call_is_not():
    text, codes = _merge(BASE, NEW, PEOPLE, (_keys(NEW), _keys(BASE)))
    assert "        self.loc, 1)" in text and "    self.mgr.init(x)\n" in text and "torch.npu.synchronize()" in text
    assert "ONP4491" in codes and "ONP4550" in codes


def test_a_call_the_people_edited_stays_theirs():
    people = PEOPLE.replace("        1)", "        2)")
    text, codes = _merge(BASE, NEW, people, (_keys(NEW), _keys(BASE)))
    assert "self.loc" not in text.replace("# ", "#").split("#")[0] and "ONP4491" not in codes


def test_a_call_reading_a_name_nothing_binds_stays_the_peoples():
    new = BASE.replace("        1)", "        y, 1)")
    text, codes = _merge(BASE, new, PEOPLE, (_keys(new), _keys(BASE)))
    assert "        1)" in text and "y, 1)" not in text and "ONP4491" not in codes


def test_no_vllm_ascend_change_or_people_in_step_says_nothing():
    assert "ONP4491" not in _merge(BASE, NEW, PEOPLE, (set(), set()))[1]   # the GPU side's change: merged as any
    text, codes = _merge(BASE, NEW, PEOPLE, AscendChange((_keys(NEW), _keys(BASE)), True))   # ONP4551 takes it all
    assert "self.loc, 1)" in text and "ONP4491" not in codes


def test_an_assigned_name_vllm_ascend_dropped_goes_unless_the_method_still_reads_it():
    # as in a conflict settled with the people's side live: their lines are the merged method's
    base = "def f(self, x):\n    (\n        a,\n        c,\n    ) = self.prep(x)\n    self.mgr.init(x)\n    return a\n"
    new = base.replace("        c,\n", "").replace("init(x)", "init(x, 1)")
    people = base.replace("    return a\n", "    torch.npu.synchronize()\n    return a\n")
    lines, said, _ = ascend_calls(people.rstrip().split("\n"), base, new, people, (_keys(new), _keys(base)))
    assert "        c," not in lines and "    self.mgr.init(x)" in lines and said == ["prep"]
    reads = [t.replace("return a", "return a, c") for t in (base, new, people)]
    lines, said, _ = ascend_calls(reads[2].rstrip().split("\n"), *reads, (_keys(reads[1]), _keys(reads[0])))
    assert "        c," in lines and said == []


def test_a_conflict_below_a_taken_call_is_said_at_its_marker():
    base = BASE.replace("    return b\n", "    b = g(b)\n    return b\n")
    new = NEW.replace("        self.loc, 1)", "        self.loc,\n        1,\n    )").replace("    return b\n",
                                                                                    "    b = g(b, 2)\n    return b\n")
    people = base.replace("b = g(b)", "b = npu_g(b)")
    m = MethodUpdate("R", "f", "merged")
    ascend = (_keys(new) - {_key("    b = g(b, 2)")}, _keys(base))   # the call vllm-ascend's; `g`'s edit omni's GPU side
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", ascend)
    marks = [d.line for d in diags if d.code == "ONP4001"]
    assert "ONP4491" in {d.code for d in diags} and marks and all("<<<<<<<" in lines[k - 1] for k in marks)
