"""``mpilab sweep``: measure algorithms x process counts x sizes, append to a results CSV, resume."""

import warnings

from . import collbench, launch, sweep
from .errors import UsageError


def _positive(name):
    def conv(text):
        try:
            v = int(text)
        except ValueError:
            raise UsageError(f"bad {name} {text!r}; valid: an integer >= 1") from None
        if v < 1 and not (name.startswith("warmup") and v == 0):
            raise UsageError(f"bad {name} {text!r}; valid: an integer >= {0 if name.startswith('warmup') else 1}")
        return v
    return conv


def _cmd(args):
    flavour = args.flavour
    nprocs = sweep.parse_nprocs(args.nprocs)
    collbench.parse_size_range(args.m)
    iters = _positive("iters")(args.iters) if args.iters is not None else None
    warmup = _positive("warmup")(args.warmup) if args.warmup is not None else None
    iters_large = _positive("iters-large")(args.iters_large) if args.iters_large is not None else None
    warmup_large = _positive("warmup-large")(args.warmup_large) if args.warmup_large is not None else None
    reps = _positive("repetitions")(args.repetitions)
    if args.platform and flavour != "smpi":
        raise UsageError(f"--platform {args.platform!r} only applies to --flavour smpi")
    opts = {"platform": args.platform or "orfeo-thin"} if flavour == "smpi" else {}
    launcher = launch.get_launcher(flavour, **opts)
    valid = collbench.algorithm_names(flavour, args.coll)
    from . import libalgs  # the libraries' own algorithms, forced and verified
    library = [a for a in libalgs.names(args.coll, flavour) if a not in valid]
    for a in (args.algos or "").split(","):
        if a.strip() in libalgs.names(args.coll) and a.strip() not in valid + library:
            libalgs.settings(flavour, args.coll, a.strip())  # raises "not available on ..."
    algos = sweep.validate_algorithms(args.algos or ",".join(valid), list(valid) + library)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if sweep.check_mpich_nprocs(flavour, nprocs):
            print(f"mpilab: warning: MPICH busy-polls when oversubscribed; process counts above "
                  f"{sweep.MPICH_MAX_NPROCS} will be slow and unrepresentative")
    stats = sweep.run_sweep(launcher, args.output, algos, nprocs, args.m, coll=args.coll,
                            mapping=args.mapping, iters=iters, warmup=warmup, iters_large=iters_large,
                            warmup_large=warmup_large, repetitions=reps,
                            check=args.check, timeout=args.timeout, progress=not args.quiet,
                            shuffle=args.shuffle)
    print(f"{stats['launched']} launches ({stats['rows']} rows appended to {args.output}), "
          f"{stats['skipped']} already measured")
    return 0


def add_parser(subparsers):
    p = subparsers.add_parser("sweep", help="benchmark algorithms x nprocs x sizes into a results CSV",
                              description=__doc__)
    p.add_argument("--flavour", "--launcher", dest="flavour", choices=("openmpi", "mpich", "smpi"),
                   default="openmpi", help="which MPI runs collbench (default: openmpi)")
    p.add_argument("--platform", help="SMPI platform: a shipped name (orfeo-thin) or an XML file")
    p.add_argument("--mapping", choices=launch.MAPPINGS, default="core")
    p.add_argument("--coll", choices=collbench.COLLECTIVES, default="allgather")
    p.add_argument("--algos", help="comma-separated algorithms (default: all registered + native)")
    p.add_argument("--nprocs", default="1,2", help="process counts: 1,2,4 or ranges 2..48:2 (default 1,2)")
    p.add_argument("-m", default="32:1M", help="size range MIN:MAX in bytes, suffixes K M (default 32:1M)")
    p.add_argument("--iters", help="iterations for every size, as OSU's -i (collbench's default: "
                                   "1000 up to 8 KiB, 100 above)")
    p.add_argument("--warmup", help="warm-up iterations for every size, as OSU's -x")
    p.add_argument("--iters-large", help="iterations above 8 KiB only (overrides --iters there)")
    p.add_argument("--warmup-large", help="warm-up iterations above 8 KiB only")
    p.add_argument("--repetitions", default="1", help="independent launches per point (default 1)")
    p.add_argument("--check", action="store_true", help="verify every element before timing")
    p.add_argument("--shuffle", action="store_true", help="measure the launches in random order")
    p.add_argument("-o", "--output", default="results.csv", help="results CSV (appended, resumed)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch (default 600)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd)
    return p
