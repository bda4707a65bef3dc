"""Issue 24, part 6 (held-out check): a GPU runner's method the NPU class gets, through its MRO, from another omni class
with the same statements is no omission (ONP4202): the NPU runner runs omni's change. A copy that differs still is one.
Fixtures are written here, on a copy of the older-layout audit fixture."""
import shutil
from pathlib import Path

import omni_npu_port.port.audit

AUDIT_FIXTURES = Path(__file__).parent / "fixtures" / "audit"
HELPER = "\n    def build_ids(self, out):\n        ids = self.sampler.ids(out)\n        return ids[: self.max_num_reqs]\n"


def omissions(tmp_path: Path, base_copy: str) -> list:
    "ONP4202 findings on NPUARModelRunner.build_ids: GPUARModelRunner defines it, OmniGPUModelRunner has `base_copy`."
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / "old_layout"))
    worker = root / "vllm_omni/worker"
    for name, text in (("gpu_ar_model_runner.py", HELPER), ("gpu_model_runner.py", base_copy)):
        (worker / name).write_text((worker / name).read_text() + text)
    found = omni_npu_port.port.audit.audit(str(root), str(root))
    return [f for f in found if (f.code, f.cls, f.method) == ("ONP4202", "NPUARModelRunner", "build_ids")]


def test_the_same_method_inherited_from_another_omni_class_is_no_omission(tmp_path):
    assert omissions(tmp_path, HELPER) == []


def test_the_same_method_written_differently_is_still_the_same_code(tmp_path):
    reformatted = HELPER.replace("ids[: self.max_num_reqs]", "ids[:self.max_num_reqs]  # trimmed")
    assert omissions(tmp_path, reformatted) == []


def test_an_inherited_copy_that_differs_is_still_an_omission(tmp_path):
    found = omissions(tmp_path, HELPER.replace("self.max_num_reqs", "self.max_num_tokens"))
    assert len(found) == 1 and "gets OmniGPUModelRunner.build_ids instead" in found[0].message


def test_no_copy_at_all_is_still_an_omission(tmp_path):
    found = omissions(tmp_path, "")
    assert len(found) == 1 and "build_ids" in found[0].message
