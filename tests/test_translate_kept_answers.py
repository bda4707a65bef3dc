"""The derived index's answers about vllm names kept across runs (issue 33, the CLI's cold cost): a later run reads
them and parses no vllm module for a name asked before (the same findings); a name not asked before is answered anew
and kept; a changed archive or code is a new key (never a stale answer); a damaged entry is asked anew; only the
cache's own files are written; what is kept is bounded; a pool process's answers reach its parent.
Fixtures: tests/fixtures/derived's tiny vllm / vllm_ascend trees (written for the derived rules), zipped here."""
import json
import zipfile
from pathlib import Path

import pytest

from fixture_wheels import DERIVED, FIRES, QUIET, derived_wheels, fixture_wheel, private_derived
from omni_npu_port.port import derived_check as DC
from omni_npu_port.translate import derived as D

FX = DERIVED


@pytest.fixture
def two(tmp_path, monkeypatch):
    "Two wheels, a private judge cache, no index of this process left over; the vllm modules an index reads, listed."
    private_derived(monkeypatch, tmp_path)
    parsed, real = [], D.DerivedIndex._binding
    def binding(self, module, name):   # how a vllm module binds a name: its module parsed (once per index)
        parsed.append(module)
        return real(self, module, name)
    monkeypatch.setattr(D.DerivedIndex, "_binding", binding)
    vllm, ascend = derived_wheels(tmp_path)
    return vllm, ascend, parsed, tmp_path / "cache" / "derived"


def _found(ix, text=FIRES) -> list:
    "Every finding of `text`, as (code, line, column, message)."
    return [(f.diagnostic.code, f.diagnostic.line, f.diagnostic.column, f.diagnostic.message)
            for f in D.derived_check(text, ix) or []]


def _answers(folder: Path) -> dict:
    "The body of the one answers entry in the judge cache's folder (the entry with a `symbol` table)."
    bodies = [json.loads(p.read_text())["body"] for p in folder.glob("*.json")]
    got = [b for b in bodies if isinstance(b, dict) and "symbol" in b]
    assert len(got) == 1
    return got[0]


def _new_run():
    "What a new process starts with: no index held."
    D._INDEXES.clear()


def test_a_later_run_reads_the_answers_and_parses_no_vllm_module(two):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(vllm, ascend)
    first = _found(ix)
    assert parsed and any(c == "ONP2042" for c, *_ in first) and ix.keep_answers()   # vllm read, answers kept
    assert "[\"vllm.utils.cuda_seed\"]" in _answers(folder)["symbol"]
    _new_run(); parsed.clear()
    ix = DC.kept_index(vllm, ascend)
    assert _found(ix) == first and parsed == []          # the same findings, no vllm module parsed
    assert not ix.keep_answers()                         # nothing new learned: nothing written


def test_a_name_not_asked_before_is_answered_anew_and_kept(two):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(vllm, ascend)
    _found(ix); ix.keep_answers()
    _new_run(); parsed.clear()
    ix = DC.kept_index(vllm, ascend)
    got = _found(ix, "from vllm.graphs import GraphWrapper\n")
    assert [c for c, *_ in got] == ["ONP2042"] and "vllm.graphs" in parsed   # not kept: asked of vllm's source
    assert ix.keep_answers() and "[\"vllm.graphs.GraphWrapper\"]" in _answers(folder)["symbol"]
    assert "[\"vllm.utils.cuda_seed\"]" in _answers(folder)["symbol"]      # the earlier answers stay


def test_a_changed_archive_is_a_new_key_never_a_stale_answer(two, tmp_path):
    vllm, ascend, parsed, folder = two
    text = "from vllm.utils import cuda_seed, not_there\n"
    ix = DC.kept_index(vllm, ascend)
    assert [c for c, *_ in _found(ix, text)] == ["ONP2042", "ONP2041"]   # not_there: missing in the target's vllm
    ix.keep_answers()
    _new_run()
    fixture_wheel(FX / "vllm", vllm, {"vllm/utils_more.py": "x = 1\n"})   # the same path, another content
    text2 = text.replace("vllm.utils import", "vllm.utils_more import")
    ix = DC.kept_index(vllm, ascend)
    assert [c for c, *_ in _found(ix, text2)] == ["ONP2041", "ONP2041"]  # the new module, read: neither name in it
    _new_run()
    (tmp_path / "utils.py").write_text((FX / "vllm" / "vllm" / "utils.py").read_text() + "\nnot_there = 1\n")
    fixture_wheel(FX / "vllm", vllm, {"vllm/utils.py": (tmp_path / "utils.py").read_text()})
    with zipfile.ZipFile(vllm) as z: assert b"not_there" in z.read("vllm/utils.py")
    ix = DC.kept_index(vllm, ascend)
    assert [c for c, *_ in _found(ix, text)] == ["ONP2042"]             # now defined: the old answer not served


def test_another_code_fingerprint_is_another_key(two, monkeypatch):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(vllm, ascend)
    first = _found(ix); ix.keep_answers()
    _new_run(); parsed.clear()
    monkeypatch.setattr(DC, "code_fingerprint", lambda: "another version of this code")
    assert _found(DC.kept_index(vllm, ascend)) == first and parsed   # the same findings, asked anew


def test_a_damaged_entry_is_asked_anew(two):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(vllm, ascend)
    first = _found(ix); ix.keep_answers()
    path = next(p for p in folder.glob("*.json") if "symbol" in json.loads(p.read_text())["body"])
    entry = json.loads(path.read_text())
    for key in entry["body"]["symbol"]: entry["body"]["symbol"][key] = [1, 2]          # not (code, message)
    entry["body"]["members"] = "not a table"
    entry["body"]["other kind"] = {"[]": 1}
    path.write_text(json.dumps(entry))
    _new_run(); parsed.clear()
    ix = DC.kept_index(vllm, ascend)
    assert _found(ix) == first and parsed                  # the bad answers dropped, asked again: the same findings
    assert "other kind" not in ix.answers and ix.keep_answers()
    assert all(isinstance(v, (list, type(None))) and (v is None or isinstance(v[0], str))
               for v in _answers(folder)["symbol"].values())   # written anew, good


def test_only_its_own_files_are_written(two, tmp_path):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(vllm, ascend)
    _found(ix)
    key = DC.archive_key([vllm, ascend], "answers")
    target = tmp_path / "not-the-cache.json"
    target.write_text("theirs")
    (folder / f"{key}.json").symlink_to(target)          # the answers' path is a link: never written through
    foreign = folder / "notes.txt"
    foreign.write_text("someone's")
    ix.keep_answers()
    assert target.read_text() == "theirs" and foreign.read_text() == "someone's"
    assert (folder / f"{key}.json").is_symlink()


def test_what_is_kept_is_bounded(two, monkeypatch):
    vllm, ascend, parsed, folder = two
    monkeypatch.setattr(D, "ANSWERS_MOST", 2)
    ix = DC.kept_index(vllm, ascend)
    _found(ix)
    assert len(ix.answers["symbol"]) > 2 and ix.keep_answers()
    body = _answers(folder)
    assert all(len(t) <= 2 for t in body.values())
    assert list(body["symbol"]) == list(ix.answers["symbol"])[-2:]   # the newest


def test_a_pool_process_answers_reach_the_parent(two, monkeypatch):
    vllm, ascend, parsed, folder = two
    rules = type("Rules", (), {"derived": True})()
    monkeypatch.setattr(D, "target_sources", lambda r: (ascend, vllm))
    ix = DC.kept_index(vllm, ascend)
    _found(ix, QUIET)
    ix.learned.clear()                                     # the parent's own, kept before the pool
    _found(ix)                                             # what a process of the pool learns, then sends
    sent = D.send_learned(rules)
    assert sent["symbol"] and not ix.learned
    for table in ix.answers.values(): table.clear()        # the parent: without them
    D.take_learned(rules, json.loads(json.dumps(sent)))   # as they cross the pipe: JSON data
    assert ix.learned and D.keep_learned(rules)
    assert set(sent["symbol"]) <= set(_answers(folder)["symbol"])


def test_a_folder_source_keeps_no_answers(two, tmp_path):
    vllm, ascend, parsed, folder = two
    ix = DC.kept_index(FX / "vllm", ascend)                # vllm as a folder: its content changes in place
    _found(ix)
    assert ix.answers_store is None and not ix.keep_answers()
    assert not any("symbol" in json.loads(p.read_text())["body"] for p in folder.glob("*.json"))
