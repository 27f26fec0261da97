"""What a confined run may see: the allow-list its new root is made of (:mod:`mpilab.grade.sandbox`
describes it; :mod:`mpilab.grade.sandbox_init` builds the root), and the paths a caller names
for the runs that need more (:func:`kit_paths`).
"""

import functools
import importlib.util
import os
import shutil
import site
import sys
import warnings

from mpilab.core import paths
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import COMPILERS, FLAVOURS, MPIRUN
from mpilab.simulate import platforms

#: The course root being graded; ``scripts/grade.sh`` exports it. No confined run sees it, but a
#: grading kernel its own directory of it.
COURSE_ENV = "MPILAB_COURSE_ROOT"
#: More paths every confined run may read (colon-separated): an MPI or compiler installation
#: the kit does not find from :data:`TOOLS`.
READ_ENV = "MPILAB_SANDBOX_READ"
#: The system's directories every confined run sees, read-only (those that exist).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files and directories of /etc every confined run sees (those that exist): the dynamic linker,
#: the alternatives (``cc``, ``mpicc``), Open MPI's and MPICH's configuration, time zone, names
#: of protocols and services, the system Python's own configuration, fonts.
ETC_FROM_HOST = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "openmpi",
    "mpich",
    "libibverbs.d",
    "localtime",
    "timezone",
    "protocols",
    "services",
    "host.conf",
    "gai.conf",
    "os-release",
    "mime.types",
    "fonts",
    "python3",
    f"python3.{sys.version_info[1]}",
)
#: With the host's network (``network=True``), how names resolve there too.
ETC_NETWORK = ("hosts", "resolv.conf")
#: The tools the kit runs confined: their installation (the directory above ``bin/``) is on the
#: allow-list when it is not one of :data:`SYSTEM_DIRS`.
TOOLS = (*COMPILERS.values(), *MPIRUN.values(), "cc", "gcc", "readelf", "objcopy", "sh", "unshare")


def hidden_from_programs():
    """What no confined run sees unless it names it (``read``): the kit's checkout (its
    ``.git``, ``tests/``, ``dist/``, ``solutions/``, ``grader/``, ``c_reference/build/``) and
    the course root being graded (``$MPILAB_COURSE_ROOT``). They are not on the allow-list; this
    is what gets covered should one lie below an allowed directory."""
    root = paths.repo_root()
    dirs = [root, root / "solutions", root / "grader", os.environ.get(COURSE_ENV, "")]
    return [os.path.realpath(d) for d in dirs if d and os.path.isdir(d)]


def system_paths():
    """The system part of the allow-list (see the module's description), without /etc."""
    found = [d for d in SYSTEM_DIRS if os.path.lexists(d)] + _tool_prefixes(os.environ.get("PATH", ""))
    found += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isabs(p)]
    named = [p for p in os.environ.get(READ_ENV, "").split(":") if p]
    for p in named:
        if not os.path.isabs(p) or not os.path.exists(p):
            raise UsageError(f"{READ_ENV} names {p!r}: give existing absolute paths, separated by ':'")
    refuse_holding_hidden(named)
    return [p for p in found + named if os.path.exists(p)]


@functools.lru_cache(maxsize=8)
def _tool_prefixes(search_path):
    """The installations of :data:`TOOLS` found on ``search_path`` outside :data:`SYSTEM_DIRS`."""
    found = []
    for tool in TOOLS:
        exe = shutil.which(tool, path=search_path)
        if exe:
            prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
            if prefix != "/" and not any(under(prefix, d) for d in map(os.path.realpath, SYSTEM_DIRS)):
                found.append(prefix)
    return found


def etc_paths(network=False):
    """The files of /etc a confined run sees from the host (:data:`ETC_FROM_HOST`)."""
    names = ETC_FROM_HOST + (ETC_NETWORK if network else ())
    return [f"/etc/{n}" for n in names if os.path.lexists(f"/etc/{n}")]


def python_paths():
    """What this Python needs to start and import its packages: the interpreter's installation
    (e.g. ``/usr``, or a pyenv under ``/root``), the virtual environment (``.venv``), and the
    directories the ``.pth`` files of its site-packages add (a site-wide package tree), but
    those in the kit's checkout or the course.

    An editable install (``pip install -e``, as ``make setup`` does) leaves only a finder in
    the ``.venv`` that points into the repository: the packages themselves are not here (the
    kit: :func:`kit_paths`)."""
    found = {
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    hidden = hidden_from_programs()
    for d in _pth_dirs():
        if not any(under(d, h) for h in hidden):
            found.add(d)
    return sorted(os.path.realpath(p) for p in found)


@functools.cache
def _pth_dirs():
    """The directories named by the ``.pth`` files of this Python's site-packages."""
    out = set()
    for site_dir in site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else []):
        try:
            names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    d = os.path.realpath(os.path.join(site_dir, line))
                    if os.path.isdir(d):
                        out.add(d)
    return out


def platform_paths():
    """The SimGrid platforms an SMPI run may name: the shipped ones and those the kit generated
    (in the grader's cache, e.g. under /root when grading as root)."""
    return [str(paths.DATA_DIR / "platforms"), str(platforms._cache_dir())]


def key_paths():
    """Where the answer key's package (``mpilab_key``) is, found without importing it; [] when
    it is not installed (the student's side)."""
    try:
        spec = importlib.util.find_spec("mpilab_key")
    except (ImportError, ValueError):
        return []
    return sorted({os.path.realpath(p) for p in (spec.submodule_search_locations or [])} if spec else set())


def c_paths(key=False):
    """The kit's C a process of the kit may need (``collbench``, ``pingpong``, ``timeline``, the
    reference objects, ``c_reference/include``, the sources ``allgather/`` and ``trace/``), as
    the student's side has it: where ``c_reference/build`` holds the key's objects (an
    instructor's checkout), its ``build/student`` (built without the key by ``make build``) is
    seen as ``c_reference/build``, and nothing when that was not built; ``key``: the whole
    ``c_reference/build``."""
    ref = paths.c_reference_dir()
    # the headers, and the kit's own sources a grading build copies in (the reference allgathers
    # timed next to a student's, the tracer): the student's side of the kit, shipped as they are
    out = [str(ref / d) for d in ("include", "allgather", "trace") if (ref / d).is_dir()]
    build, student = ref / "build", ref / "build" / "student"
    if key or not any((build / f / "obj" / "key").exists() for f in FLAVOURS):
        out += [str(build)] if build.is_dir() else []
    elif student.is_dir():
        out.append((str(student), str(build)))
    else:
        warnings.warn(
            f"{build} holds the answer key's objects and {student} is missing: grading kernels "
            "see no C build (run make build)"
        )
    return out


def kit_paths(key=False):
    """The paths a process of the kit needs, to name as ``read``: the Python environment, the
    ``mpilab`` package with its data (an editable install resolves it into the repository: only
    the package directory, nothing else of the checkout), the platforms, the kit's C
    (:func:`c_paths`), and (``key``, the judge only) the answer key's package and C build."""
    names = {*python_paths(), str(paths.PACKAGE_DIR), *platform_paths(), *(key_paths() if key else [])}
    return sorted(names) + c_paths(key)


def under(path, top):
    """Whether ``path`` is ``top`` or below it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def placements(path):
    """How ``path`` appears in a new root as it does on the host: the symbolic links on the way
    to it (``[(link, its target)]``, made as they are) and its real path (bound there)."""
    links, path = [], os.path.abspath(path)
    for _ in range(40):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if os.path.islink(prefix):
                target = os.readlink(prefix)
                links.append((prefix, target))
                path = os.path.normpath(os.path.join(os.path.dirname(prefix), target, *parts[i:]))
                break
        else:
            return links, path
    raise UsageError(f"too many symbolic links on the way to {path}")


def binds(items):
    """``[(source, target, writable)]`` of the allowed paths ``items`` (``(source, target,
    writable)``), with the links on the way to each target; a path under another read-only one
    is left out (it is there already), a writable one never, and one that holds a path of
    :data:`PRIVATE` too (``/``, the directory a grader's script was started from: ``/tmp``)."""
    links, found = [], []
    for source, target, rw in items:
        if not os.path.lexists(source) or any(under(d, os.path.realpath(target)) for d in PRIVATE):
            continue
        way, real_target = placements(target)
        links += way
        real_source = os.path.realpath(source)
        found.append((real_source, real_target if source == target else os.path.abspath(target), rw))
    found.sort(key=lambda b: (b[1].count("/"), b[1]))
    kept = []
    for b in found:
        if not b[2] and any(under(b[1], k[1]) and k[0] + b[1][len(k[1]) :] == b[0] for k in kept):
            continue
        kept = [k for k in kept if k[1] != b[1]] + [b]
    return sorted(set(links)), kept


#: What a confined run has of its own (its scratch space, devices, processes, /etc): no allowed
#: path may hold one of them.
PRIVATE = ("/tmp", "/var/tmp", "/dev", "/proc", "/sys", "/etc")


def refuse_holding_hidden(paths_given):
    """UsageError for a path named to be read that holds what no run may see (the kit's
    checkout, the course) or what a run has of its own (:data:`PRIVATE`)."""
    for p in paths_given:
        real = os.path.realpath(p)
        for hidden in [str(paths.repo_root().resolve()), os.environ.get(COURSE_ENV, "")]:
            hidden = os.path.realpath(hidden) if hidden else ""
            if hidden and under(hidden, real):
                raise UsageError(
                    f"a confined run may not read {p}: it holds {hidden} (the kit's checkout or "
                    "the course); name the paths it needs inside it (e.g. sandbox.kit_paths())"
                )
        own = [d for d in PRIVATE if under(d, real)]
        if own:
            raise UsageError(
                f"a confined run may not read {p}: it holds {own[0]}, which every run has of its "
                "own; name the paths it needs inside it"
            )
