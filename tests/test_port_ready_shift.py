"""Issues 31/32: ONP4483, a record built by position whose bare-name argument lands in another field of the same
record (it binds: the later fields have defaults, or a field was added in the middle). Fixtures written here."""
import textwrap

import pytest

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.port.ready import class_findings, class_shape, ready_findings, sibling_findings
from omni_npu_port.port.release_checks import RunnerPort

from ready_stack import stack_index

D = textwrap.dedent
# the stack's record: a dataclass whose later fields have defaults, and a NamedTuple that grew a field in the middle
STACK = D('''
    from dataclasses import dataclass, field
    from typing import NamedTuple

    @dataclass
    class OmniOutput:
        hidden_states_cpu: object
        multimodal_outputs: dict = field(default_factory=dict)
        extra: object = None

    class ExecuteModelState(NamedTuple):
        scheduler_output: object
        logits: object
        sampled: object = None
        hidden_states: object = None
''')
RUNNER = D('''
    from vllm.v1.worker.gpu_model_runner import ExecuteModelState, OmniOutput

    class NPURunner:
        def execute_model(self, scheduler_output, logits, hidden_states, hidden_states_cpu, multimodal_outputs, h):
            {line}
''')


@pytest.fixture(scope="module")
def ix(tmp_path_factory):
    return stack_index(tmp_path_factory.mktemp("stack"), STACK)


def codes(ix, line):
    return [(d.code, d.line) for d in class_findings(RUNNER.format(line=line), ix, where="NPURunner")]


def test_the_shape_records_fields_in_order_and_which_have_defaults(ix):
    s = class_shape(ix, "vllm.v1.worker.gpu_model_runner.OmniOutput")
    assert s.fields == ["hidden_states_cpu", "multimodal_outputs", "extra"]
    assert s.defaults == {"multimodal_outputs", "extra"}
    t = class_shape(ix, "vllm.v1.worker.gpu_model_runner.ExecuteModelState")
    assert t.kind == "namedtuple" and t.defaults == {"sampled", "hidden_states"}


def test_a_local_named_for_another_field_passed_by_position_fires(ix):
    got = class_findings(RUNNER.format(line="return OmniOutput(multimodal_outputs)"), ix, where="NPURunner")
    assert [(d.code, d.line, d.severity) for d in got] == [("ONP4483", 6, "error")]
    m = got[0].message
    assert m.startswith(code_info("ONP4483").title) and "`multimodal_outputs` lands in field `hidden_states_cpu`" in m
    assert "multimodal_outputs, extra left to their defaults" in m and "number 2" in m


def test_a_field_added_in_the_middle_shifts_the_later_argument(ix):
    # the caller's build of the older 3-field record: `hidden_states` now lands in `sampled`
    got = codes(ix, "self.s = ExecuteModelState(scheduler_output, logits, hidden_states)")
    assert got == [("ONP4483", 6)]


@pytest.mark.parametrize("line", [
    "return OmniOutput(hidden_states_cpu, multimodal_outputs)",          # each name in its own field
    "return OmniOutput(h)",                                                # a name no field has
    "return OmniOutput(h, multimodal_outputs=multimodal_outputs)",        # the other field by keyword
    "self.s = ExecuteModelState(scheduler_output, logits, None, hidden_states)",
    "return OmniOutput(*[multimodal_outputs])",                             # the order is not read
    "return OmniOutput(self.multimodal_outputs)",                          # no bare name
])
def test_names_in_their_own_field_or_no_field_s_name_do_not_fire(ix, line):
    assert codes(ix, line) == []


def test_a_class_with_its_own_init_or_no_record_does_not_fire(ix):
    code = D('''
        class Box:
            def __init__(self, a, b=None):
                self.a, self.b = a, b

        class NPURunner:
            def f(self, b):
                return Box(b)
    ''')
    assert class_findings(code, ix, where="NPURunner") == []


def test_a_record_the_module_defines_itself_fires_through_ready_findings(ix):
    code = D('''
        from typing import NamedTuple

        class State(NamedTuple):
            hidden: object
            logits: object = None

        class NPURunner:
            def f(self, logits, hidden):
                a = State(logits)
                b = State(hidden, logits)
                return a, b
    ''')
    got = [d for d in ready_findings(code, ix, "NPURunner") if d.code == "ONP4483"]
    assert [(d.line, "State (this module:4)" in d.message) for d in got] == [(10, True)]


def test_a_record_of_a_written_sibling_fires_and_is_replaced_when_fixed(ix):
    ar = "from typing import NamedTuple\n\nclass St(NamedTuple):\n    a: object\n    b: object = None\n"
    gen = "from .npu_ar import St\n\nclass Gen:\n    def f(self, b):\n        self.s = St(b)\n"
    w = "vllm_omni.platforms.npu.worker."
    ports = [RunnerPort("g.A", w + "npu_ar", "AR", None, ar, [], [], [], 0.0),
             RunnerPort("g.G", w + "npu_gen", "Gen", None, gen, [], [], [], 0.0)]
    sibling_findings(ports, ix)
    assert [(d.code, d.line) for d in ports[1].not_ready] == [("ONP4483", 5)]
    assert "written module " + w + "npu_ar:3" in ports[1].not_ready[0].message
    ports[1].code = gen.replace("St(b)", "St(None, b)")
    sibling_findings(ports, ix)
    assert ports[1].not_ready == [] and ports[1].diagnostics == []


def test_a_build_that_shifts_several_fields_is_one_finding_naming_them(ix):
    got = class_findings(RUNNER.format(line="self.s = ExecuteModelState(logits, hidden_states, scheduler_output)"), ix,
                         where="NPURunner")
    assert [d.code for d in got] == ["ONP4483"]
    assert "argument 1 `logits` lands in field `scheduler_output`" in got[0].message
    assert "also `hidden_states` in `logits`, `scheduler_output` in `sampled`" in got[0].message
