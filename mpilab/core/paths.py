"""Where the kit's files are: the repository root, the C build tree, shipped data."""

import os
from pathlib import Path

from mpilab.core.errors import one_of
from mpilab.core.vocabulary import FLAVOURS

PACKAGE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = PACKAGE_DIR / "data"


def repo_root():
    """The kit's checkout (``$MPILAB_ROOT`` if set, else the parent of the package)."""
    env = os.environ.get("MPILAB_ROOT")
    return Path(env).resolve() if env else PACKAGE_DIR.parent


def c_reference_dir():
    return repo_root() / "c_reference"


def build_dir(flavour):
    """``c_reference/build/<flavour>/``: the contract other tools link against."""
    if flavour not in FLAVOURS:
        raise one_of("flavour", flavour, FLAVOURS)
    return c_reference_dir() / "build" / flavour


def collbench_path(flavour):
    return build_dir(flavour) / "collbench"
