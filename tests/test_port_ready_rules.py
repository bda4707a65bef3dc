("Issue 24, parts 1-2: omni lines that read names only one side binds are rebound (a binding carried, an NPU binding "
 "kept), and the ready verdict trusts what the NPU side's own source builds — each rule on fixtures written here, with "
 "a case where it must not fire.")
import ast
import textwrap
from types import SimpleNamespace

from omni_npu_port.port.delta import apply_delta
from omni_npu_port.port.merge import render
from omni_npu_port.port.ready import (ClassShape, _fits, class_findings, ready_findings, ready_index, source_keywords,
    unbound_reads)

D = lambda s: textwrap.dedent(s).lstrip("\n")


def _module(d) -> str:
    "The ported method (conflicts commented, NPU side live) as a method of a class in a module that compiles."
    body = "\n".join(render(d.hunks, fence=False, prefer="comment")[0])
    return "import torch\n\nclass R:\n" + textwrap.indent(body, "    ") + "\n"


def _live(d) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent("\n".join(render(d.hunks, fence=False, prefer="comment")[0]))).body[0]


def _order(fn: ast.FunctionDef, name: str) -> tuple[int, int]:
    "Line of the first binding and of the first read of `name`."
    st = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    ld = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return min(st, default=10**6), min(ld, default=-1)


# ---- a binding omni keeps from the GPU base, which the NPU method lacks, is carried live

BASE = D('''
    def run(self, n, pad):
        size = n + pad
        kw = self.init_kwargs(size)
        out = self.model(n, **kw)
        return out
''')
OMNI = D('''
    def run(self, n, pad):
        size = n + pad
        kw = self.init_kwargs(size)
        kw["counts"] = [n]
        out = self.model(n, **kw)
        return out
''')
NPU = D('''
    def run(self, n, pad):
        size = n + pad
        out = self.model(n)
        torch.npu.synchronize()
        return out
''')


def test_a_binding_the_npu_method_lacks_is_carried_before_the_omni_line_reading_it():
    d = apply_delta(BASE, OMNI, NPU, "run")
    fn = _live(d)
    bind, read = _order(fn, "kw")
    assert bind < read                                            # carried, before omni's kw["counts"] = ...
    assert _order(fn, "size")[0] < bind                           # after what it reads
    assert any(x.code == "ONP4413" and "carried live" in x.message and x.severity == "info" for x in d.diagnostics)
    code = _module(d)
    compile(code, "<port>", "exec")
    assert unbound_reads(code, "R") == [] and ready_findings(code, None, "R") == []


def test_a_binding_whose_call_the_npu_method_makes_itself_is_not_carried():
    # the NPU side does that work its own way (into an attribute): carrying vllm's statement would run init_kwargs twice
    npu = NPU.replace("    out = self.model(n)\n", "    self.cached = self.init_kwargs(size)\n    out = self.model(n, **self.cached)\n")
    d = apply_delta(BASE, OMNI, npu, "run")
    assert sum("self.init_kwargs(" in l for l in render(d.hunks, fence=False)[0]) == 1
    assert not any("carried live" in x.message for x in d.diagnostics)
    assert [x.code for x in unbound_reads(_module(d), "R")] == ["ONP4421"]      # still reported: `kw`


def test_a_binding_that_reads_a_local_nothing_live_binds_is_not_carried():
    npu = NPU.replace("    size = n + pad\n", "")                               # the NPU method never computes `size`
    d = apply_delta(BASE, OMNI, npu, "run")
    assert not any("carried live" in x.message for x in d.diagnostics)
    assert "kw" in {x.message.split("`")[1] for x in unbound_reads(_module(d), "R")}


def test_a_binding_reading_only_parameters_goes_right_before_its_reader_when_its_anchors_come_after_it():
    base = D('''
        def run(self, n):
            def hook(t):
                return t
            cfg = self.config
            if cfg is not None:
                hook(cfg.a)
            return n
    ''')
    omni = D('''
        def run(self, n):
            def hook(t):
                return t
            cfg = self.config
            if cfg is not None:
                hook(cfg.a)
            return n
    ''').replace("    def hook", "    use = cfg.b\n    def hook", 1)
    npu = D('''
        def run(self, n):
            def hook(t):
                return t
            if self.config is not None:
                hook(self.config.a)
            torch.npu.synchronize()
            return n
    ''')
    d = apply_delta(base, omni, npu, "run")
    bind, read = _order(_live(d), "cfg")
    assert bind < read and any("right before the first omni line" in x.message for x in d.diagnostics)
    compile(_module(d), "<port>", "exec")


# ---- the reverse: NPU lines reading a name whose binding an omni replacement took keep that binding

RBASE = D('''
    def step(self, x):
        n = len(x)
        flag = n > 0
        self.go(x)
        return x
''')
ROMNI = D('''
    def step(self, x):
        other = 1
        self.go(x)
        self.hook(other)
        return x
''')
RNPU = D('''
    def step(self, x):
        n = len(x)
        flag = n > 0
        self.go(x, skip=flag)
        torch.npu.synchronize()
        torch.npu.synchronize()
        return x
''')


def test_npu_statements_an_omni_replacement_took_are_kept_where_kept_lines_read_them():
    d = apply_delta(RBASE, ROMNI, RNPU, "step")
    fn = _live(d)
    assert _order(fn, "flag")[0] < _order(fn, "flag")[1] and _order(fn, "n")[0] < _order(fn, "n")[1]   # both, in turn
    assert _order(fn, "other")[0] < _order(fn, "other")[1]                                                # omni's line live
    code = _module(d)
    compile(code, "<port>", "exec")
    assert ready_findings(code, None, "R") == []


def test_an_npu_binding_nothing_reads_goes_with_omni_s_replacement():
    d = apply_delta(RBASE, ROMNI, RNPU.replace("skip=flag", "skip=False"), "step")
    text = "\n".join(render(d.hunks, fence=False)[0])
    assert "flag = n > 0" not in text and "n = len(x)" not in text and "other = 1" in text


# ---- ready: a keyword the NPU side's own source passes when it builds a class is no mismatch

def _npu_side(tmp_path):
    pkg = tmp_path / "vllm"
    (pkg / "v1").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "v1" / "__init__.py").write_text("")
    (pkg / "v1" / "outputs.py").write_text(D('''
        from dataclasses import dataclass
        from typing import NamedTuple

        @dataclass
        class Output:
            req_ids: list
            tokens: list = None

        class State(NamedTuple):
            logits: object
            hidden: object
    '''))
    from omni_npu_port.sources.readers import open_source
    runner = D('''
        from vllm.v1.outputs import Output

        class NPURunner:
            def sample(self):
                return Output(req_ids=[], spec_ids=None)   # a runtime patch of the NPU side adds `spec_ids`
    ''')
    tree = open_source(str(pkg))
    return SimpleNamespace(tree=tree, module_text=runner), SimpleNamespace(tree=tree, module_text="")


PORTED = D('''
    from vllm.v1.outputs import Output

    class R:
        def sample(self):
            a = Output(req_ids=[], spec_ids=None)
            return a, Output(req_ids=[], made_up=1)
''')


def test_a_keyword_the_npu_source_passes_is_accepted_and_one_no_source_passes_is_not(tmp_path):
    npu, gpu = _npu_side(tmp_path)
    ix = ready_index(gpu, npu)
    found = [x.message for x in class_findings(PORTED, ix) if x.code == "ONP4422"]
    assert len(found) == 1 and "made_up" in found[0] and "spec_ids" not in found[0]
    assert source_keywords([ast.parse(npu.module_text)]) == {"vllm.v1.outputs.Output": {"req_ids", "spec_ids"}}


def test_fits_takes_the_passed_keywords_only_for_that_class():
    shape = ClassShape("Output", "vllm.v1.outputs:4", fields=["req_ids", "tokens"], kind="dataclass")
    call = ast.parse("Output(req_ids=[], spec_ids=None)").body[0].value
    assert _fits(shape, call) is not None and "spec_ids" in _fits(shape, call)
    assert _fits(shape, call, {"spec_ids"}) is None


# ---- one self-call assigned on both sides under two names: omni's reads of its name are rebound

CBASE = D('''
    def execute(self, n):
        out = self.forward(num=n, mode=1)
        self.log(n)
        return None
''')
COMNI = D('''
    def execute(self, n):
        out = self.forward(num=n, mode=1)
        self.log(n)
        self.keep(self.extract(out))
        return None
''')
CNPU = D('''
    def execute(self, n):
        with npu_stream():
            hidden = self.forward(n, 1, stream=True)
        torch.npu.synchronize()
        self.log(n)
        return None
''')   # (no statement but the call pairs the two names)


def test_an_npu_assignment_of_the_same_self_call_rebinds_omni_s_reads():
    d = apply_delta(CBASE, COMNI, CNPU, "execute")
    text = "\n".join(render(d.hunks, fence=False)[0])
    assert "self.extract(hidden)" in text and "self.extract(out)" not in text
    code = _module(d)
    compile(code, "<port>", "exec")
    assert "out" not in {x.message.split("`")[1] for x in unbound_reads(code, "R")}


def test_two_npu_assignments_of_that_call_leave_the_read_reported():
    npu = CNPU.replace("    torch.npu.synchronize()\n", "    spare = self.forward(n, 2)\n    torch.npu.synchronize()\n") \
              .replace("return None", "return spare")
    d = apply_delta(CBASE, COMNI, npu, "execute")
    assert "self.extract(hidden)" not in "\n".join(render(d.hunks, fence=False)[0])
    assert any(x.code == "ONP4413" and "`out`, which only the omni method binds" in x.message for x in d.diagnostics)


# ---- ready: a name omni unpacks from an NPU-side NamedTuple that lacks its field stays an error, and says why

UNPACKED = D('''
    from vllm.v1.outputs import State

    class R:
        def execute(self):
            self.state = State(1, 2)

        def sample(self):
            # <<<<<<< ONP4001 conflict: NPU base (kept)
            (logits, hidden) = self.state
            # ======= omni GPU (commented out)
            # (logits, hidden, mm) = self.state
            # >>>>>>>
            return logits, hidden, mm
''')


def test_a_name_omni_unpacks_from_an_npu_namedtuple_lacking_the_field_is_reported_with_the_class(tmp_path):
    npu, gpu = _npu_side(tmp_path)
    found = [x for x in ready_findings(UNPACKED, ready_index(gpu, npu), "R") if x.code == "ONP4420"]
    assert len(found) == 1 and "`mm`" in found[0].message
    assert "unpacking 3 names from `self.state`" in found[0].message and "State" in found[0].message and "logits, hidden" in found[0].message


def test_a_name_bound_only_in_a_commented_side_otherwise_keeps_the_plain_finding(tmp_path):
    npu, gpu = _npu_side(tmp_path)
    code = UNPACKED.replace("self.state = State(1, 2)", "self.state = (1, 2)")      # no NPU-side class fills it
    found = [x for x in ready_findings(code, ready_index(gpu, npu), "R") if x.code == "ONP4420"]
    assert len(found) == 1 and found[0].message.endswith("(bound only in a commented-out conflict side)")


# ---- no rebinding where the NPU statement standing for omni's binding computes no such value: reported, and why

NBASE = D('''
    def sample(self, x):
        nans, lists, ids = self.bookkeep(x, 1)
        self.emit(lists)
        return ids
''')
NOMNI = D('''
    def sample(self, x):
        nans, lists, ids = self.bookkeep(x, 1)
        self.emit(lists)
        self.record(nans)
        return ids
''')
NNPU = D('''
    def sample(self, x):
        lists, ids = self.bookkeep(x, 1)
        self.emit(lists)
        torch.npu.synchronize()
        return ids
''')


def test_a_read_whose_npu_binding_computes_no_such_value_is_reported_saying_so():
    d = apply_delta(NBASE, NOMNI, NNPU, "sample")
    why = [x.message for x in d.diagnostics if x.code == "ONP4413" and "`nans`" in x.message]
    assert len(why) == 1 and "binds no `nans`: the NPU side computes no such value" in why[0]
    assert sum("self.bookkeep(" in l for l in render(d.hunks, fence=False)[0]) == 1     # never carried: it would run twice
    assert "nans" in {x.message.split("`")[1] for x in unbound_reads(_module(d), "R")}


def test_a_read_the_npu_binding_does_bind_is_no_finding():
    d = apply_delta(NBASE, NOMNI, NNPU.replace("lists, ids =", "nans, lists, ids ="), "sample")
    assert not any(x.code == "ONP4413" for x in d.diagnostics) and unbound_reads(_module(d), "R") == []


# ---- the fidelity count: an omni statement whose local reads were rebound is live; one calling another function is not

def test_an_omni_statement_with_its_local_reads_rebound_counts_live():
    from omni_npu_port.port.release import check_method
    omni = "def run(self):\n    out = self.fwd()\n    mm = self.extract(out)\n    return mm\n"
    base = "def run(self):\n    out = self.fwd()\n    return out\n"
    npu = "def run(self):\n    hidden = self.fwd(stream=1)\n    return hidden\n"
    port = "def run(self):\n    hidden = self.fwd(stream=1)\n    mm = self.extract(hidden)\n    return mm\n"
    assert check_method("run", "delta", port, omni, omni, base, base, npu).omni_live == 2
    other = port.replace("self.extract(hidden)", "self.squeeze(hidden)")          # another method called: not omni's line
    assert check_method("run", "delta", other, omni, omni, base, base, npu).omni_live == 1
