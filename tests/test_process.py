"""mpilab.core.process: the one runner (own process group, output read as it comes, caps,
the whole group killed at the time-out)."""

import os
import sys
import time

import pytest

from mpilab.core import process
from mpilab.core.errors import LaunchError, ToolMissing, UsageError


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split(") ", 1)[1][0] != "Z"


def test_exit_status_and_both_streams():
    res = process.run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        timeout=30,
    )
    assert (res.returncode, res.stdout, res.stderr, res.timed_out) == (3, "out\n", "err\n", False)
    assert not res.ok and res.stdout_bytes == 4


def test_timeout_kills_a_grandchild_that_ignores_sigterm(tmp_path):
    pidfile = tmp_path / "pid"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True); time.sleep(600)\n"
    )
    t0 = time.monotonic()
    res = process.run([sys.executable, "-c", code], timeout=2)
    assert res.timed_out and res.returncode is None and res.stdout == "started\n"
    assert time.monotonic() - t0 < 15
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild survived the group kill"


def test_output_past_the_cap_is_thrown_away_but_its_end_is_kept():
    code = "import sys; sys.stdout.write('x' * 100000 + 'THE END')"
    res = process.run([sys.executable, "-c", code], timeout=30, output_cap=1000)
    assert res.stdout_bytes == 100007
    head, marker, tail = res.stdout.split("\n", 2)
    assert head == "x" * 1000
    assert marker == process.cut_marker(1000, 100007 - 1000 - process.TAIL_BYTES)
    assert tail.endswith("THE END") and len(tail) == process.TAIL_BYTES


def test_run_checked_names_the_command_and_the_tail():
    with pytest.raises(LaunchError, match=r"exit code 2: my-command\nstderr tail:\nboom"):
        process.run_checked(
            [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(2)"],
            timeout=30,
            shown="my-command",
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(timeout=0), "bad timeout 0; valid: a number of seconds > 0, or None"),
        (dict(output_cap=-1), "bad output_cap -1; valid: a number of bytes > 0, or None"),
    ],
)
def test_bad_limits_are_refused(kwargs, message):
    with pytest.raises(UsageError, match=message):
        process.run(["true"], **kwargs)


def test_a_missing_program_is_a_tool_missing():
    with pytest.raises(ToolMissing, match="'no-such-program-xyz' not found"):
        process.run(["no-such-program-xyz"], timeout=5)


def test_preexec_runs_in_the_new_session_and_can_set_limits():
    """What the grading sandbox needs: limits set in the child, which leads its own group."""
    import resource

    def limits():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    code = (
        "import os, resource; "
        "print(resource.getrlimit(resource.RLIMIT_CORE)[1], os.getpgid(0) == os.getpid())"
    )
    res = process.run([sys.executable, "-c", code], timeout=30, preexec_fn=limits)
    assert res.ok and res.stdout.split() == ["0", "True"]
