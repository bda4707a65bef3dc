"""Issues 31/32: ONP4538 (`name = value,`, a keyword line of a call left standing as a statement) on the from-scratch
port (`port --release` / `--class`: the pipeline's `tuples` pass) as on the update. Fixtures written here."""
import textwrap
from types import SimpleNamespace as NS

import pytest

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.port import pipeline
from omni_npu_port.port.ready import self_tuples, stray_tuples
from omni_npu_port.port.update_release import flag_self_tuples

D = textwrap.dedent
WRITTEN = D('''
    class NPURunner:
        def execute_model(self, desc, routed):
            out = self.model(desc=desc)
            desc = desc,
            return out
''')
OMNI = "class G:\n    def execute_model(self, desc):\n        return self.model(desc=desc)\n"
NPU = "class N:\n    def execute_model(self, desc):\n        return self.model(desc)\n"


def class_port(code, omni=OMNI, npu=NPU, gpu="", history=()):
    cp = pipeline.ClassPort(NS(module_text=omni), NS(module="m.npu_runner", cls="NPURunner", hand=None), "m.G",
                            code=code)
    ctx = NS(npu_base=NS(module_text=npu), gpu_base=NS(module_text=gpu), history=tuple(history))
    return cp, ctx


def run(monkeypatch, cp, ctx):
    monkeypatch.setattr(pipeline, "PASSES", [pipeline.class_pass("tuples")])
    return pipeline.run_class(cp, ctx)


def test_the_release_port_flags_a_bare_tuple_no_input_has(monkeypatch):
    rp = run(monkeypatch, *class_port(WRITTEN))
    assert [(d.code, d.line, d.severity) for d in rp.not_ready] == [("ONP4538", 5, "error")]
    assert rp.not_ready[0].message == f"{code_info('ONP4538').title}: NPURunner: `desc = desc,`"
    assert [d.code for d in rp.diagnostics] == ["ONP4538"]   # said in the report too


@pytest.mark.parametrize("where", ["omni", "npu", "gpu", "history"])
def test_a_bare_tuple_an_input_has_at_that_statement_does_not_fire(monkeypatch, where):
    had = "def f(desc):\n    desc = desc,\n"
    kw = {"omni": {"omni": had}, "npu": {"npu": had}, "gpu": {"gpu": had},
          "history": {"history": [NS(module_text=had)]}}
    rp = run(monkeypatch, *class_port(WRITTEN, **kw[where]))
    assert rp.not_ready == [] and rp.diagnostics == []


def test_another_statement_of_the_inputs_does_not_excuse_it(monkeypatch):
    rp = run(monkeypatch, *class_port(WRITTEN, omni="def f(desc):\n    desc = other,\n"))
    assert [d.code for d in rp.not_ready] == ["ONP4538"]


@pytest.mark.parametrize("line", ["desc = (desc,)", "desc = desc, routed", "desc, = desc", "desc = [desc]"])
def test_a_bracketed_tuple_a_pair_or_an_unpack_does_not_fire(monkeypatch, line):
    rp = run(monkeypatch, *class_port(WRITTEN.replace("desc = desc,", line)))
    assert rp.not_ready == []


def test_the_pass_runs_after_ready_and_keeps_its_findings(monkeypatch):
    names = [p.name for p in pipeline.PASSES]
    assert names.index("tuples") == names.index("ready") + 1 and not pipeline.class_pass("tuples").batch
    assert "ONP4538" in pipeline.class_pass("tuples").codes
    cp, ctx = class_port(WRITTEN)
    earlier = NS(code="ONP4421")
    cp.not_ready = [earlier]
    pipeline.class_pass("tuples").run(cp, ctx)
    assert [d.code for d in cp.not_ready] == ["ONP4421", "ONP4538"]


def test_the_update_flags_through_the_same_check():
    r = NS(cls="NPURunner", code=WRITTEN, not_ready=[], diagnostics=[])
    flag_self_tuples([r], {"NPURunner": [OMNI, None]})
    assert [(d.code, d.line) for d in r.not_ready] == [("ONP4538", 5)] and r.diagnostics == r.not_ready
    r2 = NS(cls="NPURunner", code=WRITTEN, not_ready=[], diagnostics=[])
    flag_self_tuples([r2], {"NPURunner": [WRITTEN]})   # the new port has it: not the update's
    assert r2.not_ready == []
    assert stray_tuples("def f(:", [], "R") == [] and self_tuples(WRITTEN)[0][:2] == (5, "desc = desc,")
