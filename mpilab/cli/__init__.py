"""The ``mpilab`` command: a thin layer over functions that notebooks call too.

:data:`SUBCOMMANDS` names each subcommand, the module that implements it and a one-line summary.
A module defines ``configure(parser)``, which adds its arguments and sets ``func`` on the parser
(``func(args) -> exit code``). Only the module of the subcommand being run is imported, so
``mpilab --help`` answers at once and ``mpilab sweep`` loads only what a sweep needs. A new
subcommand is a new module plus one line here.
"""

import argparse
import importlib
import os
import sys

from mpilab import __version__
from mpilab.core.errors import MpilabError

#: name -> (module, summary shown by ``mpilab --help``)
SUBCOMMANDS = {
    "list": ("mpilab.cli.algorithms", "list the registered algorithms"),
    "sweep": ("mpilab.cli.sweep", "benchmark algorithms x nprocs x sizes into a results CSV"),
    "plot": ("mpilab.cli.plot", "plot a results CSV into PNG files"),
    "model": ("mpilab.cli.model", "compare the alpha-beta costs with a results CSV"),
    "costs": ("mpilab.cli.costs", "α-β cost of each algorithm; check an expression of yours"),
    "doctor": ("mpilab.cli.doctor", "report which MPI flavours and tools are installed"),
    "demo": ("mpilab.cli.demo", "the seed-002 allgather experiment, real and simulated"),
    "slurm": ("mpilab.cli.slurm", "render, submit and collect SLURM jobs for a cluster profile"),
    "import-osu": ("mpilab.cli.osu", "parse OSU osu_bcast/osu_reduce/osu_allgather/osu_latency output"),
    "libalgs": ("mpilab.cli.libalgs", "list library collective algorithms and how to force them"),
    "image": ("mpilab.cli.image", "check that the host's Open MPI can launch an Apptainer image's"),
    "pingpong": (
        "mpilab.cli.pingpong",
        "two-rank ping-pong (half round trip) per mapping into a results CSV",
    ),
    "calibrate": (
        "mpilab.cli.calibrate",
        "write a SimGrid platform from your ping-pong and at most one collective curve",
    ),
    "validate": ("mpilab.cli.validate", "the shipped simulated clusters against the seeds' own measurements"),
    "timeline": ("mpilab.cli.timeline", "predicted vs measured timing diagram of one run of an algorithm"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"mpilab: {message}\n")


def build_parser(command=None):
    """The top-level parser.

    Parameters
    ----------
    command : str, optional
        The subcommand whose module is imported and whose arguments are added; the others only
        get their summary. Default: every subcommand is configured.
    """
    parser = _Parser(
        prog="mpilab",
        description="mpilab: build, measure, model and grade MPI "
        "collective algorithms, on real MPI (Open MPI, MPICH) and on simulated "
        "clusters (SimGrid SMPI). 'mpilab COMMAND --help' tells more of each.",
    )
    parser.add_argument("--version", action="version", version=f"mpilab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, summary) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=summary)
        if command is None or command == name:
            importlib.import_module(module).configure(p)
    return parser


def main(argv=None):
    """Entry point of the ``mpilab`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    parser = build_parser(command if command in SUBCOMMANDS else "")
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
        print("mpilab: interrupted; rows of finished launches are kept, rerun to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``mpilab list | head``): stop quietly, and keep Python's exit-time
        # flush of stdout from raising again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
