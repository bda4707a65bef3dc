"""A vLLM-Omni release ahead of every vllm-ascend (issue 31): a declared vllm line no vllm-ascend pairs, and vllm
imports that fall in a gap of the releases read, are inferred from the code's own imports (ONP4470), never refused
as contradictions; the fixtures are written here (trees of a few lines), nothing is fetched."""
import json
from pathlib import Path

import pytest

from omni_npu_port.core.errors import InputError
from omni_npu_port.port import release_inputs
from omni_npu_port.port.release_inputs import choose_inputs
from omni_npu_port.sources.evidence import checkout_evidence, release_gap_fill
from omni_npu_port.sources.fetch import FetchError, listed_versions
from omni_npu_port.sources.readers import open_source

FIX = Path(__file__).parent / "fixtures" / "target_evidence"
ASCEND = {v: open_source(FIX / f"vllm_ascend-{v}") for v in ("0.17.0rc1", "0.18.0", "0.19.1rc1")}


def _omni(tmp_path: Path, pin: str, imports: str) -> Path:
    "A vLLM-Omni release of 0.99.0 pinning vllm `pin`, whose NPU runner imports `imports` (Python lines)."
    root = tmp_path / "omni"
    (root / "vllm_omni" / "platforms" / "npu" / "worker").mkdir(parents=True)
    meta = f"Metadata-Version: 2.4\nName: vllm-omni\nVersion: 0.99.0\nRequires-Dist: vllm=={pin}\n"
    (root / "PKG-INFO").write_text(meta)
    for d in ("vllm_omni", "vllm_omni/platforms", "vllm_omni/platforms/npu", "vllm_omni/platforms/npu/worker"):
        (root / d / "__init__.py").write_text("")
    runner = root / "vllm_omni/platforms/npu/worker/npu_model_runner.py"
    runner.write_text(imports + "\n\nclass OmniNPUModelRunner:\n    pass\n")
    return root


def _vllm(tmp_path: Path, version: str, names) -> object:
    "A vllm release whose `v1/things.py` defines `names`."
    root = tmp_path / f"vllm-{version}"
    (root / "vllm" / "v1").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "version.py").write_text(f"__version__ = '{version}'\n")
    (root / "vllm" / "v1" / "__init__.py").write_text("")
    (root / "vllm" / "v1" / "things.py").write_text("".join(f"class {n}: ...\n" for n in names))
    return open_source(root)


@pytest.fixture
def ascend_cache(monkeypatch):
    monkeypatch.setattr(release_inputs, "cached_trees", lambda package, *a: ASCEND if package == "vllm-ascend" else {})


def test_a_declared_line_no_vllm_ascend_pairs_is_inferred_from_the_imports(tmp_path, ascend_cache):
    "vllm 0.99 has no vllm-ascend; NewHelper resolves in 0.18.0 and 0.19.1rc1: the newest is taken, said as a warning."
    got = choose_inputs(open_source(_omni(tmp_path, "0.99.0", "from vllm_ascend.worker.helpers import NewHelper")))
    assert (got.vllm, got.vllm_ascend) == ("0.99.0", "0.19.1rc1")
    [d] = [d for d in got.diagnostics if d.code == "ONP4470"]
    assert d.severity == "warning" and "fit vllm-ascend 0.18.0 … 0.19.1rc1" in d.message
    assert "vllm 0.99.0" in d.message
    assert "inferred" not in d.message and "vllm-ascend of that line" not in d.message   # said once, and true
    assert got.pairing.evidence.count("inferred") == 1


def test_a_declared_line_with_no_vllm_ascend_evidence_is_still_refused(tmp_path, ascend_cache):
    "Must not fire: no vllm-ascend import resolves anywhere read; nor where the line has a vllm-ascend."
    with pytest.raises(InputError, match="knows no vllm-ascend release of that line"):
        choose_inputs(open_source(_omni(tmp_path, "0.99.0", "from vllm_ascend.nowhere import Gone")))
    pinned = _omni(tmp_path / "b", "0.18.0", "from vllm_ascend.worker.helpers import NewHelper")
    got = choose_inputs(open_source(pinned))
    assert got.vllm_ascend == "0.18.0rc1" and "ONP4470" not in [d.code for d in got.diagnostics]


def test_a_gap_in_the_vllm_releases_read_is_read_before_refusing(tmp_path):
    "Old is in vllm 0.19.1, New in 0.22.0: the gap's 0.20.0 has both, so it is read and the release is ahead."
    omni = open_source(_omni(tmp_path, "0.99.0", "from vllm_ascend.worker.helpers import NewHelper\n"
                                                 "from vllm.v1.things import Old, New"))
    read = {"0.19.1": _vllm(tmp_path, "0.19.1", ["Old"]), "0.22.0": _vllm(tmp_path, "0.22.0", ["New"])}
    gap = {"0.20.0": _vllm(tmp_path, "0.20.0", ["Old", "New"])}
    asked = []
    fill = release_gap_fill(listed=lambda p: asked.append(p) or ["0.18.0", "0.19.1", "0.20.0", "0.22.0", "0.23.0"],
                            fetch=lambda p, v: gap[v].reader.root)
    e = checkout_evidence(omni, ascend_trees=ASCEND, vllm_trees=read, fill=fill)
    assert asked == ["vllm"] and (e.code, e.target.asked) == ("ONP4470", "0.19.1rc1")
    assert e.vllm == "0.99.0"   # the vllm it pins
    assert "ahead of vllm-ascend" in e.decided_by and "fit only vllm 0.20.0" in e.decided_by


def test_no_gap_reads_nothing_and_a_newer_vllm_ascend_lacking_a_name_is_no_contradiction(tmp_path):
    ("Must not fire: New and Old both in 0.22.0 (no clash): fill never asked; OldHelper, gone from 0.19.1rc1, caps "
     "the vllm-ascend side at 0.18.0 and the vllm imports need a newer vllm: 0.18.0 taken (ONP4471), not refused.")
    omni = open_source(_omni(tmp_path, "0.99.0", "from vllm_ascend.worker.helpers import OldHelper\n"
                                                 "from vllm.v1.things import Old, New"))
    asked = []
    fill = lambda p, lo, hi: asked.append(p) or ({}, [])
    read = {"0.19.1": _vllm(tmp_path, "0.19.1", ["Old"]), "0.22.0": _vllm(tmp_path, "0.22.0", ["Old", "New"])}
    e = checkout_evidence(omni, ascend_trees=ASCEND, vllm_trees=read, fill=fill)
    assert asked == [] and (e.code, e.target.asked, e.vllm, e.refusal) == ("ONP4471", "0.18.0", "0.99.0", None)
    assert "OldHelper" in e.decided_by and "vllm-ascend 0.19.1rc1 lacks it" in e.decided_by


def test_listed_versions_reads_the_final_releases_with_a_file(tmp_path):
    "The index's release list: pre-releases, yanked-only and empty releases left out, oldest first."
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "json").write_text(json.dumps({"releases": {
        "0.33.0": [{"yanked": False}], "0.31.0": [{"yanked": False}], "0.32.0rc1": [{"yanked": False}],
        "0.32.0": [{"yanked": True}], "0.30.1": [], "junk": [{"yanked": False}]}}))
    assert listed_versions("vllm", tmp_path.as_uri()) == ["0.31.0", "0.33.0"]
    with pytest.raises(FetchError, match="no release list"):
        listed_versions("vllm-ascend", tmp_path.as_uri())


def test_onp4301_names_the_decision_and_leaves_the_evidence_to_its_note(tmp_path, ascend_cache):
    "Fires: an evidence note (ONP4470) decided, so ONP4301 points at it; must not: a package pin's evidence is said there."
    got = choose_inputs(open_source(_omni(tmp_path, "0.99.0", "from vllm_ascend.worker.helpers import NewHelper")))
    [said] = [d.message for d in got.diagnostics if d.code == "ONP4301"]
    [note] = [d.message for d in got.diagnostics if d.code == "ONP4470"]
    assert said.endswith("vllm-ascend 0.19.1rc1 (the evidence: ONP4470's line)") and "NewHelper" not in said
    assert "fit vllm-ascend 0.18.0 … 0.19.1rc1" in note   # the evidence, said in its own line
    pinned = choose_inputs(open_source(_omni(tmp_path / "b", "0.18.0", "from vllm_ascend.worker.helpers import NewHelper")))
    [said] = [d.message for d in pinned.diagnostics if d.code == "ONP4301"]
    assert said.endswith("(inferred: the package pins vllm==0.18.0; vllm-ascend of that line)")
