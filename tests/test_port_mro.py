("Issue 31, part 1 and part 3 (base order): the ported class's real MRO keeps every NPU runner method ahead of vllm's "
 "GPU ones; where the NPU base does not derive from vllm's runner the port derives from it first, or says it cannot.")
import ast
import textwrap

from omni_npu_port.cli.main import main
from omni_npu_port.port.classes import port_class
from omni_npu_port.port.locate import class_mro, locate
from omni_npu_port.port.mro import ORDER_BLOCKS, base_order, gpu_classes, linearize, shadowed_methods

D = lambda s: textwrap.dedent(s).lstrip("\n")

GPU = D('''
    class Mixin:
        def add_lora(self): return "gpu"

    class GPUModelRunner(Mixin):
        def __init__(self, config): self.stream = "cuda stream"
        def load_model(self): return "gpu"
        def execute_model(self, n): return self._dummy_run(n)
        def _dummy_run(self, num_tokens): return "gpu"
''')
OMNI = D('''
    from gpu import GPUModelRunner

    class OmniGPUModelRunner(GPUModelRunner):
        def execute_model(self, n):
            out = super().execute_model(n)
            return out
        def talker(self, x): return x
''')
NPU = '''
    class NPUModelRunner{bases}:
        def __init__(self, config): self.stream = "npu stream"
        def load_model(self): return "npu"
        def execute_model(self, n): return self._dummy_run(n, with_prefill=True)
        def _dummy_run(self, num_tokens, with_prefill=False): return "npu"
'''


def _sources(tmp_path, npu_head: str, bases: str, gpu: str = GPU):
    (tmp_path / "gpu.py").write_text(gpu)
    (tmp_path / "omni.py").write_text(OMNI)
    (tmp_path / "npu.py").write_text(npu_head + D(NPU.format(bases=bases)))
    at = lambda f, c: locate(f"{tmp_path / f}:{c}", False, [str(tmp_path / "gpu.py")])
    return at("gpu.py", "GPUModelRunner"), at("omni.py", "OmniGPUModelRunner"), at("npu.py", "NPUModelRunner")


def _bases(code: str) -> list[str]:
    cls = next(n for n in ast.parse(code).body if isinstance(n, ast.ClassDef))
    return [ast.unparse(b) for b in cls.bases]


def test_an_npu_base_deriving_from_vllm_s_runner_keeps_omni_first_and_raises_nothing(tmp_path):
    gpu, omni, npu = _sources(tmp_path, "from gpu import GPUModelRunner\n", "(GPUModelRunner)")
    bo = base_order("OmniNPUModelRunner", omni, npu, gpu)
    assert bo.bases == ("OmniGPUModelRunner", "NPUModelRunner")
    assert not bo.npu_first and not bo.shadowed and not bo.ahead
    res = port_class(gpu, omni, npu)
    assert _bases(res.code) == ["OmniGPUModelRunner", "NPUModelRunner"]
    assert not {d.code for d in res.diagnostics} & {"ONP4455", "ONP4456", "ONP4457", "ONP4458"}


def test_an_npu_base_not_deriving_from_vllm_s_runner_is_shadowed_by_omni_first_and_derived_first(tmp_path):
    gpu, omni, npu = _sources(tmp_path, "", "")
    # the order the port used to write: vllm's runner (and its mixin) ahead of the NPU runner, its methods shadowed
    as_written = linearize("X", class_mro(omni), class_mro(npu))
    assert [c.name for c in as_written] == ["X", "OmniGPUModelRunner", "GPUModelRunner", "Mixin", "NPUModelRunner"]
    shadowed = shadowed_methods(as_written, class_mro(npu), gpu_classes(gpu))
    assert shadowed == {m: ("GPUModelRunner", "NPUModelRunner") for m in ("__init__", "load_model", "_dummy_run")}
    bo = base_order("OmniNPUModelRunner", omni, npu, gpu)
    assert bo.npu_first and bo.bases == ("NPUModelRunner", "OmniGPUModelRunner") and not bo.shadowed and not bo.why
    res = port_class(gpu, omni, npu)
    codes = [d.code for d in res.diagnostics]
    assert _bases(res.code) == ["NPUModelRunner", "OmniGPUModelRunner"]
    assert "ONP4457" in codes and not set(codes) & set(ORDER_BLOCKS)
    # omni's execute_model, inherited unchanged before, would be hidden behind the NPU one: ported into the class,
    # its super() reaching the NPU runner's method (the class's next base)
    assert res.stats["styles"]["execute_model"] == "super-kept"
    method = next(n for n in ast.walk(ast.parse(res.code))
                  if isinstance(n, ast.FunctionDef) and n.name == "execute_model")
    assert "super().execute_model(n)" in ast.unparse(method)
    assert "talker" in res.stats["inherited"]


def test_no_order_python_accepts_is_a_conflict_that_blocks_the_module(tmp_path, capsys):
    # vllm's runner orders its mixins (Mixin, Other); the NPU runner, not deriving from it, the other way round
    gpu_text = GPU.replace("class GPUModelRunner(Mixin):",
                           "class Other:\n    pass\n\nclass GPUModelRunner(Mixin, Other):")
    gpu, omni, npu = _sources(tmp_path, "from gpu import Mixin, Other\n", "(Other, Mixin)", gpu_text)
    bo = base_order("OmniNPUModelRunner", omni, npu, gpu)
    assert bo.why.startswith("Python refuses both")
    codes = [d.code for d in port_class(gpu, omni, npu).diagnostics]
    assert "ONP4458" in codes and "ONP4457" not in codes
    # `port --class`: the module is written, and the exit status says it has findings
    rc = main(["port", "--class", "--gpu-base", f"{tmp_path / 'gpu.py'}:GPUModelRunner", "--gpu-omni",
               f"{tmp_path / 'omni.py'}:OmniGPUModelRunner", "--npu-base", f"{tmp_path / 'npu.py'}:NPUModelRunner",
               "-o", str(tmp_path / "out.py")])
    assert rc == 1 and "ONP4458" in capsys.readouterr().err


def test_port_class_exits_clean_where_the_npu_first_order_fixes_it(tmp_path, capsys):
    _sources(tmp_path, "", "")
    rc = main(["port", "--class", "--gpu-base", f"{tmp_path / 'gpu.py'}:GPUModelRunner", "--gpu-omni",
               f"{tmp_path / 'omni.py'}:OmniGPUModelRunner", "--npu-base", f"{tmp_path / 'npu.py'}:NPUModelRunner",
               "-o", str(tmp_path / "out.py")])
    err = capsys.readouterr().err
    assert rc == 0 and "ONP4457" in err and "ONP4456" not in err


OMNI_INIT = D('''
    from gpu import GPUModelRunner

    class OmniGPUModelRunner(GPUModelRunner):
        def __init__(self, config):
            super().__init__(config)
            self.talker_mtp = None
            self._init_codec()
        def _init_codec(self): self.codec_cache = {}
        def execute_model(self, n): return super().execute_model(n)
''')


def _init_sources(tmp_path, npu_init: str, bases: str = "", head: str = ""):
    gpu, _, npu = _sources(tmp_path, head, bases)
    (tmp_path / "omni.py").write_text(OMNI_INIT)
    text = (tmp_path / "npu.py").read_text().replace('def __init__(self, config): self.stream = "npu stream"', npu_init)
    (tmp_path / "npu.py").write_text(text)
    at = lambda f, c: locate(f"{tmp_path / f}:{c}", False, [str(tmp_path / "gpu.py")])
    return gpu, at("omni.py", "OmniGPUModelRunner"), at("npu.py", "NPUModelRunner")


BARE = "class X(NPUModelRunner, OmniGPUModelRunner):\n    pass\n"


def test_an_npu_first_chain_that_never_runs_omni_s_init_names_the_state_it_never_sets(tmp_path):
    from omni_npu_port.port.mro import init_diagnostics
    gpu, omni, npu = _init_sources(tmp_path, 'def __init__(self, config): self.stream = "npu stream"')
    bo = base_order("X", omni, npu, gpu)
    assert bo.npu_first
    found = init_diagnostics(bo, "X", omni, gpu, BARE)
    assert [d.code for d in found] == ["ONP4480"] and "ONP4480" in ORDER_BLOCKS
    assert "NPUModelRunner.__init__" in found[0].message and "self.codec_cache, self.talker_mtp" in found[0].message


def test_a_chain_that_sets_omni_s_state_or_an_omni_first_order_says_nothing(tmp_path):
    from omni_npu_port.port.mro import init_diagnostics
    gpu, omni, npu = _init_sources(tmp_path, 'def __init__(self, config): self.stream = "npu stream"')
    own = ("class X(NPUModelRunner, OmniGPUModelRunner):\n    def __init__(self, config):\n"
           "        NPUModelRunner.__init__(self, config)\n        self.talker_mtp = None\n        self._init_codec()\n")
    assert init_diagnostics(base_order("X", omni, npu, gpu), "X", omni, gpu, own) == []
    gpu, omni, npu = _init_sources(tmp_path, 'def __init__(self, config): self.stream = "npu stream"',
                                   "(GPUModelRunner)", "from gpu import GPUModelRunner\n")
    assert init_diagnostics(base_order("X", omni, npu, gpu), "X", omni, gpu, BARE) == []   # omni first: not NPU-first


def test_a_chain_that_goes_on_into_vllm_s_runner_init_is_a_warning(tmp_path):
    from omni_npu_port.port.mro import init_diagnostics
    gpu, omni, npu = _init_sources(tmp_path, "def __init__(self, config): super().__init__(config)")
    found = init_diagnostics(base_order("X", omni, npu, gpu), "X", omni, gpu, BARE)
    assert [d.code for d in found] == ["ONP4481"]
    assert "NPUModelRunner.__init__ -> OmniGPUModelRunner.__init__ -> GPUModelRunner.__init__" in found[0].message


def test_port_class_runs_the_init_pass_on_the_class_it_wrote(tmp_path, capsys):
    _init_sources(tmp_path, 'def __init__(self, config): self.stream = "npu stream"')
    rc = main(["port", "--class", "--gpu-base", f"{tmp_path / 'gpu.py'}:GPUModelRunner", "--gpu-omni",
               f"{tmp_path / 'omni.py'}:OmniGPUModelRunner", "--npu-base", f"{tmp_path / 'npu.py'}:NPUModelRunner",
               "-o", str(tmp_path / "out.py"), "--no-judge"])
    err = capsys.readouterr().err
    cls = next(n for n in ast.parse((tmp_path / "out.py").read_text()).body if isinstance(n, ast.ClassDef))
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assert "self.talker_mtp = None" in ast.unparse(init)   # omni's __init__ ported into the class: its state is set
    assert rc == 0 and "ONP4457" in err and "ONP4480" not in err and "ONP4481" not in err
