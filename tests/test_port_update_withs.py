"""Issue 32: a `with` the people's port carried whose context manager reads a name NEW's sources no longer define
(ONP4560, ONP4561): the new port's `with` over the same statements is taken in its place, or the `with` is taken out
where the new port runs them under none; the people's body is kept. Fixtures written for these tests (a timer
vllm-ascend removed)."""
from pathlib import Path
from textwrap import dedent, indent

from omni_npu_port.port.update_release import RunnerSides, retake_withs, update_runner
from omni_npu_port.sources.readers import open_source_spec
from omni_npu_port.sources.symbols import SymbolIndex

BODY = ("            if self.spec:\n                self.propose(x)\n"
        "            if has_group():\n                clear()\n")
BASE = ("from vllm_ascend.utils import Timer\n\n\nclass R:\n    def sample(self, out):\n        x = self.prep(out)\n"
        '        with Timer().capture_async("Draft"):\n' + BODY + "        return x\n")
PEOPLE = BASE.replace("capture_async", "capture").replace("self.propose(x)\n",
                                                           "self.propose(x)\n                self.npu_sync()\n")
NEW = BASE.replace("Timer", "record").replace('record().capture_async("Draft")', 'record("draft")')


def _index(tmp: Path, utils: str = "def record(name):\n    pass\n") -> SymbolIndex:
    "NEW's vllm-ascend, written for the test: `Timer` gone from vllm_ascend.utils, `record` there."
    for f, text in {"__init__.py": "", "utils.py": utils}.items():
        (tmp / "vllm_ascend" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "vllm_ascend" / f).write_text(text)
    return SymbolIndex([open_source_spec(str(tmp))])


def _update(tmp, new=NEW, people=PEOPLE, utils="def record(name):\n    pass\n"):
    code, diags, _ = update_runner("R", RunnerSides((BASE, "R"), (people, "R"), (new, "R")), names=_index(tmp, utils))
    return code, [d.code for d in diags]


def test_a_with_over_a_name_new_removed_takes_the_new_ports_with_and_keeps_the_peoples_body(tmp_path):
    code, codes = _update(tmp_path)
    live = [l for l in code.split("\n") if not l.lstrip().startswith("#")]
    assert "Timer" not in code and '        with record("draft"):' in live and "                self.npu_sync()" in live
    assert "ONP4560" in codes and "ONP4522" not in codes and compile(code, "R", "exec")


def test_a_with_the_new_port_runs_bare_is_taken_out(tmp_path):
    bare = "\n".join(l.replace("    ", "", 1) if l.startswith("            ") else l for l in NEW.split("\n")
                     if "with record" not in l)
    code, codes = _update(tmp_path, new=bare)
    live = [l for l in code.split("\n") if not l.lstrip().startswith("#")]
    assert "Timer" not in "\n".join(live) and "            self.npu_sync()" in live and "ONP4561" in codes
    assert not any(l.lstrip().startswith("with ") for l in live)


def test_a_manager_new_still_defines_is_left(tmp_path):
    code, codes = _update(tmp_path, utils="def record(name):\n    pass\n\n\nclass Timer:\n    pass\n")
    assert 'with Timer().capture("Draft"):' in code and not {"ONP4560", "ONP4561"} & set(codes)


def test_statements_the_new_port_lacks_or_a_bound_name_leave_the_with_and_the_finding():
    people = dedent(PEOPLE[PEOPLE.index("    def"):])
    assert retake_withs(people, "def sample(self, out):\n    return 1\n", {"Timer"}) == (people, [])
    bound = people.replace('capture("Draft"):', 'capture("Draft") as t:')
    bare = "def sample(self, out):\n    x = self.prep(out)\n" + indent(dedent(BODY), "    ") + "    return x\n"
    assert retake_withs(bound, bare, {"Timer"}) == (bound, [])
    got, edits = retake_withs(people, bare, {"Timer"})
    assert [e[0] for e in edits] == ["ONP4561"] and "with" not in got
