"Issue 24: omni's change applied at its anchors (delta), the ready verdict, reachability — on fixtures written here."
import ast
import textwrap

import pytest

from omni_npu_port.port.delta import apply_delta, delta_fallback, merge_statement, omni_delta, redirect_super, wraps_by_super
from omni_npu_port.port.locate import MroClass
from omni_npu_port.port.merge import keep_side, merge_hunks, render
from omni_npu_port.port.reach import reachable, reach_port, unreachable_overrides
from omni_npu_port.port.ready import class_findings, unbound_reads
from omni_npu_port.port.release import check_method
from omni_npu_port.sources.symbols import SymbolIndex

D = lambda s: textwrap.dedent(s).lstrip("\n")

# A GPU base method, omni's edit of it, and an NPU base that drifted far from it (renamed local, nested block, new lines).
BASE = D('''
    def run(self, x):
        a = prep(x)
        out = self.forward(a)
        if a:
            log(a)
            done()
        return out
''')
OMNI = D('''
    def run(self, x, extra=None):
        a = prep(x, mode=1)
        # omni: remember the step
        step = 3
        out = self.forward(a)
        if a:
            log(a)
            omni_hook(a, out)
            done()
        return out, step
''')
NPU = D('''
    def run(self, x):
        """NPU."""
        a = prep(x, stream=npu_stream())
        with npu_context():
            model_out = self.forward(a)
        if a:
            log(a)
            torch.npu.synchronize()
            done()
        return model_out
''')


def _port(base=BASE, omni=OMNI, npu=NPU, **kw):
    d = apply_delta(base, omni, npu, "run", **kw)
    lines, _ = render(d.hunks)
    return d, "\n".join(lines) + "\n"


def test_each_omni_hunk_lands_at_its_anchor_in_the_drifted_npu_method():
    d, code = _port()
    fn = ast.parse(code).body[0]
    body = ast.unparse(fn)
    assert "prep(x, stream=npu_stream(), mode=1)" in body            # both sides' keywords kept (expression-level merge)
    assert "step = 3" in body and "# omni: remember the step" in code
    assert "omni_hook(a, model_out)" in body                           # placed after its anchor `log(a)`, local renamed
    assert body.index("log(a)") < body.index("omni_hook") < body.index("torch.npu.synchronize()")
    assert "return (model_out, step)" in body                          # omni's edit of the return, NPU's name
    assert "with npu_context():" in body and "extra=None" in code      # NPU lines stay; omni's parameter joins
    assert {h.status for h in d.delta} <= {"applied", "fuzz"}
    assert all(d.code in ("ONP4410", "ONP4411", "ONP4413") for d in d.diagnostics)


def test_a_hunk_whose_anchors_are_gone_is_reported_not_applied():
    npu = D('''
        def run(self, x):
            return compiled(x)
    ''')
    d = apply_delta(BASE, OMNI, npu, "run")
    assert any(h.status == "not-applied" for h in d.delta)
    assert any(x.code == "ONP4412" and "run" == x.where for x in d.diagnostics)


def test_statements_both_sides_rewrite_differently_conflict_at_the_statement_only():
    omni = BASE.replace("out = self.forward(a)", "out = self.forward_omni(a)")
    npu = BASE.replace("out = self.forward(a)", "out = self.forward_npu(a)").replace("done()", "done()\n        npu_only()")
    d, code = _port(omni=omni, npu=npu)
    assert code.count("<<<<<<<") == 1
    live = keep_side(code)
    assert "npu_only()" in live and "forward_npu" in live and "forward_omni" not in live
    assert "forward_omni" in keep_side(code, 1)


def test_expression_level_merge_keeps_both_sides_keywords_and_refuses_a_real_clash():
    s = lambda t: ast.parse(t).body[0]
    z, a, n = s("y = f(a, b=1)"), s("y = f(a, b=1, omni=2)"), s("y = f(a, b=1, npu=3)")
    assert ast.unparse(merge_statement(z, a, n)) == "y = f(a, b=1, npu=3, omni=2)"
    assert merge_statement(z, s("y = f(a, b=5)"), s("y = f(a, b=6)")) is None


def test_a_stale_omni_side_repeating_an_older_base_keeps_the_npu_side():
    old = BASE.replace("a = prep(x)", "a = old_prep(x)")
    omni = old                                          # omni never followed vllm's prep() change
    d = apply_delta(BASE, omni, BASE, "run", history=(old,))
    assert [h.status for h in d.delta] == ["stale"]
    assert not any(h.kind == "omni" for h in d.hunks)


def test_the_line_merge_stands_where_it_has_no_conflict():
    hunks = merge_hunks(BASE, BASE.replace("done()", "done()\n        extra()"), BASE)
    same, diags, counts = delta_fallback(hunks, BASE, BASE, BASE)
    assert same is hunks and not diags and not counts


def test_an_npu_method_that_wraps_the_base_through_super_calls_omnis_method_instead():
    npu = D('''
        def step(self, s):
            pre(s)
            r = super().step(s)
            post(r)
            return r
    ''')
    omni = D('''
        def step(self, s):
            return omni_step(s)
    ''')
    assert wraps_by_super(npu, omni) and not wraps_by_super(omni, npu)
    lines, origins, diags = redirect_super(npu, "OmniRunner")
    assert "r = OmniRunner.step(self, s)" in "\n".join(lines) and diags[0].code == "ONP4415"


def test_live_omni_statements_are_counted_on_the_code_that_runs():
    port = D('''
        def run(self):
            a = 1
            # <<<<<<< ONP4001 conflict: NPU base (kept)
            b = npu()
            # ======= omni GPU (commented out)
            # b = omni()
            # >>>>>>>
            c = omni_live()
    ''')
    omni = "def run(self):\n    a = 1\n    b = omni()\n    c = omni_live()\n"
    base = "def run(self):\n    a = 1\n    b = base()\n"
    m = check_method("run", "delta", port, omni, omni, base, base, "def run(self):\n    a = 1\n    b = npu()\n")
    assert m.omni_added == 2 and m.omni_live == 1


# ---- ready

def test_a_name_bound_only_in_the_commented_side_is_an_error():
    code = D('''
        class R:
            def f(self):
                # <<<<<<< ONP4001 conflict: NPU base (kept)
                y = 1
                # ======= omni GPU (commented out)
                # output = make()
                # >>>>>>>
                return wrap(output, y)
    ''')
    found = {(d.code, d.message.split("`")[1]) for d in unbound_reads(code, "R")}
    assert ("ONP4420", "output") in found and ("ONP4421", "wrap") in found
    assert all(d.severity == "error" for d in unbound_reads(code, "R"))


def _npu_tree(tmp_path):
    "A small vllm_ascend of this test's own: a NamedTuple, a dataclass and a plain class, read statically."
    pkg = tmp_path / "vllm_ascend"
    (pkg / "worker").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "worker" / "__init__.py").write_text("")
    (pkg / "worker" / "state.py").write_text(D('''
        from dataclasses import dataclass
        from typing import NamedTuple

        class ExecState(NamedTuple):
            logits: object
            hidden: object

        @dataclass
        class Output:
            req_ids: list
            tokens: list = None

        class Plain:
            def __init__(self, a, b=1):
                self.a = a
    '''))
    from omni_npu_port.sources.readers import open_source
    return SymbolIndex([open_source(str(tmp_path / "vllm_ascend"))]) if False else SymbolIndex.open(str(pkg))


def test_constructors_unpacking_and_field_reads_are_checked_against_the_npu_source(tmp_path):
    ix = _npu_tree(tmp_path)
    code = D('''
        from vllm_ascend.worker.state import ExecState, Output, Plain

        class R:
            def f(self):
                self.state = ExecState(1, 2, 3)
                out = Output(req_ids=[], tokens=[], extra=1)
                p = Plain(1, b=2)
                (logits, hidden, mm) = self.state
                ok = Output(req_ids=[])
                return ok.req_ids, ok.multimodal
    ''')
    found = [(d.code, d.message) for d in class_findings(code, ix)]
    codes = [c for c, _ in found]
    assert codes.count("ONP4422") == 2                       # 3 positional for 2 fields; `extra` no field
    assert any("extra" in m for c, m in found if c == "ONP4422")
    assert any("unpacks 3" in m for c, m in found if c == "ONP4423")
    assert any("multimodal" in m for c, m in found if c == "ONP4423")
    assert not any("Plain" in m for _, m in found)            # Plain(1, b=2) fits its __init__


# ---- reach

def _cls(name, src, module="m", package=None):
    return MroClass(name, ast.parse(D(src)).body[0], module, D(src), package)


GPU = _cls("GPURunner", '''
    class GPURunner:
        def execute_model(self, s):
            self.prepare(s)
            return self._model_forward(s)
        def _model_forward(self, s):
            return self.model(s)
        def prepare(self, s):
            pass
''', "vllm.runner", "vllm")
NPUB = _cls("NPURunner", '''
    class NPURunner(GPURunner):
        def execute_model(self, s):
            self.prepare(s)
            return self.model(s, stream=1)
''', "vllm_ascend.runner", "vllm_ascend")
OMNIC = _cls("OmniRunner", '''
    class OmniRunner(GPURunner):
        def _model_forward(self, s, **kw):
            return omni(self.model(s, **kw))
        def prepare(self, s):
            super().prepare(s)
''', "vllm_omni.runner", "vllm_omni")


def test_an_override_the_npu_caller_inlines_is_found_and_its_caller_restored():
    port = "class Ported(OmniRunner, NPURunner):\n    pass\n"
    mro = [MroClass("Ported", None), OMNIC, NPUB, GPU]
    code, diags, found = reach_port(port, "Ported", "p", mro, ("execute_model",), {"OmniRunner"}, [GPU])
    assert [f["method"] for f in found] == ["_model_forward"]           # prepare() is reached through execute_model
    assert found[0]["gpu_caller"] == "GPURunner.execute_model" and found[0]["npu_caller"] == "NPURunner.execute_model"
    assert found[0]["restored"] and {d.code for d in diags} == {"ONP4430", "ONP4431"}
    tree = ast.parse(code).body[0]
    again = [MroClass("Ported", tree, "p", code)] + mro[1:]
    assert ("OmniRunner", "_model_forward") in reachable(again, ("execute_model",))   # the override runs now


def test_a_hook_call_that_would_not_bind_to_the_omni_override_is_not_restored():
    "The NPU caller's `self.model(s, stream=1)` cannot bind to an omni hook that requires `cfg`: reported, not rewritten."
    omni = _cls("OmniRunner", '''
        class OmniRunner(GPURunner):
            def _model_forward(self, s, cfg, stream=0):
                return omni(self.model(s, stream=stream), cfg)
    ''', "vllm_omni.runner", "vllm_omni")
    port = "class Ported(OmniRunner, NPURunner):\n    pass\n"
    mro = [MroClass("Ported", None), omni, NPUB, GPU]
    code, diags, found = reach_port(port, "Ported", "p", mro, ("execute_model",), {"OmniRunner"}, [GPU])
    assert [f["method"] for f in found] == ["_model_forward"] and not found[0]["restored"]
    assert {d.code for d in diags} == {"ONP4430"} and code == port


def test_an_override_nothing_calls_is_a_finding_without_a_restore():
    gpu = _cls("GPURunner", "class GPURunner:\n    def execute_model(self):\n        pass\n    def shutdown(self):\n        pass\n")
    omni = _cls("OmniRunner", "class OmniRunner(GPURunner):\n    def shutdown(self):\n        cleanup()\n")
    found = unreachable_overrides([_cls("P", "class P:\n    pass\n"), omni, gpu], ("execute_model",), {"OmniRunner", "P"}, [gpu])
    assert [(u.method, u.gpu_caller, u.restored) for u in found] == [("shutdown", None, None)]
    assert "no runner method calls it" in found[0].message()
