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

import functools
import os
import pwd
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
from mpilab.grade import cgroups
from mpilab.grade.outcome import USER_PROCS, Limits, SandboxResult, positive_env
from mpilab.simulate import platforms

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


@functools.cache
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
        proc = (
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--user-group",
                    "--comment",
                    "mpilab sandbox, runs untrusted student code",
                    name,
                ],
                capture_output=True,
                text=True,
            )
            if shutil.which("useradd")
            else None
        )
        try:
            pw = pwd.getpwnam(name)  # made now, or by a grader running at the same time
        except KeyError:
            why = proc.stderr.strip() if proc else "useradd is not installed"
            note = f"could not create the user {name} ({why}); runs as nobody"
            pw = pwd.getpwnam("nobody")
    if pw.pw_uid == 0:
        raise UsageError(
            f"MPILAB_SANDBOX_USER={name!r} is root; name an unprivileged user (default {SANDBOX_USER})"
        )
    return pw.pw_name, pw.pw_uid, pw.pw_gid, note


@functools.cache
def isolation():
    """What confinement this machine allows, checked once by confining ``true``.

    Returns
    -------
    (bool, str)
        ``(True, note)`` when runs can be confined (:class:`Sandbox`), the note naming what is
        missing even so (no usable cgroup: no cap on a run's total memory or processes); else
        ``(False, why)``, why naming what stays unisolated.
    """
    unconfined = (
        "runs keep the host's network, files, processes and user, with no cap on disk, "
        "total memory or processes"
    )
    if os.geteuid() != 0:
        return False, f"not root: {unconfined}"
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return False, f"{' and '.join(missing)} (util-linux) not installed: {unconfined}"
    why = _probe(cgroup=True)
    if why and cgroups.parents():  # cgroups that look writable but fail: do without them
        cgroups.TROUBLE.append(why)
        why = _probe(cgroup=False)
    if why:
        return False, f"confining a run failed ({why}): {unconfined}"
    notes = [sandbox_user()[3], cgroups.note()]
    return True, "; ".join(n for n in notes if n)


def _probe(cgroup):
    """Confine ``true``; None if that worked, else why not."""
    try:
        sandbox_user()
        with Sandbox(Limits.from_env(), cgroup=cgroup) as box, tempfile.TemporaryDirectory() as empty:
            proc = subprocess.run(
                box.argv(["true"]),
                cwd=empty,
                capture_output=True,
                text=True,
                timeout=60,
                pass_fds=box.pass_fds,
            )
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
    return sorted(
        {
            sys.base_prefix,
            sys.prefix,
            sys.exec_prefix,
            os.path.dirname(os.path.realpath(sys.executable)),
            str(paths.repo_root()),
            str(paths.PACKAGE_DIR),
            str(platforms._cache_dir()),
        }
    )


def _under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


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

    def __init__(
        self,
        limits,
        hide=(),
        keep=(),
        work=True,
        own=(),
        network=False,
        cgroup=True,
        report=True,
        address_space_mb=0,
        copy_back="success",
    ):
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
        self.cgroups = cgroups.Cgroups(limits) if cgroup and cgroups.parents() else None
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
        settings = [
            f"uid={self.uid}",
            f"gid={self.gid}",
            f"disk={lim.disk_mb << 20}",
            f"files={lim.files}",
            f"work={'1' if self.work else ''}",
            f"parent_fd={self._watch_r}",
            f"report_fd={'' if self._report_fd is None else self._report_fd}",
            f"abort_log={_ABORT_LOG_INSIDE}",
            f"copy_back={self.copy_back}",
            f"rlimit=fsize:{lim.file_mb << 20}",
            "rlimit=core:0",
            f"rlimit=nproc:{positive_env('MPILAB_SANDBOX_USER_PROCS', USER_PROCS)}",
        ]
        settings += [f"rlimit=as:{self.address_space_mb << 20}"] if self.address_space_mb else []
        settings += [f"cgroup={f}" for f in (self.cgroups.procs_files if self.cgroups else [])]
        settings += [f"hide={d}" for d in self.hide] + [f"open={d}" for d in self.open]
        settings += [f"keep={'rw' if rw else 'ro'}:{p}" for p, rw in self.keep] + [
            f"own={f}" for f in self.own
        ]
        ns = ["--mount", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc"] + (
            [] if self.network else ["--net"]
        )
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


def run(
    argv,
    *,
    cwd,
    timeout=60.0,
    memory_mb=2048,
    output_cap=200_000,
    env=None,
    network=False,
    copy_back="success",
):
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
        :func:`mpilab.core.process.cut_marker` line.
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

        def poll():  # a fork bomb is stopped at once, not at the time limit
            return bool(box.cgroups and box.cgroups.new_events()[1])

        timed_out, stopped, proc, streams = _run_streaming(
            wrapped, cwd, full_env, timeout, rlimits, output_cap, box.pass_fds, poll
        )
        report = box.report()
        limit = box.limit_hit(report)
    if "setup_error" in report:
        raise OSError(f"the sandbox could not be set up: {report['setup_error']}")
    out, n_out = streams.text(proc.stdout)
    err, n_err = streams.text(proc.stderr)
    returncode = None if timed_out or stopped else report.get("status", proc.returncode)
    return _file_size_limit(
        SandboxResult(
            argv=wrapped,
            returncode=returncode,
            stdout=out,
            stderr=_with_aborts(err, report.get("aborts", [])),
            timed_out=timed_out,
            timeout=timeout,
            network_isolated=not network,
            note=note,
            stdout_bytes=n_out,
            stderr_bytes=n_err,
            output_cap=output_cap,
            limit=limit,
        ),
        limits,
    )


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
            raise UsageError(
                f"the working directory {cwd} holds more than a run may copy (half of "
                f"{limits.var('disk_mb')}={limits.disk_mb} MiB, or {limits.var('files')}="
                f"{limits.files} files); run in a directory made by sandbox.scratch_dir"
            )


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
    return _file_size_limit(
        SandboxResult(
            argv=cmd,
            returncode=None if timed_out else proc.returncode,
            stdout=out,
            stderr=_with_aborts(err, aborts),
            timed_out=timed_out,
            timeout=timeout,
            network_isolated=False,
            note=note,
            stdout_bytes=n_out,
            stderr_bytes=n_err,
            output_cap=output_cap,
        ),
        Limits.from_env(),
    )


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
    proc = subprocess.Popen(
        cmd,
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_preexec(rlimits),
        pass_fds=pass_fds,
    )
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
        try:  # the pipes are closed; the program may still be finishing
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
