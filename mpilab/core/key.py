"""The answer key: the instructor's side of the kit (``solutions/mpilab_key``), when installed.

The key holds what answers graded questions: the costs of the algorithms the labs ask for, the
schedules of the algorithms students write, the rubrics with their hidden cases. An instructor's
checkout installs it (``scripts/setup.sh`` runs ``pip install -e solutions``); the student's
side of the kit (``make student-release``, the student image) does not have it, and the kit
then works without it.
"""

import importlib

#: The key's package name.
PACKAGE = "mpilab_key"


def module(name):
    """``mpilab_key.<name>`` when the answer key is installed here, else None."""
    try:
        return importlib.import_module(f"{PACKAGE}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name in (PACKAGE, f"{PACKAGE}.{name}"):
            return None
        raise


def installed():
    """Whether the answer key is installed here."""
    return module("costs") is not None
