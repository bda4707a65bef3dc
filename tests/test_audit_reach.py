"""Audit rules 7-10 (issue 32, made from the errors of the blind sets 0.28 and 0.30): a method the GPU runner added is
owed only where the copy would run it; a dropped method the copy keeps little changed is drift; an argument of a call
the copy never makes, and a new guarded block the copy does in another method, are not owed.
Fixtures: texts written here and tests/fixtures/update (written for the tests). Nothing is fetched."""
import ast
import shutil
from pathlib import Path

from omni_npu_port.port.audit import DRIFT_CODES, audit, callers, kept_copy, run_by_copy

FIX = Path(__file__).parent / "fixtures"
UPD, STACK = FIX / "update", FIX / "generalize" / "stack"
SOURCES = (str(STACK / "vllm"), str(STACK / "vllm_ascend"))
NPU_FILE = "vllm_omni/platforms/npu/worker/npu_model_runner.py"
HELPER = "    def old_helper(self, x):\n        torch.npu.synchronize()\n        return x.to(self.device)\n"


def methods(**texts):
    return {n: ast.parse(t).body[0] for n, t in texts.items()}


GPU = methods(sample_tokens="def sample_tokens(self):\n    return self._post_sample(1)",
              _snapshot="def _snapshot(self):\n    return self._step_outputs() + GPUAR._defer(self)",
              _post_sample="def _post_sample(self, x):\n    return self._hook(x)",
              _hook="def _hook(self, x):\n    return x", _step_outputs="def _step_outputs(self):\n    return []",
              _defer="def _defer(self):\n    return False", load_model="def load_model(self):\n    return None")
ADDED = ["_post_sample", "_hook", "_step_outputs", "_defer", "load_model"]


def test_a_new_method_a_copied_method_calls_is_owed_and_its_callees_too():
    assert callers(GPU)["_defer"] == {"_snapshot"} and callers(GPU)["_hook"] == {"_post_sample"}
    assert run_by_copy(ADDED, GPU, {"sample_tokens"}) == ["_post_sample", "_hook", "load_model"]


def test_a_new_method_only_code_the_copy_left_out_calls_is_not_owed():
    assert "_step_outputs" not in run_by_copy(ADDED, GPU, {"sample_tokens"})
    assert run_by_copy(ADDED, GPU, {"sample_tokens", "_snapshot"}) == ADDED   # with its caller copied: owed
    assert run_by_copy(["load_model"], GPU, set()) == ["load_model"]           # no caller: the framework's


def test_kept_copy_tells_the_previous_port_from_the_peoples_rewrite():
    old = "def f(out):\n    meta = out.get('meta')\n    ids = meta.get('req_id')\n    return GPUAR.marker(meta) and ids\n"
    assert kept_copy(old, old.replace("GPUAR", "NPUAR") + "\n")
    assert not kept_copy(old, "def f(out):\n    return resolve_routing(out, strict=True)\n")
    assert not kept_copy(old, None) and not kept_copy(None, old)


def audit_copy(tmp_path, helper: str):
    copy = tmp_path / "omni_copy"
    shutil.copytree(UPD / "omni_prev", copy)
    f = copy / NPU_FILE
    assert HELPER in f.read_text()
    f.write_text(f.read_text().replace(HELPER, helper))
    return audit(str(UPD / "omni_next"), str(copy), str(UPD / "omni_prev"), sources=SOURCES,
                 cache_dir=tmp_path / "cache", index="http://127.0.0.1:9/")


def test_a_dropped_method_the_copy_keeps_little_changed_is_drift(tmp_path):
    found = audit_copy(tmp_path, HELPER.replace("        return", "        x = x.contiguous()\n        return"))
    got = [f for f in found if f.method == "old_helper"]
    assert [(f.code, f.code in DRIFT_CODES) for f in got] == [("ONP4131", True)]
    text = (tmp_path / "omni_copy" / NPU_FILE).read_text()
    assert text.splitlines()[got[0].line - 1].strip() == "def old_helper(self, x):"


def test_a_dropped_method_the_people_rewrote_stays_a_note(tmp_path):
    found = audit_copy(tmp_path, "    def old_helper(self, x):\n        event = torch.npu.Event()\n"
                                 "        event.record()\n        pinned = x.pin_memory()\n"
                                 "        return self.npu_cast(pinned, non_blocking=True)\n")
    got = [f for f in found if f.method == "old_helper"]
    assert [(f.code, f.severity) for f in got] == [("ONP4128", "info")]


GPU_STEP = """def step(self, ids):
    update = getattr(self.model, "update", None)
    if update is not None:
        update(
            ids=ids,
            req_ids=self.req_ids,
        )
    out = self.run(
        ids,
        step_id=self.step_id,
    )
    def builder():
        return self.build(out, step_id=self.step_id)
    return builder()
"""


def test_an_argument_of_a_call_the_copy_never_makes_is_not_owed():
    from omni_npu_port.port.audit import Change, outside, owed, stream
    own = stream(["out = self . run (", "ids ,", ")", "return out"])
    gone = outside(GPU_STEP, own)
    assert "req_ids = self . req_ids ," in gone                                  # only in `update(`: never made
    assert "return self . build ( out , step_id = self . step_id )" in gone     # only in `def builder`
    c = Change("conflict", 3, [], ["            req_ids=self.req_ids,"])
    assert owed(c, own, "", None, gone) is None


def test_an_argument_of_a_call_the_copy_makes_is_owed():
    from omni_npu_port.port.audit import Change, outside, owed, stream
    own = stream(["out = self . run (", "ids ,", ")", "update ( ids )", "def builder ( ) :", "return out"])
    gone = outside(GPU_STEP, own)
    assert "step_id = self . step_id ," not in gone and "req_ids = self . req_ids ," not in gone
    assert "out = self . run (" not in outside(GPU_STEP, stream(["return out"]))   # a new call's first line stays
    c = Change("add", 3, [], ["        step_id=self.step_id,"])
    assert owed(c, own, "", None, gone).update == ["        step_id=self.step_id,"]


GPU_EXEC = '''def execute(self, hs, n):
    step = self.save(hs)
    if (
        step is not None
        and self.include_hidden()
    ):
        hs_cpu = hs[:n].detach().to("cpu").contiguous()
    return step
'''
WRITTEN = {"if (", "step is not None", "and self . include_hidden ( )", ") :",
           'hs_cpu = hs [ : n ] . detach ( ) . to ( "cpu" ) . contiguous ( )'}


def test_a_new_guarded_block_the_copy_does_in_another_method_is_not_owed():
    from omni_npu_port.port.audit import moved_blocks, statement_shapes
    sample = 'def sample(self, h, k):\n    if k:\n        cpu = h[:k].detach().to("cpu").contiguous()\n'
    assert moved_blocks(GPU_EXEC, WRITTEN, statement_shapes(sample)) == WRITTEN


def test_a_guarded_block_is_owed_where_the_copy_lacks_its_body_or_it_is_not_new():
    from omni_npu_port.port.audit import moved_blocks, statement_shapes
    other = statement_shapes('def sample(self, h, k):\n    cpu = h[:k].detach().to("npu").contiguous()\n')
    assert moved_blocks(GPU_EXEC, WRITTEN, other) == set()                       # another step: owed
    same = statement_shapes('def sample(self, h, k):\n    cpu = h[:k].detach().to("cpu").contiguous()\n')
    assert moved_blocks(GPU_EXEC, WRITTEN - {"step is not None"}, same) == set()  # an existing guard changed: owed


def test_a_dropped_gpu_method_the_copy_keeps_is_found_from_the_sources_whatever_the_port_wrote():
    from types import SimpleNamespace as NS

    from omni_npu_port.port.audit import AuditSides, dropped_kept
    gpu = NS(gpu="vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner")
    sides = AuditSides(NS(origin=UPD / "omni_prev"), NS(origin=UPD / "omni_next"), str(UPD / "omni_prev"), "next")
    kept = HELPER.replace("    def", "def").replace("\n        ", "\n    ")
    assert dropped_kept(gpu, gpu, sides, {"old_helper": kept}, set()) == {"old_helper"}               # fires
    rewritten = "def old_helper(self, x):\n    return self.npu_cast(x.pin_memory(), blocking=False, stream=self.s)\n"
    assert dropped_kept(gpu, gpu, sides, {"old_helper": rewritten}, set()) == set()      # the people's own
    assert dropped_kept(gpu, gpu, sides, {"old_helper": kept}, {"old_helper"}) == set()  # said already
    assert dropped_kept(gpu, gpu, sides, {"_dummy_run": kept}, set()) == set()           # not dropped


def test_a_keyword_argument_passed_as_its_own_name_is_the_copys_positional_one():
    from omni_npu_port.port.audit import Change, owed, passed, stream
    own = stream(["self . state = State (", "hidden ,", "step_id ,", ")"])
    assert passed("step_id = step_id ,", own)                                      # fires
    assert owed(Change("add", 2, [], ["            step_id=step_id,"]), own, "") is None
    assert not passed("step_id = step_id ,", stream(["self . state = State ( hidden )"]))   # the copy lacks it
    assert not passed("step_id = self . step_id ,", own)                           # another value
    assert owed(Change("add", 2, [], ["            step_id=step_id,"]), stream(["State ( hidden )"]), "") is not None
