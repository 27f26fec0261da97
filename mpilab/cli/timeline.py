"""``mpilab timeline``: predicted (α-β) and measured (PMPI-traced) timing diagrams of one run."""

import matplotlib

from mpilab.cli.pingpong import _int
from mpilab.core import units
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import FLAVOURS, MAPPINGS
from mpilab.measure import trace
from mpilab.model import algorithms, timeline


def _float(name):
    def conv(text):
        try:
            v = float(text)
        except ValueError:
            v = -1.0
        if not v >= 0:
            raise UsageError(f"bad {name} {text!r}; valid: a number >= 0")
        return v

    return conv


def _ports(text):
    if str(text).lower() in ("inf", "none", "unlimited"):
        return None
    if str(text).lower() == "shared":
        return "shared"
    return _int("ports", 1)(text)


def _cmd(args):
    matplotlib.use("Agg")
    algorithms.collective_of(args.algo)
    nprocs = _int("nprocs", 1)(args.nprocs)
    nbytes = units.parse_bytes(args.bytes)
    if args.platform and args.flavour != "smpi":
        raise UsageError(f"--platform {args.platform!r} only applies to --flavour smpi")
    alpha = _float("alpha")(args.alpha) if args.alpha is not None else None
    beta = _float("beta")(args.beta) if args.beta is not None else None
    output = args.output or f"timeline-{args.algo}-{args.flavour}-p{nprocs}.png"
    predicted, measured = trace.predicted_and_measured(
        args.algo,
        nprocs,
        nbytes,
        flavour=args.flavour,
        platform=args.platform,
        mapping=args.mapping,
        alpha=alpha,
        beta=beta,
        ports=_ports(args.ports),
        eager_bytes=units.parse_bytes(args.eager),
        same_start=not args.zero_start,
        reps=_int("reps", 1)(args.reps),
        root=_int("root", 0)(args.root),
        directory=args.trace_dir,
        timeout=args.timeout,
    )
    problems = timeline.check_consistency(measured)
    for p in problems:
        print(f"mpilab: warning: trace: {p}")
    fig, _ = timeline.plot_side_by_side(predicted, measured)
    fig.savefig(output, dpi=args.dpi)
    print(
        f"predicted {predicted.total_us:.3f} us ({predicted.meta['alpha_beta_from']}), "
        f"measured {measured.total_us:.3f} us (repetition {measured.meta['region']}; all: "
        f"{', '.join(f'{t:.3f}' for t in measured.meta['regions'].values())} us)"
    )
    print(output)
    return 0


def configure(p):
    """Add the arguments of ``mpilab timeline`` to its parser ``p``."""
    p.description = (
        "Run an algorithm's C code under the PMPI tracer (c_reference/trace), "
        "predict the same run with the alpha-beta event model, and draw both, one "
        "row per rank on one time axis, into a PNG whose path is printed last. The reference "
        "algorithms (gather_bcast, pairwise) run everywhere; ring, bruck and binomial only in an "
        "instructor's checkout: their schedules (and ring's and Bruck's C code) are the labs' "
        "answers, kept in the answer key."
    )
    p.add_argument(
        "--algo",
        required=True,
        help=f"one of: {', '.join(algorithms.with_schedule())}"
        + (
            ""
            if set(algorithms.in_the_key()) <= set(algorithms.with_schedule())
            else f" ({', '.join(algorithms.in_the_key())}: only in an instructor's checkout, "
            "where the answer key has their schedules)"
        ),
    )
    p.add_argument("--nprocs", "-n", default="8", help="processes (default 8)")
    p.add_argument(
        "--bytes",
        "-b",
        default="64K",
        help="bytes per rank (allgather) or of the buffer (bcast); K/M suffixes (default 64K)",
    )
    p.add_argument("--flavour", choices=FLAVOURS, default="smpi", help="default: smpi")
    p.add_argument("--platform", help="SMPI platform name or XML file (default orfeo-thin)")
    p.add_argument("--mapping", choices=MAPPINGS, default="core")
    p.add_argument(
        "--alpha",
        help="latency in us for the prediction (default: SMPI's routes, or a ping-pong fit on a real MPI)",
    )
    p.add_argument("--beta", help="us per byte for the prediction (give it with --alpha)")
    p.add_argument(
        "--ports",
        default="1",
        help="messages a rank sends and receives at once in the model: a number, 'inf', or "
        "'shared' (any number sharing the port's bandwidth, as SMPI does; default 1)",
    )
    p.add_argument(
        "--eager", default="0", help="sends smaller than this complete when posted in the model (default 0)"
    )
    p.add_argument(
        "--zero-start",
        action="store_true",
        help="start every predicted rank at 0 instead of when it started in the run",
    )
    p.add_argument("--reps", default="3", help="traced repetitions; the median one is drawn (default 3)")
    p.add_argument("--root", default="0", help="bcast root (default 0)")
    p.add_argument("--trace-dir", help="keep the per-rank trace logs in this directory")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for the launch (default 300)")
    p.add_argument("--dpi", type=int, default=90)
    p.add_argument("-o", "--output", help="PNG file (default timeline-<algo>-<flavour>-p<P>.png)")
    p.set_defaults(func=_cmd)
    return p
