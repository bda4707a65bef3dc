"""Issue 24, parts 5 and 6: the worker constructs as catalog records (ranges checked against real vllm-ascend and
vllm sources) and translator rules; drift judged three-way on statements, methods found in the MRO and in sibling
runners, each finding once. Fixtures are written here; the real releases come from the package cache."""

import pytest

from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.sources.conformance import OK, check_record
from omni_npu_port.translate.engine import translate_source
from omni_npu_port.translate.rules import compile_rules

WORKER_RECORDS = ("dev.device-type", "spec.proposer-dummy-run-v013", "spec.proposer-dummy-run", "worker.base-class",
                  "sig.dummy-run-aclgraph")


def codes(t):
    return sorted(d.code for d in t.diagnostics)


# --- part 5: records, ranges checked against the real sources -------------------------------------------------
@pytest.mark.parametrize("version", ["0.13.0rc1", "0.13.0rc2", "0.15.0rc1", "0.16.0rc1", "0.30.0rc2"])
def test_worker_records_hold_exactly_where_the_real_vllm_ascend_says(release_source, version):
    "Every worker record is ok in the source where its range holds, and not ok where it does not."
    tree = release_source(f"vllm-ascend=={version}")
    for rid in WORKER_RECORDS:
        r = check_record(tree, CATALOG[rid])
        assert (r.check == OK) == r.holds, (rid, version, r.check, r.details)


def test_the_gpu_side_of_the_proposer_and_worker_records(release_source):
    "vllm's EagleProposer.dummy_run takes use_cudagraphs through 0.30 and is gone in 0.34; the GPU Worker stays."
    old, new = release_source("vllm==0.30.0"), release_source("vllm==0.34.0")
    assert check_record(old, CATALOG["spec.proposer-dummy-run"]).check == OK
    assert check_record(new, CATALOG["spec.proposer-dummy-run"]).check != OK
    from omni_npu_port.sources.symbols import signature
    assert signature(old, CATALOG["spec.proposer-dummy-run"].gpu_symbol).parameters["use_cudagraphs"]
    assert check_record(new, CATALOG["worker.base-class"]).check == OK


WORKER = ('import os\nimport torch\nfrom vllm.v1.worker.gpu_worker import Worker as GPUWorker\n\n'
          'class OmniWorker(GPUWorker):\n    def init_device(self):\n'
          '        if self.device_config.device_type == "cuda":\n'
          '            os.environ.pop("NCCL_ASYNC_ERROR_HANDLING", None)\n'
          '            self.device = torch.device(f"cuda:{self.local_rank}")\n'
          '        return self.device.type != "cuda"\n\n    def helper(self):\n        return "cuda"\n')


def test_worker_constructs_are_rewritten_or_flagged_with_their_severity():
    t = translate_source(WORKER, compile_rules("vllm-ascend==0.18.0"))
    assert codes(t) == ["ONP1001", "ONP1003", "ONP1030", "ONP1030", "ONP1031", "ONP2030", "ONP2033"]
    sev = {d.code: d.severity for d in t.diagnostics}
    assert sev["ONP1030"] == sev["ONP1031"] == "rewrite" and sev["ONP2030"] == sev["ONP2033"] == "manual"
    assert 'device_type == "npu"' in t.code and 'torch.device(f"npu:{self.local_rank}")' in t.code
    assert 'self.device.type != "npu"' in t.code
    assert 'return "cuda"' in t.code                      # a string that is no device type or device string stays
    assert "from vllm_ascend.worker.worker import NPUWorker as GPUWorker" in t.code


RUNNER = ('from vllm.v1.spec_decode.eagle import EagleProposer\n'
          'from vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\nclass R(GPUModelRunner):\n'
          '    def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None):\n'
          '        if isinstance(self.drafter, EagleProposer):\n'
          '            self.drafter.dummy_run(num_tokens, use_cudagraphs=cudagraph_runtime_mode is not None)\n'
          '        return cudagraph_runtime_mode\n')


def test_proposer_and_old_dummy_run_constructs_follow_the_target_release():
    ("0.12.0rc1 (before the catalog's first release) calls _dummy_run(aclgraph_runtime_mode=) and its EagleProposer is "
     "no subclass of vllm's; 0.18.0 neither; both proposers refuse use_cudagraphs.")
    old = translate_source(RUNNER, compile_rules("vllm-ascend==0.12.0rc1"))
    assert {"ONP1032", "ONP2031", "ONP2032"} <= set(codes(old))
    assert "aclgraph_runtime_mode=None):" in old.code and "use_cudagraphs=cudagraph_runtime_mode" not in old.code.split("ONP2031")[0]
    new = translate_source(RUNNER, compile_rules("vllm-ascend==0.18.0"))
    assert "ONP2031" in codes(new) and "ONP2032" not in codes(new) and "ONP1032" not in codes(new)
    assert "AscendEagleProposer.dummy_run" in next(d.message for d in new.diagnostics if d.code == "ONP2031")


# part 6 (drift judged on statements by hand rules) went with the rule pile: the audit is now the update's diff
# (issue 32), tested in tests/test_audit.py.
