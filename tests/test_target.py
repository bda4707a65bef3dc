"""One Target from one resolver, the releases table as data, the pairing a release states in its own files."""
import ast
import io
import subprocess
import sys
import tarfile
import warnings
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.errors import InputError
from omni_npu_port.core.releases import (OMNI_PAIRING, POLICY_DOC, RELEASES, VLLM_ASCEND_VERSIONS, Pairing, ReleasesError,
                                         Target, load_releases, pairing_from_files, target_for)

ROOT = Path(__file__).resolve().parents[1]
LATEST = RELEASES.latest
OMNI = max(OMNI_PAIRING, key=lambda v: tuple(map(int, v.split("."))))   # the newest vLLM-Omni release the table pairs
OMNI_ASCEND = OMNI_PAIRING[OMNI][1][0]


# --- the releases table ----------------------------------------------------------------------------------------------
def test_the_table_is_package_data_one_row_per_release():
    assert (ROOT / "omni_npu_port" / "data" / "releases.toml").is_file()
    assert tuple(RELEASES.ascend) == VLLM_ASCEND_VERSIONS and VLLM_ASCEND_VERSIONS[-1] == "main"
    assert LATEST == VLLM_ASCEND_VERSIONS[-2]
    for v, r in RELEASES.ascend.items():
        assert r.vllm and r.evidence, v
        if v != "main": assert r.torch_npu and r.python and r.date, v


ROW = 'version = "0.40.0rc1"\nvllm = "0.40.0"\nevidence = "Dockerfile VLLM_TAG"\n'


@pytest.mark.parametrize("text,says", [
    ("[[vllm_ascend]]\n" + ROW + "colour = 1\n", "vllm_ascend row 1 ('0.40.0rc1'): field 'colour': unknown field"),
    ("[[vllm_ascend]]\n" + ROW.replace('"0.40.0"', "40"), "field 'vllm': expected str, got int"),
    ("[[vllm_ascend]]\n" + ROW.replace('vllm = "0.40.0"\n', ""), "field 'vllm': missing"),
    ("[[vllm_ascend]]\n" + ROW + 'python = "3.10+"\n', "field 'python'"),
    ("[[vllm_ascend]]\n" + ROW + 'date = "Oct 12"\n', "field 'date'"),
    ("[[vllm_ascend]]\n" + ROW.replace("0.40.0rc1", "zero"), "field 'version'"),
    ("[[vllm_ascend]]\n" + ROW + "\n[[vllm_ascend]]\n" + ROW, "0.40.0rc1 after 0.40.0rc1"),
    ("[[vllm_ascend]]\n" + ROW + '\n[[vllm_omni]]\nversion = "0.40.0"\nvllm = "0.40.0"\nvllm_ascend = ["0.41.0rc1"]\nevidence = "x"\n',
     "0.41.0rc1 has no [[vllm_ascend]] row"),
    ("[releases]\n", "unknown table 'releases'"),
    ("[[vllm_ascend]\n", "not valid TOML"),
])
def test_a_bad_table_is_an_error_naming_file_row_and_field(tmp_path, text, says):
    f = tmp_path / "releases.toml"
    f.write_text(text)
    with pytest.raises(ReleasesError) as e: load_releases(f)
    assert says in str(e.value) and str(f) in str(e.value)
    assert isinstance(e.value, InputError)


def test_rule_files_are_checked_by_the_same_code(tmp_path):
    from omni_npu_port.translate.rules import RuleFileError, load_rule_file
    f = tmp_path / "r.toml"
    f.write_text('[[rule]]\nid = "x"\nsince = 3\n')
    with pytest.raises(RuleFileError, match="rule 1 \\(id 'x'\\): field 'since': expected str, got int"): load_rule_file(f)
    f.write_text('[[rule]]\nid = "x"\nuntil = "zero"\n')
    with pytest.raises(RuleFileError, match="field 'until': 'zero' is not a version"): load_rule_file(f)


# --- the one Target ---------------------------------------------------------------------------------------------------
def test_a_known_release_pairs_from_the_table_with_no_warning():
    t = target_for("0.18.0", "--target")
    assert (t.asked, t.release, t.warning, t.vllm, t.torch_npu, t.paired_by) == \
        ("0.18.0", "0.18.0", None, RELEASES.ascend["0.18.0"].vllm, RELEASES.ascend["0.18.0"].torch_npu, "table")
    assert t.line().startswith("target vllm-ascend 0.18.0 (--target): vllm ")


def test_an_unknown_release_is_never_substituted_silently():
    t = target_for("0.99.0", "--target")
    assert t.release == LATEST and "0.99.0" in t.warning and t.paired_by == "neighbour"
    assert f"served by the catalog's {LATEST}" in t.line() and "give its sdist or checkout" in t.line()


def test_the_profile_resolver_says_where_the_target_came_from(tmp_path):
    from omni_npu_port.core.profile import load_profile, resolve_target
    f = tmp_path / "settings.ini"
    f.write_text("[stack]\nvllm_ascend = 0.23.0\n")
    prof = load_profile(f, env={})
    assert resolve_target(profile=prof).origin == f"the profile: {f}:2"
    assert resolve_target("vllm-ascend==0.18.0", profile=prof).origin == "--target"
    assert resolve_target(installed="0.18.0", profile=prof).origin == "the installed vllm-ascend"


def test_the_runtime_warns_for_a_release_the_table_lacks():
    from omni_npu_port.runtime.signatures import TargetWarning, runtime_target, target_version
    with pytest.warns(TargetWarning, match=f"0.99.0 is not a release the catalog knows: using {LATEST}"):
        assert target_version("0.99.0") == "0.99.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runtime_target("0.18.0").release == "0.18.0"


# --- the pairing a release states in its own files ------------------------------------------------------------------
POLICY = "| vLLM Ascend | vLLM | Python |\n|---|---|---|\n| v0.13.0rc1 | v0.13.0 | >= 3.10 |\n| v0.12.0rc1 | v0.12.0 | >= 3.10 |\n"


@pytest.mark.parametrize("files,vllm,says", [
    ({POLICY_DOC: POLICY, "Dockerfile": "ARG VLLM_TAG=v0.11.0\n"}, "0.12.0", "versioning_policy.md row: v0.12.0rc1 | v0.12.0"),
    ({"Dockerfile": "FROM x\nARG VLLM_TAG=v0.12.0\n"}, "0.12.0", "Dockerfile: ARG VLLM_TAG=v0.12.0"),
    ({"requirements.txt": "torch-npu==2.8.0\nvllm==0.12.0\n"}, "0.12.0", "requirements.txt: vllm==0.12.0"),
    ({"METADATA": "Name: vllm_ascend\nRequires-Dist: vllm==0.12.0\n"}, "0.12.0", "metadata: Requires-Dist: vllm==0.12.0"),
    ({"METADATA": "Name: vllm_ascend\nVersion: 0.12.0rc1\n"}, "0.12.0", "the line its version number follows"),
])
def test_a_release_states_its_pairing_in_its_files(files, vllm, says):
    got = pairing_from_files("0.12.0rc1", files)
    assert got.vllm == vllm and says in got.evidence


def test_files_that_say_nothing_give_no_pairing():
    assert pairing_from_files("0.12.0rc1", {}) is None
    assert pairing_from_files("0.12.0rc1", {"Dockerfile": "FROM ubuntu\n"}) is None


def _ascend_sdist(path: Path, version: str, files: dict) -> Path:
    "A small vllm-ascend sdist written by this test: a package, PKG-INFO and the release files."
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in {"vllm_ascend/__init__.py": "", "PKG-INFO": f"Name: vllm_ascend\nVersion: {version}\n", **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm_ascend-{version}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_a_vllm_ascend_sdist_the_table_lacks_pairs_from_its_files(tmp_path, monkeypatch):
    from omni_npu_port.sources.readers import SDIST_CACHE_ENV, open_source
    from omni_npu_port.sources.stated import tree_target
    monkeypatch.setenv(SDIST_CACHE_ENV, "off")
    p = _ascend_sdist(tmp_path / "vllm_ascend-0.12.0rc1.tar.gz", "0.12.0rc1",
                      {"Dockerfile": "ARG VLLM_TAG=v0.12.0\n", POLICY_DOC: POLICY, "requirements.txt": "torch-npu==2.8.0\n"})
    t = tree_target(open_source(p))
    assert (t.asked, t.vllm, t.torch_npu, t.paired_by) == ("0.12.0rc1", "0.12.0", "2.8.0", "source") and t.warning
    assert "versioning_policy.md row" in t.evidence


def test_the_real_0_12_0rc1_sdist_pairs_with_vllm_0_12_0():
    from omni_npu_port.sources.fetch import FetchError, fetch_package
    from omni_npu_port.sources.readers import open_source
    from omni_npu_port.sources.stated import tree_target
    try: p = fetch_package("vllm-ascend==0.12.0rc1", kind="sdist")
    except FetchError as e: pytest.skip(f"vllm-ascend 0.12.0rc1 sdist not available: {e}")
    t = tree_target(open_source(p))
    assert t.vllm == "0.12.0" and t.paired_by == "source" and "v0.12.0rc1 | v0.12.0" in t.evidence


def _ascend_dir(tmp_path: Path, version: str = "0.12.0rc1", files=None) -> Path:
    root = tmp_path / "ascend"
    (root / "vllm_ascend").mkdir(parents=True)
    (root / "vllm_ascend" / "__init__.py").write_text("")
    (root / "vllm_ascend" / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_false_pairing_warning_is_gone(tmp_path):
    "ONP4101 compares with the pair the NPU release states itself, never with a neighbour release's."
    import ast as _ast
    from omni_npu_port.port.locate import Located, open_tree
    from omni_npu_port.port.translation import pairing_check
    cls = _ast.parse("class X:\n    pass\n").body[0]
    tree = open_tree(str(_ascend_dir(tmp_path, files={"Dockerfile": "ARG VLLM_TAG=v0.12.0\n"})))
    npu = Located("a", "vllm_ascend", "0.12.0rc1", "m", "", cls, tree=tree)
    gpu = lambda v: Located("g", "vllm", v, "m", "", cls)
    assert pairing_check(gpu("0.12.0"), npu) == []
    [d] = pairing_check(gpu("0.13.0"), npu)
    assert d.code == "ONP4101" and "pairs with vllm 0.12.0 (its Dockerfile: ARG VLLM_TAG=v0.12.0), not 0.13.0" in d.message
    [d] = pairing_check(gpu("0.12.0"), Located("a", "vllm_ascend", "0.12.0rc1", "m", "", cls))   # no files: not checked
    assert d.severity == "info" and "not checked" in d.message


# --- translate and audit infer the target from the source ------------------------------------------------------------
def _omni_dir(tmp_path: Path, version: str | None = OMNI, files=None) -> Path:
    root = tmp_path / "omni"
    (root / "vllm_omni" / "worker").mkdir(parents=True)
    (root / "vllm_omni" / "__init__.py").write_text("")
    (root / "vllm_omni" / "worker" / "runner.py").write_text("import torch\n\ndef sync():\n    torch.cuda.synchronize()\n")
    if version:
        (root / f"vllm_omni-{version}.dist-info").mkdir()
        (root / f"vllm_omni-{version}.dist-info" / "METADATA").write_text(f"Name: vllm-omni\nVersion: {version}\n")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_translate_infers_the_target_from_a_vllm_omni_release(tmp_path, capsys):
    root = _omni_dir(tmp_path)
    assert main(["translate", "--check", str(root / "vllm_omni" / "worker")]) == 1
    err = capsys.readouterr().err
    assert f"target vllm-ascend {OMNI_ASCEND} (inferred from the source: vLLM-Omni {OMNI}" in err
    assert main(["translate", "--check", "--target", "vllm-ascend==0.18.0", str(root)]) == 1
    assert "target vllm-ascend 0.18.0 (--target)" in capsys.readouterr().err


def test_translate_infers_the_target_from_a_vllm_ascend_tree(tmp_path, capsys):
    root = _ascend_dir(tmp_path, "0.18.0")
    (root / "vllm_ascend" / "x.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    main(["translate", "--check", str(root / "vllm_ascend" / "x.py")])
    assert "target vllm-ascend 0.18.0 (inferred from the source:" in capsys.readouterr().err


def test_sources_stating_different_releases_ask_for_a_target(tmp_path):
    from omni_npu_port.core.errors import UsageError
    from omni_npu_port.sources.stated import stated_target
    a, b = _ascend_dir(tmp_path / "a", "0.18.0"), _ascend_dir(tmp_path / "b", "0.23.0")
    with pytest.raises(UsageError, match="state different releases"): stated_target([a, b])


def test_audit_infers_the_target_as_port_does(tmp_path):
    from omni_npu_port.port.audit import audit_target
    from omni_npu_port.port.locate import open_tree
    root = open_tree(str(_omni_dir(tmp_path)))
    t = audit_target(None, root, root)
    assert t.asked == OMNI_ASCEND and t.origin.startswith(f"inferred from the source: vLLM-Omni {OMNI}")
    assert audit_target("0.18.0", root).origin == "--target"


# --- port --release: the pairing of a release outside the table, a checkout, a named GPU base ----------------------
def test_a_target_outside_the_table_pairs_from_its_own_files(tmp_path):
    from omni_npu_port.port.release import choose_inputs
    from omni_npu_port.sources.readers import open_source
    tree = open_source(_omni_dir(tmp_path, version=None))
    files = {"Dockerfile": "ARG VLLM_TAG=v0.12.0\n"}
    got = choose_inputs(tree, "vllm-ascend==0.12.0rc1", ascend_files=lambda a: files)
    assert (got.vllm, got.vllm_ascend) == ("0.12.0", "0.12.0rc1") and "Dockerfile: ARG VLLM_TAG=v0.12.0" in got.pairing.evidence


def test_a_checkout_names_its_target_or_one_line_says_what_is_missing(tmp_path):
    from omni_npu_port.port.release import choose_inputs
    from omni_npu_port.sources.readers import open_source
    bare = open_source(_omni_dir(tmp_path / "bare", version=None))
    with pytest.raises(InputError) as e: choose_inputs(bare)
    assert "\n" not in str(e.value) and "no version" in str(e.value) and "no vllm-ascend" in str(e.value)
    docker = {"docker/Dockerfile.npu": "FROM quay.io/ascend/vllm-ascend:v0.18.0rc1\n"}
    got = choose_inputs(open_source(_omni_dir(tmp_path / "d", version=None, files=docker)), ascend_files=lambda a: {})
    assert (got.vllm_ascend, got.vllm) == ("0.18.0rc1", RELEASES.ascend["0.18.0rc1"].vllm)
    assert "docker/Dockerfile.npu builds on vllm-ascend 0.18.0rc1" in got.pairing.evidence


def test_a_vllm_the_user_names_is_the_gpu_base(tmp_path):
    from omni_npu_port.port.release import choose_inputs
    from omni_npu_port.sources.readers import open_source
    got = choose_inputs(open_source(_omni_dir(tmp_path)), gpu_base=("0.29.0", "--source vllm-0.29.0.tar.gz"))
    assert got.vllm == "0.29.0" and not got.pairing.inferred
    assert got.pairing.evidence.startswith("the GPU base named by --source vllm-0.29.0.tar.gz")


# --- layers: keyword rules in core, runtime imports at the top, no device branches in the runner pieces ------------
def test_translate_imports_nothing_from_the_runtime():
    code = ("import sys, omni_npu_port.translate.rules, omni_npu_port.translate.engine; "
            "print([m for m in sys.modules if m.startswith('omni_npu_port.runtime') or m == 'torch'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


RUNNER_PIECES = ("attention", "forward_context", "graph_params", "graphs", "rotary_sp", "sampler_batch", "signatures")


@pytest.mark.parametrize("mod", RUNNER_PIECES)
def test_runner_pieces_import_at_the_top_and_never_branch_on_the_device(mod):
    tree = ast.parse((ROOT / "omni_npu_port" / "runtime" / f"{mod}.py").read_text())
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        late = [n for n in ast.walk(fn) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("omni_npu_port")]
        assert not late, f"{mod}.{fn.name} imports {late[0].module} inside the function"
    for cmp in (n for n in ast.walk(tree) if isinstance(n, ast.Compare)):
        names = [cmp.left, *cmp.comparators]
        assert not (any(isinstance(x, ast.Attribute) and x.attr == "name" for x in names)
                    and any(isinstance(x, ast.Constant) and x.value in ("npu", "cuda", "cpu") for x in names)), \
            f"{mod}:{cmp.lineno} branches on the device name: use a Platform hook"


def test_a_vllm_source_passed_with_source_names_the_gpu_base(tmp_path):
    from omni_npu_port.port.release import choose_inputs, named_gpu_bases
    from omni_npu_port.sources.readers import open_source
    root = tmp_path / "vllm-src"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "_version.py").write_text("__version__ = version = '0.12.0'\n")
    named = named_gpu_bases([str(_ascend_dir(tmp_path)), str(root)])
    assert named == [("0.12.0", f"--source {root}")] and named_gpu_bases([str(_ascend_dir(tmp_path / "x"))]) == []
    omni = open_source(_omni_dir(tmp_path / "o"))
    assert choose_inputs(omni, gpu_base=named).vllm == "0.12.0"
    declared = OMNI_PAIRING[OMNI][0]          # a history vllm beside the declared one: the declared one stays the base
    assert choose_inputs(omni, gpu_base=[("0.12.0", "--source a"), (declared, "--source b")]).vllm == declared


# --- `name==version`: taken apart in one place (core.releases.parse_pin) ------------------------------------------
def test_a_pin_is_split_with_spaces_dropped_and_a_path_is_no_pin(tmp_path):
    from omni_npu_port.core.releases import parse_pin, parse_target, split_pin, split_spec
    from omni_npu_port.sources.readers import parse_source_spec
    assert parse_pin("vllm-ascend==0.18.0") == parse_pin("  vllm-ascend == 0.18.0 ") == ("vllm-ascend", "0.18.0")
    assert split_pin("vllm_omni == 0.30.0") == ("vllm_omni", "0.30.0")
    assert parse_target(" vllm-ascend == v0.18.0") == ("vllm-ascend", "0.18.0") and split_spec("vllm-ascend == 0.18.0") == "0.18.0"
    assert parse_source_spec("vllm-ascend == 0.18.0") == ("release", "0.18.0", "vllm-ascend")
    # `==` inside a path is no pin: an existing one opens as a path, a missing one is still read as a path
    d = tmp_path / "wheels==old"
    d.mkdir()
    assert parse_pin(f"{d}/x.whl") is None and parse_pin("0.18.0") is None and parse_pin(r"C:\w==1\x.whl") is None
    assert parse_source_spec(str(d)) == ("path", None, str(d))
    assert parse_source_spec("./missing==1/vllm.whl")[0] == "path"


@pytest.mark.parametrize("text, missing", [("vllm-ascend==", "no version after ==; write e.g. vllm-ascend==0.18.0"),
                                           ("vllm-ascend ==  ", "no version after =="),
                                           ("==0.18.0", "no package name before ==; write e.g. vllm-ascend==0.18.0")])
def test_a_pin_missing_a_part_says_which_in_every_reader(text, missing):
    "The same message, with what the text is, from the target, the source and the fetch readers; each its own error type."
    from omni_npu_port.core.releases import parse_pin, parse_target, split_spec
    from omni_npu_port.sources.fetch import FetchError, fetch_package
    from omni_npu_port.sources.readers import SourceSpecError, parse_source_spec
    for call, error, what in ((lambda: parse_pin(text), ValueError, "pin"), (lambda: parse_target(text), ValueError, "target"),
                              (lambda: split_spec(text), ValueError, "target"),
                              (lambda: parse_source_spec(text), SourceSpecError, "source"),
                              (lambda: fetch_package(text, cache_dir="/nonexistent-onp"), FetchError, "package")):
        with pytest.raises(error) as e: call()
        assert missing in str(e.value) and str(e.value).startswith((f"{what} {text!r}", f"{what} {text.strip()!r}")), str(e.value)


def test_split_pin_refuses_text_that_is_no_pin_and_fetch_says_what_to_write():
    from omni_npu_port.core.releases import split_pin
    from omni_npu_port.sources.fetch import FetchError, fetch_package
    with pytest.raises(ValueError, match=r"pin 'vllm-ascend': give NAME==VERSION, e.g. vllm-ascend==0.18.0"): split_pin("vllm-ascend")
    with pytest.raises(FetchError, match="give NAME==VERSION"): fetch_package("vllm-ascend", cache_dir="/nonexistent-onp")
    with pytest.raises(FetchError, match="is not a version"): fetch_package("vllm-ascend==latest", cache_dir="/nonexistent-onp")


def test_only_core_releases_takes_a_pin_apart():
    "No module but core/releases.py splits text on `==` (partition, rpartition, split): they call parse_pin / split_pin."
    found = []
    for py in sorted((ROOT / "omni_npu_port").rglob("*.py")):
        if py.name == "_modidx.py" or py == ROOT / "omni_npu_port/core/releases.py": continue
        for node in ast.walk(ast.parse(py.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("partition", "rpartition", "split", "rsplit") and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == "=="):
                found.append(f"{py.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"`==` taken apart outside core.releases.parse_pin: {found}"
