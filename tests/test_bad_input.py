"""Bad input, as a hostile user gives it, to every command: one line on stderr naming the command and the file, the
right exit code (2 usage, 3 input, never 1 for a crash), never a traceback, never a hang, bounded memory (issue 14)."""
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import one_line, run
from omni_npu_port.cli.main import main
from omni_npu_port.sources import readers
from omni_npu_port.sources.readers import SourceError, SourceSyntaxError, open_source, write_source_double

AUDIT = Path(__file__).parent / "fixtures" / "audit"
PORT = Path(__file__).parent / "fixtures" / "port"


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    "Files a hostile user hands the tools: not UTF-8, binary, NUL bytes, a syntax error, a FIFO; trees holding them."
    d = tmp_path_factory.mktemp("bad")
    (d / "latin.py").write_bytes(b"class GPUModelRunner:\n    x = '\xe9t\xe9'\n")
    (d / "binary.py").write_bytes(bytes(range(256)) * 4)
    (d / "nul.py").write_bytes(b"class GPUModelRunner:\n    pass\n\0\n")
    (d / "syntax.py").write_text("class GPUModelRunner(:\n    pass\n")
    os.mkfifo(d / "fifo.py")
    for name, tail in (("tree_nul", b"\0"), ("tree_syntax", b"\ndef broken(:\n")):
        root = shutil.copytree(AUDIT / "old_layout", d / name)
        with open(root / "vllm_omni/worker/gpu_model_runner.py", "ab") as f: f.write(tail)
    asc = write_source_double(d / "asc_syntax")
    with open(asc / "vllm_ascend/attention/attention_v1.py", "a") as f: f.write("def broken(:\n")
    return d


# --- 4: the fallback: any exception is one line, exit 3, the traceback only under --debug ---------------------------
def test_an_unexpected_exception_is_one_line_naming_command_input_and_a_report_request(monkeypatch):
    import omni_npu_port.cli.audit as cli_audit
    def crash(*a, **k): return {}["no such key"]           # a bug deep in a command
    monkeypatch.setattr(cli_audit, "audit", crash)
    argv = ["audit", "--gpu", "g-src", "--npu", "n-src"]
    rc, out, err = run(argv)
    assert rc == 3, "a crash must not pass for findings (1)"
    one_line(err, "audit", "unexpected KeyError", "'no such key'", "at cli/audit.py:", "--gpu g-src --npu n-src", "report", "--debug")
    rc, _, dbg = run(["--debug", *argv])
    assert rc == 3 and "Traceback (most recent call last)" in dbg and dbg.splitlines()[-1] == err.strip()
    monkeypatch.setenv("OMNI_NPU_PORT_DEBUG", "1")
    assert "Traceback" in run(argv)[2]


def test_a_recursion_error_is_one_line_too(monkeypatch):
    import omni_npu_port.cli.profile as cli_profile
    def deep(args): return deep(args)
    monkeypatch.setattr(cli_profile, "run", deep)
    rc, _, err = run(["profile"])
    assert rc == 3
    one_line(err, "profile", "unexpected RecursionError")


def test_debug_alone_and_help_list_the_flag(capsys):
    assert main(["--debug"]) == 2 and main(["--help"]) == 0
    assert "--debug" in capsys.readouterr().out


# --- bad files to port / audit / doctor --------------------------------------------------------------------------
@pytest.mark.parametrize("name, why", [("latin.py", "byte 0xe9 is not utf-8"), ("binary.py", "is not utf-8"),
                                       ("nul.py", "null bytes"), ("syntax.py", "does not parse")])
def test_a_lone_file_that_cpython_rejects_is_one_input_error_line_naming_it(bad, name, why):
    f = bad / name
    rc, _, err = run(["audit", "--gpu", str(f), "--npu", str(AUDIT / "old_layout")])
    assert rc == 3
    one_line(err, "audit", f, "not a wheel")          # the audit reads releases and checkouts, not lone files
    c = PORT / "clean.py"
    rc, _, err = run(["port", "--gpu-base", f"{f}:GPUModelRunner._dummy_run", "--gpu-omni", f"{c}:OmniGPUModelRunner._dummy_run",
                      "--npu-base", f"{c}:NPUModelRunner._dummy_run"])
    assert rc == 3
    one_line(err, "port", f, why)


def test_a_nul_line_is_the_line_of_the_nul_byte(bad):
    with pytest.raises(SourceSyntaxError) as e: readers.read_module_file(bad / "nul.py")
    assert e.value.lineno == 3 and isinstance(e.value, SyntaxError) and isinstance(e.value, SourceError)


@pytest.mark.parametrize("tree", ["tree_nul", "tree_syntax"])
def test_audit_of_a_checkout_that_states_no_version_asks_for_one_in_one_line(bad, tree):
    rc, out, err = run(["audit", "--gpu", str(bad / tree), "--npu", str(bad / tree)])
    assert rc == 2 and out == ""
    one_line(err, "audit", "states no version", "--from PREV")


@pytest.mark.parametrize("tree", ["tree_nul", "tree_syntax"])
def test_port_from_a_module_that_does_not_parse_is_one_line_naming_the_file(bad, tree):
    c, src = PORT / "clean.py", bad / tree
    rc, _, err = run(["port", "--gpu-base", f"{c}:GPUModelRunner._dummy_run", "--gpu-omni", f"{src}:GPUARModelRunner.load_model",
                      "--npu-base", f"{c}:NPUModelRunner._dummy_run"])
    assert rc == 3
    one_line(err, "port", src / "vllm_omni/worker/gpu_model_runner.py", "does not parse")


def test_doctor_checks_the_rest_of_a_source_with_a_module_that_does_not_parse(bad):
    import json
    rc, out, err = run(["doctor", "--json", "--source", str(bad / "asc_syntax")])
    assert rc == 1 and "Traceback" not in err             # findings: the records behind the broken module
    rep = json.loads(out)
    [src] = rep["sources"]
    assert len(src["unreadable"]) == 1 and "attention_v1.py:" in src["unreadable"][0]
    hit = [r for r in src["results"] if any(d.startswith("cannot be checked") for d in r["details"])]
    assert hit and len(hit) < len(src["results"]) and any(r["check"] == "ok" for r in src["results"])
    assert any("do not parse" in w for w in rep["warnings"])


def test_fifos_and_devices_are_never_read(bad, tmp_path):
    "A FIFO or /dev/zero as a source: one line, at once (a subprocess, so a hang fails)."
    exe = [sys.executable, "-c", "import sys; from omni_npu_port.cli.main import main; sys.exit(main(sys.argv[1:]))"]
    for argv in (["audit", "--gpu", "/dev/zero", "--npu", str(bad / "fifo.py")],
                 ["doctor", "--source", "/dev/zero"]):
        r = subprocess.run(exe + argv, capture_output=True, text=True, timeout=120)   # a hang: TimeoutExpired
        assert r.returncode in (2, 3)
        assert r.stderr.count("\n") == 1 and ("FIFO" in r.stderr or "not a regular file" in r.stderr), r.stderr



def test_doctor_refuses_a_source_it_cannot_read_before_it_imports_torch(monkeypatch):
    "A source that cannot be read is refused before the platform is described (torch's ~1.5 s import, issue 34)."
    from omni_npu_port.sources import doctor as D
    described = []
    monkeypatch.setattr(D, "platform_report", lambda: described.append("platform") or {"versions": {}})
    with pytest.raises(D.DoctorError, match="not a regular file"): D.doctor_report(["/dev/zero"])
    assert described == []
    monkeypatch.setattr(D, "doctor_sources", lambda paths: [])          # sources that read: the platform described
    assert D.doctor_report(["readable"])["sources"] == [] and described == ["platform"]

# --- profile and bench ---------------------------------------------------------------------------------------------
def test_a_settings_ini_that_is_not_utf8_is_one_line_naming_it_in_profile_and_translate(tmp_path, monkeypatch):
    monkeypatch.delenv("OMNI_NPU_PORT_SETTINGS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.ini").write_bytes(b"[stack]\nvllm = 0.18.0 \xe9\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    rc, _, err = run(["profile"])
    assert rc == 3
    one_line(err, "profile", f"{tmp_path / 'settings.ini'}:2", "not UTF-8")
    rc, _, err = run(["translate", "--check", str(tmp_path / "a.py")])
    assert rc in (2, 3)
    one_line(err, "translate", f"{tmp_path / 'settings.ini'}:2", "not UTF-8")


def test_bench_refuses_a_huge_batch_before_allocating_and_iters_0_from_the_environment(monkeypatch):
    import omni_npu_port.cli.bench as cli_bench
    def allocates(*a, **k): raise AssertionError("the benchmark started: nothing may be allocated before the checks")
    monkeypatch.setattr(cli_bench, "run_bench", allocates)              # a refusal must come before the run
    rc, _, err = run(["bench", "--batch-sizes", "1000000000"])
    assert rc == 2
    one_line(err, "bench", "--batch-sizes", "1000000000")
    rc, _, err = run(["bench", "--batch-sizes", "1,60000"])          # within the cap, past any memory
    assert rc == 2
    one_line(err, "bench", "GiB", "smaller buckets")
    monkeypatch.setenv("OMNI_NPU_PORT_BENCH_ITERS", "0")
    rc, _, err = run(["bench", "--small", "--device", "cpu"])
    assert rc == 2
    one_line(err, "bench", "$OMNI_NPU_PORT_BENCH_ITERS", "iters")
    from omni_npu_port.bench.harness import run_bench
    monkeypatch.delenv("OMNI_NPU_PORT_BENCH_ITERS")
    with pytest.raises(ValueError, match="at least 1"): run_bench("cpu", (1,), iters=0, small=True)


# --- 7 (reading): archives read member by member, every size bounded ----------------------------------------------
def _zeros(n):
    class Zeros(io.RawIOBase):
        left = n
        def readable(self): return True
        def readinto(self, b):
            k = min(len(b), self.left); b[:k] = bytes(k); self.left -= k
            return k
    return io.BufferedReader(Zeros())


def _sdist(path, members, pax=None):
    "A gzipped tar `vllm_ascend-9.9.9/…` of {name: bytes or int (that many zeros)}; `pax`: extra pax header records."
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(f"vllm_ascend-9.9.9/{name}")
            ti.size = data if isinstance(data, int) else len(data)
            if pax and name in pax: ti.pax_headers = pax[name]
            tf.addfile(ti, _zeros(data) if isinstance(data, int) else io.BytesIO(data))
    return path


BASE = {"PKG-INFO": b"Name: vllm-ascend\nVersion: 9.9.9\n", "vllm_ascend/__init__.py": b""}


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv(readers.SDIST_CACHE_ENV, "off")


def test_a_member_past_the_cap_is_refused_before_it_is_read(tmp_path, no_cache):
    "A 2 GB `.py` of zeros (2 MB of gzip) is refused by its header: no memory spent on it."
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", {**BASE, "vllm_ascend/bomb.py": 64 << 20})
    tracemalloc.start()
    with pytest.raises(SourceError) as e: open_source(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    msg = str(e.value)
    assert str(p) in msg and "bomb.py" in msg and "MAX_MEMBER_BYTES" in msg and "$OMNI_NPU_PORT_MAX_FILE_MB" in msg
    assert peak < 8 << 20, peak


def test_the_caps_are_raised_and_lowered_by_environment_variables(tmp_path, no_cache, monkeypatch):
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", {**BASE, "vllm_ascend/a.py": b"x = 1\n" * 400,
                                                       "vllm_ascend/b.py": b"y = 2\n" * 400, "csrc/big.bin": 3 << 20})
    assert open_source(p).module_source("vllm_ascend.a").startswith("x = 1")
    open_source.__globals__["_open_file"].cache_clear()
    for env, value, cap in (("OMNI_NPU_PORT_MAX_FILE_MB", "0.001", "MAX_MEMBER_BYTES"),
                            ("OMNI_NPU_PORT_MAX_SOURCE_MB", "0.004", "MAX_SOURCE_BYTES"),
                            ("OMNI_NPU_PORT_MAX_ARCHIVE_MB", "1", "MAX_ARCHIVE_BYTES")):   # skipped members count too
        monkeypatch.setenv(env, value)
        with pytest.raises(SourceError, match=rf"\({cap}.*\${env}"): readers.tar_files(p)
        monkeypatch.delenv(env)
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "lots")
    with pytest.raises(SourceError, match="OMNI_NPU_PORT_MAX_FILE_MB='lots' is not a size"): readers.tar_files(p)
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "1e9")        # a huge cap reads a small file (read() once asked the OS for it all)
    assert readers.read_regular(PORT / "clean.py").startswith(b"# Fixture")
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "inf")
    with pytest.raises(SourceError, match="is not a size"): readers.read_regular(PORT / "clean.py")


def test_a_huge_pax_header_is_refused_before_tarfile_reads_it(tmp_path, no_cache, monkeypatch):
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", {**BASE, "vllm_ascend/a.py": b"x = 1\n"},
               pax={"vllm_ascend/a.py": {"comment": "c" * 50_000}})
    assert readers.tar_files(p)["vllm_ascend/a.py"] == b"x = 1\n"
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "0.01")
    with pytest.raises(SourceError, match="the header of"): readers.tar_files(p)


def test_a_wheel_member_past_the_cap_is_refused_by_its_stated_size(tmp_path, monkeypatch):
    w = tmp_path / "vllm_ascend-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(w, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("vllm_ascend/__init__.py", "")
        z.writestr("vllm_ascend/big.py", "x = 1\n" * 100_000)
    t = open_source(w)
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "0.1")
    with pytest.raises(SourceSyntaxError) as e: t.module_ast("vllm_ascend.big")     # one module: skipped, named
    assert f"{w}/vllm_ascend/big.py" in str(e.value) and "$OMNI_NPU_PORT_MAX_FILE_MB" in str(e.value)
    rc, _, err = run(["doctor", "--source", str(tmp_path / "missing.whl")])
    assert rc == 3 and err.count("\n") == 1


def test_a_real_sdist_reads_within_the_default_caps(release_source):
    "The largest real release sdist read so far (vllm 0.34.0: 147 MB in 10,296 members) fits the default caps."
    from omni_npu_port.sources.fetch import fetch_package
    assert len(readers.tar_files(fetch_package("vllm==0.34.0", kind="sdist"))) > 1000


# --- a little fuzzing of the command line -------------------------------------------------------------------------
VALUES = ["0", "-1", "abc", "", "main", "0.18.0", "vllm-ascend==0.0.0", "é", ":", "x:y.z", "a@", "@0.18.0", "/", "/proc",
          "/nonexistent/x.py", "/dev/zero", "vllm-ascend==nope", "-"]
GOOD = {"audit": str(AUDIT / "old_layout"), "doctor": None}
METHODS = {"--gpu-base": "GPUModelRunner._dummy_run", "--gpu-omni": "OmniGPUModelRunner._dummy_run",
           "--npu-base": "NPUModelRunner._dummy_run", "--against": "NPUModelRunner._dummy_run"}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_command_lines_end_in_one_line_or_a_result_never_a_traceback(bad, data):
    "audit / port / doctor / profile / catalog with their required options, each a good input or a bad file or value."
    files = [str(bad / n) for n in ("latin.py", "binary.py", "nul.py", "syntax.py", "fifo.py", "tree_nul", "tree_syntax", "asc_syntax")]
    pick = lambda good: data.draw(st.sampled_from([good, good, *files, *VALUES]))
    cmd = data.draw(st.sampled_from(["audit", "port", "doctor", "profile", "catalog"]))
    argv = [cmd]
    if cmd == "audit":   # never a release that exists: an audit of one ports two releases (a minute each)
        no_release = lambda good: data.draw(st.sampled_from([good, good, *files, *(v for v in VALUES if v != "0.18.0")]))
        argv += ["--gpu", no_release(GOOD["audit"]), "--npu", no_release(GOOD["audit"])]
        argv += data.draw(st.sampled_from([[], ["--source", pick(str(bad / "asc_syntax"))], ["--target", pick("0.18.0")], ["--json"]]))
    elif cmd == "port":
        clean = PORT / "clean.py"
        for opt, meth in METHODS.items():
            if opt == "--against" and data.draw(st.booleans()): continue
            src = pick(str(clean))
            argv += [opt, f"{src}:{meth}" if data.draw(st.integers(0, 3)) else src]
        argv += data.draw(st.sampled_from([[], ["--source", pick(str(clean))], ["--class"], ["--line-length", pick("100")]]))
    elif cmd == "doctor": argv += ["--json", "--source", pick(str(bad / "asc_syntax"))]
    elif cmd == "catalog": argv += data.draw(st.sampled_from([["--json"], ["--target", pick("0.18.0")], ["--family", pick("attention")]]))
    argv += data.draw(st.sampled_from([[], [], ["--bogus"]]))
    rc, _, err = run(argv)
    assert rc in (0, 1, 2, 3), (argv, rc)
    assert "Traceback" not in err and "unexpected" not in err, (argv, err)
    if rc in (2, 3): assert sum(": error: " in l for l in err.splitlines()) == 1, (argv, err)


def test_a_reader_that_goes_away_ends_the_command_quietly():
    "`omni-npu-port catalog --json | head -c 10`: no error line, exit 141 (128 + SIGPIPE), as a shell reports it."
    import subprocess, sys
    p = subprocess.Popen([sys.executable, "-c", "import sys; from omni_npu_port.cli.main import main; sys.exit(main(['catalog', '--json']))"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                         # the reader is gone before the first write
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and "error" not in err, err


# ---------------------------------------------------------------- issue 22: bounded memory, never the OOM killer

def _generated(path: Path, size: int) -> Path:
    "A generated module of about `size` bytes in which every function holds a GPU-ism (the translator's worst case)."
    parts, i, n = ["import torch\n"], 0, 0
    while n < size:
        s = f"def f{i}(x):\n    if torch.cuda.is_available():\n        x = x.cuda()\n    return x + {i}\n\n"
        parts.append(s); n += len(s); i += 1
    path.write_text("".join(parts))
    return path


def _translate_args(tmp_path: Path, src: Path) -> list:
    "`translate SRC -o OUT --target vllm-ascend==0.18.0`."
    return ["translate", str(src), "-o", str(tmp_path / "out"), "--target", "vllm-ascend==0.18.0"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_file_past_the_cap_is_refused_in_one_line_under_a_memory_limit(tmp_path, cli_under_rlimit):
    ("Reproduction 3: translate did not apply OMNI_NPU_PORT_MAX_FILE_MB (a 50 MB file met the OOM killer). Now a file "
     "past the cap is one ONP9003 line naming it and the cap, read no further, exit 3, in a process capped at 200 MB "
     "more.")
    big = _generated(tmp_path / "big.py", 600_000)
    p = cli_under_rlimit(_translate_args(tmp_path, big), 200, {"OMNI_NPU_PORT_MAX_FILE_MB": "0.5"})
    assert p.returncode == 3, p.stderr
    [line] = [l for l in p.stderr.splitlines() if "ONP9003" in l]
    assert str(big) in line and "524288 bytes" in line and "OMNI_NPU_PORT_MAX_FILE_MB" in line


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_file_the_memory_left_cannot_translate_is_refused_not_fatal(tmp_path, cli_under_rlimit):
    ("Reproduction 3b: under a memory cap the failure was 'nested too deeply', or libcst's native parser aborted the "
     "process. Now: one ONP9006 line saying memory is short, naming what it needs; the run goes on (exit 3, no "
     "signal).")
    big = _generated(tmp_path / "big.py", 400_000)      # ~280 MB to translate; the child may take 120 MB more
    ok = tmp_path / "ok.py"; ok.write_text("import torch\ntorch.cuda.synchronize()\n")
    p = cli_under_rlimit(_translate_args(tmp_path, tmp_path), 120, {})
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    [line] = [l for l in p.stderr.splitlines() if "ONP9006" in l]
    assert "big.py" in line and "not enough memory" in line and "nested" not in line
    assert "torch.npu" in (tmp_path / "out" / "ok.py").read_text()
