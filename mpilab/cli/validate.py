"""``mpilab validate``: the shipped simulated clusters against the seeds' measurements."""

import time
from pathlib import Path

import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.studies import validation

#: What a reader needs to read each table.
_HEADINGS = {
    "thin": (
        "THIN, seed 000: bcast and reduce at 1 KiB, Open MPI's algorithms forced, ranks by "
        "socket; seed = the report's segmented fit; ratio = simulated slowest rank / seed "
        "(ratio_avg: the average over ranks). bcast basic_linear is the fitted curve."
    ),
    "thin-pingpong": "THIN, seed 000: the point-to-point table (fitted) against the simulated ping-pong",
    "jupiter": (
        "jupiter, seed 001: default reduce 128 B and allreduce 8 B, slowest rank; paper = the "
        "figure values the seed typed in; measured = the seed's own range at 512. reduce "
        "at P = 16 is the fitted point."
    ),
    "seed002": "seed 002: gather+broadcast / pairwise (simulated on THIN; the seed ran on AMD Milan)",
    "bunyip": "seed 004: Bunyip's cost models against the simulated Bunyip (p = 8)",
}


def _show(part, table):
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 200):
        print(f"\n== {part}: {_HEADINGS[part]}")
        if part == "thin":
            shown = table.drop(columns=["held_out", "note"])
            print(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
            for note in sorted(set(table["note"]) - {""}):
                print(f"note: {note}")
            s, a = validation.summary(table), validation.summary(table, "ratio_avg")
            print(
                f"held-out curves ({s['points']} points): median |sim/seed - 1| = "
                f"{s['median_abs_error']:.2f}, within 2x: {100 * s['within_2x']:.0f} %, median "
                f"ratio {s['median_ratio']:.3f}; average over ranks: {a['median_abs_error']:.2f}, "
                f"{100 * a['within_2x']:.0f} %, {a['median_ratio']:.3f} (target: <= 0.35 and >= 80 %)"
            )
        elif part == "jupiter":
            print(table.drop(columns=["held_out"]).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
            print(validation.jupiter_ratio(table).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
            s = validation.summary(table, "ratio_paper")
            print(
                f"paper's default curve, held out ({s['points']} points): median |sim/paper - 1| = "
                f"{s['median_abs_error']:.2f}, within 2x: {100 * s['within_2x']:.0f} %"
            )
        else:
            print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            s = validation.summary(table)
            if s["points"]:
                print(
                    f"{s['points']} points: median |ratio - 1| = {s['median_abs_error']:.2f}, "
                    f"within 2x: {100 * s['within_2x']:.0f} %"
                )


def _cmd(args):
    parts = [p.strip() for p in args.parts.split(",") if p.strip()] if args.parts else list(validation.PARTS)
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
            t.to_csv(out / f"{part}.csv", index=False)
        print(f"\ntables written to {out}/")
    print(f"\nvalidation took {time.monotonic() - t0:.0f} s")
    return 0


def configure(p):
    """Add the arguments of ``mpilab validate`` to its parser ``p``."""
    p.description = (
        "Simulate what the seeds measured on the shipped platforms (orfeo-thin, "
        "jupiter-32x16, bunyip-8) and print each seed's numbers next to the "
        "simulation and the error. Parts: " + ", ".join(validation.PARTS) + "."
    )
    p.add_argument("--parts", help="comma-separated parts (default: all)")
    p.add_argument("-o", "--output", help="directory for one CSV per part")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd)
    return p
