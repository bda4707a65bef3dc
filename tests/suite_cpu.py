"""The suite's CPU per scope (conftest's `scope_of`), measured: conftest hands the costliest scopes out first, in the
order of the table this writes, suite_cpu.tsv. CPU, not wall time: the machines the suite is measured on are shared.

Measure (a pytest plugin, then this script):
    CPUMETER_DIR=DIR PYTHONPATH=tests python -m pytest -n 2 -p no:randomly -p suite_cpu
    python tests/suite_cpu.py DIR "where and when it was measured" > tests/suite_cpu.tsv
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    "Each test's CPU, setup to teardown (a module fixture's teardown counts in its module's last test): one JSON line."
    before = cpu()
    yield
    if OUT:
        with open(os.path.join(OUT, f"cpu-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": item.nodeid, "cpu": cpu() - before}) + "\n")


def table(folder: Path, note: str) -> str:
    "The table of the JSON lines in `folder`: `SECONDS\\tSCOPE` per scope, costliest first, under a comment (`note`)."
    from conftest import scope_of
    root, uses, cost = Path(__file__).parent.parent, {}, {}
    for f in sorted(folder.glob("cpu-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            s = scope_of(root, r["id"], uses)
            cost[s] = cost.get(s, 0.0) + r["cpu"]
    rows = [f"{c:.1f}\t{s}" for s, c in sorted(cost.items(), key=lambda sc: -sc[1])]
    return "\n".join([f"# CPU seconds per scope, measured by tests/suite_cpu.py: {note}", *rows]) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.stdout.write(table(Path(sys.argv[1]), " ".join(sys.argv[2:]) or "(no note)"))
