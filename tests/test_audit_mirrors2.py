"""Issue 24, part 6 (precision, held-out false positives): omni's GPU-side change mirrored on the NPU side in forms the
audit did not read as mirrored — a device symbol reached through the platform object, a helper reached as a function
of omni's package or as `Base.x(self, ...)`, a local bound then rebound from itself, a method omni added (no GPU base
method: checked three-way), a call carried between the GPU form and the later release's, a keyword the call gains with
a value of the NPU side's own (a note, not drift), a no-op `nullcontext()`, and vllm's own state passed to vllm code
vllm-ascend replaced. Each rule is paired with a change of the same shape it must still report. Fixtures are written here."""
import shutil
from pathlib import Path

import omni_npu_port.port.audit
from omni_npu_port.port.audit import (ClassGraph, base_or_none, called_statements, drift, gpu_to_npu_names, method_statements,
                                      own_methods, platform_hooks, runner_bases)
from omni_npu_port.port.locate import open_tree, top_classes
from omni_npu_port.sources.symbols import SymbolIndex

from audit_helpers import AUDIT_FIXTURES, lost, three_way, vllm_source


# --- a device symbol reached through the platform object (the catalog's platform-hook records) ------------------------
GPU_WRAP = ("def load_model(self):\n    super().load_model()\n    if self.full and (self.separate or self.graph_safe):\n"
            "        self.mtp = CUDAGraphWrapper(self.model.mtp, self.cfg, runtime_mode=CUDAGraphMode.FULL)\n")
BASE_WRAP = "def load_model(self):\n    super().load_model()\n"
NPU_WRAP = ("def load_model(self):\n    super().load_model()\n    if self.full and (self.separate or self.graph_safe):\n"
            "        wrapper_cls = current_omni_platform.get_graph_wrapper_cls()\n"
            "        self.mtp = wrapper_cls(self.model.mtp, self.cfg, runtime_mode=CUDAGraphMode.FULL)\n")


def test_the_catalog_names_the_platform_hooks():
    hooks = platform_hooks()
    assert hooks.get("current_omni_platform.get_graph_wrapper_cls()") == "CUDAGraphWrapper"
    assert hooks.get("current_omni_platform.set_forward_context") == "set_forward_context"


def test_a_device_class_reached_through_the_platform_hook_is_the_class():
    names = gpu_to_npu_names()
    assert three_way(GPU_WRAP, NPU_WRAP, BASE_WRAP, names) == []
    inline = NPU_WRAP.replace("        wrapper_cls = current_omni_platform.get_graph_wrapper_cls()\n", "").replace(
        "wrapper_cls(", "current_omni_platform.get_graph_wrapper_cls()(")
    assert three_way(GPU_WRAP, inline, BASE_WRAP, names) == []


def test_another_platform_call_or_other_arguments_are_still_drift():
    names = gpu_to_npu_names()
    other = NPU_WRAP.replace("get_graph_wrapper_cls()", "get_compile_backend()")
    assert lost(three_way(GPU_WRAP, other, BASE_WRAP, names)) == [
        "+ self.mtp = CUDAGraphWrapper(self.model.mtp, self.cfg, runtime_mode=CUDAGraphMode.FULL)"]
    piecewise = NPU_WRAP.replace("CUDAGraphMode.FULL)\n", "CUDAGraphMode.PIECEWISE)\n")
    assert len(lost(three_way(GPU_WRAP, piecewise, BASE_WRAP, names))) == 1


# --- a helper reached as a function of omni's package, or as Base.x(self, ...) through the MRO --------------------------
GPU_INIT = "def __init__(self, cfg):\n    super().__init__(cfg)\n    self._hook = None\n    self._hook_resolved = False\n"
BASE_INIT = "def __init__(self, cfg):\n    super().__init__(cfg)\n"
HELPER_FN = "\n\ndef init_hook_state(runner, resolved=False):\n    runner._hook = None\n    runner._hook_resolved = resolved\n"


def _npu_side(tmp_path: Path, npu_init: str, helper_module: str = "", base_method: str = ""):
    "The older-layout fixture: NPUARModelRunner's __init__ is `npu_init`; `helper_module` a module of omni's package it imports from."
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / "old_layout"))
    npu = root / "vllm_omni/worker/npu"
    (npu / "hooks.py").write_text(helper_module)
    if base_method:
        base = npu / "npu_model_runner.py"
        base.write_text(base.read_text() + base_method)
    ar = npu / "npu_ar_model_runner.py"
    ar.write_text("from .hooks import *\n" + ar.read_text() + "\n" + "".join("    " + line + "\n" for line in npu_init.splitlines()))
    tree = open_tree(str(root))
    graph = ClassGraph(SymbolIndex([tree]))
    module = "vllm_omni.worker.npu.npu_ar_model_runner"
    node = top_classes(tree.module_ast(module))["NPUARModelRunner"]
    return graph, graph.cls(module, node), own_methods(node)["__init__"]


def test_a_statement_moved_into_a_function_of_omnis_package_is_mirrored(tmp_path):
    npu = "def __init__(self, cfg):\n    super().__init__(cfg)\n    init_hook_state(self, resolved=False)\n"
    graph, runner, init = _npu_side(tmp_path, npu, HELPER_FN)
    called = called_statements(graph, runner, init, {})
    assert called is not None and "self . _hook = None" in called.keys     # the parameter read as what the call passes
    assert three_way(GPU_INIT, npu, BASE_INIT, called=called) == []


def test_a_function_that_does_something_else_mirrors_nothing(tmp_path):
    npu = "def __init__(self, cfg):\n    super().__init__(cfg)\n    init_hook_state(self, resolved=True)\n"
    graph, runner, init = _npu_side(tmp_path, npu, HELPER_FN)
    found = three_way(GPU_INIT, npu, BASE_INIT, called=called_statements(graph, runner, init, {}))
    assert lost(found) == ["+ self._hook_resolved = False"]


def test_a_function_outside_omnis_package_is_not_read(tmp_path):
    npu = "def __init__(self, cfg):\n    super().__init__(cfg)\n    init_hook_state(self)\n"
    graph, runner, init = _npu_side(tmp_path, npu, "from os.path import join as init_hook_state\n")
    assert called_statements(graph, runner, init, {}) is None


def test_a_helper_of_a_base_class_called_by_its_name_is_mirrored(tmp_path):
    npu = "def __init__(self, cfg):\n    super().__init__(cfg)\n    OmniNPUModelRunner._init_hook_state(self)\n"
    helper = "\n    def _init_hook_state(self):\n        self._hook = None\n        self._hook_resolved = False\n"
    graph, runner, init = _npu_side(tmp_path, npu, base_method=helper)
    assert three_way(GPU_INIT, npu, BASE_INIT, called=called_statements(graph, runner, init, {})) == []
    graph, runner, init = _npu_side(tmp_path / "2", npu, base_method=helper.replace("        self._hook_resolved = False\n", ""))
    assert lost(three_way(GPU_INIT, npu, BASE_INIT, called=called_statements(graph, runner, init, {}))) == [
        "+ self._hook_resolved = False"]


# --- a local bound, then rebound from itself ------------------------------------------------------------------------
GPU_SIZES = ("def capture(self):\n    sizes = self.config.capture_sizes\n    warmups = self.config.warmups\n"
             "    sizes = sorted(sizes, reverse=True)\n    for n in sizes:\n        self.run(n, warmups)\n")
NPU_SIZES = ("def capture(self):\n    sizes = sorted(self.config.capture_sizes, reverse=True)\n    warmups = self.config.warmups\n"
             "    for n in sizes:\n        self.run(n, warmups)\n")


def test_a_local_rebound_from_itself_is_one_binding():
    "Either side may bind then rebind; the other writes one binding. Both statements stay (what a later statement reads)."
    folds = method_statements(GPU_SIZES, {}).folds
    assert folds == [(0, 2, "sizes = sorted ( self . config . capture_sizes , reverse = True )")]
    assert three_way(GPU_SIZES, NPU_SIZES, "def capture(self):\n    pass\n") == []
    assert three_way(GPU_SIZES, NPU_SIZES, "") == []         # a method omni added: no base method, checked three-way
    assert three_way(NPU_SIZES, GPU_SIZES, "") == []         # the other way round


def test_a_rebinding_that_differs_or_reads_a_changed_value_is_still_drift():
    unsorted = NPU_SIZES.replace("sorted(self.config.capture_sizes, reverse=True)", "self.config.capture_sizes")
    assert lost(three_way(GPU_SIZES, unsorted, "")) == ["+ sizes = sorted(sizes, reverse=True)"]
    between = GPU_SIZES.replace("    warmups = self.config.warmups\n", "    self.config = self.reload()\n")  # A may change
    assert method_statements(between, {}).folds == []
    assert {"+ sizes = self.config.capture_sizes", "+ sizes = sorted(sizes, reverse=True)"} <= set(lost(three_way(between, NPU_SIZES, "")))


# --- a method omni added is checked three-way: a call carried between its form and the later release's ----------------
GPU_NEW = ("def update_cache(self, hidden, mm, n):\n    if self.cache is not None:\n"
           "        self.cache.update(hidden_states=hidden, outputs=mm, num_tokens=n, slot_mapping=self.slots.cpu)\n")
LATER_NEW = ("def update_cache(self, hidden, hidden_cpu, mm, n):\n    if self.cache is not None:\n"
             "        hs = hidden if self.full else None\n        slots = self.slots.gpu[:n].cpu()\n"
             "        self.cache.update(hidden_states=hs, outputs=flatten(mm) if mm else mm, num_tokens=n, slot_mapping=slots,\n"
             "                          hidden_states_cpu=hidden_cpu)\n")
NPU_NEW = ("def update_cache(self, hidden, mm, n):\n    if self.cache is not None:\n        hs = hidden if self.full else None\n"
           "        self.cache.update(hidden_states=hs, outputs=flatten(mm) if mm else mm, num_tokens=n, slot_mapping=self.slots.cpu)\n")


def test_a_call_between_the_gpu_form_and_the_later_one_is_carried():
    assert three_way(GPU_NEW, NPU_NEW, "", later=(LATER_NEW, "")) == []
    assert lost(three_way(GPU_NEW, NPU_NEW, "")) != []                       # without the later release: drift


def test_a_value_neither_form_passes_or_a_keyword_the_later_form_keeps_is_drift():
    own = NPU_NEW.replace("num_tokens=n,", "num_tokens=n + 1,")
    assert len(lost(three_way(GPU_NEW, own, "", later=(LATER_NEW, "")))) == 1
    dropped = NPU_NEW.replace(", slot_mapping=self.slots.cpu", "")
    assert len(lost(three_way(GPU_NEW, dropped, "", later=(LATER_NEW, "")))) == 1


# --- a keyword the call gains on both sides, its value computed the NPU side's own way: a note, not drift ------------
GPU_KW = ("def execute_model(self, done):\n    for rid, data in done.items():\n        computed = data.get('seq_len')\n"
          "        meta = self.model.transfer_metadata(rid, num_computed_tokens=computed)\n        data['meta'] = meta\n")
BASE_KW = "def execute_model(self, done):\n    pass\n"
NPU_KW = ("def execute_model(self, done):\n    for rid, data in done.items():\n        idx = self.batch.index.get(rid)\n"
          "        computed = int(self.batch.computed_cpu[idx]) if idx is not None else None\n"
          "        meta = self.model.transfer_metadata(rid, num_computed_tokens=computed)\n        data['meta'] = meta\n")


def test_a_gained_keyword_with_a_value_of_the_npu_sides_own_is_a_note():
    notes = []
    assert three_way(GPU_KW, NPU_KW, BASE_KW, notes=notes) == []
    assert notes == [("computed = data.get('seq_len')",
                      "computed = int(self.batch.computed_cpu[idx]) if idx is not None else None")]
    base = BASE_KW.replace("    pass\n", "    for rid, data in done.items():\n        meta = self.model.transfer_metadata(rid)\n")
    inline = (GPU_KW.replace("        computed = data.get('seq_len')\n", "").replace("=computed", "=data.get('seq_len')"),
              NPU_KW.replace("=computed)", "=int(self.batch.computed_cpu[idx]))"))
    notes = []
    assert three_way(*inline, base, notes=notes) == [] and len(notes) == 1   # the value written in the base's call
    assert len(lost(three_way(*inline, BASE_KW))) == 1                       # a call omni added: its values are its change


def test_a_value_the_base_passes_or_read_otherwise_is_still_drift():
    base = BASE_KW.replace("    pass\n", "    for rid, data in done.items():\n        computed = 0\n"
                           "        meta = self.model.transfer_metadata(rid, num_computed_tokens=computed)\n")
    npu_as_base = NPU_KW.replace("int(self.batch.computed_cpu[idx]) if idx is not None else None", "0")
    notes = []
    assert lost(three_way(GPU_KW, npu_as_base, base, notes=notes)) == ["+ computed = data.get('seq_len')"] and notes == []
    returned = GPU_KW.replace("        data['meta'] = meta\n", "        data['meta'] = meta\n    return computed\n")
    assert "+ computed = data.get('seq_len')" in lost(three_way(returned, NPU_KW + "    return computed\n", BASE_KW))
    no_kw = NPU_KW.replace("rid, num_computed_tokens=computed)", "rid)")          # the NPU call does not pass it
    assert lost(three_way(GPU_KW, no_kw, BASE_KW)) == ["+ computed = data.get('seq_len')"]
    other = NPU_KW.replace("transfer_metadata", "other_metadata")               # the call is not made: no note
    assert lost(three_way(GPU_KW, other, BASE_KW)) == [
        "+ computed = data.get('seq_len')", "+ meta = self.model.transfer_metadata(rid, num_computed_tokens=computed)"]


# --- a no-op nullcontext() item of a with statement ---------------------------------------------------------------
BASE_WITH = "def fwd(self, x):\n    with ctx(x):\n        out = self.model(x)\n    return out\n"


def test_a_nullcontext_item_is_no_change():
    assert three_way(BASE_WITH.replace("with ctx", "with nullcontext(), ctx"), BASE_WITH, BASE_WITH) == []
    assert len(lost(three_way(BASE_WITH.replace("with ctx", "with lock(), ctx"), BASE_WITH, BASE_WITH))) == 1


# --- vllm's own state passed to vllm code the NPU base replaced ------------------------------------------------------
BASE_DRAFT = ("def sample_tokens(self, out):\n    if self.spec:\n        ids, n = self.drafter.prepare_padded(out, self.requests, self.batch)\n"
              "        self.copy(ids, n)\n    return out\n")
NPU_BASE_DRAFT = "def sample_tokens(self, out):\n    if self.spec:\n        self.propose(out)\n    return out\n"
GPU_MODULE = "class GPUModelRunner:\n    def __init__(self):\n        self.optimistic_lens = None\n        self.requests = {}\n"


def _draft(gpu: str, module: str = GPU_MODULE) -> list:
    return drift(gpu, NPU_BASE_DRAFT, {}, gpu_base=(BASE_DRAFT, module), npu_base=NPU_BASE_DRAFT)


def test_vllm_state_passed_to_vllm_code_the_npu_base_replaced_is_no_omni_change():
    assert _draft(BASE_DRAFT.replace("prepare_padded(out", "prepare_padded(self.optimistic_lens, out")) == []


def test_an_argument_of_omnis_own_or_a_statement_the_npu_base_keeps_is_still_drift():
    assert len(lost(_draft(BASE_DRAFT.replace("prepare_padded(out", "prepare_padded(self.omni_lens, out")))) == 1
    assert len(lost(_draft(BASE_DRAFT.replace("prepare_padded(out", "prepare_padded(lens, out")))) == 1
    kept = NPU_BASE_DRAFT.replace("        self.propose(out)\n", "        ids, n = self.drafter.prepare_padded(out, self.requests, self.batch)\n")
    gpu = BASE_DRAFT.replace("prepare_padded(out", "prepare_padded(self.optimistic_lens, out")
    assert len(lost(drift(gpu, NPU_BASE_DRAFT, {}, gpu_base=(BASE_DRAFT, GPU_MODULE), npu_base=kept))) == 1   # vllm-ascend keeps it


# --- end to end: a three-way audit of a fixture tree against a vllm base of our own ---------------------------------
VLLM_RUNNER = ("class GPUModelRunner:\n    def __init__(self, cfg):\n        self.cfg = cfg\n\n"
               "    def execute_model(self, scheduler_output):\n        return self._model_forward(scheduler_output)\n")
GPU_AR = ("\n    def send(self, done):\n        for rid, data in done.items():\n            computed = data.get('seq_len')\n"
          "            meta = self.model.transfer_metadata(rid, num_computed_tokens=computed)\n            data['meta'] = meta\n")


def _three_way_audit(tmp_path: Path, npu_send: str) -> list:
    "audit() of the older-layout fixture, GPUARModelRunner.send added (a method vllm's runner lacks), NPU's copy `npu_send`."
    root = Path(shutil.copytree(AUDIT_FIXTURES / "old_layout", tmp_path / "old_layout"))
    for rel, text in (("vllm_omni/worker/gpu_ar_model_runner.py", GPU_AR), ("vllm_omni/worker/npu/npu_ar_model_runner.py", npu_send)):
        (root / rel).write_text((root / rel).read_text() + text)
    found = omni_npu_port.port.audit.audit(str(root), str(root), gpu_base=str(_vllm_only(tmp_path)))
    return [f for f in found if f.method == "send"]


def test_a_three_way_audit_notes_a_value_of_the_npu_sides_own_and_reports_no_drift(tmp_path):
    vllm = open_tree(str(_vllm_only(tmp_path / "base")))
    assert base_or_none(vllm, runner_bases()[0][0], "send") == ("", "")   # omni's new method: an empty base, three-way
    assert base_or_none(vllm, runner_bases()[0][0], "execute_model")[0].startswith("def execute_model")
    assert base_or_none(None, runner_bases()[0][0], "send") is None        # no --gpu-base: two-way
    npu = GPU_AR.replace("data.get('seq_len')", "int(self.batch.computed[rid])")
    found = _three_way_audit(tmp_path, npu)
    assert [(f.code, f.level) for f in found] == [("ONP4210", "info")], found
    assert found[0].detail == ["+ computed = data.get('seq_len')", "- computed = int(self.batch.computed[rid])"]


def test_a_three_way_audit_still_reports_the_call_the_npu_side_lacks(tmp_path):
    npu = GPU_AR.replace("data.get('seq_len')", "int(self.batch.computed[rid])").replace("transfer_metadata", "other_metadata")
    found = _three_way_audit(tmp_path, npu)
    assert [f.code for f in found] == ["ONP4201"] and len(found[0].detail) == 2, found


def _vllm_only(tmp_path: Path) -> Path:
    "A vllm source of our own with `VLLM_RUNNER`."
    return vllm_source(tmp_path, VLLM_RUNNER)
