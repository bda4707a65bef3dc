"""benchmarks/translate_derived.py: which files of a vLLM-Omni release it checks by default (issue 33). The counts are
the benchmark's job; here, on a wheel and an sdist written here, that every `worker*` folder of the GPU side is read
(`worker_v2/` and subfolders included) and the other devices' copies under `platforms/` never are."""
import io
import tarfile
import zipfile

import pytest
from project_scripts import load_script

GPU = ["vllm_omni/worker/gpu_model_runner.py", "vllm_omni/worker/output/out.py", "vllm_omni/worker_v2/model_runner.py",
       "vllm_omni/worker_v2/model_states/talker.py", "vllm_omni/diffusion/worker/diffusion_worker.py"]
OTHER = ["vllm_omni/platforms/npu/worker/npu_model_runner.py", "vllm_omni/platforms/rocm/patch/worker/w.py",
         "vllm_omni/engine/worker_like.py", "vllm_omni/worker.py", "vllm_omni/worker/README.md"]


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/translate_derived.py")


def test_the_default_files_are_every_worker_folder_of_the_gpu_side(bench, tmp_path):
    "Fires: worker/, worker_v2/ (and its subfolders), diffusion/worker/; must not: platforms/, a file named worker."
    whl = tmp_path / "vllm_omni-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for n in GPU + OTHER: z.writestr(n, f"# {n}\n")
    assert sorted(bench.gpu_files(whl)) == sorted(GPU)
    sdist = tmp_path / "vllm_omni-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        for n in GPU + OTHER:
            data = f"# {n}\n".encode()
            info = tarfile.TarInfo(f"vllm_omni-9.9.9/{n}"); info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    got = bench.gpu_files(sdist)
    assert sorted(got) == sorted(GPU) and got["vllm_omni/worker_v2/model_runner.py"].startswith("# vllm_omni/worker_v2")
