"""Run untrusted student code under limits, confined to what it is allowed to see.

A sandboxed run gets a wall-time limit that kills its whole process group (an MPI deadlock
ends as a failed check, never as a hung grader), an address-space limit per process, an output
cap (the output is read as it comes and what is past the cap is thrown away, so a program that
prints in a loop costs no memory) and a fresh scratch directory holding only the files it is
given.

Where the machine allows it (:func:`isolation`), the run is also confined (:class:`Sandbox`), in
new network, mount, PID and IPC namespaces: it reaches no other machine (MPI still talks over
loopback), sees and signals no process but its own, writes nothing but one size-capped tmpfs of
its own (its ``/tmp``, ``/var/tmp``, ``/dev/shm`` and a copy of its working directory, copied
back only if the run succeeds), and **sees only what it is allowed to see**: its root is new,
made of read-only bind mounts of an allow-list, so what is not on the list does not exist for
it (no list of hidden paths to keep up to date). The allow-list:

- the system: ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` (:data:`SYSTEM_DIRS`), the installation
  of each MPI, SimGrid and compiler tool the kit calls when it lives elsewhere (``/opt``, a
  module tree: :data:`TOOLS`), the directories of ``$LD_LIBRARY_PATH`` and of
  ``$MPILAB_SANDBOX_READ`` (:data:`READ_ENV`, colon-separated, for an installation the kit cannot
  find by itself);
- a few files of ``/etc`` (:data:`ETC_FROM_HOST`: the dynamic linker's cache, the alternatives'
  links, the MPIs' configuration, time zone, protocols and services), and ``passwd``, ``group``,
  ``hosts``, ``hostname`` and ``nsswitch.conf`` written for the run (its own user, root, nobody;
  ``localhost`` and this host on 127.0.0.1): no other user of the machine is named;
- a private ``/tmp``, ``/var/tmp`` and ``/dev/shm``, a minimal ``/dev`` (null, zero, full,
  random, urandom, tty), a new ``/proc`` (its own processes only) and ``/sys`` without what is
  mounted below it (no cgroup file system);
- the Python environment (:func:`python_paths`: the interpreter's installation and the
  ``.venv``, without the repository its editable installs point into) and the SimGrid platforms
  the kit ships or generated (:func:`platform_paths`);
- its working directory (a copy, writable) and, only for the runs that name them (``read``),
  more paths, read-only: the student-side kit for a grading kernel (:func:`kit_paths`: the
  ``mpilab`` package and its data), the answer key for the judge (``kit_paths(key=True)``,
  :func:`key_paths`).

Never on it: the repository itself (its ``.git``, ``tests/``, ``dist/``, ``solutions/``,
``c_reference/build/`` with the key's objects), the course being graded (``$MPILAB_COURSE_ROOT``:
the gradebook, ``source/``, ``submitted/``, every student's directory) and the answer key unless
named. Should one of them lie below an allowed directory (a kit installed under ``/usr/local``),
it is covered by an empty read-only directory (:func:`hidden_from_programs`), and a ``read``
path that holds one of them is refused.

As root, the run's processes run as an unprivileged user (:func:`sandbox_user`,
``mpilab-sandbox``) and a cgroup caps the memory and the processes of the whole run where the
machine has a writable one. Not root, the run is confined the same way in a user namespace
(where the kernel allows unprivileged ones, Debian's default): its processes run as the grader's
own user, the only one there is to map, in a second user namespace that holds no capability over
the run's mounts; processes are capped per run by ``RLIMIT_NPROC``, which Linux (5.14 and later)
counts per user namespace, hence per run; memory by a cgroup only where one is delegated to the
user (else per process only). Runs nest: a confined process (a grading kernel, the judge) runs
student code in a confined run of its own, which sees only its own allow-list.

Every limit is read from an ``MPILAB_SANDBOX_*`` variable (:data:`LIMIT_VARS`) and, when a run
hits it, its failure says which (:meth:`SandboxResult.failure`). Where runs cannot be confined
(no user namespaces, no util-linux) they go on with the time, memory, file-size and output
limits only, and :func:`isolation` says exactly what is lost.
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

from mpilab.core import process
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import OPENMPI_ROOT_ENV, openmpi_env
from mpilab.grade import cgroups
from mpilab.grade.allowlist import (  # noqa: F401 (COURSE_ENV, READ_ENV, kit_paths: for callers)
    COURSE_ENV,
    READ_ENV,
    binds,
    etc_paths,
    hidden_from_programs,
    key_paths,
    kit_paths,
    platform_paths,
    python_paths,
    refuse_holding_hidden,
    system_paths,
    under,
)
from mpilab.grade.outcome import USER_PROCS, Limits, SandboxResult, positive_env

# --- what this machine allows ------------------------------------------------------------------

#: The user confined runs run as when the grader is root (created when missing, as a system user
#: without home or shell); MPILAB_SANDBOX_USER overrides.
SANDBOX_USER = "mpilab-sandbox"
#: The first process of every confined run (PID 1 of its namespaces, run as root).
INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_init.py")
#: Set to 0 in a confined process whose own runs keep the limits only (:class:`Sandbox`'s
#: ``nest``): a grading kernel, whose notebook could run anything it starts anyway.
NEST_ENV = "MPILAB_SANDBOX_NEST"
#: Where a confined program's MPI_Abort reporter writes (inside its private /tmp).
_ABORT_LOG_INSIDE = "/tmp/.mpilab-abort.log"


def host_root():
    """Whether this process is the machine's root (uid 0 of the first user namespace), not the
    root of a user namespace of an ordinary user."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split()[:3] == ["0", "0", "4294967295"]
    except OSError:
        return True


@functools.cache
def sandbox_user():
    """The user confined runs run as: ``(name, uid, gid, note)``.

    As root: ``$MPILAB_SANDBOX_USER`` (default ``mpilab-sandbox``), created when missing
    (``useradd --system``, no home, no login shell); ``nobody`` when that fails, with a note
    saying why. Not root: this process's own user (a user namespace maps no other).
    """
    if not host_root():
        uid, gid = os.geteuid(), os.getegid()
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        return name, uid, gid, ""
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


#: What an unconfined run keeps of the machine (the guarantees a confined one has).
UNCONFINED = (
    "runs keep the host's network; the answer key, the course and other students' files are "
    "readable wherever file permissions allow; the grader's processes can be seen and signalled; "
    "no cap on disk (only on one file's size), total memory (only per process) or processes"
)


@functools.cache
def isolation():
    """What confinement this machine allows, checked once by confining ``true``.

    Returns
    -------
    (bool, str)
        ``(True, note)`` when runs can be confined (:class:`Sandbox`), the note naming how and
        what is missing even so (no usable cgroup: no cap on a run's total memory); else
        ``(False, why)``, why naming the guarantees that are lost.
    """
    if os.environ.get(NEST_ENV) == "0":
        return False, (
            "inside a confined grading kernel: runs keep the time, memory, file-size and output "
            "limits, within the kernel's own confinement (no network, only the kit and its own "
            "directory, capped), which the notebook's own code shares anyway"
        )
    root = host_root()
    needed = ("unshare", "setpriv") if root else ("unshare",)
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        return False, f"{' and '.join(missing)} (util-linux) not installed: {UNCONFINED}"
    why = _probe(cgroup=True)
    if why and cgroups.parents():  # cgroups that look writable but fail: do without them
        cgroups.TROUBLE.append(why)
        why = _probe(cgroup=False)
    if why:
        if root:
            return False, f"confining a run failed ({why}): {UNCONFINED}"
        return False, (
            f"not root, and runs cannot be confined in a user namespace here ({why}; unprivileged "
            "user namespaces may be off: /proc/sys/user/max_user_namespaces, or "
            f"kernel.apparmor_restrict_unprivileged_userns on Ubuntu): {UNCONFINED}"
        )
    name, _, _, user_note = sandbox_user()
    notes = [user_note]
    if not root:
        notes.append(f"not root: confined in user namespaces as {name} itself (the only user it can map)")
    notes.append(cgroups.note(per_run_nproc=not root))
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


# --- one confined run --------------------------------------------------------------------------


class Sandbox:
    """The pieces of one confined run that live outside it, and the command that starts it.

    Used as a context manager: on entry it makes the run's cgroup(s) (with ``cgroup``) and the
    pipe its first process (:mod:`sandbox_init`) watches to end the run if the grader dies; on
    exit it kills what is left and removes them. :meth:`argv` wraps a command in ``unshare``
    (new network, mount, PID and IPC namespaces; a user namespace too when not root) and the
    init process, which builds the run's root from the allow-list (the module's description).

    Parameters
    ----------
    limits : Limits
    hide : sequence of str
        Directories the run sees empty should they lie below an allowed one (besides
        :func:`hidden_from_programs`).
    keep : sequence of (str, bool)
        More paths the run sees, and whether writable (a kernel's own directory).
    work : bool
        Give the run a capped copy of its working directory, copied back after a successful
        run (False: the working directory is used as it is, e.g. one the grader capped itself;
        it must then be one of ``keep``).
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
    copy_back : {"success", "always"}
        When the working directory's copy comes back (``work``).
    read : sequence of path or (path, path)
        More paths the run reads, read-only, at the same place, or (source, where the run sees
        it): the kit for a kernel, the answer key for the judge (:func:`kit_paths`). A path that
        holds the kit's checkout or the course is refused.
    nest : bool
        The runs the confined process starts with :func:`run` are confined again, each with its
        own allow-list (True: the judge, which reads the key, runs student C that must not); or
        they keep the limits only (False: a grading kernel, where the notebook's own code is as
        untrusted as what it starts and could run it directly; a confined run costs ~0.4 s).
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
        read=(),
        nest=True,
    ):
        user = sandbox_user()
        self.limits, self.root = limits, host_root()
        self.name, self.uid, self.gid = user[0], user[1], user[2]
        self.work, self.own, self.network = work, list(own), network
        self.address_space_mb, self.copy_back, self.nest = address_space_mb, copy_back, nest
        pairs = [(p, p) if isinstance(p, (str, os.PathLike)) else tuple(p) for p in read]
        pairs = [(os.fspath(s), os.fspath(t)) for s, t in pairs]
        refuse_holding_hidden([s for s, _ in pairs] + [p for p, _ in keep])
        fixed = system_paths() + etc_paths(network) + python_paths() + platform_paths()
        items = [(p, p, False) for p in fixed] + [(s, t, False) for s, t in pairs]
        items += [(os.fspath(p), os.fspath(p), bool(rw)) for p, rw in keep]
        self.links, self.binds = binds(items)
        named = {t for _, t, _ in self.binds}
        self.covers = sorted(
            {
                os.path.realpath(h)
                for h in [*hidden_from_programs(), *key_paths(), *map(os.fspath, hide)]
                if h not in named and any(under(h, t) and h != t for t in named)
            }
        )
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
        procs = positive_env("MPILAB_SANDBOX_USER_PROCS", USER_PROCS) if self.root else lim.procs
        settings = [
            f"uid={self.uid if self.root else 0}",
            f"gid={self.gid if self.root else 0}",
            f"user={self.name}",
            f"disk={lim.disk_mb << 20}",
            f"files={lim.files}",
            f"work={'1' if self.work else ''}",
            f"network={'1' if self.network else ''}",
            f"nest={'1' if self.nest else '0'}",
            f"parent_fd={self._watch_r}",
            f"report_fd={'' if self._report_fd is None else self._report_fd}",
            f"abort_log={_ABORT_LOG_INSIDE}",
            f"copy_back={self.copy_back}",
            f"rlimit=fsize:{lim.file_mb << 20}",
            "rlimit=core:0",
            f"rlimit=nproc:{procs}",
        ]
        settings += [] if self.root else [f"userns={self.uid}:{self.gid}"]
        settings += [f"rlimit=as:{self.address_space_mb << 20}"] if self.address_space_mb else []
        settings += [f"cgroup={f}" for f in (self.cgroups.procs_files if self.cgroups else [])]
        settings += [f"link={len(p)}:{p}{t}" for p, t in self.links]
        settings += [f"bind={'rw' if rw else 'ro'}:{len(s)}:{s}{t}" for s, t, rw in self.binds]
        settings += [f"cover={d}" for d in self.covers] + [f"own={f}" for f in self.own]
        ns = ["--mount", "--ipc", "--pid", "--fork", "--kill-child"] + ([] if self.network else ["--net"])
        if not self.root:
            ns = ["--user", "--map-root-user", *ns]
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
    read=(),
    limits=None,
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
    read : sequence of path or (path, path)
        More paths a confined run may read besides the allow-list (:class:`Sandbox`); a C build
        needs none: copy what it needs into ``cwd`` (:func:`scratch_dir`).
    limits : Limits, optional
        The confinement's limits (default: a student's program's, ``Limits.from_env()``).

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
    limits = limits or Limits.from_env()
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
    with Sandbox(limits, network=network, copy_back=copy_back, read=read) as box:
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
