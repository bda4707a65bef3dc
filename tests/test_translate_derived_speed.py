"The derived rules' speed (issue 33): one walk per file, answers kept per name, a text check first; the same findings."
import ast
from contextlib import contextmanager
from pathlib import Path

import pytest

from omni_npu_port.sources.readers import open_source
from omni_npu_port.translate import derived
from omni_npu_port.translate.derived import DerivedIndex, derived_check, might_find, nodes_of, walked

FX = Path(__file__).parent / "fixtures" / "derived"
NESTED = ("import os\nclass A:\n    x = 1\n    class B:\n        def f(self): self.y = os.sep\n"
          "    def g(self): return [i for i in 'ab']\n")


def index():
    return DerivedIndex(open_source(FX / "vllm", "vllm"), open_source(FX / "ascend", "vllm_ascend"))


def said(findings):
    return [(f.diagnostic.code, f.diagnostic.line, f.diagnostic.column, f.diagnostic.message, f.subject)
            for f in findings]


@pytest.mark.parametrize("text", [NESTED, (FX / "gpu_fires.py").read_text()])
def test_one_walk_keeps_ast_walks_order_for_the_file_and_each_class(text):
    tree = ast.parse(text)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef))]
    with walked(tree) as order:
        assert order == list(ast.walk(tree))
        assert all(nodes_of(n) == list(ast.walk(n)) for n in scopes) and len(scopes) > 1
        assert nodes_of(tree) is order   # answered from the one walk, not walked again
    assert id(tree) not in derived._WALKS and nodes_of(tree) is not order   # nothing kept after the block


@pytest.mark.parametrize("name", ["gpu_fires.py", "gpu_receivers.py", "gpu_quiet.py"])
def test_findings_are_the_same_walked_once_or_per_rule_and_with_answers_kept(name, monkeypatch):
    tree = ast.parse((FX / name).read_text())
    first, again = said(index().file_findings(tree)), None
    warm = index()
    warm.file_findings(tree)
    again = said(warm.file_findings(tree))   # every answer now from the index's memo
    monkeypatch.setattr(derived, "walked", contextmanager(lambda tree: (yield [])))   # each rule walks on its own
    assert said(index().file_findings(tree)) == first == again
    assert name == "gpu_quiet.py" or first


def test_answers_are_kept_per_name():
    ix = index()
    assert ix.vllm_def("vllm.v1.worker.gpu_model_runner.GPUModelRunner") is \
        ix.vllm_def("vllm.v1.worker.gpu_model_runner.GPUModelRunner")
    assert ix.members("vllm.v1.worker.gpu_model_runner.GPUModelRunner") is \
        ix.members("vllm.v1.worker.gpu_model_runner.GPUModelRunner")


def test_text_check_passes_what_can_hold_a_finding():
    for text in ["from vllm.config import VllmConfig\n", "import os, vllm\n", "x.is_Cuda\n", "y = m.GPU_COUNT\n",
                 "os.environ['NCCL_DEBUG'] = '1'\n", 'd = "\\x63uda"\n', "ｃｕｄａ = 1\n"]:
        assert might_find(text) and might_find(text.encode()), text


def test_a_module_that_cannot_hold_a_finding_is_not_parsed(monkeypatch):
    ix = index()
    assert not might_find("from vllm_ascend.utils import enable_sp\nclass R:\n    def f(self): return self.npu\n")
    monkeypatch.setattr(derived.ast, "parse", lambda *a, **k: pytest.fail("parsed"))
    assert derived_check("from vllm_ascend.utils import enable_sp\nclass R:\n    def f(self): return self.npu\n",
                         ix) == []


def test_a_device_string_spelled_with_an_escape_is_still_found():
    got = derived_check('import torch\nx = torch.device("\\x63uda")\n', index())
    assert [(f.diagnostic.code, f.diagnostic.line) for f in got] == [("ONP2043", 2)]
