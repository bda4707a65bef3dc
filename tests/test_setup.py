"""The README's first hour: its set-up command is scripts/setup.sh, and the browser test skips outside CI, fails under it."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- ci:{marker} -->\s*```sh\n(.*?)```", text, re.S)
    assert m, f"README.md has no ci:{marker} block"
    return m.group(1).strip()


def test_the_setup_command_is_the_setup_script_and_it_installs_the_browser_where_it_may():
    assert readme_block("setup") == "sh scripts/setup.sh"
    script = (ROOT / "scripts" / "setup.sh").read_text()
    for step in ("python3 -m venv .venv", "pip install torch==2.13.0 -e '.[dev]'", "apt-get install",
                 ".venv/bin/python tests/archives.py", "omni-npu-port tour"):
        assert step in script
    assert subprocess.run(["sh", "-n", str(ROOT / "scripts" / "setup.sh")]).returncode == 0     # it parses


def _browser_test(env_ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"OMNI_NPU_PORT_CHROMIUM": "/nonexistent/chromium"}
    if env_ci is not None: env["CI"] = env_ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "-p", "no:hypothesispytest", "-p", "no:anyio",   # unused there (conftest's plugins_unused)
                           "tests/test_docs_site.py::test_sidebar_links_every_page_in_order"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_without_a_browser_the_browser_tests_skip_with_the_reason():
    r = _browser_test(None)
    assert r.returncode == 0 and "1 skipped" in r.stdout and "apt-get" in r.stdout, r.stdout[-2000:]


def test_under_ci_a_missing_browser_fails():
    r = _browser_test("1")
    assert r.returncode == 1 and "/nonexistent/chromium not found" in r.stdout, r.stdout[-2000:]


def test_the_readme_has_no_unfilled_figure():
    "Figures in the README are measured and written in; a `{NAME}` left from a draft fails here."
    text = (ROOT / "README.md").read_text()
    assert not re.findall(r"\{[A-Z_]{3,}\}", text)


def test_the_tour_translation_fits_80_columns_and_names_the_whole_diff(tmp_path):
    "The tour shows counts explained and the first hunks, one row per diff line at 80 columns; the rest is in a file it names."
    import io
    from rich.console import Console
    from omni_npu_port.translate.run import TOUR_HUNKS, hunks_of, tour_translate
    buf = io.StringIO()
    run = tour_translate(Console(file=buf, width=80, color_system=None), out_dir=tmp_path)
    shown = buf.getvalue().splitlines()
    diff = (tmp_path / "gpu_runner_example.diff").read_text()
    head, hunks = hunks_of(diff)
    assert len(hunks) > TOUR_HUNKS and f"… {len(hunks) - TOUR_HUNKS} more hunks" in buf.getvalue()
    assert str(tmp_path / "gpu_runner_example.diff") in buf.getvalue().replace("\n", "")
    rows = [l for l in shown if l.startswith(("+", "-", "@@", " "))]
    expected = (head + "".join(hunks[:TOUR_HUNKS])).splitlines()
    assert len(rows) == len(expected) and all(len(l) <= 80 for l in shown)
    assert all(r[:1] == e[:1] for r, e in zip(rows, expected))               # every row keeps its + / - / space
    t = run.totals()
    assert f"{t['sites']} sites" in buf.getvalue() and f"{t['rewritten']} rewritten" in buf.getvalue()
    assert (tmp_path / "gpu_runner_example.py").is_file()


def test_every_notebook_names_its_kernel():
    "Each notebook carries kernelspec metadata, so JupyterLab opens it with a Python kernel without asking."
    import json
    missing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "nbs").rglob("*.ipynb"))
               if "kernelspec" not in json.loads(p.read_text()).get("metadata", {})]
    assert not missing, f"notebooks without kernelspec metadata: {missing}"


class _XdistConfig:
    "What conftest's xdist scheduler reads of a pytest config: `--dist`, the workers, the command line, the root."
    def __init__(self, dist: str, args=()):
        self.values, self.rootpath = {"dist": dist, "tx": ["popen", "popen"]}, ROOT
        self.invocation_params = type("Params", (), {"args": tuple(args)})()

    def getvalue(self, name): return self.values[name]


def test_pytest_n_2_keeps_each_file_on_one_worker_and_the_real_port_files_together():
    ("`pytest -n 2`: conftest's scheduler sends a file whole to a worker, the files using the real release port to "
     "one; a --dist the user gives is theirs.")
    pytest.importorskip("xdist")
    from conftest import COMPILED, EVERY_RELEASE, SHARED_PORT, pytest_xdist_make_scheduler
    scope = pytest_xdist_make_scheduler(_XdistConfig("load"), None)._split_scope
    assert scope("tests/test_release.py::test_a") == scope("tests/test_port_wraps_inline.py::test_b[x]") == SHARED_PORT
    assert scope("tests/test_sync.py::test_a") == scope("tests/test_sync.py::test_b[1]") == "tests/test_sync.py"
    assert scope("tests/test_layers.py::test_a") == "tests/test_layers.py"
    assert scope("tests/test_conformance.py::test_a") == scope("tests/test_doctor.py::test_b") == EVERY_RELEASE
    assert scope("tests/test_notebooks.py::test_notebook[runtime/ops]") == COMPILED
    assert scope("tests/test_ops.py::test_a") == scope("tests/test_output_fits.py::test_b") == COMPILED
    assert pytest_xdist_make_scheduler(_XdistConfig("load", ["-n", "2", "--dist", "load"]), None) is None
    assert pytest_xdist_make_scheduler(_XdistConfig("loadfile"), None) is None


def test_pytest_n_2_hands_out_the_heaviest_files_first():
    ("The workers start on the files that cost most (conftest.HEAVIEST), the rest after them in xdist's order; the "
     "queue the scheduler hands out is reordered once, whole.")
    pytest.importorskip("xdist")
    from collections import OrderedDict
    from conftest import (COMPILED, COMPILED_FILES, EVERY_RELEASE, EVERY_RELEASE_FILES, HEAVIEST, SHARED_PORT,
                          heaviest_first, pytest_xdist_make_scheduler)
    given = ["tests/test_x.py", *reversed(HEAVIEST[:4]), "tests/test_y.py"]
    assert heaviest_first(given) == [*HEAVIEST[:4], "tests/test_x.py", "tests/test_y.py"]   # the rest: as given
    assert heaviest_first(["tests/test_b.py", "tests/test_a.py"]) == ["tests/test_b.py", "tests/test_a.py"]
    groups = (SHARED_PORT, EVERY_RELEASE, COMPILED)
    assert all(h in groups or (ROOT / h).is_file() for h in HEAVIEST), "a file not there"
    assert all((ROOT / f).is_file() for f in EVERY_RELEASE_FILES + COMPILED_FILES)
    sched = pytest_xdist_make_scheduler(_XdistConfig("load"), None)
    sent = []
    node = type("Node", (), {"send_runtest_some": lambda self, idx: sent.append(idx)})()
    light = min(str(f.relative_to(ROOT)) for f in (ROOT / "tests").glob("test_*.py")
                if str(f.relative_to(ROOT)) not in HEAVIEST)   # after any file in HEAVIEST, whatever the queue's order
    assert "tests/test_sync.py" in HEAVIEST
    sched.registered_collections = {node: [f"{light}::a", "tests/test_sync.py::b", "tests/test_sync.py::c"]}
    sync = {"tests/test_sync.py::b": False, "tests/test_sync.py::c": False}
    sched.workqueue = OrderedDict([(light, {f"{light}::a": False}), ("tests/test_sync.py", sync)])
    sched._assign_work_unit(node)
    assert sent == [[1, 2]] and list(sched.workqueue) == [light]


def test_heaviest_is_the_measured_tables_order_by_its_numbers(tmp_path):
    ("conftest.HEAVIEST comes from the table beside it (suite_cpu.tsv), the costliest scope first whatever the lines' "
     "order; a scope under the least cost, a line that is no `SECONDS<tab>SCOPE` and a table not there give none.")
    from conftest import COMPILED, EVERY_RELEASE, HEAVIEST, SHARED_PORT, SUITE_CPU, measured_heaviest
    table = tmp_path / "suite_cpu.tsv"
    table.write_text("# a note\n2.5\ttests/test_b.py\n0.4\ttests/test_light.py\nnot a number\ttests/test_x.py\n\n"
                     "30.0\tshared\n7\ttests/test_a.py\n")
    assert measured_heaviest(str(table)) == ("shared", "tests/test_a.py", "tests/test_b.py")
    assert measured_heaviest(str(table), least=0.1)[-1] == "tests/test_light.py"
    assert measured_heaviest(str(tmp_path / "none.tsv")) == ()
    assert HEAVIEST == measured_heaviest(SUITE_CPU) and len(HEAVIEST) >= 10   # the committed table is read whole
    assert all(h in (SHARED_PORT, EVERY_RELEASE, COMPILED) or (ROOT / h).is_file()
               for h in measured_heaviest(SUITE_CPU, least=0)), "a scope of the table that is no file here"


def test_the_measured_table_is_each_scopes_mean_over_the_runs_given(tmp_path):
    ("tests/suite_cpu.py: a run's tests' CPU summed per scope (a group's files together), each scope's mean over the "
     "runs that have it, costliest first; what conftest reads back in that order.")
    import json
    from conftest import SHARED_PORT, measured_heaviest
    from suite_cpu import SESSION_END, table
    release, sync, layers = "tests/test_release.py::t", "tests/test_sync.py::t", "tests/test_layers.py::t"
    for run, lines in (("a", [(release, 8.0), (sync, 2.0), ("tests/test_sync.py::u", 1.0)]),
                       ("b", [(release, 4.0), (sync, 1.0), (layers, 9.0), (SESSION_END, 50.0)])):   # the end: no scope
        (tmp_path / run).mkdir()
        (tmp_path / run / "cpu-1.jsonl").write_text("".join(json.dumps({"id": i, "cpu": c}) + "\n" for i, c in lines))
    got = table([tmp_path / "a", tmp_path / "b"], "a note")
    assert got.splitlines() == ["# CPU seconds per scope, measured by tests/suite_cpu.py: a note",
                                "9.0\ttests/test_layers.py", f"6.0\t{SHARED_PORT}", "2.0\ttests/test_sync.py"]
    (tmp_path / "t.tsv").write_text(got)
    assert measured_heaviest(str(tmp_path / "t.tsv")) == ("tests/test_layers.py", SHARED_PORT, "tests/test_sync.py")


def test_a_child_pytest_of_one_test_leaves_out_only_the_plugins_that_test_does_not_use(request):
    ("conftest's `plugins_unused`: hypothesis's plugin stays for a `@given` test (the attribute it leaves is read), "
     "anyio's for a test marked `anyio`; a plain test (this one) runs its child without either.")
    from types import SimpleNamespace
    from conftest import plugins_unused
    hypothesis = pytest.importorskip("hypothesis")
    off = ["-p", "no:hypothesispytest", "-p", "no:anyio"]
    assert plugins_unused(request.node) == off
    given = hypothesis.given(hypothesis.strategies.integers())(lambda n: None)
    item = lambda fn, mark=None: SimpleNamespace(function=fn,
                                                 get_closest_marker=lambda name: mark if name == "anyio" else None)
    assert plugins_unused(item(given)) == ["-p", "no:anyio"]
    assert plugins_unused(item(lambda: None, pytest.mark.anyio.mark)) == ["-p", "no:hypothesispytest"]
    assert plugins_unused(item(given, pytest.mark.anyio.mark)) == []
    from importlib.metadata import entry_points   # `-p no:NAME` blocks the plugin of that entry-point name
    installed = {e.name for e in entry_points(group="pytest11")}
    assert {n.removeprefix("no:") for n in off[1::2]} <= installed, installed


HYPOTHESIS_FIRST = """
import gc, sys, threading
sys.path.insert(0, "tests")
from conftest import hypothesis_registered_early
print(hypothesis_registered_early())                  # hypothesis not imported yet: nothing run
from hypothesis import given, settings, strategies as st
gc.disable()                                          # only explicit collections from here on
full = []
gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2 and full.append(1))
@settings(max_examples=3, derandomize=True, database=None, deadline=None)
@given(st.integers())
def drawn(n): pass
def first_given(early):
    if early: print(hypothesis_registered_early())
    full.clear(); drawn(); print(len(full))
for early in (False, True):                           # hypothesis's random is per thread: each thread's first test
    t = threading.Thread(target=first_given, args=(early,)); t.start(); t.join()
"""


def test_the_first_given_test_of_a_process_walks_no_heap_after_the_early_registration():
    ("conftest's `hypothesis_registered_early`: a thread's first `@given` test makes a full collection (hypothesis "
     "registers its random), none after the early registration; without hypothesis imported it runs nothing.")
    pytest.importorskip("hypothesis")
    r = subprocess.run([sys.executable, "-c", HYPOTHESIS_FIRST], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    not_loaded, late, early, after_early = r.stdout.split()
    assert not_loaded == "False" and int(late) >= 1 and early == "True" and after_early == "0", r.stdout


def test_an_xdist_worker_runs_its_share_of_the_cores_threads(monkeypatch):
    ("conftest's `worker_threads`: a worker of `-n N` gets the cores this process may use divided by N (at least one);"
     " a process that is no worker (xdist's controller, `-n 0`) keeps torch's default.")
    from types import SimpleNamespace
    from conftest import worker_threads
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    worker = lambda n: SimpleNamespace(workerinput={"workerid": "gw0", "workercount": n})
    assert [worker_threads(worker(n)) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    assert worker_threads(SimpleNamespace()) is None


def test_the_runs_caches_are_a_temp_folder_of_the_run_shared_with_its_workers_and_removed_at_its_end(monkeypatch):
    ("conftest's `run_caches`: the first process points every cache a test writes into a new temp folder, whatever "
     "the environment said (here, the user's cache); a worker keeps its controller's; the maker removes it.")
    from types import SimpleNamespace
    import conftest
    for var in (*conftest.RUN_CACHES, conftest.RUN_CACHE_ROOT):   # put back as they were after the test
        monkeypatch.setenv(var, os.path.expanduser("~/.cache/omni-npu-port/translations"))
    monkeypatch.setattr(conftest, "_made_here", [])
    root = conftest.run_caches(SimpleNamespace())
    try:
        assert conftest._made_here == [root] and os.path.isdir(root) and not os.listdir(root)
        made = [os.path.join(root, name) for name in conftest.RUN_CACHES.values()]
        assert [os.environ[v] for v in conftest.RUN_CACHES] == made
        worker = SimpleNamespace(workerinput={"workerid": "gw0", "workercount": 2})
        assert conftest.run_caches(worker) == root and conftest._made_here == [root]
    finally:
        conftest.remove_run_caches()
    assert not os.path.exists(root) and conftest._made_here == []


def test_where_bytecode_is_off_the_workers_keep_it_in_pytests_cache_never_beside_the_sources(monkeypatch, tmp_path):
    ("conftest's `bytecode_cache`: with PYTHONDONTWRITEBYTECODE set, xdist's controller points its workers at a folder "
     "of pytest's cache, where a child writes its bytecode and a later child reads it; with bytecode on, a prefix set, "
     "no cache, in a worker or without workers nothing changes.")
    from types import SimpleNamespace
    from conftest import bytecode_cache
    cache = SimpleNamespace(mkdir=lambda name: (tmp_path / "cache" / name).mkdir(parents=True, exist_ok=True)
                            or tmp_path / "cache" / name)
    controller = lambda n=2, c=cache: SimpleNamespace(option=SimpleNamespace(numprocesses=n), cache=c)
    worker = SimpleNamespace(option=SimpleNamespace(numprocesses=2), cache=cache, workerinput={"workerid": "gw0"})
    for var in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"): monkeypatch.delenv(var, raising=False)
    assert bytecode_cache(controller()) is None and "PYTHONPYCACHEPREFIX" not in os.environ   # bytecode on: as it is
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    for config in (controller(0), controller(None), controller(c=None), worker):
        assert bytecode_cache(config) is None and os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "theirs"))
    assert bytecode_cache(controller()) is None and os.environ["PYTHONPYCACHEPREFIX"] == str(tmp_path / "theirs")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX")
    folder = bytecode_cache(controller())
    assert folder == str(tmp_path / "cache" / "pycache") and os.environ["PYTHONPYCACHEPREFIX"] == folder
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    src = tmp_path / "src"; src.mkdir(); (src / "ported_runner.py").write_text("X = 1\n")
    child = lambda: subprocess.run([sys.executable, "-c", "import ported_runner, sys; print(ported_runner.__cached__)"],
                                   cwd=src, capture_output=True, text=True, check=True, env=dict(os.environ)).stdout
    cached = Path(child().strip())
    assert cached.is_file() and cached.is_relative_to(folder) and not (src / "__pycache__").exists()
    written = cached.stat().st_mtime_ns
    child()
    assert cached.stat().st_mtime_ns == written   # the second child read it, compiled nothing
