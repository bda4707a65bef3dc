("Issue 31, part 2: the `vllm` origin — a ported line all three sides share (vllm's GPU method, the NPU base, omni's "
 "GPU method) is vllm's, one the NPU side has alone or changed stays `npu`; every pass that asks for the NPU side's "
 "lines takes both (`npu_side`). On fixtures written here (the port's own: test_port_statements, its counts per "
 "origin).")
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


# -- every port path, given the three sides: a line all three share reads vllm, one the NPU base changed stays npu

I = lambda s: textwrap.indent(D(s), "    ")


def _port_rows(tmp_path, base: str, omni: str, npu: str, monkeypatch):
    "The ported method's (line, origin) rows as its typed form holds them, and its style: the three in one module."
    from omni_npu_port.port import method as method_module
    from omni_npu_port.port import statements
    f = tmp_path / "runners.py"
    f.write_text(f"class GPUModelRunner:\n{I(base)}\n\nclass OmniGPUModelRunner(GPUModelRunner):\n{I(omni)}\n\n"
                 f"class NPUModelRunner(GPUModelRunner):\n{I(npu)}")
    name = ast.parse(D(base)).body[0].name
    forms, of = [], statements.MethodPort.of.__func__
    spy = lambda c, *a, **k: forms.append(of(c, *a, **k)) or forms[-1]   # each form the port builds, kept
    monkeypatch.setattr(statements.MethodPort, "of", classmethod(spy))
    res = method_module.port_method(*[locate.locate(f"{f}:{c}.{name}") for c in
                                      ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")], prefer="comment")
    got = {}
    for l, o in forms[-1].rows(): got.setdefault(l.strip(), o)   # a line written twice: its first
    return got, res


RUN = '''
    def run(self, x):
        a = self.prep(x)
        b = self.step(a)
        c = self.more(b)
        return c
'''


def test_the_delta_path_reads_the_npu_lines_all_three_share_as_vllm(tmp_path, monkeypatch):
    omni = RUN.replace("c = self.more(b)\n", "c = self.more(b)\n        self.omni_hook(c)\n")
    omni = omni.replace("self.step", "self.omni_step")
    far = "".join(f"        self.n{k}(a)\n" for k in range(1, 9))   # the NPU method drifted far: the delta path
    npu = RUN.replace("        b = self.step(a)\n", far + "        b = self.npu_step(a)\n")
    got, res = _port_rows(tmp_path, RUN, omni, npu, monkeypatch)
    assert res.style == "delta"
    assert got["a = self.prep(x)"] == got["c = self.more(b)"] == got["return c"] == "vllm"
    assert got["b = self.npu_step(a)"] == got["self.n1(a)"] == "npu"   # the NPU base's change and its own line
    assert got["self.omni_hook(c)"] == "omni" and res.stats["statements"] == {"vllm": 3, "npu": 9, "omni": 2}


def test_the_super_inline_path_reads_the_npu_lines_of_vllms_method_as_vllm(tmp_path, monkeypatch):
    base = "def run(self, a):\n    x = self.prep(a)\n    y = self.fwd(x)\n    return y\n"
    omni = "def run(self, a):\n    out = super().run(a)\n    self.talk(out)\n    return out\n"
    got, res = _port_rows(tmp_path, base, omni, base.replace("self.fwd", "self.npu_fwd"), monkeypatch)
    assert res.style == "super-inline"
    assert got["x = self.prep(a)"] == "vllm"             # omni runs it through super(), the NPU base has it too
    assert got["out = self.npu_fwd(x)"] == "npu" and got["self.talk(out)"] == "omni"


def test_the_wraps_path_reads_an_npu_line_all_three_share_as_vllm_and_its_own_as_npu(tmp_path, monkeypatch):
    base = "def profile_run(self, n):\n    self.warm(n)\n    self.measure(n)\n"
    omni = base.replace("self.measure", "self.omni_measure")
    npu = "def profile_run(self, n):\n    self.warm(n)\n    self.npu_warm(n)\n    super().profile_run(n)\n"
    got, res = _port_rows(tmp_path, base, omni, npu, monkeypatch)
    assert res.style == "npu-wraps-inline"
    assert got["self.warm(n)"] == "vllm" and got["self.npu_warm(n)"] == "npu"   # the NPU method's own lines
    assert got["self.omni_measure(n)"] == "omni"   # omni's inlined body stays omni's, its copy of `warm` too


def test_a_conflicts_common_lines_read_vllm_only_where_the_base_has_them_there_too():
    from omni_npu_port.port.merge import CodeLine, _conflict
    cl = lambda *xs: [CodeLine(f"    {x}") for x in xs]
    z = cl("a = self.prep(x)", "b = self.step(a)", "return b")
    a, b = (cl("a = self.prep(x)", f"b = self.{m}(a)", "return b") for m in ("omni_step", "npu"))
    origins = []
    lines, _ = render(_conflict(z, a, b, [l.text for l in a]), prefer="comment", origins=origins)
    got = {l.strip(): o for l, o in zip(lines, origins)}
    assert got["a = self.prep(x)"] == got["return b"] == "vllm" and got["b = self.npu(a)"] == "npu"
    both = cl("a = self.both(x)", "b = self.omni_step(a)"), cl("a = self.both(x)", "b = self.npu(a)")
    origins = []
    lines, _ = render(_conflict(z[:2], *both, [l.text for l in both[0]]), prefer="comment", origins=origins)
    assert dict(zip([l.strip() for l in lines], origins))["a = self.both(x)"] == "npu"   # both sides changed it alike


def test_shared_origins_leaves_a_conflicts_sides_and_every_line_not_npu_as_written():
    from omni_npu_port.port.statements import shared_origins
    base = "def f(self):\n    a = 1\n    return a\n"
    lines = ["def f(self):", "    # <<<<<<< ONP4001 conflict: NPU base (kept)", "    a = 1", "    # =======",
             "    # a = 2", "    # >>>>>>>", "    return a"]
    origins = ["npu", "port", "npu", "port", "omni", "port", "npu"]
    assert shared_origins(lines, origins, base, base, base) == ["vllm", *origins[1:6], "vllm"]
    assert shared_origins(lines, ["omni"] * 7, base, base, base) == ["omni"] * 7   # only npu lines are told again
