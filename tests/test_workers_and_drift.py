"""Issue 24, parts 5 and 6: the worker constructs as catalog records (ranges checked against real vllm-ascend and
vllm sources) and translator rules; drift judged three-way on statements, methods found in the MRO and in sibling
runners, each finding once. Fixtures are written here; the real releases come from the package cache."""
import shutil
from pathlib import Path

import pytest

from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.port import audit
from omni_npu_port.sources.conformance import OK, check_record
from omni_npu_port.translate.engine import translate_source
from omni_npu_port.translate.rules import compile_rules

AF = Path(__file__).parent / "fixtures" / "audit"
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
    "0.12.0rc1 (before the catalog's first release) calls _dummy_run(aclgraph_runtime_mode=) and its EagleProposer is "
    "no subclass of vllm's; 0.18.0 neither; both proposers refuse use_cudagraphs."
    old = translate_source(RUNNER, compile_rules("vllm-ascend==0.12.0rc1"))
    assert {"ONP1032", "ONP2031", "ONP2032"} <= set(codes(old))
    assert "aclgraph_runtime_mode=None):" in old.code and "use_cudagraphs=cudagraph_runtime_mode" not in old.code.split("ONP2031")[0]
    new = translate_source(RUNNER, compile_rules("vllm-ascend==0.18.0"))
    assert "ONP2031" in codes(new) and "ONP2032" not in codes(new) and "ONP1032" not in codes(new)
    assert "AscendEagleProposer.dummy_run" in next(d.message for d in new.diagnostics if d.code == "ONP2031")


# --- part 6: drift on statements, three-way ---------------------------------------------------------------------
GPU_BASE = ("def execute_model(self, batch):\n    out = self.model(batch)\n    self.sync(out)\n    return out\n", "")
NPU_BASE = "def execute_model(self, batch):\n    out = self.model(batch)\n    torch.npu.synchronize()\n    return out\n"
OMNI_GPU = ("def execute_model(self, batch):\n    out = self.model(batch)\n    self.sync(out)\n"
            "    out = self.extract_multimodal_outputs(out)\n    return out\n")


def test_base_vs_base_differences_are_not_drift():
    "vllm's `self.sync(out)` that vllm-ascend does not have is no omni change: only the omni statement counts."
    npu = NPU_BASE.replace("    return out", "    out = self.extract_multimodal_outputs(out)\n    return out")
    assert audit.drift(OMNI_GPU[0] if isinstance(OMNI_GPU, tuple) else OMNI_GPU, npu, {}, None, "", GPU_BASE, NPU_BASE) == []
    assert audit.drift(OMNI_GPU, npu, {}) != []                      # two-way: the base difference looks like drift
    lost = audit.drift(OMNI_GPU, NPU_BASE, {}, None, "", GPU_BASE, NPU_BASE)
    assert lost == [(None, "1 statement(s) of omni's GPU-side change have no counterpart in the NPU override",
                     ["+ out = self.extract_multimodal_outputs(out)"])]


@pytest.mark.parametrize("npu", [
    "def f(self, x):\n    # a comment\n    y = self.g(x,\n               1,)\n    return y\n",          # comment, layout
    "def f(self, x: int) -> int:\n    y: int = self.g(x, 1)\n    return y\n",                         # annotations
    "def f(self, x):\n    z = self.g(x, 1)\n    return z\n",                                          # a local renamed
])
def test_comment_format_annotation_and_local_rename_are_not_drift(npu):
    gpu = "def f(self, x):\n    y = self.g(x, 1)\n    return y\n"
    assert audit.drift(gpu, npu, {}) == []


def test_a_real_change_is_still_drift():
    gpu = "def f(self, x):\n    y = self.g(x, 1)\n    return y\n"
    for npu in ("def f(self, x):\n    y = self.g(x, 2)\n    return y\n",               # another value
                "def f(self, x):\n    y = self.h(x, 1)\n    return y\n",               # another function
                "def f(self, x):\n    y = self.g(x, 1)\n    return x\n"):              # another result
        assert audit.drift(gpu, npu, {}), npu
    # a long call the NPU copy passes one more (or one fewer) keyword to is its adapted copy, not drift (documented)
    long = "def f(self, x):\n    y = self.run(x, mode=1, size=self.size, flag=True)\n    return y\n"
    assert audit.drift(long, long.replace("flag=True)", "flag=True, npu=1)"), {}) == []
    assert audit.drift(long, long.replace("mode=1", "mode=2"), {}) != []


def test_a_fenced_omni_line_the_gpu_side_changed_is_drift_unless_it_is_npu_base_code():
    gpu = "def f(self, x):\n    x = self.prep(x, self.step)\n    return self.model(x)\n"
    npu = ("def f(self, x):\n    # ----Omni-new----\n    x = self.prep(x)\n    torch.npu.synchronize()\n"
           "    # ----Omni-new----\n    return self.model(x)\n")
    found = audit.drift(gpu, npu, {}, npu_base="def f(self, x):\n    torch.npu.synchronize()\n    return self.model(x)\n")
    assert [d for _, _, d in found] == [["- x = self.prep(x)"]]


# --- part 6: methods found in the MRO and in sibling runners; each finding once -------------------------------
def _tree(tmp_path, name):
    return Path(shutil.copytree(AF / "old_layout", tmp_path / name / "old_layout"))


def _add(path: Path, text: str):
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize("kept_in_sibling", [True, False])
def test_a_method_in_a_sibling_runner_is_no_omission_or_orphan(tmp_path, kept_in_sibling):
    root = _tree(tmp_path, str(kept_in_sibling))
    w = root / "vllm_omni/worker"
    _add(w / "gpu_ar_model_runner.py", "\n    def helper(self):\n        return 1\n")
    if kept_in_sibling: _add(w / "npu/npu_talker_model_runner.py", "\n    def helper(self):\n        return 1\n")
    _add(w / "npu/npu_ar_model_runner.py", "\n    def extra(self):\n        return 2\n")
    _add(w / "talker/gpu_talker_model_runner.py", "\n    def extra(self):\n        return 2\n")   # a GPU sibling has it
    found = {(f.code, f.cls, f.method) for f in audit.audit(str(root), str(root))}
    assert ("ONP4204", "NPUARModelRunner", "extra") not in found
    # kept in another NPU runner: no omission; nowhere on the NPU side: an omission
    assert (("ONP4202", "NPUARModelRunner", "helper") in found) is not kept_in_sibling


def test_each_finding_once():
    f = audit.Finding("ONP4201", "drift", line=3, cls="C", method="m", detail=["+ x"])
    g = audit.Finding("ONP4201", "drift", line=3, cls="C", method="m", detail=["+ x"])
    h = audit.Finding("ONP4201", "drift", line=4, cls="C", method="m", detail=["+ x"])
    assert audit.unique([f, g, h]) == [f, h]


def test_three_way_audit_on_real_releases_has_no_duplicates(release_source):
    found = audit.audit(str(release_source("vllm-omni==0.30.0").origin), str(release_source("vllm-omni==0.30.0").origin),
                    str(release_source("vllm-ascend==0.30.0rc1").origin), "vllm-ascend==0.30.0rc1",
                    str(release_source("vllm==0.30.0").origin))
    keys = [(f.code, f.cls, f.method, f.line, f.message) for f in found]
    assert len(keys) == len(set(keys)) and any(f.code == "ONP4201" for f in found)
