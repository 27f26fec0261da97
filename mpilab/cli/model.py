"""``mpilab model RESULTS``: the α-β model of each algorithm against your measurements.

Takes α (µs) and β (µs/byte) as numbers, or fits them from ping-pong rows (``mpilab pingpong``;
the first segment of the chosen mapping), evaluates every algorithm's cost from
:mod:`mpilab.model.costs` at each measured (P, bytes), and prints the mean absolute percentage error
per algorithm and process count. ``-o`` also saves the model-vs-measurement plot.

    mpilab model results.csv --pingpong pingpong.csv --mapping socket --nprocs 16,48 -o model.png

An instructor's command: the cost expressions and the comparison (lab 4's graded table) are in
the answer key, installed only in an instructor's checkout.
"""

from pathlib import Path

import pandas as pd

from mpilab.core import key, results
from mpilab.core.errors import UsageError, one_of
from mpilab.measure import sweep
from mpilab.model import costs, p2p

VALUES = ("avg_us", "maxrank_avg_us", "maxrank_median_us", "min_us", "max_us")


def _read(path, what):
    if not Path(path).exists():
        raise UsageError(
            f"{what} file {path!r} does not exist; valid: a CSV written by `mpilab sweep` / `mpilab pingpong`"
        )
    df = results.read_results(path)
    if df.empty:
        raise UsageError(f"{what} file {path!r} has no rows")
    return df


def alpha_beta(args):
    """(α, β) from ``--alpha/--beta`` or from the first segment of a ping-pong fit."""
    if args.pingpong:
        if args.alpha is not None or args.beta is not None:
            raise UsageError("give either --alpha/--beta or --pingpong, not both")
        first = p2p.first_segment(p2p.fit(_read(args.pingpong, "ping-pong")))
        if args.mapping not in first:
            raise one_of("mapping", args.mapping, sorted(first))
        return first[args.mapping]
    if args.alpha is None or args.beta is None:
        raise UsageError("give --alpha (us) and --beta (us/byte), or --pingpong PINGPONG.csv")
    if args.alpha < 0 or args.beta <= 0:
        raise UsageError(f"alpha must be >= 0 and beta > 0, not alpha={args.alpha}, beta={args.beta}")
    return args.alpha, args.beta


def _compare():
    keyed = key.module("costs")
    if keyed is None:
        raise UsageError(
            "mpilab model is an instructor's command: the algorithms' cost expressions "
            "and the model-vs-measurement table are answers of lab 4 and are in the "
            "answer key, which this installation does not have"
        )
    return keyed.compare_model


def _cmd(args):
    compare_model = _compare()
    df = _read(args.results, "results")
    df = df[df["collective"] != "pingpong"]
    if args.value not in VALUES:
        raise one_of("value", args.value, VALUES)
    if args.nprocs:
        wanted = sweep.parse_nprocs(args.nprocs)
        missing = sorted(set(wanted) - set(df["nprocs"]))
        if missing:
            raise UsageError(
                f"no rows at nprocs {missing} in {args.results}; measured: {sorted(set(df['nprocs']))}"
            )
        df = df[df["nprocs"].isin(wanted)]
    alpha, beta = alpha_beta(args)
    rows = []
    for p, g in df.groupby("nprocs"):
        t = compare_model(g, alpha, beta, value=args.value)
        rows += [
            dict(nprocs=p, collective=r.collective, algorithm=r.algorithm, mape=r.mape)
            for r in t.itertuples()
        ]
    if not rows:
        raise UsageError(
            f"no algorithm of {args.results} has a cost in mpilab.model.costs (see `mpilab list`)"
        )
    table = pd.DataFrame(rows).pivot_table(index=["collective", "algorithm"], columns="nprocs", values="mape")
    print(
        f"model vs {args.value}: alpha = {alpha:.4g} us, beta = {beta:.4g} us/byte; "
        f"MAPE (%) per algorithm and process count"
    )
    print(table.round(1).to_string())
    if args.output:
        fig, _ = costs.plot_model(compare_model(df, alpha, beta, value=args.value), value=args.value)
        fig.savefig(args.output, dpi=120, bbox_inches="tight")
        print(args.output)
    return 0


def configure(p):
    """Add the arguments of ``mpilab model`` to its parser ``p``."""
    p.description = __doc__
    p.add_argument("results", help="results CSV (mpilab sweep)")
    p.add_argument("--alpha", type=float, help="latency alpha in us")
    p.add_argument("--beta", type=float, help="time per byte beta in us/byte")
    p.add_argument("--pingpong", help="ping-pong results CSV: fit alpha and beta from it instead")
    p.add_argument(
        "--mapping", default="core", help="which ping-pong mapping gives alpha, beta (default core)"
    )
    p.add_argument("--nprocs", help="process counts to compare, e.g. 16,48 (default: all)")
    p.add_argument(
        "--value",
        default="maxrank_avg_us",
        help=f"measured column (default maxrank_avg_us; valid: {', '.join(VALUES)})",
    )
    p.add_argument("-o", "--output", help="save the model-vs-measurement plot (PNG)")
    p.set_defaults(func=_cmd)
    return p
