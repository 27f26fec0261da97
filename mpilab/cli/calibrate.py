"""``mpilab calibrate``: a SimGrid platform from your ping-pong and at most one collective curve."""

import sys
import warnings

from mpilab.core import results
from mpilab.core.errors import UsageError
from mpilab.studies import calibration, reference


def _table(items):
    out = {}
    for item in items:
        m, sep, rest = item.partition("=")
        parts = rest.split(",")
        if not sep or len(parts) != 2:
            raise UsageError(
                f"bad --table entry {item!r}; valid: MAPPING=INTERCEPT_US,SLOPE_US_PER_BYTE "
                f"(e.g. core=1.17,0.0001)"
            )
        try:
            out[m.strip()] = (float(parts[0]), float(parts[1]))
        except ValueError:
            raise UsageError(f"bad numbers in --table entry {item!r}; valid: e.g. core=1.17,0.0001") from None
    return out


SEED_CURVE = "seed000:"


def _curve(args):
    if not args.curve:
        return None
    if args.curve.startswith(SEED_CURVE):
        coll, _, alg = args.curve[len(SEED_CURVE) :].partition(":")
        if coll not in ("bcast", "reduce") or not alg:
            raise UsageError(
                f"bad --curve {args.curve!r}; valid: seed000:bcast:basic_linear, "
                f"seed000:reduce:chain, ... (seed 000's tables) or a results CSV"
            )
        reference.predict(coll, alg, 8)  # names a curve of the seed, or says which do
        return calibration.seed000_curve(coll, alg)
    for need in ("collective", "algorithm", "bytes"):
        if getattr(args, f"curve_{need}") is None:
            raise UsageError(
                f"--curve {args.curve}: give --curve-{need} too (which rows of the CSV are the curve)"
            )
    df = results.read_results(args.curve)
    return calibration.curve_from_results(
        df, args.curve_collective, args.curve_algorithm, args.curve_bytes, args.metric
    )


def _cmd(args):
    given = [x for x in (args.results, args.table, args.seed) if x]
    if len(given) != 1:
        raise UsageError(
            "give one ping-pong: a results CSV with ping-pong rows, --table "
            "MAPPING=INTERCEPT,SLOPE (one per mapping), or --seed 000 (the ORFEO "
            "report's table)"
        )
    if args.seed and args.seed != "000":
        raise UsageError(f"bad --seed {args.seed!r}; valid: 000 (the only seed with a ping-pong table)")
    measured = reference.orfeo_report("pingpong") if args.seed else args.results or _table(args.table)
    curve = _curve(args)
    echo = (lambda m: print(m, file=sys.stderr)) if curve else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path, rep = calibration.calibrate(
            measured,
            curve,
            base=args.base,
            path=args.output,
            mapping=args.mapping,
            metric=args.metric,
            beta=args.beta,
            segments=args.segments,
            echo=echo,
            monotone=not (args.as_measured or args.seed),
        )
    for w in caught:
        print(f"mpilab: warning: {w.message}", file=sys.stderr)
    fmt = lambda v: f"{v:.6g}"  # noqa: E731
    print("ping-pong fit (one-way time of the smallest message and time per byte, per class):")
    print(rep["pingpong"].to_string(index=False, float_format=fmt))
    fit = rep["curve_fit"]
    what = (
        "share of each intra-node one-way time charged as CPU overhead"
        if rep["fitted"] == "cpu_share"
        else "overhead o_send = o_recv = o_isend (us)"
    )
    if fit is not None:
        bound = " (at its bound: the curve wants more than the ping-pong allows)" if fit["at_bound"] else ""
        print(f"{what} = {fit['value']:.6g}{bound}; the curve ({args.metric}):")
        print(fit["table"].to_string(index=False, float_format=fmt))
    else:
        print(f"overheads kept from {args.base} ({what}); the core class's: {rep['overhead']:.6g} us")
    print(f"wrote {path}")
    if args.check:
        table = calibration.check_calibration(path, measured, segments=args.segments)
        print(table.to_string(index=False, float_format=fmt))
    print(f"use it with: mpilab sweep --flavour smpi --platform {path} ...")
    return 0


def configure(p):
    """Add the arguments of ``mpilab calibrate`` to its parser ``p``."""
    p.description = (
        "Fit a ping-pong per mapping (rows of 'mpilab pingpong', OSU osu_latency output imported "
        "with 'mpilab import-osu', --table, or --seed 000: the ORFEO report's table) into each "
        "distance's one-way time and time per byte (monotone, core <= socket <= node, unless "
        "--as-measured; --seed 000 keeps the report's table as printed), and, with --curve, fit "
        "SMPI's per-message overheads to one collective curve by simulating it (on THIN's base: the "
        "share of each intra-node one-way time charged as CPU overhead). Writes a platform of the "
        "base's shape; every parameter and its source is in the file."
    )
    p.add_argument("results", nargs="?", help="results CSV with ping-pong rows")
    p.add_argument(
        "--table",
        nargs="+",
        metavar="MAPPING=INTERCEPT,SLOPE",
        help="first-segment intercept (us) and slope (us/byte) per mapping, e.g. "
        "core=1.17,0.0001 socket=4.36,0.0001 node=1.61,0.0002",
    )
    p.add_argument("--seed", metavar="000", help="the ping-pong table of seed 000 (ORFEO THIN)")
    p.add_argument(
        "--curve",
        metavar="CSV|seed000:COLL:ALG",
        help="one collective curve to fit the overheads to: a results CSV (with "
        "--curve-collective, --curve-algorithm, --curve-bytes) or a curve of seed "
        "000's tables, e.g. seed000:bcast:basic_linear",
    )
    p.add_argument("--curve-collective", help="collective of the curve's rows")
    p.add_argument("--curve-algorithm", help="algorithm of the curve's rows")
    p.add_argument("--curve-bytes", type=int, help="message size of the curve's rows")
    p.add_argument(
        "--mapping",
        default="core",
        choices=("core", "socket", "node", calibration.SEED000_MAPPING),
        help="how the curve's ranks were placed (seed000: as seed 000's mpirun -np P, by socket "
        "above 2 ranks)",
    )
    p.add_argument(
        "--metric",
        default="avg_us",
        choices=calibration.METRICS,
        help="the statistic the curve reports, compared with the same one simulated (default avg_us, "
        "OSU's Avg Latency; maxrank_*: the slowest rank per iteration, averaged or median)",
    )
    p.add_argument(
        "--as-measured",
        action="store_true",
        help="keep the one-way times as measured, even where a farther class is faster",
    )
    p.add_argument(
        "--beta",
        default="first",
        choices=("first", "fit"),
        help="time per byte: the first segment's slope, or a fit over every size",
    )
    p.add_argument(
        "--base",
        default="orfeo-thin",
        help="shipped platform whose shape (nodes, sockets, cores) is kept (default orfeo-thin)",
    )
    p.add_argument("-o", "--output", required=True, help="platform XML to write")
    p.add_argument("--segments", type=int, default=2, help="segments of the fit (default 2)")
    p.add_argument("--check", action="store_true", help="simulate the ping-pong on it and compare")
    p.set_defaults(func=_cmd)
    return p
