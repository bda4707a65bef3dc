"""`translate` reads the derived index of its target from the judge cache where a run kept it (issue 34: each run
scanned vllm-ascend's sources again, ~2 s of CPU): the same findings, no scan; nothing read or kept without the
derived rules or the target's sources. Fixtures written here."""
import zipfile
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.cli.translate import kept_target_index
from omni_npu_port.translate import derived as D
from omni_npu_port.translate.rules import compile_rules

FX = Path(__file__).parent / "fixtures" / "derived"   # small vllm and vllm-ascend trees, written for these tests
T18 = "vllm-ascend==0.18.0"
GPU = "import torch\nfrom vllm.v1.worker.gpu_model_runner import GPUModelRunner\ntorch.cuda.synchronize()\n"


@pytest.fixture
def judge_cache(tmp_path, monkeypatch):
    "A judge cache of this test's own and no index built in this process yet."
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(D, "_INDEXES", {})
    return tmp_path / "cache"


def _check(tmp_path, capsys) -> str:
    "The findings `translate --check` prints for the fixture, translated anew (no kept translation answers it)."
    (tmp_path / "runner.py").write_text(GPU)
    assert main(["translate", str(tmp_path / "runner.py"), "--check", "-q", "--target", T18, "--no-cache"]) == 1
    return capsys.readouterr().out


@pytest.fixture
def fixture_target(tmp_path, monkeypatch):
    ("The fixture trees as the target's sources, vllm-ascend's as a wheel (only an archive's index is kept): "
     "a scan of a few modules, not of the real release (~4 s of CPU).")
    wheel = tmp_path / "vllm_ascend-0.18.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for f in sorted((FX / "ascend").rglob("*.py")): z.write(f, f.relative_to(FX / "ascend").as_posix())
    monkeypatch.setattr(D, "target_sources", lambda rules: (wheel, FX / "vllm"))
    return wheel


def test_a_second_run_reads_the_kept_index_and_finds_the_same(tmp_path, capsys, judge_cache, fixture_target,
                                                              monkeypatch):
    first = _check(tmp_path, capsys)
    assert [p.suffix for p in (judge_cache / "derived").iterdir()] == [".json"]   # the scan, kept
    monkeypatch.setattr(D, "_INDEXES", {})                                      # a new run, as a new process
    def no_scan(self): raise AssertionError("scanned again: the kept index was not read")
    monkeypatch.setattr(D.DerivedIndex, "_scan_all", no_scan)
    assert _check(tmp_path, capsys) == first and " ONP2040 " in first   # a derived finding (the NPU twin), the same


def test_nothing_is_read_or_kept_without_the_derived_rules_or_the_sources(judge_cache, monkeypatch):
    rules = compile_rules(T18)
    assert kept_target_index(rules) is None and not judge_cache.exists()        # the derived rules are off
    rules.derived = True
    monkeypatch.setattr(D, "target_sources", lambda rules: None)                # the cache lacks the target's sources
    assert kept_target_index(rules) is None and not judge_cache.exists()


@pytest.fixture
def loads(tmp_path, monkeypatch, judge_cache):
    "The (vllm, vllm-ascend) pairs whose index a run loads through the kept store (the fixture trees as the target's)."
    from omni_npu_port.port import derived_check as DC
    got, real = [], DC.kept_index
    monkeypatch.setattr(D, "target_sources", lambda rules: (FX / "ascend", FX / "vllm"))
    def kept_index(vllm, ascend):   # a load: the index not yet made in this process
        if (str(ascend), str(vllm)) not in D._INDEXES: got.append((vllm, ascend))
        return real(vllm, ascend)
    monkeypatch.setattr(DC, "kept_index", kept_index)
    return got


def test_a_run_whose_files_cannot_hold_a_derived_finding_loads_no_index(tmp_path, loads):
    (tmp_path / "plain.py").write_text("import os\nx = os.path.join('a', 'b')\n")
    assert main(["translate", str(tmp_path / "plain.py"), "--check", "-q", "--target", T18]) == 0
    assert loads == []                                          # neither read from the cache nor scanned


def test_a_run_with_a_file_that_can_loads_the_index_once_through_the_kept_store(tmp_path, capsys, loads):
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "runner.py").write_text(GPU)
    (tmp_path / "other.py").write_text(GPU.replace("synchronize", "empty_cache"))
    assert main(["translate", str(tmp_path), "--check", "-q", "--target", T18]) == 1
    assert loads == [(FX / "vllm", FX / "ascend")]            # once: the second file finds it made
    assert " ONP2049 " not in capsys.readouterr().out           # the index was there for both


def test_the_parent_loads_the_index_before_a_fork_only_where_a_file_sent_needs_it(loads):
    rules = compile_rules(T18)
    from omni_npu_port.port.derived_check import kept_index
    rules.derived, rules.index_source = True, lambda vllm, ascend: kept_index(vllm, ascend)   # the double above
    D.index_before_fork(rules, [b"x = 1\n", b"y = 2\n"])
    assert loads == []
    D.index_before_fork(rules, [b"x = 1\n", GPU.encode()])
    assert len(loads) == 1
    rules.derived = False
    D.index_before_fork(rules, [GPU.encode()])
    assert len(loads) == 1                                      # the derived rules off: nothing loaded


def test_derived_check_says_no_sources_before_it_loads_and_loads_only_for_a_file_that_can_find(loads, monkeypatch):
    rules = compile_rules(T18)
    rules.index_source = lambda vllm, ascend: loads.append((vllm, ascend)) or D.index_for(vllm, ascend)
    assert D.derived_check("x = 1\n", rules) == [] and loads == []   # sources, a file that cannot find: no index
    monkeypatch.setattr(D, "target_sources", lambda rules: None)
    assert D.derived_check("x = 1\n", rules) is None and loads == []   # no sources: None, as before
