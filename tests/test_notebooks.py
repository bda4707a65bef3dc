"""Run every notebook in nbs/ under nbdev's rules, one pytest case per notebook.

Cells flagged with a `tst_flags` directive from pyproject.toml (`#| npu`, `#| cuda`, `#| slow`, `#| notest`)
are skipped, as `nbdev-test` skips them; set OMNI_NPU_PORT_NB_FLAGS="npu slow" (space-separated) to run them.
"""
import os
import signal
import sys
from io import StringIO
from pathlib import Path

import pytest
from nbdev import test as nbdev_test
from nbdev.test import test_nb as run_notebook  # imported under another name so pytest doesn't collect it

from omni_npu_port.docs.site import find_root, nbdev_settings, notebooks

ROOT = find_root(Path(__file__).parent)
SETTINGS = nbdev_settings(ROOT)
NBS = ROOT / SETTINGS["nbs_path"]
# The notebooks another test runs whole with the same cells skipped (`#| eval: false`, tst_flags): test_workbook runs
# the workbook through a real kernel, offline on an empty cache; running it here again would test nothing more.
RUN_ELSEWHERE = {"workbook.ipynb": "tests/test_workbook.py"}
NOTEBOOKS = [nb for nb in notebooks(ROOT) if nb.as_posix() not in RUN_ELSEWHERE]
# The cells (notebook, cell id) left out of the notebook's run (`#| eval: false`) because a test runs the same command
# or probe and checks what the cell checks: -> (that test file, that test, the code both must hold). Each costs seconds
# of CPU (a port or an audit with its judge, a fresh interpreter) and would only run it a second time.
CELLS_RUN_ELSEWHERE = {
    ("cli/port.ipynb", "d224e448"): ("tests/test_release.py",
                                     "test_the_command_writes_the_modules_and_refuses_what_release_finds_itself",
                                     ('"--release"', '"--source"', '"--history", "0.17.0"', '"-o"', "== 0",
                                      "vllm_omni/worker/npu/npu_ar_model_runner.py", "REPORT_JSON).is_file()")),
    ("cli/port.ipynb", "3b8d5f61"): ("tests/test_port_update_release.py", "test_cli_release_from",
                                     ('"--release"', '"--from"', '"--target"', '"--source"', '"-o"', "rc == 1",
                                      "updated from vLLM-Omni 0.18.0", "REPORT_JSON).is_file()")),
    ("cli/audit.ipynb", "e73f9e90"): ("tests/test_audit.py", "test_cli_exit_codes_and_formats",
                                      ('"audit"', '"--gpu"', '"--npu"', '"--from"', '"--source"', "omni_prev",
                                       "omni_next", "== 0", "== 1")),
    ("runtime/platform.ipynb", "caec7d7d"): ("tests/test_platform.py",
                                             "test_import_and_cpu_use_do_not_load_torch_npu_or_vllm",
                                             ("import sys, omni_npu_port.runtime.platform as m", "get_platform('cpu')",
                                              "describe()", "('torch_npu', 'vllm', 'vllm_ascend'", "subprocess.run(")),
}
FLAGS_VAR = "OMNI_NPU_PORT_NB_FLAGS"


def skip_flags() -> list:
    "The test flags pyproject.toml's [tool.nbdev] tst_flags marks as skipped (space-separated or a list)."
    flags = SETTINGS.get("tst_flags", [])
    return flags.split() if isinstance(flags, str) else list(flags)


def library_state() -> list:
    ("Every list and dict at the top of a loaded omni_npu_port module, with a copy of its contents: the registries "
     "(rule visitors, codes, strategies, passes, exclusions) a notebook run in this process defines again.")
    held = []
    for name, mod in list(sys.modules.items()):
        if name == "omni_npu_port" or name.startswith("omni_npu_port."):
            held += [(v, v.copy()) for k, v in vars(mod).items()
                     if type(v) in (list, dict) and not k.startswith("__")]   # __builtins__ is the interpreter's
    return held


def restore(held: list) -> None:
    ("Put back each entry a notebook replaced (a rule class, a code registered again by the notebook's own cells): it "
     "never serves a later test. Entries added meanwhile stay: a library module the notebook imported registered them.")
    for v, was in held:
        if isinstance(v, dict):
            for k in was.keys() & v.keys():
                if v[k] is not was[k]: v[k] = was[k]
        elif isinstance(v, list):
            for i, (now, then) in enumerate(zip(v, was)):
                if now is not then: v[i] = then


def test_notebooks_found():
    assert NOTEBOOKS, f"no notebooks found in {NBS}: the notebook tests would pass without testing anything"


def test_each_notebook_run_elsewhere_is_run_there():
    "A notebook left out here is one its test file still reads as a whole and runs, skipping the same flagged cells."
    for nb, test in RUN_ELSEWHERE.items():
        text = (ROOT / test).read_text(encoding="utf-8")
        assert (NBS / nb).is_file() and f'"{nb}"' in text and "tst_flags" in text and "NotebookClient(" in text, test


def test_each_cell_run_elsewhere_is_run_there():
    ("Fires where a cell left out of its notebook's run is no longer `#| eval: false`, or the test named for it is "
     "gone or no longer holds the command, options and checks the cell holds; must not: both hold each of them.")
    import ast
    import json
    for (nb, cell_id), (test_file, test_name, shared) in CELLS_RUN_ELSEWHERE.items():
        [cell] = [c for c in json.loads((NBS / nb).read_text(encoding="utf-8"))["cells"] if c.get("id") == cell_id]
        src = "".join(cell["source"])
        assert src.startswith("#| eval: false"), (nb, cell_id)
        text = (ROOT / test_file).read_text(encoding="utf-8")
        [fn] = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == test_name]
        body = ast.get_source_segment(text, fn)
        assert [s for s in shared if s not in src] == [], (nb, cell_id)
        assert [s for s in shared if s not in body] == [], (test_file, test_name)


class ClosedShells:
    ("Stands in for nbdev's `CaptureShell` while one notebook runs and closes every shell it made after the run: "
     "`test_nb` never closes its shell, whose event-loop thread would outlive the test (and make `core.io.can_fork` "
     "false for every later test in this process).")

    def __init__(self, real):
        self.real, self.made = real, []

    def __call__(self, *args, **kwargs):
        shell = self.real(*args, **kwargs)
        self.made.append(shell)
        return shell

    def close(self) -> None:
        for shell in self.made: shell.close()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[str(n.with_suffix("")) for n in NOTEBOOKS])
def test_notebook(nb, monkeypatch):
    force = os.environ.get(FLAGS_VAR, "").split()
    unknown = set(force) - set(skip_flags())
    assert not unknown, f"{FLAGS_VAR} names {sorted(unknown)}, which are not tst_flags in pyproject.toml ({skip_flags()})"
    err, real_stderr, handler = StringIO(), sys.__stderr__, signal.getsignal(signal.SIGINT)
    sys.__stderr__ = err  # test_nb writes the failing cell's traceback to sys.__stderr__
    held = library_state()
    shells = ClosedShells(nbdev_test.CaptureShell)
    monkeypatch.setattr(nbdev_test, "CaptureShell", shells)
    try:
        ok, secs = run_notebook(NBS / nb, skip_flags=skip_flags(), force_flags=force, basepath=ROOT,
                                cell_timeout=int(SETTINGS.get("cell_timeout", 600)))
    finally:
        sys.__stderr__ = real_stderr
        signal.signal(signal.SIGINT, handler)  # test_nb installs its own Ctrl-C handler; give pytest its own back
        restore(held)
        shells.close()
    assert ok, (f"nbs/{nb.as_posix()} failed under nbdev's rules (skipped flags: {' '.join(sorted(set(skip_flags()) - set(force)))})"
                f"; the failing cell:\n{err.getvalue()}\nRun it alone: nbdev-test nbs/{nb.as_posix()}")


def test_a_notebook_run_leaves_no_thread(tmp_path, monkeypatch):
    ("Fires: nbdev's run of a one-cell notebook starts its shell's event-loop thread; must not: after `ClosedShells` "
     "closes the shells the run made, no thread runs that did not run before (a later test may still fork).")
    import threading

    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    path = tmp_path / "one.ipynb"
    nbformat.write(nb, path)
    before = set(threading.enumerate())
    shells = ClosedShells(nbdev_test.CaptureShell)
    monkeypatch.setattr(nbdev_test, "CaptureShell", shells)
    ok, _ = run_notebook(path, basepath=ROOT)
    assert ok and len(shells.made) == 1 and not set(threading.enumerate()) <= before   # its loop thread runs
    shells.close()
    assert set(threading.enumerate()) <= before
