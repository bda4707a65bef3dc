"Derived rules (issue 33 part 1): per kind a fixture where the rule must fire and one where it must not."
import ast
from pathlib import Path

import pytest

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.sources.readers import open_source
from omni_npu_port.translate import derived
from omni_npu_port.translate.derived import DerivedIndex, twin_key
from omni_npu_port.translate.engine import translate_source
from omni_npu_port.translate.rules import compile_rules

FX = Path(__file__).parent / "fixtures" / "derived"


@pytest.fixture(scope="module")
def ix():
    return DerivedIndex(open_source(FX / "vllm", "vllm"), open_source(FX / "ascend", "vllm_ascend"))


def found(ix, name):
    return {(f.diagnostic.code, f.subject): f.diagnostic for f in ix.file_findings(ast.parse((FX / name).read_text()))}


def test_twin_key_pairs_gpu_and_npu_names():
    assert twin_key("cudagraph_dispatcher") == twin_key("aclgraph_dispatcher")
    assert twin_key("GPUModelRunner") == twin_key("NPUModelRunner") != twin_key("ModelRunnerOutput")


@pytest.mark.parametrize("code,subject,words", [
    ("ONP2040", "GPUModelRunner", ["vllm_ascend.worker.model_runner_v1.NPUModelRunner", "model_runner_v1.py:"]),
    ("ONP2040", "AsyncGPUModelRunnerOutput", ["AsyncNPUModelRunnerOutput"]),
    ("ONP2040", "cudagraph_dispatcher", ["aclgraph_dispatcher", "model_runner_v1.py:6"]),
    ("ONP2041", "init_worker_distributed_environment", ["gpu_worker"]),
    ("ONP2041", "_determine_batch_execution_and_padding", ["NPUModelRunner"]),
    ("ONP2040", "build_for_cudagraph_capture", ["build_for_graph_capture", "attention.py:2"]),
    ("ONP2041", "cudagraph_specialize_lora", ["names it anywhere"]),
    ("ONP2042", "cuda_seed", ["torch.cuda", "vllm/utils.py:5"]),
    ("ONP2044", "NCCL_ASYNC_ERROR_HANDLING", ["HCCL_ASYNC_ERROR_HANDLING", "envs.py:3"]),
    ("ONP2044", "TORCH_NCCL_AVOID_RECORD_STREAMS", ["names no"]),
])
def test_fires_with_where_it_was_derived_from(ix, code, subject, words):
    d = found(ix, "gpu_fires.py")[(code, subject)]
    assert all(w in d.message for w in words), d.message


def test_device_strings_and_comparisons(ix):
    lines = sorted(f.diagnostic.line for f in ix.file_findings(ast.parse((FX / "gpu_fires.py").read_text()))
                   if f.diagnostic.code == "ONP2043")
    assert lines == [13, 14, 22, 23]   # device.type == "cuda", f"cuda:{i}", .is_cuda, torch.device("cuda", i)


def test_runner_attributes_the_twin_has_are_quiet(ix):
    subjects = {s for _, s in found(ix, "gpu_fires.py")}
    assert not {"input_batch", "execute_model", "device", "extra", "dispatch", "result_queue"} & subjects


def test_a_module_is_never_twinned_with_a_class(ix):
    tree = ast.parse("import vllm.v1.worker.gpu_model_runner as gpu_runner\n")
    assert ix.file_findings(tree) == []


def test_quiet_file_gets_nothing(ix):
    assert found(ix, "gpu_quiet.py") == {}


def test_hooked_into_translate_source_without_duplicating_hand_records(ix, monkeypatch):
    monkeypatch.setattr(derived, "derived_index", lambda rules: ix)
    rules = compile_rules()
    src = (FX / "gpu_fires.py").read_text()
    off = translate_source(src, rules, "gpu_fires.py")
    assert not {d.code for d in off.diagnostics} & {"ONP2040", "ONP2041", "ONP2042", "ONP2043", "ONP2044"}
    rules.derived = True
    on = translate_source(src, rules, "gpu_fires.py")
    codes = [d.code for d in on.diagnostics]
    assert {"ONP2040", "ONP2041", "ONP2042", "ONP2043", "ONP2044"} <= set(codes)
    assert on.output == off.output   # findings only: the code is not changed
    hand = [d for d in on.diagnostics if not d.code.startswith("ONP204")]
    for d in on.diagnostics:
        if d.code.startswith("ONP204"):
            assert not any(h.line == d.line and "cuda" in h.message.lower() and d.code == "ONP2043" for h in hand)


def test_missing_sources_say_so_once(monkeypatch):
    monkeypatch.setattr(derived, "derived_index", lambda rules: None)
    monkeypatch.setattr(derived, "_TOLD", set())
    rules = compile_rules()
    rules.derived = True
    src = 'import os\nos.environ["NCCL_X"] = "1"\n'
    assert [d.code for d in translate_source(src, rules, "x.py").diagnostics] == ["ONP2049"]
    assert translate_source(src, rules, "y.py").diagnostics == []


def test_sources_too_big_for_the_memory_left_turn_the_derived_rules_off_not_the_translation(monkeypatch):
    def short(rules): raise MemoryError
    monkeypatch.setattr(derived, "derived_index", short)
    monkeypatch.setattr(derived, "_TOLD", set())
    rules = compile_rules()
    rules.derived = True
    t = translate_source("import torch\ntorch.cuda.synchronize()\n", rules, "x.py")
    assert t.error is None and "torch.npu.synchronize()" in t.code
    [d] = [d for d in t.diagnostics if d.code == "ONP2049"]
    assert "not enough memory" in d.message


def test_an_attribute_on_an_object_that_is_not_vllms_is_not_looked_up(ix):
    subjects = {s for c, s in found(ix, "gpu_receivers.py") if c == "ONP2041"}
    # probed on that object (hasattr / getattr), or annotated with a type not vllm's (another package's, the file's)
    assert not {"gpu_resident_keys", "gpu_extra_keys", "gpu_talker_keys", "gpu_box_keys"} & subjects
    # annotated with a vllm type, or of an origin the file does not tell: looked up, and missing
    assert {"cuda_missing_flag", "gpu_other_keys", "gpu_batch_keys"} <= subjects


def test_derived_check_is_the_one_entry(ix, monkeypatch):
    src = (FX / "gpu_fires.py").read_text()
    direct = [f.diagnostic for f in ix.file_findings(ast.parse(src))]
    assert [f.diagnostic for f in derived.derived_check(src, ix)] == direct
    assert derived.derived_check("def broken(:\n", ix) == []
    monkeypatch.setattr(derived, "derived_index", lambda rules: None)
    assert derived.derived_check(src, compile_rules()) is None


def test_a_device_type_test_is_one_finding_not_also_a_missing_name(ix):
    got = found(ix, "gpu_fires.py")
    assert ("ONP2043", "is_cuda") in got and ("ONP2041", "is_cuda") not in got


def test_the_translate_hook_reaches_a_device_string_only_an_escape_spells(ix, monkeypatch):
    monkeypatch.setattr(derived, "derived_index", lambda rules: ix)
    rules = compile_rules()
    rules.derived = True
    src = 'import torch\n\ndef pick():\n    return torch.device("\\x63uda")\n'   # no "cuda", "vllm" or "NCCL" as text
    assert "cuda" not in src
    on = translate_source(src, rules, "escaped.py")
    assert any(d.code.startswith("ONP204") for d in on.diagnostics)


GRAPHS = "from vllm.graphs import GraphWrapper, CapturingGraph, seeded_run, PlainWrapper, Broadcaster, not_nccl\n"


@pytest.mark.parametrize("subject,through,where", [
    ("GraphWrapper", "vllm.graphs.GraphCapture", "vllm/graphs.py:8"),     # builds a CUDA-only class of its module
    ("CapturingGraph", "vllm.graphs.GraphCapture", "vllm/graphs.py:8"),   # subclasses it
    ("seeded_run", "vllm.utils.cuda_seed", "vllm/utils.py:5"),            # calls a CUDA-only vllm def it imports
])
def test_cuda_only_one_step_away_fires(ix, subject, through, where):
    d = {f.subject: f.diagnostic for f in ix.file_findings(ast.parse(GRAPHS))}[subject]
    assert d.code == "ONP2042" and f"CUDA-only through {through}: torch.cuda" in d.message and where in d.message


def test_cuda_only_one_step_away_quiet(ix):
    # a name used only as a type, a CPU call, and a def that only compares a backend with NCCL: no CUDA-only body
    subjects = {f.subject for f in ix.file_findings(ast.parse(GRAPHS))}
    assert subjects == {"GraphWrapper", "CapturingGraph", "seeded_run"}


SHARED = "from vllm.utils import cuda_stream_copy, cuda_seed\n"


def test_a_cuda_only_def_the_target_calls_itself_is_said_not_flagged(ix):
    got = {f.subject: f.diagnostic for f in ix.file_findings(ast.parse(SHARED))}
    d = got["cuda_stream_copy"]   # the fixture's vllm-ascend calls it through a module alias (outputs.py:24)
    assert d.code == "ONP2060" and "vllm/utils.py:14" in d.message and "vllm_ascend/outputs.py:24" in d.message
    assert code_info("ONP2060").severity == "info"
    # imported, used as a default value and in an isinstance test by vllm-ascend, never called: still CUDA-only
    assert got["cuda_seed"].code == "ONP2042"


def test_a_same_key_subclass_is_the_twin_before_the_module_assigning_over_the_name(ix):
    src = ("from vllm.graphs import CudaGraphPool, cuda_warmup\n"
           "class Pool(CudaGraphPool):\n    def f(self):\n        return self.reset(), self.handle, self.gone\n")
    got = {(f.diagnostic.code, f.subject): f.diagnostic.message for f in ix.file_findings(ast.parse(src))}
    assert "vllm_ascend.outputs.AclGraphPool (derived from vllm-ascend ?: vllm_ascend/outputs.py:7)" in \
        got[("ONP2040", "CudaGraphPool")]
    # assigned over by a plain function of another name: the module that assigns stays the twin
    assert "vllm_ascend.outputs (assigns over vllm.graphs.cuda_warmup)" in got[("ONP2040", "cuda_warmup")]
    # the runner attributes of a class built on it are checked against the twin class: only `gone` is missing
    assert [s for c, s in got if c == "ONP2041"] == ["gone"]


def test_a_twin_class_whose_init_takes_other_arguments_is_said_not_a_drop_in(ix):
    got = {f.subject: f.diagnostic.message for f in ix.file_findings(ast.parse(
        "from vllm.graphs import GraphRunner, CudaGraphPool\n"
        "from vllm.v1.worker.gpu_model_runner import AsyncGPUModelRunnerOutput\n"))}
    assert "AclGraphRunner" in got["GraphRunner"] and "not a drop-in: its __init__ takes (runnable, config, " \
        "use_eagle), vllm's (runnable, config, runtime_mode)" in got["GraphRunner"]
    # the same __init__ parameters (CudaGraphPool), or `*args, **kwargs` passed on (AsyncNPUModelRunnerOutput): quiet
    assert "drop-in" not in got["CudaGraphPool"] and "drop-in" not in got["AsyncGPUModelRunnerOutput"]


TREE = FX / "tree" / "omni"


def test_a_runner_built_on_vllm_through_a_class_of_its_own_tree_is_checked(ix):
    path = TREE / "ar_runner.py"
    got = {(f.diagnostic.code, f.subject): f.diagnostic.message for f in
           ix.file_findings(ast.parse(path.read_text()), derived.module_reader(path))}
    assert "aclgraph_dispatcher" in got[("ONP2040", "cudagraph_dispatcher")]
    assert "built on it through omni.base_runner.OmniRunner" in got[("ONP2041", "missing_here")]
    # what the classes between define (OmniRunner's omni_state, Mixin's mixed) and what the twin has: quiet
    assert set(got) == {("ONP2040", "cudagraph_dispatcher"), ("ONP2041", "missing_here")}


def test_a_runner_whose_tree_cannot_be_read_is_not_guessed_at(ix):
    src = (TREE / "ar_runner.py").read_text()
    # no path: the base is only a name; the GPU-worded attribute is still said (any class), the missing one is not
    assert {(f.diagnostic.code, f.subject) for f in ix.file_findings(ast.parse(src))} == \
        {("ONP2040", "cudagraph_dispatcher")}
    assert derived.module_reader("<string>") is None
    # one base not in the tree: only a name vllm's class has and the twin lacks (cudagraph_mode) is flagged
    path = TREE / "lone_runner.py"
    got = {(f.diagnostic.code, f.subject) for f in ix.file_findings(ast.parse(path.read_text()),
                                                                    derived.module_reader(path))}
    assert got == {("ONP2041", "cudagraph_mode")}


def test_translate_reads_the_tree_of_the_file_it_is_given(ix, monkeypatch):
    monkeypatch.setattr(derived, "derived_index", lambda rules: ix)
    rules = compile_rules()
    rules.derived = True
    path = TREE / "ar_runner.py"
    on = translate_source(path.read_text(), rules, str(path))
    assert {"ONP2040", "ONP2041"} <= {d.code for d in on.diagnostics}
    assert not {d.code for d in translate_source(path.read_text(), rules, "ar_runner.py").diagnostics} & {"ONP2041"}


def test_a_mixin_beside_vllms_runner_is_read_from_the_tree(ix):
    path = TREE / "mixed_runner.py"
    tree = ast.parse(path.read_text())
    got = {(f.diagnostic.code, f.subject) for f in ix.file_findings(tree, derived.module_reader(path))}
    assert got == {("ONP2040", "GPUModelRunner"), ("ONP2041", "missing_here")}   # `mixed` is the mixin's
    # the mixin not read: a name vllm's runner lacks may be the mixin's
    assert {(f.diagnostic.code, f.subject) for f in ix.file_findings(tree)} == {("ONP2040", "GPUModelRunner")}


def test_an_object_of_the_trees_own_class_or_a_deeper_chain_outside_vllm_is_not_looked_up(ix):
    # issue 33: vLLM-Omni's own OmniIntermediateBuffer methods and `self.owner.model.X` were called missing from vllm
    path = TREE / "own_objects.py"
    tree = ast.parse(path.read_text())
    read = derived.module_reader(path)
    got = {(f.diagnostic.code, f.diagnostic.line, f.subject) for f in ix.file_findings(tree, read)}
    # must fire: `self.X` on a class built on vllm's runner that the target lacks; a deeper chain on that runner;
    # a chain through a part annotated with a vllm type; `self.X` in a class built on no vllm class
    assert {("ONP2041", 34, "update_gpu_rows"), ("ONP2041", 35, "gpu_batch_rows"), ("ONP2041", 20, "cuda_told_flag"),
            ("ONP2041", 21, "cuda_helper_flag")} <= got
    # must not: the same name on an object of the tree's own class (assigned, called, the file's class), a deeper
    # chain in a class built on no vllm class
    assert not {line for _, line, _ in got} & {18, 19, 31, 32, 33}, got
    # without the tree, an imported class is not known to be the tree's: looked up as before
    alone = {(f.diagnostic.line, f.subject) for f in ix.file_findings(tree)}
    assert {(31, "update_gpu_rows"), (32, "update_gpu_rows")} <= alone and not alone & {(18, "gpu_resident_keys")}


def test_a_class_built_on_no_vllm_class_is_told_through_its_bases():
    table = {"Base": "omni.buffers.RowBuffer", "Runner": "vllm.v1.worker.gpu_model_runner.GPUModelRunner"}
    read = derived.module_reader(TREE / "own_objects.py")
    cls = lambda src: ast.parse(src).body[0]
    assert derived.vllm_free(cls("class A(Base, Generic[T]): ..."), table, {}, read)
    assert derived.vllm_free(cls("class A(dict): ..."), table, {}, None)
    assert not derived.vllm_free(cls("class A(Runner): ..."), table, {}, read)
    assert not derived.vllm_free(cls("class A(Base): ..."), table, {}, None)   # the tree not read: not told
    assert not derived.vllm_free(cls("class A(Unknown): ..."), table, {}, read)


HELPER = ("from vllm.v1.worker.gpu_model_runner import GPUModelRunner\nclass Own:\n    pass\n"
          "class Helper:\n    def __init__(self, cfg, owner):\n"
          "        self.runner = {built}\n        self.owner = owner\n"
          "    def f(self):\n        return self.runner.model.cudagraph_gone_x, self.owner.model.cudagraph_gone_y\n")


def test_a_deeper_chain_in_a_plain_class_is_looked_up_on_a_vllm_class_it_built(ix):
    "The `self.a.b.x` gap (issue 33): a plain class that builds a vllm class holds a vllm object."
    tree = ast.parse(HELPER.format(built="GPUModelRunner(cfg)"))
    got = [(f.diagnostic.code, f.subject) for f in ix.file_findings(tree)]
    assert ("ONP2041", "cudagraph_gone_x") in got                     # the runner's: vllm's, looked up, missing
    assert all(s != "cudagraph_gone_y" for _, s in got)               # the owner's: untold, not looked up


def test_a_deeper_chain_on_an_object_of_the_files_own_class_is_still_quiet(ix):
    got = [(f.diagnostic.code, f.subject) for f in ix.file_findings(ast.parse(HELPER.format(built="Own()")))]
    assert not {"cudagraph_gone_x", "cudagraph_gone_y"} & {s for _, s in got}
