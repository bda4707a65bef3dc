"""A warm `port --release` (issue 31, speed): what a second port of the same inputs would compute again is kept by
content in the judge cache's `derived/` folder and read back — the inputs' `name = value,` statements (the tuples
pass) and the derived checks of the written modules — with the same findings; a changed input or written module is
checked anew, never served a stale result; a folder source is never kept. And the Markdown report says the pairing's
evidence once. Fixtures: tests/fixtures/derived's tiny vllm / vllm_ascend trees, zipped here into wheels."""
from types import SimpleNamespace

import pytest

from fixture_wheels import DERIVED, FIRES, QUIET, derived_wheels, private_derived
from omni_npu_port.core.catalog import OmniPairing
from omni_npu_port.port import derived_check as DC
from omni_npu_port.port import ready as R
from omni_npu_port.port.locate import port_diagnostic
from omni_npu_port.port.release_report import release_markdown, release_summary
from omni_npu_port.sources import evidence  # noqa: F401  (registers ONP4471)
from omni_npu_port.translate import derived as D

FX = DERIVED


@pytest.fixture
def cache(tmp_path, monkeypatch):
    "A private judge cache; the derived checks and the tuples' parses counted."
    private_derived(monkeypatch, tmp_path)
    checked, parsed = [], []
    check, tuples = DC.check_module, R.self_tuples
    monkeypatch.setattr(DC, "check_module", lambda code, *a, **k: (checked.append(code), check(code, *a, **k))[1])
    monkeypatch.setattr(R, "self_tuples", lambda text: (parsed.append(text), tuples(text))[1])
    return SimpleNamespace(checked=checked, parsed=parsed, folder=tmp_path / "cache" / "derived", tmp=tmp_path)


# --- the inputs' tuples ---------------------------------------------------------------------------------------------

WRITTEN = "def f(desc):\n    x = g(desc=desc)\n    desc = desc,\n    return x\n"
HAS_IT, LACKS_IT = "def h(desc):\n    desc = desc,\n", "def h(desc):\n    return g(desc=desc)\n"


def _tuples(inputs):
    return R.stray_tuples(WRITTEN, inputs, "R", DC.archive_store([], "tuples", *[t for t in inputs if t]))


def test_the_inputs_tuples_are_kept_and_read_back(cache):
    first = _tuples([LACKS_IT, None])
    assert [d.code for d in first] == ["ONP4538"] and LACKS_IT in cache.parsed   # fires: no input has it
    cache.parsed.clear()
    again = _tuples([LACKS_IT, None])
    assert again == first and cache.parsed == [WRITTEN]   # the input read back, only the written module parsed


def test_a_changed_input_is_read_anew_never_the_kept_answer(cache):
    assert [d.code for d in _tuples([LACKS_IT])] == ["ONP4538"]
    cache.parsed.clear()
    assert _tuples([HAS_IT]) == [] and HAS_IT in cache.parsed   # must not fire: the new input has it, read anew
    cache.parsed.clear()
    assert [d.code for d in _tuples([LACKS_IT])] == ["ONP4538"] and cache.parsed == [WRITTEN]


def test_a_kept_entry_that_is_no_list_of_keys_is_found_anew(cache):
    store = DC.archive_store([], "tuples", LACKS_IT)
    store[1]({"not": "keys"})
    assert R.input_tuples([LACKS_IT], store) == set() and LACKS_IT in cache.parsed
    assert store[0]() == []   # and kept again as found


# --- the written modules' derived checks ----------------------------------------------------------------------------

def _sources(cache):
    return derived_wheels(cache.tmp)


def _ports(code):
    return [SimpleNamespace(module="pkg.npu_runner", code=code, path="pkg/npu_runner.py", not_ready=[])]


def test_the_written_modules_checks_are_kept_and_read_back(cache):
    vllm, ascend = _sources(cache)
    first = _ports(FIRES)
    DC.check_ports(first, vllm, ascend, [[QUIET]])
    assert first[0].derived.port and cache.checked == [FIRES]   # fires: the written module has findings
    D._INDEXES.clear(); cache.checked.clear()
    again = _ports(FIRES)
    DC.check_ports(again, vllm, ascend, [[QUIET]])
    assert cache.checked == [] and D._INDEXES == {}   # read back: no check, no index
    assert again[0].derived == first[0].derived and again[0].not_ready == first[0].not_ready
    assert again[0].derived.to_json() == first[0].derived.to_json()


def test_a_changed_written_module_or_input_is_checked_anew(cache):
    vllm, ascend = _sources(cache)
    DC.check_ports(_ports(FIRES), vllm, ascend, [[QUIET]])
    cache.checked.clear()
    quiet = _ports(QUIET)
    DC.check_ports(quiet, vllm, ascend, [[QUIET]])
    assert cache.checked == [QUIET] and quiet[0].derived.port == []   # must not fire: the new text checked
    cache.checked.clear()
    inherits = _ports(FIRES)
    DC.check_ports(inherits, vllm, ascend, [[FIRES]])   # an input that has the same findings: inherited now
    assert cache.checked == [FIRES] and inherits[0].derived.port == [] and inherits[0].derived.inherited


def test_a_folder_source_is_never_kept(cache):
    DC.check_ports(_ports(FIRES), FX / "vllm", FX / "ascend", [[QUIET]])
    cache.checked.clear()
    DC.check_ports(_ports(FIRES), FX / "vllm", FX / "ascend", [[QUIET]])
    assert cache.checked == [FIRES]   # checked again: a checkout changes in place


def test_a_kept_body_of_another_shape_is_checked_anew(cache):
    vllm, ascend = _sources(cache)
    ports = _ports(FIRES)
    DC.written_store(ports, vllm, ascend, [[QUIET]])[1]([{"port": [{"no_such_field": 1}], "inherited": []}])
    DC.check_ports(ports, vllm, ascend, [[QUIET]])
    assert cache.checked == [FIRES] and ports[0].derived.port
    assert DC.kept_checks([1, 2], 1) is None and DC.kept_checks(["x"], 1) is None


# --- the report's evidence, once ------------------------------------------------------------------------------------

def _report(evidence, diagnostics):
    return SimpleNamespace(omni="0.24.0rc1", origin="/c/omni.whl", vllm_ascend="0.23.0.post1", vllm="0.24.0",
                           history=[], layout="l", layout_from="f", runners=[], methods=0, compiles=True, conflicts=0,
                           lost=0, seconds=1.0, skipped=[], diagnostics=diagnostics,
                           pairing=OmniPairing("0.24.0rc1", "0.24.0", ("0.23.0.post1",), evidence, True))


def test_the_markdown_report_says_the_evidence_once():
    why = "its 18 vllm-ascend imports fit vllm-ascend 0.13.0rc2 … 0.23.0.post1: the newest taken"
    note = port_diagnostic("ONP4471", f"a release behind: vllm-ascend 0.23.0.post1, vllm 0.24.0: {why}")
    md = release_markdown(_report(f"inferred: {why}", [note]))
    assert md.count(why) == 1 and "the evidence is ONP4471's line under Diagnostics" in md   # fires: a note says it
    assert release_summary(_report(f"inferred: {why}", [note]))[0].endswith(why)   # the terminal's summary keeps it
    alone = release_markdown(_report(f"inferred: {why}", []))
    assert alone.count(why) == 1 and "under Diagnostics" not in alone   # must not: no line says it, the summary does
