"""``mpilab sweep``: measure algorithms x process counts x sizes, append to a results CSV, resume.

Algorithms: the kit's own (ring, bruck, gather_bcast, pairwise for allgather), native (the
library's call, its own choice), and the library's algorithms of `mpilab libalgs`, forced and
verified (default, chain, pipeline, ...). Where the library has an algorithm of the same name
as the kit's, write it lib:NAME (lib:ring is Open MPI's/MPICH's/SMPI's ring, ring the kit's).
"""

import argparse
import random
import warnings

from mpilab.core import results, units
from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import COLLECTIVES, FLAVOURS, MAPPINGS
from mpilab.measure import collbench, driver, launch, libalgs, sweep
from mpilab.model import algorithms, stats

#: SimGrid 3.32's collective selectors (``--cfg=smpi/coll-selector:NAME``).
SMPI_SELECTORS = ("default", "ompi", "mpich", "mvapich2", "impi")


def _positive(name):
    def conv(text):
        try:
            v = int(text)
        except ValueError:
            raise UsageError(f"bad {name} {text!r}; valid: an integer >= 1") from None
        if v < 1 and not (name.startswith("warmup") and v == 0):
            raise UsageError(
                f"bad {name} {text!r}; valid: an integer >= {0 if name.startswith('warmup') else 1}"
            )
        return v

    return conv


def _nonnegative(name, text):
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"bad {name} {text!r}; valid: an integer >= 0") from None
    if v < 0:
        raise UsageError(f"bad {name} {text!r}; valid: an integer >= 0")
    return v


def _algorithms(flavour, coll, text):
    """The --algos list checked against the kit's registry and the library table."""
    kit = collbench.algorithm_names(flavour, coll)
    if not text:
        return kit
    algos = [a.strip() for a in text.split(",") if a.strip()]
    library = libalgs.names(coll, flavour)
    for a in algos:
        if a in kit:
            continue
        if libalgs.is_library(coll, a):
            libalgs.settings(flavour, coll, a)  # raises "not available on <flavour> ..."
            continue
        task = algorithms.registry().get((coll, a))
        if task is not None and task.skeleton:
            raise UsageError(
                f"{a!r} is not in this build of collbench: {task.lab} asks you to write it "
                f"(labs/{task.lab}/{task.skeleton_file}), and its reference is in the answer key; "
                f"time yours from the lab's notebook (mpilab.grade.runner). Here: {', '.join(kit)}"
                + (f"; the library's {a}: {libalgs.PREFIX}{a}" if libalgs.PREFIX + a in library else "")
            )
        if libalgs.PREFIX + a in libalgs.names(coll):
            libalgs.canonical(coll, a)  # raises "'x' is the kit's ...; the library's is 'lib:x'"
        sweep.validate_algorithms([a], kit + library)  # raises "unknown algorithm ...; valid: ..."
    return algos


def summary(df, algos, nprocs, sizes, confidence=0.95):
    """Medians over the repetitions with their confidence interval, at a few points of a sweep.

    The smallest and largest process count, and the smallest size, 1 KiB (if measured) and the
    largest size: a short check that the repetitions agree, not the whole table
    (``mpilab.model.stats.summarize`` gives that).

    Returns
    -------
    pandas.DataFrame
        algorithm, nprocs, bytes, n, median_us, ci_low_us, ci_high_us.
    """
    show_p = sorted({min(nprocs), max(nprocs)})
    show_b = sorted({min(sizes), max(sizes)} | ({1024} & set(sizes)))
    d = df[df["algorithm"].isin(algos) & df["nprocs"].isin(show_p) & df["bytes"].isin(show_b)]
    if d.empty:
        return d
    return stats.summarize(d, by=["algorithm", "nprocs", "bytes"], confidence=confidence)


def _cmd(args):
    flavour = args.flavour
    nprocs = sweep.parse_nprocs(args.nprocs)
    lo, hi = units.parse_size_range(args.m)
    iters = _positive("iters")(args.iters) if args.iters is not None else None
    warmup = _positive("warmup")(args.warmup) if args.warmup is not None else None
    iters_large = _positive("iters-large")(args.iters_large) if args.iters_large is not None else None
    warmup_large = _positive("warmup-large")(args.warmup_large) if args.warmup_large is not None else None
    reps = _positive("repetitions")(args.repetitions)
    probe = units.parse_bytes(args.probe) if args.probe is not None else None
    if probe is not None and probe < 1:
        raise UsageError(f"bad --probe {args.probe!r}; valid: a positive size in bytes (e.g. 8, 1K)")
    root = _nonnegative("root", args.root) if args.root is not None else None
    if root is not None and root >= min(nprocs):
        raise UsageError(
            f"bad --root {root}: it must be a rank of every run; valid: 0.."
            f"{min(nprocs) - 1} (smallest --nprocs is {min(nprocs)})"
        )
    seed = _nonnegative("seed", args.seed) if args.seed is not None else None
    if seed is not None and not args.shuffle:
        raise UsageError("--seed only applies with --shuffle")
    if args.shuffle and seed is None:
        seed = random.SystemRandom().randrange(2**31)
    if args.platform and flavour != "smpi":
        raise UsageError(f"--platform {args.platform!r} only applies to --flavour smpi")
    if args.smpi_selector and flavour != "smpi":
        raise UsageError(f"--smpi-selector {args.smpi_selector!r} only applies to --flavour smpi")
    if args.smpi_selector and args.smpi_selector not in SMPI_SELECTORS:
        raise one_of("SMPI selector", args.smpi_selector, SMPI_SELECTORS)
    opts = {"platform": args.platform or "orfeo-thin"} if flavour == "smpi" else {}
    if args.smpi_selector:
        opts["cfg"] = [f"smpi/coll-selector:{args.smpi_selector}"]
    launcher = launch.get_launcher(flavour, **opts)
    algos = _algorithms(flavour, args.coll, args.algos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if sweep.check_mpich_nprocs(flavour, nprocs):
            print(
                f"mpilab: warning: MPICH busy-polls when oversubscribed; process counts above "
                f"{sweep.MPICH_MAX_NPROCS} will be slow and unrepresentative"
            )
    stats = sweep.run_sweep(
        launcher,
        args.output,
        algos,
        nprocs,
        (lo, hi),
        coll=args.coll,
        mapping=args.mapping,
        iters=iters,
        warmup=warmup,
        iters_large=iters_large,
        warmup_large=warmup_large,
        repetitions=reps,
        check=args.check,
        timeout=args.timeout,
        progress=not args.quiet,
        shuffle=args.shuffle,
        seed=seed,
        probe=probe,
        datatype=args.datatype,
        root=root,
    )
    print(
        f"{stats['launched']} launches ({stats['rows']} rows appended to {args.output}), "
        f"{stats['skipped']} already measured"
    )
    if args.shuffle:
        print(f"order shuffled with --seed {seed} (give it again to repeat this order)")
    if reps > 1:
        _print_summary(args, launcher, algos, nprocs, (lo, hi), reps, root)
    return 0


def _print_summary(args, launcher, algos, nprocs, sizes, reps, root):
    df = results.read_results(args.output)
    keep = (
        (df["collective"] == args.coll)
        & (df["flavour"] == launcher.flavour)
        & (df["launcher"] == launcher.name)
        & (df["platform"] == launcher.platform)
        & (df["mapping"] == args.mapping)
        & (df["datatype"] == (args.datatype or "char"))
        & (df["root"] == (root or 0))
        & (df["repetition"] < reps)
    )
    names = [
        a if a in collbench.algorithm_names(launcher.flavour, args.coll) else libalgs.canonical(args.coll, a)
        for a in algos
    ]
    table = summary(df[keep], names, nprocs, units.sizes_in_range(*sizes))
    if table.empty:
        return
    print(
        f"medians over {reps} repetitions, {stats.describe_coverage(table['coverage'].min(), reps)} of the "
        "median (order statistics), slowest-rank latency in µs:"
    )
    w = max(len("algorithm"), *(len(a) for a in table["algorithm"]))
    print(f"  {'algorithm':<{w}}  {'P':>4}  {'bytes':>8}  {'n':>3}  {'median':>10}  interval")
    for _, r in table.iterrows():
        print(
            f"  {r['algorithm']:<{w}}  {r['nprocs']:>4}  {r['bytes']:>8}  {r['n']:>3}  "
            f"{r['median_us']:>10.3f}  [{r['ci_low_us']:.3f}, {r['ci_high_us']:.3f}]"
        )
    print(
        "  (all points: mpilab.model.stats.summarize("
        f"mpilab.core.results.read_results({str(args.output)!r})))"
    )


def configure(p):
    """Add the arguments of ``mpilab sweep`` to its parser ``p``."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--flavour",
        "--launcher",
        dest="flavour",
        choices=FLAVOURS,
        default="openmpi",
        help="which MPI runs collbench (default: openmpi)",
    )
    p.add_argument("--platform", help="SMPI platform: a shipped name (orfeo-thin) or an XML file")
    p.add_argument(
        "--map-by",
        "--mapping",
        dest="mapping",
        choices=MAPPINGS,
        default="core",
        help="where ranks go: core (fill a socket first), socket (round-robin over "
        "sockets), node (round-robin over nodes); default core",
    )
    p.add_argument(
        "--smpi-selector",
        metavar="NAME",
        help="SMPI only: whose decision rules the 'default' algorithm follows, "
        f"{', '.join(SMPI_SELECTORS)} (SimGrid's own default otherwise; lab 1 "
        "uses ompi). The selector is not part of a row's key: sweep another "
        "selector into another file",
    )
    p.add_argument("--coll", choices=COLLECTIVES, default="allgather")
    p.add_argument(
        "--algos",
        help="comma-separated algorithms (default: all the kit's + native); "
        "library ones as in `mpilab libalgs`, e.g. default,chain,lib:ring",
    )
    p.add_argument("--nprocs", default="1,2", help="process counts: 1,2,4 or ranges 2..48:2 (default 1,2)")
    p.add_argument("-m", default="32:1M", help="size range MIN:MAX in bytes, suffixes K M (default 32:1M)")
    p.add_argument(
        "--datatype",
        choices=driver.DATATYPES,
        help="element type (default char); sizes must be multiples of its size",
    )
    p.add_argument("--root", help="root rank of bcast and reduce (default 0)")
    p.add_argument(
        "--iters",
        help="iterations for every size, as OSU's -i (collbench's default: 1000 up to 8 KiB, 100 above)",
    )
    p.add_argument("--warmup", help="warm-up iterations for every size, as OSU's -x")
    p.add_argument("--iters-large", help="iterations above 8 KiB only (overrides --iters there)")
    p.add_argument("--warmup-large", help="warm-up iterations above 8 KiB only")
    p.add_argument(
        "--repetitions",
        default="1",
        help="independent launches per point (default 1); above 1 the sweep ends with "
        "medians and confidence intervals",
    )
    p.add_argument(
        "--probe",
        metavar="BYTES",
        help="time a ping-pong of BYTES between ranks 0 and P-1 right before each "
        "size's collective (stored in probe_us)",
    )
    p.add_argument("--check", action="store_true", help="verify every element before timing")
    p.add_argument("--shuffle", action="store_true", help="measure the launches in random order")
    p.add_argument(
        "--seed", help="random seed of --shuffle, to repeat an order (default: a new one, printed)"
    )
    p.add_argument("-o", "--output", default="results.csv", help="results CSV (appended, resumed)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch (default 600)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd)
    return p
