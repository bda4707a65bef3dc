"""Shared pytest fixtures. Add fixtures below; do not replace this file (several areas share it)."""
import os
import tempfile

import pytest


def pytest_configure(config):
    "Translations (and the judge's folders) a test makes are kept in a folder of this run, never in the user's cache."
    os.environ.setdefault("OMNI_NPU_PORT_TRANSLATION_CACHE", tempfile.mkdtemp(prefix="onp-translations-"))
    os.environ.setdefault("OMNI_NPU_PORT_JUDGE_CACHE", tempfile.mkdtemp(prefix="onp-judge-"))   # the judge's (issue 31)


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
                            "from PyPI (CI has network); on an offline machine put the wheel or sdist into "
                            "~/.cache/omni-npu-port/pkgs first.", pytrace=False)
            trees[key] = open_source(path)
        return trees[key]
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
    "The run is over: no exit-time walk of what the tests built and cached (libcst trees, whole releases' ast), as `cli.main.entry` does."
    import gc
    gc.freeze()


def pytest_sessionfinish(session, exitstatus):
    "After a whole-suite run (no -k, -m, file or node selection), record its test count: the README states it (docs.site.readme_figures)."
    args = session.config.invocation_params.args
    picked = any(a.startswith(("-k", "-m", "--lf", "--last-failed", "--deselect")) or a.endswith(".py") or "::" in a
                 or ("tests/" in a and a.rstrip("/") != "tests") for a in args)
    if picked or not session.testscollected or getattr(session.config, "cache", None) is None: return
    import datetime
    session.config.cache.set("omni-npu-port/last-run", {
        "tests": session.testscollected, "failed": session.testsfailed, "exit": int(exitstatus),
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
