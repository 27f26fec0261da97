"""``mpilab demo``: the allgather experiment of seed 002 (gather+broadcast vs pairwise exchange),
run for real on Open MPI and MPICH at P = 1, 2 and simulated on the ORFEO THIN platform
(2 nodes x 2 sockets x 12 cores) at P = 2..48, with plots and the seed's speed-up for comparison.
"""

import shutil
import time
from pathlib import Path

import pandas as pd

from mpilab.core import results
from mpilab.core.errors import ToolMissing
from mpilab.measure import collbench, launch, sweep
from mpilab.studies import plots

ALGOS = ["gather_bcast", "pairwise", "ring", "bruck", "native"]
SEED_GB_P16_1M_S = 6.03e-2   # seed 002, gather+broadcast, P=16, 1 MiB
SEED_PW_P16_1M_S = 8.32e-3   # seed 002, pairwise exchange, P=16, 1 MiB
PLATFORM = "orfeo-thin"

#: (launcher, nprocs, sizes, iterations: iters, warmup, iters_large, warmup_large)
#: SMPI is deterministic (simulated time), so two timed iterations suffice; real runs are noisy.
FULL = [
    ("openmpi", [1, 2], "32:1M", (200, 20, 20, 3)),
    ("mpich", [1, 2], "32:1M", (200, 20, 20, 3)),
    ("smpi", [2, 4, 8, 16, 32, 48], "32:1M", (2, 1, 2, 1)),
]
QUICK = [
    ("openmpi", [1, 2], "32:4K", (20, 2, 5, 1)),
    ("mpich", [2], "32:4K", (20, 2, 5, 1)),
    ("smpi", [2, 4], "32:4K", (2, 1, 2, 1)),
]


def plan(quick=False):
    """The demo's sweeps: a list of (flavour, nprocs, sizes, iteration settings)."""
    return QUICK if quick else FULL


def speedup_table(df, nbytes=1 << 20):
    """Rows (flavour, platform, P, algorithm -> latency in µs at ``nbytes``) as a DataFrame
    with one column per algorithm and a ``gb/pw`` column (gather_bcast / pairwise)."""
    sel = df[df["bytes"] == nbytes]
    if sel.empty:
        return sel
    t = sel.pivot_table(index=["flavour", "platform", "nprocs"], columns="algorithm",
                        values="maxrank_avg_us", aggfunc="mean")
    if {"gather_bcast", "pairwise"} <= set(t.columns):
        t["gb/pw"] = t["gather_bcast"] / t["pairwise"]
    return t


def run_demo(outdir="results/demo", quick=False, progress=True, timeout=900, echo=print):
    """Run the demo; return a dict with the results path, the PNGs, the table and the wall time.

    Parameters
    ----------
    outdir : str or Path
        Gets ``results.csv`` (resumable: a rerun measures only what is missing) and PNGs.
    quick : bool
        Fewer sizes and process counts (for tests).
    """
    t0 = time.monotonic()
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    csv = outdir / "results.csv"
    skipped = []
    for flavour, nprocs, sizes, (it, wu, itl, wul) in plan(quick):
        opts = {"platform": PLATFORM} if flavour == "smpi" else {}
        lau = launch.get_launcher(flavour, **opts)
        prog_ok = shutil.which(lau.command("x", [], 1).argv[0]) if flavour != "smpi" else shutil.which("smpirun")
        if not prog_ok:
            skipped.append(f"{flavour}: launcher not installed")
            continue
        try:
            collbench.collbench_program(flavour)
        except ToolMissing as e:
            skipped.append(str(e))
            continue
        echo(f"{flavour:8} P={','.join(map(str, nprocs))} sizes {sizes}: iterations {it} "
             f"(warm-up {wu}) up to 8 KiB, {itl} (warm-up {wul}) above")
        sweep.run_sweep(lau, csv, ALGOS, nprocs, sizes, iters=it, warmup=wu, iters_large=itl,
                        warmup_large=wul, timeout=timeout, progress=progress)
    df = results.read_results(csv)
    pngs = plots.plot_all(df, outdir) if not df.empty else []
    nbytes = 4096 if quick else 1 << 20
    table = speedup_table(df, nbytes)
    wall = time.monotonic() - t0
    return {"results": csv, "pngs": pngs, "table": table, "bytes": nbytes, "wall_s": wall,
            "skipped": skipped}


def format_summary(out):
    """The printed summary: latency table (µs), the P=16 speed-up next to the seed's, wall time."""
    lines = [f"allgather, slowest-rank latency in µs at {out['bytes']} bytes per process:"]
    t = out["table"]
    if len(t):
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            lines.append(t.round(2).to_string())
        key = [i for i in t.index if i[0] == "smpi" and i[2] == 16]
        if key and "gb/pw" in t.columns and out["bytes"] == 1 << 20:
            ours = t.loc[key[0], "gb/pw"]
            seed = SEED_GB_P16_1M_S / SEED_PW_P16_1M_S
            lines.append(f"gather_bcast / pairwise at P=16, 1 MiB: {ours:.1f}x simulated on {PLATFORM} "
                         f"vs {seed:.1f}x in seed 002 ({SEED_GB_P16_1M_S:.2e} s / {SEED_PW_P16_1M_S:.2e} s)")
    for s in out["skipped"]:
        lines.append(f"skipped: {s}")
    lines.append(f"results: {out['results']}  ({len(out['pngs'])} plots next to it)")
    lines.append(f"wall time: {out['wall_s']:.1f} s")
    return "\n".join(lines)
