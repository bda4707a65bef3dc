"A process pool only where its threads fit the address space (CPython's executor hangs when its feeder cannot start)."
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = ("import resource\n"
         "from omni_npu_port.core.io import pool_fits, worker_pool\n"
         "vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
         "if {mb} >= 0: resource.setrlimit(resource.RLIMIT_AS, (vm + ({mb} << 20), resource.RLIM_INFINITY))\n"
         "print(pool_fits(), worker_pool(2, fork_only=True) is None)\n")


def child(mb: int) -> str:
    return subprocess.run([sys.executable, "-c", CHILD.format(mb=mb)], capture_output=True, text=True,
                          timeout=120, check=True).stdout.split()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_tight_address_space_cap_gets_no_pool():
    assert child(100) == ["False", "True"]   # fires: 100 MB left is less than a pool's threads may reserve


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_no_cap_or_a_roomy_one_keeps_the_pool():
    assert child(-1)[0] == "True" and child(1024)[0] == "True"   # must not fire: no cap, or 1 GB left
