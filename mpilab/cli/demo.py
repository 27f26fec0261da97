"""``mpilab demo``: the allgather experiment of seed 002, real and simulated (what ``make demo`` runs)."""

from mpilab.studies.demo import format_summary, run_demo


def _cmd(args):
    out = run_demo(args.output, quick=args.quick, progress=not args.quiet)
    print(format_summary(out))
    return 0


def configure(p):
    """Add the arguments of ``mpilab demo`` to its parser ``p``."""
    p.description = __doc__
    p.add_argument("-o", "--output", default="results/demo", help="output directory (default results/demo)")
    p.add_argument("--quick", action="store_true", help="a few sizes and process counts (tests)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd)
    return p
