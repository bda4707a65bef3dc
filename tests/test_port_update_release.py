"""Issue 32: a release updated from the previous hand port (`port --release NEW --from PREV`), on the fixture stack
tests/fixtures/update (written for these tests; see its files' docstrings for what each side changed)."""
import ast
import contextlib
import io
import json
from pathlib import Path

import pytest

from omni_npu_port.core.errors import UsageError
from omni_npu_port.port.merge import keep_side
from omni_npu_port.port.update_release import (REPORT_JSON, REPORT_MD, MethodUpdate, Unit, decide_method, merge_units,
                                               pair_methods, previous_release, update_release)

FIX = Path(__file__).parent / "fixtures"
STACK, UPD = FIX / "generalize" / "stack", FIX / "update"
SOURCES = (str(STACK / "vllm"), str(STACK / "vllm_ascend"))
TARGET = "vllm-ascend==0.18.0"


def run_update(tmp, **kw):
    "The fixture update: nothing fetched (an empty cache, an index nobody answers)."
    return update_release(str(UPD / "omni_next"), str(UPD / "omni_prev"), target=TARGET, sources=SOURCES,
                          cache_dir=tmp / "cache", index="http://127.0.0.1:9/", **kw)


@pytest.fixture(scope="module")
def updated(tmp_path_factory):
    u = run_update(tmp_path_factory.mktemp("upd"))
    return u, u.port.runners[0], {m.name: m for m in u.methods}


def test_a_peoples_edit_and_the_new_gpu_change_both_land(updated):
    u, r, m = updated
    assert "self.npu_warmup(num_tokens)" in r.code and "self.last_num_tokens = num_tokens" in r.code
    assert m["_dummy_run"].how == "merged" and m["_dummy_run"].people >= 1 and m["_dummy_run"].gpu >= 1
    assert m["_dummy_run"].conflicts == 0
    dummy = r.code[r.code.index("def _dummy_run"):r.code.index("def npu_warmup")]
    assert "ONP4001" not in dummy and "set_forward_context(" not in dummy
    # omni imports `set_forward_context` through vllm's gpu_model_runner (a re-export): the tool's own ports of both
    # releases translate it (port_rules) and no longer conflict there
    for port in (u.base, u.fresh):
        assert port.conflicts == 0 and all("set_forward_context(" not in x.code for x in port.runners)


def test_a_rename_is_paired_by_body_and_keeps_the_peoples_edit(updated):
    u, r, m = updated
    assert "def _run_generation_model(self, ids):" in r.code and "def _run_generation(" not in r.code
    assert "outputs.to(torch.float32)" in r.code and "self.generated_steps += 1" in r.code
    assert m["_run_generation_model"].was == "_run_generation"
    assert any(d.code == "ONP4502" and "_run_generation_model" in d.message for d in r.diagnostics)


def test_unrelated_bodies_are_never_taken_for_a_rename():
    base = {"f": "def f(self, x):\n    a = self.model(x)\n    b = a + 1\n    return b\n"}
    new = {"g": "def g(self):\n    for k in self.requests:\n        self.cache.pop(k)\n    raise ValueError('no')\n"}
    rows = pair_methods(base, new, dict(base))
    assert rows == {"f": ["f", None, "f"], "g": [None, "g", None]}


def test_methods_added_and_removed_on_each_side(updated):
    u, r, m = updated
    assert "def npu_warmup" in r.code and "NPU_WARMUP_STEPS = 2" in r.code and m["npu_warmup"].how == "people-added"
    assert "def new_feature" in r.code and "torch.npu.Event()" in r.code and m["new_feature"].how == "new-port"
    assert "def stream_outputs" not in r.code and m["stream_outputs"].how == "removed-by-people"
    assert "def old_helper" not in r.code and m["old_helper"].how == "removed-by-new"
    assert "def profile_hook" not in r.code and m["profile_hook"].how == "removed-by-people"
    codes = {(d.code, d.where) for d in r.diagnostics}
    assert ("ONP4503", "profile_hook") in codes                  # removed by the people, changed by the new port
    assert ("ONP4503", "stream_outputs") not in codes and ("ONP4504", "old_helper") not in codes   # nothing to say
    assert "def __init__" not in r.code   # inherited by every side: never written


def test_a_method_the_new_port_drops_but_the_people_edited_is_kept():
    base = "def f(self):\n    return torch.npu.current_stream()\n"
    edited = "def f(self):\n    stream = torch.npu.current_stream()\n    return stream\n"
    m = MethodUpdate("R", "f", "")
    lines, diags = decide_method(m, base, None, edited, ("people", "new"), "comment", (set(), set()))
    assert m.how == "kept-by-people" and diags[0].code == "ONP4504"
    assert "    stream = torch.npu.current_stream()" in lines
    m = MethodUpdate("R", "f", "")
    assert decide_method(m, base, None, base, ("people", "new"), "comment", (set(), set())) == (None, [])


def test_a_peoples_edit_the_new_gpu_change_conflicts_with_parses_by_default(updated):
    u, r, m = updated
    assert u.conflicts == 1 and m["_update_states"].conflicts == 1 and m["_update_states"].how == "merged-inherited"
    ast.parse(r.code)                                        # the default form parses: the new port's side as comments
    live = keep_side(r.code)                                 # the people's side runs, as the NPU side does in a port
    assert "self.omni_outputs.pop(req_id, self.npu_default)" in live and "pop(req_id, [])" not in live
    assert "self.omni_outputs.pop(req_id, [])" in keep_side(r.code, 1)
    assert "self.finished = deque(scheduler_output.finished_req_ids)" in live   # the GPU change outside the conflict
    assert "from collections import deque" in r.code and any(d.code == "ONP4508" for d in r.diagnostics)
    line = next(d.line for d in r.diagnostics if d.code == "ONP4001")
    assert r.code.splitlines()[line - 1].lstrip().startswith("# <<<<<<< ONP4001") and r.compiles and not r.not_ready
    assert r.verdict == "unverified" and not r.ready   # not judged (the library's default): never called ready


def test_prefer_markers_writes_git_markers(tmp_path):
    u = run_update(tmp_path, prefer="markers")
    code = u.port.runners[0].code
    assert u.conflicts == 1 and "\n<<<<<<< " in code and not u.port.runners[0].compiles
    ast.parse(keep_side(code)); ast.parse(keep_side(code, 1))


def test_the_report_says_where_each_methods_lines_came_from(tmp_path):
    out = tmp_path / "out"
    u = run_update(tmp_path, out=out)
    doc = json.loads((out / REPORT_JSON).read_text())
    assert doc["update"]["from"] == "0.18.0" and doc["vllm_omni"] == "0.20.0" and doc["summary"]["conflicts"] == 1
    rows = {m["name"]: m for m in doc["update"]["methods"]}
    assert rows["_dummy_run"]["people"] >= 1 and rows["_dummy_run"]["gpu"] >= 1 and rows["npu_warmup"]["people"] == 3
    md = (out / REPORT_MD).read_text()
    assert "updated from 0.18.0" in md and "## Update from 0.18.0" in md
    assert "| OmniNPUModelRunner | _dummy_run | merged |" in md
    assert (out / u.port.runners[0].path).read_text() == u.port.runners[0].code
    with pytest.raises(Exception, match="--force"):
        run_update(tmp_path, out=out)   # an earlier report is never overwritten without force


def test_module_statements_merge_and_imports_are_not_made_twice():
    u = lambda k, text=None: Unit(k, [text or k])
    got, clash = merge_units([u("import a"), u("class")], [u("from x import A"), u("import b"), u("class")],
                             [u("import a"), u("from y import A"), u("class")])
    keys = [x.key for x in got]
    assert "import b" in keys and "from x import A" not in keys and keys[-1] == "class" and clash == []


def test_from_auto_picks_the_release_before(tmp_path):
    assert previous_release("0.20.0", tmp_path) == "0.18.0"
    (tmp_path / "vllm_omni-0.19.0-py3-none-any.whl").write_bytes(b"")   # a cached release the table lacks counts too
    assert previous_release("0.20.0", tmp_path) == "0.19.0"
    for v in ("0.14.0", None):
        with pytest.raises(UsageError, match="--from"):
            previous_release(v, tmp_path)


def test_cli_release_from(tmp_path):
    from omni_npu_port.cli.main import main
    out = tmp_path / "npu"
    args = ["port", "--release", str(UPD / "omni_next"), "--from", str(UPD / "omni_prev"), "--target", TARGET,
            "--source", *SOURCES, "-o", str(out)]
    with contextlib.redirect_stdout(o := io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(args)
    assert rc == 1 and "updated from vLLM-Omni 0.18.0 (given" in o.getvalue() and (out / REPORT_JSON).is_file()
    with contextlib.redirect_stderr(e := io.StringIO()):
        assert main(["port", "--from", "0.18.0"]) == 2
    assert "--from goes with --release" in e.getvalue()


def test_an_import_the_carried_code_needs_is_kept():
    from omni_npu_port.port.update_release import keep_imports, module_units
    people = '"doc"\nimport os\nimport torch\n\n\nclass R:\n    def f(self):\n        return os.getcwd()\n'
    merged = '"doc"\nimport torch\n\n\nclass R:\n    def f(self):\n        return os.getcwd()\n'   # `import os` dropped
    top_p, top_m = (module_units(t, "R", {"f": "f"})[0] for t in (people, merged))
    top, said = keep_imports(merged, "R", top_m, [top_p])
    assert [u.key for u in top][:3] == ["docstring", "import torch", "import os"] and said[0].code == "ONP4508"
    assert keep_imports(people, "R", top_p, [top_p]) == (top_p, [])   # everything bound: nothing added


def test_a_previous_release_that_is_not_older_is_refused_before_any_port(tmp_path, monkeypatch):
    from omni_npu_port.port import update_release as ur
    monkeypatch.setattr(ur, "port_release", lambda *a, **k: pytest.fail("ported before checking the releases"))
    with pytest.raises(UsageError, match="not older than"):
        ur.update_release(str(UPD / "omni_prev"), str(UPD / "omni_next"), target=TARGET, sources=SOURCES,
                          cache_dir=tmp_path / "cache", index="http://127.0.0.1:9/")


def test_an_import_kept_from_a_gpu_module_keeps_the_modules_line_numbers():
    "A multi-line import put back is one line per line: diagnostics after it still name their lines."
    from omni_npu_port.port.update_release import import_units, keep_imports, module_units
    gpu = "from collections.abc import (\n    Callable,\n    Sequence,\n)\n\n\nclass G:\n    pass\n"
    merged = "import torch\n\n\nclass R:\n    def f(self, ids):\n        return isinstance(ids, Sequence)\n"
    top, said = keep_imports(merged, "R", module_units(merged, "R", {"f": "f"})[0], [import_units(gpu)])
    added = next(u for u in top if "Sequence" in u.key)
    assert added.lines == ["from collections.abc import (", "    Callable,", "    Sequence,", ")"] and said


def test_the_updated_modules_are_judged_when_asked(tmp_path):
    u = run_update(tmp_path, judge=True)   # basedpyright is a dependency: it runs here
    assert u.port.runners and all(r.judge is not None and r.judge.judged for r in u.port.runners)
    assert all(r.verdict in ("yes", "no") for r in u.port.runners)
    assert all((r.verdict == "yes") == r.ready for r in u.port.runners)


def _git(repo, *args):
    import subprocess
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout


def _commit_state(repo, state, msg):
    "The checkout's files replaced by a fixture state's, committed (a history written for the test)."
    import shutil
    for p in repo.iterdir():
        if p.name != ".git": shutil.rmtree(p) if p.is_dir() else p.unlink()
    shutil.copytree(state, repo, dirs_exist_ok=True)
    _git(repo, "add", "-A"); _git(repo, "commit", "-qm", msg)


@pytest.fixture
def omni_repo(tmp_path):
    "A git checkout whose HEAD is the next release and whose parent commit is the previous one (with NPU runners)."
    repo = tmp_path / "omni"
    repo.mkdir(); _git(repo, "init", "-q", "-b", "main")
    _commit_state(repo, UPD / "omni_prev", "0.18.0: the NPU copy in step")
    _commit_state(repo, UPD / "omni_next", "0.20.0: the GPU runner moves on")
    return repo


def _tree_state(repo):
    "Every file of the checkout (the .git folder aside) with its bytes, and git's own status."
    files = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    return files, _git(repo, "status", "--porcelain")


def test_from_a_git_checkout_takes_its_parent_commit_and_leaves_the_working_tree(omni_repo, tmp_path, updated):
    (omni_repo / "notes.txt").write_text("the user's own, uncommitted\n")   # a dirty working tree stays as it is
    before = _tree_state(omni_repo)
    u = update_release(str(omni_repo), "auto", target=TARGET, sources=SOURCES, cache_dir=tmp_path / "cache",
                       index="http://127.0.0.1:9/")
    assert _tree_state(omni_repo) == before
    assert u.prev == "0.18.0" and u.prev_how.startswith("git: the parent of HEAD, commit ")
    assert u.port.runners[0].code == updated[1].code   # the same update as from the previous state's own folder
    said = next(d.message for d in u.port.diagnostics if d.code == "ONP4500")
    assert "git: the parent of HEAD" in said and "omni-npu-port-from-" not in said   # no temporary path named


def test_from_a_git_ref_takes_the_merge_base(omni_repo, tmp_path):
    _git(omni_repo, "branch", "-m", "main", "feature")
    _git(omni_repo, "branch", "main", "HEAD~1")              # main: the state the feature branch started from
    _git(omni_repo, "checkout", "-q", "main")
    (omni_repo / "CHANGES.txt").write_text("main moves on\n")
    _git(omni_repo, "add", "-A"); _git(omni_repo, "commit", "-qm", "main moves on")
    _git(omni_repo, "checkout", "-q", "feature")
    u = update_release(str(omni_repo), "main", target=TARGET, sources=SOURCES, cache_dir=tmp_path / "cache",
                       index="http://127.0.0.1:9/")
    assert u.prev == "0.18.0" and u.prev_how.startswith("git: the merge-base of HEAD and main, commit ")


def test_git_is_asked_only_for_a_checkout_and_a_ref_it_knows(omni_repo, tmp_path):
    from omni_npu_port.port.update_release import git_checkout, git_previous
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_checkout(plain) is None and git_previous(str(plain), "auto", tmp_path / "x") is None
    assert git_previous(str(omni_repo), "no-such-ref", tmp_path / "x") is None and not (tmp_path / "x").exists()
    with pytest.raises(UsageError, match="no-such-ref"):   # neither a ref, a path nor a version
        update_release(str(omni_repo), "no-such-ref", target=TARGET, sources=SOURCES, cache_dir=tmp_path / "cache",
                       index="http://127.0.0.1:9/")
    one = tmp_path / "one"
    one.mkdir(); _git(one, "init", "-q"); _commit_state(one, UPD / "omni_next", "only commit")
    with pytest.raises(UsageError, match="no parent of HEAD"):
        update_release(str(one), "auto", target=TARGET, sources=SOURCES, cache_dir=tmp_path / "cache",
                       index="http://127.0.0.1:9/")


def test_the_summary_counts_the_updates_methods_not_the_new_ports(updated, tmp_path):
    from omni_npu_port.port.update_release import update_summary
    u, r, m = updated
    text = "\n".join(update_summary(u))
    assert "method(s) ported" not in text and f"{len(u.methods)} method(s) updated (" in text
    assert "  OmniNPUModelRunner._dummy_run: merged: " in text and "people's" in text
    assert "  OmniNPUModelRunner._update_states: merged-inherited: " in text and "1 conflict(s)" in text
    unchanged = [x.name for x in u.methods if x.how == "merged" and not (x.people + x.gpu + x.ascend + x.conflicts)]
    assert all(f".{n}: " not in text for n in unchanged)   # a method no side changed gets no line
    assert u.to_json()["summary"]["methods"] == len(u.methods) > 0


# Conflicts settled by statements (ONP4510, ONP4511): a previous port, a new port that re-nests it (as a vllm-ascend
# upgrade does), and the people's edits of the previous port.
BASE = "def f(self, x):\n    a = self.prep(x)\n    b = self.model(a)\n    return b\n"
NESTED = "def f(self, x):\n    with self.ctx():\n        a = self.prep(x)\n        b = self.model(a)\n    return b\n"


def _merged(new, people):
    m = MethodUpdate("R", "f", "merged")
    lines, diags = decide_method(m, BASE, new, people, ("people", "new"), "comment", (set(), set()))
    return "\n".join(lines) + "\n", m, {d.code for d in diags}


def test_a_peoples_statement_is_carried_onto_the_new_ports_rewrite_of_its_lines():
    people = "def f(self, x):\n    a = self.prep(x)\n    b = self.model(a)\n    self.record(b)\n    return b\n"
    code, m, codes = _merged(NESTED, people)
    assert code == ("def f(self, x):\n    with self.ctx():\n        a = self.prep(x)\n        b = self.model(a)\n"
                    "        self.record(b)\n    return b\n")       # after the statement it followed, at its new depth
    assert "ONP4511" in codes and "ONP4001" not in codes and m.conflicts == 0 and m.people >= 1 and m.gpu >= 1
    deleted = "def f(self, x):\n    b = self.model(x)\n    return b\n"   # the people's rewrite of two statements
    code, m, codes = _merged(NESTED, deleted)
    assert "self.prep" not in code and "        b = self.model(x)" in code and "with self.ctx():" in code


def test_a_peoples_edit_of_statements_the_new_port_changed_too_stays_a_conflict():
    people = "def f(self, x):\n    a = self.prep(x)\n    b = self.model(a, npu=True)\n    return b\n"
    new = NESTED.replace("self.model(a)", "self.model2(a)")
    code, m, codes = _merged(new, people)
    assert m.conflicts == 1 and "ONP4001" in codes and "ONP4511" not in codes
    assert "    b = self.model(a, npu=True)" in keep_side(code) and "self.model2(a)" in keep_side(code, 1)


def test_a_conflict_whose_peoples_side_is_only_relaid_out_takes_the_new_side():
    from omni_npu_port.port.merge import Hunk
    from omni_npu_port.port.update_release import settle_conflicts
    base, new = ["    a = g(x, y)"], ["    a = h(x)", "    b = a + 1"]
    layout = Hunk("conflict", [], omni=new, npu=["    a = g(x,  # wrapped", "          y)"], base=base)
    edited = Hunk("conflict", [], omni=new, npu=["    a = g(x, z)"], base=base)   # a real edit, on a changed line
    hunks, settled = settle_conflicts([layout, edited])
    assert hunks[0].kind == "omni" and hunks[0].lines == new and settled[0][0] == "ONP4510"
    assert hunks[1] is edited and len(settled) == 1


def test_a_future_import_stays_first_when_the_new_port_adds_an_import_beside_it():
    from omni_npu_port.port.update_release import RunnerSides, update_runner
    cls = "\n\nclass R:\n    def f(self):\n        return os.getcwd(), torch.ones(1)\n"
    base = '"""doc"""\nimport torch\n' + cls
    people = '"""doc"""\nfrom __future__ import annotations\nimport torch\n' + cls
    new = '"""doc"""\nimport os\nimport torch\n' + cls
    code, _, _ = update_runner("R", RunnerSides((base, "R"), (people, "R"), (new, "R")))
    compile(code, "R", "exec")   # `from __future__` after another import would not compile
    assert code.index("from __future__") < code.index("import os") < code.index("import torch")
    code, _, _ = update_runner("R", RunnerSides((base, "R"), (people.replace("from __future__ import annotations\n",
                                                                              "import sys\n"), "R"), (new, "R")))
    assert code.index("import os") < code.index("import sys")   # no future import: the merge's order stands


FLAT_BASE = ["    if x:", "        y = self.g(x)", "    return y"]
FLAT_NEW = ["    y = self.g(x)", "    return y"]          # the new port takes the statement out of its block


def test_a_statement_the_people_put_after_a_block_is_placed_by_its_sibling():
    from omni_npu_port.port.update_release import carry_edits
    after_block = ["    if x:", "        y = self.g(x)", "    self.log(y)", "    return y"]
    lines, own = carry_edits(FLAT_BASE, FLAT_NEW, after_block)
    assert lines == ["    y = self.g(x)", "    self.log(y)", "    return y"] and own == ["    self.log(y)"]
    in_block = ["    if x:", "        y = self.g(x)", "        self.log(y)", "    return y"]   # a sibling of `y = ...`
    assert carry_edits(FLAT_BASE, FLAT_NEW, in_block)[0] == ["    y = self.g(x)", "    self.log(y)", "    return y"]
    nested = ["    if x:", "        y = self.g(x)", "        if y:", "            self.log(y)", "    return y"]
    assert carry_edits(FLAT_BASE, FLAT_NEW, nested)[0][1:3] == ["    if y:", "        self.log(y)"]


def test_a_settled_conflict_that_would_not_compile_is_written_as_the_conflict():
    base = "def f(self, x):\n    if x:\n        y = self.g(x)\n    return y\n"
    people = "def f(self, x):\n    if x:\n        y = self.g(x)\n    self.log(y)\n    return y\n"
    new = "def f(self, x):\n    y = self.g(x)\n    return y\n"   # the conflict's region ends before `return y`
    m = MethodUpdate("R", "f", "merged")
    lines, diags = decide_method(m, base, new, people, ("people", "new"), "comment", (set(), set()))
    compile("\n".join(lines) + "\n", "f", "exec")
    assert m.conflicts == 1 and "ONP4511" not in {d.code for d in diags} and "    self.log(y)" in lines


def test_a_folder_the_previous_commit_lacks_is_an_input_error_naming_it(tmp_path):
    from omni_npu_port.core.errors import InputError
    from omni_npu_port.port.update_release import git_previous
    repo = tmp_path / "repo"
    repo.mkdir(); _git(repo, "init", "-q")
    (repo / "README").write_text("before the omni checkout was added\n")
    _git(repo, "add", "-A"); _git(repo, "commit", "-qm", "first")
    import shutil
    shutil.copytree(UPD / "omni_next", repo / "omni")
    _git(repo, "add", "-A"); _git(repo, "commit", "-qm", "omni added")
    with pytest.raises(InputError, match=r"git archive of .*:omni .*give --from PREV as a path"):
        git_previous(str(repo / "omni"), "auto", tmp_path / "prev")
    got = git_previous(str(repo / "omni"), "HEAD", tmp_path / "same")   # a ref: the merge-base, HEAD itself here
    assert got and (Path(got[0]) / "vllm_omni" / "_version.py").is_file() and "merge-base of HEAD and HEAD" in got[1]


# ---- names NEW no longer defines (ONP4520-ONP4525)

def _names_index(tmp_path):
    "NEW's omni, written for the test: `Record` moved from core.cache to core.records; `Pool` stays in core.cache."
    from omni_npu_port.sources.readers import open_source_spec
    from omni_npu_port.sources.symbols import SymbolIndex
    for f, text in {"__init__.py": "", "core/__init__.py": "", "core/records.py": "class Record:\n    pass\n",
                    "core/cache.py": "class Pool:\n    pass\n"}.items():
        (tmp_path / "vllm_omni" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm_omni" / f).write_text(text)
    return SymbolIndex([open_source_spec(str(tmp_path))])


def test_a_carried_import_new_no_longer_defines_takes_the_new_ports_or_is_said(tmp_path):
    from omni_npu_port.port.update_release import import_units, imported_names, module_units, retarget_imports
    ix = _names_index(tmp_path)
    people = ("import numpy\nfrom vllm_omni.core.cache import Pool, Record\nfrom vllm_omni.core.cache import Gone\n"
              "from vllm_omni.core.cache import Unused\n\n\nclass R:\n    def f(self) -> Gone:\n"
              "        return Pool(), Record(), numpy\n")
    top = module_units(people, "R", {"f": "f"})[0]
    new_top = import_units("from vllm_omni.core.records import Record\n")
    got, said = retarget_imports(people, top, new_top, ix)
    imports = [" ".join(u.lines) for u in got if imported_names(u) is not None]
    assert imports == ["import numpy", "from vllm_omni.core.records import Record",
                       "from vllm_omni.core.cache import Pool", "from vllm_omni.core.cache import Gone"]
    assert [(d.code, d.message.split("`")[1]) for d in said] == [("ONP4520", "Record"), ("ONP4522", "Gone"),
                                                                 ("ONP4521", "Unused")]
    assert said[1].severity == "error"


def test_carried_imports_that_resolve_in_new_are_left_alone(tmp_path):
    from omni_npu_port.port.update_release import import_units, module_units, retarget_imports
    ix = _names_index(tmp_path)
    people = ("import numpy\nfrom vllm_omni.core.cache import Pool\nfrom vllm_omni.core.records import Record\n"
              "from . import sibling\n\n\nclass R:\n    def f(self):\n        return Pool(), Record(), sibling\n")
    top = module_units(people, "R", {"f": "f"})[0]
    assert retarget_imports(people, top, import_units("import numpy\n"), ix) == (top, [])
    assert retarget_imports(people, top, [], None) == (top, [])   # no sources to ask: nothing changed


def test_a_name_only_an_annotation_reads_gets_its_import_back():
    from omni_npu_port.port.update_release import keep_imports, module_units
    side = "from __future__ import annotations\nfrom collections.abc import Sequence\n\n\nclass G:\n    pass\n"
    merged = ("from __future__ import annotations\nimport torch\n\n\nclass R:\n"
              "    def f(self, ids: Sequence[int]) -> None:\n        torch.ones(1)\n")
    top = module_units(merged, "R", {"f": "f"})[0]
    got, said = keep_imports(merged, "R", top, [module_units(side, "G", {})[0]])
    assert "from collections . abc import Sequence" in [u.key for u in got] and said[0].code == "ONP4508"
    bound = merged.replace("import torch\n", "import torch\nfrom collections.abc import Sequence\n")
    top = module_units(bound, "R", {"f": "f"})[0]
    assert keep_imports(bound, "R", top, [module_units(side, "G", {})[0]]) == (top, [])


def test_a_record_defined_twice_keeps_the_one_the_code_builds():
    from omni_npu_port.port.update_release import one_definition
    record = lambda fields: "class State(NamedTuple):\n" + "".join(f"    {f}: int\n" for f in fields) + "\n\n"
    use = "class R:\n    def f(self):\n        a, b, c = State(1, 2, 3)\n        return a\n"
    head = "from typing import NamedTuple\n\n\n"
    for first, last in ((("a", "b", "c"), ("a",)), (("a",), ("a", "b", "c"))):   # the fitting one first, then last
        code, said, _ = one_definition(head + record(first) + record(last) + use, "R", None)
        assert code.count("class State") == 1 and "    c: int" in code and said[0].code == "ONP4525"
    once = head + record(("a", "b", "c")) + use
    assert one_definition(once, "R", None) == (once, [], [])


def test_a_judged_call_that_does_not_bind_takes_the_new_ports_call_and_is_judged_again():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import retake_judged
    ours = "class R:\n    def f(self, n):\n        self.drafter.run(n, old=1)\n        return n\n"
    new = "class R:\n    def f(self, n):\n        self.drafter.run(\n            n,\n            k=n,\n        )\n"
    finding = NS(code="ONP4442", line=3, column=29, where="R.f", message='No parameter named "old"')
    note = NS(code="ONP4511", line=4, where="f")
    r = NS(code=ours, cls="R", diagnostics=[note, finding], not_ready=[],
           judge=NS(judged=True, port=[finding], excluded=[]))
    again = []
    got = retake_judged([r], NS(runners=[NS(code=new)]), None, lambda: again.append(1) or ["judged again"])
    assert got == ["judged again"] and again == [1] and "self.drafter.run(\n            n,\n" in r.code
    assert "old=1" not in r.code and finding not in r.diagnostics and note.line == 7   # its line moved down
    assert any(d.code == "ONP4523" for d in r.diagnostics)


def test_judge_findings_that_are_no_call_of_the_people_leave_the_module_as_it_is():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import retake_judged
    ours = "import gone\n\n\nclass R:\n    def f(self, n):\n        return gone.run(n)\n"
    other = NS(code="ONP4444", line=1, column=8, where="<module>")
    r = NS(code=ours, cls="R", diagnostics=[other], not_ready=[], judge=NS(judged=True, port=[other], excluded=[]))
    assert retake_judged([r], NS(runners=[NS(code=ours)]), None, lambda: pytest.fail("judged again")) is None
    assert r.code == ours and r.diagnostics == [other]


def test_the_fixture_update_raises_no_name_code(updated):
    "The fixture's carried imports all resolve in the next release, and it defines nothing twice."
    u, r, _ = updated
    assert not [d.code for r in u.port.runners for d in r.diagnostics if d.code.startswith("ONP452")]


def test_a_call_the_new_port_makes_the_same_or_a_type_finding_is_not_retaken():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import retake_calls
    code = "class R:\n    def f(self, n):\n        self.drafter.run(n, old=1)\n        return self.model.go(n)\n"
    same = NS(code="ONP4442", line=3, column=29, where="R.f", message='No parameter named "old"')
    typed = NS(code="ONP4442", line=4, column=16, where="R.f", message='Object of type "Tensor" is not callable')
    assert retake_calls(code, "R", code, [same, typed]) == (code, [], [])


def _gpu_double(module_text):
    "A double of `Inherited` (a release's omni GPU runner): its module text, no methods of its own."
    from types import SimpleNamespace as NS
    return NS(cls=NS(module_text=module_text), name="OmniGPURunner", names=lambda: [], text=lambda n: None,
              like=lambda text, skip: None)


def test_update_runner_takes_news_gpu_modules_import_for_a_name_moved_not_prevs(tmp_path):
    "`Record` moved to core.records in NEW; PREV's GPU module still imports the old place, NEW's the new one."
    from omni_npu_port.port.update_release import RunnerSides, update_runner
    ix = _names_index(tmp_path)
    mod = lambda imports, body: f"{imports}\n\n\nclass R:\n    def f(self):\n{body}"
    base = mod("import numpy", "        return numpy\n")
    people = mod("import numpy\nfrom vllm_omni.core.cache import Record", "        return numpy, Record()\n")
    new = mod("import numpy\nimport os", "        return numpy, os\n")
    gpu = (_gpu_double("from vllm_omni.core.cache import Record\n"),
           _gpu_double("from vllm_omni.core.records import Record\n"))
    code, diags, _ = update_runner("R", RunnerSides((base, "R"), (people, "R"), (new, "R"), gpu=gpu), names=ix)
    assert "from vllm_omni.core.records import Record" in code and "core.cache" not in code
    assert [d.code for d in diags if d.code.startswith("ONP452")] == ["ONP4520"]
    code, diags, _ = update_runner("R", RunnerSides((base, "R"), (people, "R"), (new, "R"), gpu=gpu))   # no sources
    assert "from vllm_omni.core.cache import Record" in code and not [d for d in diags if d.code.startswith("ONP452")]


def test_a_new_call_that_reads_a_name_the_update_does_not_bind_is_not_taken():
    from types import SimpleNamespace as NS
    from omni_npu_port.port.update_release import retake_calls
    ours = "class R:\n    def f(self, n):\n        self.drafter.run(n, old=1)\n        return n\n"
    new = "class R:\n    def f(self, n):\n        meta = self.meta()\n        self.drafter.run(n, meta=meta)\n"
    finding = NS(code="ONP4442", line=3, column=29, where="R.f", message='No parameter named "old"')
    code, said, moved = retake_calls(ours, "R", new, [finding])
    assert code == ours and moved == [] and [d.code for d in said] == ["ONP4524"]
