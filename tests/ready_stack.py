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


def update_stack(root: Path, base_text: str) -> Path:
    ("A judged update's stack under `root`: a `vllm_ascend` package whose `base.py` is `base_text` (dedented) and the "
     "empty omni packages the written NPU runner goes in; `root` returned.")
    from textwrap import dedent
    for rel, text in {"vllm_ascend/__init__.py": "", "vllm_ascend/base.py": base_text, "omni/vllm_omni/__init__.py": "",
                      "omni/vllm_omni/npu/__init__.py": ""}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(dedent(text))
    return root
