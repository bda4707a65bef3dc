"""`translate` reads the derived index of its target from the judge cache where a run kept it (issue 34: each run
scanned vllm-ascend's sources again, ~2 s of CPU): the same findings, no scan; nothing read or kept without the
derived rules or the target's sources. Fixtures written here."""
import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.cli.translate import kept_target_index
from omni_npu_port.translate import derived as D
from omni_npu_port.translate.rules import compile_rules

T18 = "vllm-ascend==0.18.0"
GPU = "import torch\nfrom vllm.v1.worker.gpu_model_runner import GPUModelRunner\ntorch.cuda.synchronize()\n"


@pytest.fixture
def judge_cache(tmp_path, monkeypatch):
    "A judge cache of this test's own and no index built in this process yet."
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(D, "_INDEXES", {})
    return tmp_path / "cache"


def _check(tmp_path, capsys) -> str:
    "The findings `translate --check` prints for the fixture."
    (tmp_path / "runner.py").write_text(GPU)
    assert main(["translate", str(tmp_path / "runner.py"), "--check", "-q", "--target", T18]) == 1
    return capsys.readouterr().out


def test_a_second_run_reads_the_kept_index_and_finds_the_same(tmp_path, capsys, judge_cache, monkeypatch):
    if D.target_sources(compile_rules(T18)) is None: pytest.skip(f"the package cache lacks {T18}'s sources")
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
