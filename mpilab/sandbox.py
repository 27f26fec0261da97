"""Run untrusted student code under limits.

A sandboxed run gets a wall-time limit that kills its whole process group (an MPI deadlock
ends as a failed check, never as a hung grader), an address-space limit per process, an output
cap, a fresh scratch directory holding only the files it is given, and no network where the
machine allows it (a new network namespace via ``unshare --net``; MPI still runs on loopback).
"""

import dataclasses
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile

from mpilab.errors import UsageError

DEADLOCK_HINT = "a deadlock? check the order of sends and receives"

#: Open MPI: "mpirun noticed that process rank 1 with PID 0 on node x exited on signal 11 (...)"
_OMPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
#: Open MPI: "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD with errorcode 3"
_OMPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+)")
#: MPICH / hydra: "application called MPI_Abort(MPI_COMM_WORLD, 3) - process 2"
_MPICH_ABORT = re.compile(r"MPI_Abort\([^,]+, (-?\d+)\) - process (\d+)")
#: MPICH / hydra: "=   RANK 1 PID 123 RUNNING AT host\n=   KILLED BY SIGNAL: 11 (Segmentation fault)"
_MPICH_SIGNAL = re.compile(r"RANK (\d+) PID \d+ RUNNING AT \S+\s*=\s*KILLED BY SIGNAL: (\d+)")


@dataclasses.dataclass
class SandboxResult:
    """What a sandboxed run did.

    Attributes
    ----------
    argv : list of str
        The command that ran (inside the sandbox wrappers).
    returncode : int or None
        Exit status; None when the run was killed on time-out.
    stdout, stderr : str
        Output, each cut at the output cap.
    timed_out : bool
        True when the wall-time limit killed the process group.
    timeout : float
        The limit in seconds.
    network_isolated : bool
        True when the run had its own (empty) network namespace.
    note : str
        Why isolation was not possible, when it was not.
    """

    argv: list
    returncode: object
    stdout: str
    stderr: str
    timed_out: bool
    timeout: float
    network_isolated: bool
    note: str = ""

    @property
    def ok(self):
        """True when the run finished in time with exit status 0."""
        return not self.timed_out and self.returncode == 0

    def crash(self):
        """Describe a crash as ``(rank, what)``, or None if none is recognised.

        Returns
        -------
        tuple of (int or None, str) or None
            The failing rank (None when the launcher did not say) and e.g. ``"signal 11
            (SIGSEGV)"`` or ``"MPI_Abort with error code 3"``.
        """
        text = self.stdout + "\n" + self.stderr
        for pattern, rank_first in ((_OMPI_SIGNAL, True), (_MPICH_SIGNAL, True)):
            m = pattern.search(text)
            if m:
                rank, sig = int(m.group(1)), int(m.group(2))
                return rank, f"signal {sig} ({_signal_name(sig)})"
        m = _OMPI_ABORT.search(text)
        if m:
            return int(m.group(1)), f"MPI_Abort with error code {m.group(2)}"
        m = _MPICH_ABORT.search(text)
        if m:
            return int(m.group(2)), f"MPI_Abort with error code {m.group(1)}"
        if self.returncode is not None and self.returncode < 0:
            sig = -self.returncode
            return None, f"signal {sig} ({_signal_name(sig)})"
        return None

    def failure(self):
        """One line saying why the run failed, or None if it succeeded."""
        if self.timed_out:
            return timeout_message(self.timeout)
        if self.returncode == 0:
            return None
        crash = self.crash()
        if crash:
            rank, what = crash
            where = f"rank {rank}" if rank is not None else "a process"
            return f"{where} crashed: {what}"
        last = (self.stderr.strip() or self.stdout.strip()).splitlines()[-3:]
        return f"exit status {self.returncode}: " + " | ".join(last)


def _signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown signal"


def timeout_message(seconds):
    """The message of a run killed at its time limit (the wording students see)."""
    return f"timed out after {seconds:g} s — {DEADLOCK_HINT}"


@functools.lru_cache(maxsize=None)
def network_isolation():
    """Check once whether ``unshare --net`` works here.

    Returns
    -------
    tuple of (bool, str)
        ``(True, "")`` when runs can get their own network namespace, else ``(False, why)``.
    """
    if shutil.which("unshare") is None:
        return False, "unshare (util-linux) is not installed; runs keep the host network"
    try:
        p = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare --net failed ({exc}); runs keep the host network"
    if p.returncode != 0:
        return False, f"unshare --net failed ({p.stderr.strip()}); runs keep the host network"
    return True, ""


def _limits(memory_bytes):
    def apply():
        os.setsid()
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run(argv, *, cwd, timeout=60.0, memory_mb=2048, output_cap=200_000, env=None, network=False):
    """Run ``argv`` in ``cwd`` under a time, memory and output limit.

    Parameters
    ----------
    argv : list of str
        The command.
    cwd : str or path
        Its working directory (usually from :func:`scratch_dir`).
    timeout : float
        Wall-time limit in seconds; on expiry the whole process group is killed.
    memory_mb : int
        Address-space limit (RLIMIT_AS) of each process, in MiB; 0 for none.
    output_cap : int
        Characters kept of stdout and of stderr.
    env : dict, optional
        Extra environment variables.
    network : bool
        Keep the host network (default: a new, empty network namespace when possible).

    Returns
    -------
    SandboxResult
    """
    if timeout <= 0:
        raise UsageError(f"timeout must be positive, got {timeout!r}")
    full_env = dict(os.environ)
    full_env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    full_env.update(env or {})
    isolated, note = (False, "network allowed by the caller") if network else network_isolation()
    cmd = list(map(str, argv))
    if isolated:
        cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$@"', "sh"] + cmd
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=full_env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limits(memory_mb * 1024 * 1024 if memory_mb else 0))
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        out, err = proc.communicate()
    return SandboxResult(argv=cmd, returncode=None if timed_out else proc.returncode,
                         stdout=out.decode(errors="replace")[:output_cap],
                         stderr=err.decode(errors="replace")[:output_cap],
                         timed_out=timed_out, timeout=timeout,
                         network_isolated=isolated, note=note)


def _kill_group(pgid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            import time
            time.sleep(0.5)


def scratch_dir(files, prefix="mpilab-grade-"):
    """Make a fresh directory holding copies of ``files`` only.

    Parameters
    ----------
    files : iterable of path
        Files to copy in (the student's files and the build inputs, nothing else).

    Returns
    -------
    str
        The new directory; the caller removes it (``shutil.rmtree``).
    """
    d = tempfile.mkdtemp(prefix=prefix)
    for f in files:
        shutil.copy(f, d)
    return d
