"""`omni-npu-port audit` as the update's diff (issue 32): on the update fixtures (tests/fixtures/update: a previous
release with its hand NPU runner, a next release whose GPU runner changed; the stack tests/fixtures/generalize/stack),
and the pieces on small texts written here. Nothing is fetched."""
import json
import shutil
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.port.audit import (DRIFT_CODES, Change, audit, audit_target, by_method, conflict_view, method_at,
                                      method_keys, own_edits, stream, update_changes)
from omni_npu_port.port.locate import open_tree

FIX = Path(__file__).parent / "fixtures"
UPD, STACK = FIX / "update", FIX / "generalize" / "stack"
SOURCES = (str(STACK / "vllm"), str(STACK / "vllm_ascend"))
NPU_FILE = "vllm_omni/platforms/npu/worker/npu_model_runner.py"


def run_audit(tmp, gpu, npu, prev=None):
    return audit(str(gpu), str(npu), str(prev or npu), sources=SOURCES, cache_dir=tmp / "cache",
                 index="http://127.0.0.1:9/")


@pytest.fixture(scope="module")
def lagging(tmp_path_factory):
    "The previous release's NPU copy against the next release's GPU runners."
    found = run_audit(tmp_path_factory.mktemp("a"), UPD / "omni_next", UPD / "omni_prev")
    return found, [f for f in found if f.code in DRIFT_CODES]


def line_of(text: str, fragment: str) -> int:
    return next(i for i, l in enumerate(text.splitlines(), 1) if fragment in l)


def test_a_copy_in_step_with_its_own_release_has_no_drift(tmp_path):
    found = run_audit(tmp_path, UPD / "omni_prev", UPD / "omni_prev")
    assert [f for f in found if f.code in DRIFT_CODES] == []
    assert [f.code for f in found if f.severity != "info"] == []
    assert found[0].code == "ONP4124" and "vllm-ascend 0.18.0" in found[0].message


def test_each_gpu_side_change_is_a_finding_at_the_copys_line(lagging):
    found, drift = lagging
    text = (UPD / "omni_prev" / NPU_FILE).read_text()
    got = {(f.code, f.method) for f in drift}
    assert ("ONP4120", "_dummy_run") in got and ("ONP4120", "new_feature") in got     # a line and a method added
    assert ("ONP4122", "old_helper") in got                                            # a method the GPU side dropped
    assert ("ONP4123", "_update_states") in got                                        # both changed one line
    dummy = next(f for f in drift if f.method == "_dummy_run")
    assert dummy.detail == ["+ self.last_num_tokens = num_tokens"]
    assert dummy.line == line_of(text, "self.talker_ids[:num_tokens].zero_()")          # the line it follows
    assert dummy.path.endswith(NPU_FILE) and dummy.column == 1
    conflict = next(f for f in drift if f.code == "ONP4123")
    assert conflict.line == line_of(text, "self.omni_outputs.pop(req_id, self.npu_default)")
    assert conflict.detail == ["+ self.omni_outputs.pop(req_id, [])", "- self.omni_outputs.pop(req_id, self.npu_default)"]


def test_a_renamed_method_is_reported_on_the_copys_name(lagging):
    found, drift = lagging
    ren = [f for f in drift if f.method == "_run_generation"]
    assert {f.code for f in ren} == {"ONP4120", "ONP4121"}      # the def line changes, a line added
    assert not any(f.method == "_run_generation_model" for f in drift)


def test_the_copys_own_work_is_no_drift(lagging):
    found, drift = lagging
    assert not any(f.method == "npu_warmup" for f in drift)                # a method only the copy has
    assert not any("npu_warmup(num_tokens)" in " ".join(f.detail) for f in drift)   # its own line in _dummy_run
    left = [f for f in found if f.method == "profile_hook"]
    assert [(f.code, f.severity) for f in left] == [("ONP4127", "info")]   # removed by the copy: stays out, a note


def test_a_change_the_copy_already_made_is_no_finding(tmp_path):
    copy = tmp_path / "omni_copy"
    shutil.copytree(UPD / "omni_prev", copy)
    f = copy / NPU_FILE
    f.write_text(f.read_text().replace("        self.talker_ids[:num_tokens].zero_()\n",
                                       "        self.talker_ids[:num_tokens].zero_()\n"
                                       "        self.last_num_tokens = num_tokens\n"))
    drift = [x for x in run_audit(tmp_path, UPD / "omni_next", copy, UPD / "omni_prev") if x.code in DRIFT_CODES]
    assert not any(x.method == "_dummy_run" for x in drift)
    assert any(x.method == "new_feature" for x in drift)                      # the rest still lags


def test_the_diff_pieces_on_small_texts():
    npu = "class R:\n    def f(self, x):\n        y = npu(x)  # the copy's\n\n        return y\n"
    upd = "class R:\n    def f(self, x):\n        y = npu(x)\n        log(y)\n        return y\n"
    assert update_changes(npu, npu) == [] and update_changes(npu, npu.replace("# the copy's", "# another")) == []
    [c] = update_changes(npu, upd)
    assert (c.kind, c.line, c.update, c.at) == ("add", 3, ["        log(y)"], 4)
    [c] = update_changes(upd, npu)
    assert (c.kind, c.line, c.npu) == ("remove", 4, ["        log(y)"])
    assert [c.kind for c in update_changes(npu, npu.replace("npu(x)", "npu(x, 2)"))] == ["change"]
    conflicted = upd.replace("        log(y)\n", "        # <<<<<<< ONP4001 conflict: people (kept)\n        log(y)\n"
                             "        # ======= new (commented out)\n        # log(y, 1)\n        # >>>>>>>\n")
    [c] = update_changes(upd, conflicted)
    assert (c.kind, c.line, c.npu, c.update) == ("conflict", 4, ["        log(y)"], ["        log(y, 1)"])


def test_a_conflict_block_that_does_not_close_is_read_as_it_is():
    lines = ["def f(self):", "    # <<<<<<< ONP4001 conflict: people (kept)", "    x = 1"]
    assert conflict_view(lines) == (lines, {})


def test_a_hunk_across_two_methods_splits_into_a_removal_and_an_add():
    npu = "class R:\n    def a(self):\n        return 1\n"
    upd = "class R:\n    def b(self):\n        return 2\n"
    [c] = update_changes(npu, upd)
    parts = by_method(c, method_at(npu), method_at(upd))
    assert [(p.kind, p.npu, p.update) for p in parts] == [("remove", ["    def a(self):", "        return 1"], []),
                                                          ("add", [], ["    def b(self):", "        return 2"])]
    assert by_method(c, method_at(npu), method_at(upd), {"b": "a"}) == [c]   # a rename the update paired: one change
    same = Change("change", 3, ["        return 1"], ["        return 3"], 3, [3], [3])
    assert by_method(same, method_at(npu), method_at(npu)) == [same]


def test_the_target_comes_from_the_sources_never_the_profile_where_they_state_one():
    prev = open_tree(str(UPD / "omni_prev"))
    assert audit_target(None, prev, None, SOURCES).asked == "0.18.0"             # a vllm-ascend source given
    t = audit_target(None, prev)
    assert "vLLM-Omni 0.18.0" in t.origin and t.asked == "0.18.0rc1"             # the copy's release pairing
    assert audit_target("0.18.0", prev).origin == "--target"


def test_cli_exit_codes_and_formats(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("omni_npu_port.sources.fetch.CACHE_DIR", tmp_path / "cache")
    base = ["audit", "--source", *SOURCES, "--from", str(UPD / "omni_prev")]
    assert main(base + ["--gpu", str(UPD / "omni_prev")]) == 0
    capsys.readouterr()
    assert main(base + ["--gpu", str(UPD / "omni_next"), "--npu", str(UPD / "omni_prev")]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert NPU_FILE in first and ": ONP41" in first and first.split(NPU_FILE)[1].split(":")[2] == "1"   # path:line:col
    assert main(base + ["--gpu", str(UPD / "omni_next"), "--npu", str(UPD / "omni_prev"), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert any(r["code"] == "ONP4120" and r["line"] and r["path"].endswith(NPU_FILE) for r in rows)
    assert main(base + ["--gpu", str(UPD / "omni_next"), "--npu", str(UPD / "omni_prev"), "--output-format",
                        "sarif"]) == 1
    sarif = json.loads(capsys.readouterr().out)
    assert any(r["ruleId"] == "ONP4123" for r in sarif["runs"][0]["results"])
    assert main(base + ["--gpu", str(UPD / "omni_next"), "--npu", str(UPD / "omni_prev"), "--output-format",
                        "github"]) == 1
    assert "::warning file=" in capsys.readouterr().out


def test_cli_without_gpu_is_usage(capsys):
    assert main(["audit"]) == 2


def test_a_method_the_gpu_runner_added_is_owed_only_where_the_copy_does_not_inherit_it(tmp_path):
    from omni_npu_port.port.audit import new_methods
    from omni_npu_port.port.runners import ClassGraph
    from omni_npu_port.sources.symbols import SymbolIndex
    pkg = tmp_path / "vllm_omni"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "gpu.py").write_text("class OmniGPURunner:\n    def step(self):\n        return 1\n\n\n"
                                "class GPUARRunner(OmniGPURunner):\n    def load_model(self):\n        return 2\n")
    (pkg / "npu.py").write_text("from vllm_omni.gpu import GPUARRunner, OmniGPURunner\n\n\n"
                                "class NPUARRunner(OmniGPURunner):\n    def step(self):\n        return 3\n\n\n"
                                "class NPUARKept(GPUARRunner):\n    pass\n")
    tree = open_tree(str(tmp_path))
    graph = ClassGraph(SymbolIndex([tree]))
    cls = lambda name: graph.cls("vllm_omni.npu", next(n for n in tree.module_ast("vllm_omni.npu").body
                                                        if getattr(n, "name", "") == name))
    new = {"load_model": None, "step": None}
    assert new_methods({"step": None}, new, cls("NPUARRunner"), graph, "GPUARRunner") == ["load_model"]   # fires
    assert new_methods({"step": None}, new, cls("NPUARKept"), graph, "GPUARRunner") == []     # inherits it: none
    assert new_methods({"step": None, "load_model": None}, new, cls("NPUARRunner"), graph, "GPUARRunner") == []  # not new


def _omni_release(tmp_path: Path, version: str, version_py: str | None) -> Path:
    "A vLLM-Omni release dir stating `version` (dist-info), with or without a version.py tying vllm to its line."
    root = tmp_path / f"omni-{version}-{abs(hash(version_py))}"
    (root / "vllm_omni").mkdir(parents=True)
    (root / "vllm_omni" / "__init__.py").write_text("")
    (root / f"vllm_omni-{version}.dist-info").mkdir()
    (root / f"vllm_omni-{version}.dist-info" / "METADATA").write_text(f"Name: vllm-omni\nVersion: {version}\n")
    if version_py is not None: (root / "vllm_omni" / "version.py").write_text(version_py)
    return root


def test_a_release_the_table_lacks_is_ported_on_what_its_own_files_state(tmp_path):
    ("A release candidate no table row or package text pairs (as vLLM-Omni 0.23.0rc1): its version.py ties vllm to its "
     "own line, so both ports and NEW's vllm are that line's, never the profile's; with no such file, the profile's.")
    cache = tmp_path / "cache"   # empty: no release's imports are read, the files alone decide
    rule = "# Warn if vllm and vllm-omni versions don't match (major.minor).\n"
    states = open_tree(str(_omni_release(tmp_path, "0.22.0rc9", rule)))
    t = audit_target(None, states, states, cache_dir=cache)
    assert t.vllm.startswith("0.22.") and t.asked.startswith("0.22.")
    assert "0.22.0rc9's own files: its version.py requires vllm's major.minor" in t.origin
    silent = open_tree(str(_omni_release(tmp_path, "0.22.0rc9", None)))
    assert audit_target(None, silent, silent, cache_dir=cache).origin.startswith("the profile")
    warns = open_tree(str(_omni_release(tmp_path, "0.22.0rc9", "import warnings\n")))   # a version.py with no rule
    assert audit_target(None, warns, warns, cache_dir=cache).origin.startswith("the profile")
    assert audit_target("0.18.0", states, states, cache_dir=cache).origin == "--target"


def test_an_omni_edit_in_vllms_words_is_still_omnis_rule_31():
    prev = "def _dummy_sampler_run(self, h) -> None:\n    logger.warning('stub')\n    return None\n"
    new = prev.replace("-> None", "-> torch.Tensor").replace("return None", "return torch.tensor([])")
    vllm = "def _dummy_sampler_run(self, h):\n    if not self.last:\n        return torch.tensor([])\n"
    vllm = stream(method_keys(vllm))
    # fires: omni replaced a line of its own; vllm's method happens to have the new text; the copy kept the old line
    assert "return torch . tensor ( [ ] )" in own_edits(prev, new, stream(method_keys(prev)), vllm)
    # must not fire: the copy has the new lines, or the replaced line was vllm's (omni re-synced its copy of vllm's)
    assert own_edits(prev, new, stream(method_keys(new)), vllm) == []
    resync = own_edits("def f(self):\n    return torch.empty(0)\n", "def f(self):\n    return torch.tensor([])\n", "",
                       stream(["return torch . empty ( 0 )", "return torch . tensor ( [ ] )"]))
    assert resync == []
    assert own_edits(prev, prev, stream(method_keys(prev)), vllm) == []   # the GPU method did not change
