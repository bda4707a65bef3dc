("Issue 24, parts 1-2: a state record (NamedTuple or dataclass) the omni GPU source and the NPU base define "
 "differently is merged into one class (NPU fields, then omni's extra fields) and every live build and unpack of it "
 "made consistent — on fixtures written here, with the cases the rule must not touch.")
import ast
import textwrap
from types import SimpleNamespace

from omni_npu_port.port.ready import ready_findings, ready_index
from omni_npu_port.port.records import merge_records, merged_record, read_record
from omni_npu_port.sources.readers import open_source
from omni_npu_port.sources.symbols import SymbolIndex

D = lambda s: textwrap.dedent(s).lstrip("\n")
FENCE = "# ---------------------------------------Omni-new----------------------------------------------"


def _pkg(root, name: str, files: dict):
    pkg = root / name
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for d in [pkg, *p.relative_to(pkg).parents]:
            if (pkg / d / "__init__.py").parent.is_dir() and not (pkg / d / "__init__.py").exists(): (pkg / d / "__init__.py").write_text("")
        p.write_text(D(text))
    return open_source(str(pkg))


NPU_RECORDS = '''
    from dataclasses import dataclass
    from typing import NamedTuple

    class State(NamedTuple):
        sched: "Sched"
        logits: object
        attn_metadata: dict
        positions: object

    @dataclass
    class Out:
        req_ids: list
        tokens: list = None

    class Same(NamedTuple):
        a: int
        b: int
'''
OMNI_AR = '''
    from dataclasses import dataclass
    from typing import NamedTuple

    class State(NamedTuple):
        sched: Sched
        logits: object
        hidden_cpu: object
        mm_out: dict
        step_id: int | None = None

    @dataclass
    class Out:
        req_ids: list
        tokens: list = None
        mm: dict = None

    class Same(NamedTuple):
        a: int
        b: int
'''
OMNI_GEN = '''
    from vllm_omni.worker.gpu_ar import State
'''


def _sides(tmp_path):
    npu = _pkg(tmp_path / "n", "vllm_ascend", {"worker/model_runner_v1.py": NPU_RECORDS})
    omni = _pkg(tmp_path / "o", "vllm_omni", {"worker/gpu_ar.py": OMNI_AR, "worker/gpu_gen.py": OMNI_GEN})
    base = SimpleNamespace(tree=npu, module_text="")
    return ready_index(base, base), omni


AR = D(f'''
    from vllm_ascend.worker.model_runner_v1 import State


    class NPUAR:
        def execute_model(self, sched):
            logits, attn_metadata, positions = self.run(sched)
            {FENCE}
            hidden_cpu = logits + 1
            mm_out = {{"audio": logits}}
            {FENCE}
            # <<<<<<< ONP4001 conflict: NPU base: vllm_ascend NPUModelRunner.execute_model (kept)
            self.state = State(
                sched,
                logits,
                attn_metadata,
                positions,
            )
            # ======= omni GPU: vllm_omni GPUARModelRunner.execute_model (translated) (commented out)
            # self.state = State(
            #     sched,
            #     logits,
            #     hidden_cpu,
            #     mm_out,
            # )
            # >>>>>>>
            return None

        def sample_tokens(self):
            # <<<<<<< ONP4001 conflict: NPU base: vllm_ascend NPUModelRunner.sample_tokens (kept)
            (sched, logits, attn_metadata, positions) = self.state
            # ======= omni GPU: vllm_omni GPUARModelRunner.sample_tokens (translated) (commented out)
            # (sched, logits, staged_cpu, mm_out, step_id) = self.state
            # >>>>>>>
            self.state = None
            {FENCE}
            return sched, positions, staged_cpu, mm_out, step_id
            {FENCE}
''')


def _run(code: str, cls: str):
    "The merged module run with the NPU import left out (the fixture's record is the module's own now)."
    ns = {}
    exec(compile("\n".join(l for l in code.splitlines() if not l.startswith("from vllm")), "<port>", "exec"), ns)
    obj = ns[cls]()
    obj.run = lambda sched: (10, {"layer": 1}, [0, 1])
    return ns, obj


def test_records_read_both_sides_fields_in_order_and_merge_npu_first_then_omni_extras(tmp_path):
    ix, omni = _sides(tmp_path)
    n, o = read_record(ix, "vllm_ascend.worker.model_runner_v1.State"), read_record(SymbolIndex([omni]), "vllm_omni.worker.gpu_gen.State")
    assert n.names == ["sched", "logits", "attn_metadata", "positions"] and n.kind == "namedtuple"
    assert o.names == ["sched", "logits", "hidden_cpu", "mm_out", "step_id"] and o.module == "vllm_omni.worker.gpu_ar"
    m, differ = merged_record(n, o)
    assert m.names == ["sched", "logits", "attn_metadata", "positions", "hidden_cpu", "mm_out", "step_id"]
    assert [f.default for f in m.fields[4:]] == ["None"] * 3 and all(f.default is None for f in m.fields[:4])
    assert differ == []   # `"Sched"` and `Sched` are one annotation


def test_a_record_both_sides_build_and_unpack_in_conflicts_becomes_one_class_built_by_keyword_and_unpacked_by_field(tmp_path):
    ix, omni = _sides(tmp_path)
    before = [d.code for d in ready_findings(AR, ix, "NPUAR") if d.level == "error" or d.code.startswith("ONP442")]
    assert "ONP4420" in before   # omni's names, bound only in the commented unpack: the module is not ready
    code, diags = merge_records(AR, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {},
                                "vllm_omni.npu.ar", {"vllm_omni.worker.gpu_ar": "vllm_omni.npu.ar"})
    assert [d.code for d in diags] == ["ONP4424", "ONP4453"] and "hidden_cpu, mm_out, step_id added" in diags[0].message
    assert "`Sched`" in diags[1].message   # the fixture's annotation type no source defines: said (issue 31)
    tree = ast.parse(code)
    assert "model_runner_v1 import State" not in code and "<<<<<<<" not in code
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "State")
    assert [b.id for b in cls.bases] == ["NamedTuple"]
    assert [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)] == ["sched", "logits", "attn_metadata", "positions", "hidden_cpu", "mm_out", "step_id"]
    build = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "State")
    assert not build.args and [k.arg for k in build.keywords] == ["sched", "logits", "attn_metadata", "positions", "hidden_cpu", "mm_out"]
    unpack = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple) and ast.unparse(n.value) == "self.state")
    assert [e.id for e in unpack.targets[0].elts] == ["sched", "logits", "attn_metadata", "positions", "staged_cpu", "mm_out", "step_id"]
    assert [d.code for d in ready_findings(code, ix, "NPUAR") if d.code.startswith("ONP442")] == []
    ns, r = _run(code, "NPUAR")
    r.execute_model("s")
    assert r.sample_tokens() == ("s", [0, 1], 11, {"audio": 10}, None)   # omni's names read by field, NPU's too


def test_a_positional_omni_build_is_named_by_omni_fields_and_a_sibling_module_imports_the_merged_record(tmp_path):
    ix, omni = _sides(tmp_path)
    gen = D(f'''
        from vllm_ascend.worker.model_runner_v1 import State


        class NPUGen:
            def execute_model(self, sched):
                logits, attn_metadata, positions = self.run(sched)
                {FENCE}
                self.state = State(sched, None, None, {{"audio": logits}})
                {FENCE}

            def sample_tokens(self):
                (sched, logits, attn_metadata, positions) = self.state
                return sched, logits, positions
    ''')
    code, diags = merge_records(gen, "NPUGen", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_gen"), ix, {},
                                "vllm_omni.npu.gen", {"vllm_omni.worker.gpu_ar": "vllm_omni.npu.ar", "vllm_omni.worker.gpu_gen": "vllm_omni.npu.gen"})
    assert "from vllm_omni.npu.ar import State" in code and "class State" not in code
    tree = ast.parse(code)
    build = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "State")
    kw = {k.arg: ast.unparse(k.value) for k in build.keywords}
    assert kw == {"sched": "sched", "logits": "None", "hidden_cpu": "None", "mm_out": "{'audio': logits}",
                  "attn_metadata": "attn_metadata", "positions": "positions"}   # omitted NPU fields: the locals of that name
    assert "1 build(s) by keyword, 1 unpack(s) by field" in diags[0].message
    unpack = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple)]
    assert [[e.id for e in u.targets[0].elts] for u in unpack if ast.unparse(u.value) == "self.state"] == [
        ["sched", "logits", "attn_metadata", "positions", "_hidden_cpu", "_mm_out", "_step_id"]]   # the merged order now
    merged = merge_records(AR, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "vllm_omni.npu.ar")[0]
    ns = {}
    exec(compile("\n".join(l for l in merged.splitlines() if not l.startswith("from vllm")), "<ar>", "exec"), ns)
    g = {"State": ns["State"]}
    exec(compile("\n".join(l for l in code.splitlines() if not l.startswith("from vllm")), "<gen>", "exec"), g)
    r = g["NPUGen"]()
    r.run = lambda sched: (3, {}, [7])
    r.execute_model("s")
    assert r.state.mm_out == {"audio": 3} and r.sample_tokens() == ("s", None, [7])


def test_an_unpack_giving_one_field_two_names_reads_by_field(tmp_path):
    ix, omni = _sides(tmp_path)
    code = AR.replace("# (sched, logits, staged_cpu, mm_out, step_id) = self.state", "# (sched, logits2, staged_cpu, mm_out, step_id) = self.state")
    assert code != AR
    out, _ = merge_records(code, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    assert "_state = self.state" in out and "logits2 = _state.logits" in out and "logits = _state.logits" in out


def test_a_record_both_sides_define_alike_is_left_as_it_is(tmp_path):
    ix, omni = _sides(tmp_path)
    code = D('''
        from vllm_ascend.worker.model_runner_v1 import Same


        class R:
            def f(self):
                self.s = Same(1, 2)
                a, b = self.s
                return a + b
    ''')
    out, diags = merge_records(code, "R", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    assert out == code and diags == []


def test_a_dataclass_gets_omni_fields_and_keyword_builds_and_a_class_only_one_side_defines_is_untouched(tmp_path):
    ix, omni = _sides(tmp_path)
    code = D('''
        from vllm_ascend.worker.model_runner_v1 import Out


        class R:
            def f(self):
                out = Out([1], [2])
                return out
    ''')
    out, diags = merge_records(code, "R", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    tree = ast.parse(out)
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Out")
    assert [ast.unparse(d) for d in cls.decorator_list] == ["dataclass"] and "from dataclasses import dataclass" in out
    build = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Out")
    assert [k.arg for k in build.keywords] == ["req_ids", "tokens"] and not build.args
    ns = {}
    exec(compile("\n".join(l for l in out.splitlines() if not l.startswith("from vllm")), "<p>", "exec"), ns)
    assert ns["R"]().f().mm is None
    # omni's module lacks the class: nothing to merge, whatever the NPU side defines
    lone = merge_records(code, "R", SimpleNamespace(tree=omni, module="vllm_omni.worker.nothing_here"), ix, {}, "m")
    assert lone == (code, [])


def test_shifted_arguments_of_a_build_are_no_rename_but_a_true_rename_still_is():
    from omni_npu_port.port.delta import name_renames
    st = lambda s: ast.parse(s).body[0]
    shifted = {0: (st("s = State(sched, logits, hidden, sample, positions)"), "names", st("s = State(sched, logits, common, hidden, sample)"))}
    assert name_renames(shifted, {"s", "sched", "logits", "hidden", "sample", "positions"}) == {}
    renamed = {0: (st("hidden_states = self.model(x)"), "names", st("model_output = self.model(x)"))}
    assert name_renames(renamed, {"hidden_states", "x"}) == {"model_output": "hidden_states"}


def test_an_omni_extra_field_whose_value_the_live_code_does_not_bind_is_passed_none_and_said(tmp_path):
    ix, omni = _sides(tmp_path)
    code = AR.replace("        hidden_cpu = logits + 1\n", "")
    assert code != AR   # the live code no longer binds omni's `hidden_cpu`
    out, diags = merge_records(code, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    build = next(n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "State")
    assert {k.arg: ast.unparse(k.value) for k in build.keywords}["hidden_cpu"] == "None"
    assert diags[0].level == "warning" and "passed None: hidden_cpu" in diags[0].message
    assert [d.code for d in ready_findings(out, ix, "NPUAR") if d.code.startswith("ONP442")] == []


def test_the_ready_check_reads_the_merged_record_the_module_defines(tmp_path):
    ix, omni = _sides(tmp_path)
    code, _ = merge_records(AR, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    bad = code.replace("self.state = None\n", "self.state = None\n        lost = self.kept.no_such_field\n").replace(
        "return None\n", "self.kept = State(sched=1, logits=2, attn_metadata=3, positions=4)\n        return None\n", 1)
    assert bad.count("no_such_field") == 1 and "self.kept = State" in bad
    found = [d for d in ready_findings(bad, ix, "NPUAR") if d.code == "ONP4423"]
    assert len(found) == 1 and "no_such_field" in found[0].message and "this module" in found[0].message
    assert [d for d in ready_findings(code, ix, "NPUAR") if d.code.startswith("ONP442")] == []


def test_a_merged_conflict_is_named_by_its_method_line_and_no_longer_counted_open(tmp_path):
    from omni_npu_port.port.records import merged_conflicts
    ix, omni = _sides(tmp_path)
    _, diags = merge_records(AR, "NPUAR", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")
    lines = AR.splitlines()
    def rel(fn):   # the open marker's line within its method, counted from the method's first line (as render numbers it)
        start = next(i for i, l in enumerate(lines) if l.strip().startswith(f"def {fn}("))
        return next(i for i in range(start, len(lines)) if "<<<<<<< ONP4001" in lines[i]) - start + 1
    assert merged_conflicts(diags) == {("execute_model", rel("execute_model")), ("sample_tokens", rel("sample_tokens"))}
    alike = D('''
        from vllm_ascend.worker.model_runner_v1 import Same


        class R:
            def f(self):
                self.s = Same(1, 2)
    ''')
    assert merged_conflicts(merge_records(alike, "R", SimpleNamespace(tree=omni, module="vllm_omni.worker.gpu_ar"), ix, {}, "m")[1]) == set()
