"""Audit rule 12 (issue 32, made from the held-out 0.22 miss `OmniNPUModelRunner.load_model`): where the update keeps
an override of the NPU copy because the new port inherits the GPU method, the copy's method is diffed against what the
GPU method gained since PREV (ONP4132). Fixtures: texts written here and tests/fixtures/update. Nothing is fetched."""
from pathlib import Path
from types import SimpleNamespace as NS

from omni_npu_port.port.audit import DRIFT_CODES, AuditSides, gpu_gained, kept_findings, kept_lag, method_keys, stream

UPD = Path(__file__).parent / "fixtures" / "update"
GPU_PREV = "def load_model(self):\n    super().load_model()\n    self._init_talker_mtp()\n"
GPU_NEW = GPU_PREV + "    self._prewarm_attention_capture_workspaces()\n"
COPY = "def load_model(self):\n    NPUModelRunner.load_model(self)\n    enable_sp(self.vllm_config)\n    self._init_talker_mtp()\n"
DUMMY = ("def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None):\n"
         "    hidden = self._model_forward(self.input_ids[:num_tokens], self.positions[:num_tokens])\n"
         "    torch.npu.synchronize()\n    self.talker_ids[:num_tokens].zero_()\n    return hidden\n")


def test_a_line_the_gpu_method_gained_that_the_kept_override_lacks_is_its_lag():
    assert gpu_gained(GPU_PREV, GPU_NEW, stream(method_keys(COPY))) == [
        "self . _prewarm_attention_capture_workspaces ( )"]
    assert "ONP4132" in DRIFT_CODES


def test_no_lag_where_the_override_has_the_line_vllm_has_it_or_the_gpu_method_gained_nothing():
    prewarmed = COPY + "    self._prewarm_attention_capture_workspaces()\n"
    assert gpu_gained(GPU_PREV, GPU_NEW, stream(method_keys(prewarmed))) == []
    theirs = stream(method_keys("def load_model(self):\n    self._prewarm_attention_capture_workspaces()\n"))
    assert gpu_gained(GPU_PREV, GPU_NEW, stream(method_keys(COPY)), theirs) == []
    assert gpu_gained(GPU_PREV, GPU_PREV, stream(method_keys(COPY))) == []
    assert gpu_gained(None, GPU_NEW, stream(method_keys(COPY))) == []     # not a method of PREV's GPU runner
    closing = GPU_PREV.replace("self._init_talker_mtp()", "self._init_talker_mtp(\n    )")
    assert gpu_gained(GPU_PREV, closing, stream(method_keys(COPY))) == []   # a line naming nothing


def test_kept_lag_reads_both_gpu_runners_from_the_sources():
    gpu = NS(gpu="vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner")
    sides = AuditSides(NS(origin=UPD / "omni_prev"), NS(origin=UPD / "omni_next"), str(UPD / "omni_prev"), "next")
    assert kept_lag(gpu, gpu, sides, "_dummy_run", DUMMY) == ["self . last_num_tokens = num_tokens"]   # fires
    caught_up = DUMMY.replace("    return", "    self.last_num_tokens = num_tokens\n    return")
    assert kept_lag(gpu, gpu, sides, "_dummy_run", caught_up) == []
    assert kept_lag(gpu, gpu, sides, "new_feature", DUMMY) == []     # not in PREV's GPU runner
    assert kept_lag(gpu, gpu, sides, "_dummy_run", None) == []       # no override of the copy


def _kept(method: str, copy: str) -> list:
    "kept_findings on the update fixtures for one override the update keeps (ONP4504), PREV's port `copy` as well."
    gpu = "vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner"
    r = NS(gpu=gpu, diagnostics=[NS(code="ONP4504", where=method, message=f"keeps {method}")])
    sides = AuditSides(NS(origin=UPD / "omni_prev"), NS(origin=UPD / "omni_next"), str(UPD / "omni_prev"), "next")
    return kept_findings(r, NS(gpu=gpu), sides, ({method: copy}, {method: copy}, {}), ("R", "r.py"), set())


def test_onp4131_only_where_the_new_gpu_runner_dropped_the_method():
    # made from 0.18's false OmniNPUModelRunner.load_model: the new port inherits a method omni's GPU runner still has
    helper = "def old_helper(self, x):\n    torch.npu.synchronize()\n    return x.to(self.device)\n"
    assert [f.code for f in _kept("old_helper", helper)] == ["ONP4131"]     # fires: omni's GPU runner dropped it
    caught_up = DUMMY.replace("    return", "    self.last_num_tokens = num_tokens\n    return")
    assert [f.code for f in _kept("_dummy_run", caught_up)] == ["ONP4128"]   # must not: NEW's GPU runner has it
    assert [f.code for f in _kept("_dummy_run", DUMMY)] == ["ONP4132"]       # what it gained, the copy lacks: lag
