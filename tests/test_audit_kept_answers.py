"""Issue 33: the audit's derived pass writes what it asked of vllm's names back into the kept answers: the store a port
and `translate` keep in the judge cache, with the same bound (`ANSWERS_MOST` of each kind). Fixtures:
tests/fixtures/derived's vllm / vllm_ascend doubles as wheels in tmp, a private judge cache and package cache."""
import ast
import json
from types import SimpleNamespace as NS

import pytest

from fixture_wheels import DERIVED, derived_wheels, private_derived
from omni_npu_port.port import derived_check as DC
from omni_npu_port.translate import derived as D

FX = DERIVED
FIRES = (FX / "gpu_fires.py").read_text()


@pytest.fixture
def kept(tmp_path, monkeypatch):
    "Two wheels in a private package cache, a private judge cache, no index of this process left over."
    private_derived(monkeypatch, tmp_path)
    pkgs = tmp_path / "pkgs"
    pkgs.mkdir()
    monkeypatch.setattr(D, "CACHE_DIR", pkgs)
    return derived_wheels(pkgs)


def _copy(text: str, name: str = "OmniRunner"):
    "An NPU runner class as the audit finds it (module, text, name, node)."
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == name)
    return NS(module="vllm_omni.npu_runner", text=text, name=name, node=node)


def _answers(vllm, ascend) -> dict:
    "The answers kept for the two archives, as the next run reads them."
    return DC.archive_store([vllm, ascend], "answers")[0]() or {}


def test_the_audit_writes_what_it_asked_into_the_kept_answers(kept):
    vllm, ascend = kept
    assert _answers(vllm, ascend) == {}
    got = DC.audit_derived([_copy(FIRES)], NS(vllm_ascend="0.1.0", vllm="0.1.0"))   # the target's rules, as audit()
    assert got and {d.code for d in got} == {"ONP2056"}
    body = _answers(vllm, ascend)
    assert sum(map(len, body.values())) > 0                                 # kept
    D._INDEXES.clear()
    ix = DC.kept_index(vllm, ascend)                                        # the next run reads them back
    assert {k: set(t) for k, t in ix.answers.items()} == {k: set(t) for k, t in body.items()} and not ix.learned
    assert DC.audit_derived([_copy(FIRES)], ix) == got and not ix.learned   # answered, nothing new to keep


def test_an_index_without_a_store_keeps_nothing_until_one_is_asked_for(kept):
    vllm, ascend = kept
    ix = D.index_for(vllm, ascend)                                          # a caller that keeps no answers
    assert DC.audit_derived([_copy(FIRES)], ix) and ix.learned
    assert _answers(vllm, ascend) == {}                                     # must not: no store, nothing written
    assert DC.kept_index(vllm, ascend) is ix and ix.answers_store is not None   # the same index, given the store
    assert ix.keep_answers() and _answers(vllm, ascend)                     # what it learned before is kept too


def test_the_kept_answers_keep_their_bound(kept, monkeypatch):
    vllm, ascend = kept
    monkeypatch.setattr(D, "ANSWERS_MOST", 1)
    DC.audit_derived([_copy(FIRES)], NS(vllm_ascend="0.1.0", vllm="0.1.0"))
    body = _answers(vllm, ascend)
    assert body and all(len(t) <= 1 for t in body.values())                 # the newest one of each kind
    assert len(json.dumps(body)) < 4096
