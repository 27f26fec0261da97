"""Lab 6's study of broadcasts: the α and β of a simulated run, crossover maps, the overlap of
non-blocking collectives, and forced Open MPI runs.

Predicting the map from one's own costs before measuring is :mod:`mpilab.model.predict`'s job.
Nothing here answers a graded question: the costs, the k* and the best segment sizes are the
student's.
"""

import datetime
import os
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from mpilab.core import paths
from mpilab.core.errors import LaunchError, UsageError, one_of
from mpilab.measure import driver, forcing, launch
from mpilab.simulate.routes import alpha_beta  # noqa: F401 (lab 6's notebook reads it here)

# ---- maps: the fastest algorithm per (P, n) -----------------------------------------------------


def winners(table, value="maxrank_avg_us"):
    """The fastest algorithm at each (nprocs, bytes) of a timing table (ties: the first by name).

    Returns
    -------
    pandas.DataFrame
        nprocs, bytes, algorithm, and ``value`` of the winner.
    """
    missing = [c for c in ("nprocs", "bytes", "algorithm", value) if c not in table.columns]
    if missing:
        raise UsageError(
            f"the table has no column {missing[0]!r}; it needs nprocs, bytes, algorithm, {value}"
        )
    t = table.sort_values(["nprocs", "bytes", value, "algorithm"])
    return t.groupby(["nprocs", "bytes"], as_index=False).first()[["nprocs", "bytes", "algorithm", value]]


def plot_maps(maps, title=None):
    """Draw crossover maps side by side: message size across, process count up, a colour per algorithm.

    Parameters
    ----------
    maps : dict
        Label -> map (a table with nprocs, bytes, algorithm).

    Returns
    -------
    (matplotlib.figure.Figure, numpy.ndarray of Axes)
    """
    if not maps:
        raise UsageError("plot_maps needs at least one map")
    names = sorted({str(a) for m in maps.values() for a in m["algorithm"]})
    colours = {a: plt.get_cmap("tab10")(i % 10) for i, a in enumerate(names)}
    fig, axes = plt.subplots(1, len(maps), figsize=(4.2 * len(maps), 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (label, m) in zip(axes, maps.items()):
        counts = sorted(m["nprocs"].unique())
        for _, r in m.iterrows():
            y = counts.index(r["nprocs"])
            x = np.log2(r["bytes"])
            ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, color=colours[str(r["algorithm"])]))
        xs = np.log2(sorted(m["bytes"].unique()))
        ax.set_xlim(xs.min() - 0.5, xs.max() + 0.5)
        ax.set_ylim(-0.5, len(counts) - 0.5)
        ax.set_yticks(range(len(counts)), [str(c) for c in counts])
        ticks = [x for x in xs if x % 2 == 1] or list(xs)
        ax.set_xticks(ticks, [_size_label(2**x) for x in ticks], rotation=60)
        ax.set_xlabel("message size (bytes)")
        ax.set_title(label, fontsize="medium")
    axes[0].set_ylabel("processes P")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[a]) for a in names]
    fig.legend(
        handles,
        names,
        loc="lower center",
        ncol=min(len(names), 5),
        fontsize="small",
        bbox_to_anchor=(0.5, -0.12),
    )
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig, axes


def _size_label(b):
    b = int(round(b))
    for unit, k in (("M", 20), ("K", 10)):
        if b >= 1 << k and b % (1 << k) == 0:
            return f"{b >> k}{unit}"
    return str(b)


# ---- non-blocking collectives overlapped with computation ---------------------------------------

#: SMPI settings of :func:`overlap`: the kernel's CPU time is charged to the simulated clock
#: (the launcher's default leaves computation out of the simulation, which would make it free),
#: and MPI_Test charges nothing (SimGrid's default injects 100 µs in every MPI_Test, more after
#: each one that fails, to keep polling loops from stalling the simulated clock; the kernel
#: computes between the tests, so that is not needed here).
SMPI_OVERLAP_CFG = ("smpi/simulate-computation:yes", "smpi/test:0")


#: The table overlap.c prints after the kit's provenance block.
OVERLAP_COLUMNS = (
    "collective",
    "nprocs",
    "bytes",
    "progress",
    "compute_target_us",
    "comm_us",
    "compute_us",
    "both_us",
    "overlap",
)


def _overlap_program(flavour, work):
    src = Path(__file__).resolve().parents[1] / "data" / "lab6" / "overlap.c"
    include = paths.c_reference_dir() / "include"  # labopts.h and labprov.h, as the drivers
    return launch.compile_c(
        [src], flavour, output=Path(work) / f"overlap-{flavour}", flags=("-O2", "-std=c11", f"-I{include}")
    )


def overlap(
    flavour="smpi",
    nprocs=(4,),
    collectives=("bcast", "allgather"),
    sizes=(1 << 20,),
    compute_us=1000.0,
    progress=("none", "test"),
    platform="orfeo-thin",
    mapping="core",
    iters=10,
    warmup=2,
    timeout=600,
):
    """Time MPI_Ibcast / MPI_Iallgather alone, a compute kernel alone, and the two overlapped.

    Runs ``mpilab/data/lab6/overlap.c`` (its header says exactly what is timed and how the
    kernel is calibrated) once per (P, collective, progress).

    Parameters
    ----------
    flavour : {"openmpi", "mpich", "smpi"}
        Real MPI on this machine, or SMPI on ``platform`` (with :data:`SMPI_OVERLAP_CFG` and
        the launcher's ``smpi/host-speed``, the platform hosts' speed: a µs of CPU is a
        simulated µs).
    nprocs : sequence of int
    collectives : sequence of {"bcast", "allgather"}
    sizes : sequence of int
        Bytes broadcast, or contributed by each rank to the allgather.
    compute_us : float
        The kernel's work, µs of CPU time.
    progress : sequence of {"none", "test"}
        ``test``: the kernel calls MPI_Test every tenth of its time.
    platform, mapping : str
        SMPI only.
    iters, warmup : int

    Returns
    -------
    pandas.DataFrame
        The program's columns (collective, nprocs, bytes, progress, compute_target_us, comm_us,
        compute_us, both_us, overlap) and flavour, platform, mapping, measured_utc, for real runs
        the machine's load average over the last minute when the run started, and the
        provenance the program printed (library, host) with the command that ran it.
    """
    for c in collectives:
        if c not in ("bcast", "allgather"):
            raise one_of("collective", c, ("bcast", "allgather"))
    for m in progress:
        if m not in ("none", "test"):
            raise one_of("progress", m, ("none", "test"))
    opts = {"platform": platform, "cfg": list(SMPI_OVERLAP_CFG)} if flavour == "smpi" else {}
    launcher = launch.get_launcher(flavour, **opts)
    work = tempfile.mkdtemp(prefix="mpilab-overlap-")
    frames = []
    try:
        prog = _overlap_program(flavour, work)
        for p in nprocs:
            for coll in collectives:
                for mode in progress:
                    args = [
                        "--coll",
                        coll,
                        "--sizes",
                        ",".join(str(int(b)) for b in sizes),
                        "--compute-us",
                        str(float(compute_us)),
                        "--progress",
                        mode,
                        "--iters",
                        str(int(iters)),
                        "--warmup",
                        str(int(warmup)),
                    ]
                    load = os.getloadavg()[0] if flavour != "smpi" else np.nan
                    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                    out, cmd = driver.run(
                        launcher,
                        prog,
                        args,
                        int(p),
                        mapping,
                        timeout=timeout,
                        expect="overlap",
                        columns=OVERLAP_COLUMNS,
                        cwd=work,
                    )
                    frames.append(
                        pd.DataFrame(out.table, columns=list(OVERLAP_COLUMNS)).assign(
                            flavour=flavour,
                            platform=launcher.platform if flavour == "smpi" else "local",
                            mapping=mapping,
                            measured_utc=when,
                            load_1min=load,
                            library=out.meta.get("library", ""),
                            host=out.meta.get("host", ""),
                            command=cmd,
                        )
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return pd.concat(frames, ignore_index=True)


# ---- forced Open MPI broadcasts, repeated in turn ----------------------------------------------


def forced_bcasts(
    configs,
    nprocs,
    sizes,
    repetitions=5,
    iters=200,
    warmup=20,
    flavour="openmpi",
    platform=None,
    mapping="core",
    timeout=600,
):
    """Time library broadcasts with algorithms and segment sizes forced, every configuration in
    turn, ``repetitions`` times over (so a slow moment of the machine hits them alike).

    Parameters
    ----------
    configs : dict
        Label -> ``(algorithm, options)``: a library algorithm (:mod:`mpilab.measure.libalgs`)
        and the options of :func:`mpilab.measure.forcing.measure` (``segsize``,
        ``chain_fanout``; Open MPI only).
    nprocs : sequence of int
    sizes : sequence of int
        Bytes; one launch per configuration measures every size from the smallest to the
        largest, doubling (the others are dropped).
    repetitions : int
        Launches of each configuration, interleaved.

    Returns
    -------
    pandas.DataFrame
        config, algorithm, nprocs, bytes, repetition, avg_us, maxrank_avg_us, forced, evidence,
        flavour, platform, load_1min (real runs), and the provenance of the launch that measured
        the row (library, host, command).
    """
    opts = {"platform": platform} if flavour == "smpi" else {}
    sizes = sorted(int(b) for b in sizes)
    span = f"{sizes[0]}:{sizes[-1]}"  # one launch per configuration: collbench doubles the size
    rows = []
    for rep in range(int(repetitions)):
        for p in nprocs:
            for label, (algorithm, options) in configs.items():
                launcher = launch.get_launcher(flavour, **opts)
                load = os.getloadavg()[0] if flavour != "smpi" else np.nan
                got = forcing.measure(
                    launcher,
                    "bcast",
                    algorithm,
                    int(p),
                    sizes=span,
                    mapping=mapping,
                    repetition=rep,
                    iters=iters,
                    warmup=warmup,
                    iters_large=iters,
                    warmup_large=warmup,
                    timeout=timeout,
                    **options,
                )
                for r in got:
                    if int(r["bytes"]) in sizes:
                        rows.append(
                            dict(
                                config=label,
                                algorithm=algorithm,
                                nprocs=int(p),
                                bytes=int(r["bytes"]),
                                repetition=rep,
                                avg_us=r["avg_us"],
                                maxrank_avg_us=r["maxrank_avg_us"],
                                forced=r["forced"],
                                evidence=r["evidence"],
                                flavour=flavour,
                                platform=launcher.platform,
                                load_1min=load,
                                library=r.get("library", ""),
                                host=r.get("host", ""),
                                command=str(r.get("command", "")),
                            )
                        )
    if not rows:
        raise LaunchError("no forced broadcast was measured")
    return pd.DataFrame(rows)
