"""The first process of a confined run: PID 1 of its PID namespace, started by
:class:`mpilab.grade.sandbox.Sandbox`.

``unshare [--user --map-root-user] --net --mount --ipc --pid --fork python -I -S sandbox_init.py
key=value... -- ARGV...`` starts it inside fresh namespaces (the settings: :func:`parse` and
``Sandbox.argv``): as root when the grader is root, else as the root of a new user namespace
(mapped to the grader's own user). Still privileged there, it:

1. joins the run's cgroups (their ``cgroup.procs`` files), so all it starts is counted there;
2. makes the run's scratch space, one size-capped tmpfs: its ``/tmp``, ``/var/tmp``,
   ``/dev/shm`` and (``work``) a copy of the working directory are directories of it;
3. builds a new root that holds only what the run is allowed to see (:func:`build_root`): the
   ``bind`` paths (read-only, or writable for ``rw``) at their own places, the ``link`` symbolic
   links on the way to them, an ``/etc`` of a few files (some bound from the host, ``passwd``,
   ``group``, ``hosts`` and ``nsswitch.conf`` written for the run), a minimal ``/dev``, a new
   ``/proc``, ``/sys`` read-only, the scratch directories, and empty read-only ``cover`` tmpfs
   over what must stay unseen below an allowed path; then pivots into it and detaches the old
   root, so nothing else of the machine is reachable, not even by unmounting something;
4. brings up loopback (MPI and ipyparallel talk over 127.0.0.1 in the empty network namespace);
5. runs ARGV without privileges under the run's rlimits, in the working directory: as root, it
   switches to the sandbox user (``setpriv``: its uid and gid, no supplementary groups, no
   capabilities, no new privileges); in a user namespace, where the grader's user is the only
   one there is, it enters a second user namespace mapping that user to itself (``userns``), so
   the program holds no capability over the run's mounts, and sets no-new-privileges;
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
MNT_DETACH = 2
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24
#: pivot_root(2) has no C library wrapper: its system call number per machine.
SYS_PIVOT_ROOT = {
    "x86_64": 155,
    "aarch64": 41,
    "riscv64": 41,
    "loongarch64": 41,
    "ppc64le": 203,
    "ppc64": 203,
    "s390x": 217,
    "i686": 217,
    "armv7l": 218,
}
#: statvfs flags of a mount, and the mount flags that keep them on a remount
_KEEP_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: 1024,
    os.ST_NODIRATIME: 2048,
    os.ST_RELATIME: 1 << 21,
}
STAGE = "/dev/shm"  # where the scratch space and the new root are made, before the pivot
#: Device nodes of the new /dev (bound from the host's).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _b(s):
    return None if s is None else os.fsencode(s)


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source, target, fstype=None, flags=0, data=None):
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


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
    if not is_dir and not os.path.lexists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o644))


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


def _pair(value):
    """``<length>:<first><second>`` (paths may hold any character but NUL): (first, second)."""
    n, _, rest = value.partition(":")
    return rest[: int(n)], rest[int(n) :]


def _etc_files(cfg, hostname):
    """The files written into the new root's /etc: who the run is, how names resolve."""
    uid, gid, user = cfg["inner_uid"], cfg["inner_gid"], cfg["user"] or "mpilab-sandbox"
    users = [("root", 0, 0, "/root")] + ([(user, uid, gid, cfg["home"])] if uid != 0 else [])
    users += [("nobody", 65534, 65534, "/nonexistent")] if uid != 65534 else []
    groups = [("root", 0)] + ([(user, gid)] if gid != 0 else [])
    groups += [("nogroup", 65534)] if gid != 65534 else []
    hosts = "files dns" if cfg["network"] else "files"
    out = {
        "passwd": "".join(f"{n}:x:{u}:{g}::{h}:/usr/sbin/nologin\n" for n, u, g, h in users),
        "group": "".join(f"{n}:x:{g}:\n" for n, g in groups),
        "nsswitch.conf": f"passwd: files\ngroup: files\nshadow: files\nhosts: {hosts}\n"
        "networks: files\nprotocols: files\nservices: files\n",
        "hostname": hostname + "\n",
    }
    if not cfg["network"]:  # the host's names lead nowhere from an empty network namespace
        out["hosts"] = f"127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    return out


def build_root(cfg, root, scratch):
    """Step 3 (but the pivot): the run's new root in the empty tmpfs ``root``.

    Every mount goes in order of depth, so a path made under another (a cover under an allowed
    directory, an allowed file under a cover, the working directory under /tmp) comes after it.
    """
    ops = [("/tmp", 0, "scratch", "tmp"), ("/var/tmp", 0, "scratch", "var-tmp")]
    ops += [("/proc", 0, "proc", None), ("/dev", 0, "dev", None), ("/etc", 0, "etc", None)]
    ops += [("/sys", 0, "sys", None)] if os.path.isdir("/sys") else []
    for item in cfg["bind"]:
        mode, _, pair = item.partition(":")
        source, target = _pair(pair)
        ops.append((target, 1, "bind", (source, mode)))
    ops += [(path, 0, "link", target) for path, target in map(_pair, cfg["link"])]
    ops += [(path, 2, "cover", None) for path in cfg["cover"]]
    covers = []
    for target, _, kind, arg in sorted(ops, key=lambda op: (op[0].rstrip("/").count("/"), op[1])):
        at = root + target
        if kind == "link":
            if not os.path.lexists(at):
                make_path(os.path.dirname(at))
                os.symlink(arg, at)
        elif kind == "bind":
            source, mode = arg
            if not os.path.lexists(source):
                continue
            make_path(at, os.path.isdir(source))
            bind(source, at, readonly=mode != "rw")
        elif kind == "cover":
            if os.path.isdir(at) and not os.path.islink(at):
                tmpfs(at, size="64k", mode=0o555, name="mpilab-cover")
                covers.append(at)
        elif kind == "scratch":
            make_path(at)
            bind(os.path.join(scratch, arg), at)
        elif kind == "proc":
            make_path(at)
            mount("proc", at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif kind == "sys":  # (hwloc, UCX read it) all read-only, without the cgroup file system
            make_path(at)
            bind("/sys", at)  # recursive: a user namespace may not bind only the top of it
            for mp in [mp for mp in mount_points() if under(mp, at)]:
                if os.path.exists(mp):  # (not one a cover hides, in a nested run)
                    remount_readonly(mp)
            if os.path.isdir(f"{at}/fs/cgroup"):
                tmpfs(f"{at}/fs/cgroup", size="4k", mode=0o555, readonly=True, name="mpilab-cover")
        elif kind == "dev":
            make_path(at)
            tmpfs(at, size="64k", mode=0o755, name="mpilab-dev")
            for name in DEVICES:
                if os.path.exists(f"/dev/{name}"):
                    make_path(f"{at}/{name}", is_dir=False)
                    try:
                        bind(f"/dev/{name}", f"{at}/{name}")
                    except OSError:  # (no controlling terminal's tty, a device the host lacks)
                        os.unlink(f"{at}/{name}")
            for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
                os.symlink(target, f"{at}/{name}")
            os.symlink("/proc/self/fd/1", f"{at}/stdout")
            os.symlink("/proc/self/fd/2", f"{at}/stderr")
            make_path(f"{at}/shm")
            bind(os.path.join(scratch, "shm"), f"{at}/shm")
            remount_readonly(at)
        elif kind == "etc":
            make_path(at)
            for name, text in _etc_files(cfg, os.uname().nodename).items():
                with open(f"{at}/{name}", "w") as f:
                    f.write(text)
    for at in covers:
        mount(None, at, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def pivot(root):
    """Make ``root`` the root of this mount namespace and detach the old one (pivot_root(2)'s
    ``pivot_root(".", ".")``): what the new root does not hold is gone from the run."""
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:
        raise OSError(0, f"pivot_root: unknown system call number on {os.uname().machine}")
    os.chdir(root)
    _check(_libc.syscall(ctypes.c_long(nr), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


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
    mount(None, "/", None, MS_REC | (1 << 18))  # MS_PRIVATE: nothing propagates back to the host
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
        copy_tree(f"/proc/self/fd/{real}", os.path.join(scratch, "work"), uid, gid)
    root = os.path.join(STAGE, "root")
    os.mkdir(root)
    tmpfs(root, size="4m", mode=0o755, name="mpilab-root")
    build_root(cfg, root, scratch)
    if cfg["work"]:
        make_path(root + here)
        bind(os.path.join(scratch, "work"), root + here)
    pivot(root)
    os.chdir(here)
    if not cfg["network"]:
        lo_up()
    return real


def _drop_to_own_namespace(inner_uid, inner_gid):
    """In a user namespace whose root is the grader's user: enter a new user namespace where that
    user is ``inner_uid``/``inner_gid`` (the grader's own ids, as the host knows them), holding
    no capability over the run's namespaces, and drop the capabilities it has in the new one."""
    _check(_libc.unshare(CLONE_NEWUSER), "unshare a user namespace")
    maps = (("setgroups", "deny"), ("uid_map", f"{inner_uid} 0 1"), ("gid_map", f"{inner_gid} 0 1"))
    for name, text in maps:
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if inner_uid != 0:  # all capabilities go with root (none were kept)
        os.setresgid(inner_gid, inner_gid, inner_gid)
        os.setresuid(inner_uid, inner_uid, inner_uid)


def start(cfg, argv, here):
    """Step 5: start ``argv`` without privileges; wait for it, reaping every orphan meanwhile.
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
            os.environ["HOME"] = cfg["home"]
            # its parent in here is PID 1, not the process Jupyter named (ipykernel would take
            # the first for its parent's death); this process watches the grader instead (parent_fd)
            if "JPY_PARENT_PID" in os.environ:
                os.environ["JPY_PARENT_PID"] = "1"
            os.environ["MPILAB_SANDBOX_NEST"] = cfg["nest"]  # (mpilab.grade.sandbox.NEST_ENV)
            if cfg["userns"]:
                _drop_to_own_namespace(cfg["inner_uid"], cfg["inner_gid"])
                _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
                os.chdir(here)
                os.execvp(argv[0], argv)
            os.chdir(here)
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
        "bind": [],
        "link": [],
        "cover": [],
        "rlimit": [],
        "own": [],
        "work": "",
        "network": "",
        "nest": "1",
        "userns": "",
        "user": "",
        "report_fd": "",
        "abort_log": "",
        "home": "/tmp",
        "copy_back": "success",
    }
    for i, arg in enumerate(args):
        if arg == "--":
            inner, _, inner_gid = (cfg["userns"] or f"{cfg['uid']}:{cfg['gid']}").partition(":")
            cfg["inner_uid"], cfg["inner_gid"] = int(inner), int(inner_gid)
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
