"""The suite's CPU per scope (conftest's `scope_of`), measured: conftest hands the costliest scopes out first, in the
order of the table this writes, suite_cpu.tsv. CPU, not wall time: the machines the suite is measured on are shared.

Measure (a pytest plugin, then this script):
    CPUMETER_DIR=DIR PYTHONPATH=tests python -m pytest -n 2 -p no:randomly -p suite_cpu
    python tests/suite_cpu.py "where and when it was measured" DIR [DIR ...] > tests/suite_cpu.tsv
(several runs' folders: each scope's mean over the runs that have it, so a one-time cost a run's order put on one
file, such as the first read of a release on a worker, weighs less)
"""
import json
import os
import resource
import sys
from pathlib import Path

import pytest

OUT = os.environ.get("CPUMETER_DIR")


def cpu() -> float:
    "CPU seconds of this process and of the children it waited for."
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# A process's last test tears its session's fixtures down (JupyterLab, whose kernels' CPU comes back with it, Chromium):
# a cost at the process's end whatever the order, so a line of its own, which the table leaves out.
SESSION_END = "<session teardown>"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    ("Each test's CPU, setup to teardown (a module fixture's teardown counts in its module's last test): one JSON line;"
     " the last test's teardown (the session's) a line of its own.")
    before = cpu()
    yield
    if OUT:
        end = getattr(item, "_session_end_cpu", None)
        lines = [{"id": item.nodeid, "cpu": cpu() - before - (end or 0.0)}]
        if end is not None: lines.append({"id": SESSION_END, "cpu": end})
        with open(os.path.join(OUT, f"cpu-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    "The CPU of the last test's teardown, where the session's fixtures end (`nextitem` None)."
    before = cpu()
    yield
    if nextitem is None: item._session_end_cpu = cpu() - before


def table(folders: list, note: str) -> str:
    "The table of the JSON lines in `folders` (one a run): `SECONDS\\tSCOPE`, each scope's mean, costliest first."
    from conftest import scope_of
    root, uses, runs = Path(__file__).parent.parent, {}, []
    for folder in folders:
        cost = {}
        for f in sorted(Path(folder).glob("cpu-*.jsonl")):
            for line in f.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                if r["id"] == SESSION_END: continue   # at the end of a process whatever the order
                s = scope_of(root, r["id"], uses)
                cost[s] = cost.get(s, 0.0) + r["cpu"]
        runs.append(cost)
    mean = {s: sum(c[s] for c in runs if s in c) / sum(s in c for c in runs) for s in set().union(*runs)}
    rows = [f"{c:.1f}\t{s}" for s, c in sorted(mean.items(), key=lambda sc: (-sc[1], sc[0]))]
    return "\n".join([f"# CPU seconds per scope, measured by tests/suite_cpu.py: {note}", *rows]) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.stdout.write(table(sys.argv[2:], sys.argv[1]))
