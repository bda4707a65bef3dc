"""Issue 32: a record the updated module defines, built by position or unpacked by the people's code with fewer items
than the new port's record has fields, aligned to the fields by name (ONP4562). Fixtures written for these tests (a
state record that grew fields between the people's release and NEW)."""
from omni_npu_port.port.update_release import align_records

REC = ("from typing import Any, NamedTuple\n\n\nclass State(NamedTuple):\n    logits: Any\n    desc: Any\n"
       "    hidden_cpu: Any = None\n    mm: Any = None\n    slots: Any = None\n    step: Any = None\n\n\n")
BUILD = ("class R:\n    def run(self, logits, desc, mm, step):\n        self.state = State(\n            logits,\n"
         "            desc,\n            mm,  # the people's field\n            step=step,\n        )\n\n")
UNPACK = ("    def sample(self):\n        (\n            logits,\n            desc,\n"
          "            mm,  # the people's field\n            step,\n        ) = self.state\n        return mm\n")
THEIRS = REC + ("class R:\n    def sample(self):\n        (logits, desc, staged_cpu, mm, slots, step) = self.state\n"
                "        return mm\n")
RUN = "r = R()\nr.run(1, 2, 3, 4)\nassert (r.state.mm, r.state.hidden_cpu, r.sample()) == (3, None, 3)\n"


def test_a_build_by_position_that_skips_new_fields_passes_the_rest_by_keyword():
    got, said = align_records(REC + BUILD + UNPACK, THEIRS)
    assert "            mm=mm,  # the people's field\n" in got and "step=step" in got
    assert got.count("\n") == (REC + BUILD + UNPACK).count("\n")   # lines stay where they are
    exec(compile(got + RUN, "aligned", "exec"), {})
    assert [d.code for d in said] == ["ONP4562"] * 3 and said[0].line == 18


def test_a_short_unpack_gets_the_new_ports_names_for_the_fields_it_left_out():
    got, _ = align_records(REC + BUILD + UNPACK, THEIRS)
    assert "            staged_cpu, mm,  # the people's field\n            slots, step,\n" in got
    got, _ = align_records(REC + BUILD + UNPACK, REC + "class R:\n    pass\n")   # no full unpack to name them
    assert "            _, mm,  # the people's field\n            _, step,\n" in got


def test_a_build_and_unpack_field_for_field_are_left():
    prefix = REC + BUILD.replace("            mm,  # the people's field\n            step=step,\n", "") + \
        UNPACK.replace("            mm,  # the people's field\n            step,\n", "            _, mm, _, step,\n")
    assert align_records(prefix, THEIRS) == (prefix, [])   # `State(logits, desc)`: its first fields, in order


def test_items_not_named_as_fields_or_a_left_out_field_without_default_are_left():
    other = (REC + BUILD + UNPACK).replace("desc, mm, step):", "desc, extra, step):").replace(
        "            mm,  # the people's field\n            step=", "            extra,\n            step=")
    got, said = align_records(other, THEIRS)
    assert "extra," in got and "extra=" not in got and all("State:" not in d.message for d in said)
    strict = (REC + BUILD + UNPACK).replace("hidden_cpu: Any = None", "hidden_cpu: Any")
    got, said = align_records(strict, THEIRS)
    assert "mm=mm" not in got   # the field left out has no default: the build stays, the judge says it does not bind


def test_items_by_position_before_the_first_out_of_place_and_a_short_unpack_at_the_end():
    build = BUILD.replace("            logits,\n", "            None,\n")   # a value, not a name: by position
    short = UNPACK.replace("            mm,  # the people's field\n            step,\n", "")   # the first fields only
    got, said = align_records(REC + build + short, THEIRS)
    assert "            None,\n            desc,\n            mm=mm," in got
    assert "            desc, staged_cpu, mm, slots, step,\n" in got and len(said) == 5


def test_a_record_imported_from_another_updated_module_is_aligned_by_its_definition_there():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import sibling_records
    ar = NS(module="pkg.ar_written", hand="pkg.ar_runner.ARRunner", code=REC + "class ARRunner:\n    pass\n")
    gen = "from pkg.ar_runner import State as S\n\n\n" + (BUILD + UNPACK).replace("State(", "S(")
    got, said = align_records(gen, THEIRS, sibling_records(gen, [ar]))
    assert "mm=mm" in got and "staged_cpu, mm" in got and len(said) == 3
    assert sibling_records(gen, [NS(module="pkg.other", hand=None, code=ar.code)]) == {}   # another module's


def test_align_runners_rewrites_each_updated_runner_and_says_so():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import align_runners
    from omni_npu_port.sources.symbols import SymbolIndex
    mine = NS(module="pkg.r", hand=None, cls="R", code=REC + BUILD + UNPACK, diagnostics=[], not_ready=[])
    same = NS(module="pkg.g", hand=None, cls="R", code=THEIRS, diagnostics=[], not_ready=[])
    align_runners([mine, same], NS(runners=[NS(code=THEIRS), NS(code=THEIRS)]), SymbolIndex())
    assert "mm=mm" in mine.code and [d.code for d in mine.diagnostics].count("ONP4562") == 3
    assert same.code == THEIRS and same.diagnostics == []   # the new port's own module: left
