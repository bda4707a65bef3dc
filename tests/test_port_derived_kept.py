"""The derived pass's index and its inputs' findings kept on disk (issue 31, speed): a second port of the same archives
reads them back (no vllm-ascend module scanned, the same findings); a changed archive or input is built anew; a folder
source is never kept; a corrupt entry is rebuilt, a foreign file left alone, the folder bounded.
Fixtures: tests/fixtures/derived's tiny vllm / vllm_ascend trees, zipped here into wheels."""
import zipfile

import pytest

from fixture_wheels import DERIVED, FIRES, QUIET, derived_wheels, fixture_wheel, private_derived
from omni_npu_port.port import derived_check as DC
from omni_npu_port.translate import derived as D

FX = DERIVED


@pytest.fixture
def kept(tmp_path, monkeypatch):
    "Two wheels, a private judge cache, no index of this process left over; the scans counted."
    private_derived(monkeypatch, tmp_path)
    scans, scan = [], D.DerivedIndex._scan
    monkeypatch.setattr(D.DerivedIndex, "_scan", lambda self, m, t: (scans.append(m), scan(self, m, t)))
    vllm, ascend = derived_wheels(tmp_path)
    return vllm, ascend, scans, tmp_path / "cache" / "derived"


def _findings(ix, text=FIRES):
    return DC.finding_keys(D.derived_check(text, ix) or [], text)


def test_a_second_port_of_the_same_archives_reads_the_kept_index(kept):
    vllm, ascend, scans, folder = kept
    built = _findings(DC.kept_index(vllm, ascend))
    assert scans and built and len(list(folder.glob("*.json"))) == 1   # scanned, some findings, kept
    D._INDEXES.clear(); scans.clear()
    ix = DC.kept_index(vllm, ascend)
    assert scans == [] and ix._nodes == {}                             # nothing scanned: the state read back
    assert _findings(ix) == built and _findings(ix, QUIET) == set()   # the same findings, a class's node read on need


def test_the_inputs_findings_are_kept_with_the_index(kept):
    vllm, ascend, scans, folder = kept
    first: dict = {}
    DC.warm_derived(vllm, ascend, [FIRES, QUIET], first)
    assert first[FIRES] and first[QUIET] == set() and len(list(folder.glob("*.json"))) == 3   # index, answers, inputs
    D._INDEXES.clear(); scans.clear()
    again: dict = {}
    DC.warm_derived(vllm, ascend, [QUIET, FIRES], again)
    assert again == first and scans == [] and D._INDEXES == {}        # read back: no index needed at all


def test_a_changed_archive_or_input_is_built_anew(kept, tmp_path):
    vllm, ascend, scans, folder = kept
    DC.warm_derived(vllm, ascend, [FIRES], {})
    D._INDEXES.clear(); scans.clear()
    changed = tmp_path / "changed"
    for f in (FX / "ascend").rglob("*.py"):
        (changed / f.relative_to(FX / "ascend")).parent.mkdir(parents=True, exist_ok=True)
        (changed / f.relative_to(FX / "ascend")).write_bytes(f.read_bytes())
    (changed / "vllm_ascend" / "extra.py").write_text("class NPUExtra:\n    pass\n")
    fixture_wheel(changed, ascend)                                            # the same path, another content
    memo: dict = {}
    DC.warm_derived(vllm, ascend, [FIRES], memo)
    assert "vllm_ascend.extra" in scans and memo[FIRES]                # scanned again, with the new module
    D._INDEXES.clear(); scans.clear()
    other = FIRES + "\nx = 1\n"
    DC.warm_derived(vllm, ascend, [other], memo)
    assert scans == [] and memo[other] == memo[FIRES]                  # a new input: found anew on the kept index
    assert len(list(folder.glob("*.json"))) == 7   # two indexes, their two sets of answers, three sets of inputs


def test_a_folder_source_is_never_kept(kept):
    _, _, scans, folder = kept
    assert DC.derived_key(FX / "vllm", FX / "ascend", "index") is None
    DC.warm_derived(FX / "vllm", FX / "ascend", [FIRES], {})
    assert scans and not folder.exists()


def test_the_index_is_kept_by_its_vllm_ascend_archive_a_vllm_folder_reads_it(kept):
    "The scan reads vllm-ascend alone (issue 34): a port given a vllm folder reads the index; an ascend folder never."
    vllm, ascend, scans, folder = kept
    assert _findings(DC.kept_index(FX / "vllm", FX / "ascend")) and scans and not folder.exists()   # folders: not kept
    D._INDEXES.clear(); scans.clear()
    built = _findings(DC.kept_index(FX / "vllm", ascend))                # vllm a folder, vllm-ascend an archive: kept
    assert scans and len(list(folder.glob("*.json"))) == 1
    D._INDEXES.clear(); scans.clear()
    assert _findings(DC.kept_index(vllm, ascend)) == built and scans == []   # read back, whichever vllm reads it


def test_a_corrupt_entry_is_rebuilt_and_a_foreign_file_left_alone(kept, monkeypatch):
    vllm, ascend, scans, folder = kept
    built = _findings(DC.kept_index(vllm, ascend))
    entry = next(folder.glob("*.json"))
    foreign = folder / "notes.txt"
    foreign.write_text("mine\n")
    for bad in ('{"format": "another tool", "key": "x", "body": {}}', "not json",
                entry.read_text().replace('"names"', '"nameless"')):
        entry.write_text(bad)
        D._INDEXES.clear(); scans.clear()
        assert _findings(DC.kept_index(vllm, ascend)) == built and scans   # ignored: built anew
        assert '"names"' in entry.read_text()                              # and kept again
    monkeypatch.setattr(DC, "KEPT_DERIVED", 1)
    DC.warm_derived(vllm, ascend, [FIRES, QUIET], {})                      # a second entry: the oldest goes
    assert len(list(folder.glob("*.json"))) == 1 and not entry.exists()
    assert foreign.read_text() == "mine\n"                                 # not this tool's: left alone


def test_an_archives_class_heads_are_kept_and_a_folders_never(kept, tmp_path):
    from omni_npu_port.port import runners
    from omni_npu_port.sources.readers import open_source
    *_, folder = kept
    omni = fixture_wheel(FX.parent / "release" / "omni", tmp_path / "vllm_omni-0.1.0-py3-none-any.whl")
    read, real = [], type(open_source(omni, "vllm_omni")).module_source
    def found(src):
        tree = open_source(src, "vllm_omni")
        tree.module_source = lambda m: (read.append(m), real(tree, m))[1]
        runners.class_heads(tree, DC.archive_store([src], "class heads"))   # as port_release reads them
        return runners._deriving_modules(tree, {"GPUModelRunner"}, lambda w: False)
    first = found(omni)
    assert first and read and len(list(folder.glob("*.json"))) == 1   # read, found, kept
    read.clear()
    assert found(omni) == first and read == []                        # a new tree of the same archive: nothing read
    (tmp_path / "x").mkdir(); changed = fixture_wheel(FX.parent / "release" / "omni", tmp_path / "x" / omni.name)
    with zipfile.ZipFile(changed, "a") as z: z.writestr("vllm_omni/extra.py", "class Extra(GPUModelRunner): pass\n")
    assert found(changed) == sorted([*first, "vllm_omni.extra"]) and read   # another archive: read anew
    read.clear()
    assert DC.archive_store([FX.parent / "release" / "omni"], "class heads") is None   # a folder: never kept
    assert found(FX.parent / "release" / "omni") == first and read
    assert len(list(folder.glob("*.json"))) == 2
