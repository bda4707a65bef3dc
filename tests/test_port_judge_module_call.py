"""The judge's named exclusion `module-getattr-call` (issue 32): a model's own method called through an attribute
declared `nn.Module` is read by the checker through torch's `Module.__getattr__` (`Tensor | Module`); excluded there,
and nowhere else. Fixtures written here; no checker run (the errors are built as the checker reports them)."""
from omni_npu_port.port.judge import CheckerError, JudgeContext, excluded_by, module_attrs
import ast

NPU = "from torch import nn\nclass NPUModelRunner:\n    def load_model(self):\n        self.model: nn.Module = get()\n"
PORT = '''import torch
class R:
    buf: torch.Tensor
    enc: torch.nn.Module
    def run(self, x):
        self.model.get_mamba_state_copy_func()
        self.buf()
        self.other.hook()
        self.enc.prepare_runner_inputs(x)
        self.model.get_kv_transfer_metadata(x, extra=1)
'''


def _err(line, message='Object of type "Tensor" is not callable'):
    return CheckerError("/p/m.py", line, 9, "ONP4442", "reportCallIssue", message, "Tensor", "", "R.run")


def test_a_hook_called_on_an_attribute_declared_a_module_is_excluded(tmp_path):
    (tmp_path / "model_runner_v1.py").write_text(NPU)
    ctx = JudgeContext({"/p/m.py": PORT}, (str(tmp_path / "model_runner_v1.py"), "NPUModelRunner"))
    assert excluded_by(_err(6), ctx).name == "module-getattr-call"   # declared in the NPU runner
    assert excluded_by(_err(9), ctx).name == "module-getattr-call"   # declared in the written module


def test_a_tensor_called_another_attribute_or_another_message_is_not_excluded(tmp_path):
    (tmp_path / "model_runner_v1.py").write_text(NPU)
    ctx = JudgeContext({"/p/m.py": PORT}, (str(tmp_path / "model_runner_v1.py"), "NPUModelRunner"))
    assert excluded_by(_err(7), ctx) is None                                  # a Tensor attribute called
    assert excluded_by(_err(8), ctx) is None                                  # not declared a module
    assert excluded_by(_err(10, 'No parameter named "extra"'), ctx) is None   # an argument error on the hook: kept
    assert excluded_by(_err(6), JudgeContext({"/p/m.py": PORT})) is None      # no declaration anywhere read


def test_module_attrs_reads_annotated_assignments_only():
    tree = ast.parse("class R:\n    enc: nn.Module\n    def f(self):\n        self.m: Module = x\n"
                     "        self.t: torch.Tensor = y\n        self.u = nn.Module()\n")
    assert module_attrs(tree) == {"enc", "m"} and module_attrs(None) == set()
