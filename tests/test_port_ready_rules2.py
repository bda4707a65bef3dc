("Issue 24, parts 1-2 (second set): the delta never pairs a test with its negation, never writes omni's lines after a "
 "statement that ends the block, and writes omni's version of a self-contained block the NPU base dropped live where "
 "omni edits inside it — each rule on fixtures written here, with a case where it must not fire.")
import ast
import textwrap

from omni_npu_port.port.delta import apply_delta, statements_alike
from omni_npu_port.port.merge import render
from omni_npu_port.port.ready import unbound_reads

D = lambda s: textwrap.dedent(s).lstrip("\n")
P = lambda s: ast.parse(D(s)).body[0]


def _live(d) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent("\n".join(render(d.hunks, fence=False, prefer="comment")[0]))).body[0]


def _module(d) -> str:
    "The ported method as a method of a class in a module (what the ready check reads)."
    body = "\n".join(render(d.hunks, fence=False, prefer="comment")[0])
    return "import torch\nfrom lib import EMPTY, Output, group, has_group\n\nclass R:\n" + textwrap.indent(body, "    ") + "\n"


def _after_an_end(fn: ast.AST) -> list[str]:
    "Statements that follow a return/raise/continue/break in their block (dead code)."
    out = []
    for n in ast.walk(fn):
        for f in ("body", "orelse", "finalbody"):
            b = getattr(n, f, None) or []
            for i, s in enumerate(b[:-1]):
                if isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)): out += [ast.unparse(x) for x in b[i + 1:]]
    return out


# ---- a test and its negation are opposite branches, never versions of one statement

def test_a_negated_test_is_not_alike_and_an_edited_test_is():
    assert not statements_alike(P("if has_group():\n    x = 1"), P("if not has_group():\n    x = 1"))
    assert not statements_alike(P("if m is None:\n    x = 1"), P("if m is not None:\n    x = 1"))
    assert not statements_alike(P("while k in seen:\n    x = 1"), P("while k not in seen:\n    x = 1"))
    assert statements_alike(P("if has_group():\n    x = 1"), P("if has_group(cfg):\n    x = 1"))   # must not fire


# ---- omni edits inside a block the NPU base dropped: omni's whole block, live, where its anchors are

BASE = D('''
    def run(self, out):
        if has_group():
            meta = out.meta
            assert meta is not None
            group().handle(meta)
        n = out.n
        if not n:
            if not has_group():
                return EMPTY
            return self.no_forward(out)
        return self.model(n)
''')
OMNI = D('''
    def run(self, out):
        if has_group():
            meta = out.meta
            if meta is not None:
                group().handle(meta)
        n = out.n
        if not n:
            if not has_group():
                return EMPTY
            return self.no_forward(out)
        return self.model(n)
''')
NPU = D('''
    def run(self, out):
        n = out.n
        if not n:
            if not has_group():
                return EMPTY
            return self.no_forward(out)
        torch.npu.synchronize()
        return self.model(n)
''')


def test_omni_s_edit_inside_a_block_the_npu_base_dropped_writes_omni_s_block_live_at_its_anchors():
    d = apply_delta(BASE, OMNI, NPU, "run")
    fn = _live(d)
    assert not unbound_reads(_module(d)) and not _after_an_end(fn)
    first = fn.body[0]
    assert isinstance(first, ast.If) and ast.unparse(first.test) == "has_group()"   # before `n = out.n`, as omni has it
    assert ast.unparse(first.body[0]) == "meta = out.meta" and isinstance(first.body[1], ast.If)
    assert "torch.npu.synchronize()" in ast.unparse(fn)   # the NPU side stays
    assert not any(h.kind == "conflict" for h in d.hunks)
    assert any(x.code == "ONP4411" and "dropped `if has_group():`" in x.message for x in d.diagnostics)


def test_a_block_whose_bindings_later_statements_read_is_not_restored():
    base = D('''
        def run(self, x):
            a = prep(x)
            with ctx():
                y = f(a)
                z = g(y)
            return z
    ''')
    omni = base.replace("z = g(y)", "omni_hook(y)\n        z = g(y)")
    npu = D('''
        def run(self, x):
            a = prep(x)
            out = self.npu_runner.run_all(a)
            return out
    ''')
    d = apply_delta(base, omni, npu, "run")
    assert "with ctx()" not in ast.unparse(_live(d))   # the NPU base rewrote that computation: omni's line stays a conflict
    assert any(h.kind == "conflict" and any("omni_hook" in l for l in h.omni) for h in d.hunks)


# ---- never after a statement that ends the block

def test_an_insertion_at_the_end_of_a_block_ending_in_return_goes_before_the_return():
    base = D('''
        def run(self, a):
            if a:
                self.seen = base_only(a)
            return self.model(a)
    ''')
    omni = base.replace("self.seen = base_only(a)", "self.seen = base_only(a)\n        omni_hook(a)")
    npu = D('''
        def run(self, a):
            if a:
                npu_only(a)
                return None
            return self.model(a)
    ''')
    d = apply_delta(base, omni, npu, "run")
    fn = _live(d)
    assert not _after_an_end(fn)
    assert [ast.unparse(s) for s in fn.body[0].body] == ["npu_only(a)", "omni_hook(a)", "return None"]
    assert any(x.code == "ONP4411" and "which ends the block" in x.message for x in d.diagnostics)


def test_an_insertion_at_the_end_of_a_block_that_does_not_end_stays_at_the_end():
    base = D('''
        def run(self, a):
            if a:
                self.seen = base_only(a)
            return self.model(a)
    ''')
    omni = base.replace("self.seen = base_only(a)", "self.seen = base_only(a)\n        omni_hook(a)")
    npu = base.replace("self.seen = base_only(a)", "npu_only(a)\n        npu_sync()")
    d = apply_delta(base, omni, npu, "run")
    assert [ast.unparse(s) for s in _live(d).body[0].body] == ["npu_only(a)", "npu_sync()", "omni_hook(a)"]
    assert not any("which ends the block" in x.message for x in d.diagnostics)


# ---- a value the NPU side does not compute: bound to None where every read only passes it on

from omni_npu_port.port.delta import passed_on   # noqa: E402

SBASE = D('''
    def sample(self, out):
        nans, probs = self._bookkeep(out)
        return Output(probs=probs, nans=nans)
''')
SOMNI = D('''
    def sample(self, out):
        nans, probs = self._bookkeep(out)
        snap = dict(nans) if isinstance(nans, dict) else nans
        return self.build(probs=probs, nans=snap)
''')
SNPU = D('''
    def sample(self, out):
        probs = self._bookkeep(out)
        torch.npu.synchronize()
        return Output(probs=probs)
''')


def test_a_value_the_npu_side_does_not_compute_and_omni_only_passes_on_is_bound_to_none():
    d = apply_delta(SBASE, SOMNI, SNPU, "sample")
    fn = _live(d)
    assert not unbound_reads(_module(d))
    binds = [s for s in fn.body if isinstance(s, ast.Assign) and ast.unparse(s) == "nans = None"]
    assert len(binds) == 1 and fn.body.index(binds[0]) == 0   # right before the NPU statement standing for the binding
    assert "snap = dict(nans) if isinstance(nans, dict) else nans" in ast.unparse(fn)   # omni's line stays live
    assert any(x.code == "ONP4417" and "`nans`" in x.message for x in d.diagnostics)


def test_a_value_omni_uses_is_not_bound_to_none_and_stays_reported():
    omni = SOMNI.replace("snap = dict(nans) if isinstance(nans, dict) else nans", "snap = len(nans)")
    d = apply_delta(SBASE, omni, SNPU, "sample")
    assert "nans = None" not in ast.unparse(_live(d))
    assert not any(x.code == "ONP4417" for x in d.diagnostics)
    assert any(x.code == "ONP4413" and "`nans`" in x.message for x in d.diagnostics)
    assert any(x.code == "ONP4421" and "`nans`" in x.message for x in unbound_reads(_module(d)))


def test_passed_on_sees_builtin_uses_unless_guarded():
    f = lambda s: ast.parse(D(s)).body[0]
    assert passed_on(f("def g(x):\n    return self.m(k=x)"), "x")
    assert passed_on(f("def g(x):\n    if x is not None:\n        return len(x)\n    return 0"), "x")
    assert not passed_on(f("def g(x):\n    return x[0]"), "x")
    assert not passed_on(f("def g(x):\n    return self.record(x)"), "x")   # a positional use: what it does is unknown
    assert not passed_on(f("def g(x):\n    y = x\n    return y + 1"), "x")


def test_a_stored_value_unpacked_on_the_npu_side_is_left_to_the_record_merge():
    base, omni, npu = (t.replace("self._bookkeep(out)", "self.state") for t in (SBASE, SOMNI, SNPU))
    npu = npu.replace("probs = self.state", "probs, step = self.state")
    d = apply_delta(base, omni, npu, "sample")
    assert "nans = None" not in ast.unparse(_live(d))   # a merged state record may carry it: no None written
    assert not any(x.code == "ONP4417" for x in d.diagnostics)
    assert any(x.code == "ONP4413" and "`nans`" in x.message for x in d.diagnostics)
