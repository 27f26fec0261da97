"""``mpilab libalgs``: the MPI libraries' own algorithms and how each back-end forces them.

Names: where a library algorithm has the name of one of the kit's own C algorithms of the same
collective (allgather ring and bruck), the library's is written lib:ring, lib:bruck; plain ring
and bruck are the kit's. Any library name may carry the prefix (lib:pipeline is pipeline).
"""

import argparse

from mpilab.measure import libalgs


def _run(args):
    if args.show:
        coll, name = args.show
        s = libalgs.settings(args.flavour or "openmpi", coll, name)
        for k, v in sorted(s.env.items()):
            print(f"{k}={v}")
        for a in s.args:
            print(a)
        if not s.forcing:
            print("(default: nothing to force)")
        return 0
    if args.coll:
        libalgs.names(args.coll)  # validates the name
    print(
        "# lib:NAME = the library's algorithm where the kit has its own C algorithm NAME "
        "(allgather ring, bruck)"
    )
    cols = ["collective", "algorithm", "openmpi", "mpich", "smpi", "description"]
    rows = [r for r in libalgs.table_rows() if not args.coll or r["collective"] == args.coll]
    if args.flavour:
        libalgs.check_flavour(args.flavour)
        rows = [r for r in rows if r[args.flavour] != "n/a"]
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)).rstrip())
    return 0


def configure(p):
    """Add the arguments of ``mpilab libalgs`` to its parser ``p``."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--coll", help="bcast, reduce, allreduce or allgather (default: all)")
    p.add_argument("--flavour", help="only those available on openmpi, mpich or smpi")
    p.add_argument(
        "--show",
        nargs=2,
        metavar=("COLL", "NAME"),
        help="print the settings that force NAME on --flavour (default openmpi)",
    )
    p.set_defaults(func=_run)
    return p
