"Issue 31, part 2: the `vllm` origin — a ported line all three sides share (vllm's GPU method, the NPU base, omni's GPU"
" method) is vllm's, one the NPU side has alone or changed stays `npu`; every pass that asks for the NPU side's lines"
" takes both (`npu_side`). On fixtures written here (the port's own: test_port_statements, its counts per origin)."
import ast
import textwrap

from omni_npu_port.port import locate
from omni_npu_port.port.dataflow import place_by_dataflow
from omni_npu_port.port.merge import FENCE_TEXT, merge_hunks, npu_side, render
from omni_npu_port.port.overrides import override_calls
from omni_npu_port.port.statements import statement_origin
from omni_npu_port.port.supercalls import rebind_supers

D = lambda s: textwrap.dedent(s).lstrip("\n")

BASE = D('''
    def step(self, batch):
        ids = self.input_ids(batch)
        out = self.forward(ids)
        out.flag = True
        return out
''')
OMNI = D('''
    def step(self, batch):
        ids = self.input_ids(batch)
        talker = self.talker(ids)
        out = self.forward(ids)
        out.flag = True
        return out
''')
NPU = D('''
    def step(self, batch):
        ids = self.input_ids(batch)
        out = self.npu_forward(ids)
        out.flag = True
        return out
''')


def _origins(base: str, omni: str, npu: str) -> dict[str, str]:
    "Each rendered code line (stripped) -> the origin `render` gave it."
    origins = []
    lines, _ = render(merge_hunks(base, omni, npu), origins=origins)
    assert len(lines) == len(origins)
    return {l.strip(): o for l, o in zip(lines, origins) if l.strip() and FENCE_TEXT not in l}


def test_a_line_all_three_sides_share_is_vllms_and_one_the_npu_side_changed_is_not():
    got = _origins(BASE, OMNI, NPU)
    assert got["ids = self.input_ids(batch)"] == got["out.flag = True"] == got["return out"] == "vllm"
    assert got["out = self.npu_forward(ids)"] == "npu"       # the NPU base changed it: never vllm's
    assert got["talker = self.talker(ids)"] == "omni"


def test_a_line_both_sides_changed_alike_is_the_npu_sides_not_vllms():
    alike = NPU.replace("out.flag = True", "out.flag = False")
    got = _origins(BASE, OMNI.replace("out.flag = True", "out.flag = False"), alike)
    assert got["out.flag = False"] == "npu"                    # vllm's method has another line there
    assert got["return out"] == "vllm"


def test_npu_side_takes_both_npu_side_origins_and_nothing_else():
    assert [npu_side(o) for o in ("npu", "vllm", "omni", "port", "unknown")] == [True, True, False, False, False]


def test_vllm_lines_decide_no_statement_where_a_side_changed_the_rest():
    assert statement_origin(["    if a:", "        y = 1"], ["vllm", "vllm"]) == "vllm"
    assert statement_origin(["    if a:", "        y = npu(1)"], ["vllm", "npu"]) == "npu"
    assert statement_origin(["    if a:", "        y = omni(1)"], ["vllm", "omni"]) == "omni"
    assert statement_origin(["    if a:", "        y = npu(1)", "        z = 2"], ["vllm", "npu", "omni"]) == "mixed"


def test_the_override_call_check_fires_at_vllms_lines_as_at_the_npu_bases():
    omni = {"prepare": ast.parse("def prepare(self, n): pass").body[0]}   # omni's class overrides it
    lines = ["def step(self, n):", "    self.prepare(n)"]
    for origin, fires in (("vllm", True), ("npu", True), ("omni", False), ("port", False)):
        got = override_calls(lines, ["vllm", origin], omni, "Omni", "step")
        assert [(d.code, d.line) for d in got] == ([("ONP4015", 2)] if fires else []), origin


def test_dataflow_places_omni_statements_among_vllms_lines_and_leaves_omnis_own_method():
    lines = ["def f(self):", "    y = self.use(x)", "    x = self.make()", "    return y"]
    out, _, diags = place_by_dataflow(lines, ["vllm", "omni", "vllm", "vllm"])
    assert [d.code for d in diags] == ["ONP4450"] and out.index("    x = self.make()") < out.index("    y = self.use(x)")
    out, _, diags = place_by_dataflow(lines, ["omni"] * 4)    # omni's method alone: its order, nothing said
    assert out == lines and diags == []


def test_super_rebinding_treats_a_vllm_line_as_copied_from_the_npu_class(tmp_path):
    (tmp_path / "landing.py").write_text(D('''
        class GPU:
            def run(self): pass
        class NPU(GPU):
            def run(self): super().run()
        class Omni(GPU):
            def run(self): super().run()
        class Landing(Omni, NPU):
            pass
    '''))
    landing = locate.class_mro(locate.locate(f"{tmp_path / 'landing.py'}:Landing", False))
    lines = ["def run(self):", "    super().run()"]
    for origin, want in (("vllm", "super(NPU, self).run()"), ("npu", "super(NPU, self).run()"),
                         ("omni", "super(Omni, self).run()")):
        out, _ = rebind_supers(lines, ["vllm", origin], landing, {"npu": "NPU", "omni": "Omni"})
        assert out[1].strip() == want, origin


def test_an_update_keeps_the_previous_ports_fences_whether_vllm_or_the_npu_side_wrote_them():
    from omni_npu_port.port.update import _drop_inner_fences
    fence = "    " + FENCE_TEXT
    lines = [fence, "    x = 1", fence, "    y = 2", fence, fence]
    assert _drop_inner_fences(lines, ["vllm", "npu", "port", "omni", "port", "vllm"]) == [0, 1, 3, 5]   # inner: dropped
    assert _drop_inner_fences(lines, ["npu", "npu", "port", "omni", "port", "npu"]) == [0, 1, 3, 5]
    assert _drop_inner_fences(lines, ["port", "npu", "port", "omni", "port", "port"]) == [0, 1, 2, 3, 4, 5]


def test_a_line_an_omni_insertion_slides_over_keeps_its_sides_origin():
    from omni_npu_port.port.merge import Hunk, _slide_insertions
    ins = ["    )", "    g(", "        b,"]   # omni's insertion as the diff cut it: it closes `f(` and opens `g(`
    for kind, want in (("unchanged", "vllm"), ("npu", "npu")):
        hs = [Hunk("unchanged", ["def f(self):", "    f(", "        a,"]), Hunk("omni", ins, omni=ins),
              Hunk(kind, ["    )", "    h()"], npu=["    )", "    h()"])]
        origins = []
        lines, _ = render(_slide_insertions(hs), fence=False, origins=origins)
        assert list(zip(lines, origins))[3:7] == [("    )", want), ("    g(", "omni"), ("        b,", "omni"),
                                                  ("    )", "omni")], kind
