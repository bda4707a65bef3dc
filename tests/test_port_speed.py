"""`port --release` speed (issue 31): the same results from less work — the tree's class heads read once, vllm's
GPU-worded identifiers collected only where a line can hold one, the runners' workers forked before anything starts
a thread, and what needs no ported runner done while they port. Fixtures: tests/fixtures/{derived,release}/."""
import os
import threading
from pathlib import Path

import pytest

from omni_npu_port.core.io import can_fork
from omni_npu_port.port import release as rel
from omni_npu_port.port import runners
from omni_npu_port.port.derived_check import check_ports, warm_derived
from omni_npu_port.sources.readers import open_source
from omni_npu_port.translate import derived
from omni_npu_port.translate.derived import DerivedIndex

FX = Path(__file__).parent / "fixtures"


def test_the_class_heads_are_read_once_per_tree_for_any_leaves(monkeypatch):
    tree = open_source(FX / "release" / "omni", "vllm_omni")
    fresh = open_source(FX / "release" / "omni", "vllm_omni")
    read = []
    real = type(tree).module_source
    monkeypatch.setattr(type(tree), "module_source", lambda self, m: (read.append((id(self), m)), real(self, m))[1])
    gpu = runners.deriving_modules(tree, {"GPUModelRunner"})
    both = runners.deriving_modules(tree, {"GPUModelRunner", "NPUModelRunner"})
    mine = [m for i, m in read if i == id(tree)]
    assert gpu and len(mine) == len(set(mine))   # each module read once for both searches
    runners._HEADS.pop(fresh, None)
    assert runners._deriving_modules(fresh, {"GPUModelRunner"}, lambda w: False) == gpu
    assert runners._deriving_modules(fresh, {"GPUModelRunner", "NPUModelRunner"}, lambda w: False) == both
    assert runners.deriving_modules(tree, {"NoSuchRunner"}) == []   # the heads shared, the search its own


def test_vllm_words_are_those_of_the_whole_text():
    src = FX / "derived"
    ix = DerivedIndex(open_source(src / "vllm", "vllm"), open_source(src / "ascend", "vllm_ascend"))
    whole = {w for m in ix.vllm.modules() for w in derived._GPU_WORD.findall(ix.vllm.module_source(m) or "")}
    assert ix.vllm_words() == whole and whole   # the fixture names GPU words: the rule fires
    assert list(derived._gpu_lines("x = 1\ny = 2\n")) == []   # and where no line holds one, nothing is read


def test_warm_derived_leaves_what_check_ports_reads():
    omni = 'import torch\n\ndef run(device):\n    if device.type == "cuda":\n        return torch.device("cuda", 0)\n'
    memo: dict = {}
    warm_derived(FX / "derived" / "vllm", FX / "derived" / "ascend", [omni], memo)
    assert memo[omni]   # omni's own finding, kept by its text
    memo[omni] = set()   # what check_ports reads is the memo: an input now without findings inherits none
    class P: code, path, not_ready = omni, "x.py", []
    check_ports([P], FX / "derived" / "vllm", FX / "derived" / "ascend", [[omni]], memo)
    assert P.derived.port and not P.derived.inherited


def _pid_job(i):
    return os.getpid()


def test_the_workers_fork_before_meanwhile_starts_a_thread(monkeypatch, forks_alone):
    if not forks_alone: return   # another thread runs here (an earlier test's): it ran, and passed, in a child pytest
    monkeypatch.setattr(rel, "port_runner", _pid_job)   # the forked workers inherit it
    stop, seen, started = threading.Event(), [], []
    def meanwhile():   # starts a thread, as the judge's server does: nothing may fork after it
        started.append(threading.Thread(target=stop.wait, daemon=True))
        started[-1].start()
        seen.append(can_fork())
    try: pids = rel.port_runners([(0,), (1,), (2,)], 2, meanwhile)
    finally:
        stop.set()
        for t in started: t.join()   # no thread of this test outlives it
    assert seen == [False] and len(pids) == 3 and os.getpid() not in pids   # ported in the workers all the same


def test_ported_here_meanwhile_runs_first(monkeypatch):
    order = []
    monkeypatch.setattr(rel, "port_runner", lambda i: order.append(i) or i)
    assert rel.port_runners([(0,), (1,)], 1, lambda: order.append("meanwhile")) == [0, 1]
    assert order == ["meanwhile", 0, 1]
