"""What a sandboxed run may use and what it did: the limits of a confined run, read from
``MPILAB_SANDBOX_*`` / ``MPILAB_KERNEL_*`` (:data:`LIMIT_VARS`), and :class:`SandboxResult`, which
reads a crash, an ``MPI_Abort`` or a limit out of the run's output and says it in one line
(:meth:`SandboxResult.failure`). :mod:`mpilab.grade.sandbox` runs the programs.
"""

import dataclasses
import os
import re
import signal

from mpilab.core.errors import UsageError

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
#: SMPI: "[thin00-s0-c02:2:(3) 0.000000] ...: [smpi_pmpi/WARNING] MPI_Abort was called, ..." (actor 2 = rank
#: 2)
_SMPI_ABORT = re.compile(
    r"^\[[^:\]\s]+:(\d+):\(\d+\) [\d.]+\] \S+ \[smpi_pmpi/WARNING\] MPI_Abort was called", re.M
)


# --- limits ------------------------------------------------------------------------------------

#: Each limit of a confined run: its field of :class:`Limits`, the suffix of its variable
#: (``MPILAB_SANDBOX_<suffix>`` for a student's program, ``MPILAB_KERNEL_<suffix>`` for a grading
#: kernel), its defaults for the two, and what it caps. The defaults leave room (measured here):
#: an allgather up to 1 MiB per rank used at most 9 MiB of /tmp and /dev/shm on Open MPI at
#: P = 8 (113 MiB of memory in all), 34 MiB on MPICH at P = 8, 2 MiB under SMPI at P = 48; a
#: grading kernel with lab 0's four MPI engines ran 118 processes and threads.
LIMIT_VARS = {
    "disk_mb": (
        "DISK_MB",
        512,
        1024,
        "MiB of disk: /tmp, /var/tmp, /dev/shm and the working directory "
        "together (one tmpfs; a kernel's own directory is a second one)",
    ),
    "files": ("FILES", 20000, 50000, "files and directories on that disk"),
    "file_mb": ("FILE_MB", 512, 1024, "MiB of one file (RLIMIT_FSIZE)"),
    "procs": ("PROCS", 256, 512, "processes and threads at once (a pids cgroup)"),
    "total_memory_mb": (
        "TOTAL_MEMORY_MB",
        4096,
        8192,
        "MiB of memory of all its processes together, files in its tmpfs included "
        "(a memory cgroup; the address-space limit per process is separate)",
    ),
}
#: The trusted grader's own run (``MPILAB_JUDGE_*``, :meth:`Limits.from_env` with ``"JUDGE"``):
#: it holds copies of the submission and of the notebook's folder, builds and runs the student's
#: C in runs nested inside it (each under the ``MPILAB_SANDBOX_*`` limits but for the memory
#: cgroup, which is the judge's: the only one this side of the nesting), and re-simulates.
JUDGE_LIMITS = {"disk_mb": 4096, "files": 100000, "file_mb": 1024, "procs": 1024, "total_memory_mb": 12288}
#: RLIMIT_NPROC of the sandbox user: processes and threads of every confined run at once (it
#: counts per user, across runs); MPILAB_SANDBOX_USER_PROCS overrides.
USER_PROCS = 2048


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one confined run may use; see :data:`LIMIT_VARS`."""

    disk_mb: int
    files: int
    file_mb: int
    procs: int
    total_memory_mb: int
    kind: str = "SANDBOX"

    @classmethod
    def from_env(cls, kind="SANDBOX"):
        """The limits of a student's program (``kind="SANDBOX"``), of a grading kernel
        (``"KERNEL"``) or of the trusted grader (``"JUDGE"``, :data:`JUDGE_LIMITS`), each from
        its ``MPILAB_<kind>_*`` variable or its default."""
        if kind not in ("SANDBOX", "KERNEL", "JUDGE"):
            raise UsageError(f"unknown kind of sandbox {kind!r}; valid: JUDGE, KERNEL, SANDBOX")
        defaults = {
            field: {"SANDBOX": program, "KERNEL": kernel, "JUDGE": JUDGE_LIMITS[field]}[kind]
            for field, (_, program, kernel, _) in LIMIT_VARS.items()
        }
        values = {
            field: positive_env(f"MPILAB_{kind}_{suffix}", defaults[field])
            for field, (suffix, _, _, _) in LIMIT_VARS.items()
        }
        return cls(kind=kind, **values)

    def var(self, field):
        """The variable that sets ``field``."""
        return f"MPILAB_{self.kind}_{LIMIT_VARS[field][0]}"

    def message(self, field, killed=0, where="/tmp, /var/tmp, /dev/shm or its working directory"):
        """What a run that hit the limit ``field`` did, in the words its failure uses (``killed``:
        processes the OOM killer ended; ``where``: the disk that is full)."""
        value, var = getattr(self, field), self.var(field)
        return {
            "disk_mb": f"it filled its {value} MiB of disk ({where}; {var})",
            "files": f"it created more than {value} files ({var})",
            "file_mb": f"it wrote a file larger than {value} MiB ({var})",
            "procs": f"it started more than {value} processes/threads and was stopped ({var})",
            "total_memory_mb": f"it used more than {value} MiB of memory with all its processes together "
            f"({var}); the system killed {killed} of its processes",
        }[field]


def positive_env(var, default):
    raw = os.environ.get(var, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(f"{var}={raw!r} is not a positive whole number (default {default})")
    return value


# --- what a run did ----------------------------------------------------------------------------


@dataclasses.dataclass
class SandboxResult:
    """What a sandboxed run did.

    Attributes
    ----------
    argv : list of str
        The command that ran (inside the sandbox wrappers).
    returncode : int or None
        Exit status (minus the signal that ended it); None when the run was killed on time-out.
    stdout, stderr : str
        Output, each cut at the output cap; a cut one goes on with a line saying so
        (:func:`mpilab.core.process.cut_marker`) and its last bytes.
    timed_out : bool
        True when the wall-time limit killed the process group.
    timeout : float
        The limit in seconds.
    network_isolated : bool
        True when the run was confined (:class:`Sandbox`): its own network, mount, PID and IPC
        namespaces, as the sandbox user.
    note : str
        What was not isolated, when something was not.
    stdout_bytes, stderr_bytes : int
        How many bytes the program wrote to each (kept or not).
    output_cap : int or None
        The cap in bytes of each stream.
    limit : str
        The confinement limit the run hit (:meth:`Limits.message`), or "".
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
    limit: str = ""

    @property
    def output_cut(self):
        """True when stdout or stderr was longer than the cap (the rest was thrown away)."""
        return self.output_cap is not None and max(self.stdout_bytes, self.stderr_bytes) > self.output_cap

    @property
    def ok(self):
        """True when the run finished in time with exit status 0, hit no limit, and no rank
        called MPI_Abort (SMPI exits with status 0 after an abort)."""
        return not self.timed_out and self.returncode == 0 and not self.limit and self.abort() is None

    def abort(self):
        """The first rank that called MPI_Abort, as ``(rank, "MPI_Abort with error code E")``, or None.

        Read from the grader's own line (``report_abort.c``), else from Open MPI's, MPICH's or
        SMPI's message (SMPI does not give the error code).
        """
        text = self.stdout + "\n" + self.stderr
        for pattern, rank_group, code_group in (
            (_MPILAB_ABORT, 1, 2),
            (_OMPI_ABORT, 1, 2),
            (_MPICH_ABORT, 2, 1),
            (_SMPI_ABORT, 1, None),
        ):
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
                return rank, f"signal {sig} ({signal_name(sig)})"
        if self.returncode is not None and self.returncode < 0:
            sig = -self.returncode
            return None, f"signal {sig} ({signal_name(sig)})"
        return None

    def failure(self):
        """One line saying why the run failed, or None if it succeeded."""
        if self.limit:
            return "the program hit a limit: " + self.limit
        if self.timed_out:
            cut = (
                f"; it printed {max(self.stdout_bytes, self.stderr_bytes):,} bytes (output cut at "
                f"{self.output_cap} bytes)"
                if self.output_cut
                else ""
            )
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


def signal_name(sig):
    """The name of a signal number, e.g. 11 -> "SIGSEGV"."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown signal"


def timeout_message(seconds):
    """The message of a run killed at its time limit (the wording students see)."""
    return f"timed out after {seconds:g} s — {DEADLOCK_HINT}"


# --- where a hung run's ranks were ---------------------------------------------------------------

#: Blocking sends: a rank in one of them waits for its message to be received.
_SENDS = ("Send", "Ssend", "Rsend")


def _peers(peers):
    """'receive from rank 3, send to rank 1' from a state's [(dir, world rank)]."""
    out = []
    for d, p in peers:
        who = "any rank" if p < 0 else f"rank {p}"
        out.append(f"{'receive from' if d == 'recv' else 'send to'} {who}")
    return ", ".join(out)


def _waits_for(state):
    return [p for _, p in state[2] if p >= 0]


def blocked_sentences(states, groups, seq, nbytes):
    """What the ranks of a hung case were doing, in words, worded by the calls they were in.

    Parameters
    ----------
    states : dict
        ``{world rank: (seq, call, [(dir, world rank of the peer)])}``
        (:func:`mpilab.grade.casedata.read_states`).
    groups : list of list of int
        The case's communicators as world ranks in rank order.
    seq : int
        The case.
    nbytes : int
        Bytes of one rank's data in the case (the size of the messages that did not go).

    Returns
    -------
    str
        "" when no rank said where it was.
    """
    out = []
    for group in groups:
        mine = {w: states[w] for w in group if w in states and states[w][0] == seq}
        blocked = {w: st for w, st in mine.items() if st[1] not in ("-", "returned")}
        if not blocked:
            continue
        calls = {st[1] for st in blocked.values()}
        whole = len(blocked) == len(group) and len(group) > 1
        if whole and calls <= set(_SENDS):
            call = "MPI_Ssend" if calls == {"Ssend"} else "MPI_Send"
            out.append(
                f"every rank is in {call}: each sends before it receives, and MPI does not buffer a "
                f"message of {nbytes:,} bytes, so no send can finish until its receive is posted; "
                "let every other rank receive first, or use MPI_Sendrecv"
            )
            continue
        if whole and calls == {"Recv"}:
            out.append(
                "every rank is in MPI_Recv: each waits for a message before it sends its own, so "
                "nobody sends; at least one rank must send first (MPI_Sendrecv does both at once)"
            )
            continue
        listed = [
            f"rank {w} in MPI_{st[1]} ({_peers(st[2]) or 'no peer'})" for w, st in sorted(blocked.items())
        ]
        more = f" and {len(listed) - 6} more" if len(listed) > 6 else ""
        text = "; ".join(listed[:6]) + more
        cycle = cycle_of({w: _waits_for(st) for w, st in blocked.items()})
        if cycle:
            text += "; they wait in a cycle: " + " → ".join(f"rank {w}" for w in cycle + cycle[:1])
        done = sorted(w for w, st in mine.items() if st[1] == "returned")
        if done:
            text += (
                f"; rank{'s' if len(done) > 1 else ''} {', '.join(map(str, done[:8]))}"
                f"{' ...' if len(done) > 8 else ''} had returned from your function (a message "
                "was sent that nobody receives, or expected that nobody sends)"
            )
        out.append(text)
    return "; ".join(out)


def cycle_of(edges):
    """A cycle of the wait-for graph ``{rank: [ranks it waits for]}``, or None."""
    for start in sorted(edges):
        path, seen, r = [], {}, start
        while r in edges and r not in seen and edges[r]:
            seen[r] = len(path)
            path.append(r)
            r = next((p for p in edges[r] if p in edges), edges[r][0])
        if r in seen:
            return path[seen[r] :]
    return None
