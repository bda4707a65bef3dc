"The key of a kept translation: sha256 of the rules' digest, the module text, the method (and the resolver's answers)."
import hashlib

from omni_npu_port.port import translation
from omni_npu_port.translate.kept import rules_digest
from omni_npu_port.translate.rules import compile_rules

MODULE = "from vllm.forward_context import set_forward_context\nimport torch\n\nclass R:\n    pass\n" * 50
METHODS = ["def f(self):\n    torch.cuda.synchronize()\n", "def g(self):\n    return 'é'\n"]

def _joined(*parts: str) -> str: return hashlib.sha256("\0".join(parts).encode()).hexdigest()

def test_key_is_the_joined_parts_for_every_method_of_one_module():
    rules = compile_rules("vllm-ascend==0.18.0rc1")
    keys = [translation._key(rules, MODULE, m) for m in METHODS]
    assert keys == [_joined(rules_digest(rules), MODULE, m) for m in METHODS]
    assert translation._key(rules, MODULE + "\n", METHODS[0]) != keys[0]   # another module text, another key

def test_key_with_a_resolver_adds_its_answers():
    rules = compile_rules("vllm-ascend==0.18.0rc1", resolve=lambda q: None)
    got = translation._key(rules, MODULE, METHODS[0])
    answers = translation.reexport_answers(rules, MODULE, METHODS[0])
    assert got == _joined(rules_digest(rules), MODULE, METHODS[0], answers)
    assert got != _joined(rules_digest(rules), MODULE, METHODS[0])
