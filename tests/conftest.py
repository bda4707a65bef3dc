"""Shared pytest fixtures. Add fixtures below; do not replace this file (several areas share it)."""
import os
import tempfile

import pytest


def pytest_configure(config):
    "Translations a test makes are kept in a folder of this run (and its subprocesses), never in the user's cache."
    os.environ.setdefault("OMNI_NPU_PORT_TRANSLATION_CACHE", tempfile.mkdtemp(prefix="onp-translations-"))


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
