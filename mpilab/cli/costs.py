"""``mpilab costs``: the α-β cost of every algorithm with a cost (``mpilab.model.costs``), in the C
headers' notation, and a check of your own expression against it."""

from mpilab.model import costs


def _cmd(args):
    if args.check is not None:
        if not args.coll or not args.algo:
            raise costs.UsageError(
                "--check needs --coll and --algo, e.g. --coll allgather "
                "--algo ring --check '(p-1)*alpha + p*n*beta'"
            )
        r = costs.check_expression(args.check, args.coll, args.algo)
        print(("right: " if r.equal else "wrong: ") + r.message)
        return 0 if r.equal else 1
    known = costs.table()
    if not known:
        print(
            "no cost is known here: the costs of the kit's and the libraries' algorithms are in the "
            "answer key, on the instructor's side (labs 2, 3 and 6 ask you to derive them); add your "
            "own in Python with mpilab.model.costs.register(...)"
        )
        return 0
    collectives = sorted({c for c, _ in known})
    if args.coll and args.coll not in collectives:
        raise costs.one_of("collective", args.coll, collectives)
    pairs = [
        (c, nm)
        for c, nm in costs.names()
        if (not args.coll or c == args.coll) and (not args.algo or nm == args.algo)
    ]
    if args.algo and not pairs:
        costs.entry(args.coll or "allgather", args.algo)  # raises, listing the valid names
    width = max(len(f"{c} {nm}") for c, nm in pairs)
    for c, nm in pairs:
        print(f"{c + ' ' + nm:<{width}}  {costs.header_form(c, nm)}")
        if args.verbose:
            print(f"{'':<{width}}  {costs.entry(c, nm).source}")
    for (c, nm), why in sorted(costs.no_cost().items()):
        if (not args.coll or c == args.coll) and (not args.algo or nm == args.algo):
            print(f"{c + ' ' + nm:<{width}}  no cost in the table: {why}")
    print(
        "# the kit's own algorithms (lab 6's chain is one chain, the library's four), each with its "
        "cost: mpilab list"
    )
    return 0


def configure(p):
    """Add the arguments of ``mpilab costs`` to its parser ``p``."""
    p.description = __doc__.replace("``", "")
    p.epilog = (
        "Symbols: p processes, n bytes (allgather: per process; N = p*n gathered), alpha "
        "(µs), beta (µs/byte), s segment size. Example: mpilab costs --coll allgather "
        "--algo ring --check '(p-1)*alpha + p*n*beta'"
    )
    p.add_argument("--coll", help="only this collective: allgather, bcast, reduce or allreduce")
    p.add_argument("--algo", help="only this algorithm")
    p.add_argument(
        "--check",
        metavar="EXPR",
        help="compare EXPR (in p, n, alpha, beta, s) with the table's cost of "
        "--coll --algo; exit 0 if equal, 1 if not (naming a p, n where they differ)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also say where each cost comes from")
    p.set_defaults(func=_cmd)
    return p
