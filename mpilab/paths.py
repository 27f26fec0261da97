"""Where the kit's files are: the repository root, the C build tree, shipped data."""

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"

FLAVOURS = ("openmpi", "mpich", "smpi")


def repo_root():
    """The kit's checkout (``$MPILAB_ROOT`` if set, else the parent of the package)."""
    env = os.environ.get("MPILAB_ROOT")
    return Path(env).resolve() if env else PACKAGE_DIR.parent


def c_reference_dir():
    return repo_root() / "c_reference"


def build_dir(flavour):
    """``c_reference/build/<flavour>/``: the contract other tools link against."""
    from .errors import one_of

    if flavour not in FLAVOURS:
        raise one_of("flavour", flavour, FLAVOURS)
    return c_reference_dir() / "build" / flavour


def collbench_path(flavour):
    return build_dir(flavour) / "collbench"
