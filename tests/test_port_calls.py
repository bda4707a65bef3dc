("Issue 31, part 3 (calls bind): every call of a ported class to a function, class or `self` method of the target "
 "bound to the callee's signature as the target's source writes it — each rule on fixtures written here, with a case "
 "where it must not fire.")
import ast
import textwrap

import pytest

from omni_npu_port.port.calls import CALL_BLOCKS, bind_calls, catalog_renames, fit
from omni_npu_port.port.locate import MroClass
from omni_npu_port.sources.readers import open_source
from omni_npu_port.sources.symbols import SymbolIndex, signature_from_ast

D = lambda s: textwrap.dedent(s).lstrip("\n")

NPU_MODULE = D('''
    from dataclasses import dataclass, field

    from vllm_ascend.ascend_forward_context import set_ascend_forward_context


    @dataclass
    class Output:
        req_ids: list
        tokens: list = field(default_factory=list)


    def build_metadata(num_reqs, *, block_size=16, max_len=None):
        return num_reqs


    class NPURunner:
        def prepare(self, kv_cache_config, block_sizes):
            return kv_cache_config

        def _dummy_run(self, num_tokens, with_prefill=False):
            return num_tokens

        def sample(self):
            return Output(req_ids=[], spec_ids=None)   # a runtime patch of the NPU side adds `spec_ids`

        def initialize(self, kv_cache_config):
            block_sizes = [16]
            self.prepare(kv_cache_config, block_sizes)
''')
CONTEXT = ("def set_ascend_forward_context(attn_metadata, vllm_config, *, num_tokens=0, aclgraph_runtime_mode=None):\n"
           "    return 0\n")
GPU_RUNNER = "class GPURunner:\n    def _dummy_run(self, num_tokens):\n        return num_tokens\n"
HEAD = "from vllm_ascend.worker.runner import NPURunner, Output, build_metadata\n" \
       "from vllm_ascend.ascend_forward_context import set_ascend_forward_context\n\n\nclass Ported(NPURunner):\n"


@pytest.fixture
def target(tmp_path):
    pkg = tmp_path / "vllm_ascend"
    (pkg / "worker").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "worker" / "__init__.py").write_text("")
    (pkg / "worker" / "runner.py").write_text(NPU_MODULE)
    (pkg / "ascend_forward_context.py").write_text(CONTEXT)
    return SymbolIndex([open_source(str(pkg))])


def _class(text: str, name: str, module: str) -> MroClass:
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == name)
    return MroClass(name, node, module, text, module.split(".")[0])


NPU = _class(NPU_MODULE, "NPURunner", "vllm_ascend.worker.runner")
GPU = _class(GPU_RUNNER, "GPURunner", "vllm.v1.worker.gpu_model_runner")
ORDER = [MroClass("Ported", None), NPU, GPU]   # the NPU runner ahead of vllm's (port/mro.ipynb)


def _bind(ix, body: str, order=ORDER, renames=None, **kw):
    return bind_calls(HEAD + textwrap.indent(D(body), "    "), "Ported", ix, order, NPU_MODULE, renames or {}, **kw)


def test_a_call_that_binds_is_left_untouched(target):
    code = HEAD + textwrap.indent(D('''
        def run(self, n, kv):
            out = Output([n], tokens=[])
            self.prepare(kv, block_sizes=[1])
            return build_metadata(n, block_size=32), set_ascend_forward_context(None, None, num_tokens=n)
    '''), "    ")
    assert bind_calls(code, "Ported", target, ORDER, NPU_MODULE) == (code, [])


def test_a_keyword_the_callee_lacks_is_dropped_unless_the_npu_source_passes_it(target):
    new, diags = _bind(target, '''
        def run(self, n):
            a = Output(req_ids=[n], spec_ids=None)
            return Output(req_ids=[n], made_up=1, tokens=[])
    ''')
    assert "Output(req_ids=[n], spec_ids=None)" in new           # the NPU side's own source builds it so: kept
    assert "Output(req_ids=[n], tokens=[])" in new and "made_up" not in new
    assert [d.code for d in diags] == ["ONP4460"] and "made_up" in diags[0].message and diags[0].where == "run"


def test_a_keyword_a_catalog_record_renames_is_renamed(target):
    renames = catalog_renames("0.18.0")
    new, diags = _bind(target, '''
        def run(self, n):
            return set_ascend_forward_context(None, None, num_tokens=n, cudagraph_runtime_mode=1)
    ''', renames=renames)
    assert "aclgraph_runtime_mode=1" in new and "cudagraph_runtime_mode" not in new
    assert [d.code for d in diags] == ["ONP4461"]


def test_a_missing_required_parameter_is_copied_from_the_npu_base_s_own_call(target):
    new, diags = _bind(target, '''
        def initialize(self, kv_cache_config):
            block_sizes = [32]
            self.prepare(kv_cache_config)
    ''')
    assert "self.prepare(kv_cache_config, block_sizes=block_sizes)" in new
    assert [d.code for d in diags] == ["ONP4463"]


def test_a_missing_parameter_whose_npu_argument_reads_names_unbound_here_is_reported_not_added(target):
    new, diags = _bind(target, '''
        def initialize(self, kv_cache_config):
            self.prepare(kv_cache_config)
    ''')
    assert "self.prepare(kv_cache_config)" in new and "block_sizes=" not in new
    assert [d.code for d in diags] == ["ONP4462"] and "`block_sizes`" in diags[0].message
    assert "ONP4462" in CALL_BLOCKS   # it makes the module not ready (port_runner's not_ready)


def test_extra_positionals_go_to_keyword_only_parameters_by_name_and_beyond_them_are_reported(target):
    new, diags = _bind(target, '''
        def run(self, n):
            a = build_metadata(n, 64, 8)
            return self._dummy_run(n, True, False)
    ''')
    assert "build_metadata(n, block_size=64, max_len=8)" in new
    assert "self._dummy_run(n, True, False)" in new
    assert [d.code for d in diags] == ["ONP4464", "ONP4462"] and "passes 3 positional arguments" in diags[1].message


def test_a_self_call_binding_to_the_npu_method_but_not_vllm_s_is_left_alone(target):
    body = '''
        def run(self, n):
            return self._dummy_run(n, with_prefill=True)
    '''
    new, diags = _bind(target, body)
    assert "with_prefill=True" in new and diags == []
    # with vllm's runner ahead of the NPU one (the order port/mro.ipynb refuses), the same call binds to vllm's method
    new, diags = _bind(target, body, order=[MroClass("Ported", None), GPU, NPU])
    assert "with_prefill" not in new and [d.code for d in diags] == ["ONP4460"]


def test_a_method_of_the_ported_class_itself_comes_first_and_an_opaque_class_is_not_read(target):
    new, diags = _bind(target, '''
        def _dummy_run(self, num_tokens, *, extra=None):
            return num_tokens

        def run(self, n):
            return self._dummy_run(n, extra=1)
    ''')
    assert diags == []
    stub = MroClass("Parent", ast.parse("class Parent:\n    def prepare(self): ...\n").body[0], "x", "", "vllm_omni")
    code = HEAD + "    def run(self, kv):\n        return self.prepare(kv, [1])\n"
    order = [MroClass("Ported", None), stub, NPU]
    assert bind_calls(code, "Ported", target, order, NPU_MODULE, {}, {"Parent"}) == (code, [])
    assert [d.code for d in bind_calls(code, "Ported", target, order, NPU_MODULE)[1]] == ["ONP4462"]


def test_calls_with_unpacking_and_modules_that_do_not_parse_are_left_alone(target):
    code = HEAD + "    def run(self, n, kw):\n        return build_metadata(n, **kw), Output(*n, made_up=1)\n"
    assert bind_calls(code, "Ported", target, ORDER, NPU_MODULE) == (code, [])
    broken = HEAD + "    def run(self, n):\n<<<<<<< x\n        return Output(made_up=1)\n"
    assert bind_calls(broken, "Ported", target, ORDER, NPU_MODULE) == (broken, [])


def test_fit_says_what_does_not_bind():
    sig = signature_from_ast(ast.parse("def f(self, a, b=1, *, c, d=2): pass").body[0], drop_first=True)
    assert fit(sig, 1, ["c"]).binds
    f = fit(sig, 3, ["e"])
    assert f.unknown == ["e"] and f.missing == ["c"] and f.overflow == 1 and f.kw_only == ["c", "d"]


# ---- `port --class` binds the calls of the class it writes, as `port --release` does

def _class_sources(tmp_path, extra_params: str):
    (tmp_path / "gpu.py").write_text("class GPURunner:\n    def prepare(self, kv):\n        return kv\n")
    (tmp_path / "omni.py").write_text(D(f'''
        import torch
        from gpu import GPURunner

        class OmniGPURunner(GPURunner):
            def warm(self, kv{extra_params}):
                torch.cuda.synchronize()
                return self.prepare(kv)
    '''))
    (tmp_path / "npu.py").write_text(D('''
        from gpu import GPURunner

        class NPURunner(GPURunner):
            def prepare(self, kv, block_sizes):
                return kv

            def load(self, kv):
                block_sizes = [16]
                return self.prepare(kv, block_sizes)
    '''))
    spec = lambda f, c: f"{tmp_path / f}:{c}"
    return ["port", "--class", "--gpu-base", spec("gpu.py", "GPURunner"),
            "--gpu-omni", spec("omni.py", "OmniGPURunner"), "--npu-base", spec("npu.py", "NPURunner"),
            "--source", str(tmp_path / "gpu.py"), "-o", str(tmp_path / "out.py")]


def test_port_class_copies_an_argument_the_method_binds_and_exits_clean(tmp_path, capsys):
    from omni_npu_port.cli.main import main
    assert main(_class_sources(tmp_path, ", block_sizes")) == 0
    assert "self.prepare(kv, block_sizes=block_sizes)" in (tmp_path / "out.py").read_text()
    assert "ONP4463" in capsys.readouterr().err


def test_port_class_reports_a_call_that_does_not_bind_and_exits_with_findings(tmp_path, capsys):
    from omni_npu_port.cli.main import main
    assert main(_class_sources(tmp_path, "")) == 1
    assert "return self.prepare(kv)" in (tmp_path / "out.py").read_text()
    assert "ONP4462" in capsys.readouterr().err


def test_super_and_explicit_base_calls_bind_through_the_mro(target):
    new, diags = _bind(target, '''
        def run(self, n, kv):
            a = super()._dummy_run(n, with_prefill=True)
            b = NPURunner.prepare(self, kv, [1])
            return NPURunner.prepare(self, kv), super().prepare(kv)
    ''')
    assert "super()._dummy_run(n, with_prefill=True)" in new and "NPURunner.prepare(self, kv, [1])" in new
    assert [d.code for d in diags] == ["ONP4462", "ONP4462"]
    assert all("`block_sizes`" in d.message for d in diags)
    # super() in the class starts after it: the class's own method is not what super() reaches
    new, diags = _bind(target, '''
        def _dummy_run(self, num_tokens, *, extra=None):
            return super()._dummy_run(num_tokens, extra=1)
    ''')
    assert [d.code for d in diags] == ["ONP4460"] and "extra=1" not in new


def test_a_record_s_constructor_is_read_from_its_fields_and_an_unreadable_one_is_left_alone(tmp_path):
    from omni_npu_port.port.calls import record_signature
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "outputs.py").write_text(D('''
        from dataclasses import dataclass, field
        from typing import ClassVar, NamedTuple

        @dataclass
        class Base:
            req_ids: list

        @dataclass
        class Out(Base):
            tokens: list = field(default_factory=list)
            n: int = 0

        @dataclass(kw_only=True)
        class Later:
            a: int

        class State(NamedTuple):
            logits: object
            hidden: object = None
    '''))
    ix = SymbolIndex([open_source(str(pkg))])
    assert str(record_signature(ix, "vllm.outputs.Out")) == "(req_ids, tokens=field(default_factory=list), n=0)"
    assert str(record_signature(ix, "vllm.outputs.State")) == "(logits, hidden=None)"
    assert record_signature(ix, "vllm.outputs.Later") is None


def test_a_call_an_input_already_makes_and_cannot_bind_is_inherited_not_the_port_s(target):
    body = '''
        def initialize(self, kv_cache_config):
            self.prepare(kv_cache_config)
    '''
    new, diags = _bind(target, body, inherited=frozenset({"self.prepare(kv_cache_config)"}))
    assert [d.code for d in diags] == ["ONP4459"] and "ONP4459" not in CALL_BLOCKS   # carried: not the port's
    assert "self.prepare(kv_cache_config)" in new
    assert [d.code for d in _bind(target, body)[1]] == ["ONP4462"]   # no input makes it: the port's


def test_the_calls_an_input_cannot_bind_in_its_own_class_order(target, tmp_path):
    "omni's GPU call binds against the GPU base (prepare(kv)): not inherited, so the NPU port's call stays ONP4462."
    from omni_npu_port.port.calls import unbound_calls
    from omni_npu_port.port.locate import MethodSpec, locate
    (tmp_path / "gpu.py").write_text("class GPURunner:\n    def prepare(self, kv):\n        return kv\n")
    (tmp_path / "omni.py").write_text(D('''
        from gpu import GPURunner

        class OmniGPURunner(GPURunner):
            def initialize(self, kv):
                self.prepare(kv)
                self.prepare(kv, 2, 3)
    '''))
    omni = locate(MethodSpec(str(tmp_path / "omni.py"), "omni", "OmniGPURunner"), False, (str(tmp_path / "gpu.py"),))
    assert unbound_calls(omni, None) == frozenset({"self.prepare(kv, 2, 3)"})
