"""The one way the kit runs a program: in its own process group, its output read as it comes
(each stream kept up to a cap), and the whole group killed when the time is up.

An MPI launcher starts daemons and ranks that outlive a killed ``mpirun``; killing the group
(SIGTERM, then SIGKILL after a grace period) ends them all. Everything that runs a program with
a time limit goes through :func:`run`: the launchers (:mod:`mpilab.measure.launch`), forcing,
the compiler, the SLURM commands, the doctor.

>>> res = run(["sh", "-c", "echo hi; sleep 30"], timeout=0.5)
>>> res.timed_out, res.stdout
(True, 'hi\\n')
"""

import math
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

from mpilab.core.errors import LaunchError, ToolMissing, UsageError

#: Bytes kept of the end of an output longer than its cap (a launcher reports a crash there).
TAIL_BYTES = 4096
#: Seconds between SIGTERM and SIGKILL when a group is killed.
GRACE = 0.5
#: Seconds spent reading what a killed group wrote before it died.
DRAIN = 5.0


def cut_marker(cap, thrown):
    """The default line standing for the ``thrown`` bytes of an output cut at ``cap`` bytes."""
    return f"[output cut at {cap} bytes: {thrown:,} bytes thrown away; the last ones follow]"


@dataclass
class Finished:
    """What :func:`run` saw.

    Attributes
    ----------
    argv : list of str
    returncode : int or None
        The exit status; None when the group was killed at the time-out.
    stdout, stderr : str
        The output (decoded, bad bytes replaced); past ``output_cap`` bytes a stream goes on with
        a marker line and its last :data:`TAIL_BYTES`.
    timed_out : bool
    timeout : float or None
    stdout_bytes, stderr_bytes : int
        How many bytes the program wrote to each stream, kept or not.
    """

    argv: list
    returncode: object
    stdout: str
    stderr: str
    timed_out: bool
    timeout: object = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @property
    def ok(self):
        """True when the program ended by itself with exit status 0."""
        return not self.timed_out and self.returncode == 0

    def tail(self, lines=15, stream="stderr"):
        """The last ``lines`` lines of ``stream`` (for error messages)."""
        return "\n".join(getattr(self, stream).rstrip().splitlines()[-lines:])


class Streams:
    """A process's stdout and stderr read in chunks as they come; each keeps its first ``cap``
    bytes (all when ``cap`` is None) and, past the cap, its last :data:`TAIL_BYTES`."""

    CHUNK = 1 << 16

    def __init__(self, proc, cap=None):
        self.cap = math.inf if cap is None else cap
        self.files = (proc.stdout, proc.stderr)
        self.head = {f: bytearray() for f in self.files}
        self.tail = {f: bytearray() for f in self.files}
        self.total = dict.fromkeys(self.files, 0)
        self.selector = selectors.DefaultSelector()
        for f in self.files:
            self.selector.register(f, selectors.EVENT_READ)

    @property
    def done(self):
        """True when both pipes are closed."""
        return not self.selector.get_map()

    def read_until(self, deadline):
        """Read until both pipes are closed (True) or ``deadline`` (monotonic) passes (False)."""
        while self.selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in self.selector.select(timeout=min(left, 3600)):
                chunk = os.read(key.fd, self.CHUNK)
                f = key.fileobj
                if not chunk:
                    self.selector.unregister(f)
                    continue
                room = max(int(min(self.cap - len(self.head[f]), len(chunk))), 0)
                self.head[f] += chunk[:room]
                if len(chunk) > room:
                    tail = self.tail[f]
                    tail += chunk[room:]
                    del tail[:-TAIL_BYTES]
                self.total[f] += len(chunk)
        return True

    def close(self):
        self.selector.close()
        for f in self.files:
            f.close()

    def text(self, f, marker=cut_marker):
        """The kept text of one stream and its full length in bytes."""
        text = self.head[f].decode(errors="replace")
        if self.total[f] > self.cap:
            thrown = self.total[f] - self.cap - len(self.tail[f])
            text += ("" if text.endswith("\n") else "\n") + marker(self.cap, thrown) + "\n"
            text += self.tail[f].decode(errors="replace")
        return text, self.total[f]


def kill_group(pgid, grace=GRACE):
    """SIGTERM the process group ``pgid``, then SIGKILL whatever is left after ``grace`` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM and grace > 0:
            time.sleep(grace)


def run(
    argv,
    *,
    timeout=None,
    env=None,
    cwd=None,
    stdin=subprocess.DEVNULL,
    output_cap=None,
    preexec_fn=None,
    marker=cut_marker,
    grace=GRACE,
):
    """Run ``argv`` in a new session (its own process group) and wait for it.

    Parameters
    ----------
    argv : sequence
        The command (items are turned into strings).
    timeout : float, optional
        Wall-time limit in seconds; when it passes, the whole group is killed
        (:func:`kill_group`) and what it wrote until then is kept. None: no limit.
    env : dict, optional
        The whole environment (default: this process's).
    cwd : path, optional
    stdin : file or int
        Default: ``/dev/null``.
    output_cap : int, optional
        Bytes kept of stdout and of stderr each; past it the output is still read (the program
        runs on) and thrown away but for its last :data:`TAIL_BYTES`, which follow a
        ``marker(cap, thrown)`` line. None keeps everything.
    preexec_fn : callable, optional
        Runs in the child after it has become the leader of its own session (e.g. to set
        resource limits; it must not call ``os.setsid`` again).
    marker : callable
        ``(cap, thrown) -> str``, the line that replaces what was thrown away.
    grace : float
        Seconds between SIGTERM and SIGKILL when the group is killed.

    Returns
    -------
    Finished
        Any exit status; ``timed_out`` says whether the time limit ended it.

    Raises
    ------
    ToolMissing
        When the program cannot be found.
    BaseException
        An interrupt (Ctrl-C) or other error while waiting kills the group, then goes on.
    """
    argv = [str(a) for a in argv]
    if timeout is not None and not timeout > 0:
        raise UsageError(f"bad timeout {timeout!r}; valid: a number of seconds > 0, or None")
    if output_cap is not None and output_cap <= 0:
        raise UsageError(f"bad output_cap {output_cap!r}; valid: a number of bytes > 0, or None")
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    try:
        proc = subprocess.Popen(
            argv,
            cwd=None if cwd is None else str(cwd),
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
    except FileNotFoundError as e:
        if cwd is not None and not os.path.isdir(cwd):
            raise UsageError(f"working directory {str(cwd)!r} does not exist") from None
        raise ToolMissing(
            f"{argv[0]!r} not found ({e.strerror}); `mpilab doctor` says what the kit needs"
        ) from None
    streams = Streams(proc, output_cap)
    try:
        timed_out = not streams.read_until(deadline)
        if not timed_out:
            try:  # the pipes are closed; the program may still be finishing
                proc.wait(timeout=None if deadline == math.inf else max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            kill_group(proc.pid, grace)
            # what was written before the kill; a process that left the group may keep a pipe
            streams.read_until(time.monotonic() + DRAIN)
            proc.wait()
    except BaseException:
        kill_group(proc.pid, 0)
        proc.wait()
        streams.close()
        raise
    streams.close()
    out, n_out = streams.text(proc.stdout, marker)
    err, n_err = streams.text(proc.stderr, marker)
    return Finished(argv, None if timed_out else proc.returncode, out, err, timed_out, timeout, n_out, n_err)


def run_checked(argv, *, timeout=None, shown=None, **kw):
    """:func:`run`, raising :class:`LaunchError` unless the program exits 0 in time.

    ``shown`` is how the command is named in the message (default: the argv joined).
    """
    res = run(argv, timeout=timeout, **kw)
    shown = shown if shown is not None else " ".join(res.argv)
    if res.timed_out:
        raise LaunchError(f"timed out after {timeout} s: {shown}\nstderr tail:\n{res.tail()}")
    if res.returncode != 0:
        raise LaunchError(f"exit code {res.returncode}: {shown}\nstderr tail:\n{res.tail()}")
    return res
