"""``mpilab image host-check IMAGE|VERSION``: can this host's Open MPI launch the image's?

The hybrid model (``mpirun -n N apptainer exec IMAGE prog``, ``srun --mpi=pmix apptainer exec
...``) needs the same Open MPI major version on the host and in the image. Give the image (its
label ``org.mpilab.mpi.version`` is read with ``apptainer inspect``) or that version itself;
the command warns, naming both versions, and exits 1 when the major versions differ.
Images are built with ``make image`` (scripts/build-image.sh), not by this command.
"""

import argparse
import os
import sys
import warnings

from mpilab import cli
from mpilab.core.errors import UsageError
from mpilab.measure import launch


def configure(p):
    """Add the arguments of ``mpilab image`` to its parser ``p``."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = p.add_subparsers(dest="image_cmd", required=True)
    h = sub.add_parser("host-check", help="warn if the host Open MPI's major version differs from an image's")
    h.add_argument(
        "image_version",
        metavar="IMAGE|VERSION",
        help="an image (build/images/mpilab-openmpi.sif) or its org.mpilab.mpi.version, e.g. 4.1.4",
    )
    h.add_argument("--mpirun", default="mpirun", help="host launcher to ask (default: mpirun)")
    h.set_defaults(func=_host_check)
    return p


def _image_version(arg):
    """The Open MPI version an image's label names, or ``arg`` itself when it is no file."""
    if not os.path.exists(arg):
        return arg
    labels = launch.get_launcher("apptainer", image=arg, check_mpi=False).image_labels()
    if labels.get("org.mpilab.flavour", "openmpi") != "openmpi" or "org.mpilab.mpi.version" not in labels:
        raise UsageError(
            f"{arg}: no Open MPI version in its labels (org.mpilab.flavour "
            f"{labels.get('org.mpilab.flavour', '?')!r}); host-check compares Open MPI "
            "images, and needs apptainer to read them"
        )
    return labels["org.mpilab.mpi.version"]


def _host_check(args):
    version = _image_version(args.image_version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # printed below as the CLI's own warning
        msg = launch.warn_if_mismatch(version, args.mpirun)
    if msg:
        print(f"mpilab: warning: {msg}", file=sys.stderr)
        return 1
    print(
        f"host and image Open MPI major versions agree (image {version}), or the host has no Open MPI mpirun"
    )
    return 0


if __name__ == "__main__":  # python -m mpilab.cli.image ARGS
    sys.exit(cli.main(["image", *sys.argv[1:]]))
