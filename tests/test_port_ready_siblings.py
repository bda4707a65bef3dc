"""Issues 31/32: ONP4422 / ONP4423 read a record a written module imports from a written sibling module (absolute or
relative import), as the sibling stands now: after every class of `port --release` is ported (the `siblings` batch
pass) and at each recomputation of the update (`port --release NEW --from PREV`). Fixtures written here."""
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from omni_npu_port.port import pipeline
from omni_npu_port.port.ready import (class_findings, sibling_findings,
                                      written_modules)
from omni_npu_port.port.release_checks import RunnerPort
from omni_npu_port.port.update_release import update_runners

from ready_stack import stack_index

D = textwrap.dedent
W = "vllm_omni.platforms.npu.worker."
AR = D('''
    from typing import NamedTuple

    class ExecuteModelState(NamedTuple):
        hidden: object
        logits: object
        outputs: object

    class NPUARModelRunner:
        def execute_model(self, h):
            self.execute_model_state = ExecuteModelState(h, None, None)
''')
GEN = D('''
    from {src} import ExecuteModelState

    class NPUGenerationModelRunner:
        def execute_model(self, h, l):
            self.execute_model_state = ExecuteModelState({build})

        def sample_tokens(self):
            ({names}) = self.execute_model_state
            return hidden
''')
# the stack's own record of that name: two fields (what vllm declares), so a fit to the sibling is no fit to it
VLLM = D('''
    from typing import NamedTuple

    class ExecuteModelState(NamedTuple):
        hidden: object
        logits: object
''')


def gen(src=".npu_ar_model_runner", build="h, l, None", names="hidden, logits, outputs"):
    return GEN.format(src=src, build=build, names=names)


def port(module, cls, code):
    return RunnerPort(f"vllm_omni.worker.gpu_{module}.G", W + module, cls, None, code, [], [], [], 0.0)


@pytest.fixture(scope="module")
def ix(tmp_path_factory):
    return stack_index(tmp_path_factory.mktemp("stack"), VLLM)


def findings(code, ix, ar=AR):
    ix.written = written_modules([port("npu_ar_model_runner", "NPUARModelRunner", ar),
                                  port("npu_generation_model_runner", "NPUGenerationModelRunner", code)])
    try: return class_findings(code, ix, where="NPUGenerationModelRunner")
    finally: ix.written = None


@pytest.mark.parametrize("src", [".npu_ar_model_runner", W + "npu_ar_model_runner"])
def test_an_unpack_short_of_the_written_siblings_record_fires(ix, src):
    got = findings(gen(src, names="hidden, logits"), ix)
    assert [d.code for d in got] == ["ONP4423"]
    assert f"written module {W}npu_ar_model_runner:" in got[0].message and "3 fields" in got[0].message


@pytest.mark.parametrize("build, why", [("h, l, None, None", "4 positional arguments, it takes 3"),
                                        ("h, l, None, extra=1", "no field or parameter `extra`")])
def test_a_build_that_does_not_fit_the_written_siblings_record_fires(ix, build, why):
    got = findings(gen(build=build), ix)
    assert [d.code for d in got] == ["ONP4422"] and why in got[0].message and "written module" in got[0].message


def test_what_fits_the_written_sibling_does_not_fire_though_the_stacks_record_would_not_fit(ix):
    assert findings(gen(), ix) == []
    stack = class_findings(gen("vllm.v1.worker.gpu_model_runner"), ix, where="NPUGenerationModelRunner")
    assert sorted(d.code for d in stack) == ["ONP4422", "ONP4423"]   # the same lines against vllm's 2 fields


def test_no_view_of_the_siblings_or_a_sibling_that_defines_no_such_record_says_nothing(ix):
    short = gen(names="hidden, logits")
    assert class_findings(short, ix, where="NPUGenerationModelRunner") == []
    assert findings(short, ix, ar="class NPUARModelRunner:\n    pass\n") == []
    assert findings(short.replace(".npu_ar_model_runner", ".npu_other"), ix) == []   # not a written module


def test_a_sibling_that_imports_the_record_from_the_stack_gives_the_stacks_shape(ix):
    ar = "from vllm.v1.worker.gpu_model_runner import ExecuteModelState\n\nclass NPUARModelRunner:\n    pass\n"
    got = findings(gen(), ix, ar=ar)
    assert {d.code for d in got} == {"ONP4422", "ONP4423"} and "imported by the written module" in got[0].message
    assert findings(gen(build="h, l", names="hidden, logits"), ix, ar=ar) == []


def test_the_release_port_checks_the_siblings_once_every_class_is_ported(ix, monkeypatch):
    ports = [port("npu_ar_model_runner", "NPUARModelRunner", AR),
             port("npu_generation_model_runner", "NPUGenerationModelRunner", gen(names="hidden, logits"))]
    assert all(p.ready for p in ports)   # the per-class passes saw no sibling
    monkeypatch.setattr(pipeline, "PASSES", [pipeline.class_pass("siblings")])
    pipeline.run_batch(ports, SimpleNamespace(index=ix))
    assert ports[0].ready and not ports[1].ready
    assert [d.code for d in ports[1].not_ready] == [d.code for d in ports[1].diagnostics] == ["ONP4423"]
    ports[1].code = gen()   # fixed: the pass run again replaces its earlier finding
    pipeline.run_batch(ports, SimpleNamespace(index=ix))
    assert ports[1].ready and ports[1].diagnostics == [] and ix.written is None


def test_the_pass_runs_after_the_per_class_passes_and_before_the_judge():
    names = [p.name for p in pipeline.PASSES]
    assert pipeline.class_pass("siblings").batch and names.index("siblings") < names.index("judge")
    assert all(names.index("siblings") > i for i, p in enumerate(pipeline.PASSES) if not p.batch)


def _prev(tmp_path: Path, modules: dict) -> str:
    root = tmp_path / "prev"
    d = root / Path(*W.strip(".").split("."))
    d.mkdir(parents=True)
    for p in (root / "vllm_omni", *d.relative_to(root).parents):
        if str(p) != ".": (root / p / "__init__.py").touch()
    for m, code in modules.items(): (d / f"{m}.py").write_text(code)
    return str(root)


@pytest.mark.parametrize("names, fires", [("hidden, logits", True), ("hidden, logits, outputs", False)])
def test_the_update_reads_the_written_sibling_at_each_recomputation(ix, tmp_path, names, fires):
    code = gen(names=names)
    prev = _prev(tmp_path, {"npu_ar_model_runner": AR, "npu_generation_model_runner": code})
    new = [port("npu_ar_model_runner", "NPUARModelRunner", AR),
           port("npu_generation_model_runner", "NPUGenerationModelRunner", code)]
    for r in new: r.hand = f"{r.module}.{r.cls}"   # PREV's hand runner in the same place: the update takes it
    ports = SimpleNamespace(runners=new, omni="0.0.1")
    runners, _ = update_runners(ports, ports, prev, "comment", lambda name, was: (set(), set()), ix)
    ix.written = None
    assert [d.code for d in runners[1].not_ready] == (["ONP4423"] if fires else []) and runners[0].not_ready == []
    sibling_findings(runners, ix)   # the update's last pass: the same, nothing stale, nothing twice
    assert [d.code for d in runners[1].not_ready] == (["ONP4423"] if fires else [])
    assert [d.code for d in runners[1].diagnostics if d.code == "ONP4423"] == (["ONP4423"] if fires else [])
