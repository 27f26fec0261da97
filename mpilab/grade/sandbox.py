"""Run untrusted student code under limits.

A sandboxed run gets a wall-time limit that kills its whole process group (an MPI deadlock
ends as a failed check, never as a hung grader), an address-space limit per process, an output
cap (the output is read as it comes and what is past the cap is thrown away, so a program that
prints in a loop costs no memory) and a fresh scratch directory holding only the files it is
given.

Where the machine allows it (root, ``unshare`` and ``setpriv`` from util-linux: :func:`isolation`),
the run is also confined (:class:`Sandbox`): it runs as an unprivileged user
(:func:`sandbox_user`) in new network, mount, PID and IPC namespaces, so it reaches no other
machine (MPI still talks over loopback), sees and signals no process but its own, writes nothing
but one size-capped tmpfs of its own (its ``/tmp``, ``/var/tmp``, ``/dev/shm`` and a copy of its
working directory, copied back only if the run succeeds), and sees neither the kit's solutions,
the grader nor the course being graded; a cgroup caps the memory and the processes of the whole
run where the machine has a writable one. Every limit is read from an ``MPILAB_SANDBOX_*``
variable (:data:`LIMIT_VARS`) and, when a run hits it, its failure says which
(:meth:`SandboxResult.failure`). Elsewhere (a student's laptop, not root) runs go on with the
time, memory, file-size and output limits only, and :func:`network_isolation` says what is not
isolated.
"""

import dataclasses
import functools
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from mpilab.core import paths, process
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import OPENMPI_ROOT_ENV, openmpi_env
from mpilab.simulate import platforms

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


# --- limits ------------------------------------------------------------------------------------

#: Each limit of a confined run: its field of :class:`Limits`, the suffix of its variable
#: (``MPILAB_SANDBOX_<suffix>`` for a student's program, ``MPILAB_KERNEL_<suffix>`` for a grading
#: kernel), its defaults for the two, and what it caps. The defaults leave room (measured here):
#: an allgather up to 1 MiB per rank used at most 9 MiB of /tmp and /dev/shm on Open MPI at
#: P = 8 (113 MiB of memory in all), 34 MiB on MPICH at P = 8, 2 MiB under SMPI at P = 48; a
#: grading kernel with lab 0's four MPI engines ran 118 processes and threads.
LIMIT_VARS = {
    "disk_mb": ("DISK_MB", 512, 1024, "MiB of disk: /tmp, /var/tmp, /dev/shm and the working directory "
                                      "together (one tmpfs; a kernel's own directory is a second one)"),
    "files": ("FILES", 20000, 50000, "files and directories on that disk"),
    "file_mb": ("FILE_MB", 512, 1024, "MiB of one file (RLIMIT_FSIZE)"),
    "procs": ("PROCS", 256, 512, "processes and threads at once (a pids cgroup)"),
    "total_memory_mb": ("TOTAL_MEMORY_MB", 4096, 8192,
                        "MiB of memory of all its processes together, files in its tmpfs included "
                        "(a memory cgroup; the address-space limit per process is separate)"),
}
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
        """The limits of a student's program (``kind="SANDBOX"``) or of a grading kernel
        (``"KERNEL"``), each from its ``MPILAB_<kind>_*`` variable or its default."""
        if kind not in ("SANDBOX", "KERNEL"):
            raise UsageError(f"unknown kind of sandbox {kind!r}; valid: KERNEL, SANDBOX")
        values = {field: _positive_env(f"MPILAB_{kind}_{suffix}", program if kind == "SANDBOX" else kernel)
                  for field, (suffix, program, kernel, _) in LIMIT_VARS.items()}
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


def _positive_env(var, default):
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
        (:func:`cut_message`) and its last bytes.
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


def signal_name(sig):
    """The name of a signal number, e.g. 11 -> "SIGSEGV"."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown signal"


#: The line that stands for the bytes of an output cut at its cap (the kit's one wording).
cut_message = process.cut_marker


def timeout_message(seconds):
    """The message of a run killed at its time limit (the wording students see)."""
    return f"timed out after {seconds:g} s — {DEADLOCK_HINT}"


# --- what this machine allows ------------------------------------------------------------------

#: The course root being graded; ``scripts/grade.sh`` exports it. Student C programs do not see
#: it at all, a grading kernel sees only its own directory of it.
COURSE_ENV = "MPILAB_COURSE_ROOT"
#: The user confined runs run as (created when missing, as a system user without home or
#: shell); MPILAB_SANDBOX_USER overrides.
SANDBOX_USER = "mpilab-sandbox"
#: The first process of every confined run (PID 1 of its namespaces, run as root).
INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_init.py")
#: Where a confined program's MPI_Abort reporter writes (inside its private /tmp).
_ABORT_LOG_INSIDE = "/tmp/.mpilab-abort.log"


@functools.lru_cache(maxsize=None)
def sandbox_user():
    """The unprivileged user confined runs run as: ``(name, uid, gid, note)``.

    ``$MPILAB_SANDBOX_USER`` (default ``mpilab-sandbox``), created when missing (root only:
    ``useradd --system``, no home, no login shell); ``nobody`` when that fails, with a note
    saying why. None when the process is not root (nothing can switch user then).
    """
    if os.geteuid() != 0:
        return None
    name = os.environ.get("MPILAB_SANDBOX_USER") or SANDBOX_USER
    note = ""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        proc = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", "--user-group", "--comment",
                               "mpilab: runs untrusted student code", name],
                              capture_output=True, text=True) if shutil.which("useradd") else None
        try:
            pw = pwd.getpwnam(name)   # made now, or by a grader running at the same time
        except KeyError:
            why = proc.stderr.strip() if proc else "useradd is not installed"
            note = f"could not create the user {name} ({why}); runs as nobody"
            pw = pwd.getpwnam("nobody")
    if pw.pw_uid == 0:
        raise UsageError(f"MPILAB_SANDBOX_USER={name!r} is root; name an unprivileged user (default {SANDBOX_USER})")
    return pw.pw_name, pw.pw_uid, pw.pw_gid, note


@functools.lru_cache(maxsize=None)
def isolation():
    """What confinement this machine allows, checked once by confining ``true``.

    Returns
    -------
    (bool, str)
        ``(True, note)`` when runs can be confined (:class:`Sandbox`), the note naming what is
        missing even so (no usable cgroup: no cap on a run's total memory or processes); else
        ``(False, why)``, why naming what stays unisolated.
    """
    unconfined = ("runs keep the host's network, files, processes and user, with no cap on disk, "
                  "total memory or processes")
    if os.geteuid() != 0:
        return False, f"not root: {unconfined}"
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return False, f"{' and '.join(missing)} (util-linux) not installed: {unconfined}"
    why = _probe(cgroup=True)
    if why and _cgroup_parents():   # cgroups that look writable but fail: do without them
        _CGROUP_TROUBLE.append(why)
        why = _probe(cgroup=False)
    if why:
        return False, f"confining a run failed ({why}): {unconfined}"
    notes = [sandbox_user()[3], _cgroups_note()]
    return True, "; ".join(n for n in notes if n)


def _probe(cgroup):
    """Confine ``true``; None if that worked, else why not."""
    try:
        sandbox_user()
        with Sandbox(Limits.from_env(), cgroup=cgroup) as box, tempfile.TemporaryDirectory() as empty:
            proc = subprocess.run(box.argv(["true"]), cwd=empty, capture_output=True, text=True, timeout=60,
                                  pass_fds=box.pass_fds)
            report = box.report()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0 or report.get("status") != 0:
        return report.get("setup_error") or proc.stderr.strip()[-300:] or f"exit status {proc.returncode}"
    return None


def network_isolation():
    """Whether runs are confined here (no network among the rest), and what is not isolated.

    Returns
    -------
    tuple of (bool, str)
        :func:`isolation`'s answer.
    """
    return isolation()


def hidden_from_programs():
    """What a student's C program cannot see: the kit's ``solutions/`` and ``grader/`` and the
    course root being graded (``$MPILAB_COURSE_ROOT``), none of which it needs."""
    root = paths.repo_root()
    dirs = [root / "solutions", root / "grader", os.environ.get(COURSE_ENV, "")]
    return [str(d) for d in dirs if d and os.path.isdir(d)]


def reachable(needed, covered=()):
    """How the sandbox user reaches the ``needed`` paths (a Python installed under ``/root``, a
    kit checked out in a home directory): ``(open, keep)``.

    ``open`` lists the topmost directory on the way to each path that only root may traverse
    (it gets an empty tmpfs in the sandbox), ``keep`` the paths to bind back below it and below
    the ``covered`` directories (paths under a hidden directory or /tmp, which the sandbox
    covers too).
    """
    opened, keep = [], []
    for path in map(os.path.realpath, needed):
        if not os.path.exists(path):
            continue
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            top = "/" + "/".join(parts[:i])
            if not os.stat(top).st_mode & 0o001:
                if top not in opened:
                    opened.append(top)
                keep.append(path)
                break
        else:
            if any(_under(path, c) and path != c for c in covered):
                keep.append(path)
    return opened, keep


def _kit_paths():
    """The directories a program of the kit needs, read-only: this interpreter's, the kit's, and the
    SimGrid platforms the kit generated (an SMPI run names its platform file, written in the
    grader's cache, e.g. under /root, when the platform is not shipped)."""
    return sorted({sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                   str(paths.repo_root()), str(paths.PACKAGE_DIR), str(platforms._cache_dir())})


def _under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


# --- cgroups -----------------------------------------------------------------------------------

def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def _counter(text, key):
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


#: Why the cgroups that :func:`_find_cgroup_parents` found failed when :func:`isolation` tried them.
_CGROUP_TROUBLE = []


def _cgroup_parents():
    """:func:`_find_cgroup_parents`, or none when they failed in :func:`isolation`'s trial run."""
    return {} if _CGROUP_TROUBLE else _find_cgroup_parents()


@functools.lru_cache(maxsize=None)
def _find_cgroup_parents():
    """Where this process may make a cgroup per run: ``{"memory": dir, "pids": dir}``.

    cgroup v1 (a hierarchy per controller): this process's own cgroup in each. cgroup v2 (one
    hierarchy): this process's own cgroup if it is the root or already hands the controllers down
    to its children, else its parent (a cgroup that holds processes, as this process's does,
    cannot hand controllers down: the new cgroups go beside it). Only writable ones count.
    """
    mounts, own = {}, {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            fstype, opts = fields[sep + 1], fields[sep + 3].split(",")
            for ctl in ("memory", "pids") if fstype == "cgroup" else ("v2",) if fstype == "cgroup2" else ():
                if ctl == "v2" or ctl in opts:
                    mounts.setdefault(ctl, (fields[4], fields[3]))   # (mount point, its root)
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for ctl in ctls.split(",") if ctls else ["v2"]:
                own[ctl] = path

    def directory(ctl):
        mnt, root = mounts[ctl]
        rel = own[ctl][len(root):] if root != "/" and own[ctl].startswith(root) else own[ctl]
        return mnt, os.path.normpath(os.path.join(mnt, rel.lstrip("/")))

    parents = {}
    for ctl in ("memory", "pids"):
        if ctl in mounts and ctl in own and os.access(directory(ctl)[1], os.W_OK):
            parents[ctl] = directory(ctl)[1]
    if len(parents) == 2 or "v2" not in mounts or "v2" not in own:
        return parents
    mnt, here = directory("v2")
    is_root = here == os.path.normpath(mnt)
    for d in [here] if is_root else [here, os.path.dirname(here)]:
        if not os.access(d, os.W_OK):
            continue
        enabled = _read(os.path.join(d, "cgroup.subtree_control")).split()
        available = _read(os.path.join(d, "cgroup.controllers")).split()
        for ctl in ("memory", "pids"):
            if ctl not in enabled and ctl in available and is_root:
                try:
                    with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                        f.write(f"+{ctl}")
                    enabled.append(ctl)
                except OSError:
                    pass
            if ctl in enabled and ctl not in parents:
                parents[ctl] = d
        if any(ctl in enabled for ctl in ("memory", "pids")):
            break
    return parents


def _cgroups_note():
    parents = _cgroup_parents()
    missing = [c for c in ("memory", "pids") if c not in parents]
    what = {"memory": "no cap on a run's total memory (only per process)",
            "pids": "no cap on a run's processes (only the sandbox user's, shared by all runs)"}
    if _CGROUP_TROUBLE and missing:
        return f"cgroups failed here ({_CGROUP_TROUBLE[0]}): " + "; ".join(what[c] for c in missing)
    return "; ".join(f"no writable {c} cgroup here: {what[c]}" for c in missing)


class _Cgroups:
    """The cgroup(s) of one run: made with its limits, read, emptied and removed after it."""

    _made = 0

    def __init__(self, limits):
        _Cgroups._made += 1
        name = f"mpilab-{os.getpid()}-{_Cgroups._made}-{os.urandom(3).hex()}"
        self.dirs, self.v2 = {}, {}
        try:
            for parent in sorted(set(_cgroup_parents().values())):   # v2: one directory for both
                _remove_stale(parent)
                os.mkdir(os.path.join(parent, name))
                for ctl, p in _cgroup_parents().items():
                    if p == parent:
                        self.dirs[ctl] = os.path.join(parent, name)
                        self.v2[ctl] = os.path.exists(os.path.join(parent, name, "cgroup.controllers"))
            self._limit(limits)
        except OSError:
            self.remove()
            raise
        self.start = self.events()

    def _limit(self, limits):
        if "memory" in self.dirs:
            total = limits.total_memory_mb << 20
            if self.v2["memory"]:
                self._write("memory", "memory.max", total)
                self._write("memory", "memory.swap.max", 0, missing_ok=True)
            else:
                self._write("memory", "memory.limit_in_bytes", total)
                self._write("memory", "memory.memsw.limit_in_bytes", total, missing_ok=True)
        if "pids" in self.dirs:
            self._write("pids", "pids.max", limits.procs)

    def _write(self, ctl, name, value, missing_ok=False):
        try:
            with open(os.path.join(self.dirs[ctl], name), "w") as f:
                f.write(str(value))
        except OSError:
            if not missing_ok:
                raise

    @property
    def procs_files(self):
        return sorted({os.path.join(d, "cgroup.procs") for d in self.dirs.values()})

    def events(self):
        """``(processes the OOM killer ended, times a fork failed at the process cap)`` so far."""
        oom = pids = 0
        if "memory" in self.dirs:
            d = self.dirs["memory"]
            oom = _counter(_read(os.path.join(d, "memory.events" if self.v2["memory"] else "memory.oom_control")),
                           "oom_kill")
        if "pids" in self.dirs:
            pids = _counter(_read(os.path.join(self.dirs["pids"], "pids.events")), "max")
        return oom, pids

    def new_events(self):
        """:meth:`events` since the cgroup was made."""
        now = self.events()
        return now[0] - self.start[0], now[1] - self.start[1]

    def remove(self):
        """Kill whatever is still in the cgroup(s), then remove them."""
        for d in sorted(set(self.dirs.values())):
            for _ in range(50):
                pids = [int(p) for p in _read(os.path.join(d, "cgroup.procs")).split()]
                if not pids:
                    try:
                        os.rmdir(d)
                    except OSError:
                        time.sleep(0.02)
                        continue
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)


#: Seconds after which an empty cgroup of the kit's is taken for one a killed grader left (a
#: run's cgroup is empty only for the moments before it starts and while a kernel restarts).
STALE_S = 600


def _remove_stale(parent):
    """Remove the empty cgroups that graders killed before cleaning up left in ``parent`` (the
    one that made a cgroup cannot be told from its name: PIDs repeat across PID namespaces)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("mpilab-")]
    except OSError:
        return
    for name in names:
        d = os.path.join(parent, name)
        try:
            if time.time() - os.stat(d).st_mtime > STALE_S and not _read(os.path.join(d, "cgroup.procs")).strip():
                os.rmdir(d)   # refused while anything is in it
        except OSError:
            pass


# --- one confined run --------------------------------------------------------------------------

class Sandbox:
    """The pieces of one confined run that live outside it, and the command that starts it.

    Used as a context manager: on entry it makes the run's cgroup(s) (with ``cgroup``) and the
    pipe its first process (:mod:`sandbox_init`) watches to end the run if the grader dies; on
    exit it kills what is left and removes them. :meth:`argv` wraps a command in
    ``unshare`` (new network, mount, PID and IPC namespaces) and the init process.

    Parameters
    ----------
    limits : Limits
    hide : sequence of str
        Directories the run sees empty.
    keep : sequence of (str, bool)
        Paths (and whether writable) the run must reach although a cover (``/tmp``, a hidden
        directory, an ``open`` one) lies above them.
    work : bool
        Give the run a capped copy of its working directory, copied back after a successful
        run (False: the working directory is used as it is, e.g. one the grader capped itself).
    own : sequence of str
        Files handed to the sandbox user for the run (a kernel's connection file).
    network : bool
        Keep the host network.
    cgroup : bool
        Cap memory and processes with cgroups, where possible.
    report : bool
        Have the init process report the exit status, the disk used and MPI_Abort lines.
    address_space_mb : int
        RLIMIT_AS of every process of the run, MiB (0: what the caller's process has).
    """

    def __init__(self, limits, hide=(), keep=(), work=True, own=(), network=False, cgroup=True, report=True,
                 address_space_mb=0, copy_back="success"):
        user = sandbox_user()
        if user is None:
            raise UsageError("a confined run needs root (it switches to the sandbox user)")
        self.limits, self.uid, self.gid = limits, user[1], user[2]
        self.hide, self.work, self.own, self.network = list(hide), work, list(own), network
        self.address_space_mb, self.copy_back = address_space_mb, copy_back
        covered = ["/tmp", "/var/tmp", *self.hide]
        opened, needed = reachable(_kit_paths(), covered)
        self.open = opened
        self.keep = [(p, False) for p in needed] + [(os.path.realpath(p), rw) for p, rw in keep]
        self.cgroups = _Cgroups(limits) if cgroup and _cgroup_parents() else None
        self._report_fd = self._report_path = None
        if report:
            self._report_fd, self._report_path = tempfile.mkstemp(prefix="mpilab-report-")
        self._watch_r, self._watch_w = os.pipe()
        os.set_inheritable(self._watch_r, True)

    @property
    def pass_fds(self):
        """File descriptors the command needs (pass them to ``subprocess.Popen``)."""
        return tuple(fd for fd in (self._watch_r, self._report_fd) if fd is not None)

    def argv(self, argv):
        """``argv`` wrapped to run confined."""
        lim = self.limits
        settings = [f"uid={self.uid}", f"gid={self.gid}", f"disk={lim.disk_mb << 20}", f"files={lim.files}",
                    f"work={'1' if self.work else ''}", f"parent_fd={self._watch_r}",
                    f"report_fd={'' if self._report_fd is None else self._report_fd}",
                    f"abort_log={_ABORT_LOG_INSIDE}", f"copy_back={self.copy_back}",
                    f"rlimit=fsize:{lim.file_mb << 20}", "rlimit=core:0",
                    f"rlimit=nproc:{_positive_env('MPILAB_SANDBOX_USER_PROCS', USER_PROCS)}"]
        settings += [f"rlimit=as:{self.address_space_mb << 20}"] if self.address_space_mb else []
        settings += [f"cgroup={f}" for f in (self.cgroups.procs_files if self.cgroups else [])]
        settings += [f"hide={d}" for d in self.hide] + [f"open={d}" for d in self.open]
        settings += [f"keep={'rw' if rw else 'ro'}:{p}" for p, rw in self.keep] + [f"own={f}" for f in self.own]
        ns = ["--mount", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc"] + ([] if self.network else ["--net"])
        return ["unshare", *ns, sys.executable, "-I", "-S", INIT, *settings, "--", *map(str, argv)]

    def report(self):
        """What the init process reported: ``status`` (exit status or minus the signal),
        ``disk`` (bytes, free bytes, files, free files), ``aborts`` (lines), ``setup_error``."""
        out = {}
        if self._report_path is None:
            return out
        with open(self._report_path, errors="replace") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(" ")
                if key == "status":
                    out["status"] = int(value)
                elif key == "disk":
                    out["disk"] = tuple(map(int, value.split()))
                elif key == "abort":
                    out.setdefault("aborts", []).append(value)
                else:
                    out[key] = value
        return out

    def limit_hit(self, report):
        """The limit the run hit (:meth:`Limits.message`), or ""."""
        if self.cgroups:
            oom, pids = self.cgroups.new_events()
            if pids:
                return self.limits.message("procs")
            if oom:
                return self.limits.message("total_memory_mb", oom)
        disk = report.get("disk")
        if disk and disk[1] < 1 << 20:
            return self.limits.message("disk_mb")
        if disk and disk[3] == 0:
            return self.limits.message("files")
        return ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """End the run for good: kill what is left of it, remove its cgroups and files."""
        for fd in (self._watch_w, self._watch_r, self._report_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._watch_w = self._watch_r = self._report_fd = None
        if self.cgroups:
            self.cgroups.remove()
        if self._report_path:
            os.unlink(self._report_path)
            self._report_path = None


# --- running a program -------------------------------------------------------------------------

def run(argv, *, cwd, timeout=60.0, memory_mb=2048, output_cap=200_000, env=None, network=False,
        copy_back="success"):
    """Run ``argv`` in ``cwd`` under a time, memory and output limit, confined where possible.

    Parameters
    ----------
    argv : list of str
        The command.
    cwd : str or path
        Its working directory (usually from :func:`scratch_dir`). A confined run works on a copy
        of it in its capped tmpfs, copied back only when the run succeeds.
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
    copy_back : {"success", "always"}
        When a confined run's working directory is copied back: after a run that succeeded (the
        default), or also after one that failed (what a crash left behind, e.g. trace files the
        grader's diagnosis reads; they stay files of the run, within its disk cap).

    Returns
    -------
    SandboxResult
        Its ``limit`` names the confinement limit (:data:`LIMIT_VARS`, read from the
        environment at each call) the run hit, if any.
    """
    if timeout <= 0:
        raise UsageError(f"timeout must be positive, got {timeout!r}")
    if output_cap <= 0:
        raise UsageError(f"output_cap must be a positive number of bytes, got {output_cap!r}")
    limits = Limits.from_env()
    full_env = dict(os.environ)
    full_env.update({**OPENMPI_ROOT_ENV, **openmpi_env(full_env)})
    full_env.update(env or {})
    isolated, note = isolation()
    cmd = list(map(str, argv))
    rlimits = {resource.RLIMIT_CORE: 0}
    if memory_mb:
        rlimits[resource.RLIMIT_AS] = memory_mb << 20
    if not isolated:
        rlimits[resource.RLIMIT_FSIZE] = limits.file_mb << 20
        return _run_unconfined(cmd, cwd, full_env, timeout, rlimits, output_cap, note)
    _fits(cwd, limits)
    with Sandbox(limits, hide=hidden_from_programs(), network=network, copy_back=copy_back) as box:
        full_env["MPILAB_ABORT_LOG"] = _ABORT_LOG_INSIDE
        wrapped = box.argv(cmd)

        def poll():   # a fork bomb is stopped at once, not at the time limit
            return bool(box.cgroups and box.cgroups.new_events()[1])

        timed_out, stopped, proc, streams = _run_streaming(wrapped, cwd, full_env, timeout, rlimits, output_cap,
                                                           box.pass_fds, poll)
        report = box.report()
        limit = box.limit_hit(report)
    if "setup_error" in report:
        raise OSError(f"the sandbox could not be set up: {report['setup_error']}")
    out, n_out = streams.text(proc.stdout)
    err, n_err = streams.text(proc.stderr)
    returncode = None if timed_out or stopped else report.get("status", proc.returncode)
    return _file_size_limit(SandboxResult(
        argv=wrapped, returncode=returncode, stdout=out, stderr=_with_aborts(err, report.get("aborts", [])),
        timed_out=timed_out, timeout=timeout, network_isolated=not network, note=note, stdout_bytes=n_out,
        stderr_bytes=n_err, output_cap=output_cap, limit=limit), limits)


def _file_size_limit(res, limits):
    """``res``, its limit set when a process of it (a rank, a shell's child) died of SIGXFSZ."""
    crash = res.crash()
    if not res.limit and crash and crash[1].startswith(f"signal {int(signal.SIGXFSZ)} "):
        res.limit = limits.message("file_mb")
    return res


def _fits(cwd, limits):
    """Refuse a working directory too large to copy into the run's tmpfs (a confined run works on
    a copy of it): one meant for a run holds a few files (:func:`scratch_dir`)."""
    files = size = 0
    for root, dirs, names in os.walk(cwd):
        files += len(dirs) + len(names)
        size += sum(os.lstat(os.path.join(root, n)).st_size for n in names)
        if files >= limits.files or size >= (limits.disk_mb << 20) // 2:
            raise UsageError(f"the working directory {cwd} holds more than a run may copy (half of "
                             f"{limits.var('disk_mb')}={limits.disk_mb} MiB, or {limits.var('files')}="
                             f"{limits.files} files); run in a directory made by sandbox.scratch_dir")


def _run_unconfined(cmd, cwd, env, timeout, rlimits, output_cap, note):
    # the grader's MPI_Abort (mpilab/data/grading/report_abort.c) also writes here: launchers
    # sometimes lose a rank's last output when a job aborts
    fd, abort_log = tempfile.mkstemp(prefix="mpilab-abort-", suffix=".log")
    os.close(fd)
    env["MPILAB_ABORT_LOG"] = abort_log
    try:
        timed_out, _, proc, streams = _run_streaming(cmd, cwd, env, timeout, rlimits, output_cap)
        with open(abort_log, errors="replace") as f:
            aborts = f.read(TAIL_BYTES).splitlines()
    finally:
        os.unlink(abort_log)
    out, n_out = streams.text(proc.stdout)
    err, n_err = streams.text(proc.stderr)
    return _file_size_limit(SandboxResult(
        argv=cmd, returncode=None if timed_out else proc.returncode, stdout=out, stderr=_with_aborts(err, aborts),
        timed_out=timed_out, timeout=timeout, network_isolated=False, note=note, stdout_bytes=n_out,
        stderr_bytes=n_err, output_cap=output_cap), Limits.from_env())


def _with_aborts(err, aborts):
    aborts = [line for line in aborts if line not in err]
    if aborts:
        err += ("" if not err or err.endswith("\n") else "\n") + "\n".join(aborts) + "\n"
    return err


def _preexec(rlimits):
    def apply():
        os.setsid()
        for res, value in rlimits.items():
            resource.setrlimit(res, (value, value))

    return apply


#: Seconds between two looks at a confined run's cgroup while it runs.
POLL_S = 0.2


def _run_streaming(cmd, cwd, env, timeout, rlimits, output_cap, pass_fds=(), poll=None):
    """Start ``cmd``, read its output until it ends or the time is up (then kill its group);
    ``poll()`` returning True also stops it. Returns (timed_out, stopped, proc, streams)."""
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_preexec(rlimits), pass_fds=pass_fds)
    streams = process.Streams(proc, output_cap)
    stopped = False
    while True:
        step = min(deadline, time.monotonic() + POLL_S) if poll else deadline
        if streams.read_until(step):
            break
        if time.monotonic() >= deadline or (poll and poll()):
            stopped = time.monotonic() < deadline
            break
    timed_out = not stopped and not streams.done
    if not timed_out and not stopped:
        try:   # the pipes are closed; the program may still be finishing
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out or stopped:
        _kill_group(proc.pid)
        # what was written before the kill; a process that left the group may hold a pipe open
        streams.read_until(time.monotonic() + 5)
        proc.wait()
    streams.close()
    return timed_out, stopped, proc, streams


#: Bytes kept of the end of an output longer than the cap (the launcher's crash report is there).
TAIL_BYTES = process.TAIL_BYTES


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
