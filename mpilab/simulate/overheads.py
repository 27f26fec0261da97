"""Per-class per-message overheads in SMPI: SimGrid's cost callbacks, loaded with the platform.

SMPI's ``smpi/os``, ``smpi/or`` and ``smpi/ois`` give every message of a size the same CPU
overheads. The kit's THIN charges each class its own (a message between the two sockets of a
node costs its two CPUs more than one between two cores of a socket:
:mod:`mpilab.simulate.clusters`), which SimGrid 3.32 can do through its cost callbacks
(``smpi_register_op_cost_callback``, given the message's size and both hosts), registered by a
platform that is a shared library (``smpirun -platform lib.so``; SimGrid's example
``examples/smpi/comm_dynamic_costs``). The kit's loader, ``mpilab/data/platforms/
class_overheads.cpp``, loads the XML file next to it and charges what its zone property
``mpilab/overheads`` says (:func:`mpilab.simulate.platform_xml.class_props` writes it).

:func:`smpirun_platform` is what the SMPI launcher passes to ``-platform``: the XML file itself
when it has no per-class overheads, else ``<name>.xml.so``, a link to the loader (compiled once
per machine into the platform cache, about 20 s; :func:`loader_library`) beside a link to the
file. The links go next to the file when it names other files by relative paths (the profiles of
:mod:`mpilab.simulate.traffic`), else into the platform cache (the shipped files may be
read-only).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from mpilab.core import paths, process
from mpilab.core.errors import LaunchError, ToolMissing
from mpilab.simulate.platform_xml import OVERHEADS_PROP

SOURCE = paths.DATA_DIR / "platforms" / "class_overheads.cpp"
#: The C++ compiler and its flags (SimGrid 3.32's headers need C++17).
CXX = "g++"
CXXFLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC")
_RELATIVE_FILE = re.compile(r'_file="(?!/)[^"]+"')


def _cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mpilab" / "platforms"


def _head(path, size=1 << 16):
    with open(path, "rb") as f:
        return f.read(size).decode("utf-8", "replace")


def has_class_overheads(xml):
    """True when a platform file charges per-class overheads (its zone property, near the top)."""
    return f'id="{OVERHEADS_PROP}"' in _head(xml)


def _simgrid_version():
    header = Path("/usr/include/simgrid/version.h")
    return header.read_text() if header.is_file() else ""


def loader_library():
    """The compiled loader (compiled on first use into the platform cache).

    Raises
    ------
    ToolMissing
        No C++ compiler or SimGrid's headers (``libsimgrid-dev``).
    LaunchError
        The compiler failed (its last lines are in the message).
    """
    key = hashlib.sha256(SOURCE.read_bytes() + _simgrid_version().encode()).hexdigest()[:12]
    lib = _cache_dir() / f"class-overheads-{key}.so"
    if lib.is_file():
        return lib
    if shutil.which(CXX) is None:
        raise ToolMissing(
            f"{CXX} not found: the kit's THIN-like platforms charge each class of message its own "
            "overheads through a small SimGrid loader compiled on first use "
            f"({SOURCE.name}); install build-essential and libsimgrid-dev"
        )
    lib.parent.mkdir(parents=True, exist_ok=True)
    tmp = lib.with_name(f".{lib.name}.{os.getpid()}.tmp")
    argv = [CXX, *CXXFLAGS, str(SOURCE), "-o", str(tmp), "-lsimgrid"]
    res = process.run(argv, timeout=600)
    if res.returncode != 0 or res.timed_out:
        tmp.unlink(missing_ok=True)
        raise LaunchError(f"compiling the platform loader failed: {' '.join(argv)}\n{res.tail()}")
    tmp.replace(lib)
    return lib


def _names_relative_files(xml):
    """True when the file's links name files by relative paths (read up to its first route)."""
    with open(xml, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "<route " in line:
                return False
            if _RELATIVE_FILE.search(line):
                return True
    return False


def _link(target, link):
    """Make ``link`` a symbolic link to ``target`` (replacing another link atomically)."""
    if link.is_symlink() and os.readlink(link) == str(target):
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    tmp.replace(link)


def smpirun_platform(xml):
    """What ``smpirun -platform`` gets for a platform file: the file, or its loader (see the
    module's docstring). Returns an absolute path."""
    xml = Path(xml).resolve()
    if not has_class_overheads(xml):
        return xml
    lib = loader_library()
    if _names_relative_files(xml):
        where = xml.parent
    else:
        digest = hashlib.sha256(str(xml).encode()).hexdigest()[:16]
        where = _cache_dir() / "loaders" / digest
        where.mkdir(parents=True, exist_ok=True)
        _link(xml, where / xml.name)
    link = where / f"{xml.name}.so"
    _link(lib, link)
    return link
