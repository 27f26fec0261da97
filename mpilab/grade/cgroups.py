"""The cgroups of confined runs: where this process may make one per run (:func:`parents`), and
:class:`Cgroups`, which caps one run's memory and processes, reads what it used and removes the
cgroup at the end. :mod:`mpilab.grade.sandbox` uses them where the machine has writable ones.
"""

import functools
import os
import signal
import time


def read_text(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def counter(text, key):
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


#: Why the cgroups that :func:`find_parents` found failed when :func:`isolation` tried them.
TROUBLE = []


def parents():
    """:func:`find_parents`, or none when they failed in :func:`isolation`'s trial run."""
    return {} if TROUBLE else find_parents()


@functools.cache
def find_parents():
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
                    mounts.setdefault(ctl, (fields[4], fields[3]))  # (mount point, its root)
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for ctl in ctls.split(",") if ctls else ["v2"]:
                own[ctl] = path

    def directory(ctl):
        mnt, root = mounts[ctl]
        rel = own[ctl][len(root) :] if root != "/" and own[ctl].startswith(root) else own[ctl]
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
        enabled = read_text(os.path.join(d, "cgroup.subtree_control")).split()
        available = read_text(os.path.join(d, "cgroup.controllers")).split()
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


def note(per_run_nproc=False):
    """What the runs here go without, for lack of cgroups ("" when both are there).

    ``per_run_nproc``: each run has a user namespace of its own, where RLIMIT_NPROC counts its
    processes alone (not root); else that limit counts every run of the sandbox user together.
    """
    found = parents()
    missing = [c for c in ("memory", "pids") if c not in found]
    what = {
        "memory": "no cap on a run's total memory (only per process)",
        "pids": "a run's processes capped by RLIMIT_NPROC in its own user namespace"
        if per_run_nproc
        else "no cap on a run's processes (only the sandbox user's, shared by all runs)",
    }
    if TROUBLE and missing:
        return f"cgroups failed here ({TROUBLE[0]}): " + "; ".join(what[c] for c in missing)
    return "; ".join(f"no writable {c} cgroup here: {what[c]}" for c in missing)


class Cgroups:
    """The cgroup(s) of one run: made with its limits, read, emptied and removed after it."""

    _made = 0

    def __init__(self, limits):
        Cgroups._made += 1
        name = f"mpilab-{os.getpid()}-{Cgroups._made}-{os.urandom(3).hex()}"
        self.dirs, self.v2 = {}, {}
        try:
            for parent in sorted(set(parents().values())):  # v2: one directory for both
                remove_stale(parent)
                os.mkdir(os.path.join(parent, name))
                for ctl, p in parents().items():
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
            oom = counter(
                read_text(os.path.join(d, "memory.events" if self.v2["memory"] else "memory.oom_control")),
                "oom_kill",
            )
        if "pids" in self.dirs:
            pids = counter(read_text(os.path.join(self.dirs["pids"], "pids.events")), "max")
        return oom, pids

    def new_events(self):
        """:meth:`events` since the cgroup was made."""
        now = self.events()
        return now[0] - self.start[0], now[1] - self.start[1]

    def remove(self):
        """Kill whatever is still in the cgroup(s), then remove them."""
        for d in sorted(set(self.dirs.values())):
            for _ in range(50):
                pids = [int(p) for p in read_text(os.path.join(d, "cgroup.procs")).split()]
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


def remove_stale(parent):
    """Remove the empty cgroups that graders killed before cleaning up left in ``parent`` (the
    one that made a cgroup cannot be told from its name: PIDs repeat across PID namespaces)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("mpilab-")]
    except OSError:
        return
    for name in names:
        d = os.path.join(parent, name)
        try:
            if (
                time.time() - os.stat(d).st_mtime > STALE_S
                and not read_text(os.path.join(d, "cgroup.procs")).strip()
            ):
                os.rmdir(d)  # refused while anything is in it
        except OSError:
            pass
