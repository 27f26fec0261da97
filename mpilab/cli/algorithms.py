"""``mpilab list``: the kit's algorithms, from its one registry (``mpilab.model.algorithms``): what
each does, its restrictions, which side holds its reference, its cost where this installation
knows it (the answer key's, on the instructor's side), whether this build of collbench runs it
and whether ``mpilab timeline`` can draw it."""

import json

from mpilab.core.errors import LaunchError, ToolMissing, one_of
from mpilab.core.vocabulary import COLLECTIVES as LIBRARY_COLLECTIVES
from mpilab.core.vocabulary import FLAVOURS
from mpilab.measure import collbench
from mpilab.model import algorithms, costs


def _where(r):
    """Which side holds the reference, and what the lab asks for."""
    if r["side"] == "kit":
        return f"reference: {r['source']} (shipped with the kit: read it)" + (
            f"; {r['lab']}" if r["lab"] else ""
        )
    if r["skeleton"]:
        return f"you write it in labs/{r['lab']}/{r['skeleton']}; the reference is in the answer key"
    return "the answer key's" + (f" ({r['lab']} uses it)" if r["lab"] else "")


def _built(flavour, collective):
    """Names this flavour's collbench runs for ``collective``, or None (with why) when it is not built."""
    try:
        return {a["name"] for a in collbench.registry(flavour, collective)}, ""
    except (ToolMissing, LaunchError) as exc:
        return None, str(exc)


def _record(a, built):
    cost = (
        costs.header_form(a.collective, a.name, e=a.cost)
        if a.cost is not None
        else (
            a.cost_note or "not in this installation (the labs ask you to derive it; it is in the answer key)"
        )
    )
    return {
        "collective": a.collective,
        "name": a.name,
        "description": a.description,
        "restrictions": a.restrictions,
        "side": a.side,
        "lab": a.lab,
        "skeleton": a.skeleton_file,
        "cost": cost,
        "source": a.source,
        "collbench": bool(built and a.name in built),
        "schedule": a.schedule is not None,
    }


def _cmd(args):
    chosen = [args.coll] if args.coll else algorithms.collectives()
    if args.coll and args.coll not in algorithms.collectives():
        raise one_of("collective", args.coll, algorithms.collectives())
    records, notes = [], []
    for coll in chosen:
        # collbench runs kit algorithms of the allgather only (the others: native), so only that
        # collective is worth a launch of collbench --list
        built, why = _built(args.flavour, coll) if coll == "allgather" else (set(), "")
        if why:
            notes.append(f"collbench ({args.flavour}) not available: {why}")
        records += [_record(a, built) for a in algorithms.of(coll)]
    if args.json:
        print(json.dumps({"collective": args.coll, "algorithms": records}, indent=2))
        return 0
    width = max(len(r["name"]) for r in records)
    for coll in chosen:
        print(f"{coll}:")
        for r in (r for r in records if r["collective"] == coll):
            pad = " " * (width + 4)
            print(f"  {r['name']:<{width}}  {r['description']}")
            print(f"{pad}restrictions: {r['restrictions']}")
            print(f"{pad}{_where(r)}")
            print(f"{pad}cost: {r['cost']}")
            runs = [f"collbench --algo {r['name']}"] if r["collbench"] else []
            runs += [f"mpilab timeline --algo {r['name']}"] if r["schedule"] else []
            if runs:
                print(f"{pad}runs here: {', '.join(runs)}")
        if coll in LIBRARY_COLLECTIVES:
            print(
                f"  {'native':<{width}}  the MPI library's own {coll} "
                f"(its algorithms: mpilab libalgs --coll {coll})"
            )
    for note in notes:
        print(note)
    return 0


def configure(p):
    """Add the arguments of ``mpilab list`` to its parser ``p``."""
    p.description = __doc__.replace("``", "")
    p.add_argument("--coll", help=f"only this collective: {', '.join(algorithms.collectives())}")
    p.add_argument(
        "--flavour",
        choices=FLAVOURS,
        default="openmpi",
        help="whose collbench build to ask what it runs (default: openmpi)",
    )
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=_cmd)
    return p
