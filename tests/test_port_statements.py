("Issue 31, part 2: a method port as statements that carry their origin and the names each binds and reads, its "
 "conflicts read through one parser (`Conflict.text`) — on fixtures written here and the port's own "
 "(tests/fixtures/port), each with a case where a bind, read or origin must be found and one where it must not.")
import textwrap
from pathlib import Path

from omni_npu_port.port import classes as classes_module
from omni_npu_port.port import locate
from omni_npu_port.port import method as method_module
from omni_npu_port.port.conflicts import Conflict, conflicts_in, resolve
from omni_npu_port.port.dataflow import place_by_dataflow, side_statements
from omni_npu_port.port.merge import FENCE_TEXT
from omni_npu_port.port.records import comment_conflicts
from omni_npu_port.port.release_checks import MethodCheck
from omni_npu_port.port.release_report import _origins_cell
from omni_npu_port.port.statements import MethodPort, masked, statement_origin
from test_port_dataflow import _rows  # lines and origins from tagged lines, one reader

D = lambda s: textwrap.dedent(s).lstrip("\n")
FIX = Path(__file__).parent / "fixtures" / "port"


MERGED = '''
    N|def prepare(self, batch):
    N|    "Prepare one batch."
    N|    ids = self.input_ids(batch)
    P|    FENCE
    O|    # omni: the talker's hidden states
    O|    talker = self.talker_states(ids)
    P|    FENCE
    P|    # <<<<<<< ONP4001 conflict: NPU base (kept)
    N|    out = self.npu_forward(ids)
    N|    out.flag = True
    P|    # ======= omni GPU (translated) (commented out)
    O|    # out = self.forward(ids, talker=talker)
    P|    # >>>>>>>
    N|    for k in batch:
    O|        talker.note(k)
    N|
    N|    return out
'''


def test_each_statement_carries_its_origin_binds_and_reads():
    lines, origins = _rows(MERGED)
    mp = MethodPort.of(lines, origins)
    assert [s.origin for s in mp.statements] == ["npu", "npu", "omni", "conflict", "mixed", "npu"]
    assert mp.counts() == {"npu": 3, "omni": 1, "mixed": 1, "conflict": 1}
    ids, talker, conflict, loop, ret = mp.statements[1:]
    assert (ids.binds, ids.reads) == ({"ids"}, {"self", "batch"})
    assert (talker.binds, talker.reads) == ({"talker"}, {"self", "ids"})
    assert talker.lines[0] == "    " + FENCE_TEXT   # the fence and omni's comment above it go with the statement
    assert (conflict.binds, conflict.reads) == ({"out"}, {"self", "ids"})   # its live side: the NPU one
    assert conflict.conflict is not None and conflict.conflict.text(1) == "out = self.forward(ids, talker=talker)"
    assert (loop.binds, loop.reads) == ({"k"}, {"batch", "talker"})
    assert ret.reads == {"out"} and ret.binds == set() and ret.lines[0] == ""   # the blank line above goes with it
    assert [s.at for s in mp.binders("talker")] == [3] and [s.at for s in mp.readers("talker")] == [13]


def test_a_name_nothing_binds_or_reads_is_found_nowhere_and_a_plain_method_has_no_conflict():
    lines, origins = _rows(MERGED)
    mp = MethodPort.of(lines, origins)
    assert mp.binders("absent") == [] and mp.readers("absent") == []
    assert "out" not in mp.statements[1].reads and "ids" not in mp.statements[-1].reads
    plain = MethodPort.of(["def f(self, a):", "    b = a + 1", "    return b"], ["npu"] * 3)
    assert plain.counts() == {"npu": 2} and not any(s.conflicts or s.conflict for s in plain.statements)


def test_the_form_renders_the_lines_and_origins_it_was_built_from():
    lines, origins = _rows(MERGED)
    mp = MethodPort.of(lines, origins)
    assert (mp.lines(), mp.origins(), mp.text()) == (lines, origins, "\n".join(lines) + "\n")
    assert [l for l, _ in mp.head] == lines[:1] and mp.tail == ()


def test_git_markers_make_a_conflict_that_neither_binds_nor_reads():
    git = resolve("\n".join(_rows(MERGED)[0]) + "\n", uncomment=True).splitlines()
    mp = MethodPort.of(git)
    c = next(s for s in mp.statements if s.origin == "conflict")
    assert (c.binds, c.reads, c.conflict.live) == (frozenset(), frozenset(), None)
    assert mp.counts() == {"unknown": 5, "conflict": 1} and mp.lines() == git   # no origins given: unknown


def test_a_conflict_inside_a_block_makes_its_statement_the_conflicts_not_the_conflict_itself():
    lines = ["def f(self, a):", "    if a:", "        # <<<<<<< ONP4001 conflict: NPU base (kept)", "        x = 1",
             "        # ======= omni (commented out)", "        # x = 2", "        # >>>>>>>", "    return a"]
    mp = MethodPort.of(lines, ["npu"] * len(lines))
    first = mp.statements[0]
    assert first.origin == "conflict" and len(first.conflicts) == 1 and first.conflict is None   # an `if` around it
    assert first.binds == {"x"} and mp.statements[1].origin == "npu"
    assert mp.statements[1].conflicts == ()


def test_a_method_that_does_not_parse_even_masked_is_all_header():
    lines = ["<<<<<<< a", "def f(self):", "=======", "def f(self, b):", ">>>>>>> b", "    return 1"]
    mp = MethodPort.of(lines, ["port", "npu", "port", "omni", "port", "npu"])
    assert mp.statements == () and mp.counts() == {} and mp.lines() == lines


def test_statement_origin_mixed_only_where_code_lines_differ():
    assert statement_origin(["    # omni", "    y = 1"], ["omni", "npu"]) == "npu"   # a comment is no code
    assert statement_origin(["    if a:", "        y = 1"], ["npu", "omni"]) == "mixed"
    assert statement_origin(["    y = 1"], ["omni"], conflicts=(Conflict.of(["y"], ["z"]),)) == "conflict"


def test_masked_replaces_each_conflict_by_one_pass_and_leaves_other_lines():
    lines = ["def f(self):", "<<<<<<< a", "    x = 1", "=======", "        x = 2", ">>>>>>> b", "    return x"]
    assert masked(lines, conflicts_in(lines)) == ["def f(self):", "    pass", "", "", "", "", "    return x"]
    assert masked(["def f(self):", "    return 1"], []) == ["def f(self):", "    return 1"]


def test_a_conflict_side_is_read_at_column_zero_in_either_form():
    ind = "        "
    c = Conflict.of([ind + "y = npu(x)"], [ind + "y = omni(x)", "", ind + "z = y"], commented=True, indent=ind)
    text = "def f(self, x):\n" + "\n".join(c.lines()) + "\n        return y\n"
    (p,) = conflicts_in(text)
    assert (p.text(0), p.text(1)) == ("y = npu(x)", "y = omni(x)\n\nz = y")
    (g,) = conflicts_in(resolve(text, uncomment=True))
    assert (g.text(0), g.text(1)) == (p.text(0), p.text(1))
    assert [type(s).__name__ for s in side_statements(p, 1)] == ["Assign", "Assign"]
    broken = Conflict.of(["    y = npu(x"], ["    y = (omni"], commented=True, indent="    ")
    assert side_statements(broken, 0) == [] and side_statements(broken, 1) == []   # a side that does not parse alone
    assert [c.at for c in comment_conflicts(text.splitlines())] == [(1, 3, 7)]
    assert comment_conflicts(resolve(text, uncomment=True).splitlines()) == []   # git markers: not the comment form


COMMENTED = '''
    N|def step(self, a):
    P|    # <<<<<<< ONP4001 conflict: NPU base (kept)
    N|    res = Out(ids=a, flag=True)
    P|    # ======= omni GPU (translated) (commented out)
    O|    # out = OmniOut(ids=a, flag=True)
    P|    # >>>>>>>
    O|    return out
'''


def test_a_read_only_a_commented_side_binds_is_aliased_from_the_conflict_objects_sides():
    "ONP4465 from the sides `Conflict.text` gives: the NPU side holds `res` where omni's holds `out`."
    lines, origins = _rows(COMMENTED)
    out, _, diags = place_by_dataflow(lines, origins)
    assert "    out = res" in out and [d.code for d in diags] == ["ONP4465"]
    bound = [l.replace("# out = Omni", "out = Omni") if "# out" in l else l for l in lines]   # omni side live too
    assert place_by_dataflow(bound, origins)[2] == []   # nothing only the commented side binds: nothing said


UNREACHED = '''
    N|def sample_tokens(self, state):
    N|    if state is None:
    N|        output = self.empty()
    N|        return output
    P|    # <<<<<<< ONP4001 conflict: NPU base (kept)
    N|    if not self.use_async_scheduling:
    N|        return self.build()
    P|    # ======= omni GPU (commented out)
    O|    # output, extra = self.builder()
    P|    # >>>>>>>
    O|    async_output = self.wrap(model_runner_output=output)
    N|    return async_output
'''


def test_an_unreached_read_names_the_commented_side_that_binds_it_by_any_target():
    "ONP4454 names the omni side's binder from the Conflict's parsed side: a tuple target too (line 9)."
    lines, origins = _rows(UNREACHED)
    (d,) = place_by_dataflow(lines, origins)[2]
    assert d.code == "ONP4454" and "a commented conflict side binds it (line 9)" in d.message


def test_a_comment_that_looks_like_a_binding_outside_any_conflict_is_no_commented_side():
    "Defect fixed: a plain omni comment `# output = ...` was read as a commented conflict side binding `output`."
    lines, origins = _rows(UNREACHED)
    keep = [k for k in range(len(lines)) if k not in (4, 7, 9)]   # the markers gone: the comment stays, alone
    lines, origins = [lines[k] for k in keep], [origins[k] for k in keep]
    lines[6] = "    # output = self.builder()"
    (d,) = place_by_dataflow(lines, origins)[2]
    assert d.code == "ONP4454" and "a commented conflict side binds it" not in d.message


# -- the form in the port: counts per method, gathered per class, shown per method in the report

def _triple(case: str, method: str = "", need_method: bool = True):
    f = FIX / f"{case}.py"
    return [locate.locate(f"{f}:{c}{'.' + method if method else ''}", need_method=need_method)
            for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]


def test_a_method_port_counts_its_statements_by_origin_from_its_form():
    conflict = method_module.port_method(*_triple("conflict", "_dummy_run"), prefer="comment")
    assert conflict.stats["statements"] == {"vllm": 2, "conflict": 1}   # lines all three share: vllm's
    clean = method_module.port_method(*_triple("clean", "_dummy_run"))
    assert clean.stats["statements"] == {"vllm": 4, "npu": 1, "omni": 1, "mixed": 1}   # no conflict: none counted
    assert clean.code == MethodPort.of(clean.code.splitlines()).text()      # the form renders what the port wrote


def test_the_class_port_gathers_each_methods_counts_and_the_report_shows_them():
    res = classes_module.port_class(*_triple("super_ext", need_method=False))
    assert res.stats["statements"] == {"load_model": {"omni": 3}, "_model_forward": {"npu": 3, "omni": 3}}
    assert _origins_cell(MethodCheck("m", "merge", statements={"npu": 2, "conflict": 1})) == "2 npu, 1 conflict"
    assert _origins_cell(MethodCheck("m", "omni-only")) == "-"   # no merge built a form: nothing to count
