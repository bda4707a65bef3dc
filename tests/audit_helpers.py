"""Helpers the audit's rule tests share (test_audit_mirrors, test_audit_mirrors2, test_audit_mirrors3): one three-way
drift call on method texts written in the tests, and the lines it reports."""
from pathlib import Path

from omni_npu_port.port.audit import drift

AUDIT_FIXTURES = Path(__file__).parent / "fixtures" / "audit"


def three_way(gpu: str, npu: str, gpu_base: str, names=None, **kw) -> list:
    "Drift three-way, the NPU base taken as the GPU base (vllm-ascend inheriting vllm's method) unless `npu_base=` is given."
    return drift(gpu, npu, {} if names is None else names, gpu_base=(gpu_base, ""), **kw)


def lost(found: list) -> list:
    "The drift lines of every finding, in order."
    return [line for _, _, detail in found for line in detail]


def vllm_source(tmp_path: Path, runner: str) -> Path:
    "A vllm source of our own: `vllm/v1/worker/gpu_model_runner.py` holding `runner`, under `tmp_path / 'vllm_only'`."
    root = tmp_path / "vllm_only"
    for d in ("vllm", "vllm/v1", "vllm/v1/worker"):
        (root / d).mkdir(parents=True)
        (root / d / "__init__.py").write_text("")
    (root / "vllm/v1/worker/gpu_model_runner.py").write_text(runner)
    return root
