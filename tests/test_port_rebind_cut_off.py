"""Issue 31 (s10-rcfix): an omni line reading a name the NPU method binds only in a block that returns first is read
as the name the NPU base's build of the same value binds (vLLM-Omni 0.21.0rc1's `output.kv_extracted_req_ids = ...`
after vllm-ascend's `model_runner_output = ModelRunnerOutput(...)`); where a binding of the name reaches the read, or
the NPU side builds that value more than once, nothing is renamed. Fixtures written here."""
import ast
import textwrap

from omni_npu_port.port.dataflow import place_by_dataflow
from omni_npu_port.port.delta import apply_delta, cut_off_reads
from omni_npu_port.port.merge import Hunk, render

D = lambda s: textwrap.dedent(s).lstrip("\n")

BASE = D('''
def sample(self, out):
    if self.pp:
        output = copy(EMPTY)
        return output
    logits = self.compute(out)
    with ctx("build"):
        routed_dict = None
        output = Output(ids=logits, routed_dict=routed_dict)
    return output
''')
OMNI = BASE.replace("        output = Output(ids=logits, routed_dict=routed_dict)\n",   # omni adds one line to the build
                    "        output = Output(ids=logits, routed_dict=routed_dict)\n"
                    "        output.extra_ids = self.extra_ids\n")
assert OMNI != BASE

SHARED = BASE[:BASE.index("    with ctx(")]   # the early-returning branch and the logits, as all three sides have them
NPU = SHARED + """\
    routed_lists = None
    model_runner_output = Output(ids=logits, pooler=[], routed=routed_lists)
    self.finish()
    return model_runner_output
"""


def _live(d) -> str:
    return "\n".join(render(d.hunks, fence=False, prefer="comment")[0])


def test_a_read_bound_only_before_an_early_return_takes_the_npu_builds_name():
    d = apply_delta(BASE, OMNI, NPU, "sample")
    live = _live(d)
    assert "model_runner_output.extra_ids = self.extra_ids" in live and "    output.extra_ids" not in live
    assert any(x.code == "ONP4413" and "`output` read as `model_runner_output`" in x.message for x in d.diagnostics)
    origins = []
    lines, _ = render(d.hunks, prefer="comment", origins=origins)
    out, _, diags = place_by_dataflow(lines, origins)   # the next stage places it after the NPU's build
    at = [l.strip() for l in out].index
    assert at("model_runner_output = Output(ids=logits, pooler=[], routed=routed_lists)") < \
        at("model_runner_output.extra_ids = self.extra_ids") and "ONP4450" in [x.code for x in diags]


def test_a_binding_that_reaches_the_read_or_two_npu_builds_rename_nothing():
    reached = NPU.replace("    model_runner_output = Output(", "    output = Output(").replace(
        "return model_runner_output", "return output")
    two = NPU.replace("    self.finish()\n", "    spare = Output(ids=None)\n")
    for npu in (reached, two):
        d = apply_delta(BASE, OMNI, npu, "sample")
        assert "output.extra_ids = self.extra_ids" in _live(d) and "model_runner_output.extra_ids" not in _live(d)
        assert not any("read as" in x.message for x in d.diagnostics)


def test_cut_off_reads_names_only_the_omni_edits_past_the_returning_block():
    fn = "def f(self):\n    if pp:\n        out = 1\n        return out\n    out.x = 2\n"
    hs = [Hunk("npu", lines=fn.splitlines()[:4]), Hunk("omni", lines=["    out.x = 2"])]
    inside = type("E", (), {"hunk": hs[0]})()
    past = type("E", (), {"hunk": hs[1]})()
    assert cut_off_reads(ast.parse(fn).body[0], hs, [inside, past]) == {"out": [(past, {0})]}


def test_a_nested_functions_own_binding_is_not_a_cut_off_read():
    fn = ("def f(self):\n    if pp:\n        out = 1\n        return out\n    def build():\n        out = 2\n"
          "        return out\n    return build\n")
    rows = fn.splitlines()
    hs = [Hunk("npu", lines=rows[:4]), Hunk("omni", lines=rows[4:7]), Hunk("npu", lines=rows[7:])]
    assert cut_off_reads(ast.parse(fn).body[0], hs, [type("E", (), {"hunk": hs[1]})()]) == {}
