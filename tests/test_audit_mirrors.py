"""Issue 24, part 6 (precision): omni's GPU-side change mirrored on the NPU side in another form is no drift — moved
into a helper the NPU override calls (found through its MRO), written through a local bound once, bound to a
renamed local, a base statement in omni's older copy, or in the later form the NPU source's own newer GPU runner
has. Each rule is paired with a change it must still report. Fixtures are written here."""
import shutil
from pathlib import Path

from omni_npu_port.port.audit import ClassGraph, Matcher, called_statements, drift, method_statements, own_methods
from omni_npu_port.port.locate import open_tree, top_classes
from omni_npu_port.sources.symbols import SymbolIndex

from audit_helpers import AUDIT_FIXTURES, lost, three_way


# --- a statement refactored into a helper the NPU override calls, found through the NPU runner's MRO ------------------
GPU_INIT = ("def __init__(self, cfg):\n    super().__init__(cfg)\n    self._hook = None\n    self._hook_resolved = False\n")
NPU_INIT = "def __init__(self, cfg):\n    super().__init__(cfg)\n    self._init_hook_state()\n"
BASE_INIT = "def __init__(self, cfg):\n    super().__init__(cfg)\n"


def _npu_side(tmp_path: Path, helper_body: str):
    "The older-layout fixture with OmniNPUModelRunner defining `_init_hook_state` and NPUARModelRunner an __init__ calling it."
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / "old_layout"))
    npu = root / "vllm_omni/worker/npu"
    base = npu / "npu_model_runner.py"
    base.write_text(base.read_text() + f"\n    def _init_hook_state(self):\n{helper_body}")
    ar = npu / "npu_ar_model_runner.py"
    ar.write_text(ar.read_text() + "\n" + "".join("    " + line + "\n" for line in NPU_INIT.splitlines()))
    tree = open_tree(str(root))
    graph = ClassGraph(SymbolIndex([tree]))
    module = "vllm_omni.worker.npu.npu_ar_model_runner"
    node = top_classes(tree.module_ast(module))["NPUARModelRunner"]
    runner = graph.cls(module, node)
    return graph, runner, own_methods(node)["__init__"]


def test_a_statement_moved_into_a_helper_the_npu_override_calls_through_its_mro_is_mirrored(tmp_path):
    graph, runner, init = _npu_side(tmp_path, "        self._hook = None\n        self._hook_resolved = False\n")
    called = called_statements(graph, runner, init, {})
    assert called is not None and "self . _hook = None" in called.keys    # defined in the base class, another file
    assert three_way(GPU_INIT, NPU_INIT, BASE_INIT, called=called) == []
    assert lost(three_way(GPU_INIT, NPU_INIT, BASE_INIT)) == ["+ self._hook = None", "+ self._hook_resolved = False"]


def test_a_helper_that_does_something_else_mirrors_nothing(tmp_path):
    graph, runner, init = _npu_side(tmp_path, "        self._hook = None\n")
    found = three_way(GPU_INIT, NPU_INIT, BASE_INIT, called=called_statements(graph, runner, init, {}))
    assert lost(found) == ["+ self._hook_resolved = False"]


# --- omni's copy of a base statement that adds nothing of omni's own --------------------------------------------------
BASE_FWD = ("def execute_model(self, batch):\n"
            "    with set_forward_context(batch, self.config, num_tokens=n, skip_compiled=flag), record('gpu: forward'):\n"
            "        out = self.model(batch)\n    return out\n")
NPU_FWD = ("def execute_model(self, batch):\n    with set_ascend_forward_context(batch, self.config, num_tokens=n):\n"
           "        out = self.model(batch)\n    return out\n")


def test_an_older_copy_of_a_base_statement_is_no_omni_change():
    gpu = BASE_FWD.replace(", skip_compiled=flag", "").replace("'gpu: forward'", "'Forward'")   # an argument left out, a label reworded
    assert three_way(gpu, NPU_FWD, BASE_FWD) == []


def test_a_base_statement_omni_added_to_or_changed_is_still_its_change():
    for gpu in (BASE_FWD.replace("num_tokens=n,", "num_tokens=n, slot_mapping=slots,"),      # omni adds a keyword
                BASE_FWD.replace("num_tokens=n,", "num_tokens=m,")):                          # omni changes a value
        found = three_way(gpu, NPU_FWD, BASE_FWD)
        assert len(lost(found)) == 1 and lost(found)[0].startswith("+ with set_forward_context"), gpu


# --- the same value read through a local bound once ------------------------------------------------------------------
GPU_EARLY = ("def execute_model(self, out):\n    self.update(out)\n    if not out.total_tokens:\n"
             "        return EMPTY\n    return self.run(out)\n")
BASE_EARLY = "def execute_model(self, out):\n    self.update(out)\n    return self.run(out)\n"


def test_a_value_read_through_a_local_bound_once_to_it_is_the_same_statement():
    npu = ("def execute_model(self, out):\n    total = out.total_tokens\n    self.update(out)\n    if not total:\n"
           "        return EMPTY\n    return self.run(out)\n")
    assert three_way(GPU_EARLY, npu, BASE_EARLY) == []


def test_a_local_whose_source_changes_after_it_is_bound_is_not_that_value():
    def keys(src):
        return method_statements(src, {}).keys
    bound = "def f(self, out):\n    total = out.total_tokens\n    self.update(out)\n    return self.run(total, n=total)\n"
    assert keys(bound)[2] == "return self . run ( out . total_tokens , n = out . total_tokens )"   # each read is the chain
    assert keys(bound)[0] == "total = out . total_tokens"                                             # the binding stays
    rebound = bound.replace("    self.update(out)\n", "    out = self.update(out)\n")
    assert keys(rebound)[2] == "return self . run ( total , n = total )"      # out rebound after the binding
    before = "def f(self, out):\n    out = self.prep(out)\n" + bound.split("\n", 1)[1]
    assert keys(before)[3] == "return self . run ( out . total_tokens , n = out . total_tokens )"   # rebound before it
    twice = bound.replace("    self.update(out)\n", "    total = 0\n")
    assert keys(twice)[2] == "return self . run ( total , n = total )"        # bound twice
    of_self = bound.replace("out.total_tokens", "self.total_tokens")
    assert keys(of_self)[2] == "return self . run ( total , n = total )"      # self's state changes under calls
    of_call = bound.replace("out.total_tokens", "out.total()")
    assert keys(of_call)[2] == "return self . run ( total , n = total )"      # a call is no plain value


# --- an adapted copy bound to a renamed local --------------------------------------------------------------------------
GPU_OUT = ("def sample_tokens(self, ids, logprobs, nans):\n"
           "    output = OmniOutput(ids, logprobs, nans, req_ids=self.req_ids, pooled=self.pooled, extra=None)\n"
           "    return output\n")
BASE_OUT = "def sample_tokens(self, ids, logprobs, nans):\n    return Output(ids, logprobs)\n"


def test_an_adapted_copy_bound_to_a_renamed_local_is_its_counterpart():
    npu = ("def sample_tokens(self, ids, logprobs, nans):\n"
           "    result = OmniOutput(ids, logprobs, req_ids=self.req_ids, pooled=self.pooled, extra=None)\n    return result\n")
    assert three_way(GPU_OUT, npu, BASE_OUT) == []
    changed = npu.replace("extra=None", "extra=1")
    assert lost(three_way(GPU_OUT, changed, BASE_OUT))[0].startswith("+ output = OmniOutput(")


def test_a_renamed_target_pairs_one_way_only():
    g = method_statements("def f(self, a, b, c):\n    x = g(a, b, c, k=1, m=2)\n    y = h(a, b, c, k=1, m=2)\n", {})
    n = method_statements("def f(self, a, b, c):\n    z = g(a, b, k=1, m=2)\n    z2 = h(a, b, k=1, m=2)\n", {})
    m = Matcher(g, n)
    assert m.find(0) == 0 and m.find(1) == 1 and m.rename == {"x": "z", "y": "z2"}
    n_one = method_statements("def f(self, a, b, c):\n    z = g(a, b, k=1, m=2)\n    z2 = h(a, b, k=1, m=2)\n    z = 3\n", {})
    m = Matcher(method_statements("def f(self, a, b, c):\n    x = g(a, b, c, k=1, m=2)\n    z2 = h(a, b, c, k=1, m=2)\n", {}), n_one)
    assert m.find(1) == 1 and m.find(0) == 0     # z2 is z2's own name; x may be z


# --- the later form the NPU source's own, newer GPU runner has --------------------------------------------------------
GPU_N = ("def sample_tokens(self, out):\n    cpu = {}\n    for k, v in out.items():\n        cpu[k] = v.detach().to('cpu')\n"
         "    return self.pack(cpu)\n")
BASE_N = "def sample_tokens(self, out):\n    return self.pack(out)\n"
LATER_REFACTORED = "def sample_tokens(self, out):\n    cpu = build_cpu_copy(out)\n    return self.pack(cpu)\n"


def test_a_change_omni_itself_rewrote_later_is_checked_in_its_later_form():
    npu_later = "def sample_tokens(self, out):\n    cpu = build_cpu_copy(out)\n    return self.pack(cpu)\n"
    assert three_way(GPU_N, npu_later, BASE_N, later=(LATER_REFACTORED, "")) == []
    assert lost(three_way(GPU_N, npu_later, BASE_N)) != []                     # without the later release: drift


def test_a_change_the_later_release_still_has_and_the_npu_lacks_is_drift():
    assert lost(three_way(GPU_N, BASE_N, BASE_N, later=(GPU_N, ""))) == [
        "+ cpu = {}", "+ for (k, v) in out.items():", "+ cpu[k] = v.detach().to('cpu')"]


def test_the_later_form_must_be_in_the_npu_copy_too():
    assert lost(three_way(GPU_N, BASE_N, BASE_N, later=(LATER_REFACTORED, ""))) != []   # later has it another way; NPU not at all


# --- a statement written alike on both sides reads the same local, however each side binds it -------------------------
GPU_PAD = ("def fwd(self, ids, desc):\n    if not self.wrapped:\n        n = len(ids)\n    else:\n        n = desc.num_tokens\n"
           "    x = self.buf.gpu[:n]\n    return self.run(x)\n")
NPU_PAD = "def fwd(self, ids, desc):\n    n = desc.num_tokens\n    x = self.buf.gpu[:n]\n    return self.run(x)\n"


def test_a_statement_written_alike_is_no_drift_when_one_side_reads_its_local_through_a_bound_chain():
    "The NPU side binds `n` once (a chain the audit reads through), the GPU side twice: only the missing binding is drift."
    found = lost(drift(GPU_PAD, NPU_PAD, {}))
    assert found == ["+ if not self.wrapped:", "+ n = len(ids)"], found
    moved = NPU_PAD.replace("x = self.buf.gpu[:n]", "x = self.buf.gpu[:n + 1]")   # written otherwise: still drift
    assert "+ x = self.buf.gpu[:n]" in lost(drift(GPU_PAD, moved, {}))
