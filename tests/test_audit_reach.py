"""Audit rules 7 and 8 (issue 32, made from the third blind set, omni 0.28 from 0.26): a method the GPU runner added
is owed only where the copy would run it; a method the GPU runner dropped that the copy keeps little changed is drift.
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
