"""Shared pytest fixtures. Add fixtures below; do not replace this file (several areas share it)."""
import gc
import os
import tempfile

import pytest


# The caches a test run writes (kept translations, the judge's folders: issues 31, 34) go to one temp folder of the run,
# never to the user's (~/.cache/omni-npu-port), whatever the environment says: the run's first process (xdist's
# controller, or pytest without xdist) makes it and removes it at its end; its workers and children inherit it.
RUN_CACHES = {"OMNI_NPU_PORT_TRANSLATION_CACHE": "translations", "OMNI_NPU_PORT_JUDGE_CACHE": "judge-src"}
RUN_CACHE_ROOT = "OMNI_NPU_PORT_SUITE_CACHES"   # the run's folder, as its workers see it
_made_here = []


def run_caches(config) -> str:
    "The run's cache folder: an xdist worker's is its controller's; any other pytest process makes its own."
    if hasattr(config, "workerinput") and os.environ.get(RUN_CACHE_ROOT): return os.environ[RUN_CACHE_ROOT]
    root = tempfile.mkdtemp(prefix="onp-suite-caches-")
    _made_here.append(root)
    os.environ[RUN_CACHE_ROOT] = root
    for var, name in RUN_CACHES.items(): os.environ[var] = os.path.join(root, name)
    return root


# An xdist worker's torch (and the children it starts: kernels, the command line) runs its share of the cores' threads:
# with torch's default, one thread per core in every worker, `-n 2` on 2 cores ran 4 OpenMP threads that spin while
# they wait for a core (measured on the torch files, one process beside a loaded machine: 39.0 s CPU, 173 s wall with
# 2 threads; 11.0 s, 45 s with 1). A thread count the environment sets stays; only the cost changes, never a verdict.
def worker_threads(config) -> int | None:
    "The torch threads of an xdist worker (the cores this process may use, shared by the workers); None: not one."
    workers = getattr(config, "workerinput", {}).get("workercount")
    if not workers: return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // workers)


# Hypothesis registers its own random generator the first time a thread runs a `@given` test, and checks that
# registration with a full collection and `gc.get_referrers` (a walk over every object): measured, 3.9 s of CPU in the
# first `@given` test of a process that held the real 0.30.0 port (3.3 M objects; 10.7 s wall in a whole idle run),
# 0.24 s once the whole suite is collected (0.33 M objects). So a test process whose test files imported hypothesis runs
# one derandomized example as soon as it has collected them, before any test. It is the registration any first `@given`
# test makes, and the random generator's state is restored after it: no test draws other examples, only the cost moves.
def hypothesis_registered_early() -> bool:
    "Run one derandomized `@given` example in this thread (hypothesis registers its random); False: not loaded."
    import sys
    if "hypothesis" not in sys.modules: return False
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=1, derandomize=True, database=None, deadline=None)
    @given(st.none())
    def first(_): pass
    first()
    return True


# Where the environment turns Python's bytecode cache off (PYTHONDONTWRITEBYTECODE), every process of the run compiled
# each module it imports from its source again: the package, and the test files as pytest rewrites their asserts (226
# modules). Measured (`pytest --collect-only`, one process): 7.6 s CPU, 3.4 s with the cache, so each xdist worker spent
# ~4 s before its first test and each child that imports the package (the command line, kernels) ~0.35 s more. The
# workers of `-n N`, and the children they start, keep their bytecode in pytest's own cache folder (`.pytest_cache`,
# which `--cache-clear` empties), never beside the sources; a prefix the environment sets stays. Only the cost changes.
def bytecode_cache(config) -> str | None:
    ("Where the environment turns bytecode off, point xdist's workers (and their children) at a folder of pytest's "
     "cache for it: that folder; None where nothing changes (bytecode on, a prefix set, no cache, not a controller).")
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None): return None
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"): return None
    cache = getattr(config, "cache", None)   # None under `-p no:cacheprovider`
    if cache is None: return None
    folder = str(cache.mkdir("pycache"))
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    return folder


def pytest_configure(config):
    ("Translations (and the judge's folders) a test makes are kept in a folder of this run, never in the user's cache;"
     " the cyclic collector runs on GC_THRESHOLDS; an xdist worker's torch runs `worker_threads`; the workers keep "
     "bytecode in `bytecode_cache`.")
    run_caches(config)
    bytecode_cache(config)   # before xdist starts the workers
    if (threads := worker_threads(config)) is not None:   # before the test files import torch
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    gc.set_threshold(*GC_THRESHOLDS)
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):   # xdist's controller runs no test
        from archives import guard_downloads
        guard_downloads()   # a test that downloads a release tests/archives.py does not list fails (set-up fetches them)


def pytest_collection_finish(session):
    "The tests are collected, none has run: hypothesis registers its random while the heap is small."
    hypothesis_registered_early()


# A test process holds millions of objects (the releases its session fixtures read, libcst and ast trees), and with
# Python's thresholds (700, 10, 10) the cyclic collector walks all of them again and again: measured, 10.2 s of the
# 22.0 s CPU of test_conformance + test_doctor, 9.4 s of a 25.4 s real release port. With these it collects the young
# generation every 10,000 allocations and walks the whole heap at most once per 100 of those (still only after the
# heap grew by a quarter): 13.0 s and 15.7 s, the largest resident size the same. Only the cost changes, never a verdict.
GC_THRESHOLDS = (10_000, 10, 100)


# --- pytest-xdist (`pytest -n 2`): a worker builds what a file's tests share once for all of them ---------------------
SHARED_PORT = "real_release_port"   # the fixture whose work several files share: the files that use it go to one worker
# The files whose tests read every vllm-ascend release through `release_source` (a session fixture): on one worker, each
# release is opened and read once (measured: 10.9 s CPU for their two heaviest tests together, 19.9 s apart).
EVERY_RELEASE, EVERY_RELEASE_FILES = "every_vllm_ascend_release", ("tests/test_conformance.py", "tests/test_doctor.py")
# The files that torch.compile the same functions (the runtime/ops and bench/modes notebooks, test_ops' graph path)
# or run the same small bench models (test_output_fits' bench views): on one worker, each is compiled and warmed once
# and the later files find it done (measured in two whole runs: test_ops' two graph-path tests 0.5 + 0.6 s after the
# notebooks on the same worker, 10.5 + 6.7 s on the other; test_output_fits' bench views 0.1 s each there, 1.2-2.3 s).
# test_workbook and test_jupyter go with them: they and test_output_fits share one JupyterLab per process
# (`jupyterlab`, ~3 s CPU a start and stop).
COMPILED = "torch_compiled"
COMPILED_FILES = ("tests/test_notebooks.py", "tests/test_ops.py", "tests/test_output_fits.py", "tests/test_workbook.py",
                  "tests/test_jupyter.py")
# The scopes (files, or the groups above) that cost most, heaviest first: a worker starts on these, so no long file is
# left for the end while the other worker idles (the longest first, each next one to the worker that frees first). Read
# from the measured table beside this file, suite_cpu.tsv (each test's CPU, self and waited children, setup to teardown,
# summed per scope over `pytest -n 2`; how to measure it again: tests/suite_cpu.py), never from an earlier run's files.
# Any other scope follows, the ones with more tests first (xdist's own order). Only the order of the work depends on
# this, never a verdict.
SUITE_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_cpu.tsv")


def measured_heaviest(path: str = SUITE_CPU, least: float = 1.0) -> tuple:
    "The scopes the table `path` gives `least` s of CPU or more, costliest first (lines not SECONDS<tab>SCOPE: none)."
    cost = {}
    try:
        with open(path, encoding="utf-8") as f: lines = f.read().splitlines()
    except OSError: return ()
    for line in lines:
        seconds, _, scope = line.partition("\t")
        try: cost[scope.strip()] = float(seconds)
        except ValueError: continue   # the header comment, a blank line
    return tuple(sorted((s for s, c in cost.items() if c >= least and s), key=lambda s: -cost[s]))


HEAVIEST = measured_heaviest()


def heaviest_first(scopes: list) -> list:
    "The scopes (test files, or SHARED_PORT) in the order workers take them: HEAVIEST's order, then the rest as given."
    rank = {s: i for i, s in enumerate(HEAVIEST)}
    return sorted(scopes, key=lambda s: rank.get(s, len(HEAVIEST)))   # stable: the rest keep xdist's order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    ("`pytest -n N` without `--dist`: each test file goes whole to one worker (its module fixtures built once: the "
     "docs site, JupyterLab, an export); the files that use the real release port all go to one worker (the port made "
     "once), as do those that read every vllm-ascend release (EVERY_RELEASE_FILES) and those that compile the same "
     "functions (COMPILED_FILES); the heaviest files are handed out first (`heaviest_first`).")
    given = config.invocation_params.args
    if config.getvalue("dist") != "load" or any(a == "-d" or a.startswith("--dist") for a in given): return None
    from xdist.scheduler import LoadScopeScheduling
    uses = {}

    class ByFile(LoadScopeScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:   # the first unit handed out: the whole queue is known, put the heaviest first
                queue = dict(self.workqueue)
                self.workqueue.clear()
                self.workqueue.update((s, queue[s]) for s in heaviest_first(list(queue)))
                self.ordered = True
            super()._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str: return scope_of(config.rootpath, nodeid, uses)
    return ByFile(config, log)


def scope_of(root, nodeid: str, uses: dict) -> str:
    "The scope of a test (`nodeid`) a worker takes whole: its file, or the group its file is in (`uses`: a memo)."
    path = nodeid.split("::")[0]
    if path in EVERY_RELEASE_FILES: return EVERY_RELEASE
    if path in COMPILED_FILES: return COMPILED
    if path not in uses:
        try: uses[path] = SHARED_PORT in (root / path).read_text(encoding="utf-8")
        except OSError: uses[path] = False
    return SHARED_PORT if uses[path] else path


# --- JupyterLab: one server per test process for the files that look at views in it ---------------------------------
# The views tests read rendered outputs only: a notebook opened in the page starts no kernel (an ipykernel start is
# ~1.5 s of CPU, reaped at the server's stop) unless a test starts it (`LabPage.open(..., kernel=True)`), and the page
# exposes its app (`window.jupyterapp`), so one page load serves every notebook a process opens (a load is ~0.9 s of
# the server's CPU and more of Chromium's).
LAB_ARGS = ("--LabApp.notebook_starts_kernel=False", "--LabApp.expose_app_in_browser=True")


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory):
    ("One JupyterLab per test process (a start and stop is ~3 s of CPU), for test_workbook and test_output_fits: "
     "each writes its notebooks in a folder of its own under `.root`, signs them with a notary of `.data` and adds "
     "the kernels they name under `.tmp / 'jupyter'`; every cell in the page (no virtual scrolling), no news toast; "
     "a notebook the page opens starts no kernel (LAB_ARGS).")
    import json
    from test_jupyter import Server
    tmp = tmp_path_factory.mktemp("jupyterlab")
    for d in ("root", "data", "jupyter/kernels"): (tmp / d).mkdir(parents=True)
    for ext, name, value in (("notebook-extension", "tracker", {"windowingMode": "none"}),
                             ("apputils-extension", "notification", {"fetchNews": "false"})):
        d = tmp / "settings" / "@jupyterlab" / ext
        d.mkdir(parents=True)
        (d / f"{name}.jupyterlab-settings").write_text(json.dumps(value))
    s = Server(tmp, app="jupyterlab", root=tmp / "root", env={
        "JUPYTER_PATH": str(tmp / "jupyter"), "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTER_DATA_DIR": str(tmp / "data")}, args=LAB_ARGS)
    s.root, s.data = tmp / "root", tmp / "data"
    try:
        s.wait_ready()
        yield s
    finally: s.stop()


# The page shows one notebook at a time: `path` opens in the app already loaded, then every other tab (the notebooks
# open before, the launcher) is disposed (no "save?" question) and the file browser shows the folders as they are now,
# as when a page loads the notebook's own URL; with `kernel`, the notebook's own kernel (its kernelspec) is started
# and has answered.
OPEN_ONLY = """async ([path, kernel]) => {
  const app = window.jupyterapp;
  await app.restored;
  const panel = await app.commands.execute('docmanager:open', {path});
  await panel.context.ready;
  await panel.revealed;
  for (const w of Array.from(app.shell.widgets('main'))) if (w !== panel) w.dispose();
  await app.commands.execute('filebrowser:refresh');
  if (kernel) {
    await panel.sessionContext.changeKernel({name: panel.context.model.getMetadata('kernelspec').name});
    await panel.sessionContext.ready;
    await panel.sessionContext.session.kernel.info;
  }
  return panel.sessionContext.session ? panel.sessionContext.session.kernel.name : null;
}"""


class LabPage:
    "One JupyterLab page of the session's server in its Chromium: `open` shows a notebook of the server's root."
    def __init__(self, server, browser):
        self.server, self.page = server, browser.new_page(viewport={"width": 1280, "height": 1000})
        self.page.goto(f"{server.url}/lab?token={server.token}&reset")
        self.page.wait_for_function("window.jupyterapp !== undefined", timeout=90_000)

    def open(self, path: str, width: int, height: int, kernel: bool = False):
        "Show the notebook `path` alone at `width` x `height`: the name of the kernel it runs (None: none started)."
        self.page.set_viewport_size({"width": width, "height": height})
        return self.page.evaluate(OPEN_ONLY, [path, kernel])


@pytest.fixture(scope="session")
def lab_page(jupyterlab, browser):
    "One JupyterLab page per test process (LabPage): test_workbook and test_output_fits open their notebooks in it."
    page = LabPage(jupyterlab, browser)
    try: yield page
    finally: page.page.close()


# --- Chromium: one browser per test process for the files that look at pages in it ---------------------------------
@pytest.fixture(scope="session")
def browser():
    ("One headless Chromium per test process (test_docs_site, test_workbook, test_output_fits: a launch is ~0.9 s of "
     "CPU and ~2 s); without one the browser tests skip with the reason, and fail under CI.")
    from test_docs_site import CHROMIUM, CHROMIUM_ARGS
    if not os.path.exists(CHROMIUM):
        why = (f"{CHROMIUM} not found: the browser tests (docs site, JupyterLab) drive Debian's chromium; install it "
               "with `apt-get update && apt-get install -y chromium` (scripts/setup.sh does where it may)")
        if os.environ.get("CI"): pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try: yield b
        finally: b.close()


# --- real vllm / vllm-ascend releases, read statically (omni_npu_port.sources.fetch and .readers) -------------------------
@pytest.fixture(scope="session")
def release_source():
    """`release_source("vllm-ascend==0.23.0.post1", kind=None)` -> a SourceTree of that release (of `kind`
    "wheel" or "sdist" when given, else the smaller file), downloaded once into ~/.cache/omni-npu-port/pkgs
    ($OMNI_NPU_PORT_CACHE; never into the repository) and opened once per session."""
    from omni_npu_port.sources.fetch import FetchError, fetch_package
    from omni_npu_port.sources.readers import open_source
    trees = {}

    def get(spec: str, kind: str | None = None):
        key = (spec, kind)
        if key not in trees:
            try: path = fetch_package(spec, kind=kind)
            except FetchError as e:
                pytest.fail(f"cannot download {spec} for the conformance tests: {e}. These tests read real releases "
                            "from PyPI (CI has network): `python tests/archives.py` fetches every one they read; on an "
                            "offline machine put the wheel or sdist into ~/.cache/omni-npu-port/pkgs first.",
                            pytrace=False)
            trees[key] = open_source(path)
        return trees[key]
    return get


@pytest.fixture(scope="session")
def real_release_port():
    """`real_release_port("0.30.0")` -> `port.release.port_release("0.30.0")`, the real vLLM-Omni release from the
    package cache: ported once per session and shared by the tests that read it (a port is deterministic; none of them
    writes)."""
    from omni_npu_port.port.release import port_release
    ports = {}

    def get(version: str):
        if version not in ports: ports[version] = port_release(version)
        return ports[version]
    return get


# --- the command line in a child process whose memory is capped (tests of the up-front memory refusals) ---------------
@pytest.fixture
def cli_under_rlimit():
    """`cli_under_rlimit(args, headroom_mb, env)` -> the CompletedProcess of `omni-npu-port ARGS` run in a child whose
    address space is capped at what it maps after import plus `headroom_mb` (env added to this process's)."""
    import subprocess
    import sys

    def run(args: list, headroom_mb: int, env: dict):
        code = ("import resource, sys\n"
                "from omni_npu_port.cli.main import main\n"
                "vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
                f"resource.setrlimit(resource.RLIMIT_AS, (vm + ({headroom_mb} << 20), resource.RLIM_INFINITY))\n"
                f"sys.exit(main({list(args)!r}))\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    return run


def pytest_unconfigure(config):
    ("The run is over: its cache folder removed (by the process that made it); no exit-time walk of what the tests "
     "built and cached (libcst trees, whole releases' ast), as `cli.main.entry` does.")
    import gc
    remove_run_caches()
    gc.freeze()


def remove_run_caches() -> None:
    "Remove the run's cache folders this process made (`run_caches`)."
    import shutil
    while _made_here: shutil.rmtree(_made_here.pop(), ignore_errors=True)



# --- a child pytest that runs one test loads only the plugins that test uses -----------------------------------------
# Measured: a child pytest of one test costs ~1.6 s of CPU, ~0.8 s of it importing hypothesis (its pytest plugin imports
# the whole package) and anyio (its plugin). A test that is no hypothesis test (no `@given`) and is not marked `anyio`
# needs neither: only the cost changes, never a verdict.
def plugins_unused(item) -> list:
    "`-p no:NAME` for the installed pytest plugins that the test `item` does not use (hypothesis's, anyio's)."
    uses_hypothesis = hasattr(getattr(item, "function", None), "hypothesis")   # what `@given` leaves on a test
    uses_anyio = item.get_closest_marker("anyio") is not None
    return (["-p", "no:hypothesispytest"] * (not uses_hypothesis)) + (["-p", "no:anyio"] * (not uses_anyio))


# --- a test that must fork: where this process runs other threads (an xdist worker's), it runs in a child pytest ---
@pytest.fixture
def forks_alone(request):
    """For a test that must fork a pool (`core.io.can_fork`): True where this process has one thread and the test
    goes on; else the test runs in a child pytest of one thread (no xdist), must pass there (never skip): False."""
    import subprocess
    import sys
    import threading
    if threading.active_count() == 1: return True
    args = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:randomly",
            *plugins_unused(request.node), "-q", "-rs", request.node.nodeid]
    r = subprocess.run(args, cwd=request.config.rootpath, capture_output=True, text=True, timeout=600)
    said = r.stdout[-3000:] + r.stderr[-2000:]
    assert r.returncode == 0 and "1 passed" in r.stdout and "skipped" not in r.stdout, said
    return False
