"""The ``mpilab`` command: a thin layer over functions that notebooks call too.

Each module in :data:`SUBCOMMANDS` defines ``add_parser(subparsers)`` and sets ``func`` on its
parser (``func(args) -> exit code``). A new subcommand is a new module plus one line here.
"""

import argparse
import importlib
import sys

from . import __version__
from .errors import MpilabError

SUBCOMMANDS = [
    "mpilab.cli_list",
    "mpilab.cli_sweep",
    "mpilab.cli_plot",
    "mpilab.cli_model",
    "mpilab.cli_costs",
    "mpilab.doctor",
    "mpilab.demo",
    "mpilab.cli_slurm",
    "mpilab.cli_osu",
    "mpilab.cli_libalgs",
    "mpilab.cli_image",
    "mpilab.cli_pingpong",
    "mpilab.cli_calibrate",
    "mpilab.cli_timeline",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"mpilab: {message}\n")


def build_parser():
    """The top-level parser with every subcommand of :data:`SUBCOMMANDS`."""
    parser = _Parser(prog="mpilab", description="mpilab: build, measure, model and grade MPI "
                     "collective algorithms, on real MPI (Open MPI, MPICH) and on simulated "
                     "clusters (SimGrid SMPI). 'mpilab COMMAND --help' tells more of each.")
    parser.add_argument("--version", action="version", version=f"mpilab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv=None):
    """Entry point of the ``mpilab`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MpilabError as e:
        print(f"mpilab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mpilab: interrupted; rows of finished launches are kept, rerun to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
