"""Issue 24, part 6 (precision, learnt from the blind held-out sets 0.16.0 -> 0.18.0 and 0.22.0 -> 0.24.0): base code
of an older vllm release omni's GPU copy still holds, a `return` matched only where it returns, a method omni itself
removed by the NPU release (a note, ONP4211, not an omission), and a class-qualified call to a runner's helper written
with the counterpart runner's name. Each rule is paired with a change of the same shape it must still report. Fixtures
are written here."""
import shutil
from pathlib import Path

import pytest

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.port.audit import (ClassGraph, audit, find_runners, pair_names, pair_runners)
from omni_npu_port.port.locate import PortError, open_tree
from omni_npu_port.sources.symbols import SymbolIndex

from audit_helpers import AUDIT_FIXTURES, lost, three_way, vllm_source


# --- base code of an older vllm release (the vllm the previous omni release paired with) -----------------------------
OLD_VLLM = ("def sample(self, out):\n    cfg = self.spec\n    if cfg.use_eagle() and not cfg.padded:\n"
            "        assert isinstance(self.drafter, EagleProposer)\n        self.propose(out)\n")
NEW_VLLM = ("def sample(self, out):\n    cfg = self.spec\n    use_gpu = (cfg.use_eagle() or cfg.draft()) and not cfg.padded\n"
            "    if use_gpu:\n        assert isinstance(self.drafter, EagleProposer | DraftProposer)\n        self.propose(out)\n")
GPU_LAGS = OLD_VLLM + "    self.omni_pack(out)\n"   # omni's copy: vllm's older form, and omni's own line
NPU_NEW = ("def sample(self, out):\n    cfg = self.spec\n    padded = (cfg.use_eagle() or cfg.draft()) and not cfg.padded\n"
           "    if padded:\n        self.propose(out)\n    self.omni_pack(out)\n")


def test_statements_of_an_older_vllm_release_are_base_code():
    assert len(lost(three_way(GPU_LAGS, NPU_NEW, NEW_VLLM))) == 2            # without the older release: read as omni's
    assert three_way(GPU_LAGS, NPU_NEW, NEW_VLLM, history=[(OLD_VLLM, "")]) == []


def test_omnis_own_statements_stay_its_change_with_an_older_release_given():
    npu = NPU_NEW.replace("    self.omni_pack(out)\n", "")
    assert lost(three_way(GPU_LAGS, npu, NEW_VLLM, history=[(OLD_VLLM, "")])) == ["+ self.omni_pack(out)"]
    gpu = GPU_LAGS.replace("and not cfg.padded:", "and not cfg.padded and self.omni_ready:")   # no vllm release has it
    assert lost(three_way(gpu, NPU_NEW, NEW_VLLM, history=[(OLD_VLLM, "")])) == [
        "+ if cfg.use_eagle() and (not cfg.padded) and self.omni_ready:"]


# --- a return matched where it returns ------------------------------------------------------------------------------
VLLM_SAMPLER = ("def dummy_sampler(self, h):\n    if self.sampler is None:\n        return torch.tensor([])\n"
                "    out = self.sampler(h)\n    return out\n")
GPU_SAMPLER = "def dummy_sampler(self, h) -> torch.Tensor:\n    logger.warning('not implemented')\n    return torch.tensor([])\n"
NPU_SAMPLER = "def dummy_sampler(self, h) -> None:\n    logger.warning('not implemented')\n    return None\n"


def test_a_return_the_base_has_only_under_a_guard_is_omnis_change():
    assert lost(three_way(GPU_SAMPLER, NPU_SAMPLER, VLLM_SAMPLER)) == ["+ return torch.tensor([])"]
    assert three_way(GPU_SAMPLER, GPU_SAMPLER.replace("-> torch.Tensor", ""), VLLM_SAMPLER) == []   # mirrored


def test_a_return_the_base_has_at_the_same_place_is_base_code():
    top = "def dummy_sampler(self, h):\n    return torch.tensor([])\n"
    assert three_way(GPU_SAMPLER, NPU_SAMPLER, top) == []
    guarded = GPU_SAMPLER.replace("    return torch.tensor([])\n", "    if self.sampler is None:\n        return torch.tensor([])\n")
    assert three_way(guarded, NPU_SAMPLER, VLLM_SAMPLER) == []   # under the same guard as vllm's: base code


# --- a class-qualified call to a runner's helper, written with the counterpart runner's name ---------------------------
GPU_AR = ("\n    @staticmethod\n    def _is_marker(value):\n        return bool(value)\n\n"
          "    def sparse_ids(self, outputs):\n        return [r for r, m in outputs.items() if GPUARModelRunner._is_marker(m)]\n")


def _audit_with(tmp_path: Path, npu_text: str, gpu_text: str = GPU_AR) -> list:
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / "old_layout"))
    for rel, text in (("vllm_omni/worker/gpu_ar_model_runner.py", gpu_text), ("vllm_omni/worker/npu/npu_ar_model_runner.py", npu_text)):
        (root / rel).write_text((root / rel).read_text() + text)
    found = audit(str(root), str(root), gpu_base=str(_vllm_only(tmp_path)))
    return [f for f in found if f.method == "sparse_ids"]


def test_the_pairs_by_name_give_the_counterpart_names():
    tree = open_tree(str(AUDIT_FIXTURES / "old_layout"))
    graph = ClassGraph(SymbolIndex([tree]))
    r = find_runners(graph, tree)
    names = pair_names(pair_runners(r, r))
    assert {"GPUARModelRunner": "NPUARModelRunner", "OmniGPUModelRunner": "OmniNPUModelRunner"}.items() <= names.items()
    assert all(v == k.replace("GPU", "NPU", 1) for k, v in names.items())   # pairs by name only


def test_the_same_helper_called_by_the_counterpart_runners_name_is_the_same_statement(tmp_path):
    assert _audit_with(tmp_path, GPU_AR.replace("GPUARModelRunner._is_marker", "NPUARModelRunner._is_marker")) == []


def test_another_class_or_another_helper_is_still_drift(tmp_path):
    for other in ("OtherRunner._is_marker", "NPUARModelRunner._is_other"):
        found = _audit_with(tmp_path / other, GPU_AR.replace("GPUARModelRunner._is_marker", other))
        assert [f.code for f in found] == ["ONP4201"], found
        assert found[0].detail == ["+ return [r for r, m in outputs.items() if GPUARModelRunner._is_marker(m)]"]   # as written


# --- a method omni itself removed by the NPU release ------------------------------------------------------------------
MERGE = ("\n    def merge_info(self, rid, payload):\n        state = self.requests.get(rid)\n        if state is None:\n"
         "            return\n        state.info.update(payload)\n")


def _release(tmp_path: Path, name: str, version: str, gpu_extra: str = "", npu_bases: str = "") -> Path:
    "The older-layout fixture as vLLM-Omni `version`: OmniGPUModelRunner gains `gpu_extra`; OmniNPUModelRunner's bases `npu_bases`."
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / name))
    (root / "vllm_omni/version.py").write_text(f"__version__ = {version!r}\n")
    gpu = root / "vllm_omni/worker/gpu_model_runner.py"
    gpu.write_text(gpu.read_text() + gpu_extra)
    if npu_bases:
        npu = root / "vllm_omni/worker/npu/npu_model_runner.py"
        npu.write_text(npu.read_text().replace("(OmniGPUModelRunner, NPUModelRunner)", f"({npu_bases})"))
    return root


def _on_merge(found) -> list:
    return [(f.code, f.severity) for f in found if f.method == "merge_info"]


def test_a_method_omni_removed_by_the_npu_release_is_a_note_not_an_omission(tmp_path):
    gpu = _release(tmp_path, "n", "0.1.0", MERGE)
    npu = _release(tmp_path, "n1", "0.2.0", npu_bases="NPUModelRunner")   # omni 0.2.0 has no merge_info on any GPU runner
    found = [f for f in audit(str(gpu), str(npu)) if f.method == "merge_info"]
    assert _on_merge(found) == [("ONP4211", "info")], found
    assert code_info("ONP4211").severity == "info" and "GPUARModelRunner" in found[0].message


def test_a_method_the_npu_releases_omni_still_has_is_still_an_omission(tmp_path):
    gpu = _release(tmp_path, "n", "0.1.0", MERGE)
    npu = _release(tmp_path, "n1", "0.2.0", MERGE, npu_bases="NPUModelRunner")   # omni 0.2.0 keeps it; the NPU class lacks it
    assert _on_merge(audit(str(gpu), str(npu))) == [("ONP4202", "warning")]
    same = _release(tmp_path, "same", "0.1.0", npu_bases="NPUModelRunner")      # not a newer release: no later form to read
    assert _on_merge(audit(str(gpu), str(same))) == [("ONP4202", "warning")]


def test_gpu_history_needs_a_gpu_base_and_a_vllm_source(tmp_path):
    root = str(AUDIT_FIXTURES / "old_layout")
    with pytest.raises(PortError, match="--gpu-history needs --gpu-base"):
        audit(root, root, gpu_history=[str(_vllm_only(tmp_path))])
    with pytest.raises(PortError, match="not vllm"):
        audit(root, root, gpu_base=str(_vllm_only(tmp_path / "b")), gpu_history=[root])


def _vllm_only(tmp_path: Path) -> Path:
    "A vllm source of our own: a GPUModelRunner of two methods."
    return vllm_source(tmp_path, "class GPUModelRunner:\n    def __init__(self, cfg):\n        self.cfg = cfg\n\n"
                       "    def execute_model(self, scheduler_output):\n        return self._model_forward(scheduler_output)\n")


def test_the_command_takes_gpu_history_with_gpu_base_only(tmp_path, capsys):
    from omni_npu_port.cli.main import main
    root, vllm = str(AUDIT_FIXTURES / "old_layout"), str(_vllm_only(tmp_path))
    assert main(["audit", "--gpu", root, "--npu", root, "--gpu-history", vllm]) == 2
    assert "--gpu-history needs --gpu-base" in capsys.readouterr().err
    assert main(["audit", "--gpu", root, "--npu", root, "--gpu-base", vllm, "--gpu-history", vllm]) == 0
