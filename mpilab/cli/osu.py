"""``mpilab import-osu``: OSU micro-benchmarks output into the results table."""

import sys

from mpilab import cli
from mpilab.core.vocabulary import FLAVOURS, MAPPINGS
from mpilab.measure.osu import import_osu


def _run(args):
    n = import_osu(
        args.files,
        args.output,
        nprocs=args.nprocs,
        algorithm=args.algorithm,
        mapping=args.mapping,
        flavour=args.flavour or "",
        platform=args.platform or "",
    )
    print(f"appended {n} rows from {len(args.files)} file(s) to {args.output}")
    return 0


def configure(p):
    """Add the arguments of ``mpilab import-osu`` to its parser ``p``."""
    p.description = (
        "Parse OSU micro-benchmarks output files into the results table. Parameters "
        "not given are read from file names like bcast_np24_chain_core.txt (npN: processes; "
        "core/socket/node: mapping; a known algorithm of the collective; other "
        "words are ignored)."
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="RESULTS.csv")
    p.add_argument(
        "--nprocs", type=int, help="process count of every FILE (needed unless the names carry npN)"
    )
    p.add_argument(
        "--algorithm",
        help="library algorithm OSU ran, as in `mpilab libalgs` (default: from the name, else default)",
    )
    p.add_argument("--mapping", choices=MAPPINGS)
    p.add_argument("--flavour", choices=FLAVOURS)
    p.add_argument("--platform")
    p.set_defaults(func=_run)
    return p


if __name__ == "__main__":  # python -m mpilab.cli.osu ARGS, e.g. inside jobs
    sys.exit(cli.main(["import-osu", *sys.argv[1:]]))
