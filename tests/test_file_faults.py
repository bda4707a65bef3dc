"""translate's and port -o's file handling under collisions, foreign files and faults (issue 14, parts 1-3, 6, 7).

Every fault here is made so that it holds for root too (a file where a folder must go, a monkeypatched write that
fails as a read-only file system does, a worker that SIGKILLs itself), so that the tests run the same in CI.
"""
import errno
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import omni_npu_port.translate.run as tmod
from omni_npu_port.cli.main import main as cli_main
from omni_npu_port.core.io import OutputError
from omni_npu_port.translate.rules import compile_rules
from omni_npu_port.translate.run import translate_paths

T18 = "vllm-ascend==0.18.0"
GPU = "import torch\ntorch.cuda.synchronize()\n"
ERROR = "omni-npu-port translate: error:"
DEAD = 2**22 + 12345   # a process id no process has (above the kernel's largest pid_max)


def main(argv):
    "`omni-npu-port translate ARGV` through the dispatcher: the exit code."
    return cli_main(["translate", *argv])


def _release(root: Path, version: str) -> Path:
    "A small vllm_omni tree of one release: two files whose text names the release."
    pkg = root / version / "vllm_omni"
    (pkg / "worker").mkdir(parents=True)
    (pkg / "runner.py").write_text(GPU + f"RELEASE = '{version}'\n")
    (pkg / "worker" / "plain.py").write_text(f"RELEASE = '{version}'\n")
    return pkg


def _statuses(run) -> dict:
    return {f.path: (f.status, [d.code for d in f.diagnostics if d.code.startswith("ONP9")]) for f in run.files}


# ---------------------------------------------------------------- 1. outputs that cannot collide

@pytest.mark.parametrize("force", [False, True])
def test_two_sources_with_one_folder_name_keep_their_own_outputs(tmp_path, capsys, force):
    "a/0.30.0/vllm_omni and a/0.20.0/vllm_omni: each file goes to its own path, its own content, with or without --force."
    new, old = _release(tmp_path / "a", "0.30.0"), _release(tmp_path / "a", "0.20.0")
    out, rep = tmp_path / "out", tmp_path / "r.json"
    assert main([str(new), str(old), "-o", str(out), "-q", "--report", str(rep), *(["--force"] if force else [])]) == 0
    files = json.loads(rep.read_text())["files"]
    outputs = [f["output"] for f in files]
    assert len(files) == 4 and len(set(outputs)) == 4                      # one output path per input file
    for f in files:
        release = Path(f["path"]).relative_to(tmp_path / "a").parts[0]
        assert Path(f["output"]).is_relative_to(out / release / "vllm_omni")   # the layout mirrors below the common folder
        assert f"RELEASE = '{release}'" in Path(f["output"]).read_text()


def test_each_file_once_and_no_path_written_twice(tmp_path, monkeypatch):
    "A source given twice or inside another is read once; a layout that maps two files to one path writes it once."
    a, b = tmp_path / "src" / "a", tmp_path / "src" / "b"
    for d in (a, b): d.mkdir(parents=True); (d / "m.py").write_text(GPU + f"WHO = '{d.name}'\n")
    run = translate_paths([tmp_path / "src", a, a / "m.py"], compile_rules(T18), outdir=tmp_path / "o1")
    assert sorted(Path(f.path).name for f in run.files) == ["m.py", "m.py"] and run.totals()["failed"] == 0
    # the guard under the layout: a layout that folds every file onto its name (a case-insensitive OUTDIR would)
    monkeypatch.setattr(tmod, "output_path", lambda path, root, out_root: out_root / Path(path).name)
    run = translate_paths([a, b], compile_rules(T18), outdir=tmp_path / "o2", force=True)
    st = _statuses(run)
    assert st[str(a / "m.py")] == ("translated", []) and st[str(b / "m.py")] == ("refused", ["ONP9005"])
    assert "WHO = 'a'" in (tmp_path / "o2" / "m.py").read_text()            # the first output stands, --force or not


# ---------------------------------------------------------------- 2. reports never clobber inputs or foreign files

def test_report_refuses_an_input_and_a_foreign_file(tmp_path, capsys):
    src = tmp_path / "runner.py"; src.write_text(GPU)
    notes = tmp_path / "notes.json"; notes.write_text('{"mine": true}\n')
    for argv in (["--report", str(src)], ["--report", str(src), "--force"], ["--summary", str(tmp_path / "x.md"), "--report", str(notes)],
                 ["--report", str(tmp_path)], ["--summary", str(src.with_suffix(".md")), "--report", str(src.with_suffix(".md"))]):
        assert main([str(src), "--check", "-q", *argv]) == 2, argv
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 5 and all(l.startswith(ERROR) for l in err)
    assert "input" in err[0] and "input" in err[1] and "not a report" in err[2] and "folder" in err[3]
    assert src.read_text() == GPU and notes.read_text() == '{"mine": true}\n' and not (tmp_path / "x.md").exists()
    assert main([str(src), "--check", "-q", "--report", str(notes), "--force"]) == 1      # asked to: replaced
    assert json.loads(notes.read_text())["tool"] == "omni-npu-port translate"
    md = tmp_path / "s.md"
    for _ in range(2):                                                     # its own report and summary: replaced
        assert main([str(src), "--check", "-q", "--report", str(notes), "--summary", str(md)]) == 1


def test_a_report_that_cannot_be_written_goes_to_stderr(tmp_path, monkeypatch, capsys):
    src = tmp_path / "in"; src.mkdir(); (src / "runner.py").write_text(GPU)
    rep, real = tmp_path / "r.json", tmod.write_atomic
    def read_only(path, data, **kw):                                       # the report's file system turns read-only
        if Path(path) == rep: raise OutputError(f"{path}: could not be written (Read-only file system)")
        return real(path, data, **kw)
    monkeypatch.setattr(tmod, "write_atomic", read_only)
    assert main([str(src), "-o", str(tmp_path / "out"), "--report", str(rep), "-q"]) == 3
    err = capsys.readouterr().err
    assert "torch.npu" in (tmp_path / "out" / "runner.py").read_text()      # the outputs are there
    assert json.loads(err[:err.index(ERROR)])["totals"]["files"] == 1       # the report on stderr, whole
    assert err.count(ERROR) == 1 and "r.json" in err.splitlines()[-1] and "Traceback" not in err


# ---------------------------------------------------------------- 3. per-file faults stay per file

def test_an_unwritable_output_is_one_diagnostic_and_the_run_goes_on(tmp_path, capsys):
    pkg = _release(tmp_path / "a", "0.30.0")
    out = tmp_path / "out"; out.mkdir()
    (out / "worker").write_text("a file where the output folder must go\n")
    rep, summary = tmp_path / "r.json", tmp_path / "s.md"
    assert main([str(pkg), "-o", str(out), "--report", str(rep), "--summary", str(summary)]) == 3
    err = capsys.readouterr().err
    by = {Path(f["path"]).name: f for f in json.loads(rep.read_text())["files"]}
    assert by["plain.py"]["status"] == "failed" and by["plain.py"]["diagnostics"][-1]["code"] == "ONP9008"
    assert by["runner.py"]["status"] == "translated" and "torch.npu" in (out / "runner.py").read_text()
    assert "| TOTAL |" in summary.read_text() and "Traceback" not in err
    line = next(l for l in err.splitlines() if "ONP9008" in l)
    assert "plain.py" in line and "worker" in line and "choose another -o folder" in line
    assert err.count(ERROR) == 1 and "not written" in err.splitlines()[-1]


def test_in_place_write_failure_then_rerun_resumes(tmp_path, monkeypatch, capsys):
    "A target that cannot be replaced (a read-only file system) fails alone; once writable, a plain rerun finishes it."
    d = tmp_path / "src"; d.mkdir()
    (d / "a.py").write_text(GPU); (d / "b.py").write_text(GPU)
    real = tmod.write_atomic
    def erofs(path, data, **kw):
        if Path(path) == d / "a.py": raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, data, **kw)
    monkeypatch.setattr(tmod, "write_atomic", erofs)
    assert main([str(d), "--in-place"]) == 3
    assert (d / "a.py").read_text() == GPU and "torch.npu" in (d / "b.py").read_text()
    assert (d / "a.py.orig").read_text() == GPU                           # the backup made before the failure
    line = next(l for l in capsys.readouterr().err.splitlines() if "ONP9008" in l)
    assert str(d / "a.py") in line and "Read-only file system" in line and "resumes" in line
    monkeypatch.setattr(tmod, "write_atomic", real)
    assert main([str(d), "--in-place", "-q"]) == 0                        # no --force needed
    assert "torch.npu" in (d / "a.py").read_text() and (d / "a.py.orig").read_text() == GPU


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_folder(tmp_path):
    src = tmp_path / "in"; src.mkdir(); (src / "a.py").write_text(GPU)
    out = tmp_path / "out"; out.mkdir(); os.chmod(out, 0o555)
    try: run = translate_paths([src], compile_rules(T18), outdir=out)
    finally: os.chmod(out, 0o755)
    assert _statuses(run)[str(src / "a.py")] == ("failed", ["ONP9008"])


_REAL_POOL_TRANSLATE = tmod._pool_translate
KILL = {"name": None, "marker": None}   # set by a test before the pool forks; read in the worker


def _killing_pool_translate(item):
    "A worker that SIGKILLs itself (as the out-of-memory killer would) on KILL['name'] — once, if KILL['marker'] is set."
    path = item[1]
    if path.endswith(KILL["name"]):
        marker = KILL["marker"]
        if marker is None or not os.path.exists(marker):
            if marker: open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    return _REAL_POOL_TRANSLATE(item)


@pytest.mark.parametrize("once", [True, False])
def test_a_dead_pool_worker_loses_only_its_file(tmp_path, monkeypatch, once, forks_alone):
    if not forks_alone: return   # the killing worker needs fork: it ran, and passed, in a child of one thread
    d = tmp_path / "src"; d.mkdir()
    for i in range(6): (d / f"m{i}.py").write_text(GPU + f"N = {i}\n")
    rules = compile_rules(T18)
    alone = translate_paths([d], rules, outdir=tmp_path / "one")
    monkeypatch.setattr(tmod, "_POOL_MIN", 0)
    monkeypatch.setattr(tmod, "_pool_translate", _killing_pool_translate)
    monkeypatch.setitem(KILL, "name", "m3.py")
    monkeypatch.setitem(KILL, "marker", str(tmp_path / "killed-once") if once else None)
    run = translate_paths([d], rules, outdir=tmp_path / "pool", jobs=2)
    st = _statuses(run)
    if once:                                                              # killed once: tried again, nothing lost
        assert st == _statuses(alone) and (tmp_path / "killed-once").exists()
    else:                                                                 # kills its process every time: named, alone
        assert st.pop(str(d / "m3.py")) == ("skipped", ["ONP9006"])
        assert all(s == ("translated", []) for s in st.values()) and len(st) == 5
        assert "died twice" in run.files[3].diagnostics[0].message
    for f in run.files:
        if f.status == "translated": assert Path(f.output).read_text() == (tmp_path / "one" / Path(f.path).name).read_text()


# ---------------------------------------------------------------- 6. modes, atomic in-place writes, resuming

def test_outputs_get_the_source_mode_less_the_umask(tmp_path):
    src = tmp_path / "in"; src.mkdir()
    for name, mode in (("tool.py", 0o755), ("secret.py", 0o600), ("plain.py", 0o644)):
        (src / name).write_text(GPU); os.chmod(src / name, mode)
    old = os.umask(0o027)
    try: translate_paths([src], compile_rules(T18), outdir=tmp_path / "out")
    finally: os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").iterdir()}
    assert modes == {"tool.py": 0o750, "secret.py": 0o600, "plain.py": 0o640}


def _age(p: Path, hours: float = 2):
    "Make `p` look `hours` untouched: the sweep takes a dead run's temp only then (core.io.stale_temps)."
    import time
    os.utime(p, (time.time() - hours * 3600,) * 2)


def test_in_place_rerun_after_a_kill_resumes(tmp_path):
    "What a SIGKILL between the backup and the rename leaves: FILE.orig equal to FILE, a temp file; the rerun finishes."
    f = tmp_path / "runner.py"; f.write_text(GPU); os.chmod(f, 0o640)
    (tmp_path / "runner.py.orig").write_text(GPU)
    (tmp_path / f".runner.py.onp{DEAD}-k2_9abcd.tmp").write_bytes(b"")   # write_atomic's temp of a killed run, never renamed
    _age(tmp_path / f".runner.py.onp{DEAD}-k2_9abcd.tmp")   # an hour untouched: no writer of any host fills it (issue 34)
    assert main([str(f), "--in-place", "-q"]) == 0
    assert "torch.npu" in f.read_text() and stat.S_IMODE(f.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runner.py", "runner.py.orig"]


# ---------------------------------------------------------------- 7. regular files only; -j capped

def test_fifos_and_devices_are_skipped_never_read(tmp_path):
    "A FIFO named *.py in a tree and /dev/zero as a source: one ONP9003 line each, exit 3, in seconds (no hang)."
    d = tmp_path / "src"; d.mkdir(); (d / "ok.py").write_text(GPU)
    os.mkfifo(d / "pipe.py")
    code = ("import sys; from omni_npu_port.cli.main import main; "
            f"sys.exit(main(['translate', {str(d)!r}, '/dev/zero', '-o', {str(tmp_path / 'out')!r}, '--target', {T18!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    lines = [l for l in p.stderr.splitlines() if "ONP9003" in l]
    assert len(lines) == 2 and "FIFO" in lines[0] and "pipe.py" in lines[0] and "character device" in lines[1]
    assert "torch.npu" in (tmp_path / "out" / str(d).lstrip("/") / "ok.py").read_text()   # sources in two places: the whole path


def test_jobs_above_the_cpus_are_capped_with_a_warning(tmp_path, capsys):
    from omni_npu_port.cli.translate import jobs_for
    import argparse
    f = tmp_path / "a.py"; f.write_text(GPU)
    assert main([str(f), "--check", "-q", "-j", "1000"]) == 1
    warn = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert len(warn) == 1 and "--jobs 1000" in warn[0]
    cpus = tmod.usable_cpus()
    assert jobs_for(argparse.Namespace(jobs=1000), compile_rules(T18)) == cpus
    assert jobs_for(argparse.Namespace(jobs=0), compile_rules(T18)) == cpus


# ---------------------------------------------------------------- port -o

def test_port_output_never_clobbers_an_input_or_a_folder(tmp_path, capsys):
    omni = tmp_path / "omni.py"; omni.write_text("class A:\n    def f(self):\n        return 1\n")
    specs = ["--gpu-base", f"{tmp_path / 'b.py'}:A.f", "--gpu-omni", f"{omni}:A.f", "--npu-base", f"{tmp_path / 'n.py'}:A.f"]
    assert cli_main(["port", *specs, "-o", str(omni)]) == 2
    assert cli_main(["port", *specs, "-o", str(tmp_path), "--force"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "input of this port (--gpu-omni)" in err[0] and "not a regular file" in err[1]
    assert omni.read_text() == "class A:\n    def f(self):\n        return 1\n"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_processes_read_one_open_archive_without_mixing_their_reads(tmp_path):
    ("A wheel opened before a fork (as `port --release -j N` does) is read by each child through its own handle: the "
     "children share the parent's file offset otherwise, and their reads interleave (`Bad magic number`).")
    import multiprocessing
    import zipfile
    from omni_npu_port.sources.readers import WheelReader
    members = {f"pkg/m{i}.py": f"# module {i}\nx = {os.urandom(150_000).hex()!r}\n".encode() for i in range(16)}   # ~75 chunks each
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members.items(): z.writestr(n, data)
    reader = WheelReader(whl)
    reader.read("pkg/m0.py")   # the parent reads first: its handle is open when the children fork
    global _SHARED
    _SHARED = (reader, members)   # handed to the children by the fork itself (an open archive does not pickle)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool: bad = sum(pool.map(_read_all, range(8), chunksize=1))
    finally: _SHARED = None
    assert bad == 0
    assert reader.read("pkg/m3.py") == members["pkg/m3.py"]   # the parent's own handle still reads right


_SHARED = None


def _read_all(_) -> int:
    reader, members = _SHARED
    bad = 0
    for _ in range(3):
        for n, data in members.items():
            try: bad += reader.read(n) != data
            except Exception: bad += 1
    return bad


# ---------------------------------------------------------------- issue 22: caches and temps own only what they wrote

def _port_one(monkeypatch, cache, src="def sync(self):\n    torch.cuda.synchronize()\n"):
    "Translate one method through the port's kept-translation path, with the translation cache at `cache`."
    from omni_npu_port.port import translation
    monkeypatch.setenv(translation.TCACHE_ENV, str(cache))
    translation.forget_translations()
    return translation.translate_code(src, T18, "import torch\n")


def test_a_translation_cache_setting_never_deletes_the_users_folders(tmp_path, monkeypatch):
    "Reproduction 1: OMNI_NPU_PORT_TRANSLATION_CACHE=~/x over ~/x/p1..p5 once left only p4, p5. Now: refused, one line."
    from omni_npu_port.core.io import CacheRefused
    x = tmp_path / "x"
    for i in range(1, 6):
        (x / f"p{i}").mkdir(parents=True); (x / f"p{i}" / "notes.txt").write_text(f"mine {i}")
    with pytest.raises(CacheRefused) as e: _port_one(monkeypatch, x)
    assert str(x) in str(e.value) and "OMNI_NPU_PORT_TRANSLATION_CACHE" in str(e.value) and "\n" not in str(e.value)
    assert [(p.name, (p / "notes.txt").read_text()) for p in sorted(x.iterdir())] == [(f"p{i}", f"mine {i}") for i in range(1, 6)]


def test_the_package_cache_setting_does_not_move_the_translation_cache(tmp_path, monkeypatch):
    "Reproduction 1b: OMNI_NPU_PORT_CACHE=~/pkgs once made ~/translations the translation cache (and pruned it)."
    from omni_npu_port.core.io import cache_dir
    monkeypatch.delenv("OMNI_NPU_PORT_TRANSLATION_CACHE", raising=False)
    monkeypatch.setenv("OMNI_NPU_PORT_CACHE", str(tmp_path / "pkgs"))
    assert cache_dir("pkgs") == tmp_path / "pkgs" and tmp_path not in cache_dir("translations").parents


def test_the_translation_cache_is_never_unpickled(tmp_path, monkeypatch, caplog):
    ("Reproduction 2: a crafted entry ran a command on every read. Entries are JSON now; a pickle is never loaded, and "
     "a well-formed entry whose content does not match its hash is a miss, logged once.")
    import pickle
    from omni_npu_port.port import translation
    cache = tmp_path / "tc"
    code, _ = _port_one(monkeypatch, cache)
    folder = cache / translation.code_fingerprint()
    [entry] = folder.glob("*.json")
    boom = tmp_path / "ran"
    class Evil:
        def __reduce__(self): return (os.system, (f"touch {boom}",))
    entry.with_suffix(".pkl").write_bytes(pickle.dumps(Evil()))      # what the old cache would have loaded
    data = json.loads(entry.read_text())
    data["body"]["code"] = "def sync(self):\n    import os; os.system('true')\n"   # other content, the old hash
    entry.write_text(json.dumps(data))
    with caplog.at_level("WARNING", logger="omni_npu_port.translations"):
        again, _ = _port_one(monkeypatch, cache)
        _port_one(monkeypatch, cache)
    assert again == code and not boom.exists()
    bad = [r for r in caplog.records if "content hash" in r.getMessage()]
    assert len(bad) == 1 and entry.name in bad[0].getMessage()
    entry.unlink(); entry.mkdir()                                      # a folder where an entry goes: a miss, never stuck
    assert _port_one(monkeypatch, cache)[0] == code


def test_the_temp_sweep_removes_only_temps_of_dead_runs_of_this_package(tmp_path):
    "Reproduction 7: any `.NAME.xxxxxxxx.tmp` beside a target was removed, a user's too."
    src = tmp_path / "src"; src.mkdir(); (src / "runner.py").write_text(GPU)
    out = tmp_path / "out"; out.mkdir()
    users = out / ".runner.py.k2_9abcd.tmp"; users.write_text("a user's file")
    live = out / f".runner.py.onp{os.getpid()}-a2_9abcd.tmp"; live.write_text("another run's, still going")
    dead = out / f".runner.py.onp{DEAD}-b2_9abcd.tmp"; dead.write_text(""); _age(dead)   # an hour untouched (issue 34)
    assert main([str(src), "-o", str(out), "-q", "--target", T18]) == 0
    assert users.read_text() == "a user's file" and live.exists() and not dead.exists()


def test_two_translates_into_one_output_folder_keep_their_temps(tmp_path):
    "Reproduction 8b: two translates into one -o deleted each other's temp files (58-106 false ONP9008 each)."
    src = tmp_path / "src"; src.mkdir()
    for i in range(60): (src / f"m{i}.py").write_text(GPU + f"X = {i}\n")
    out = tmp_path / "out"
    code = ("import sys; from omni_npu_port.cli.main import main; "
            f"sys.exit(main(['translate', {str(src)!r}, '-o', {str(out)!r}, '--force', '-q', '--target', {T18!r}]))")
    ps = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in ps]
    assert [p.returncode for p in ps] == [0, 0], errs
    assert not any("ONP9008" in e for e in errs)
    assert sorted(p.name for p in out.iterdir()) == sorted([*(f"m{i}.py" for i in range(60)), ".omni-npu-port-target"])


def _index(tmp_path: Path, payload: bytes, name: str = "vllm_ascend-9.9.9.tar.gz") -> str:
    "A file:// package index serving one sdist of vllm-ascend 9.9.9 with its sha256."
    import hashlib
    idx, files = tmp_path / "index" / "vllm-ascend" / "9.9.9", tmp_path / "files"
    idx.mkdir(parents=True); files.mkdir(exist_ok=True)
    (files / name).write_bytes(payload)
    (idx / "json").write_text(json.dumps({"urls": [{"filename": name, "url": f"file://{files}/{name}", "size": len(payload),
                                                    "digests": {"sha256": hashlib.sha256(payload).hexdigest()}, "packagetype": "sdist"}]}))
    return f"file://{tmp_path / 'index'}"


def _sdist_payload(n: int = 200_000) -> bytes:
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = os.urandom(n).hex().encode(); ti = tarfile.TarInfo("vllm_ascend-9.9.9/vllm_ascend/__init__.py"); ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def test_a_truncated_package_is_fetched_again_and_never_used(tmp_path):
    "Reproduction 8c: a truncated or stray file in pkgs/ was detected but never re-fetched; the smallest matching file won."
    from omni_npu_port.sources.fetch import cached_release, fetch_package
    payload = _sdist_payload()
    index, cache = _index(tmp_path, payload), tmp_path / "cache"
    cache.mkdir(); (cache / "vllm_ascend-9.9.9.tar.gz").write_bytes(payload[: len(payload) // 2])   # a download cut short
    assert cached_release(cache, "vllm-ascend", "9.9.9") is None
    got = fetch_package("vllm-ascend==9.9.9", cache, index=index)
    assert got.read_bytes() == payload and cached_release(cache, "vllm-ascend", "9.9.9") == got


def test_three_fetches_of_one_release_into_an_empty_cache_all_succeed(tmp_path):
    "Reproduction 8a: three doctors fetching into one empty cache shared `NAME.part` (2 of 3 failed)."
    payload = _sdist_payload(3_000_000)
    index, cache = _index(tmp_path, payload), tmp_path / "cache"
    code = ("import sys; from omni_npu_port.sources.fetch import fetch_package; "
            f"print(fetch_package('vllm-ascend==9.9.9', {str(cache)!r}, index={index!r}).read_bytes() == {len(payload)!r} * b'' or 'ok')")
    ps = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in ps]
    assert [p.returncode for p in ps] == [0, 0, 0], [e for _, e in outs]
    assert (cache / "vllm_ascend-9.9.9.tar.gz").read_bytes() == payload
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".part")]


def test_a_package_cache_folder_of_foreign_files_is_refused(tmp_path, monkeypatch):
    from omni_npu_port.core.io import CacheRefused
    from omni_npu_port.sources.fetch import fetch_package
    home = tmp_path / "home"; home.mkdir(); (home / "thesis.tex").write_text("mine")
    with pytest.raises(CacheRefused, match="thesis.tex"): fetch_package("vllm-ascend==9.9.9", home, index=_index(tmp_path, _sdist_payload()))
    assert [p.name for p in home.iterdir()] == ["thesis.tex"]


def test_a_file_name_with_a_newline_is_one_escaped_line_in_text_check(tmp_path, capsys):
    ("Reproduction 8d: a file name holding a newline and `::error` was printed raw by text --check (GitHub reads a "
     "line that starts with `::error` as a workflow command).")
    f = tmp_path / "x\n::error file=evil::pwned.py"; f.write_text(GPU)
    assert main([str(f), "--check", "--target", T18]) == 1
    out = capsys.readouterr().out
    assert out and all(not l.startswith("::") for l in out.splitlines()) and "x\\n::error" in out


def test_one_error_on_every_file_is_said_three_times_and_counted(tmp_path, monkeypatch, capsys):
    "Reproduction 8e: a full disk gave 2,466 identical ONP9008 lines. Now the same error is shown 3 times, then counted."
    src = tmp_path / "src"; src.mkdir()
    for i in range(12): (src / f"m{i}.py").write_text(GPU + f"X = {i}\n")
    def full(path, *a, **k): raise OutputError(f"{path}: could not be written (No space left on device)")
    monkeypatch.setattr(tmod, "write_atomic", full)
    assert main([str(src), "-o", str(tmp_path / "out"), "--target", T18]) == 3
    err = capsys.readouterr().err.splitlines()
    assert sum("ONP9008" in l for l in err) == 4 and any("and 9 more ONP9008" in l for l in err)


def test_pruning_old_fingerprints_keeps_a_folder_a_live_writer_uses(tmp_path, monkeypatch):
    ("Pruning removes an older fingerprint's own entries, but never one holding a temp written to recently (a run of "
     "that version still writing, maybe on another host sharing the cache); keeping the new entry goes on either way.")
    from omni_npu_port.port import translation
    cache = tmp_path / "tc"
    _port_one(monkeypatch, cache)                                        # claims the root, writes this code's folder
    idle = cache / ("0" * 20)
    (cache / translation.code_fingerprint()).rename(idle)                          # now an older version's folder
    olds = [cache / f"{i:020x}" for i in range(1, 5)]
    for i, p in enumerate([idle, *olds]):
        if not p.exists(): p.mkdir(); (p / f"{'a' * 64}.json").write_text("{}")
        os.utime(p, (i, i))                                              # oldest first
    live = olds[0] / f".{'b' * 64}.json.onp{DEAD}-abcdefgh.tmp"; live.write_text("")   # written just now
    _port_one(monkeypatch, cache)
    left = sorted(p.name for p in cache.iterdir() if p.is_dir())
    assert olds[0].name in left and live.exists()                         # the live writer's folder stays
    assert idle.name not in left                                          # an idle older folder went
    assert translation.code_fingerprint() in left and list((cache / translation.code_fingerprint()).glob("*.json"))


def test_pruning_leaves_an_older_fingerprint_another_user_wrote(tmp_path, monkeypatch):
    "In a cache shared between users, an older fingerprint folder holding another user's entries is theirs: it stays."
    from omni_npu_port.port import translation
    cache = tmp_path / "tc"
    _port_one(monkeypatch, cache)
    olds = [cache / f"{i:020x}" for i in range(1, 5)]
    for i, p in enumerate(olds):
        p.mkdir(); (p / f"{'a' * 64}.json").write_text("{}"); os.utime(p, (i, i))
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)                   # the entries now read as another user's
    (cache / translation.code_fingerprint()).rename(cache / ("e" * 20))  # this code's folder is new again: pruning runs
    _port_one(monkeypatch, cache, "def sync(self):\n    torch.cuda.synchronize()\n    return 1\n")
    assert (cache / translation.code_fingerprint()).is_dir()            # the new entry is kept all the same
    assert all(p.is_dir() and list(p.glob("*.json")) for p in olds)   # nothing of theirs removed
    monkeypatch.setattr(os, "getuid", lambda: me)                       # the same folders, this user's: the oldest go
    (cache / translation.code_fingerprint()).rename(cache / ("f" * 20))
    _port_one(monkeypatch, cache, "def sync(self):\n    torch.cuda.synchronize()\n    return 2\n")
    assert sum(p.is_dir() for p in olds) < len(olds)


def test_a_dead_runs_part_is_swept_only_when_nothing_writes_it(tmp_path):
    ("A `.part` of a dead process id is removed only once it has not grown for an hour: a fresh one may be another "
     "host's download into a shared cache (process ids say nothing across hosts).")
    from omni_npu_port.core.io import claim_cache
    from omni_npu_port.sources.fetch import STALE_PART_S, fetch_package, owns_package_file
    payload = _sdist_payload()
    index, cache = _index(tmp_path, payload), tmp_path / "cache"
    claim_cache(cache, "pkgs", owns_package_file)
    fresh = cache / f".vllm_ascend-9.9.8.tar.gz.onp{DEAD}-abcdefgh.part"; fresh.write_bytes(b"x")
    old = cache / f".vllm_ascend-9.9.7.tar.gz.onp{DEAD}-hgfedcba.part"; old.write_bytes(b"x")
    os.utime(old, (0, os.stat(old).st_mtime - STALE_PART_S - 60))
    assert fetch_package("vllm-ascend==9.9.9", cache, index=index).read_bytes() == payload
    assert fresh.exists() and not old.exists()


def test_a_target_line_that_cannot_be_written_is_one_warning_and_the_files_stay(tmp_path, monkeypatch, capsys):
    "The translated files are written; only the tree's target line fails (a full disk): one ONP4309 line, exit 0."
    src = tmp_path / "src"; src.mkdir(); (src / "m.py").write_text(GPU)
    real = tmod.write_atomic
    def full_for_the_line(path, *a, **k):
        if Path(path).name == tmod.TARGET_FILE: raise OutputError(f"{path}: could not be written (No space left on device)")
        return real(path, *a, **k)
    monkeypatch.setattr(tmod, "write_atomic", full_for_the_line)
    assert main([str(src), "-o", str(tmp_path / "out"), "--target", T18]) == 0
    err = capsys.readouterr().err
    assert (tmp_path / "out" / "m.py").exists() and not (tmp_path / "out" / tmod.TARGET_FILE).exists()
    assert sum("ONP4309" in l for l in err.splitlines()) == 1 and "No space left" in err
