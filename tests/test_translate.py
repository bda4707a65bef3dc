"""Tests of `omni-npu-port translate`: every card pattern on a realistic GPU snippet, the properties
(parses, idempotent, untouched files byte-identical, comments and strings never changed), user rules,
the file-tree driver's safety rules and the command line."""
import ast
import io
import json
import os
import tokenize
from pathlib import Path

import pytest

from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.cli.main import main as cli_main
from omni_npu_port.translate.engine import compile_rules, translate_source
from omni_npu_port.translate.rules import RuleFileError
from omni_npu_port.translate.run import CODES, example_path, tour_translate, translate_paths


def main(argv):
    "`omni-npu-port translate ARGV` through the dispatcher: the exit code."
    return cli_main(["translate", *argv])

T18 = "vllm-ascend==0.18.0"


@pytest.fixture(scope="module")
def rules():
    return compile_rules(T18)


def tr(src, rules, **kw):
    t = translate_source(src, rules, **kw)
    assert t.error is None, t.error
    ast.parse(t.code)
    return t


def codes(t):
    return [d.code for d in t.diagnostics]


def npu(pid):
    return CATALOG[pid].npu_symbol


def gpu(pid):
    return CATALOG[pid].gpu_symbol


def leaf(s):
    return s.rsplit(".", 1)[-1]


RUNNER_HEAD = "from vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\nclass OmniRunner(GPUModelRunner):\n"


# ---------------------------------------------------------------- imports, renames, class swaps

def test_forward_context_import(rules):
    t = tr("from vllm.forward_context import set_forward_context, get_forward_context\n", rules)
    # set_forward_context moves; get_forward_context stays where it was
    assert "from vllm.forward_context import get_forward_context\n" in t.code
    assert "from vllm_ascend.ascend_forward_context import set_ascend_forward_context\n" in t.code
    assert "ONP1001" in codes(t)


@pytest.mark.parametrize("line", ["from vllm.distributed.parallel_state import graph_capture",
                                  "from vllm.distributed import graph_capture"])
def test_graph_capture_real_gpu_homes(rules, line):
    src = f"{line}\n\ndef capture(runner):\n    with graph_capture(runner.device):\n        runner.capture()\n"
    t = tr(src, rules)
    assert t.code.startswith("from vllm_ascend.worker.model_runner_v1 import graph_capture\n")
    assert "with graph_capture(runner.device):" in t.code


def test_graph_wrapper_construct_and_isinstance(rules):
    src = RUNNER_HEAD + (
        "    def load_model(self):\n"
        "        if self.cudagraph_mode.has_full_cudagraphs():\n"
        "            self.talker_mtp = CUDAGraphWrapper(self.model.talker_mtp, self.vllm_config, runtime_mode=CUDAGraphMode.FULL)\n"
        "    def mode(self):\n"
        "        if not isinstance(self.talker_mtp, CUDAGraphWrapper):\n"
        "            return CUDAGraphMode.NONE\n")
    src = "from vllm.compilation.cuda_graph import CUDAGraphWrapper\nfrom vllm.config import CUDAGraphMode\n" + src
    t = tr(src, rules)
    new = leaf(npu("graph.wrapper-construct"))
    assert f"self.talker_mtp = {new}(self.model.talker_mtp, self.vllm_config" in t.code
    assert f"isinstance(self.talker_mtp, {new})" in t.code
    assert leaf(gpu("graph.wrapper-construct")) not in t.code
    recs = {d.record for d in t.diagnostics}
    assert {"graph.wrapper-import", "graph.wrapper-construct", "graph.wrapper-isinstance"} <= recs


def test_aliases_and_module_qualified_references(rules):
    src = ("import torch as th\nfrom torch import cuda\nimport vllm.compilation.cuda_graph\n"
           "from vllm.compilation.cuda_graph import CUDAGraphWrapper as Wrapper\n\n"
           "def f(m, cfg):\n    th.cuda.synchronize()\n    s = cuda.Stream()\n"
           "    a = Wrapper(m, cfg)\n    b = vllm.compilation.cuda_graph.CUDAGraphWrapper(m, cfg)\n    return s, a, b\n")
    t = tr(src, rules)
    assert "th.npu.synchronize()" in t.code
    assert "s = npu.Stream()" in t.code and "from torch import npu" in t.code
    assert "import ACLGraphWrapper as Wrapper" in t.code and "a = Wrapper(m, cfg)" in t.code
    assert "b = vllm_ascend.compilation.acl_graph.ACLGraphWrapper(m, cfg)" in t.code
    assert "import vllm_ascend.compilation.acl_graph" in t.code


def test_device_ops_and_accelerator(rules):
    src = ("import torch\n\ndef step(device, stream):\n    torch.accelerator.synchronize()\n"
           "    s = torch.cuda.Stream(device=device)\n    with torch.cuda.stream(s):\n        pass\n"
           "    torch.cuda.current_stream().wait_stream(s)\n    torch.cuda.synchronize()\n")
    t = tr(src, rules)
    assert "torch.cuda" not in t.code and "torch.accelerator" not in t.code
    assert t.code.count("torch.npu.synchronize()") == 2
    assert "import torch\nimport torch_npu" in t.code          # torch.npu exists only after import torch_npu
    assert {"dev.accelerator-synchronize", "dev.synchronize", "dev.stream", "dev.current-stream"} <= {d.record for d in t.diagnostics}


def test_unmapped_cuda_member_is_flagged_not_renamed(rules):
    src = "import torch\n\ndef f():\n    torch.cuda.nvtx.range_push('x')\n    torch.cuda.set_per_process_memory_fraction(0.5)\n"
    t = tr(src, rules)
    code = "".join(l for l in t.code.splitlines(True) if not l.lstrip().startswith("#"))
    assert code == src and "torch.npu" not in t.code
    assert codes(t).count("ONP3001") == 2
    assert "# ONP3001" in t.code


def test_sampler_and_input_batch_with_card_correction(rules):
    src = ("from vllm.v1.sample.sampler import Sampler\nfrom vllm.v1.worker.gpu_input_batch import InputBatch\n"
           + RUNNER_HEAD + "    def __init__(self, cfg, device):\n        super().__init__(cfg, device)\n"
           "        self.sampler = Sampler()\n        self.input_batch = InputBatch(max_num_reqs=8, device=device)\n")
    t = tr(src, rules)
    assert f"self.sampler = {leaf(npu('sample.sampler'))}()" in t.code
    assert f"self.input_batch = {leaf(npu('batch.input-batch'))}(max_num_reqs=8" in t.code
    notes = [d for d in t.diagnostics if d.code == "ONP1004"]
    assert {d.record for d in notes} == {"sample.sampler", "batch.input-batch"}
    assert t.code.count("# ONP1004") == 2                       # the correction is written into the code
    assert "ONP2015" not in codes(t)                            # super().__init__ is not flagged


# ---------------------------------------------------------------- forward context keywords

FC = "from vllm.forward_context import set_forward_context\n"


def test_forward_context_in_dummy_run_uses_the_calls_num_tokens(rules):
    src = FC + RUNNER_HEAD + (
        "    def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None):\n"
        "        padded = self.pad(num_tokens)\n"
        "        with set_forward_context(\n            None,\n            self.vllm_config,\n"
        "            num_tokens=padded,\n            cudagraph_runtime_mode=cudagraph_runtime_mode,\n"
        "            ubatch_slices=None,\n            slot_mapping=None,\n        ):\n            return self.model()\n")
    t = tr(src, rules)
    call = t.code[t.code.index("set_ascend_forward_context("):]
    assert "aclgraph_runtime_mode=cudagraph_runtime_mode," in call
    assert "ubatch_slices" not in call and "slot_mapping" not in call
    assert "            num_actual_tokens=padded,\n            model_instance=self.model,\n        ):" in call


def test_forward_context_in_execute_model(rules):
    src = FC + RUNNER_HEAD + (
        "    def execute_model(self, scheduler_output, intermediate_tensors=None):\n"
        "        with set_forward_context(self.attn_metadata, self.vllm_config, num_tokens=self.padded,"
        " cudagraph_runtime_mode=self.mode, is_padding=False):\n            return self.model()\n")
    t = tr(src, rules)
    assert ("set_ascend_forward_context(self.attn_metadata, self.vllm_config, num_tokens=self.padded, "
            "aclgraph_runtime_mode=self.mode, num_actual_tokens=scheduler_output.total_num_scheduled_tokens, "
            "model_instance=self.model)") in t.code


def test_forward_context_elsewhere_gets_a_diagnostic(rules):
    src = FC + RUNNER_HEAD + ("    def _talker_mtp_forward(self, ids, mode, desc):\n"
                              "        with set_forward_context(None, self.vllm_config, cudagraph_runtime_mode=mode, batch_descriptor=desc):\n"
                              "            return self.talker_mtp(ids)\n")
    t = tr(src, rules)
    assert "num_actual_tokens=" not in t.code.replace("#     num_actual_tokens=...", "")
    d = next(d for d in t.diagnostics if d.code == "ONP2001")
    assert "num_actual_tokens" in d.message and "model_instance" in d.message
    assert "# ONP2001" in t.code


def test_forward_context_keyword_not_accepted_is_flagged(rules):
    src = FC + "def f(cfg):\n    with set_forward_context(None, cfg, virtual_engine=0, made_up=1):\n        pass\n"
    def rejected(r):
        return {d.message.split("does not accept ")[1].split("=")[0] for d in tr(src, r).diagnostics if d.code == "ONP2002"}
    assert rejected(rules) == {"made_up"}                        # virtual_engine is a parameter until v0.19.1rc1
    assert rejected(compile_rules("vllm-ascend==0.23.0")) == {"made_up", "virtual_engine"}


# ---------------------------------------------------------------- method signatures

def test_model_forward_definition_and_calls(rules):
    src = RUNNER_HEAD + (
        "    def _model_forward(self, input_ids=None, positions=None, **model_kwargs):\n"
        "        return super()._model_forward(input_ids=input_ids, positions=positions, **model_kwargs)\n\n"
        "    def execute_model(self, scheduler_output):\n"
        "        num_tokens_padded = self.pad(scheduler_output)\n"
        "        return self._model_forward(self.input_ids, self.positions)\n\n"
        "    def other(self):\n        return self._model_forward(input_ids=None)\n")
    t = tr(src, rules)
    assert "def _model_forward(self, num_tokens_padded, input_ids=None" in t.code
    assert "super()._model_forward(num_tokens_padded=num_tokens_padded, input_ids=input_ids" in t.code
    assert "self._model_forward(num_tokens_padded=num_tokens_padded, input_ids=self.input_ids, positions=self.positions)" in t.code
    assert "ONP2005" in codes(t)                                 # `other` has no num_tokens_padded
    assert "ONP2012" in codes(t)                                 # the full-graph params update is flagged


def test_dummy_run_definition_gains_target_parameters_and_calls_go_by_keyword(rules):
    src = RUNNER_HEAD + (
        "    def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None, force_attention=False,\n"
        "                   uniform_decode=False, allow_microbatching=True, skip_eplb=False, is_profile=False,\n"
        "                   create_mixed_batch=False, remove_lora=True, is_graph_capturing=False, num_active_loras=0):\n"
        "        return num_tokens\n\n"
        "    def capture_model(self):\n        for n in self.sizes:\n"
        "            self._dummy_run(n, CUDAGraphMode.FULL, is_graph_capturing=True)\n")
    t = tr(src, rules)
    params = CATALOG.params_for(npu("sig.dummy-run"), vllm_ascend="0.18.0")
    tree = ast.parse(t.code)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_dummy_run")
    assert set(params) <= {a.arg for a in fn.args.args}
    assert "self._dummy_run(num_tokens=n, cudagraph_runtime_mode=CUDAGraphMode.FULL, is_graph_capturing=True)" in t.code
    t17 = tr(src, compile_rules("vllm-ascend==0.17.0rc1"))
    assert "profile_seq_lens" not in t17.code and "with_prefill" in t17.code


def test_dummy_run_call_with_star_args_is_flagged(rules):
    src = RUNNER_HEAD + "    def warm(self, args):\n        self._dummy_run(*args)\n"
    t = tr(src, rules)
    assert codes(t) == ["ONP2003"] and "self._dummy_run(*args)" in t.code


# ---------------------------------------------------------------- manual work: flags at the right line

DUMMY = FC + "from vllm.config import CUDAGraphMode\n" + RUNNER_HEAD + (
    "    def _dummy_run(self, num_tokens, cudagraph_runtime_mode: CUDAGraphMode | None = None, is_graph_capturing=False):\n"
    "        if not cudagraph_runtime_mode:\n            cudagraph_runtime_mode = CUDAGraphMode.NONE\n"
    "        self.seq_lens.np[:8] = num_tokens\n"
    "        attn_metadata, _ = self._build_attention_metadata(num_tokens=num_tokens, num_reqs=8, slot_mappings=None)\n"
    "        positions = self.positions.gpu[:num_tokens]\n"
    "        with set_forward_context(attn_metadata, self.vllm_config, num_tokens=num_tokens):\n"
    "            return self.model(positions=positions)\n")


def _line_before(code, marker, code_id):
    "The ONP comment block right above the first line containing `marker` holds `code_id`."
    lines = code.splitlines()
    i = next(i for i, l in enumerate(lines) if marker in l and not l.lstrip().startswith("#"))
    j = i - 1
    while j >= 0 and lines[j].lstrip().startswith("#"):
        if lines[j].lstrip().startswith(f"# {code_id}"): return True
        j -= 1
    return False


@pytest.mark.parametrize("code_id,marker,record", [
    ("ONP2010", "self._build_attention_metadata(", "attn.state-select"),
    ("ONP2017", "self._build_attention_metadata(", "attn.build-metadata"),
    ("ONP2013", "self.seq_lens.np[:8]", "pa.using-paged-attention"),
    ("ONP2011", "with set_ascend_forward_context(", "rope.update-cos-sin"),
    ("ONP2016", "if not cudagraph_runtime_mode:", "graph.mode-bool"),
])
def test_flags_in_dummy_run(rules, code_id, marker, record):
    t = tr(DUMMY, rules)
    assert _line_before(t.code, marker, code_id)
    d = next(d for d in t.diagnostics if d.code == code_id)
    assert d.record == record and d.line > 0
    if CODES[code_id].records and CATALOG[record].kind != "signature-change" and code_id != "ONP2017":
        assert d.snippet == CATALOG[record].npu                    # the snippet to insert is the record's NPU form


def test_talker_mtp_uniform_decode_flag(rules):
    src = "from vllm.compilation.cuda_graph import CUDAGraphWrapper\n" + RUNNER_HEAD + (
        "    def _talker_mtp_forward(self, ids):\n"
        "        mode, desc, *_ = self._determine_batch_execution_and_padding(num_tokens=len(ids), num_reqs=len(ids))\n"
        "        if not isinstance(self.talker_mtp, CUDAGraphWrapper):\n            mode = None\n"
        "        return self.talker_mtp(ids)\n\n"
        "    def _dummy_run(self, num_tokens, uniform_decode=False):\n"
        "        return self._determine_batch_execution_and_padding(num_tokens=num_tokens, force_uniform_decode=uniform_decode)\n")
    t = tr(src, rules)
    flagged = [d for d in t.diagnostics if d.code == "ONP2014"]
    assert len(flagged) == 1 and flagged[0].line == 6            # only where the graph wrapper is used
    fixed = src.replace("num_reqs=len(ids))", "num_reqs=len(ids), force_uniform_decode=True)")
    assert "ONP2014" not in codes(tr(fixed, rules))


def test_super_call_in_runner_method_is_flagged_with_explicit_base(rules):
    src = RUNNER_HEAD + "    def load_model(self, *args, **kwargs):\n        super().load_model(*args, **kwargs)\n"
    t = tr(src, rules)
    d = next(d for d in t.diagnostics if d.code == "ONP2015")
    assert d.snippet.endswith(".load_model(self, *args, **kwargs)") and d.line == 5
    plain = "class NotARunner:\n    def load_model(self):\n        super().load_model()\n"
    assert translate_source(plain, rules).diagnostics == []


def test_clear_graphs_is_unsupported(rules):
    src = "from vllm.compilation.cuda_graph import CUDAGraphWrapper\n\ndef drop(w):\n    w.clear_graphs()\n    CUDAGraphWrapper.clear_all_graphs()\n"
    t = tr(src, rules)
    assert codes(t).count("ONP3002") == 2
    assert "w.clear_graphs()" in t.code                          # never removed silently


def test_full_graph_params_flag_after_forward(rules):
    src = RUNNER_HEAD + ("    def _model_forward(self, input_ids=None, positions=None):\n"
                         "        out = self.model(input_ids=input_ids, positions=positions)\n        return out\n")
    t = tr(src, rules)
    assert _line_before(t.code, "out = self.model(", "ONP2012")


def test_example_covers_every_card_pattern(rules):
    t = tr(example_path().read_bytes(), rules)
    recs = {d.record for d in t.diagnostics}
    card = {"fc.import", "fc.runtime-mode-kwarg", "fc.num-actual-tokens", "fc.model-instance", "fc.drop-gpu-kwargs",
            "graph.wrapper-import", "graph.wrapper-construct", "graph.wrapper-isinstance", "graph.capture",
            "dev.synchronize", "dev.accelerator-synchronize", "dev.stream", "dev.current-stream", "attn.state-select",
            "rope.update-cos-sin", "sample.sampler", "batch.input-batch", "gparams.if-needed", "pa.using-paged-attention",
            "sig.dummy-run", "sig.model-forward", "sig.explicit-base-call", "graph.mode-bool",
            "graph.talker-mtp-uniform-decode", "graph.clear-graphs"}
    assert card <= recs, card - recs
    assert "ONP3001" in codes(t)


# ---------------------------------------------------------------- properties

NEUTRAL = [
    "x = 1\n", "def f(a, b=2):\n    return a + b\n", "class A:\n    '''torch.cuda.synchronize() in a docstring'''\n    y = 'cuda'\n",
    "# set_forward_context(cudagraph_runtime_mode=1) in a comment\n", "s = 'torch.cuda.Stream()'\n",
    "import os\n", "if True:\n    pass\n", "f'{1 + 1}'\n", "b = b'\\x00CUDAGraphWrapper'\n",
]
GPU = [
    "import torch\ntorch.cuda.synchronize()\n", "import torch\nstream = torch.cuda.Stream()  # torch.cuda comment\n",
    "from vllm.forward_context import set_forward_context\nwith set_forward_context(None, c, cudagraph_runtime_mode=m):\n    pass\n",
    "from vllm.compilation.cuda_graph import CUDAGraphWrapper\nw = CUDAGraphWrapper(m, c, runtime_mode=FULL)\n",
    "import torch\ntorch.cuda.mem_get_info()  # 'string' in comment\n", "import torch\ntorch.cuda.foo_bar()\n",
    RUNNER_HEAD + "    def load_model(self):\n        super().load_model()\n",
    FC + RUNNER_HEAD + "    def _dummy_run(self, num_tokens):\n        with set_forward_context(None, c, num_tokens=num_tokens, slot_mapping=s):\n            pass\n",
]


def _tokens(code, kind):
    return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == kind]


def _check_properties(src, rules):
    t = translate_source(src, rules)
    assert t.error is None
    ast.parse(t.code)
    assert _tokens(t.code, tokenize.STRING) == _tokens(src, tokenize.STRING)        # strings never touched
    out_comments = _tokens(t.code, tokenize.COMMENT)
    it = iter(out_comments)
    assert all(any(c == o for o in it) for c in _tokens(src, tokenize.COMMENT))      # every comment kept, in order
    assert translate_source(t.code, rules).code == t.code                           # idempotent
    return t


def test_properties_on_fixed_mixes(rules):
    for i in range(len(GPU)):
        _check_properties("".join(NEUTRAL[:i]) + GPU[i] + "".join(NEUTRAL[i:]), rules)


def test_properties_hypothesis(rules):
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies

    @hyp.settings(max_examples=40, deadline=None, suppress_health_check=list(hyp.HealthCheck))
    @hyp.given(st.lists(st.sampled_from(NEUTRAL + GPU), min_size=1, max_size=6))
    def prop(parts):
        _check_properties("".join(parts), rules)

    @hyp.settings(max_examples=30, deadline=None)
    @hyp.given(st.lists(st.sampled_from(NEUTRAL), min_size=1, max_size=6), st.sampled_from(["\n", "\r\n"]))
    def untouched(parts, nl):
        src = "".join(parts).replace("\n", nl).encode()
        t = translate_source(src, rules)
        assert t.output == src and t.diagnostics == []           # byte-identical

    prop(); untouched()


def test_real_file_without_patterns_is_byte_identical(rules):
    import omni_npu_port.core.catalog as cat_mod
    data = Path(cat_mod.__file__).read_bytes()
    assert translate_source(data, rules).output == data


# ---------------------------------------------------------------- methods cut to what the rules read

CUT_CASES = {   # body of execute_model after an unrelated first statement -> (code that must be there, code that must not)
    "local rebinding of the module": ("        torch = self.fake_torch\n        x = 1\n        torch.cuda.synchronize()\n",
                                      None, "ONP1002"),
    "binding in a nested block": ("        if self.ok:\n            torch = self.fake_torch\n        y = 2\n"
                                  "        torch.cuda.synchronize()\n", None, "ONP1002"),
    "graph mode assigned, then tested": ("        m = CUDAGraphMode.FULL\n        z = 3\n        if m:\n            pass\n",
                                         "ONP2016", None),
    "name a rule's scope check asks about": ("        positions = self.p\n        w = 4\n"
                                             "        with set_forward_context(None, self.cfg):\n            pass\n", "ONP2011", None),
    "anchor in an else clause": ("        if self.a:\n            p = 1\n        elif self.b:\n            q = 2\n"
                                 "        else:\n            torch.cuda.synchronize()\n", "ONP1002", None),
    "anchor in an except clause": ("        try:\n            v = 1\n        except Exception as e:\n"
                                   "            torch.cuda.synchronize()\n        finally:\n            w = 2\n", "ONP1002", None),
    "rebinding in a try clause": ("        try:\n            torch = self.fake_torch\n        except Exception:\n            pass\n"
                                  "        torch.cuda.synchronize()\n", None, "ONP1002"),
    "rebinding by a for target": ("        for torch in self.mods:\n            pass\n        torch.cuda.synchronize()\n", None, "ONP1002"),
    "rebinding by with ... as": ("        with self.ctx() as torch:\n            pass\n        torch.cuda.synchronize()\n", None, "ONP1002"),
    "rebinding after a global declaration": ("        global torch\n        torch = self.fake_torch\n"
                                             "        torch.cuda.synchronize()\n", None, None),
    "graph mode tested in an elif": ("        m = CUDAGraphMode.FULL\n        if self.a:\n            pass\n        elif m:\n"
                                     "            pass\n", "ONP2016", None),
}


@pytest.mark.parametrize("case", CUT_CASES, ids=list(CUT_CASES))
def test_cut_methods_agree_with_whole_files(rules, case):
    from omni_npu_port.translate.chunking import chunk_plan as _plan, select_statements as _select
    body, present, absent = CUT_CASES[case]
    src = ("import torch\nfrom vllm.config import CUDAGraphMode\nfrom vllm.forward_context import set_forward_context\n"
           + RUNNER_HEAD + "    def other(self):\n        return 0\n\n"
           "    def execute_model(self, scheduler_output):\n        unrelated = 0\n" + body)
    data = src.encode()
    kept = b"".join(data[a:b] if f is None else f for a, b, f in _select(data, _plan(rules)))   # what libcst parses
    assert b"unrelated = 0" not in kept and b"def execute_model(" in kept    # the method was cut, not dropped
    t, w = tr(src, rules), tr(src, rules, chunks=False)
    assert t.output == w.output
    assert [d.to_dict() for d in t.diagnostics] == [d.to_dict() for d in w.diagnostics]
    if present: assert present in codes(t)
    if absent: assert absent not in codes(t)
    if case == "name a rule's scope check asks about":
        assert "no positions variable" not in next(d.message for d in t.diagnostics if d.code == "ONP2011")


# ---------------------------------------------------------------- bad input

def test_bad_input_is_reported_not_raised(rules):
    t = translate_source(b"import torch\ndef f(:\n    torch.cuda.synchronize()\n", rules)
    assert t.error.code == "ONP9001" and t.error.line == 2 and t.error.column >= 1
    assert translate_source(b"\x00\x01torch.cuda", rules).error.code == "ONP9002"
    assert translate_source(b"import torch\ns = '\xff'\ntorch.cuda.synchronize()\n", rules).error.code == "ONP9002"
    deep = "import torch\nx = " + "(" * 400 + "torch.cuda.synchronize()" + ")" * 400 + "\n"
    assert translate_source(deep, rules).error.code in ("ONP9001", "ONP9006")  # rejected, never raises


# ---------------------------------------------------------------- user rules

def test_user_rules_toml_and_yaml(tmp_path):
    (tmp_path / "a.toml").write_text('[[rule]]\nid = "team.nvtx"\nfamily = "device-ops"\nkind = "rename"\n'
                                     'gpu_symbol = "torch.cuda.nvtx.range_push"\nnpu_symbol = "mstx.range_push"\n')
    (tmp_path / "b.yaml").write_text("rules:\n  - id: dev.synchronize\n    npu_symbol: torch.npu.current_stream\n")
    r = compile_rules(T18, [tmp_path / "a.toml", tmp_path / "b.yaml"])
    t = tr("import torch\ntorch.cuda.nvtx.range_push('x')\ntorch.cuda.synchronize()\n", r)
    assert "mstx.range_push('x')" in t.code and "import mstx" in t.code
    assert "torch.npu.current_stream()" in t.code                # the user's record overrides the catalog's


def test_user_rule_with_same_gpu_symbol_replaces_catalog_record(tmp_path):
    (tmp_path / "r.toml").write_text('[[rule]]\nid = "team.sync"\nfamily = "device-ops"\nkind = "rename"\n'
                                     'gpu_symbol = "torch.cuda.synchronize"\nnpu_symbol = "torch.npu.synchronize_all"\n')
    r = compile_rules(T18, [tmp_path / "r.toml"])
    assert "torch.npu.synchronize_all()" in tr("import torch\ntorch.cuda.synchronize()\n", r).code


@pytest.mark.parametrize("text,suffix,needle", [
    ('[[rule]]\nid = "x.y"\nfamily = "device-ops"\nkind = "renam"\n', ".toml", "rule 1 (id 'x.y'): field 'kind'"),
    ("- id: a.b\n  family: device-ops\n  kind: rename\n  gpu_symbol: 'torch..cuda'\n", ".yaml", "field 'gpu_symbol'"),
    ("- id: a.b\n  kind: rename\n", ".yml", "field 'family'"),
    ("- family: device-ops\n", ".yaml", "field 'id'"),
    ("- id: a.b\n  colour: red\n", ".yaml", "field 'colour': unknown field"),
    ("[[rule]\n", ".toml", "not valid TOML"),
])
def test_invalid_rule_files_name_file_entry_and_field(tmp_path, text, suffix, needle, capsys):
    f = tmp_path / f"rules{suffix}"
    f.write_text(text)
    with pytest.raises(RuleFileError) as e: compile_rules(T18, [f])
    assert str(f) in str(e.value) and needle in str(e.value)
    src = tmp_path / "src.py"; src.write_text("import torch\ntorch.cuda.synchronize()\n")
    assert main([str(src), "--check", "--rules", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- the file-tree driver and the command

def _tree(root: Path):
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "runner.py").write_text("import torch\n\ndef f():\n    torch.cuda.synchronize()\n")
    (root / "pkg" / "sub" / "plain.py").write_bytes(b"# no GPU here\r\nx = 'torch.cuda'\r\n")
    (root / "pkg" / "sub" / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    (root / "pkg" / "notes.txt").write_text("not python")
    return root / "pkg"


def test_out_of_tree_mirrors_paths_and_reports(tmp_path, capsys):
    src = _tree(tmp_path / "in")
    out = tmp_path / "out"
    rc = main([str(src), "-o", str(out), "--report", str(tmp_path / "r.json"), "--summary", str(tmp_path / "s.md")])
    assert rc == 3                                               # one file failed, the rest were processed
    assert "torch.npu.synchronize()" in (out / "runner.py").read_text()
    assert (out / "sub" / "plain.py").read_bytes() == (src / "sub" / "plain.py").read_bytes()
    assert not (out / "sub" / "broken.py").exists() and not (out / "notes.txt").exists()
    assert (src / "runner.py").read_text().count("torch.cuda") == 1   # the input is untouched
    rep = json.loads((tmp_path / "r.json").read_text())
    by = {Path(f["path"]).name: f for f in rep["files"]}
    assert by["broken.py"]["status"] == "skipped" and by["broken.py"]["diagnostics"][0]["code"] == "ONP9001"
    assert by["broken.py"]["diagnostics"][0]["line"] == 2
    assert by["runner.py"]["rewritten"] >= 1 and rep["totals"]["failed"] == 1
    assert "broken.py:2:" in capsys.readouterr().err
    md = (tmp_path / "s.md").read_text()
    assert "| TOTAL |" in md and "ONP1002" in md
    assert main([str(src), "--check", "--summary", str(tmp_path / "s.csv"), "-q"]) == 3   # broken.py: the check is incomplete
    assert (tmp_path / "s.csv").read_text().splitlines()[0].startswith("file,status,lines,sites,rewritten,flagged")


def test_refuses_to_overwrite_and_to_write_outside(tmp_path):
    src = _tree(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    (out / "runner.py").write_text("my own file\n")
    outside = tmp_path / "elsewhere"; outside.mkdir()
    os.symlink(outside, out / "sub")                            # a link inside OUTDIR pointing out of it
    run = translate_paths([src], compile_rules(T18), outdir=out)
    st = {Path(f.path).name: f for f in run.files}
    assert st["runner.py"].status == "refused" and (out / "runner.py").read_text() == "my own file\n"
    assert st["plain.py"].status == "refused" and not any(outside.iterdir())
    run = translate_paths([src], compile_rules(T18), outdir=out, force=True)
    assert "torch.npu" in (out / "runner.py").read_text()
    assert not any(outside.iterdir())                            # --force never writes outside OUTDIR


def test_output_folder_inside_source_is_not_translated_again(tmp_path):
    src = _tree(tmp_path / "in")
    assert main([str(src), "-o", str(src / "npu"), "-q"]) == 3
    assert main([str(src), "-o", str(src / "npu"), "-q"]) == 3   # second run: outputs identical, nothing nested
    assert not (src / "npu" / "npu").exists()


def test_in_place_is_atomic_with_backup(tmp_path):
    f = tmp_path / "runner.py"
    f.write_text("import torch\ntorch.cuda.synchronize()\n")
    os.chmod(f, 0o640)
    assert main([str(f), "--in-place", "-q"]) == 0
    assert "torch.npu.synchronize()" in f.read_text() and (f.stat().st_mode & 0o777) == 0o640
    assert (tmp_path / "runner.py.orig").read_text() == "import torch\ntorch.cuda.synchronize()\n"
    f.write_text("import torch\ntorch.cuda.empty_cache()\n")
    assert main([str(f), "--in-place", "-q"]) == 3              # backup exists: refused
    assert "torch.cuda.empty_cache()" in f.read_text()
    assert main([str(f), "--in-place", "--force", "-q"]) == 0
    assert "torch.npu.empty_cache()" in f.read_text()
    assert "synchronize" in (tmp_path / "runner.py.orig").read_text()   # the older backup is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runner.py", "runner.py.orig"]   # no temp files left


def test_diff_and_check_modes(tmp_path, capsys):
    f = tmp_path / "runner.py"
    f.write_text("import torch\ntorch.cuda.synchronize()\n")
    assert main([str(f), "--diff", "-q"]) == 0
    out = capsys.readouterr().out
    assert "-torch.cuda.synchronize()" in out and "+torch.npu.synchronize()" in out
    assert f.read_text() == "import torch\ntorch.cuda.synchronize()\n"
    assert main([str(f), "--check", "-q"]) == 1
    o = tmp_path / "o"
    main([str(f), "-o", str(o), "-q"])
    assert main([str(o / "runner.py"), "--check", "-q"]) == 0       # a translated file passes the port's CI
    g = tmp_path / "flagged.py"
    g.write_text("import torch\ntorch.cuda.nvtx.range_pop()\n")
    assert main([str(g), "--check", "-q"]) == 1
    main([str(g), "--in-place", "-q"])
    assert main([str(g), "--check", "-q"]) == 1                     # the GPU symbol is still there, comment or not


def test_no_comments(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("import torch\ntorch.cuda.nvtx.range_pop()\ntorch.cuda.synchronize()\n")
    main([str(f), "-o", str(tmp_path / "o"), "--no-comments", "-q"])
    assert "# ONP" not in (tmp_path / "o" / "a.py").read_text()


def test_unreadable_binary_non_utf8_and_symlink_loops(tmp_path):
    d = tmp_path / "src"; d.mkdir()
    (d / "bin.py").write_bytes(b"\x00\x01\x02torch.cuda")
    (d / "latin.py").write_bytes(b"import torch\nx = '\xe9'\ntorch.cuda.synchronize()\n")
    (d / "latin_ok.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nx = '\xe9'\ntorch.cuda.synchronize()\n")
    os.symlink(d / "loop.py", d / "loop.py")
    os.symlink(d, d / "again")                                   # a folder link: not followed
    (d / "locked.py").write_text("import torch\n")
    os.chmod(d / "locked.py", 0)
    run = translate_paths([d], compile_rules(T18), outdir=tmp_path / "o")
    st = {Path(f.path).name: (f.status, f.diagnostics[0].code if f.diagnostics else None) for f in run.files}
    assert st["bin.py"] == ("skipped", "ONP9002") and st["latin.py"] == ("skipped", "ONP9002")
    assert st["latin_ok.py"][0] == "translated"
    assert "x = '\xe9'".encode("latin-1") in (tmp_path / "o" / "latin_ok.py").read_bytes()
    assert st["loop.py"] == ("skipped", "ONP9004") and st["again"][1] == "ONP9004"
    if os.geteuid() != 0:
        assert st["locked.py"] == ("skipped", "ONP9003")


def test_cli_usage_errors(tmp_path, capsys):
    f = tmp_path / "a.py"; f.write_text("x = 1\n")
    assert main([str(f)]) == 2
    assert main([str(f), "--check", "--in-place"]) == 2
    assert main([str(f), "--check", "--target", "vllm-ascend==banana"]) == 2
    assert main([str(f), "--check", "--summary", str(tmp_path / "s.txt")]) == 2
    errs = [l for l in capsys.readouterr().err.splitlines() if l]
    assert len(errs) == 4 and all(e.startswith("omni-npu-port translate: error:") for e in errs)


def test_default_target_is_the_profile(monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", "0.17.0rc1")
    assert compile_rules().vllm_ascend == "0.17.0rc1"


def test_tour_translate_shows_diff_and_summary(tmp_path):
    from rich.console import Console
    con = Console(file=io.StringIO(), width=120)
    run = tour_translate(con, T18, out_dir=tmp_path)
    text, whole = con.file.getvalue(), (tmp_path / "gpu_runner_example.diff").read_text()
    assert "import torch_npu" in text and "set_ascend_forward_context" in whole and "ONP2011" in whole
    assert run.totals()["rewritten"] > 0 and run.totals()["flagged"] > 0


# ---------------------------------------------------------------- statement chunks (speed) and name resolution

def _both(src, rules, **kw):
    "The chunked and the whole-file translation, which must agree."
    a, b = translate_source(src, rules, **kw), translate_source(src, rules, chunks=False, **kw)
    key = lambda t: (t.output, [(d.code, d.line, d.column, d.message, d.record, d.acknowledged) for d in t.diagnostics],
                     t.error and (t.error.code, t.error.line))
    assert key(a) == key(b)
    return a


CHUNKY = (
    "# SPDX header\n\"\"\"Docstring mentioning torch.cuda.synchronize().\"\"\"\nimport os\n"
    "import torch\nfrom torch.cuda import synchronize as sync\nfrom vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\n"
    "CONST = {'a': (1,\n2)}\n\n\nclass Helper:\n    def h(self):\n        return os.getcwd()\n\n\n"
    "class OmniRunner(GPUModelRunner):\n"
    "    '''Runner.'''\n\n"
    "    # a comment about load_model\n"
    "    @staticmethod\n"
    "    # between decorators\n"
    "    @torch.inference_mode()\n"
    "    def load_model(self, *args):\n"
    "        super().load_model(*args)\n\n"
    "    def untouched(self, x):\n"
    "        s = '''\nclass Fake(GPUModelRunner):\n    torch.cuda.synchronize()\n'''\n"
    "        return x  # torch.cuda.synchronize()\n\n"
    "    def waits(self):\n"
    "        sync()\n\n"
    "    # about the dummy run\n"
    "    @torch.inference_mode()\n"
    "    def _dummy_run(self, num_tokens):\n"
    "        return num_tokens\n\n\n"
    "def tail():\n    return [i for i in range(3)]\n")


def test_chunked_untouched_statements_are_byte_identical(rules):
    t = _both(CHUNKY, rules)
    out = t.code
    for piece in ["# SPDX header\n\"\"\"Docstring mentioning torch.cuda.synchronize().\"\"\"\n",
                  "CONST = {'a': (1,\n2)}\n", "class Helper:\n    def h(self):\n        return os.getcwd()\n",
                  "    def untouched(self, x):\n        s = '''\nclass Fake(GPUModelRunner):\n    torch.cuda.synchronize()\n'''\n"
                  "        return x  # torch.cuda.synchronize()\n", "def tail():\n    return [i for i in range(3)]\n"]:
        assert piece in out
    assert "ONP2015" in codes(t)                                  # super() in the runner class
    assert "from torch.npu import synchronize as sync" in out and "        sync()\n" in out


def test_chunked_alias_imported_at_the_top_is_found(rules):
    src = ("import torch.cuda as tc\nfrom torch.cuda import Stream as S\n\nX = 1\n\n\n"
           "def far_away():\n    s = S()\n    tc.nvtx.range_push('x')\n    return s\n")
    t = _both(src, rules)
    assert {"ONP1001", "ONP3001"} <= set(codes(t))
    assert "from torch.npu import Stream as S" in t.code and "s = S()" in t.code


def test_chunked_diagnostic_lines_are_the_files_own(rules):
    t = _both(CHUNKY, rules)
    lines = CHUNKY.splitlines()
    d = next(d for d in t.diagnostics if d.code == "ONP2015")
    assert lines[d.line - 1].strip().startswith("super().load_model(") and d.column == 9
    d = next(d for d in t.diagnostics if d.record == "dev.synchronize" and d.code == "ONP1001")
    assert "import synchronize as sync" in lines[d.line - 1]


def test_chunk_boundary_inside_class_with_decorators_and_comments(rules):
    t = _both(CHUNKY, rules)
    out = t.code
    assert ("    # a comment about load_model\n    @staticmethod\n    # between decorators\n"
            "    @torch.inference_mode()\n    def load_model(self, *args):\n") in out
    assert _line_before(out, "super().load_model(", "ONP2015")
    block = out[out.index("    # about the dummy run"):out.index("    def _dummy_run")]   # the def's comment goes
    assert block.index("# about the dummy run") < block.index("# ONP1008") < block.index("@torch.inference_mode()")
    assert _both(out, rules).code == out                          # idempotent through the chunks
    crlf = _both(CHUNKY.replace("\n", "\r\n").encode(), rules)   # CRLF bytes: same pieces, same endings
    assert crlf.output == out.replace("\n", "\r\n").encode()


def test_chunked_flag_in_a_nested_statement_is_written(rules):
    src = FC + RUNNER_HEAD + ("    def _dummy_run(self, num_tokens):\n        if num_tokens:\n"
                              "            for i in range(2):\n                self.seq_lens.np[:8] = num_tokens\n")
    t = _both(src, rules)
    assert _line_before(t.code, "self.seq_lens.np[:8]", "ONP2013")


MODULE_MODE = ("from vllm.config import CUDAGraphMode\nMODE = CUDAGraphMode.FULL\n\n\ndef other():\n    pass\n\n\n"
               "if MODE:\n    pass\n")
RUNNER_CHAIN = ("from vllm.v1.worker.gpu_model_runner import GPUModelRunner as Base\n\n\nclass A(Base):\n    pass\n\n\n"
                "class B(A):\n    def load_model(self):\n        super().load_model()\n")


@pytest.mark.parametrize("src", [*NEUTRAL, *GPU, DUMMY, CHUNKY, MODULE_MODE, RUNNER_CHAIN])
def test_chunked_and_whole_file_agree(rules, src):
    _both(src, rules)
    _both("".join(NEUTRAL) + src + "".join(reversed(GPU)), rules)


def test_batched_traversal_visits_what_libcst_visits():
    import libcst as cst
    from omni_npu_port.translate.cst_fast import TOKENS as _TOKENS, BatchVisitor as _Batch
    class Seen(cst.CSTVisitor):
        def __init__(self): super().__init__(); self.seen = []
        def on_visit(self, node): self.seen.append(node); return True
    for src in [CHUNKY, DUMMY, example_path().read_text()]:
        module = cst.parse_module(src)
        full, fast, left = Seen(), [], []
        module.visit(full)
        _Batch([], fast.append, left.append).run(module)
        kept = [n for n in full.seen if type(n) not in _TOKENS]
        assert len(kept) == len(fast) == len(left) > 100 and all(a is b for a, b in zip(kept, fast))


COPIED = ("import torch\nfrom vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\n\nclass R(GPUModelRunner):\n"
          "    def other(self):\n        return 1\n\n"
          "    def __init__(self, vllm_config, device):\n        super().__init__(vllm_config, device)\n\n"
          "    def other2(self):\n        return 2\n\n    def sync(self):\n        torch.cuda.synchronize()\n")  # __init__: copied


@pytest.mark.parametrize("src", [COPIED, CHUNKY, DUMMY, MODULE_MODE, RUNNER_CHAIN, "example"])
def test_copied_text_and_group_positions_equal_full_generation(rules, src, monkeypatch):
    from omni_npu_port.translate import chunking as tr_mod
    data = example_path().read_bytes() if src == "example" else src.encode()
    fast = translate_source(data, rules)
    monkeypatch.setattr(tr_mod.ChunkLayout, "output", lambda self, new: None)        # every byte generated
    monkeypatch.setattr(tr_mod.ChunkLayout, "positions", lambda self, ctx, nodes: None)
    slow = translate_source(data, rules)
    assert fast.changed and fast.output == slow.output
    assert [d.to_dict() for d in fast.diagnostics] == [d.to_dict() for d in slow.diagnostics]


def test_chunked_context_beyond_the_anchors(rules):
    assert "ONP2016" in codes(_both(MODULE_MODE, rules))             # a module-level mode name, tested later
    assert "ONP2015" in codes(_both(RUNNER_CHAIN, rules))            # a runner through a runner defined above


def test_a_rule_class_defined_again_keeps_chunked_and_whole_file_agreeing(rules):
    "A notebook re-running a rule's cell registers a new class of the same name: the chunker must not depend on the old one."
    import inspect
    from omni_npu_port.translate import flags
    from omni_npu_port.translate.context import RULE_VISITORS
    saved = list(RULE_VISITORS)
    try:   # the class's cell run again, as in a notebook: a new class of the same name, registered in its place
        ns = dict(vars(flags))
        exec(inspect.getsource(flags.GraphModeTruthFlag), ns)
        assert ns["GraphModeTruthFlag"] in RULE_VISITORS and flags.GraphModeTruthFlag not in RULE_VISITORS
        assert "ONP2016" in codes(_both(MODULE_MODE, rules))
    finally:
        RULE_VISITORS[:] = saved


def test_chunked_errors_still_reported(rules):
    t = translate_source(b"import torch\n\n\ndef f(:\n    torch.cuda.synchronize()\n", rules)
    assert t.error.code == "ONP9001" and t.error.line == 4
    bad = b"import torch\n\n\ndef g():\n    return '\xff'\n\n\ndef f():\n    torch.cuda.synchronize()\n"
    assert translate_source(bad, rules).error.code == "ONP9002"


def test_names_shadowing_and_scopes(rules):
    src = ("import torch\nfrom torch.cuda import stream\n\n"
           "def param(torch):\n    torch.cuda.synchronize()\n\n"
           "def local():\n    torch = make()\n    torch.cuda.synchronize()\n\n"
           "def comp(xs):\n    return [torch.cuda.Event() for torch in xs]\n\n"
           "class A:\n    torch = None\n    def m(self):\n        torch.cuda.synchronize()\n\n"
           "def kw(f, s):\n    f(stream=s)\n    return s.stream\n\n"
           "def glob():\n    global torch\n    torch.cuda.empty_cache()\n")
    t = _both(src, rules)
    body = t.code.split("def param", 1)[1]
    assert body.count("torch.cuda.synchronize()") == 2 and body.count("torch.npu.synchronize()") == 1   # only A.m
    assert "torch.cuda.Event() for torch in xs" in body and "torch.npu.empty_cache()" in body
    assert "f(stream=s)" in body and "return s.stream" in body    # keyword and attribute names are no references


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_jobs_give_the_same_run(tmp_path, monkeypatch, start, request):
    import threading
    if start == "fork" and not request.getfixturevalue("forks_alone"): return   # ran, and passed, in a child
    import omni_npu_port.translate.run as tmod
    for i, src in enumerate([DUMMY, CHUNKY, "x = 1\n", GPU[0]]):
        (tmp_path / "src" / f"m{i}.py").parent.mkdir(exist_ok=True)
        (tmp_path / "src" / f"m{i}.py").write_text(src)
    r = compile_rules(T18)
    one = translate_paths([tmp_path / "src"], r, check=True).to_dict()
    monkeypatch.setattr(tmod, "_POOL_MIN", 0)          # a pool even for these small files
    import multiprocessing
    used, real = [], multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda method=None: (used.append(method), real(method))[1])
    done, other = threading.Event(), None
    if start == "spawn":    # a second thread (as in a Jupyter kernel): the pool must not fork
        other = threading.Thread(target=done.wait); other.start()
    try: two = translate_paths([tmp_path / "src"], r, check=True, jobs=2).to_dict()
    finally:
        done.set()
        if other: other.join()
    assert one["files"] == two["files"] and one["totals"]["sites"] > 0
    assert used == [start]   # the fork case runs where this process has one thread (`forks_alone`)
    assert main([str(tmp_path / "src"), "--check", "-q", "--jobs", "-1"]) == 2


def test_chunk_stubs_stand_in_for_what_no_rule_reads(rules):
    "Headers, bindings and imports no rule reads go to libcst as short stubs or not at all; the output is the whole-file one."
    from omni_npu_port.translate.chunking import chunk_plan as _plan, select_statements as _select
    src = ("# Copyright line one\n# line two\n# line three\n\nimport os\nimport torch\nimport json as unused_json\n"
           + RUNNER_HEAD +
           "    @staticmethod\n    def helper(a: int = 3, *, b: str = 'x') -> int:\n"
           "        data = os.environ.get('X')\n        lines = json_lines(data)\n"
           "        # a comment block\n        # of three\n        # lines\n"
           "        torch.cuda.synchronize(lines)\n        return 0\n")
    data = src.encode()
    segs = _select(data, _plan(rules))
    parsed = b"".join(data[a:b] if f is None else f for a, b, f in segs)
    assert b"def helper(a, *, b):" in parsed and b"@staticmethod" not in parsed        # header stub
    assert b"lines = None" in parsed and b"json_lines" not in parsed                   # binding stub
    assert b"unused_json" not in parsed and b"Copyright" not in parsed and b"of three" not in parsed
    t, w = tr(src, rules), tr(src, rules, chunks=False)
    assert t.output == w.output and "ONP1002" in codes(t)
    assert [d.to_dict() for d in t.diagnostics] == [d.to_dict() for d in w.diagnostics]
    assert b"@staticmethod\n    def helper(a: int = 3, *, b: str = 'x') -> int:" in t.output.encode()


def test_only_imports_match_nothing_is_parsed(rules):
    "A file whose only matches are imports (no rule acts on them) is not handed to libcst at all."
    from omni_npu_port.translate.engine import might_apply as _might_apply
    src = b"import torch\n\nHELP = 'call torch.cuda.synchronize() first'\n"
    assert _might_apply(rules, src)                       # the text pre-filter lets it through (it reads no syntax)
    t = translate_source(src, rules)
    assert not t.parsed and not t.changed and t.diagnostics == []
    assert translate_source(src + b"torch.cuda.synchronize()\n", rules).parsed


def test_anchor_scan_matches_the_anchor_regex(rules):
    "`_anchors` (bytes.find) finds exactly what the anchor regex finds, in order, on tricky text and a real example."
    from omni_npu_port.translate.chunking import chunk_plan as _plan, find_anchors as _anchors, mask_strings as _mask
    from omni_npu_port.translate.run import example_path
    plan = _plan(rules)
    texts = [b"GPUModelRunner\n", b"class A(GPUModelRunner): super().x\n", b"OmniGPUModelRunner torch.cuda.synchronize()\n",
             b"xsuper super_ cuda_ _cuda cuda\ncuda", b"current_stream stream.current_stream()", b"",
             _mask(example_path().read_bytes())[0]]
    for m in texts:
        assert _anchors(m, plan) == [(h.start(), h.group()) for h in plan.rx.finditer(m)]


def test_gpu_class_patched_by_name_is_flagged_not_module_names(rules):
    "ONP2018 where a GPU class is assigned by name onto a run-time module object; not on an imported module's own name."
    src = ("import sys\nimport torch\nfrom vllm.compilation.cuda_graph import CUDAGraphWrapper as _Orig\n\n\n"
           "class CUDAGraphWrapper(_Orig):\n    pass\n\n\n"
           "def patch():\n    for _name, mod in sys.modules.items():\n        mod.CUDAGraphWrapper = CUDAGraphWrapper\n"
           "    torch.Event = object\n    self_like = mod\n    self_like.Sampler = None\n")
    t = tr(src, rules)
    flagged = [(d.line, d.message.split()[0]) for d in t.diagnostics if d.code == "ONP2018"]
    assert flagged == [(12, "CUDAGraphWrapper"), (15, "Sampler")]          # not torch.Event (torch's own name)
    assert "# ONP2018" in t.code and "ACLGraphWrapper as _Orig" in t.code
    w = tr(src, rules, chunks=False)
    assert t.output == w.output and [d.to_dict() for d in t.diagnostics] == [d.to_dict() for d in w.diagnostics]
    again = translate_source(t.code, rules)
    assert again.code == t.code and all(d.acknowledged for d in again.diagnostics if d.code == "ONP2018")


def test_local_subclass_of_a_gpu_class_is_flagged_where_used(rules):
    "ONP2019 at construction and isinstance of the file's own subclass of a GPU class; nothing for other classes."
    src = ("from vllm.compilation.cuda_graph import CUDAGraphWrapper as _Orig\n" + RUNNER_HEAD +
           "    def load_model(self):\n        self.m = CUDAGraphWrapper(self.m, self.vllm_config)\n"
           "        self.n = Other(self.m)\n\n"
           "    def f(self):\n        return isinstance(self.m, (CUDAGraphWrapper, int))\n\n\n"
           "class CUDAGraphWrapper(_Orig):\n    pass\n\n\nclass Other:\n    pass\n")
    t = tr(src, rules)
    assert [d.code for d in t.diagnostics if d.code == "ONP2019"] == []        # used before it is defined: unknown
    src = src.replace(RUNNER_HEAD, "class CUDAGraphWrapper(_Orig):\n    pass\n\n\n" + RUNNER_HEAD, 1)
    t = tr(src, rules)
    flagged = [(d.line, d.record) for d in t.diagnostics if d.code == "ONP2019"]
    assert flagged == [(10, "graph.wrapper-construct"), (14, "graph.wrapper-construct")]
    assert "ACLGraphWrapper as _Orig" in t.code
    w = tr(src, rules, chunks=False)
    assert t.output == w.output and [d.to_dict() for d in t.diagnostics] == [d.to_dict() for d in w.diagnostics]


def test_installed_libcst_is_in_the_tested_range():
    "The speed paths use libcst internals (`cst_fast.PRIVATE_APIS`); a libcst outside the tested range may have changed them."
    import importlib.metadata
    from omni_npu_port.translate.cst_fast import PRIVATE_APIS, TESTED_LIBCST
    installed = tuple(int(x) for x in importlib.metadata.version("libcst").split(".")[:2])
    assert TESTED_LIBCST[0] <= installed < TESTED_LIBCST[1], (
        f"libcst {installed} is outside the tested range {TESTED_LIBCST}: check the private APIs "
        f"omni_npu_port.translate.cst_fast uses ({', '.join(PRIVATE_APIS)}) and the chunked == whole-file tests")


# ---------------------------------------------------------------- never silent (issue 13)

FIX = Path(__file__).parent / "fixtures" / "translate"


def test_reexported_gpu_symbol_is_flagged_never_silent(rules):
    "A catalog GPU symbol imported through another vllm module (or a star import of its module) is flagged ONP2020."
    src = (FIX / "reexported_forward_context.py").read_text()
    t = _both(src, rules)
    fc = gpu("fc.import")
    flagged = [(d.line, d.message) for d in t.diagnostics if d.code == "ONP2020"]
    assert [line for line, _ in flagged] == [2, 4, 12, 14]    # the import, the star import, its use, module_alias.name
    assert all(fc in m for _, m in flagged)
    # device-generic torch names and the NPU side's own names are not GPU symbols re-exported
    assert not any(d.line in (5, 6) for d in t.diagnostics)
    code_lines = lambda text: [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    assert "# ONP2020" in t.code and code_lines(t.code) == code_lines(src)      # flagged, not changed


def test_check_prints_one_line_per_finding_and_fails(tmp_path, capsys):
    "--check: exit 1 on a re-exported GPU symbol; `path:line:col: CODE message` lines on stdout, as many as pending."
    f = FIX / "reexported_forward_context.py"
    rep = tmp_path / "r.json"
    assert main([str(f), "--check", "--target", T18, "-q", "--report", str(rep)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(l.startswith(f"{f}:") and l.split(": ", 1)[1].startswith("ONP") for l in out)
    assert [l.split(":")[1] for l in out if " ONP204" not in l] == ["2", "4", "12", "14"]
    no_sources = any(" ONP2049 " in l for l in out)   # derived rules: GPUModelRunner's NPU twin, where the cache has sources
    assert [l.split(":")[1] for l in out if " ONP2040 " in l] == ([] if no_sources else ["2"])
    assert json.loads(rep.read_text())["totals"]["pending"] == len(out)


def test_check_counts_flagged_gpu_symbols_even_with_their_comment(tmp_path, capsys, rules):
    "A translated file that keeps a flagged GPU symbol (its `# ONP2020` comment written) still fails --check."
    out = translate_source((FIX / "reexported_forward_context.py").read_text(), rules).code
    f = tmp_path / "done.py"; f.write_text(out)
    assert main([str(f), "--check", "--target", T18, "-q"]) == 1
    assert "ONP2020" in capsys.readouterr().out
    clean = tmp_path / "clean.py"; clean.write_text("import os\n\nprint(os.sep)\n")
    assert main([str(clean), "--check", "--target", T18, "-q"]) == 0
    assert capsys.readouterr().out == ""


def test_self_check_reports_a_gpu_symbol_no_rule_handled(rules):
    "A GPU symbol inside an f-string (where no rule acts) is reported by the translator about itself (ONP9007)."
    src = "import torch\n\n\ndef f():\n    x = f\"{torch.cuda.synchronize()}\"\n    torch.cuda.synchronize()\n    return x\n"
    t = _both(src, rules)
    gap = [d for d in t.diagnostics if d.code == "ONP9007"]
    assert [(d.line, d.record) for d in gap] == [(5, "dev.synchronize")] and gap[0].severity == "error"
    assert "translator gap" in gap[0].message
    assert "ONP9007" not in codes(_both(CHUNKY, rules))            # handled references are not reported
    assert "ONP9007" not in codes(tr(example_path().read_text(), rules))


def test_dummy_run_parameter_renamed_where_the_npu_runner_uses_another_name():
    "cudagraph_runtime_mode → aclgraph_runtime_mode in an override, its body and its calls, only where the target's NPU signature says so."
    src = (FIX / "dummy_run_override.py").read_text()
    user = [FIX / "acl_dummy_run.toml"]
    old = _both(src, compile_rules("vllm-ascend==0.15.0rc1", user))
    assert "def _dummy_run(self, num_tokens, with_prefill=False, aclgraph_runtime_mode=None" in old.code
    assert "mode = aclgraph_runtime_mode\n        if aclgraph_runtime_mode is not None:" in old.code
    assert "[cudagraph_runtime_mode for cudagraph_runtime_mode in (mode,)]" in old.code      # its own scope
    assert "def inner(cudagraph_runtime_mode):\n            return cudagraph_runtime_mode" in old.code
    assert '"cudagraph_runtime_mode"' in old.code and "aclgraph_runtime_mode=mode)" in old.code
    assert codes(old).count("ONP1012") == 2
    ast.parse(old.code)
    new = _both(src, compile_rules(T18, user))                   # 0.18.0's NPU _dummy_run takes cudagraph_runtime_mode
    assert "aclgraph_runtime_mode" not in new.code and "ONP1012" not in codes(new)


def test_empty_parameter_list_means_unknown_never_accepts_nothing():
    "Where the records hold no parameter list for the NPU callable, ONP2002 never says it takes nothing."
    src = (RUNNER_HEAD.replace("GPUModelRunner\n", "GPUModelRunner\nfrom vllm.forward_context import set_forward_context\n", 1)
           + "    def _dummy_run(self, num_tokens, mode=None):\n"
             "        with set_forward_context(None, self.vllm_config, num_tokens=num_tokens, cudagraph_runtime_mode=mode):\n"
             "            pass\n")
    for target in ("vllm-ascend==0.13.0", "vllm-ascend==0.14.0rc1", "vllm-ascend==0.15.0rc1", T18):
        t = _both(src, compile_rules(target))
        assert not any(d.code == "ONP2002" and d.message.rstrip().endswith("it takes:") for d in t.diagnostics), target
        assert "aclgraph_runtime_mode=mode" in t.code


def test_method_rules_only_where_the_target_has_the_method():
    "_model_forward gains num_tokens_padded only at targets whose NPU runner's record for it holds."
    src = RUNNER_HEAD + ("    def _model_forward(self, input_ids=None, positions=None, **kw):\n        return self.model(input_ids)\n\n"
                         "    def execute_model(self, num_tokens_padded, input_ids):\n        return self._model_forward(input_ids)\n")
    name = leaf(npu("sig.model-forward"))
    for target in ("vllm-ascend==0.14.0rc1", "vllm-ascend==0.15.0rc1"):
        has = any(p.npu_symbol and leaf(p.npu_symbol) == name and p.kind == "signature-change"
                  for p in CATALOG.select(vllm_ascend=target.split("==")[1]))
        t = _both(src, compile_rules(target))
        assert ("num_tokens_padded=num_tokens_padded" in t.code) == has, target
        assert ("ONP1008" in codes(t)) == has, target


class _Defined(str):
    "What a symbol index's `resolve` answers: an object whose `dotted` is where the name is defined."
    dotted = property(str.__str__)


def test_reexport_resolved_by_a_symbol_index_is_translated_as_the_symbol():
    "Given where names are defined (the optional `resolve` hook), a re-export of a catalog symbol is rewritten as it."
    fc = gpu("fc.import")
    where = {fc: fc, "vllm.v1.worker.gpu_model_runner.set_forward_context": fc}
    r = compile_rules(T18, resolve=lambda n: _Defined(where[n]) if n in where else None)
    t = _both((FIX / "reexported_forward_context.py").read_text(), r)
    assert [d.line for d in t.diagnostics if d.code == "ONP2020"] == [4]        # only the star import is left
    assert f"from {parent_name_(npu('fc.import'))} import {leaf(npu('fc.import'))}" in t.code
    assert f"with {leaf(npu('fc.import'))}(attn_metadata" in t.code
    assert "cudagraph" not in t.code and "gpu_runner.set_forward_context" not in t.code
    # the sources say the name is another object: no flag
    other = compile_rules(T18, resolve=lambda n: _Defined(n))
    assert "ONP2020" not in codes(_both("from vllm.v1.worker.gpu_model_runner import set_forward_context\n"
                                        "set_forward_context(None, None)\n", other))


def parent_name_(s):
    return s.rsplit(".", 1)[0]


def test_npu_parameters_never_put_a_default_before_a_required_parameter(rules):
    "An override with its own required parameter after the NPU ones' place still parses: they go after it (ONP1008 says so)."
    src = RUNNER_HEAD + "    def _dummy_run(self, num_tokens, mode, extra=1):\n        return mode\n"
    t = _both(src, rules)
    assert t.error is None
    ast.parse(t.code)
    d = next(d for d in t.diagnostics if d.code == "ONP1008")
    assert "placed after the parameters without a default" in d.message
    assert "def _dummy_run(self, num_tokens, mode, " in t.code


def test_a_target_older_than_the_catalog_is_served_by_its_first_release_and_says_so():
    "Older than the catalog's first release: that release's records and pairing (records needing a newer vllm stay out), with a warning."
    from omni_npu_port.core.catalog import VLLM_ASCEND_VERSIONS, parse_version
    first = min((v for v in VLLM_ASCEND_VERSIONS if v != "main"), key=parse_version)
    newer = [p.id for p in CATALOG if p.vllm_since]
    assert newer
    old = compile_rules("vllm-ascend==0.12.0rc1")
    assert old.release == first and "older than the catalog's first release" in old.warning
    assert sorted(old.records) == sorted(compile_rules(f"vllm-ascend=={first}").records)
    assert [pid for pid in newer if pid in old.records] == [pid for pid in newer if CATALOG[pid].holds_for(first, old.vllm)]
    now = compile_rules(T18)
    assert now.warning is None and now.release == "0.18.0"
    assert [pid for pid in newer if pid in now.records] == [pid for pid in newer if CATALOG[pid].holds_for("0.18.0", now.vllm)]
    src = ("from vllm.config import CUDAGraphMode\n\n\ndef f(mode: CUDAGraphMode):\n    if mode:\n        return 1\n")
    assert "ONP2016" not in codes(_both(src, old)) and "ONP2016" in codes(_both(src, now))


def test_cli_warns_when_the_target_is_served_by_another_release(tmp_path, capsys):
    src = tmp_path / "r.py"
    src.write_text("import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n")
    assert cli_main(["translate", str(src), "-o", str(tmp_path / "out"), "--target", "vllm-ascend==0.99"]) == 0
    err = capsys.readouterr().err
    assert "omni-npu-port translate: warning: vllm-ascend 0.99 is not a release the catalog knows" in err


def test_cli_source_tells_reexports_by_the_sources(tmp_path, capsys):
    "translate --source DIR: a re-export the (stand-in) vllm source shows is the catalog symbol is translated, not flagged."
    f, src = FIX / "reexported_forward_context.py", FIX / "reexport_src"
    out = tmp_path / "out"
    assert main([str(f), "-o", str(out), "--target", T18, "-q", "--source", str(src)]) == 0
    code = (out / f.name).read_text()
    assert f"import {leaf(npu('fc.import'))}" in code and "gpu_runner.set_forward_context" not in code
    assert code.count("# ONP2020") == 1                                   # the star import only
    assert main([str(f), "--check", "--target", T18, "-q", "--source", str(tmp_path / "missing")]) == 3


def test_uses_of_names_a_star_import_of_another_vllm_module_may_bind_are_flagged(rules):
    "No source at hand: each use of a catalog leaf a `from vllm.x import *` may bind is flagged where it is used."
    src = (FIX / "star_reexport.py").read_text()
    t = _both(src, rules)
    flagged = {(d.line, d.message.split(" ", 1)[0]) for d in t.diagnostics if d.code == "ONP2020"}
    lines = src.splitlines()
    uses = {(i + 1, w) for i, l in enumerate(lines) for w in ("set_forward_context", "CUDAGraphWrapper")
            if w + "(" in l or l.strip() == f"return {w}  # noqa: F405"}
    assert flagged == uses and len(uses) == 3                  # the two calls and the bare use; not the string
    assert not any("graph_capture" in d.message for d in t.diagnostics)   # a parameter of that name is local
    code_lines = lambda text: [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    assert code_lines(t.code) == code_lines(src)


def test_a_source_resolves_what_a_star_import_binds(tmp_path):
    "With the re-exporting module's source: the catalog symbol it re-exports is rewritten, its own same-named class is not."
    from omni_npu_port.sources.symbols import SymbolIndex
    rs = compile_rules(T18, resolve=SymbolIndex.open(str(FIX / "star_src")).resolve)
    t = tr((FIX / "star_reexport.py").read_text(), rs)
    assert "ONP2020" not in codes(t) and "ONP9007" not in codes(t)
    assert f"import {leaf(npu('fc.import'))}" in t.code and f"with {leaf(npu('fc.import'))}(" in t.code
    assert "CUDAGraphWrapper(runner.model)" in t.code and f"return {leaf(npu('fc.import'))}" in t.code
    assert '"set_forward_context"' in t.code                  # strings stay


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_check_findings_in_ci_formats(fmt, capsys):
    "--check --output-format: the same findings as the text lines, as JSON, SARIF 2.1.0 or GitHub annotations."
    f = FIX / "reexported_forward_context.py"
    assert main([str(f), "--check", "--target", T18, "-q"]) == 1
    text = capsys.readouterr().out.splitlines()
    assert main([str(f), "--check", "--target", T18, "-q", "--output-format", fmt]) == 1
    out = capsys.readouterr().out
    where = [(l.split(":")[1], l.split(": ", 1)[1].split()[0]) for l in text]          # (line, code) of each text line
    if fmt == "json":
        got = [(str(r["line"]), r["code"]) for r in json.loads(out)]
    elif fmt == "sarif":
        log = json.loads(out)
        assert log["version"] == "2.1.0" and log["runs"][0]["tool"]["driver"]["name"] == "omni-npu-port translate"
        res = log["runs"][0]["results"]
        got = [(str(r["locations"][0]["physicalLocation"]["region"]["startLine"]), r["ruleId"]) for r in res]
        assert {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]} == {c for _, c in where}
    else:
        lines = out.splitlines()
        assert all(l.startswith(("::warning file=", "::error file=", "::notice file=")) for l in lines)
        got = [(l.split("line=")[1].split(",")[0], l.split("title=")[1].split("::")[0]) for l in lines]
    assert got == where


def test_output_format_goes_with_check(tmp_path, capsys):
    assert main([str(FIX / "reexported_forward_context.py"), "-o", str(tmp_path / "o"), "--output-format", "json"]) == 2
    assert "add --check" in capsys.readouterr().err


def test_check_mode_counts_what_would_change_and_translated_code_has_nothing_left(tmp_path, capsys):
    src = tmp_path / "g.py"
    src.write_text("import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n")
    assert main([str(src), "--check", "--target", T18]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "2 sites would be rewritten" in err and "converted" not in err
    assert main([str(src), "-o", str(tmp_path / "out"), "--target", T18, "-q"]) == 0
    assert main([str(tmp_path / "out" / "g.py"), "--check", "--target", T18]) == 0
    assert "no GPU-isms found" in " ".join(capsys.readouterr().err.split())


# --- issue 34 part 5: a translated tree states its target, and a later --check on it uses the same one ----------------
def test_a_translated_tree_states_its_target_and_check_uses_it(tmp_path, capsys):
    from omni_npu_port.translate.run import TARGET_FILE
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "pkg").mkdir(parents=True)
    # a file no derived rule can find anything in: the target's index is neither read nor scanned (issue 34)
    (src / "pkg" / "runner.py").write_text("import os\n\n\ndef step():\n    return os.getpid()\n")
    assert main([str(src), "-o", str(out), "--target", "vllm-ascend==0.23.0"]) == 0
    assert '"vllm-ascend==0.23.0"' in (out / TARGET_FILE).read_text()
    capsys.readouterr()
    main(["--check", str(out / "pkg")])   # no --target: the line the tree states, said so
    err = capsys.readouterr().err
    assert "target vllm-ascend 0.23.0 (ONP4308 stated by the translated tree:" in err and str(out / TARGET_FILE) in err
    main(["--check", "--target", "vllm-ascend==0.18.0", str(out)])   # --target still wins
    assert "target vllm-ascend 0.18.0 (--target)" in capsys.readouterr().err
    main(["--check", str(src)])   # must not fire: the source tree states nothing
    assert "ONP4308" not in capsys.readouterr().err


def test_a_target_file_this_tool_did_not_write_is_kept_and_states_nothing(tmp_path, capsys):
    from omni_npu_port.translate.run import TARGET_FILE
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir(); out.mkdir()
    (src / "runner.py").write_text("import os\nos.getpid()\n")   # nothing a derived rule finds: no index read
    (out / TARGET_FILE).write_text('target = "vllm-ascend==0.13.0"\n')   # a user's file, not this tool's line
    assert main([str(src), "-o", str(out), "--target", "vllm-ascend==0.23.0"]) == 0
    assert "ONP4309" in capsys.readouterr().err
    assert (out / TARGET_FILE).read_text() == 'target = "vllm-ascend==0.13.0"\n'
    main(["--check", str(out)])
    assert "ONP4308" not in capsys.readouterr().err


@pytest.mark.parametrize("literal, rewritten", [
    ('"\\x63uda"', '"npu"'), ("'cu\\x64a:0'", "'npu:0'"), ('"""\\N{LATIN SMALL LETTER C}uda"""', '"""npu"""'),
    ('"cuda"', '"npu"')])
def test_device_string_spelled_with_escapes_is_rewritten(literal, rewritten):
    src = f"import torch\ndef f(x):\n    del x.device_type   # the rule acts near a device-type word\n    return torch.device({literal})\n"
    t = translate_source(src, compile_rules("vllm-ascend==0.18.0"))
    assert f"torch.device({rewritten})" in t.code and [d.code for d in t.diagnostics] == ["ONP1031"]
    assert eval(rewritten) == eval(literal).replace("cuda", "npu")


def test_escaped_string_not_naming_cuda_is_left_alone():
    src = 'import torch\ndef f(x):\n    return torch.device("\\x6e\\x70u"), x.device_type == "c\\x75da2"\n'
    t = translate_source(src, compile_rules("vllm-ascend==0.18.0"))
    assert t.code == src and t.diagnostics == []
