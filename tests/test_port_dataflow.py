("Issue 31, part 3a: a statement is never placed before the statements that bind what it reads (dataflow placement), "
 "and every type a merged record's annotations name is imported or reported — on fixtures written here, each rule with "
 "a case where it must fire and one where it must not.")
import ast
import textwrap

import pytest
from types import SimpleNamespace

from omni_npu_port.port.dataflow import binds, late_reads, binding_marks, place_by_dataflow, reads
from omni_npu_port.port.merge import FENCE_TEXT
from omni_npu_port.port.ready import ready_index
from omni_npu_port.port.records import merge_records
from omni_npu_port.sources.readers import open_source

D = lambda s: textwrap.dedent(s).lstrip("\n")


def _rows(text: str):
    ("Lines and origins of a rendered method written with a side tag per line: `N|` NPU base, `O|` omni, `F|` a fence "
     "(`P|`: any other line the port wrote).")
    lines, origins = [], []
    for l in D(text).splitlines():
        tag, _, body = l.partition("|")
        lines.append(body.replace("FENCE", FENCE_TEXT))
        origins.append({"N": "npu", "O": "omni", "F": "port", "P": "port"}[tag])
    return lines, origins


def _run(lines, *args, **ns):
    "The method's text run with `args`: its return value for `self` a stub whose calls return what `ns` says."
    env = {}
    exec("\n".join(lines), env)
    fn = next(v for k, v in env.items() if callable(v) and not k.startswith("__"))
    return fn(SimpleNamespace(**ns), *args)


SAMPLE = '''
    N|def sample_tokens(self, logits):
    N|    flag = False
    F|    FENCE
    O|    # post-sample step, after bookkeeping on the GPU side
    O|    mm = self.post_sample(req_ids, logits)
    O|    if flag:
    O|        self.propose(valid_ids)
    F|    FENCE
    N|    draft = self.draft(logits)
    N|    req_ids, valid_ids = self.bookkeeping(logits)
    N|    return mm, draft, req_ids
'''


def test_an_omni_statement_reading_a_later_bound_name_moves_after_its_binder_with_its_run():
    lines, origins = _rows(SAMPLE)
    stub = dict(post_sample=lambda r, l: ("mm", r), propose=None, draft=lambda l: "d",
                bookkeeping=lambda l: (["a"], [1]))
    with pytest.raises(UnboundLocalError): _run(lines, "logits", **stub)           # as the anchors placed it
    out, orgs, diags = place_by_dataflow(lines, origins)
    at = [l.strip() for l in out].index
    bk, mm = "req_ids, valid_ids = self.bookkeeping(logits)", "mm = self.post_sample(req_ids, logits)"
    assert at(bk) < at(mm) < at("if flag:")                                                   # omni's order kept
    assert at("# post-sample step, after bookkeeping on the GPU side") + 1 == at(mm)            # its comment with it
    assert at("draft = self.draft(logits)") < at(bk)                                           # NPU order kept
    assert [d.code for d in diags] == ["ONP4450"]
    assert "`req_ids`" in diags[0].message and "bookkeeping" in diags[0].message
    assert out[diags[0].line - 1].strip().startswith("mm = ")                                  # the line it names
    assert sum(FENCE_TEXT in l for l in out) == 2 and len(out) == len(orgs)                     # one fenced run, moved
    assert _run(out, "logits", **stub) == (("mm", ["a"]), "d", ["a"])                          # placed: it runs


def test_a_statement_whose_reads_are_bound_earlier_does_not_move():
    lines, origins = _rows('''
        N|def sample_tokens(self, logits):
        N|    req_ids, valid_ids = self.bookkeeping(logits)
        F|    FENCE
        O|    mm = self.post_sample(req_ids, logits)
        F|    FENCE
        N|    draft = self.draft(logits)
        N|    return mm, draft
    ''')
    out, _, diags = place_by_dataflow(lines, origins)
    assert out == lines and diags == []


def test_placement_is_stable_and_npu_or_all_omni_code_is_never_reordered():
    lines, origins = _rows(SAMPLE)
    out, orgs, _ = place_by_dataflow(lines, origins)
    assert place_by_dataflow(out, orgs)[0] == out                                  # a second pass moves nothing
    npu_reads_late = ["def f(self):", "    a = use(b)", "    b = make()", "    return a"]
    assert place_by_dataflow(npu_reads_late, ["npu"] + ["omni", "npu", "npu"])[0] != npu_reads_late
    assert place_by_dataflow(npu_reads_late, ["npu"] * 4) == (npu_reads_late, ["npu"] * 4, [])   # the NPU base's own
    assert place_by_dataflow(npu_reads_late, ["omni"] * 4)[0] == npu_reads_late                 # omni's own order


def test_no_place_after_the_binder_leaves_the_statement_and_says_why():
    lines, origins = _rows('''
        N|def f(self):
        O|    a = use(b)
        N|    c = a + 1
        N|    b = make()
        N|    return c
    ''')
    out, _, diags = place_by_dataflow(lines, origins)
    assert out == lines
    assert [d.code for d in diags] == ["ONP4451"] and "`c = a + 1` between them reads `a`" in diags[0].message
    lines, origins = _rows('''
        N|def f(self, x):
        N|    if x:
        O|        y = use(b)
        N|    b = make()
        N|    return y
    ''')
    out, _, diags = place_by_dataflow(lines, origins)
    assert out == lines and [d.code for d in diags] == ["ONP4451"] and "outside the block" in diags[0].message


def test_a_return_in_the_run_blocks_a_move_but_a_loop_of_its_own_and_a_closure_do_not():
    lines, origins = _rows('''
        N|def f(self):
        O|    if use(b):
        O|        return 1
        N|    b = make()
        N|    return 0
    ''')
    assert [d.code for d in place_by_dataflow(lines, origins)[2]] == ["ONP4451"]
    lines, origins = _rows('''
        N|def f(self):
        O|    for r in b:
        O|        if not r:
        O|            continue
        O|        self.take(r)
        O|    def later():
        O|        return not_yet
        N|    b = make()
        N|    not_yet = 2
        N|    return later
    ''')
    out, _, diags = place_by_dataflow(lines, origins)
    assert [d.code for d in diags] == ["ONP4450"] and [l.strip() for l in out].index("b = make()") == 1
    at = [l.strip() for l in out].index
    assert at("def later():") < at("not_yet = 2")                                    # a closure reads when called


def test_what_a_statement_binds_and_reads():
    st = ast.parse("out, n = self.sync(logits, [r for r in ids])").body[0]
    assert binds(st) == {"out", "n"} and reads(st) == {"self", "logits", "ids"}
    fn = ast.parse("def f(self, p):\n    x = p + q\n    q = 1\n").body[0]
    assert late_reads(fn, fn.body[0], binding_marks(fn)) == {"q"}
    assert late_reads(fn, fn.body[1], binding_marks(fn)) == set()


# -- records: every type a merged record's annotations name is imported or reported

def _pkg(root, name: str, files: dict):
    for rel, text in files.items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for d in (root / name, p.parent): (d / "__init__.py").touch()
        p.write_text(D(text))
    return open_source(str(root / name))


PORTED = D('''
    from typing import Any
    from vllm_ascend.worker.runner import State


    class NPUAR:
        def execute_model(self, sched):
            # <<<<<<< ONP4001 conflict: NPU base (kept)
            self.state = State(sched, None)
            # ======= omni GPU (commented out)
            # self.state = State(sched, None, {})
            # >>>>>>>
''')


def _merge(tmp_path, npu_extra: str, omni_field: str):
    npu = _pkg(tmp_path / "n", "vllm_ascend", {
        "spec.py": "class SpecMeta: ...\n",
        "graphs.py": "class BatchDesc: ...\n",
        "worker/runner.py": f'''
            from typing import NamedTuple
            from ..spec import SpecMeta
            {npu_extra}
            class State(NamedTuple):
                sched: object
                spec: SpecMeta | None
        '''})
    omni = _pkg(tmp_path / "o", "vllm_omni", {"worker/gpu_ar.py": f'''
        from typing import Any, NamedTuple
        class State(NamedTuple):
            sched: object
            spec: object
            {omni_field}
    '''})
    base = SimpleNamespace(tree=npu, module_text="")
    return merge_records(PORTED, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"),
                         ready_index(base, base), {}, "npu_ar")


def test_a_merged_record_imports_each_annotation_type_from_where_the_inputs_import_or_define_it(tmp_path):
    code, diags = _merge(tmp_path, "", "batch: BatchDesc = None")
    assert [d.code for d in diags] == ["ONP4424", "ONP4452"]
    imports = "if TYPE_CHECKING:\n    from vllm_ascend.spec import SpecMeta\n    from vllm_ascend.graphs import BatchDesc\n"
    assert imports in code   # the NPU module's own import first, then the module that defines it
    assert "from typing import TYPE_CHECKING" in code
    ns = {}
    exec("\n".join(l for l in code.splitlines() if not l.startswith("from vllm")), ns)   # runs: imports for a checker
    assert ns["State"]._fields == ("sched", "spec", "batch")


def test_a_type_already_bound_is_not_imported_again_and_a_type_nobody_defines_is_reported(tmp_path):
    code, diags = _merge(tmp_path, "", "extra: Any = None")
    assert "import Any" not in code.split("class State")[0].split("from typing import Any", 1)[1]   # bound: not again
    assert [d.code for d in diags] == ["ONP4424", "ONP4452"]
    code, diags = _merge(tmp_path / "b", "", "stat: 'GraphStat | None' = None")
    assert [d.code for d in diags] == ["ONP4424", "ONP4452", "ONP4453"]
    assert "`GraphStat`" in diags[2].message and "GraphStat" not in code.split("class State")[0]


# -- delta placement: an omni statement of the outer level is never nested inside an NPU block that re-nests its sibling

def _delta_lines(base: str, omni: str, npu: str):
    from omni_npu_port.port.delta import apply_delta
    from omni_npu_port.port.merge import render
    return render(apply_delta(D(base), D(omni), D(npu), "run").hunks)[0]


def test_an_outer_omni_statement_is_placed_beside_the_npu_if_that_re_nests_its_sibling_not_inside_it():
    base = '''
        def run(self, x):
            a = self.prep(x)
            b = self.step(a)
            c = self.more(b)
            return c
    '''
    npu = '''
        def run(self, x):
            if self.spec:
                a = self.prep(x)
                self.npu_only(a)
            with torch.npu.stream(s):
                q = torch.zeros(3, device="npu")
            return [q, q]
    '''
    lines = _delta_lines(base, base.replace("    c = self.more", "    self.omni_hook(a)\n            c = self.more"), npu)
    assert "    self.omni_hook(a)" in lines                                       # at omni's level
    assert lines.index("    self.omni_hook(a)") > lines.index("        self.npu_only(a)")   # after the NPU `if`


def test_an_omni_statement_inside_a_block_omni_shares_stays_inside_it():
    base = '''
        def run(self, x):
            if self.spec:
                a = self.prep(x)
                b = self.step(a)
            return x
    '''
    npu = '''
        def run(self, x):
            if self.spec:
                a = self.prep(x)
                self.npu_only(a)
                q = torch.zeros(3)
            return [x]
    '''
    lines = _delta_lines(base, base.replace("        b = self.step", "        self.omni_hook(a)\n                b = self.step"), npu)
    assert lines.index("        self.omni_hook(a)") == lines.index("        a = self.prep(x)") + 2   # fence, then it: inside


# -- a read no binding reaches: said (ONP4454), never silence

def test_a_name_bound_before_only_in_a_returning_block_is_reported_with_the_commented_binding():
    lines, origins = _rows('''
        N|def sample_tokens(self, state):
        N|    if state is None:
        N|        output = self.empty()
        N|        return output
        F|    # <<<<<<< ONP4001 conflict: NPU base (kept)
        N|    if not self.use_async_scheduling:
        N|        return self.build()
        F|    # ======= omni GPU (commented out)
        O|    # output = self.builder()
        F|    # >>>>>>>
        O|    async_output = self.wrap(model_runner_output=output)
        N|    return async_output
    ''')
    out, _, diags = place_by_dataflow(lines, origins)
    assert out == lines and [(d.code, d.line) for d in diags] == [("ONP4454", 11)]
    assert "`output`" in diags[0].message and "(line 9)" in diags[0].message
    with pytest.raises(UnboundLocalError): _run(lines, "s", use_async_scheduling=True, wrap=lambda **k: k)
    nested = lines[:10] + ["    if self.wrap_it:", "        async_output = self.wrap(model_runner_output=output)",
                           "    return async_output"]
    got = place_by_dataflow(nested, origins[:10] + ["omni", "omni", "npu"])[2]
    assert [(d.code, d.line) for d in got] == [("ONP4454", 12)]   # once, at the statement that reads it


def test_a_binding_on_a_path_that_reaches_the_read_is_not_reported():
    lines, origins = _rows('''
        N|def sample_tokens(self, state):
        N|    if state is None:
        N|        output = self.empty()
        N|        return output
        N|    else:
        N|        output = self.build()
        O|    async_output = self.wrap(model_runner_output=output)
        N|    return async_output
    ''')
    assert place_by_dataflow(lines, origins) == (lines, origins, [])
    assert _run(lines, "s", build=lambda: 1, wrap=lambda **k: k) == {"model_runner_output": 1}
