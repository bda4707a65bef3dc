"""A vLLM-Omni release whose vllm-ascend imports are capped below a newer vllm-ascend that lacks them (issue 31): the
release candidates 0.20/0.24/0.25.0rc1's shape. vllm-ascend lagged the vllm the code was written for, which is not a
contradiction: a releases-table row that pairs across the two decides (ONP4305), else the newest vllm-ascend the
imports fit (ONP4471, naming the import that caps it); a vllm-ascend the table gives the release's vllm line is set
aside, one a file states is not. Fixtures are written here (trees of a few lines); nothing is fetched."""
from pathlib import Path

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.sources.evidence import checkout_evidence, release_gap_fill
from omni_npu_port.sources.readers import open_source


def _tree(root: Path, files: dict) -> Path:
    "Write `files` (relative path -> text) below `root`, each package directory with its `__init__.py`."
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for d in p.relative_to(root).parents:
            if str(d) != "." and not (root / d / "__init__.py").exists(): (root / d / "__init__.py").write_text("")
        p.write_text(text)
    return root


def _ascend(tmp_path: Path, version: str, names) -> object:
    "A vllm-ascend release `version` (one the releases table knows) whose `worker/helpers.py` defines `names`."
    return open_source(_tree(tmp_path / f"va-{version}", {"vllm_ascend/_version.py": f"__version__ = '{version}'\n",
                       "vllm_ascend/worker/helpers.py": "".join(f"class {n}: ...\n" for n in names)}))


def _vllm(tmp_path: Path, version: str, names) -> object:
    "A vllm release whose `v1/things.py` defines `names`."
    return open_source(_tree(tmp_path / f"v-{version}", {"vllm/version.py": f"__version__ = '{version}'\n",
                       "vllm/v1/things.py": "".join(f"class {n}: ...\n" for n in names)}))


def _omni(tmp_path: Path, imports: str, files: dict | None = None) -> object:
    "A vLLM-Omni checkout whose NPU runner imports `imports`; `files`: more of its files."
    runner = {"vllm_omni/platforms/npu/worker/npu_model_runner.py": imports + "\n\nclass OmniNPUModelRunner: ...\n"}
    return open_source(_tree(tmp_path / "omni", {**runner, **(files or {})}))


def _lagging(tmp_path: Path) -> tuple[dict, dict]:
    ("OldHelper is in vllm-ascend 0.18.0 and 0.23.0.post1 (vllm 0.23.0), gone from 0.24.0rc1; New is in vllm 0.24.0 "
     "only: no vllm-ascend's own vllm fits both, and no table row pairs across them.")
    asc = {v: _ascend(tmp_path, v, names) for v, names in
           (("0.18.0", ["OldHelper"]), ("0.23.0.post1", ["OldHelper"]), ("0.24.0rc1", []))}
    vl = {"0.23.0": _vllm(tmp_path, "0.23.0", ["Old"]), "0.24.0": _vllm(tmp_path, "0.24.0", ["Old", "New"])}
    return asc, vl


IMPORTS = "from vllm_ascend.worker.helpers import OldHelper\nfrom vllm.v1.things import Old, New"
LINE = {"vllm_omni/version.py": "# warn unless vllm's major.minor is vllm-omni's (__version_tuple__[:2])\n"}


def test_a_vllm_ascend_capped_below_a_newer_one_takes_the_newest_it_fits(tmp_path):
    "Fires: OldHelper caps the vllm-ascend side at 0.23.0.post1, New needs vllm 0.24.0: 0.23.0.post1 with vllm 0.24.0."
    asc, vl = _lagging(tmp_path)
    e = checkout_evidence(_omni(tmp_path, IMPORTS), ascend_trees=asc, vllm_trees=vl)
    assert (e.code, e.target.asked, e.vllm, e.refusal) == ("ONP4471", "0.23.0.post1", "0.24.0", None)
    assert "vllm_ascend.worker.helpers.OldHelper" in e.decided_by and "vllm-ascend 0.24.0rc1 lacks it" in e.decided_by
    assert "fit only vllm 0.24.0" in e.decided_by and "vllm.v1.things.New" in e.decided_by
    assert code_info("ONP4471").severity == "warning"


def test_a_vllm_ascend_newer_than_the_vllm_imports_still_contradicts(tmp_path):
    ("Must not fire: NewHelper is only in vllm-ascend 0.24.0rc1 (vllm 0.24.0), the vllm imports fit only 0.23.0: "
     "vllm-ascend cannot be ahead of the vllm it was written for: refused, both sides named.")
    asc = {v: _ascend(tmp_path, v, names) for v, names in (("0.23.0.post1", []), ("0.24.0rc1", ["NewHelper"]))}
    vl = {"0.23.0": _vllm(tmp_path, "0.23.0", ["Old"]), "0.24.0": _vllm(tmp_path, "0.24.0", [])}
    omni = _omni(tmp_path, "from vllm_ascend.worker.helpers import NewHelper\nfrom vllm.v1.things import Old")
    e = checkout_evidence(omni, ascend_trees=asc, vllm_trees=vl)
    assert e.target is None and e.code == "ONP4306"
    assert "NewHelper" in e.refusal and "vllm.v1.things.Old" in e.refusal
    assert "no release of the releases table pairs the two" in e.refusal


def test_a_table_row_that_pairs_across_decides_before_the_newest_fit(tmp_path):
    ("Fires: OldHelper fits vllm-ascend 0.17.0rc1 … 0.18.0, New needs vllm 0.20.0; the table pairs vLLM-Omni 0.20.0 "
     "with vllm 0.20.0 and vllm-ascend 0.18.0: that row decides (ONP4305), not the newest fit.")
    asc = {v: _ascend(tmp_path, v, names) for v, names in
           (("0.17.0rc1", ["OldHelper"]), ("0.18.0", ["OldHelper"]), ("0.19.1rc1", []))}
    vl = {"0.18.0": _vllm(tmp_path, "0.18.0", ["Old"]), "0.20.0": _vllm(tmp_path, "0.20.0", ["Old", "New"]),
          "0.21.0": _vllm(tmp_path, "0.21.0", [])}
    e = checkout_evidence(_omni(tmp_path, IMPORTS), ascend_trees=asc, vllm_trees=vl)
    assert (e.code, e.target.asked, e.vllm, e.omni) == ("ONP4305", "0.18.0", "0.20.0", "0.20.0")
    assert "the releases table pairs vLLM-Omni 0.20.0 across the two" in e.decided_by


def test_the_vllm_ascend_of_a_stated_vllm_line_is_set_aside_but_a_stated_vllm_ascend_is_not(tmp_path):
    ("A version.py that ties vllm to 0.24 states vllm, not vllm-ascend: the table's 0.24.0rc1 of that line lacks "
     "OldHelper and is set aside (said); a Dockerfile that names vllm-ascend 0.24.0rc1 states it: refused.")
    asc, vl = _lagging(tmp_path)
    e = checkout_evidence(_omni(tmp_path, IMPORTS, LINE), "0.24.0rc9", ascend_trees=asc, vllm_trees=vl)
    assert (e.code, e.target.asked, e.vllm) == ("ONP4471", "0.23.0.post1", "0.24.0")
    assert "vllm-ascend 0.24.0rc1, the table's of that vllm line, set aside: it lacks vllm_ascend.worker" \
        in e.decided_by
    docker = {**LINE, "docker/Dockerfile.npu": "FROM quay.io/ascend/vllm-ascend:v0.24.0rc1\n"}
    bad = checkout_evidence(_omni(tmp_path / "d", IMPORTS, docker), "0.24.0rc9", ascend_trees=asc, vllm_trees=vl)
    assert bad.target is None and bad.code == "ONP4306" and "0.24.0rc1" in bad.refusal and "OldHelper" in bad.refusal


def test_reading_a_gap_says_so_and_no_gap_says_nothing(tmp_path):
    "The gap's releases are named on `progress` before they are read; a fill with nothing between says nothing."
    said = []
    got = {"0.20.0": _vllm(tmp_path, "0.20.0", ["Old"])}
    fill = release_gap_fill(listed=lambda p: ["0.19.1", "0.20.0", "0.22.0"], fetch=lambda p, v: got[v].reader.root,
                            progress=said.append)
    read, missed = fill("vllm", "0.19.1", "0.22.0")
    assert list(read) == ["0.20.0"] and missed == []
    assert len(said) == 1 and said[0].startswith("reading vllm 0.20.0 (listed between 0.19.1 and 0.22.0")
    said.clear()
    assert fill("vllm", "0.20.0", "0.22.0") == ({}, []) and said == []


def test_the_report_says_inferred_once(tmp_path):
    "The summary's pairing line marks an inferred pairing once, not '(inferred): inferred: …'; a table's is unmarked."
    from types import SimpleNamespace

    from omni_npu_port.core.catalog import OmniPairing
    from omni_npu_port.port.release_report import release_summary
    p = SimpleNamespace(omni="0.24.0rc1", origin="w.whl", vllm_ascend="0.23.0.post1", vllm="0.24.0", history=[],
                        layout="l", layout_from="f", runners=[], methods=0, compiles=True, conflicts=0, lost=0,
                        seconds=1.0,
                        pairing=OmniPairing("0.24.0rc1", "0.24.0", ("0.23.0.post1",), "inferred: its imports", True))
    line = release_summary(p)[0]
    assert line.endswith("GPU base vllm 0.24.0 (inferred): its imports") and line.count("inferred") == 1
    p.pairing = p.pairing._replace(evidence="the releases table", inferred=False)
    assert release_summary(p)[0].endswith("GPU base vllm 0.24.0: the releases table")


def test_the_summary_names_the_release_once():
    "Fires: a file of the release in the evidence is named by its path inside it; must not: another path is kept."
    from types import SimpleNamespace

    from omni_npu_port.core.catalog import OmniPairing
    from omni_npu_port.port.release_report import release_summary
    ev = "inferred: X (/c/omni.whl/vllm_omni/a.py:15) is in 0.13.0, and Y (/elsewhere/b.py:2)"
    p = SimpleNamespace(omni="0.24.0rc1", origin="/c/omni.whl", vllm_ascend="0.23.0.post1", vllm="0.24.0", history=[],
                        layout="l", layout_from="f", runners=[], methods=0, compiles=True, conflicts=0, lost=0,
                        seconds=1.0, pairing=OmniPairing("0.24.0rc1", "0.24.0", ("0.23.0.post1",), ev, True))
    line = release_summary(p)[0]
    assert line.count("/c/omni.whl") == 1 and "X (vllm_omni/a.py:15)" in line and "Y (/elsewhere/b.py:2)" in line
