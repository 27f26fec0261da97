"""``mpilab doctor``: which MPI flavours, simulators, schedulers and tools are here, and how to get the
rest."""

import json

from mpilab.core.doctor import TOOLS, check, format_report
from mpilab.core.errors import one_of


def _cmd(args):
    report = check()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    if args.require:
        wanted = [w.strip() for w in args.require.split(",") if w.strip()]
        for w in wanted:
            if w not in TOOLS:
                raise one_of("tool", w, TOOLS)
        absent = [it["name"] for it in report if it["name"] in wanted and not it["present"]]
        if absent:
            print(f"mpilab: required but missing: {', '.join(absent)}")
            return 1
    return 0


def configure(p):
    """Add the arguments of ``mpilab doctor`` to its parser ``p``."""
    p.description = __doc__
    p.add_argument(
        "--require", help=f"comma-separated names that must be present (exit 1 otherwise): {', '.join(TOOLS)}"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd)
    return p
