"""``mpilab list``: the algorithms collbench registers (the one source of truth, in C)."""

import json

from mpilab.measure import collbench
from mpilab.core.vocabulary import COLLECTIVES, FLAVOURS


def _cmd(args):
    algos = collbench.registry(args.flavour, args.coll)
    if args.json:
        print(json.dumps({"collective": args.coll, "algorithms": algos}, indent=2))
        return 0
    width = max(len(a["name"]) for a in algos + [{"name": "native"}])
    for a in algos:
        print(f"{a['name']:<{width}}  {a['cost']}")
        print(f"{'':<{width}}  {a['description']}")
        print(f"{'':<{width}}  restrictions: {a['restrictions']}")
    print(f"{'native':<{width}}  the MPI library's own {args.coll}")
    return 0


def configure(p):
    """Add the arguments of ``mpilab list`` to its parser ``p``."""
    p.description = __doc__
    p.add_argument("--flavour", choices=FLAVOURS, default="openmpi",
                   help="which build's registry to read (default: openmpi)")
    p.add_argument("--coll", choices=COLLECTIVES, default="allgather")
    p.add_argument("--json", action="store_true", help="print the registry as JSON")
    p.set_defaults(func=_cmd)
    return p
