"""``mpilab pingpong``: two-rank ping-pong per mapping into the results table, optionally fitted."""

import sys

from mpilab.core import units
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import FLAVOURS
from mpilab.measure import pingpong
from mpilab.model import p2p


def _int(name, least):
    def conv(text):
        try:
            v = int(text)
        except ValueError:
            raise UsageError(f"bad {name} {text!r}; valid: an integer >= {least}") from None
        if v < least:
            raise UsageError(f"bad {name} {text!r}; valid: an integer >= {least}")
        return v

    return conv


def _cmd(args):
    if args.platform and args.flavour != "smpi":
        raise UsageError(
            f"--platform {args.platform!r} only applies to --flavour smpi; real runs are on this machine"
        )
    units.parse_size_range(args.m, smallest=0)
    opts = {
        k: _int(k.replace("_", "-"), 0 if k.startswith("warmup") else 1)(v)
        for k, v in (
            ("iters", args.iters),
            ("warmup", args.warmup),
            ("iters_large", args.iters_large),
            ("warmup_large", args.warmup_large),
        )
        if v is not None
    }
    reps = _int("repetitions", 1)(args.repetitions)

    def progress(msg):
        if not args.quiet:
            print(f"mpilab: {msg}", file=sys.stderr)

    stats = pingpong.measure(
        args.flavour,
        args.mapping,
        args.output,
        platform=args.platform,
        sizes=args.m,
        repetitions=reps,
        progress=progress,
        timeout=args.timeout,
        **opts,
    )
    for note in stats["notes"]:
        print(f"mpilab: warning: {note}", file=sys.stderr)
    print(
        f"{stats['launched']} launches ({stats['rows']} rows appended to {args.output}), "
        f"{stats['skipped']} already measured"
    )
    if args.fit:
        table = p2p.fit(args.output, segments=args.segments)
        cols = [
            c
            for c in (
                "flavour",
                "platform",
                "mapping",
                "segment",
                "intercept",
                "slope",
                "lower",
                "upper",
                "r2",
                "r2_fit",
            )
            if c in table.columns
        ]
        print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    if args.residuals:
        fig, _ = p2p.residual_plot(args.output, segments=args.segments)
        fig.savefig(args.residuals, dpi=100)
        print(f"residuals: {args.residuals}")
    return 0


def configure(p):
    """Add the arguments of ``mpilab pingpong`` to its parser ``p``."""
    p.description = (
        "Run c_reference's pingpong with two ranks placed by each mapping "
        "(core: one socket; socket: two sockets of a node; node: two nodes) and "
        "append the rows (collective 'pingpong') to a results CSV; a rerun skips "
        "what is there. Real runs say when the machine cannot give a mapping "
        "(one node, one socket). --fit prints the segmented fit per mapping."
    )
    p.add_argument("--flavour", choices=FLAVOURS, default="smpi", help="which MPI runs it (default: smpi)")
    p.add_argument("--platform", help="SMPI platform: a shipped name (default orfeo-thin) or an XML file")
    p.add_argument(
        "--mapping",
        default="core,socket,node",
        help="comma-separated mappings: core, socket, node (default: all three)",
    )
    p.add_argument(
        "-m",
        default=pingpong.DEFAULT_SIZES,
        help="sizes MIN:MAX in bytes, 0 then doubling; K/M suffixes; MAX alone = 0:MAX (default 0:4M)",
    )
    p.add_argument("--iters", help="timed round trips up to 8 KiB (default 1000)")
    p.add_argument("--warmup", help="warm-up round trips up to 8 KiB (default 100)")
    p.add_argument("--iters-large", help="timed round trips above 8 KiB (default 100)")
    p.add_argument("--warmup-large", help="warm-up round trips above 8 KiB (default 10)")
    p.add_argument("--repetitions", default="1", help="independent launches per mapping (default 1)")
    p.add_argument("-o", "--output", default="results.csv", help="results CSV (appended, resumed)")
    p.add_argument("--fit", action="store_true", help="print the segmented fit of every mapping")
    p.add_argument("--segments", type=int, default=2, help="segments of the fit (default 2)")
    p.add_argument(
        "--residuals", metavar="PNG", help="also save the fit's residuals, one panel per mapping, to this PNG"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch (default 600)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd)
    return p
