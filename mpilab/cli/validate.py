"""``mpilab validate``: the shipped simulated clusters against the seeds' measurements."""

import time
from pathlib import Path

import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.studies import validation

#: What a reader needs to read each table.
_HEADINGS = {
    "thin": (
        "THIN, seed 000: bcast and reduce at 1 KiB, Open MPI's algorithms forced with its defaults, "
        "ranks placed as the seed's mpirun -np P placed them; seed = the report's segmented fit of OSU's "
        "Avg Latency; sim = the same statistic simulated; ratio = sim / seed; missing = seed - sim (the "
        "residual). sim_maxrank, ratio_maxrank: the slowest rank, a diagnostic. bcast basic_linear is the "
        "fitted curve; runs: SimGrid's algorithm or the kit's clone of Open MPI's."
    ),
    "thin-pingpong": "THIN, seed 000: the point-to-point table as printed against the simulated ping-pong",
    "thin-osu": (
        "THIN: OSU 7.4 built with smpicc and run under SMPI (the seed's placement, OSU's default 1000 "
        "iterations after 100 warm-up), next to collbench (collectives) and pingpong (osu_latency)"
    ),
    "jupiter": (
        "jupiter, seed 001: default reduce 128 B and allreduce 8 B with the algorithms Open MPI 1.10's "
        "rules chose, the seed's statistic (the slowest rank per measurement, the median); paper = the "
        "figure values the seed typed in; measured = the seed's own range at 512. reduce at P = 16 is "
        "the fitted point."
    ),
    "seed002": "seed 002: gather+broadcast / pairwise (simulated on THIN; the seed ran on AMD Milan)",
    "bunyip": "seed 004: Bunyip's cost models against the simulated Bunyip (p = 8)",
}


def _line(s, what):
    return (
        f"{what} ({s['points']} points): median sim/seed {s['median_ratio']:.3f}, median |sim/seed - 1| "
        f"{s['median_abs_error']:.2f}, within 2x {100 * s['within_2x']:.0f} %"
    )


def _show(part, table):
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.max_rows", 400):
        print(f"\n== {part}: {_HEADINGS[part]}")
        if isinstance(table, str):  # a part that could not run here says why
            print(table)
            return
        fmt = lambda v: f"{v:.3g}"  # noqa: E731
        if part == "thin":
            print(table.drop(columns=["held_out", "runs"]).to_string(index=False, float_format=fmt))
            for (c, a), runs in table.groupby(["collective", "algorithm"])["runs"].first().items():
                print(f"runs: {c} {a}: {runs}")
            print(_line(validation.summary(table, held_out_only=False), "OSU's average, every point"))
            print(_line(validation.summary(table), "OSU's average, held-out curves"))
            print(_line(validation.summary(table, "ratio_maxrank", False), "diagnostic: the slowest rank"))
        elif part == "jupiter":
            print(table.drop(columns=["held_out"]).to_string(index=False, float_format=fmt))
            print(validation.jupiter_ratio(table).to_string(index=False, float_format=fmt))
            small = table[table["nprocs"] <= 128]
            print(
                _line(validation.summary(small, "ratio_paper"), "paper's default curve, P <= 128, held out")
            )
        else:
            print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            s = validation.summary(table)
            if s["points"]:
                print(_line(s, "points"))


def _cmd(args):
    parts = (
        [p.strip() for p in args.parts.split(",") if p.strip()]
        if args.parts
        else list(validation.DEFAULT_PARTS)
    )
    for p in parts:
        if p not in validation.PARTS:
            raise UsageError(f"unknown part {p!r}; valid: {', '.join(validation.PARTS)}")
    t0 = time.monotonic()
    tables, took = validation.run(parts, echo=None if args.quiet else print)
    for part in parts:
        _show(part, tables[part])
        print(f"({took[part]:.0f} s)")
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        for part, t in tables.items():
            if not isinstance(t, str):
                t.to_csv(out / f"{part}.csv", index=False)
        print(f"\ntables written to {out}/")
    print(f"\nvalidation took {time.monotonic() - t0:.0f} s")
    return 0


def configure(p):
    """Add the arguments of ``mpilab validate`` to its parser ``p``."""
    p.description = (
        "Simulate what the seeds measured, the way they measured it, on the shipped platforms "
        "(orfeo-thin, jupiter-32x16, bunyip-8) and print each seed's numbers next to the "
        "simulation and the error. Parts: " + ", ".join(validation.PARTS) + "."
    )
    p.add_argument(
        "--parts", help="comma-separated parts (default: " + ", ".join(validation.DEFAULT_PARTS) + ")"
    )
    p.add_argument("-o", "--output", help="directory for one CSV per part")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd)
    return p
