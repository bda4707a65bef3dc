"""`omni-npu-port doctor` and `omni-npu-port kernel install`, called as a user would."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omni_npu_port.sources import doctor
from omni_npu_port.core.catalog import PAIRING
from omni_npu_port.sources.readers import write_source_double
from omni_npu_port.runtime.kernel import install_kernel
from omni_npu_port.sources.doctor import doctor_report
from omni_npu_port.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[1]


def main(argv):
    "`omni-npu-port doctor ARGV`."
    return cli(["doctor", *argv])


def kernel_main(argv):
    "`omni-npu-port kernel ARGV`."
    return cli(["kernel", *argv])


def run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_report_for_a_matching_pair(capsys, release_source):
    va, v = release_source("vllm-ascend==0.18.0"), release_source("vllm==0.18.0")
    rc, out, err = run(capsys, ["--json", "--source", va.origin, "--source", v.origin])
    rep = json.loads(out)
    assert rc == 0 and not rep["pairing_mismatch"]
    assert rep["platform"]["backend"] in ("cpu", "cuda", "npu")
    assert set(rep["platform"]["versions"]) >= {"torch", "torch_npu", "CANN", "vllm", "vllm-ascend"}
    src = {s["package"]: s for s in rep["sources"]}
    assert (src["vllm-ascend"]["version"], src["vllm"]["version"]) == ("0.18.0", "0.18.0")
    res = {r["id"]: r for r in src["vllm-ascend"]["results"]}
    assert res["fc.virtual-engine"]["status"] == "ok" and res["fc.has-sinks"]["status"] == "n/a"
    assert res["sig.dummy-run"]["hazards"]           # checked with the given vllm as the GPU reference
    assert src["vllm-ascend"]["summary"]["changed"] == src["vllm-ascend"]["summary"]["missing"] == 0


def test_mismatched_pair_warns_with_the_pairing_table(capsys, release_source):
    va, v = release_source("vllm-ascend==0.23.0.post1"), release_source("vllm==0.18.0")
    rc, out, _ = run(capsys, ["--source", va.origin, "--source", v.origin])
    assert "vllm 0.18.0 does not pair with vllm-ascend 0.23.0.post1" in out
    assert "pairing" in out and all(k in out for k in PAIRING)
    assert "vllm-ascend 0.23.0.post1" in out and "fc.has-sinks" in out
    rep = doctor_report([va.origin, v.origin])
    assert rep["pairing_mismatch"] and any("built against vllm 0.23.0" in w for w in rep["warnings"])


def test_a_source_of_another_package_is_refused(capsys, release_source):
    omni = release_source("vllm-omni==0.16.0")
    rc, out, err = run(capsys, ["--source", omni.origin])
    assert rc == 3 and out == ""
    assert len(err.strip().splitlines()) == 1 and "vllm-omni source" in err and "vllm-ascend" in err


def test_bad_paths_exit_3_with_one_line(capsys, tmp_path):
    for argv in (["--source", str(tmp_path / "missing.whl")], ["--source", str(tmp_path)]):
        rc, out, err = run(capsys, argv)
        assert rc == 3 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_without_sources_reads_the_installed_packages(capsys, monkeypatch, tmp_path):
    import importlib.util
    if importlib.util.find_spec("vllm_ascend") or importlib.util.find_spec("vllm"):
        pytest.skip("vllm / vllm-ascend are installed here")
    empty = doctor.cached_sources
    monkeypatch.setattr(doctor, "cached_sources", lambda cache=None: empty(tmp_path))
    rc, out, _ = run(capsys, [])      # nothing installed, an empty cache: it says how to give a source
    assert rc == 0 and "no vllm or vllm-ascend is installed here" in out and "--source" in out


def test_an_installed_package_is_checked(capsys, tmp_path, monkeypatch):
    write_source_double(tmp_path, version="0.18.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, out, _ = run(capsys, ["--json"])
    rep = json.loads(out)
    assert rc == 1                                   # the double has no NPUModelRunner: records that hold are missing
    s = rep["sources"][0]
    assert (s["package"], s["version"], s["kind"]) == ("vllm-ascend", "0.18.0", "installed")
    res = {r["id"]: r["status"] for r in s["results"]}
    assert res["pa.seq-len-constant"] == "ok" and res["sig.dummy-run"] == "missing"


def test_drift_makes_exit_1_and_names_it(capsys, tmp_path):
    root = write_source_double(tmp_path)
    p = root / "vllm_ascend/worker/model_runner_v1.py"
    p.write_text(p.read_text().replace("6144", "8192"))
    rc, out, _ = run(capsys, ["--source", str(root)])
    assert rc == 1 and "value 8192, expected 6144" in out


def test_a_tables_title_names_its_origin_as_the_views_do(capsys, tmp_path, monkeypatch):
    "A source under home is titled `~/...`, one under the current folder relative to it, any other in full; JSON keeps it."
    home, here = tmp_path / "home", tmp_path / "here"
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    flat = lambda out: "".join(out.split())        # rich may wrap a long title; paths here hold no spaces
    for src, shown in ((home / "src" / "va", "~/src/va"), (here / "va", "va"), (tmp_path / "elsewhere", None)):
        write_source_double(src)
        rc, out, _ = run(capsys, ["--source", str(src)])
        assert f"(directory:{shown or src})" in flat(out), out
        if shown: assert str(src) not in flat(out)
    rc, out, _ = run(capsys, ["--json", "--source", str(home / "src" / "va")])
    assert json.loads(out)["sources"][0]["origin"] == str(home / "src" / "va")


def test_cann_environment_warning(capsys, monkeypatch, release_source):
    fake = {"backend": "cpu", "device": "cpu", "versions": {"torch": "2.9.0", "torch_npu": "2.9.0", "CANN": None}}
    monkeypatch.setattr(doctor, "platform_report", lambda: fake)
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"): monkeypatch.delenv(var, raising=False)
    src = release_source("vllm-ascend==0.18.0").origin
    rc, out, _ = run(capsys, ["--source", src])
    assert "lacks CANN's environment" in out and "set_env.sh" in out and "kernel install" in out
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest")
    rc, out, _ = run(capsys, ["--source", src])
    assert "lacks CANN's environment" not in out


def test_console_command_dispatches_to_the_doctor(capsys, tmp_path):
    from omni_npu_port.cli.main import main as cli
    root = write_source_double(tmp_path)
    assert cli(["doctor", "--json", "--source", str(root)]) == 1
    assert json.loads(capsys.readouterr().out)["sources"][0]["package"] == "vllm-ascend"


# --- the Jupyter kernel ----------------------------------------------------------------------------------------
def kernel_json(prefix, name):
    return json.loads((Path(prefix) / "share/jupyter/kernels" / name / "kernel.json").read_text())


def test_kernel_install_cpu_into_a_prefix(capsys, tmp_path):
    assert kernel_main(["install", "--name", "onp-cpu", "--backend", "cpu", "--prefix", str(tmp_path)]) == 0
    spec = kernel_json(tmp_path, "onp-cpu")
    assert spec["argv"] == [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["env"] == {"OMNI_NPU_PORT_RUNTIME_BACKEND": "cpu"} and spec["language"] == "python"
    assert "installed kernel 'onp-cpu'" in capsys.readouterr().out


def test_kernel_install_npu_wraps_cann_set_env(tmp_path):
    set_env = tmp_path / "set_env.sh"
    set_env.write_text("export ASCEND_TOOLKIT_HOME=/fake\n")
    assert kernel_main(["install", "--name", "onp-npu", "--backend", "npu", "--cann-env", str(set_env),
                        "--prefix", str(tmp_path)]) == 0
    spec = kernel_json(tmp_path, "onp-npu")
    assert spec["argv"][:2] == ["bash", "-c"]
    assert spec["argv"][2].startswith(f"source {set_env} && exec {sys.executable} -m ipykernel_launcher -f")
    assert "{connection_file}" in spec["argv"][2]
    assert spec["env"]["OMNI_NPU_PORT_RUNTIME_BACKEND"] == "npu"


def test_kernel_install_errors(capsys, tmp_path):
    "Contradicting or invalid options exit 2 (usage); a missing set_env.sh exits 3 (environment); one line each."
    cases = [(["install", "--backend", "npu", "--cann-env", str(tmp_path / "nope.sh"), "--prefix", str(tmp_path)], "set_env.sh not found", 3),
             (["install", "--backend", "cpu", "--cann-env", str(tmp_path), "--prefix", str(tmp_path)], "applies to --backend npu", 2),
             (["install", "--name", "bad name!", "--prefix", str(tmp_path)], "--name 'bad name!'", 2),
             (["install", "--backend", "tpu"], "invalid choice: 'tpu'", 2)]
    if not Path("/usr/local/Ascend/ascend-toolkit/set_env.sh").exists():
        cases.append((["install", "--backend", "npu", "--prefix", str(tmp_path)], "/usr/local/Ascend/ascend-toolkit/set_env.sh", 3))
    for argv, msg, code in cases:
        assert kernel_main(argv) == code, argv
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err



def test_the_kernel_installer_has_its_own_errors_and_imports_no_torch(tmp_path):
    "runtime.kernel, not the doctor: KernelError (exit 3) / KernelUsageError (exit 2); importing it and writing a spec loads no torch."
    from omni_npu_port.core.errors import exit_code_of
    from omni_npu_port.runtime.kernel import KernelError, KernelUsageError
    with pytest.raises(KernelUsageError) as e: install_kernel(backend="cpu", cann_env=str(tmp_path), prefix=str(tmp_path))
    assert exit_code_of(e.value) == 2 and isinstance(e.value, KernelError)
    with pytest.raises(KernelError) as e: install_kernel(backend="npu", cann_env=str(tmp_path / "no.sh"), prefix=str(tmp_path))
    assert exit_code_of(e.value) == 3 and not isinstance(e.value, doctor.DoctorError)
    assert not hasattr(doctor, "install_kernel") and not hasattr(doctor, "kernel_spec")   # one home
    code = "import sys; from omni_npu_port.runtime.kernel import kernel_spec; kernel_spec('npu', '/x.sh'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.split() == ["False"], out.stderr

@pytest.mark.slow
def test_npu_kernel_starts_with_cann_environment_loaded(tmp_path, monkeypatch):
    "Start the installed spec's argv through jupyter_client: the fake set_env.sh's export is visible in the kernel."
    from jupyter_client.manager import start_new_kernel
    set_env = tmp_path / "cann" / "set_env.sh"
    set_env.parent.mkdir()
    set_env.write_text("export ONP_FAKE_CANN=loaded-from-set-env\nexport ASCEND_TOOLKIT_HOME=/fake/ascend\n")
    prefix = tmp_path / "prefix"
    dest = install_kernel("onp-npu-start", "npu", str(set_env), prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share/jupyter"))
    monkeypatch.delenv("ONP_FAKE_CANN", raising=False)
    km, kc = start_new_kernel(kernel_name=dest.name, startup_timeout=60)
    try:
        out = []
        code = ("import os; print(os.environ.get('ONP_FAKE_CANN'), os.environ.get('ASCEND_TOOLKIT_HOME'), "
                "os.environ.get('OMNI_NPU_PORT_RUNTIME_BACKEND'))")
        kc.execute_interactive(code, timeout=60,
                               output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        assert "".join(out).split() == ["loaded-from-set-env", "/fake/ascend", "npu"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert "ONP_FAKE_CANN" not in os.environ          # only the kernel process got it


def test_installed_torch_npu_that_vllm_ascend_does_not_pin_is_a_warning(capsys, tmp_path, monkeypatch):
    from omni_npu_port.core.catalog import TORCH_NPU_PINS
    write_source_double(tmp_path, version="0.18.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    for torch_npu, warned in ((TORCH_NPU_PINS["0.18.0"], False), ("2.10.0", True)):
        fake = {"backend": "cpu", "device": "cpu", "versions": {"torch_npu": torch_npu, "vllm-ascend": "0.18.0"}}
        monkeypatch.setattr(doctor, "platform_report", lambda: fake)
        rep = doctor.doctor_report()
        assert any(f"pins torch-npu=={TORCH_NPU_PINS['0.18.0']}" in w for w in rep["warnings"]) == warned


def test_asking_for_an_npu_without_torch_npu_is_one_message_and_exit_1(capsys, monkeypatch):
    import importlib.util
    if importlib.util.find_spec("torch_npu"): pytest.skip("torch_npu is installed here")
    from omni_npu_port.runtime.platform import reset_platform
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "npu")
    reset_platform()
    try:
        rc, out, err = run(capsys, [])
    finally:
        monkeypatch.delenv("OMNI_NPU_PORT_RUNTIME_BACKEND")
        reset_platform()
    assert rc == 1 and "Traceback" not in out + err
    assert "torch_npu is not importable" in out and "pip install 'omni-npu-port[npu]'" in out


# --- versions: stated, given (PATH@VERSION), fetched (NAME==VERSION), inferred ---------------------------------
FIX = Path(__file__).parent / "fixtures" / "sources"


def versionless_copy(tree, dest: Path) -> Path:
    "The package's .py files of a release, written under `dest` as a checkout would hold them: no metadata, no version file."
    pkg = tree.package
    for rel in tree.reader.names():
        if rel.startswith(f"{pkg}/") and rel.endswith(".py") and not rel.endswith(("/_version.py", "/version.py")):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(tree.reader.read(rel))
    return dest


def test_vllm_chained_version_assignment_is_read(capsys):
    "vllm's `_version.py` says `__version__ = version = '0.30.0'` (setuptools-scm); the fixture writes that form."
    rc, out, _ = run(capsys, ["--json", "--source", str(FIX / "vllm_src")])
    s = json.loads(out)["sources"][0]
    assert (s["package"], s["version"]) == ("vllm", "0.30.0")
    assert s["version_from"] == "source"


def test_a_version_given_for_a_checkout(capsys, tmp_path):
    root = write_source_double(tmp_path, version="0.18.0")
    for meta in root.glob("*.dist-info/METADATA"): meta.unlink()
    rc, out, _ = run(capsys, ["--json", "--source", f"{root}@0.18.0"])
    s = json.loads(out)["sources"][0]
    assert (s["version"], s["version_from"], s["version_found"], s["inferred"]) == ("0.18.0", "given", None, None)
    assert {r["id"]: r["status"] for r in s["results"]}["fc.has-sinks"] == "n/a"      # range checked at 0.18.0


def test_a_given_version_that_differs_from_the_stated_one_is_a_warning(capsys, tmp_path):
    root = write_source_double(tmp_path, version="0.18.0")
    rep = doctor_report([f"{root}@0.23.0"])
    assert rep["sources"][0]["version"] == "0.23.0" and rep["sources"][0]["version_found"] == "0.18.0"
    assert any("states version 0.18.0; checked as 0.23.0 as given" in w for w in rep["warnings"])


def test_a_versionless_checkout_is_inferred_not_all_in_range(capsys, tmp_path, release_source):
    "A checkout of 0.18.0 (its files, no version anywhere): inferred, and as clean as the release with its version."
    src = versionless_copy(release_source("vllm-ascend==0.18.0"), tmp_path)
    rc, out, _ = run(capsys, ["--json", "--source", str(src)])
    s = json.loads(out)["sources"][0]
    assert s["version_from"] == "inferred" and "0.18.0" in s["inferred"]["candidates"]
    assert s["version"] == s["inferred"]["version"] and s["summary"]["changed"] == s["summary"]["missing"] == 0
    assert rc == 0 and not json.loads(out)["pairing_mismatch"]
    rc, out, _ = run(capsys, ["--source", str(src)])
    assert "(inferred: " in out and "give PATH@VERSION" in out


def test_inferred_version_of_every_release(release_source):
    """Every vllm-ascend release the catalog knows, its version removed. Where the catalog is right about the
    release (its stated version reports nothing changed or missing), the inferred version reports nothing either,
    and it is the release or a neighbour no range tells apart."""
    import copy
    from omni_npu_port.core.catalog import VLLM_ASCEND_VERSIONS
    from omni_npu_port.sources.doctor import source_report
    known, clean = list(VLLM_ASCEND_VERSIONS), 0
    for v in (v for v in known if v != "main"):
        tree = release_source(f"vllm-ascend=={v}")
        bare = copy.copy(tree); bare.version = bare.version_from = None
        stated, inferred = source_report(tree), source_report(bare)
        assert inferred["version_from"] == "inferred" and inferred["version"] in known
        if stated["summary"]["changed"] or stated["summary"]["missing"]: continue
        clean += 1
        assert inferred["summary"]["changed"] == inferred["summary"]["missing"] == 0, (v, inferred["inferred"])
        assert min(abs(known.index(c) - known.index(v)) for c in inferred["inferred"]["candidates"]) <= 1, (v, inferred["inferred"])
    assert clean >= len(known) // 2, clean


def test_a_release_spec_reads_the_package_cache(capsys, release_source):
    release_source("vllm-ascend==0.18.0"), release_source("vllm==0.18.0")          # in the cache (the tests fill it)
    rc, out, _ = run(capsys, ["--json", "--source", "vllm-ascend==0.18.0", "--source", "vllm==0.18.0"])
    rep = json.loads(out)
    src = {s["package"]: s for s in rep["sources"]}
    assert rc == 0 and (src["vllm-ascend"]["version"], src["vllm"]["version"]) == ("0.18.0", "0.18.0")
    from omni_npu_port.sources.fetch import CACHE_DIR
    cache = Path(CACHE_DIR).expanduser().resolve()
    assert src["vllm-ascend"]["version_from"] == "source" and Path(src["vllm-ascend"]["origin"]).resolve().parent == cache
    assert {"package", "version", "origin", "kind", "summary", "results"} <= set(src["vllm"])   # the fields it always had


def test_bad_source_specs_say_what_to_write(capsys, tmp_path):
    root = write_source_double(tmp_path / "d")
    cases = [(["--source", "vllm-ascend==banana"], "'banana' is not a version", 2),
             (["--source", f"{root}@"], "no version after @", 2),
             (["--source", "torch==2.9.0"], "'torch' is not one of", 2),
             (["--source", "vllm-ascend==main"], "main is a branch", 2),
             (["--source", str(root), "--source", f"{root}@0.18.0"], "a second vllm-ascend source", 2),
             (["--source", f"{tmp_path}/missing@0.18.0"], "no such file or directory", 3)]
    for argv, msg, code in cases:
        rc, out, err = run(capsys, argv)
        assert rc == code and msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)


def test_a_release_that_cannot_be_fetched_is_an_input_error(capsys, monkeypatch):
    "Offline, or a release PyPI lacks: exit 3, one line naming the release (never a traceback)."
    from omni_npu_port.sources import fetch
    def offline(dist, version, index=fetch.PYPI):
        raise fetch.FetchError(f"{dist}=={version}: no files from {index} (network unreachable)")
    monkeypatch.setattr(fetch, "release_files", offline)
    rc, out, err = run(capsys, ["--source", "vllm-ascend==0.0.1"])
    assert rc == 3 and "vllm-ascend==0.0.1" in err and "network unreachable" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run(capsys, ["--source", "/no/such/dir==0.18.0"])
    assert rc == 3 and "no such file or directory" in err


def test_versioned_gives_other_commands_the_same_version(tmp_path, release_source):
    "`versioned` is the one rule: a stated or given version as it is, else the inferred one, marked."
    from omni_npu_port.sources.doctor import versioned
    from omni_npu_port.sources.readers import open_source, open_source_spec
    stated = release_source("vllm-ascend==0.18.0")
    assert versioned(stated) is stated
    src = versionless_copy(stated, tmp_path)
    t = versioned(open_source(src))
    assert t.version_from == "inferred" and t.version == t.inferred.version and "0.18.0" in t.inferred.candidates
    given = versioned(open_source_spec(f"{src}@0.23.0"))
    assert (given.version, given.version_from, given.inferred) == ("0.23.0", "given", None)


def test_with_nothing_installed_the_doctor_checks_the_package_caches_releases(tmp_path, monkeypatch, release_source):
    "The profile's target vllm-ascend (if cached, else the newest cached) and its paired vllm, from the package cache."
    cache = tmp_path / "pkgs"
    cache.mkdir()
    for spec in ("vllm-ascend==0.18.0", "vllm==0.18.0", "vllm-ascend==0.23.0.post1"):
        f = Path(release_source(spec).origin)
        (cache / f.name).symlink_to(f)
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", "0.18.0")
    trees = doctor.cached_sources(cache)
    assert [(t.package, t.version) for t in trees] == [("vllm_ascend", "0.18.0"), ("vllm", "0.18.0")]
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", "0.17.0rc1")           # not cached: the newest is
    assert [(t.package, t.version) for t in doctor.cached_sources(cache)] == [("vllm_ascend", "0.23.0.post1")]
    assert doctor.cached_sources(tmp_path / "empty") == []
    monkeypatch.setattr(doctor, "cached_sources", lambda cache=None: trees)        # nothing installed here
    monkeypatch.setattr(doctor, "open_source", lambda pkg: (_ for _ in ()).throw(doctor.SourceError(pkg)))
    rep = doctor_report(None, {"backend": "cpu", "versions": {}})
    assert rep["from_cache"] == [t.origin for t in trees] and not rep["installed"] and len(rep["sources"]) == 2
