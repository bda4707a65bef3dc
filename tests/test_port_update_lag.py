"""Issue 32: the update's rule for a people's copy that lags the omni GPU side (ONP4490): where the people's PREV copy of
a method took at most a quarter of the lines the GPU method brought in the release before PREV, the GPU side's change
since PREV is not carried either (the people's lines kept, said per method); where it took them, or no history is
known, the change is carried. Fixtures written for these tests (a method `step` that gains logging lines)."""
from types import SimpleNamespace

from omni_npu_port.port.update_release import (AscendChange, MethodUpdate, gpu_lag, history_origin, merge_method,
                                               with_history)

BASE = "def step(self, x):\n    out = self.model(x)\n    return out\n"
NEW = "def step(self, x):\n    out = self.model(x)\n    self.trace(out)\n    return out\n"   # the GPU side's change
PEOPLE = "def step(self, x):\n    out = self.model(x, stream=self.stream)\n    return out\n"   # the people's edit
GPU_BEFORE = "def step(self, x):\n    out = self.model(x)\n    return out\n"
GPU_PREV = ("def step(self, x):\n    out = self.model(x)\n    self.check(out)\n    self.steps += 1\n"
            "    self.seen.add(x)\n    return out\n")   # three lines the GPU method brought before PREV
TOOK = PEOPLE.replace("    return out", "    self.check(out)\n    self.steps += 1\n    self.seen.add(x)\n    return out")


def _change(history=(GPU_BEFORE, GPU_PREV), pair=(set(), set()), followed=False):
    a = AscendChange(pair, followed)
    a.history = history
    return a


def _merged(people, ascend, base=BASE, new=NEW):
    m = MethodUpdate("R", "step", "merged")
    lines, diags = merge_method(m, base, new, people, ("people", "new"), "comment", ascend)
    return "\n".join(lines) + "\n", m, diags


def test_a_copy_that_did_not_take_the_last_gpu_change_keeps_its_lines_and_says_so():
    code, m, diags = _merged(PEOPLE, _change())
    assert "self.trace(out)" not in code and "stream=self.stream" in code and m.gpu == 0
    assert [d.code for d in diags] == ["ONP4490"] and d_where(diags) == ["step"]
    assert "self.trace(out)" in diags[0].message and "took 0 of the 3" in diags[0].message


def d_where(diags): return [d.where for d in diags]


def test_a_copy_that_took_the_last_gpu_change_takes_the_new_one():
    code, m, diags = _merged(TOOK, _change())
    assert "self.trace(out)" in code and "self.check(out)" in code and m.gpu == 1
    assert "ONP4490" not in [d.code for d in diags]


def test_no_history_or_a_small_one_carries_the_change():
    for ascend in ((set(), set()), _change(None), _change((None, GPU_PREV)), _change((GPU_BEFORE, GPU_BEFORE)),
                   _change((GPU_BEFORE, GPU_PREV.replace("    self.seen.add(x)\n", "")))):   # two lines: below LAG_LINES
        code, _, diags = _merged(PEOPLE, ascend)
        assert "self.trace(out)" in code and "ONP4490" not in [d.code for d in diags]


def test_the_share_taken_decides():
    assert gpu_lag((GPU_BEFORE, GPU_PREV), PEOPLE) == (0, 3)
    assert gpu_lag((GPU_BEFORE, GPU_PREV), PEOPLE.replace("    return", "    self.check(out)\n    return")) is None
    assert gpu_lag(None, PEOPLE) is None


def test_vllm_ascends_change_is_not_held_by_this_rule():
    new = NEW.replace("    self.trace(out)\n", "    torch.npu.current_stream().synchronize()\n")
    ascend = _change(pair=({"torch . npu . current_stream ( ) . synchronize ( )"}, set()))
    code, _, diags = _merged(PEOPLE, ascend, new=new)
    assert "synchronize()" in code and "ONP4490" not in [d.code for d in diags]


def test_a_held_region_that_would_unbind_a_name_is_carried():
    base = "def step(self, x):\n    y = self.prep(x)\n    out = self.model(y)\n    return out\n"
    new = "def step(self, x):\n    z = self.prep(x)\n    out = self.model(z)\n    return out\n"   # one rename, two regions
    people = "def step(self, x):\n    y = self.prep(x)\n    out = self.model(y, stream=self.stream)\n    return out\n"
    code, _, _ = _merged(people, _change(), base=base, new=new)
    compile(code, "<step>", "exec")
    assert ("z = self.prep(x)" in code) == ("self.model(z" in code)   # never one half of the rename


def test_with_history_gives_each_method_its_gpu_texts_at_both_releases():
    texts = lambda d: SimpleNamespace(text=lambda name: d.get(name))
    ask = with_history(lambda name, was: AscendChange(({"n"}, {"o"}), True), texts({"step": "A"}), texts({"step": "B"}))
    got = ask("step", None)
    assert got == ({"n"}, {"o"}) and got.followed and got.history == ("A", "B")
    assert ask("renamed", "step").history == ("A", "B")   # PREV's name is the GPU method's
    plain = lambda name, was: (set(), set())
    assert with_history(plain, None, texts({})) is plain


def test_no_release_before_one_without_a_version():
    assert history_origin(SimpleNamespace(version=None)) is None
    assert history_origin(SimpleNamespace(version="0.0.1")) is None   # none older in the releases table
