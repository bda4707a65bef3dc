"""Audit rules 25-30 (issue 32, made from the false findings of the blind sets 0.16 and 0.32.0rc1, after their
measurement): an import nothing owed reads, an alias, vllm's own decorator, a helper in place of a test, an override the
NPU stack never names, a guard around code the copy lacks. Fixtures: texts and tiny packages written here."""
import ast
from types import SimpleNamespace as NS

from omni_npu_port.port.audit import (Change, absent_guards, aliased, base_method_stream, helper_tests, import_binds,
                                      method_keys, other_forms, owed, run_by_copy, stack_names, stream, unread_imports)
from omni_npu_port.port.locate import open_tree

EXEC = """def execute(self, spec):
    from vllm.kv import EncoderOnlySpec
    if not isinstance(spec, EncoderOnlySpec):
        go()
"""


def test_rule25_import_only_their_lines_read():
    theirs = stream(["if not isinstance ( spec , EncoderOnlySpec ) :"])
    assert unread_imports(EXEC, stream(["go ( )"]), theirs, set()) == {"from vllm . kv import EncoderOnlySpec"}


def test_rule25_must_not_fire_where_an_owed_line_reads_it():
    assert unread_imports(EXEC, stream(["go ( )"]), "", set()) == set()
    assert import_binds("import a.b as c") == {"c"} and import_binds("from x import (") is None


def forms(gpu, copy):
    return other_forms(gpu, stream(method_keys(copy)), copy, "", {})


def test_rule26_alias_is_the_copy_name():
    gpu = "def sample(self):\n    output = model_runner_output\n    output.kv_ids = kv_ids\n"
    assert forms(gpu, "def sample(self):\n    model_runner_output.kv_ids = kv_ids\n") == {
        "output = model_runner_output", "output . kv_ids = kv_ids", "model_runner_output . kv_ids = kv_ids"}


def test_rule26_must_not_fire_on_a_call_another_name_or_a_rebinding():
    copy = "def sample(self):\n    model_runner_output.kv_ids = kv_ids\n"
    assert forms("def sample(self):\n    output = build()\n    output.kv_ids = kv_ids\n", copy) == set()
    assert forms("def sample(self):\n    output = other\n    output.kv_ids = kv_ids\n", copy) == set()
    body = ast.parse("output = model_runner_output\noutput = other\noutput.kv_ids = kv_ids\n").body
    assert aliased(body[0], body) == []


def _vllm(tmp_path, decorated: bool):
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    deco = '    @instrument(span_name="Loading (GPU)")\n' if decorated else ""
    (pkg / "runner.py").write_text(f"class GPURunner:\n{deco}    def load_model(self):\n        self.model = load()\n")
    return NS(tree=open_tree(str(tmp_path))), NS(dotted="vllm.runner.GPURunner")


def test_rule27_vllm_decorator_is_theirs(tmp_path):
    theirs = base_method_stream(*_vllm(tmp_path, True), "load_model")
    add = Change("add", 1, [], ['    @instrument(span_name="Loading (GPU)")'])
    assert owed(add, stream(["self . model = load ( )"]), theirs) is None


def test_rule27_must_not_fire_where_vllm_has_no_decorator(tmp_path):
    theirs = base_method_stream(*_vllm(tmp_path, False), "load_model")
    add = Change("add", 1, [], ['    @instrument(span_name="Loading (GPU)")'])
    assert owed(add, stream(["self . model = load ( )"]), theirs) is not None


HELPER = {"_runs": "def _runs(self) -> bool:\n    return getattr(self.model, 'talker', None) is not None "
                   "and bool(self.has_mtp)\n"}
GPU_RUN = "def dummy(self):\n    if self._runs():\n        go()\n"
COPY_RUN = "def dummy(self):\n    if getattr(self.model, 'talker', None) is not None and self.has_mtp:\n        go()\n"


def test_rule28_helper_in_place_of_the_copy_test():
    assert helper_tests(GPU_RUN, HELPER, COPY_RUN) == {
        "if self . _runs ( ) :", "if getattr ( self . model , 'talker' , None ) is not None and self . has_mtp :"}


def test_rule28_must_not_fire_on_another_test_or_a_helper_that_does_more():
    assert helper_tests(GPU_RUN, HELPER, COPY_RUN.replace("has_mtp", "other")) == set()
    busy = {"_runs": "def _runs(self):\n    self.n += 1\n    return self.has_mtp\n"}
    assert helper_tests(GPU_RUN, busy, "def dummy(self):\n    if self.has_mtp:\n        go()\n") == set()
    args = {"_runs": "def _runs(self, x):\n    return x\n"}
    assert helper_tests(GPU_RUN, args, COPY_RUN) == set()


def _stack(tmp_path, ascend_text: str):
    for name, text in (("vllm", "class GPURunner:\n    def profile_graphs(self):\n        return 0\n"),
                       ("vllm_ascend", ascend_text)):
        root = tmp_path / name
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        (root / name / "worker.py").write_text(text)
    return ((NS(tree=open_tree(str(tmp_path / "vllm"))), NS(dotted="vllm.worker.GPURunner")),
            (NS(tree=open_tree(str(tmp_path / "vllm_ascend"))), NS(dotted="vllm_ascend.worker.NPURunner")))


def test_rule29_override_the_npu_stack_never_names(tmp_path):
    theirs = _stack(tmp_path, "class NPURunner:\n    def load_model(self):\n        pass\n")
    assert not stack_names(theirs, "profile_graphs")
    gpu = {m: ast.parse(f"def {m}(self):\n    pass\n").body[0] for m in ("profile_graphs", "own_entry")}
    assert run_by_copy(["profile_graphs", "own_entry"], gpu, {}, lambda m: stack_names(theirs, m)) == ["own_entry"]


def test_rule29_must_not_fire_where_ascend_names_it_or_omni_owns_it(tmp_path):
    theirs = _stack(tmp_path, "class NPURunner:\n    def run(self):\n        self.runner.profile_graphs()\n")
    assert stack_names(theirs, "profile_graphs") and stack_names(theirs, "own_entry")   # named; not vllm's


GPU_SAMPLE = """def sample(self):
    x = 1
    if not before:
        out = self.post(
            a=1,
        )
    return x
"""


def test_rule30_guard_around_code_the_copy_lacks():
    assert absent_guards(GPU_SAMPLE, stream(["x = 1", "return x"])) == {"if not before :"}
    assert absent_guards(GPU_SAMPLE, stream(["x = 1", "a = 1 ,", "return x"])) == {"if not before :"}   # an argument


def test_rule30_must_not_fire_where_the_copy_has_the_body():
    assert absent_guards(GPU_SAMPLE, stream(["x = 1", "out = self . post (", "return x"])) == set()
    assert absent_guards("def f(self):\n    if a:\n        pass\n", stream([])) == set()   # names nothing


def test_rules26_28_spare_the_copy_line_a_change_removes():
    gpu = "def sample(self):\n    output = model_runner_output\n    output.kv_ids = kv_ids\n"
    copy = "def sample(self):\n    model_runner_output.kv_ids = kv_ids\n"
    change = Change("change", 2, ["    model_runner_output.kv_ids = kv_ids"],
                    ["    output = model_runner_output", "    output.kv_ids = kv_ids"])
    own = stream(method_keys(copy))
    assert owed(change, own, "", None, forms(gpu, copy), forms(gpu, copy)) is None
    got = owed(change, own, "", None, forms(gpu, copy), set())      # must not: without the copy's key it is removed
    assert got is not None and got.kind == "remove"
