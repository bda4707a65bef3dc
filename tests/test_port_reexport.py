"""A GPU name reached through omni's own re-export is translated by the port (issue 31/33): the port's rules look
re-exports up in the trees it ports (`port.translation.port_rules`), as `translate --source` does.

Fixtures: a copy of tests/fixtures/release/ (a tiny vllm, vllm-ascend and vLLM-Omni checkout written for these tests)
with a fake `vllm.compilation.cuda_graph.CUDAGraphWrapper` (a catalog GPU symbol) that omni's GPU runner module either
imports (a re-export) or defines itself (another object of the same spelling)."""
import ast
import shutil
import textwrap
from pathlib import Path

import pytest

from omni_npu_port.port.classes import port_class
from omni_npu_port.port.delta import statements_alike
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


# --- vLLM-Omni 0.14.0's shape: the lookup makes omni's forward `with` equal to the GPU base's but for a label ---------
# omni imports set_forward_context through vllm's gpu_model_runner (a re-export) and renames the profiling label of the
# forward block; translated, its header equals the GPU base's but for that label. The delta must pair the two blocks
# (the shared forward context is what the block is), so omni's forward call lands inside the NPU base's forward block.
GPU_FORWARD = '''
    def execute_forward(self, scheduler_output, attn_metadata):
        num_tokens = scheduler_output.total_num_scheduled_tokens
        cudagraph_mode = self.dispatch(num_tokens)
        with (
            set_forward_context(attn_metadata, self.vllm_config, num_tokens=num_tokens,
                                cudagraph_runtime_mode=cudagraph_mode),
            record_function_or_nullcontext("gpu_model_runner: forward"),
        ):
            model_output = self._model_forward(self.input_ids[:num_tokens], self.positions[:num_tokens])
        with record_function_or_nullcontext("gpu_model_runner: postprocess"):
            hidden_states = model_output
            logits = self.model.compute_logits(hidden_states)
        self.execute_model_state = (scheduler_output, logits, hidden_states)
        return None
'''
OMNI_FORWARD = GPU_FORWARD.replace('"gpu_model_runner: forward"', '"Forward"').replace(
    "model_output = self._model_forward(", "outputs = self._run_generation(").replace('''\
        with record_function_or_nullcontext("gpu_model_runner: postprocess"):
            hidden_states = model_output
            logits = self.model.compute_logits(hidden_states)
        self.execute_model_state = (scheduler_output, logits, hidden_states)''', '''\
        _, multimodal_outputs = self.extract_multimodal_outputs(outputs)
        self.execute_model_state = (scheduler_output, None, multimodal_outputs)''')
NPU_FORWARD = '''
    def execute_forward(self, scheduler_output, attn_metadata):
        num_tokens = scheduler_output.total_num_scheduled_tokens
        aclgraph_runtime_mode = self.dispatch(num_tokens)
        with ProfileExecuteDuration().capture_async("forward"):
            with set_ascend_forward_context(attn_metadata, self.vllm_config, num_tokens=num_tokens,
                                            aclgraph_runtime_mode=aclgraph_runtime_mode):
                self.maybe_setup_kv_connector(scheduler_output)
                hidden_states = self._model_forward(self.input_ids[:num_tokens], self.positions[:num_tokens])
            self.maybe_wait_for_kv_save()
            finished_sending, finished_recving = self.get_finished_kv_transfer(scheduler_output)
        kv_connector_output = KVConnectorOutput(finished_sending=finished_sending, finished_recving=finished_recving)
        with ProfileExecuteDuration().capture_async("post process"):
            logits = self.model.compute_logits(hidden_states)
            logits = self.apply_grammar_bitmask(scheduler_output, logits)
        self.execute_model_state = (scheduler_output, logits, hidden_states)
        self.kv_connector_output = kv_connector_output
        return None
'''


def _forward_sources(tmp_path: Path, omni_imports_from: str) -> tuple:
    "(GPU base, omni AR runner, NPU base) where all three define `execute_forward` in the shapes above."
    root = shutil.copytree(FIX, tmp_path / "release")
    def add(rel: str, head: str, methods: str):
        p = root / rel
        doc, rest = p.read_text().split("\n", 1)
        p.write_text(f"{doc}\n{head}{rest}{methods}")
    label = "from contextlib import nullcontext as record_function_or_nullcontext\n"
    add("vllm/vllm/v1/worker/gpu_model_runner.py", label, GPU_FORWARD)
    add("omni/vllm_omni/worker/gpu_ar_model_runner.py", f"{label}from {omni_imports_from} import set_forward_context\n",
        OMNI_FORWARD)
    add("vllm_ascend/vllm_ascend/worker/model_runner_v1.py",
        "from contextlib import nullcontext as ProfileExecuteDuration\n", NPU_FORWARD)
    return (locate(f"{root / 'vllm'}:GPUModelRunner", False), locate(f"{root / 'omni'}:GPUARModelRunner", False),
            locate(f"{root / 'vllm_ascend'}:NPUModelRunner", False))


@pytest.mark.parametrize("omni_imports_from", ["vllm.v1.worker.gpu_model_runner", "vllm.forward_context"])
def test_a_forward_block_whose_label_omni_renamed_is_one_block_and_omni_s_forward_lands_inside_it(
        tmp_path, omni_imports_from):
    gpu, omni, npu = _forward_sources(tmp_path, omni_imports_from)   # through the re-export, and directly
    res = port_class(gpu, omni, npu)
    code = res.code[res.code.index("def execute_forward"):res.code.index("def _dummy_run")]
    assert "set_forward_context" not in code and 'record_function_or_nullcontext("Forward")' not in code
    assert code.count("set_ascend_forward_context(") == 1   # the NPU base's forward block, kept
    lines = [l.strip() for l in code.splitlines()]
    at = {k: next(i for i, l in enumerate(lines) if l.startswith(k)) for k in (
        "with set_ascend_forward_context(", "outputs = self._run_generation(", "self.maybe_setup_kv_connector(",
        "self.maybe_wait_for_kv_save()", "_, multimodal_outputs = ")}
    # omni's forward call inside the NPU forward block (before the statement that follows that block), read after
    assert at["with set_ascend_forward_context("] < at["outputs = self._run_generation("] < \
        at["self.maybe_wait_for_kv_save()"] < at["_, multimodal_outputs = "]
    assert at["self.maybe_setup_kv_connector("] < at["self.maybe_wait_for_kv_save()"]   # the NPU block's own lines stay
    assert not any(d.code == "ONP4001" for d in res.diagnostics if d.where == "execute_forward")


def _with(label: str, ctx: str) -> ast.stmt:
    return ast.parse(f"with {ctx}, record_function_or_nullcontext({label!r}):\n    out = self.forward()\n").body[0]


def test_a_shared_context_taking_data_makes_a_renamed_label_the_same_block():
    ctx = "set_forward_context(attn_metadata, self.vllm_config, num_tokens=n)"
    assert statements_alike(_with("gpu_model_runner: forward", ctx), _with("Forward", ctx))
    assert statements_alike(_with("gpu_model_runner: forward", "self.kv_output(scheduler_output) as kv"),
                            _with("Forward", "self.kv_output(scheduler_output) as kv"))


def test_a_label_still_tells_blocks_apart_where_no_shared_context_takes_data():
    no_grad = lambda label: _with(label, "torch.no_grad()")   # shared, but no data: the label decides
    assert not statements_alike(no_grad("gpu_model_runner: forward"), no_grad("Forward"))
    assert not statements_alike(_with("sample", 'set_mode("eager")'), _with("draft_token", 'set_mode("eager")'))
