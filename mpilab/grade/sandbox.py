"""Run untrusted student code under limits.

A sandboxed run gets a wall-time limit that kills its whole process group (an MPI deadlock
ends as a failed check, never as a hung grader), an address-space limit per process, an output
cap (the output is read as it comes and what is past the cap is thrown away, so a program that
prints in a loop costs no memory), a fresh scratch directory holding only the files it is given,
and, where the machine allows it (``unshare --net --mount``, as root), no network (MPI still
runs on loopback) and no sight of the kit's solutions, the grader or the course being graded
(:func:`confine`).
"""

import dataclasses
import functools
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from mpilab.core.errors import UsageError
from mpilab.core import paths

DEADLOCK_HINT = "a deadlock? check the order of sends and receives"

#: Open MPI: "mpirun noticed that process rank 1 with PID 0 on node x exited on signal 11 (...)"
_OMPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
#: Open MPI: "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD with errorcode 3"
_OMPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+)")
#: MPICH / hydra: "application called MPI_Abort(MPI_COMM_WORLD, 3) - process 2"
_MPICH_ABORT = re.compile(r"MPI_Abort\([^,]+, (-?\d+)\) - process (\d+)")
#: MPICH / hydra: "=   RANK 1 PID 123 RUNNING AT host\n=   KILLED BY SIGNAL: 11 (Segmentation fault)"
_MPICH_SIGNAL = re.compile(r"RANK (\d+) PID \d+ RUNNING AT \S+\s*=\s*KILLED BY SIGNAL: (\d+)")
#: The grader's own MPI_Abort (mpilab/data/grading/report_abort.c, linked into student programs).
_MPILAB_ABORT = re.compile(r"^mpilab: rank (-?\d+) called MPI_Abort with error code (-?\d+)$", re.M)
#: SMPI: "[thin00-s0-c02:2:(3) 0.000000] ...: [smpi_pmpi/WARNING] MPI_Abort was called, ..." (actor 2 = rank 2)
_SMPI_ABORT = re.compile(r"^\[[^:\]\s]+:(\d+):\(\d+\) [\d.]+\] \S+ \[smpi_pmpi/WARNING\] MPI_Abort was called", re.M)


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
        Output, each cut at the output cap; a cut one goes on with a line saying so
        (:func:`cut_message`) and its last bytes.
    timed_out : bool
        True when the wall-time limit killed the process group.
    timeout : float
        The limit in seconds.
    network_isolated : bool
        True when the run had its own (empty) network namespace.
    note : str
        Why isolation was not possible, when it was not.
    stdout_bytes, stderr_bytes : int
        How many bytes the program wrote to each (kept or not).
    output_cap : int or None
        The cap in bytes of each stream.
    """

    argv: list
    returncode: object
    stdout: str
    stderr: str
    timed_out: bool
    timeout: float
    network_isolated: bool
    note: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    output_cap: object = None

    @property
    def output_cut(self):
        """True when stdout or stderr was longer than the cap (the rest was thrown away)."""
        return self.output_cap is not None and max(self.stdout_bytes, self.stderr_bytes) > self.output_cap

    @property
    def ok(self):
        """True when the run finished in time with exit status 0 and no rank called MPI_Abort
        (SMPI exits with status 0 after an abort)."""
        return not self.timed_out and self.returncode == 0 and self.abort() is None

    def abort(self):
        """The first rank that called MPI_Abort, as ``(rank, "MPI_Abort with error code E")``, or None.

        Read from the grader's own line (``report_abort.c``), else from Open MPI's, MPICH's or
        SMPI's message (SMPI does not give the error code).
        """
        text = self.stdout + "\n" + self.stderr
        for pattern, rank_group, code_group in ((_MPILAB_ABORT, 1, 2), (_OMPI_ABORT, 1, 2), (_MPICH_ABORT, 2, 1),
                                                (_SMPI_ABORT, 1, None)):
            m = pattern.search(text)
            if m:
                code = f" with error code {m.group(code_group)}" if code_group else ""
                return int(m.group(rank_group)), "MPI_Abort" + code
        return None

    def crash(self):
        """Describe a crash as ``(rank, what)``, or None if none is recognised.

        Returns
        -------
        tuple of (int or None, str) or None
            The failing rank (None when the launcher did not say) and e.g. ``"signal 11
            (SIGSEGV)"`` or ``"MPI_Abort with error code 3"``.
        """
        abort = self.abort()
        if abort:
            return abort
        text = self.stdout + "\n" + self.stderr
        for pattern in (_OMPI_SIGNAL, _MPICH_SIGNAL):
            m = pattern.search(text)
            if m:
                rank, sig = int(m.group(1)), int(m.group(2))
                return rank, f"signal {sig} ({_signal_name(sig)})"
        if self.returncode is not None and self.returncode < 0:
            sig = -self.returncode
            return None, f"signal {sig} ({_signal_name(sig)})"
        return None

    def failure(self):
        """One line saying why the run failed, or None if it succeeded."""
        if self.timed_out:
            cut = f"; it printed {max(self.stdout_bytes, self.stderr_bytes):,} bytes (output cut at " \
                  f"{self.output_cap} bytes)" if self.output_cut else ""
            return timeout_message(self.timeout) + cut
        if self.ok:
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


def cut_message(cap, thrown):
    """The line that stands for the ``thrown`` bytes of an output cut at ``cap`` bytes."""
    return f"[output cut at {cap} bytes: {thrown:,} bytes thrown away; the last ones follow]"


def timeout_message(seconds):
    """The message of a run killed at its time limit (the wording students see)."""
    return f"timed out after {seconds:g} s — {DEADLOCK_HINT}"


@functools.lru_cache(maxsize=None)
def network_isolation():
    """Check once whether ``unshare --net --mount`` works here (root, usually).

    Returns
    -------
    tuple of (bool, str)
        ``(True, "")`` when runs can get their own network and mount namespaces (no network,
        and the course's files hidden: :func:`confine`), else ``(False, why)``.
    """
    if shutil.which("unshare") is None:
        return False, "unshare (util-linux) is not installed; runs keep the host network and files"
    try:
        p = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare --net --mount failed ({exc}); runs keep the host network and files"
    if p.returncode != 0:
        return False, (f"unshare --net --mount failed ({p.stderr.strip()}); runs keep the host "
                       f"network and files")
    return True, ""


#: The course root being graded; ``scripts/grade.sh`` exports it. Student C programs do not see
#: it at all, a grading kernel sees it read-only (but for its own directory) without ``source/``
#: (the instructor's notebooks) and ``submitted/`` (everyone's files).
COURSE_ENV = "MPILAB_COURSE_ROOT"

#: Run by ``sh`` in the new namespaces before the program: hide $MPILAB_HIDE (one directory per
#: line) under empty read-only tmpfs, make $MPILAB_READONLY read-only except the working
#: directory when it lies inside, bring up loopback (MPI and ipyparallel use it), run "$@".
_PRELUDE = r"""here=$PWD
IFS='
'
if [ -n "$MPILAB_READONLY" ] && [ -d "$MPILAB_READONLY" ]; then
    case "$here/" in "$MPILAB_READONLY"/*) mount --bind "$here" "$here" || exit 111 ;; esac
    mount --rbind "$MPILAB_READONLY" "$MPILAB_READONLY" || exit 111
    mount -o remount,bind,ro "$MPILAB_READONLY" || exit 111
fi
for d in $MPILAB_HIDE; do
    [ -d "$d" ] && { mount -t tmpfs -o ro,size=4k,mode=0555 mpilab-hidden "$d" || exit 111; }
done
unset IFS MPILAB_HIDE MPILAB_READONLY
cd "$here" || exit 111
ip link set lo up 2>/dev/null
exec "$@"
"""


def confine(argv, hide=(), readonly=None):
    """``argv`` wrapped to run without network and with ``hide`` invisible.

    The wrapper runs the program in new network and mount namespaces (``unshare --net
    --mount``): loopback only, each directory of ``hide`` covered by an empty read-only tmpfs,
    and ``readonly`` (if given) read-only except the working directory when it lies inside.

    Returns
    -------
    (list of str, dict)
        The command and the environment variables it needs.
    """
    env = {"MPILAB_HIDE": "\n".join(str(d) for d in hide if d),
           "MPILAB_READONLY": str(readonly) if readonly else ""}
    return ["unshare", "--net", "--mount", "sh", "-c", _PRELUDE, "sh", *map(str, argv)], env


def hidden_from_programs():
    """What a student's C program cannot see: the kit's ``solutions/`` and ``grader/`` and the
    course root being graded (``$MPILAB_COURSE_ROOT``), none of which it needs."""
    root = paths.repo_root()
    dirs = [root / "solutions", root / "grader", os.environ.get(COURSE_ENV, "")]
    return [str(d) for d in dirs if d and os.path.isdir(d)]


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
        Bytes kept of stdout and of stderr. The output is read as it comes; past the cap it is
        read and thrown away (the program runs on, within its time limit) but for its last
        :data:`TAIL_BYTES` (where the launcher reports a crash), which follow a
        :func:`cut_message` line.
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
    if output_cap <= 0:
        raise UsageError(f"output_cap must be a positive number of bytes, got {output_cap!r}")
    full_env = dict(os.environ)
    full_env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    full_env.update(env or {})
    isolated, note = (False, "network allowed by the caller") if network else network_isolation()
    cmd = list(map(str, argv))
    if isolated:
        cmd, confine_env = confine(cmd, hide=hidden_from_programs())
        full_env.update(confine_env)
    # the grader's MPI_Abort (mpilab/data/grading/report_abort.c) also writes here: launchers
    # sometimes lose a rank's last output when a job aborts
    fd, abort_log = tempfile.mkstemp(prefix="mpilab-abort-", suffix=".log")
    os.close(fd)
    full_env["MPILAB_ABORT_LOG"] = abort_log
    try:
        timed_out, proc, streams = _run_streaming(cmd, cwd, full_env, timeout, memory_mb, output_cap)
        with open(abort_log, errors="replace") as f:
            aborts = f.read(TAIL_BYTES).splitlines()
    finally:
        os.unlink(abort_log)
    out, n_out = streams.text(proc.stdout)
    err, n_err = streams.text(proc.stderr)
    aborts = [line for line in aborts if line not in err]
    if aborts:
        err += ("" if not err or err.endswith("\n") else "\n") + "\n".join(aborts) + "\n"
    return SandboxResult(argv=cmd, returncode=None if timed_out else proc.returncode,
                         stdout=out, stderr=err, timed_out=timed_out, timeout=timeout,
                         network_isolated=isolated, note=note, stdout_bytes=n_out,
                         stderr_bytes=n_err, output_cap=output_cap)


def _run_streaming(cmd, cwd, env, timeout, memory_mb, output_cap):
    """Start ``cmd``, read its output until it ends or the time is up (then kill its group)."""
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limits(memory_mb * 1024 * 1024 if memory_mb else 0))
    streams = _Streams(proc, output_cap)
    timed_out = not streams.read_until(deadline)
    if not timed_out:
        try:   # the pipes are closed; the program may still be finishing
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        _kill_group(proc.pid)
        # what was written before the kill; a process that left the group may hold a pipe open
        streams.read_until(time.monotonic() + 5)
        proc.wait()
    streams.close()
    return timed_out, proc, streams


#: Bytes kept of the end of an output longer than the cap (the launcher's crash report is there).
TAIL_BYTES = 4096


class _Streams:
    """A process's stdout and stderr, read in chunks as they come: each keeps its first ``cap``
    bytes and its last :data:`TAIL_BYTES`."""

    CHUNK = 1 << 16

    def __init__(self, proc, cap):
        self.cap = cap
        self.head = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        self.tail = {f: bytearray() for f in self.head}
        self.total = dict.fromkeys(self.head, 0)
        self.selector = selectors.DefaultSelector()
        for f in self.head:
            self.selector.register(f, selectors.EVENT_READ)

    def read_until(self, deadline):
        """Read until both pipes are closed (True) or the deadline passes (False)."""
        while self.selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in self.selector.select(timeout=left):
                chunk = os.read(key.fd, self.CHUNK)
                f = key.fileobj
                if not chunk:
                    self.selector.unregister(f)
                    continue
                room = max(self.cap - len(self.head[f]), 0)
                self.head[f] += chunk[:room]
                if len(chunk) > room:
                    tail = self.tail[f]
                    tail += chunk[room:]
                    del tail[:-TAIL_BYTES]
                self.total[f] += len(chunk)
        return True

    def close(self):
        self.selector.close()
        for f in self.head:
            f.close()

    def text(self, f):
        """The kept text of one stream and its full length in bytes."""
        text = self.head[f].decode(errors="replace")
        if self.total[f] > self.cap:
            text += ("" if text.endswith("\n") else "\n") + cut_message(self.cap, self.total[f] - self.cap - len(self.tail[f])) + "\n"
            text += self.tail[f].decode(errors="replace")
        return text, self.total[f]


def _kill_group(pgid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
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
