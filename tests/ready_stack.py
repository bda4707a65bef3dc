"A vllm double for the ready rules' tests: a package folder holding one runner module, read as the ready index does."
from pathlib import Path

from omni_npu_port.port.ready import ReadyIndex
from omni_npu_port.sources.readers import open_source


def stack_index(root: Path, runner_text: str) -> ReadyIndex:
    "A `ReadyIndex` over a `vllm` package under `root` whose `v1/worker/gpu_model_runner.py` is `runner_text`."
    pkg = root / "vllm"
    (pkg / "v1" / "worker").mkdir(parents=True)
    for f in ("__init__.py", "v1/__init__.py", "v1/worker/__init__.py"): (pkg / f).write_text("")
    (pkg / "v1" / "worker" / "gpu_model_runner.py").write_text(runner_text)
    return ReadyIndex([open_source(str(pkg))], [])
