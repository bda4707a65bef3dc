"""Audit rules 15-18 (issue 32, made from the two false findings of the blind set 0.20): a line of the update's GPU
method the copy's method has in another form is no lag: a catalog GPU name the translation left (as the NPU's), an
import the copy's module makes, `x = A; x = f(x)` as `x = f(A)`, `if C:` as the `else:` of `if not C:`.
Fixtures: texts written here; nothing fetched."""
from types import SimpleNamespace as NS

from omni_npu_port.port.audit import (Change, else_tests, inlined, method_keys, module_bound, on_platform,
                                      other_forms, owed, platform_names, stream)

GPU = '''def capture(self):
    from omni.runner import CUDAGraphWrapper
    if not isinstance(self.mtp, CUDAGraphWrapper):
        return
    from vllm_ascend.worker import graph_capture
    sizes = self.config.sizes
    warm = self.config.warm
    sizes = sorted(sizes, reverse=True)
    if self.cache is not None:
        a = self.combine()
    if self.cache is None:
        b = build()
'''
COPY = '''def capture(self):
    if not isinstance(self.mtp, ACLGraphWrapper):
        return
    sizes = sorted(self.config.sizes, reverse=True)
    warm = self.config.warm
    if self.cache is not None:
        a = self.combine()
    else:
        b = build()
'''
MOD = ("import os\nfrom vllm_ascend.compilation.acl_graph import ACLGraphWrapper\n"
       "from vllm_ascend.worker import graph_capture\n")
NAMES = {"CUDAGraphWrapper": "ACLGraphWrapper"}


def forms(copy, mod=MOD, names=NAMES):
    return other_forms(GPU, stream(method_keys(copy)), copy, mod, names)


def test_the_platform_names_come_from_the_catalog_records_one_npu_name_each():
    rules = NS(symbols={"a.CUDAGraphWrapper": 1, "a.Same": 1, "a.Two": 1, "b.Two": 1},
               npu_symbol={"a.CUDAGraphWrapper": "x.ACLGraphWrapper", "a.Same": "y.Same", "a.Two": "x.T1",
                           "b.Two": "x.T2"}.get)
    assert platform_names(rules) == {"CUDAGraphWrapper": "ACLGraphWrapper"}
    assert on_platform("isinstance ( m , CUDAGraphWrapper )", NAMES) == "isinstance ( m , ACLGraphWrapper )"
    assert module_bound(MOD) == {"os", "ACLGraphWrapper", "graph_capture"}


def test_a_conflict_the_copy_has_in_other_forms_is_not_owed():
    gpu_lines = [l for l in GPU.splitlines()[1:] if "return" not in l and "a =" not in l and "b =" not in l]
    c = Change("conflict", 2, COPY.splitlines()[1:], gpu_lines)
    own = stream(method_keys(COPY))
    assert owed(c, own, "", None) is not None                 # line by line, five lines were owed
    assert owed(c, own, "", None, forms(COPY)) is None


def test_each_form_fires_only_where_the_copy_has_it():
    assert forms(COPY) == {"from omni . runner import CUDAGraphWrapper",
                           "from vllm_ascend . worker import graph_capture",
                           "if not isinstance ( self . mtp , CUDAGraphWrapper ) :", "sizes = self . config . sizes",
                           "sizes = sorted ( sizes , reverse = True )", "if self . cache is None :"}
    # no name map and a module that imports neither name: the wrapper lines and the imports are owed
    assert forms(COPY, "import os\n", {}) == {"sizes = self . config . sizes",
                                              "sizes = sorted ( sizes , reverse = True )", "if self . cache is None :"}
    # another sort, and an `if` with no `else` (or an `elif`): owed
    other = COPY.replace("self.config.sizes,", "self.config.other,")
    assert "sizes = self . config . sizes" not in forms(other)
    assert "if self . cache is None :" not in forms(COPY.replace("    else:\n        b = build()\n", ""))
    assert "if self . cache is None :" not in forms(COPY.replace("    else:", "    elif self.cache is None:"))


def test_the_pieces_negate_and_inline_as_written():
    import ast
    assert else_tests("def f(x):\n    if not x.ok:\n        a()\n    else:\n        b()\n") == {"if x . ok :"}
    assert else_tests("def f(x):\n    if k in d:\n        a()\n    else:\n        b()\n") == {"if k not in d :"}
    assert else_tests("def f(x):\n    if x > 1:\n        a()\n    else:\n        b()\n") == {"if not x > 1 :"}
    body = ast.parse("x = a.b\ny = 2\nx = g(x, x)\n").body
    assert inlined(body[0], body) is None                     # named twice: not one expression
    body = ast.parse("x = a.b\ny = x\nx = g(x)\n").body
    assert inlined(body[0], body) is None                     # read before it is reassigned
    body = ast.parse("x = a.b\ny = 2\nx = g(x, k=1)\n").body
    assert inlined(body[0], body)[0] == "x = g ( a . b , k = 1 )"
