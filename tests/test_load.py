"""Background load: the hogs really run while the block runs, and are gone after it."""

import os
import signal
import subprocess
import time

import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import load


def _cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_hogs_burn_cpu_and_are_killed():
    with load.background(cpu=1, memory=1, memory_mib=16, settle=0.2) as hogs:
        assert len(hogs) == 2
        before = [_cpu_seconds(h.pid) for h in hogs]
        time.sleep(1.0)
        after = [_cpu_seconds(h.pid) for h in hogs]
        # busy processes: each gets a good share of a core even on a shared 2-core machine
        assert all(b - a > 0.1 for a, b in zip(before, after)), (before, after)
    assert [h.returncode for h in hogs] == [-signal.SIGKILL] * 2  # killed and reaped


def test_confined_to_the_same_cpus():
    """The block, the hogs and what the block starts share the CPUs asked for; then restored."""
    before = os.sched_getaffinity(0)
    with load.background(cpu=1, cpus=1, settle=0) as hogs:
        inside = os.sched_getaffinity(0)
        assert inside == {min(before)}
        assert os.sched_getaffinity(hogs[0].pid) == inside
        child = subprocess.run(
            ["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True
        )
        assert child.stdout.split()[-1] == str(min(before))
    assert os.sched_getaffinity(0) == before
    with pytest.raises(UsageError, match="bad cpus 0; valid: 1.."):
        with load.background(cpus=0):
            pass
    assert os.sched_getaffinity(0) == before


def test_killed_on_exception_too():
    with pytest.raises(KeyError):
        with load.background(cpu=1, settle=0) as hogs:
            raise KeyError("boom")
    assert hogs[0].returncode == -signal.SIGKILL


def test_bad_arguments():
    with pytest.raises(UsageError, match="bad cpu -1; valid: an integer >= 0"):
        with load.background(cpu=-1):
            pass
    with pytest.raises(UsageError, match="bad memory_mib 0; valid: an integer >= 1"):
        with load.background(memory=1, memory_mib=0):
            pass
    with load.background() as hogs:  # nothing asked: nothing started, no wait
        assert hogs == []
