"""`port --release`: a whole vLLM-Omni release ported, its inputs found by themselves (issue 17).

Fast tests run on tests/fixtures/release/ (a tiny vllm 0.18.0, an older vllm 0.17.0, vllm-ascend 0.18.0rc1 and a
vLLM-Omni 0.97.0 checkout, written for these tests); one slow test ports the real vLLM-Omni 0.30.0 from the cache."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.catalog import OMNI_PAIRING, OmniPairing, ascend_of_line, omni_history, omni_pairing
from omni_npu_port.core.errors import UsageError
from omni_npu_port.core.io import OutputExists
from omni_npu_port.port.locate import forget_trees
from omni_npu_port.port.merge import keep_side
from omni_npu_port.cli.options import DownloadBar
from omni_npu_port.core.io import Step
from omni_npu_port.port.release import (DEFAULT_LAYOUT, REPORT_JSON, check_method, choose_inputs,
                                        fetch_release, open_release, port_release, write_release)
from omni_npu_port.sources.fetch import FetchError

FIX = Path(__file__).parent / "fixtures" / "release"
SOURCES = [FIX / "vllm", FIX / "vllm_ascend", FIX / "vllm_old"]
UNREACHABLE = "http://127.0.0.1:9/pypi"   # nothing listens on the discard port: the network is "down"


def fixture_port(omni=FIX / "omni", **kw):
    return port_release(omni, sources=SOURCES, **{"history": ["0.17.0"], **kw})


# ---------------------------------------------------------------------------------------------- pairing
def test_pairing_comes_from_the_catalog_and_is_inferred_from_the_package_otherwise():
    row = omni_pairing("0.30.0")
    assert row == OmniPairing("0.30.0", OMNI_PAIRING["0.30.0"][0], OMNI_PAIRING["0.30.0"][1], OMNI_PAIRING["0.30.0"][2])
    assert not row.inferred
    pinned = omni_pairing("0.95.0", ["Name: vllm-omni\nRequires-Dist: vllm==0.26.0\nRequires-Dist: torch\n"])
    assert pinned.inferred and pinned.vllm == "0.26.0" and pinned.vllm_ascend == ascend_of_line("0.26.0") and "pins" in pinned.evidence
    # a README names several releases: only the line about this one counts
    readme = "- [0.36.0](a) - aligned with the vLLM 0.36 release line\n- [0.34.0](b) - aligned with vLLM 0.34\n"
    assert omni_pairing("0.34.0", [readme]).vllm.startswith("0.34") and omni_pairing("0.36.0", [readme]).vllm.startswith("0.36")
    assert omni_pairing("0.93.0", ["no pairing said here"]) is None


def test_history_reaches_back_three_omni_releases():
    hist = omni_history("0.30.0", "0.30.0", "0.30.0rc1")
    assert hist == sorted(hist, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    assert hist[0] == "0.29.0" and hist[-1] == OMNI_PAIRING["0.24.0"][0]   # the vllm of vLLM-Omni 0.24.0
    assert "0.30.0" not in hist


def test_inputs_infer_the_pairing_and_take_the_target():
    tree = open_release(FIX / "omni")
    got = choose_inputs(tree)
    assert (got.vllm, got.vllm_ascend, got.pairing.inferred) == ("0.18.0", "0.18.0rc1", True)
    assert [d.code for d in got.diagnostics] == ["ONP4301"]
    assert choose_inputs(tree, "vllm-ascend==0.18.0").vllm_ascend == "0.18.0"
    assert choose_inputs(tree, history=[]).history == []
    with pytest.raises(UsageError): choose_inputs(tree, "vllm==0.18.0")


# ---------------------------------------------------------------------------------------------- the port
def test_every_runner_is_ported_into_the_release_layout():
    res = fixture_port()
    assert [r.gpu.rsplit(".", 1)[1] for r in res.runners] == ["OmniGPUModelRunner", "GPUARModelRunner"]   # base first
    assert [(r.cls, r.path) for r in res.runners] == [
        ("OmniNPUModelRunner", "vllm_omni/worker/npu/npu_model_runner.py"),   # the hand-written runners' place and names
        ("NPUARModelRunner", "vllm_omni/worker/npu/npu_ar_model_runner.py")]
    assert res.layout == "vllm_omni.worker.npu" and res.runners[0].hand.endswith("OmniNPUModelRunner")
    base = res.runners[0].code
    assert "----Omni-new----" in base and "set_ascend_forward_context" in base and "torch.npu.current_stream" in base
    assert "self.omni_warmup(num_tokens)" in base and "from vllm_ascend.worker.model_runner_v1 import NPUModelRunner" in base
    assert res.compiles and res.lost == 0 and res.conflicts == 0
    # the runner on vllm's other GPU runner class is named, not ported
    assert [c.rsplit(".", 1)[1] for c, _ in res.skipped] == ["OmniV2ModelRunner"]
    assert {"ONP4301", "ONP4302"} <= {d.code for d in res.diagnostics}
    ar = {m.name: m for m in res.runners[1].methods}
    assert set(ar) == {"sample_tokens", "apply_talker_mask"} and ar["sample_tokens"].omni_added == 1


def test_a_derived_runner_derives_from_its_base_runners_port(tmp_path):
    ("GPUARModelRunner(OmniGPUModelRunner): its port derives from the port of OmniGPUModelRunner and ports only its "
     "own methods; written into a copy of the checkout, the modules import (fixture vllm / vllm-ascend, CPU torch) and "
     "the derived class reaches the base port's methods through Python's own MRO.")
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    res = fixture_port(omni)
    base, ar = res.runners
    assert (base.parent, ar.parent) == (None, "OmniNPUModelRunner")
    assert "class NPUARModelRunner(GPUARModelRunner, OmniNPUModelRunner):" in ar.code
    assert "from vllm_omni.worker.npu.npu_model_runner import OmniNPUModelRunner" in ar.code
    assert "_dummy_run" in {m.name for m in base.methods} and "def _dummy_run" not in ar.code   # not ported twice
    write_release(res, tmp_path / "out")              # never into the checkout it read (issue 22): copied in after
    shutil.copytree(tmp_path / "out" / "vllm_omni", omni / "vllm_omni", dirs_exist_ok=True)
    probe = (f"import sys; sys.path[:0] = {[str(omni), str(FIX / 'vllm'), str(FIX / 'vllm_ascend')]!r}\n"
             "from vllm_omni.worker.npu.npu_ar_model_runner import NPUARModelRunner as A\n"
             "from vllm_omni.worker.npu.npu_model_runner import OmniNPUModelRunner as B\n"
             "print(' '.join(c.__name__ for c in A.__mro__), A._dummy_run is B._dummy_run, B._dummy_run.__module__)")
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["NPUARModelRunner", "GPUARModelRunner", "OmniNPUModelRunner", "OmniGPUModelRunner",
                                  "NPUModelRunner", "GPUModelRunner", "object", "True", "vllm_omni.worker.npu.npu_model_runner"]


def test_a_derived_runner_needs_its_bases_plan_not_its_port():
    ("The AR runner ported alone (its base's port never made) is the AR runner of the whole release port; so is a port "
     "in two processes at once.")
    from omni_npu_port.port import release
    seen, real = [], release.port_runner
    def spy(*args):
        seen.append((args[1].cls, [p[0] for p in args[8]])); return real(*args)
    release.port_runner = spy
    try: res = fixture_port()
    finally: release.port_runner = real
    assert seen == [("OmniNPUModelRunner", []), ("NPUARModelRunner", ["OmniNPUModelRunner"])]
    base, ar = res.runners
    g = release.release_runners(release.open_release(FIX / "omni")).gpu[1]
    alone = release.port_runner(g, release.Placement(ar.module, ar.cls), str(FIX / "omni"), *_bases(), [release.locate_base(str(FIX / "vllm_old"), _gsym())],
                          (str(FIX / "vllm"),), "comment", [(base.cls, base.module, base.gpu)])
    assert alone.code == ar.code and alone.parent == "OmniNPUModelRunner"
    par = fixture_port(workers=2)
    assert [(r.parent, r.code) for r in par.runners] == [(r.parent, r.code) for r in res.runners]


def _gsym():
    from omni_npu_port.port.runners import runner_bases
    return runner_bases()[0][0]


def _bases():
    from omni_npu_port.port.runners import runner_bases
    from omni_npu_port.port import release
    return release.locate_base(str(FIX / "vllm"), runner_bases()[0][0]), release.locate_base(str(FIX / "vllm_ascend"), runner_bases()[1][0])


def test_history_turns_a_stale_omni_line_into_the_npu_side():
    without, with_history = fixture_port(history=[]), fixture_port()
    assert without.conflicts > 0 == with_history.conflicts
    assert any(d.code == "ONP4012" for r in with_history.runners for d in r.diagnostics)
    # by default a conflict keeps the NPU side live and comments the omni side out: the module compiles, the conflict
    # is still counted, and the commented omni lines count as a side of it (not lost)
    assert without.compiles and without.lost == 0 and "# <<<<<<< ONP4001" in without.runners[0].code
    marked = fixture_port(history=[], prefer="markers")   # git-style markers: it compiles once resolved to a side
    assert marked.conflicts == without.conflicts and marked.lost == 0
    assert not marked.runners[0].compiles and marked.runners[0].compiles_npu_side
    assert keep_side(marked.runners[0].code, 1) == keep_side(without.runners[0].code, 1) != keep_side(without.runners[0].code, 0)


def test_a_commented_conflict_side_is_read_as_a_side_not_lost():
    npu = "def f(self):\n    a = npu()\n    return a\n"
    omni = "def f(self):\n    a = omni()\n    log(a)\n    return a\n"
    base = "def f(self):\n    a = base()\n    return a\n"
    port = ("def f(self):\n    # <<<<<<< ONP4001 conflict: NPU base (kept)\n    a = npu()\n    # ======= omni (commented out)\n"
            "    # a = omni()\n    # log(a)\n    # >>>>>>>\n    return a\n")
    compile(port, "<port>", "exec")
    m = check_method("f", "merge", port, omni, omni, base, base, npu)
    assert (m.omni_added, m.omni_missing, m.lost) == (2, 0, 0)
    gone = check_method("f", "merge", port.replace("    # log(a)\n", ""), omni, omni, base, base, npu)
    assert gone.unexplained == ["omni: log(a)"]   # a line missing from the commented side too is lost


def test_prefer_npu_writes_modules_that_compile_and_says_what_it_dropped():
    res = fixture_port(history=[], prefer="npu")
    assert res.conflicts == 0 and res.compiles and res.lost == 0
    assert any(d.code == "ONP4008" for r in res.runners for d in r.diagnostics)
    assert sum(m.omni_explained for r in res.runners for m in r.methods) >= 1   # the omni side dropped, said by ONP4008


def test_port_release_takes_port_options_like_its_keywords():
    from omni_npu_port.core.errors import UsageError
    from omni_npu_port.port.method import PortOptions
    by_kw, by_opts = fixture_port(history=[], prefer="npu"), fixture_port(history=[], options=PortOptions(prefer="npu"))
    assert [r.code for r in by_opts.runners] == [r.code for r in by_kw.runners] and by_opts.conflicts == by_kw.conflicts == 0
    assert [r.code for r in fixture_port(history=[]).runners] != [r.code for r in by_kw.runners]   # the policy reached the port
    for bad in (dict(prefer="git"), dict(options=PortOptions(fence=False)), dict(options=PortOptions(), prefer="omni")):
        with pytest.raises(UsageError):
            fixture_port(history=[], **bad)


def test_a_release_without_npu_runners_gets_the_default_layout(tmp_path):
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    shutil.rmtree(omni / "vllm_omni" / "worker" / "npu")
    res = fixture_port(omni)
    assert res.layout == DEFAULT_LAYOUT and "default" in res.layout_from
    assert [r.path for r in res.runners] == ["vllm_omni/platforms/npu/worker/npu_model_runner.py",
                                             "vllm_omni/platforms/npu/worker/npu_ar_model_runner.py"]
    assert [r.hand for r in res.runners] == [None, None]


def test_the_report_renders_and_writes_without_clobbering(tmp_path):
    res = fixture_port()
    md, html = res._repr_markdown_(), res._repr_html_()
    assert "NPUARModelRunner" in md and "ONP4302" in md and "<table" in html and "0.97.0" in html and "text-align:left" in html
    written = write_release(res, tmp_path)
    report = json.loads((tmp_path / REPORT_JSON).read_text())
    assert report["summary"] == {"runners": 2, "methods": res.methods, "conflicts": 0, "lost_lines": 0, "compiles": True,
                                 "ready": res.ready}
    assert report["pairing"]["inferred"] and report["runners"][1]["methods"][0]["name"]
    for r in res.runners: compile((tmp_path / r.path).read_text(), r.path, "exec")
    before = (tmp_path / res.runners[0].path).read_text()
    (tmp_path / res.runners[0].path).write_text("# mine\n")
    with pytest.raises(OutputExists): write_release(res, tmp_path)
    assert (tmp_path / res.runners[0].path).read_text() == "# mine\n"
    assert write_release(res, tmp_path, force=True) == written and (tmp_path / res.runners[0].path).read_text() == before


def test_the_json_report_carries_every_field_of_each_diagnostic(tmp_path):
    "port-report.json writes each diagnostic whole (`Diagnostic.to_dict`), the same record as the other tools' JSON."
    res = fixture_port()
    write_release(res, tmp_path)
    report = json.loads((tmp_path / REPORT_JSON).read_text())
    assert report["diagnostics"] and len(report["diagnostics"]) == len(res.diagnostics)
    for written, d in zip(report["diagnostics"], res.diagnostics):
        assert written == json.loads(json.dumps(d.to_dict()))
        assert {"code", "message", "path", "line", "column", "where", "severity", "title"} <= set(written)
    for r_json, r in zip(report["runners"], res.runners):
        assert [d["code"] for d in r_json["diagnostics"]] == [d.code for d in r.diagnostics]
        assert all("title" in d for d in r_json["diagnostics"] + r_json["not_ready"])


# ---------------------------------------------------------------------------------------------- faithfulness
def test_faithfulness_names_what_the_port_lost():
    npu = "def f(self):\n    a = npu_setup()\n    b = run()\n    return b\n"
    omni = "def f(self):\n    b = run()\n    log(b)\n    return b\n"
    base = "def f(self):\n    b = run()\n    return b\n"
    kept = "def f(self):\n    a = npu_setup()\n    b = run()\n    log(b)\n    return b\n"
    m = check_method("f", "merge", kept, omni, omni, base, base, npu)
    assert (m.npu_lines, m.npu_missing, m.omni_added, m.omni_missing, m.lost) == (4, 0, 1, 0, 0)
    lost = check_method("f", "merge", "def f(self):\n    b = run()\n    return b\n", omni, omni, base, base, npu)
    assert lost.unexplained == ["NPU base: a = npu_setup()", "omni: log(b)"]
    # an explicit NPU base call reaches the NPU lines; a line omni deletes from vllm's is not lost
    reached = check_method("f", "super-call", "def f(self):\n    b = NPU.f(self)\n    log(b)\n    return b\n", omni, omni, base, base, npu)
    assert reached.npu_reached >= 1 and reached.lost == 0
    deleting = check_method("f", "merge", "def f(self):\n    return run()\n", "def f(self):\n    return run()\n",
                            "def f(self):\n    return run()\n", base, base, base)
    assert deleting.omni_deleted == 2 and deleting.lost == 0
    # layout, comments and split strings are not differences
    wrapped = check_method("f", "merge", 'def f(self):\n    x = g(\n        "a" "b",  # c\n    )\n', 'def f(self):\n    x = g("ab")\n',
                           'def f(self):\n    x = g("ab")\n')
    assert wrapped.omni_missing == 0


# ---------------------------------------------------------------------------------------------- offline, command line
def test_offline_a_missing_release_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(FetchError) as e:
        fetch_release("vllm-omni==0.0.1", cache_dir=tmp_path, index=UNREACHABLE)
    msg = str(e.value)
    assert "\n" not in msg and "vllm-omni==0.0.1" in msg and str(tmp_path) in msg and "pypi.org/project/vllm-omni/0.0.1" in msg


def test_offline_from_the_command_line_no_traceback(tmp_path):
    env = {**os.environ, "OMNI_NPU_PORT_CACHE": str(tmp_path), "https_proxy": "http://127.0.0.1:9",
           "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}
    p = subprocess.run([sys.executable, "-c", "import sys; from omni_npu_port.cli.main import entry; sys.exit(entry())",
                        "port", "--release", "0.0.1", "-o", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120)
    err = [l for l in p.stderr.splitlines() if not l.startswith("omni-npu-port: fetching")]
    assert p.returncode == 3 and len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "vllm-omni==0.0.1" in err[0] and str(tmp_path) in err[0]


def test_the_command_writes_the_modules_and_refuses_what_release_finds_itself(tmp_path):
    args = ["port", "--release", str(FIX / "omni"), "--source", *map(str, SOURCES), "--history", "0.17.0", "-o", str(tmp_path)]
    with contextlib.redirect_stdout(out := io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(args) == 0
    assert "2 runner class(es)" in out.getvalue() and (tmp_path / "vllm_omni/worker/npu/npu_ar_model_runner.py").is_file()
    assert (tmp_path / REPORT_JSON).is_file()   # as nbs/cli/port.ipynb's example (not run there) says
    for extra in (["--gpu-omni", "x.py:A"], ["--class"], ["--super", "call"], ["-j", "0"]):
        with contextlib.redirect_stderr(err := io.StringIO()):
            assert main(args + ["--force"] + extra) == 2, extra
        assert err.getvalue().count("\n") == 1
    with contextlib.redirect_stderr(err := io.StringIO()):
        assert main(args) == 2 and "--force" in err.getvalue()   # the report is there already
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["port", "--gpu-base", "a.py:A", "--gpu-omni", "b.py:B", "--npu-base", "c.py:C", "--history", "0.1.0"]) == 2


# ---------------------------------------------------------------------------------------------- a real release
@pytest.mark.slow
def test_the_real_0_30_0_release(release_source, real_release_port):
    tree = release_source("vllm-omni==0.30.0")
    res = real_release_port("0.30.0")                      # the version, read from the package cache: the same file
    assert Path(res.origin) == Path(tree.origin), (res.origin, tree.origin)
    assert res.history == omni_history("0.30.0", "0.30.0", "0.30.0rc1") and res.vllm_ascend == "0.30.0rc1"
    assert {r.cls for r in res.runners} == {"OmniNPUModelRunner", "NPUARModelRunner", "NPUGenerationModelRunner"}
    assert res.layout == "vllm_omni.platforms.npu.worker"
    assert res.lost == 0 and all(r.compiles_npu_side for r in res.runners)
    assert all(c.split(".")[1] == "worker_v2" for c, _ in res.skipped)


def test_a_method_whose_header_sits_in_a_conflict_is_one_method():
    "Both sides' `def` lines inside a conflict belong to one method (else its first part would be judged lost)."
    from omni_npu_port.port.release import method_chunks
    code = ("class A(B):\n    @deco\n    def f(self):\n        return 1\n    <<<<<<< NPU base\n    def f(self, x):\n"
            "        return x\n    =======\n    >>>>>>> omni\n\n    def g(self):\n        pass\n")
    chunks = method_chunks(code, "A")
    assert list(chunks) == ["f", "g"] and "@deco" in chunks["f"] and "return 1" in chunks["f"] and "return x" in chunks["f"]


def test_a_checkout_that_states_no_version_is_ported_and_said_so_or_told_its_version(tmp_path):
    "A versionless checkout with --target: ported, with a note that no history was chosen; PATH@VERSION names its release."
    from omni_npu_port.core.errors import UsageError
    from omni_npu_port.port.release import port_release
    import shutil
    stack = Path(__file__).parent / "fixtures" / "generalize" / "stack"
    src = (str(stack / "vllm"), str(stack / "vllm_ascend"))
    omni = tmp_path / "checkout"   # the fixture states its version; a git checkout states none
    shutil.copytree(stack / "omni_new", omni, ignore=shutil.ignore_patterns("_version.py", "__pycache__"))
    r = port_release(str(omni), target="vllm-ascend==0.18.0", sources=src, out=tmp_path / "a", history="auto")
    notes = [d.message for d in r.diagnostics if d.code == "ONP4301"]
    assert any("states no version" in m for m in notes)
    with pytest.raises(UsageError, match="is not a version"):
        port_release(f"{omni}@banana", target="vllm-ascend==0.18.0", sources=src, out=tmp_path / "b")
    r2 = port_release(f"{omni}@0.18.0", target="vllm-ascend==0.18.0", sources=src, out=tmp_path / "c", history=[])
    assert not any("states no version" in d.message for d in r2.diagnostics)


def test_a_download_says_what_it_fetches_and_draws_a_byte_bar_on_a_terminal(tmp_path):
    import hashlib
    payload = os.urandom(3 << 20)   # three 1 MiB chunks
    idx, files = tmp_path / "index" / "vllm-ascend" / "9.9.9", tmp_path / "files"
    idx.mkdir(parents=True); files.mkdir()
    (files / "vllm_ascend-9.9.9.tar.gz").write_bytes(payload)
    (idx / "json").write_text(json.dumps({"urls": [{"filename": "vllm_ascend-9.9.9.tar.gz", "url": f"file://{files}/vllm_ascend-9.9.9.tar.gz",
                                                    "size": len(payload), "digests": {"sha256": hashlib.sha256(payload).hexdigest()},
                                                    "packagetype": "sdist"}]}))
    said = []
    got = fetch_release("vllm-ascend==9.9.9", said.append, tmp_path / "cache", index=f"file://{tmp_path / 'index'}")
    assert got.read_bytes() == payload
    steps = [e for e in said if isinstance(e, Step)]   # the library reports the bytes; it draws nothing
    assert steps and steps[-1] == Step("vllm-ascend==9.9.9", len(payload), len(payload))
    said = [e for e in said if isinstance(e, str)]
    assert said[0].startswith("fetching vllm-ascend==9.9.9") and said[1].startswith("fetched vllm_ascend-9.9.9.tar.gz (3.0 MiB) in")
    assert fetch_release("vllm-ascend==9.9.9", said.append, tmp_path / "cache") == got and len(said) == 2   # cached: silent

    class Terminal(io.StringIO):
        def isatty(self): return True
    tty, pipe = Terminal(), io.StringIO()
    for out in (tty, pipe):
        bar = DownloadBar("vllm-ascend==9.9.9", out)
        for k in (1, 2, 3): bar(k << 20, 3 << 20)
    assert "vllm-ascend==9.9.9" in tty.getvalue() and "3.1/3.1 MB" in tty.getvalue() and pipe.getvalue() == ""


# ---------------------------------------------------------------------------------------------- issue 22: inputs and outputs

@pytest.mark.parametrize("damage", ["nul", "syntax", "fifo"])
def test_a_runner_module_that_cannot_be_read_is_a_coded_error_naming_it(tmp_path, damage, capsys):
    ("Reproduction 4: a NUL byte or a syntax error in one runner module ported 2 runners instead of 3 without a word; "
     "a FIFO as a runner module gave 'no runner class derives from'. Now: ONP4304 naming the file, the rest ported, "
     "exit 1.")
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    if damage == "nul": ar.write_bytes(ar.read_bytes().replace(b"\n", b"\n\0", 1))
    elif damage == "syntax": ar.write_text(ar.read_text() + "\ndef broken(:\n")
    else: ar.unlink(); os.mkfifo(ar)
    res = fixture_port(omni)
    assert [r.gpu.rsplit(".", 1)[1] for r in res.runners] == ["OmniGPUModelRunner"]      # what can be ported, is
    [bad] = [d for d in res.diagnostics if d.code == "ONP4304"]
    assert str(ar) in bad.message and bad.severity == "error"
    rc = main(["port", "--release", f"{omni}@0.97.0", "-o", str(tmp_path / "out"), *sum((["--source", str(s)] for s in SOURCES), []),
               "--history", "0.17.0"])
    out = capsys.readouterr()
    assert rc == 1 and "gpu_ar_model_runner.py" in out.out + out.err


def test_a_runner_whose_base_module_is_unreadable_says_so_not_a_false_ancestry(tmp_path):
    ("Reproduction 4's other half: a runner deriving from a runner in a module that does not parse was left out as "
     "'derives from X, not <vllm's base>' (a false ancestry claim). Now its reason names the unreadable module "
     "(ONP4304's).")
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    (omni / "vllm_omni" / "worker" / "gpu_x_model_runner.py").write_text(
        "from vllm_omni.worker.gpu_ar_model_runner import GPUARModelRunner\n\n\n"
        "class GPUXModelRunner(GPUARModelRunner):\n    def extra(self, x):\n        return x\n")
    ported = fixture_port(omni)
    assert "GPUXModelRunner" in {r.gpu.rsplit(".", 1)[1] for r in ported.runners}   # the fixture is a runner while AR reads
    omni = shutil.copytree(omni, tmp_path / "damaged")   # a fresh path: trees are cached by path within a process
    ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    ar.write_text(ar.read_text() + "\ndef broken(:\n")
    res = fixture_port(omni)
    assert [r.gpu.rsplit(".", 1)[1] for r in res.runners] == ["OmniGPUModelRunner"]
    [why] = [w for c, w in res.skipped if c.endswith(".GPUXModelRunner")]
    assert str(ar) in why and "cannot be read or parsed" in why and "ONP4304" in why and " not vllm" not in why
    [bad] = [d for d in res.diagnostics if d.code == "ONP4304"]
    assert str(ar) in bad.message


def _port_args(tmp_path: Path, omni: Path) -> list:
    "`port --release OMNI -o OUT` on the fixture stack."
    return ["port", "--release", f"{omni}@0.97.0", "-o", str(tmp_path / "out"), "--history", "0.17.0",
            *sum((["--source", str(s)] for s in SOURCES), [])]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
@pytest.mark.parametrize("cap", ["memory", "file"])
def test_a_runner_module_too_large_to_port_is_refused_in_one_line_not_fatal(tmp_path, cap, cli_under_rlimit):
    ("Reproduction 3's port half: a 16 MB runner module (under the 16 MB cap) took 5.2 GB. Now a module whose size "
     "times PORT_BYTES_PER_BYTE is past the memory left (or past OMNI_NPU_PORT_MAX_FILE_MB) is ONP4304 naming the file "
     "and the limit, before `ast` reads it; the other runner is ported, exit 1, no signal, in a process capped at 150 "
     "MB more.")
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    extra = "".join(f"\n    def extra_{i}(self, x):\n        if torch.cuda.is_available():\n            x = x.cuda()\n"
                    f"        return x + {i}\n" for i in range(5000))   # ~500 KB: ~430 MB to port
    ar.write_text(ar.read_text() + extra)
    p = cli_under_rlimit(_port_args(tmp_path, omni), 150, {"OMNI_NPU_PORT_MAX_FILE_MB": "0.25"} if cap == "file" else {})
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    out = p.stdout + p.stderr
    [line] = [l for l in out.splitlines() if "ONP4304" in l and "gpu_ar_model_runner.py" in l]
    assert ("MiB of memory left" in line) if cap == "memory" else ("OMNI_NPU_PORT_MAX_FILE_MB" in line), line
    report = json.loads((tmp_path / "out" / REPORT_JSON).read_text())
    assert [r["gpu"].rsplit(".", 1)[1] for r in report["runners"]] == ["OmniGPUModelRunner"]


def test_the_release_port_never_writes_into_its_input_or_through_a_link(tmp_path):
    ("Reproduction 6: `port --release co@X -o co --force` overwrote the checkout's hand-written NPU runners; a linked "
     "folder inside -o was written through. Now both are refused before anything is written (translate's ONP9005 "
     "rules).")
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    before = {p: p.read_bytes() for p in omni.rglob("*.py")}
    res = fixture_port(omni)
    with pytest.raises(UsageError, match="inside the input tree"): write_release(res, omni, force=True)
    with pytest.raises(UsageError, match="inside the input tree"): write_release(res, omni / "vllm_omni", force=True)
    elsewhere = tmp_path / "elsewhere"; elsewhere.mkdir()
    out = tmp_path / "out"; (out / "vllm_omni" / "worker").mkdir(parents=True)
    (out / "vllm_omni" / "worker" / "npu").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UsageError, match="outside the output folder"): write_release(res, out, force=True)
    assert list(elsewhere.iterdir()) == [] and {p: p.read_bytes() for p in omni.rglob("*.py")} == before


def test_a_link_in_an_sdist_as_a_runner_module_is_named_not_dropped(tmp_path, monkeypatch):
    "Reproduction 4b: a tar link as `gpu_ar_model_runner.py` gave no word at all (or 'no runner class derives from')."
    import tarfile
    monkeypatch.setenv("OMNI_NPU_PORT_SDIST_CACHE", str(tmp_path / "sdist-cache"))
    sdist = tmp_path / "vllm_omni-0.97.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for p in sorted((FIX / "omni").rglob("*")):
            rel = p.relative_to(FIX / "omni").as_posix()
            if p.is_dir() or "__pycache__" in rel: continue
            if rel == "vllm_omni/worker/gpu_ar_model_runner.py":
                ti = tarfile.TarInfo(f"vllm_omni-0.97.0/{rel}"); ti.type, ti.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tf.addfile(ti); continue
            tf.add(p, f"vllm_omni-0.97.0/{rel}")
    for _ in range(2):   # unpacked, then read from the sdist cache: the same answer
        res = fixture_port(sdist)
        assert [r.gpu.rsplit(".", 1)[1] for r in res.runners] == ["OmniGPUModelRunner"]
        [bad] = [d for d in res.diagnostics if d.code == "ONP4304"]
        assert "gpu_ar_model_runner.py" in bad.message and "symbolic link" in bad.message
        forget_trees()


# The one port below keeps two of the release's three runner modules (the base runner and the AR runner deriving from
# it; the generation runner, the costliest to port, is left out: ~5 s of CPU) and mutates each with a line break Python
# does not see and one ending, so the pairs a port each carried before (form feed + CRLF, record separator + tabs) and a
# third (form feed + tabs) are all in it: module -> (the break above `_dummy_run`, the break in method bodies, ending).
MUTATIONS = {"gpu_ar_model_runner.py": ("\x0c", "\x0c", "crlf"), "gpu_model_runner.py": ("\x0c", "\x1e", "tabs")}
RUNNER_MODULES = ("gpu_ar_model_runner.py", "gpu_generation_model_runner.py", "gpu_model_runner.py")


@pytest.mark.slow
def test_the_real_runners_mutated_as_python_still_reads_them_lose_nothing(release_source, tmp_path):
    ("Reproduction 5 (and the fuzz of item 5): the real 0.30.0 base and AR runner modules with line breaks that "
     "Python does not see as line breaks (a form feed or \\x1e in a comment above `_dummy_run` and inside methods), "
     "then CRLF endings or tab indentation: every module parses, no statement is lost (a form feed once dropped 18 omni "
     "statements: the merge split lines with str.splitlines; tab indentation gave a module with a TabError and 47 "
     "statements lost).")
    import ast
    import re
    import zipfile
    tree = release_source("vllm-omni==0.30.0", kind="wheel")
    co = tmp_path / "co"
    with zipfile.ZipFile(tree.origin) as z:
        for n in z.namelist():
            if n.startswith("vllm_omni/") and n.endswith(".py"): (co / n).parent.mkdir(parents=True, exist_ok=True); (co / n).write_bytes(z.read(n))
    runners = sorted((co / "vllm_omni" / "worker").glob("gpu*runner*.py"))
    assert [f.name for f in runners] == list(RUNNER_MODULES), "the release's runner modules are not the ones known"
    for f in runners:
        if f.name not in MUTATIONS: f.unlink(); continue
        above, inside, ends = MUTATIONS[f.name]
        t = f.read_text()
        t = t.replace("    def _dummy_run", f"    # a comment{above}with a break\n    def _dummy_run", 1)
        note = lambda m: f"{m.group(1)}# note{inside} here\n{m.group(1)}{m.group(2)}"
        t = re.sub(r"(?m)^(        )(\w+ = )", note, t, count=6)
        if ends == "tabs": t = re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), t)
        else: t = t.replace("\n", "\r\n")
        assert above in t and t.count(f"# note{inside} here") == 6, f.name   # the AR module has no `_dummy_run`
        assert ("\t" if ends == "tabs" else "\r\n") in t, f.name
        f.write_bytes(t.encode()); ast.parse(f.read_bytes())
    res = port_release(f"{co}@0.30.0")
    assert sorted(r.cls for r in res.runners) == ["NPUARModelRunner", "OmniNPUModelRunner"]
    assert res.lost == 0 and all(r.compiles_npu_side for r in res.runners)
    for r in res.runners: ast.parse(keep_side(r.code))


def test_a_tab_indented_runner_is_ported_as_python_reads_it(tmp_path):
    "Reproduction 5b on the fixture: a tab-indented omni checkout (it compiles) loses no statement and every module parses."
    import ast
    import re
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    for f in (omni / "vllm_omni" / "worker").glob("gpu*.py"):
        t = re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), f.read_text()); f.write_text(t); ast.parse(t)
    res = fixture_port(omni)
    assert len(res.runners) == 2 and res.lost == 0 and res.compiles
    assert "self.apply_talker_mask(logits)" in res.runners[1].code and "\t" not in keep_side(res.runners[1].code)
def test_the_fixture_stack_states_its_versions_and_ports_without_fetching(tmp_path):
    "Every fixture states its release; the port takes all three from the sources given, the history cut to them, said so."
    from omni_npu_port.port.release import port_release
    from omni_npu_port.sources.readers import open_source
    stack = Path(__file__).parent / "fixtures" / "generalize" / "stack"
    assert {p: open_source(str(stack / p)).version for p in ("omni_new", "vllm", "vllm_ascend")} == dict.fromkeys(
        ("omni_new", "vllm", "vllm_ascend"), "0.18.0")
    empty = tmp_path / "cache"
    r = port_release(str(stack / "omni_new"), target="vllm-ascend==0.18.0", sources=(str(stack / "vllm"), str(stack / "vllm_ascend")),
                     cache_dir=empty, index="http://127.0.0.1:9/")   # nothing may be fetched: no cache, no index
    assert r.omni == "0.18.0" and r.history == [] and not empty.exists()
    assert any("not used: the vllm sources given do not include them" in d.message for d in r.diagnostics)


def test_a_port_never_mixes_a_source_given_with_a_fetched_release(tmp_path):
    "A vllm-ascend source that is not the release the port needs: one line, before anything is fetched."
    import shutil
    from omni_npu_port.core.errors import InputError
    from omni_npu_port.port.release import port_release
    stack = Path(__file__).parent / "fixtures" / "generalize" / "stack"
    bare = tmp_path / "vllm_ascend"
    shutil.copytree(stack / "vllm_ascend", bare, ignore=shutil.ignore_patterns("_version.py", "__pycache__"))
    for ascend, said in ((bare, "states no version"), (stack / "vllm_ascend", "(0.18.0)")):
        with pytest.raises(InputError) as e:
            port_release(str(stack / "omni_new"), target="vllm-ascend==0.23.0" if said != "states no version" else "vllm-ascend==0.18.0",
                         sources=(str(stack / "vllm"), str(ascend)), cache_dir=tmp_path / "cache", index="http://127.0.0.1:9/")
        msg = str(e.value)
        assert "\n" not in msg and "never mixes the sources you give with a fetched release" in msg and said in msg, msg
    assert not (tmp_path / "cache").exists()


def test_port_release_checks_its_output_before_any_work(tmp_path, monkeypatch):
    "An earlier port's report in the output folder is refused before the port reads a source; the default folder is named."
    from omni_npu_port.core.io import OutputExists
    from omni_npu_port.port import release as rel
    stack = Path(__file__).parent / "fixtures" / "generalize" / "stack"
    out = tmp_path / "out"
    out.mkdir()
    (out / rel.REPORT_JSON).write_text("{}")
    monkeypatch.setattr(rel, "release_runners", lambda tree: pytest.fail("the port did work before checking its output"))
    with pytest.raises(OutputExists, match="pass --force"):
        rel.port_release(str(stack / "omni_new"), target="vllm-ascend==0.18.0", out=out,
                         sources=(str(stack / "vllm"), str(stack / "vllm_ascend")))
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    r = rel.port_release(str(stack / "omni_new"), target="vllm-ascend==0.18.0", out=rel.DEFAULT_OUT,
                         sources=(str(stack / "vllm"), str(stack / "vllm_ascend")))
    assert (tmp_path / "npu-port-0.18.0" / rel.REPORT_JSON).is_file() and r.written


# --- issue 23: port/release in three parts (inputs, checks, report), the entry re-exporting them ---------------------
def test_the_entry_module_re_exports_every_public_name_of_its_parts():
    "`from omni_npu_port.port.release import X` works for every public name of the three parts, as the same object."
    import importlib
    from omni_npu_port.port import release
    for part in ("release_inputs", "release_checks", "release_report"):
        mod = importlib.import_module(f"omni_npu_port.port.{part}")
        assert mod.__all__, part
        for name in mod.__all__:
            assert getattr(release, name, None) is getattr(mod, name) and name in release.__all__, f"{part}.{name} is not re-exported"
    assert release.port_release.__module__ == "omni_npu_port.port.release"
    assert release.ReleasePort.__module__ == "omni_npu_port.port.release_report"   # docs.render draws it under this key


def test_a_part_importing_a_later_part_breaks_the_release_contract(tmp_path):
    "The inputs never import the checks or the report (nor the report the checks): import-linter's contract is not vacuous."
    import shutil
    import subprocess
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "omni_npu_port", tmp_path / "omni_npu_port", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(root / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "omni_npu_port" / "port" / "release_report.py", "a") as f:
        f.write("\nfrom .release_checks import RunnerPort\n")
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; "
                        "sys.argv = ['lint-imports', '--no-cache']; lint_imports_command()"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "omni_npu_port.port.release_report -> omni_npu_port.port.release_checks" in r.stdout, r.stdout[-3000:]


def test_has_edited_copy_tells_an_edited_statement_from_another_one():
    from omni_npu_port.port.release_checks import has_edited_copy, statement_key
    assert has_edited_copy(statement_key("return hidden_states"), [statement_key("return model_output")])   # a rename
    assert has_edited_copy(statement_key("x = f(a, b, c)"), [statement_key("x = f(a, b, c, d=1)")])          # 60% alike
    assert not has_edited_copy(statement_key("log(b)"), [statement_key("return b")])
    assert not has_edited_copy(statement_key("x = 1"), [])


def test_a_release_port_still_draws_itself_in_jupyter_after_the_split():
    "ReleasePort now lives in release_report: the renderer registered for it (docs.render) is found by its class."
    res = fixture_port()
    assert "onp-release" in res._repr_html_() and "NPU port of vLLM-Omni" in res._repr_markdown_()


def test_the_terminal_says_the_pairings_evidence_once(tmp_path, capsys):
    "`port --release`: the target line names the decision and points below; the evidence is said once (stdout)."
    evidence = "the package pins vllm==0.18.0"
    rc = main(["port", "--release", f"{FIX / 'omni'}@0.97.0", "-o", str(tmp_path / "out"), "--history", "0.17.0",
               "--no-judge", *sum((["--source", str(s)] for s in SOURCES), [])])
    out = capsys.readouterr()
    assert rc in (0, 1) and (out.out + out.err).count(evidence) == 1 and evidence in out.out.splitlines()[0]
    assert "): GPU base vllm 0.17.0 (evidence: the first line below)" in out.err
    assert main(["port", "--release", f"{FIX / 'omni'}@0.97.0", "-o", str(tmp_path / "j"), "--history", "0.17.0",
                 "--no-judge", "--json", *sum((["--source", str(s)] for s in SOURCES), [])]) in (0, 1)
    out = capsys.readouterr()
    assert "(evidence: the report's pairing)" in out.err and evidence not in out.err
    assert evidence in json.loads(out.out)["pairing"]["evidence"]
