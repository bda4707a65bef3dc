"""A GPU name reached through omni's own re-export is translated by the port (issue 31/33): the port's rules look
re-exports up in the trees it ports (`port.translation.port_rules`), as `translate --source` does.

Fixtures: a copy of tests/fixtures/release/ (a tiny vllm, vllm-ascend and vLLM-Omni checkout written for these tests)
with a fake `vllm.compilation.cuda_graph.CUDAGraphWrapper` (a catalog GPU symbol) that omni's GPU runner module either
imports (a re-export) or defines itself (another object of the same spelling)."""
import shutil
import textwrap
from pathlib import Path

import pytest

from omni_npu_port.port.classes import port_class
from omni_npu_port.port.locate import locate
from omni_npu_port.port.translation import port_rules, rules_for, translate_methods

FIX = Path(__file__).parent / "fixtures" / "release"
REEXPORT = "from vllm.compilation.cuda_graph import CUDAGraphWrapper\n"
OWN = 'class CUDAGraphWrapper:\n    "omni defines its own wrapper"\n'
AR_METHODS = textwrap.indent(textwrap.dedent('''
    def capture_talker(self):
        from vllm_omni.worker.gpu_model_runner import CUDAGraphWrapper
        return isinstance(self.talker_mtp, CUDAGraphWrapper)

    def talker_is_wrapped(self):
        return isinstance(self.talker_mtp, CUDAGraphWrapper)
'''), "    ")


def _sources(tmp_path: Path, omni_head: str) -> tuple:
    "(GPU base, omni AR runner, NPU base) located in a fixture copy whose omni GPU runner module starts `omni_head`."
    root = shutil.copytree(FIX, tmp_path / "release")
    cg = root / "vllm" / "vllm" / "compilation"
    cg.mkdir()
    (cg / "__init__.py").write_text("")
    (cg / "cuda_graph.py").write_text("class CUDAGraphWrapper:\n    'fake vllm GPU wrapper'\n")
    gmr = root / "omni" / "vllm_omni" / "worker" / "gpu_model_runner.py"
    text = gmr.read_text()
    doc, rest = text.split("\n", 1)
    gmr.write_text(f"{doc}\n{omni_head}{rest}")
    ar = root / "omni" / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    ar.write_text(ar.read_text().replace(
        "from vllm_omni.worker.gpu_model_runner import OmniGPUModelRunner",
        "from vllm_omni.worker.gpu_model_runner import CUDAGraphWrapper, OmniGPUModelRunner") + AR_METHODS)
    return (locate(f"{root / 'vllm'}:GPUModelRunner", False), locate(f"{root / 'omni'}:GPUARModelRunner", False),
            locate(f"{root / 'vllm_ascend'}:NPUModelRunner", False))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):   # translations kept on disk in this test's folder only
    monkeypatch.setenv("OMNI_NPU_PORT_TRANSLATION_CACHE", str(tmp_path / "tcache"))


def test_a_name_omni_re_exports_from_vllm_is_rewritten_in_methods_and_imports(tmp_path):
    gpu, omni, npu = _sources(tmp_path, REEXPORT)
    res = port_class(gpu, omni, npu)
    assert "CUDAGraphWrapper" not in res.code
    assert "from vllm_ascend.compilation.acl_graph import ACLGraphWrapper" in res.code      # the method's own import
    assert res.code.count("isinstance(self.talker_mtp, ACLGraphWrapper)") == 2
    top = res.code.split("\nclass ", 1)[0]    # the module-level imports the port writes
    assert "from vllm_ascend.compilation.acl_graph import ACLGraphWrapper" in top
    assert any(d.code == "ONP1001" and "CUDAGraphWrapper" in d.message for d in res.diagnostics)
    assert "capture_talker (omni-only)" in res.code and "talker_is_wrapped (omni-only)" in res.code   # ported


def test_a_name_omni_defines_itself_with_the_same_spelling_is_left_alone(tmp_path):
    gpu, omni, npu = _sources(tmp_path, OWN)
    res = port_class(gpu, omni, npu)
    assert "ACLGraphWrapper" not in res.code
    # nothing to translate: both methods are inherited from omni's class as written, not copied
    assert "inherited from GPUARModelRunner unchanged: capture_talker, talker_is_wrapped" in res.code
    assert "def capture_talker" not in res.code and "def talker_is_wrapped" not in res.code
    assert not any("CUDAGraphWrapper" in d.message for d in res.diagnostics if d.code.startswith("ONP1"))


def test_lone_files_have_no_trees_and_keep_the_target_s_rules():
    assert port_rules("vllm-ascend==0.18.0rc1") is rules_for("vllm-ascend==0.18.0rc1")


def test_a_translation_kept_on_disk_answers_only_the_resolver_it_was_made_with(tmp_path):
    gpu, omni, npu = _sources(tmp_path, REEXPORT)
    method = ("def capture(self):\n    from vllm_omni.worker.gpu_model_runner import CUDAGraphWrapper\n"
              "    return isinstance(self.talker_mtp, CUDAGraphWrapper)\n")
    [(with_trees, _)] = translate_methods([(method, "")], port_rules("vllm-ascend==0.18.0rc1", omni, gpu, npu))
    [(alone, _)] = translate_methods([(method, "")], rules_for("vllm-ascend==0.18.0rc1"))
    assert "ACLGraphWrapper" in with_trees and alone == method
