"""The first process of a confined run: PID 1 of its PID namespace, run as root by
:class:`mpilab.grade.sandbox.Sandbox`.

``unshare --net --mount --ipc --pid --fork --mount-proc python -I -S sandbox_init.py
key=value... -- ARGV...`` starts it inside fresh namespaces (the settings: :func:`parse` and
``Sandbox.argv``). Still root, it then:

1. joins the run's cgroups (their ``cgroup.procs`` files), so all it starts is counted there;
2. gives the run one size-capped tmpfs, its scratch space: ``/tmp``, ``/var/tmp``, ``/dev/shm``
   and (``work``) a copy of the working directory are directories of it;
3. makes every other mount read-only (but ``/proc``, ``/sys`` and ``/dev``), covers the
   ``hide`` directories with empty read-only tmpfs and the ``open`` ones (ancestors the sandbox
   user could not traverse, such as ``/root`` above a Python install) with empty ones, and binds
   back the ``keep`` paths below those covers (read-only, or writable for ``rw``);
4. brings up loopback (MPI and ipyparallel talk over 127.0.0.1 in the empty network namespace);
5. runs ARGV as the sandbox user (``setpriv``: its uid and gid, no supplementary groups, no
   capabilities, no new privileges) under the run's rlimits, in the working directory;
6. when that process ends: kills what is left in the namespace, writes a report (a line each:
   exit status, scratch space used, the grader's MPI_Abort lines) to the ``report_fd``
   inherited from the grader, and, if the run succeeded, copies the working directory's regular
   files and directories back to the real one (links, pipes and set-uid bits are not copied).

Meanwhile it watches ``parent_fd``, a pipe whose other end the grader holds: if the grader dies,
the run ends with it. It imports only the standard library (``python -I -S``: nothing from the
environment or from site-packages can change what it does, and it starts fast).
"""

import _signal as signal  # not signal, socket or json: their imports (enum, re) cost tens of ms
import _socket
import _stat as stat
import _struct as struct
import _thread
import ctypes
import fcntl
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
#: statvfs flags of a mount, and the mount flags that keep them on a remount
_KEEP_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: 1024,
    os.ST_NODIRATIME: 2048,
    os.ST_RELATIME: 1 << 21,
}
STAGE = "/dev/shm"  # covered, at the end, by the run's own /dev/shm

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _b(s):
    return None if s is None else os.fsencode(s)


def mount(source, target, fstype=None, flags=0, data=None):
    if _libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def bind(source, target, readonly=False):
    mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        remount_readonly(target)


def remount_readonly(target):
    kept = os.statvfs(target).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    for st, ms in _KEEP_FLAGS.items():
        if kept & st:
            flags |= ms
    mount(None, target, None, flags)


def tmpfs(target, size=None, mode=0o755, inodes=None, readonly=False, name="mpilab"):
    opts = (
        [f"mode={mode:o}"] + ([f"size={size}"] if size else []) + ([f"nr_inodes={inodes}"] if inodes else [])
    )
    mount(name, target, "tmpfs", MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0), ",".join(opts))


def mount_points():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            yield mp.encode().decode("unicode_escape") if "\\" in mp else mp


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def make_path(path, is_dir=True):
    os.makedirs(path if is_dir else os.path.dirname(path), mode=0o755, exist_ok=True)
    if not is_dir and not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def lo_up():
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    finally:
        s.close()


def copy_tree(src, dst, uid=None, gid=None, plain=False):
    """Copy the directory ``src`` into the existing ``dst``.

    ``plain``: only regular files and directories, without set-uid/set-gid bits (what comes
    back from the sandbox); else symbolic links too. ``uid``/``gid``: owner of what is made.
    """
    with os.scandir(src) as entries:
        for e in entries:
            s, d = os.path.join(src, e.name), os.path.join(dst, e.name)
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if os.path.lexists(d) and not os.path.isdir(d) or os.path.islink(d):
                    os.unlink(d)
                os.makedirs(d, exist_ok=True)
                copy_tree(s, d, uid, gid, plain)
                os.chmod(d, stat.S_IMODE(st.st_mode) & 0o777 | 0o700)
            elif stat.S_ISREG(st.st_mode):
                if os.path.isdir(d) and not os.path.islink(d):
                    _remove_tree(d)
                elif os.path.lexists(d):
                    os.unlink(d)
                fi = os.open(s, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    fo = os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                    try:
                        while True:
                            chunk = os.read(fi, 1 << 20)
                            if not chunk:
                                break
                            os.write(fo, chunk)
                        os.fchmod(fo, stat.S_IMODE(st.st_mode) & 0o777)
                    finally:
                        os.close(fo)
                finally:
                    os.close(fi)
            elif stat.S_ISLNK(st.st_mode) and not plain:
                os.symlink(os.readlink(s), d)
            else:
                continue
            if uid is not None:
                os.lchown(d, uid, gid)


def _remove_tree(path):
    for e in os.scandir(path):
        p = os.path.join(path, e.name)
        if e.is_dir(follow_symlinks=False):
            _remove_tree(p)
        else:
            os.unlink(p)
    os.rmdir(path)


def setup(cfg, here):
    """Steps 1-4 of the module's description; returns a directory descriptor of the real
    working directory when ``work`` is set, else None."""
    for procs in cfg["cgroup"]:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    uid, gid = int(cfg["uid"]), int(cfg["gid"])
    for path in cfg["own"]:
        os.chown(path, uid, gid)
    tmpfs(STAGE, mode=0o700, size="1m", name="mpilab-stage")
    scratch = os.path.join(STAGE, "scratch")
    os.mkdir(scratch)
    tmpfs(scratch, size=cfg["disk"], inodes=cfg["files"], name="mpilab-scratch")
    for d in ("tmp", "var-tmp", "shm", "work"):
        os.mkdir(os.path.join(scratch, d))
        os.chmod(os.path.join(scratch, d), 0o1777)
    os.chown(os.path.join(scratch, "work"), uid, gid)
    os.chmod(os.path.join(scratch, "work"), 0o700)
    real = None
    if cfg["work"]:
        os.mkdir(os.path.join(STAGE, "real"))
        bind(".", os.path.join(STAGE, "real"))
        real = os.open(os.path.join(STAGE, "real"), os.O_RDONLY | os.O_DIRECTORY)
    slots = []
    for i, item in enumerate(cfg["keep"]):
        mode, _, path = item.partition(":")
        slot = os.path.join(STAGE, f"keep{i}")
        make_path(slot, os.path.isdir(path))
        bind(path, slot)
        slots.append((path, slot, mode))
    # every mount read-only, but /proc, /sys and /dev (where the stage is)
    for mp in list(mount_points()):
        if not any(under(mp, top) for top in ("/proc", "/sys", "/dev")):
            remount_readonly(mp)
    # covers and binds, shallowest first: a keep inside a cover comes after it, a cover inside
    # a keep after the keep
    ops = [
        (p, "tmp", os.path.join(scratch, d))
        for p, d in (("/tmp", "tmp"), ("/var/tmp", "var-tmp"))
        if os.path.isdir(p)
    ]
    ops += [(p, "open", None) for p in cfg["open"]] + [(p, "hide", None) for p in cfg["hide"]]
    ops += [(p, "keep", (slot, mode)) for p, slot, mode in slots]
    hidden = []
    for path, kind, arg in sorted(ops, key=lambda op: (op[0].rstrip("/").count("/"), op[1] == "keep")):
        if kind == "tmp":
            bind(arg, path)
        elif kind in ("open", "hide"):
            if os.path.isdir(path):  # (not if it was under /tmp: that is new and empty already)
                tmpfs(path, size="64k", mode=0o755 if kind == "open" else 0o555, name=f"mpilab-{kind}")
                hidden += [path] if kind == "hide" else []
        else:
            slot, mode = arg
            make_path(path, os.path.isdir(slot))
            bind(slot, path, readonly=mode != "rw")
    if cfg["work"]:
        make_path(here)
        bind(os.path.join(scratch, "work"), here)
        copy_tree(f"/proc/self/fd/{real}", here, uid, gid)
    for path in hidden:
        mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    bind(os.path.join(scratch, "shm"), "/dev/shm")
    lo_up()
    return real


def start(cfg, argv, here):
    """Step 5: start ``argv`` as the sandbox user; wait for it, reaping every orphan meanwhile.
    Returns its exit status, or minus the signal that ended it."""
    pid = os.fork()
    if pid == 0:
        try:
            _oom_score_adj(0)
            for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            for item in cfg["rlimit"]:
                name, _, value = item.partition(":")
                resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (int(value), int(value)))
            os.chdir(here)
            os.environ["HOME"] = cfg["home"]
            # its parent in here is PID 1, not the process Jupyter named (ipykernel would take
            # the first for its parent's death); this process watches the grader instead (parent_fd)
            if "JPY_PARENT_PID" in os.environ:
                os.environ["JPY_PARENT_PID"] = "1"
            os.execvp(
                "setpriv",
                [
                    "setpriv",
                    f"--reuid={cfg['uid']}",
                    f"--regid={cfg['gid']}",
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--no-new-privs",
                    "--",
                    *argv,
                ],
            )
        except BaseException as exc:  # noqa: BLE001 (the child never returns into PID 1's code)
            os.write(2, f"mpilab sandbox: cannot start {argv[0]}: {exc}\n".encode())
        os._exit(127)
    while True:
        done, status = os.wait()
        if done == pid:
            return os.waitstatus_to_exitcode(status)


def parse(args):
    """Settings given as ``key=value`` arguments (lists: the key repeated) up to ``--``."""
    cfg = {
        "cgroup": [],
        "keep": [],
        "open": [],
        "hide": [],
        "rlimit": [],
        "own": [],
        "work": "",
        "report_fd": "",
        "abort_log": "",
        "home": "/tmp",
        "copy_back": "success",
    }
    for i, arg in enumerate(args):
        if arg == "--":
            return cfg, args[i + 1 :]
        key, _, value = arg.partition("=")
        if isinstance(cfg.get(key), list):
            cfg[key].append(value)
        else:
            cfg[key] = value
    raise SystemExit("mpilab sandbox: no -- before the command")


def _oom_score_adj(value):
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def main():
    cfg, argv = parse(sys.argv[1:])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is for the program (a kernel), not for us
    report = int(cfg["report_fd"]) if cfg["report_fd"] else None
    if report is not None:
        os.set_inheritable(report, False)
    out = []
    here = os.getcwd()
    if cfg.get("parent_fd"):
        _thread.start_new_thread(_watch, (int(cfg["parent_fd"]),))
    _oom_score_adj(-1000)  # never the OOM killer's choice in the run's cgroup (needs CAP_SYS_RESOURCE)
    try:
        real = setup(cfg, here)
    except OSError as exc:
        out.append(f"setup_error {exc}")
        _report(report, out)
        os.write(2, f"mpilab sandbox: setting up failed: {exc}\n".encode())
        return 111
    status = start(cfg, argv, here)
    out.append(f"status {status}")
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    fs = os.statvfs("/tmp")
    out.append(f"disk {fs.f_blocks * fs.f_frsize} {fs.f_bfree * fs.f_frsize} {fs.f_files} {fs.f_ffree}")
    log = cfg["abort_log"]
    if log and os.path.isfile(log) and not os.path.islink(log):
        with open(log, "rb") as f:
            out += ["abort " + line for line in f.read(4096).decode(errors="replace").splitlines()]
    if real is not None and (status == 0 or cfg.get("copy_back") == "always"):
        try:
            copy_tree(here, f"/proc/self/fd/{real}", plain=True)
        except OSError as exc:
            out.append(f"copy_error {exc}")
    _report(report, out)
    return status if 0 <= status < 256 else 128 - status


def _watch(fd):
    """End the sandbox, everything in it, when the grader's end of the pipe ``fd`` closes (the
    grader died: nothing else would stop what runs here)."""
    os.set_inheritable(fd, False)
    while os.read(fd, 1):
        pass
    try:
        os.kill(-1, signal.SIGKILL)
    finally:
        os._exit(137)


def _report(fd, lines):
    if fd is not None:
        os.write(fd, "".join(line.replace("\n", " ") + "\n" for line in lines).encode())


if __name__ == "__main__":
    sys.exit(main())
