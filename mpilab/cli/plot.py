"""``mpilab plot RESULTS -o DIR``: latency-vs-size and latency-vs-P PNGs from a results CSV."""

from pathlib import Path

from mpilab.core import results
from mpilab.core.errors import UsageError
from mpilab.studies import plots


def _cmd(args):
    if not Path(args.results).exists():
        raise UsageError(
            f"results file {args.results!r} does not exist; "
            "valid: a CSV written by `mpilab sweep` or `mpilab demo`"
        )
    df = results.read_results(args.results)
    if df.empty:
        raise UsageError(f"results file {args.results!r} has no rows")
    for p in plots.plot_all(df, args.output):
        print(p)
    return 0


def configure(p):
    """Add the arguments of ``mpilab plot`` to its parser ``p``."""
    p.description = __doc__
    p.add_argument("results", help="the results CSV")
    p.add_argument("-o", "--output", default="plots", help="directory for the PNGs (default: plots)")
    p.set_defaults(func=_cmd)
    return p
