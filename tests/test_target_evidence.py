"""The target of a vLLM-Omni checkout from its own evidence (issue 31 part 4): its docs and requirements, and the
vllm-ascend and vllm names its code imports (its NPU runners and the modules they build on), matched against the
releases known; refused only when the evidence is absent or contradicts itself, naming both sides."""
import shutil
import zipfile
from pathlib import Path

import pytest

from omni_npu_port.core.errors import InputError
from omni_npu_port.sources import evidence
from omni_npu_port.sources.evidence import checkout_evidence, imported_symbols, match_symbols
from omni_npu_port.sources.fetch import CACHE_DIR, cached_release
from omni_npu_port.sources.readers import open_source

FIX = Path(__file__).parent / "fixtures" / "target_evidence"
ASCEND = {v: open_source(FIX / f"vllm_ascend-{v}") for v in ("0.17.0rc1", "0.18.0", "0.19.1rc1")}
VLLM = {v: open_source(FIX / f"vllm-{v}") for v in ("0.18.0", "0.19.1")}


def _evidence(name: str, vllm=None):
    return checkout_evidence(open_source(FIX / name), ascend_trees=ASCEND, vllm_trees={} if vllm is None else vllm)


def test_the_imports_decide_the_target_and_the_line_says_so():
    "NewHelper (0.18.0 …) and OldHelper (… 0.18.0) fit 0.18.0 alone; the newest table pairing of it decides."
    e = _evidence("omni_decides")
    assert (e.code, e.target.asked, e.refusal) == ("ONP4305", "0.18.0", None)
    assert "fit vllm-ascend 0.18.0;" in e.decided_by and "0.20.0" in e.decided_by
    assert (e.omni, e.vllm) == ("0.20.0", "0.20.0")


def test_two_imports_with_no_common_release_are_refused_naming_both():
    e = _evidence("omni_clash")
    assert e.target is None and e.code == "ONP4306"
    assert "OldHelper" in e.refusal and "0.17.0rc1 … 0.18.0" in e.refusal
    assert "NewerHelper" in e.refusal and "0.19.1rc1" in e.refusal and "npu_model_runner.py:3" in e.refusal


def test_a_stated_release_the_imports_contradict_is_refused_and_one_they_fit_decides():
    bad = _evidence("omni_docker_contradicts")
    assert bad.code == "ONP4306" and bad.target is None
    assert "Dockerfile.npu builds on vllm-ascend 0.19.1rc1" in bad.refusal
    assert "OldHelper" in bad.refusal and "which vllm-ascend 0.19.1rc1 lacks" in bad.refusal
    good = _evidence("omni_docker_agrees")
    assert (good.code, good.target.asked) == ("ONP4305", "0.18.0")
    assert good.decided_by.startswith("its docker/Dockerfile.npu builds on vllm-ascend 0.18.0")
    assert "agree" in good.decided_by


def test_a_version_guarded_import_is_no_evidence():
    tree = open_source(FIX / "omni_guarded")
    assert imported_symbols(tree, "vllm_ascend") == []
    e = _evidence("omni_guarded")
    assert e.target is None and e.code is None and "imports no vllm-ascend name" in e.refusal


def test_the_vllm_imports_narrow_the_pairing():
    "GpuNew exists in vllm 0.19.1, not 0.18.0: vllm-ascend 0.18.0 (paired with vllm 0.18.0) no longer fits."
    assert _evidence("omni_vllm_narrows").target.asked == "0.18.0"   # vllm unread: both fit, the newest row decides
    e = _evidence("omni_vllm_narrows", VLLM)
    assert (e.target.asked, e.vllm, e.omni) == ("0.19.1rc1", "0.19.1", None)
    m = match_symbols(open_source(FIX / "omni_vllm_narrows"), "vllm", VLLM)
    assert m.fitting == ("0.19.1",)


def test_port_release_infers_the_target_of_a_checkout_or_refuses_naming_both(monkeypatch):
    from omni_npu_port.port.release_inputs import choose_inputs
    monkeypatch.setattr(evidence, "cached_trees", lambda package, *a: ASCEND if package == "vllm-ascend" else {})
    got = choose_inputs(open_source(FIX / "omni_decides"))
    assert (got.vllm_ascend, got.vllm) == ("0.18.0", "0.20.0") and got.pairing.inferred
    assert [d.code for d in got.diagnostics if d.code == "ONP4305"] == ["ONP4305"]
    with pytest.raises(InputError) as e: choose_inputs(open_source(FIX / "omni_clash"))
    assert "\n" not in str(e.value) and "OldHelper" in str(e.value) and "NewerHelper" in str(e.value)
    stated = choose_inputs(open_source(FIX / "omni_decides"), "vllm-ascend==0.19.1rc1")   # --target: no evidence read
    assert stated.vllm_ascend == "0.19.1rc1" and not any(d.code == "ONP4305" for d in stated.diagnostics)


def test_a_release_the_table_pairs_is_not_inferred(tmp_path, monkeypatch):
    "Must not fire: a checkout whose version file names a release of the table takes the table's pairing."
    from omni_npu_port.port.release_inputs import choose_inputs
    monkeypatch.setattr(evidence, "cached_trees", lambda *a: pytest.fail("the evidence was read for a stated release"))
    root = tmp_path / "omni"
    shutil.copytree(FIX / "omni_decides", root)
    (root / "vllm_omni" / "_version.py").write_text("__version__ = version = '0.22.0'\n")
    got = choose_inputs(open_source(root))
    assert (got.vllm_ascend, got.vllm) == ("0.22.1rc1", "0.22.0") and not got.pairing.inferred
    assert not any(d.code == "ONP4305" for d in got.diagnostics)


def _checkout_of_wheel(tmp_path: Path, version: str) -> Path:
    "A vLLM-Omni wheel from the package cache unpacked as a checkout would be: no dist-info, no generated _version.py."
    whl = cached_release(Path(CACHE_DIR).expanduser(), "vllm-omni", version, "wheel")
    if whl is None: pytest.skip(f"vllm-omni {version}'s wheel is not in the package cache")
    root = tmp_path / f"omni-{version}"
    with zipfile.ZipFile(whl) as z:
        z.extractall(root, [n for n in z.namelist() if n.startswith("vllm_omni/") and not n.endswith("/_version.py")])
    return root


def test_a_stripped_release_checkout_is_ported_onto_its_own_release(tmp_path, capsys):
    "vLLM-Omni 0.22.0 as a checkout (no metadata, no version file): its imports and the table: 0.22.1rc1, vllm 0.22.0."
    from omni_npu_port.port.release_inputs import choose_inputs
    tree = open_source(_checkout_of_wheel(tmp_path, "0.22.0"))
    assert tree.version is None
    got = choose_inputs(tree)
    assert (got.vllm_ascend, got.vllm) == ("0.22.1rc1", "0.22.0")
    note = next(d for d in got.diagnostics if d.code == "ONP4305")
    assert "vllm names it imports fit vllm-ascend" in note.message and "0.22.0" in note.message


def test_a_version_file_that_ties_vllm_to_its_own_line_names_the_vllm(tmp_path):
    ("A version the table lacks (0.32.0) whose version.py requires vllm's major.minor to match: vllm 0.32.0, said so; "
     "without that rule the version alone names no vllm and the imports decide both.")
    root = tmp_path / "omni"
    shutil.copytree(FIX / "omni_decides", root)
    (root / "vllm_omni" / "_version.py").write_text("__version__ = version = '0.32.0'\n")
    e = checkout_evidence(open_source(root), "0.32.0", ascend_trees=ASCEND, vllm_trees={})
    assert (e.target.asked, e.vllm) == ("0.18.0", "0.20.0")   # no rule: the newest table pairing the imports fit
    (root / "vllm_omni" / "version.py").write_text("# Warn if vllm and vllm-omni versions don't match (major.minor).\n")
    e = checkout_evidence(open_source(root), "0.32.0", ascend_trees=ASCEND, vllm_trees={})
    assert (e.target.asked, e.vllm) == ("0.18.0", "0.32.0")
    assert "its version.py requires vllm's major.minor" in e.decided_by


def test_translate_infers_a_checkouts_target_with_the_same_resolver(monkeypatch, capsys):
    from omni_npu_port.cli.main import main
    monkeypatch.setattr(evidence, "cached_trees", lambda package, *a: ASCEND if package == "vllm-ascend" else {})
    main(["translate", "--check", str(FIX / "omni_decides" / "vllm_omni")])
    assert "target vllm-ascend 0.18.0 (inferred from the checkout's own evidence" in capsys.readouterr().err
    assert main(["translate", "--check", str(FIX / "omni_clash" / "vllm_omni")]) == 2
    err = capsys.readouterr().err
    assert "contradicts itself" in err and "OldHelper" in err and "NewerHelper" in err


def test_vllm_ascend_imports_capped_below_the_vllm_ones_are_paired_across_by_the_table():
    ("OldHelper caps vllm-ascend at 0.18.0 (vllm 0.18.0); GpuNew needs vllm 0.19.1 or newer: vllm-ascend lagged, no "
     "contradiction; the table's vLLM-Omni 0.20.0 pairs vllm-ascend 0.18.0 with vllm 0.20.0 (issue 31, the rcs).")
    e = _evidence("omni_unpaired", VLLM)
    assert (e.code, e.target.asked, e.vllm, e.refusal) == ("ONP4305", "0.18.0", "0.20.0", None)
    assert "OldHelper" not in e.decided_by and "pairs vLLM-Omni 0.20.0 across the two" in e.decided_by
    assert _evidence("omni_unpaired").target.asked == "0.18.0"   # must not fire: with vllm unread nothing contradicts


def test_the_releases_read_are_those_of_the_cache_the_port_uses(tmp_path):
    "An empty package cache holds no release to match: no evidence, nothing inferred, nothing fetched."
    e = checkout_evidence(open_source(FIX / "omni_decides"), cache_dir=tmp_path)
    assert e.target is None and e.code is None and "(0 read)" in e.refusal
    assert not any(tmp_path.iterdir())
