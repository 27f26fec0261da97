"""``mpilab calibrate``: a SimGrid platform whose ping-pong matches your own cluster's."""

import sys
import warnings

from mpilab.simulate import calibration
from mpilab.studies.calibration import check_calibration
from mpilab.core.errors import UsageError


def _table(items):
    out = {}
    for item in items:
        m, sep, rest = item.partition("=")
        parts = rest.split(",")
        if not sep or len(parts) != 2:
            raise UsageError(f"bad --table entry {item!r}; valid: MAPPING=INTERCEPT_US,SLOPE_US_PER_BYTE "
                             f"(e.g. core=1.17,0.0001)")
        try:
            out[m.strip()] = (float(parts[0]), float(parts[1]))
        except ValueError:
            raise UsageError(f"bad numbers in --table entry {item!r}; valid: e.g. core=1.17,0.0001") from None
    return out


def _cmd(args):
    if bool(args.results) == bool(args.table):
        raise UsageError("give either a results CSV with ping-pong rows or --table MAPPING=INTERCEPT,SLOPE "
                         "(one per mapping), not both and not neither")
    measured = args.results or _table(args.table)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = calibration.calibrate(measured, base=args.base, path=args.output, segments=args.segments)
    for w in caught:
        print(f"mpilab: warning: {w.message}", file=sys.stderr)
    print(f"wrote {path}")
    if args.check:
        table = check_calibration(path, measured, segments=args.segments)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"use it with: mpilab sweep --flavour smpi --platform {path} ...")
    return 0


def configure(p):
    """Add the arguments of ``mpilab calibrate`` to its parser ``p``."""
    p.description = ("Fit your ping-pong results (rows of 'mpilab pingpong', or OSU osu_latency output "
        "imported with 'mpilab import-osu') per mapping, or take the intercept and slope "
        "of each mapping with --table, and write a platform of the base's shape whose "
        "simulated ping-pong has that first segment. --check simulates it and compares.")
    p.add_argument("results", nargs="?", help="results CSV with ping-pong rows")
    p.add_argument("--table", nargs="+", metavar="MAPPING=INTERCEPT,SLOPE",
                   help="first-segment intercept (us) and slope (us/byte) per mapping, e.g. "
                        "core=1.17,0.0001 socket=4.36,0.0001 node=1.61,0.0002")
    p.add_argument("--base", default="orfeo-thin",
                   help="shipped platform whose shape (nodes, sockets, cores) is kept (default orfeo-thin)")
    p.add_argument("-o", "--output", required=True, help="platform XML to write")
    p.add_argument("--segments", type=int, default=2, help="segments of the fit (default 2)")
    p.add_argument("--check", action="store_true", help="simulate the ping-pong on it and compare")
    p.set_defaults(func=_cmd)
    return p
