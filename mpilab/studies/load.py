"""Lab 5's load study (seed 003): a probe before each collective, under seeded background traffic.

Seed 003 ran a point-to-point probe (HP2P) right before each MPI_Bcast on 512 processes, 100
times on different days, found probe and broadcast "highly correlated", and compared Open MPI's
pipeline and knomial broadcasts within one range of probe latency (35..60 µs: pipeline about
15 % faster). :func:`run` replays that on a simulated cluster: each run is one realisation of
background traffic (:func:`mpilab.simulate.traffic.loaded_platform`), every algorithm is
measured in it with a probe of each size, and the rows go to one results file per probe size.
:func:`correlations` measures how well a probe predicts the collective, :func:`probe_ranges`
retells the seed's ranges: per range of probe latency, the distribution of each algorithm's
time and the best one.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd

from mpilab.core import key, results
from mpilab.core.errors import ToolMissing, UsageError
from mpilab.measure import forcing, launch
from mpilab.simulate import traffic

_PROBE_RE = re.compile(r"--probe (\d+)")


def results_path(output, probe):
    """The results file of one probe size: ``<stem>-probe<bytes><suffix>``."""
    output = Path(output)
    return output.with_name(f"{output.stem}-probe{int(probe)}{output.suffix or '.csv'}")


def run(
    output,
    algorithms,
    nprocs=48,
    sizes="1K:1M",
    runs=16,
    probes=(8, 65536),
    base="orfeo-thin-4",
    mapping="node",
    collective="bcast",
    seed=0,
    directory=None,
    progress=None,
    **traffic_options,
):
    """Measure ``algorithms`` under ``runs`` realisations of background traffic, with each probe.

    Parameters
    ----------
    output : str or Path
        Results file name; the rows of probe size ``b`` go to :func:`results_path` (output, b).
        A run whose rows are there already is skipped (the study resumes).
    algorithms : list of str
        Library algorithms of ``collective`` (:mod:`mpilab.measure.libalgs`).
    nprocs, sizes, mapping, collective
        What to measure; ``mapping="node"`` spreads the ranks over every node of ``base``, so
        the collective crosses cards that the probe between ranks 0 and P-1 does not.
    runs : int
        Realisations (seeds ``seed .. seed + runs - 1``).
    probes : sequence of int
        Probe sizes in bytes (collbench ``--probe``).
    base : str
        A shipped platform with several nodes.
    directory : str or Path, optional
        Where the loaded platforms go (default: the user cache).
    progress : callable, optional
        Called with a one-line message per launch.
    **traffic_options
        Passed to :func:`mpilab.simulate.traffic.loaded_platform`.

    Returns
    -------
    pandas.DataFrame
        Every row of the study with ``probe_bytes`` and ``run`` (the traffic seed) added.
    """
    if not algorithms:
        raise UsageError("give at least one algorithm")
    probes = [int(p) for p in probes]
    if any(p < 1 for p in probes):
        raise UsageError(f"bad probe sizes {probes!r}; valid: positive numbers of bytes")
    for k in range(int(runs)):
        s = int(seed) + k
        plat, _ = traffic.loaded_platform(base, seed=s, directory=directory, **traffic_options)
        label = plat.stem
        lau = launch.get_launcher("smpi", platform=str(plat))
        for probe in probes:
            out = results_path(output, probe)
            done = (
                results.read_results(out)
                if out.is_file()
                else pd.DataFrame(columns=["platform", "algorithm"])
            )
            for alg in algorithms:
                if ((done["platform"] == label) & (done["algorithm"] == alg)).any():
                    continue
                if progress:
                    progress(f"run {k + 1}/{runs} ({label}), probe {probe} B, {alg}")
                rows = _measure(lau, collective, alg, nprocs, sizes, mapping, probe)
                results.append_rows(out, rows)
    return read(output, probes)


def _measure(launcher, collective, algorithm, nprocs, sizes, mapping, probe):
    """One launch of the study: every size of ``sizes`` in one run, each after its probe."""
    return forcing.measure(
        launcher,
        collective,
        algorithm,
        int(nprocs),
        sizes=sizes,
        mapping=mapping,
        iters=1,
        warmup=1,
        probe=probe,
    )


def rerun(
    platform_label,
    algorithm,
    nprocs,
    sizes,
    probe,
    base="orfeo-thin-4",
    mapping="node",
    collective="bcast",
    directory=None,
):
    """One launch of :func:`run` again, on the realisation named ``platform_label`` (the
    ``platform`` of its rows, ``<base>+load<seed>``): the rows it gives. The simulation is
    deterministic, so they are the study's rows of that launch; a grader uses this to check that
    a table handed in is a simulation.

    Raises
    ------
    UsageError
        A label that is not a loaded realisation of ``base``.
    """
    seed = traffic.label_seed(platform_label)
    if seed is None or not str(platform_label).startswith(f"{base}+load"):
        raise UsageError(
            f"platform {platform_label!r} is not a loaded realisation of {base!r}; valid: {base}+load<seed>"
        )
    plat, _ = traffic.loaded_platform(base, seed=seed, directory=directory)
    lau = launch.get_launcher("smpi", platform=str(plat))
    return _measure(lau, collective, algorithm, nprocs, sizes, mapping, probe)


def read(output, probes=(8, 65536)):
    """The study's rows (:func:`run`) with ``probe_bytes`` and ``run`` columns."""
    frames = []
    for probe in probes:
        out = results_path(output, probe)
        if out.is_file():
            df = results.read_results(out)
            frames.append(df.assign(probe_bytes=int(probe), run=df["platform"].map(traffic.label_seed)))
    if not frames:
        raise UsageError(
            f"no results of the load study next to {str(output)!r} (files "
            f"{', '.join(str(results_path(output, p)) for p in probes)})"
        )
    return pd.concat(frames, ignore_index=True)


def correlations(df, value="maxrank_avg_us"):
    """Pearson's r (and Spearman's rho) of probe and collective across runs, per probe size,
    algorithm and message size.

    Lab 5 asks students for this correlation, so the function that computes it is the answer
    key's (``mpilab_key.stats.correlate``): the study runs in an instructor's checkout.

    Raises
    ------
    ToolMissing
        Without the answer key.
    """
    answers = key.module("stats")
    if answers is None:
        raise ToolMissing(
            "the load study's correlations are lab 5's graded answer: they need the "
            "answer key (an instructor's checkout, pip install -e solutions)"
        )
    return answers.correlate(
        df, x="probe_us", y=value, by=("probe_bytes", "collective", "algorithm", "bytes")
    )


def probe_ranges(df, nbytes, probe_bytes=None, edges=None, bins=3, value="maxrank_avg_us"):
    """Seed 003's ranges of probe latency, with the distribution of each algorithm in each.

    Parameters
    ----------
    df : pandas.DataFrame
        The study (:func:`run`).
    nbytes : int
        Message size of the collective.
    probe_bytes : int, optional
        Which probe defines the ranges (default: the smallest measured).
    edges : sequence of float, optional
        Range edges in µs; default: ``bins`` ranges holding equally many runs.
    value : str
        The collective's time.

    Returns
    -------
    pandas.DataFrame
        One row per (range, algorithm): ``range`` (an interval of probe µs), ``runs``,
        ``min``, ``q25``, ``median``, ``q75``, ``max`` (µs) and ``best`` (True for the algorithm
        with the lowest median in that range).
    """
    d = df[df["bytes"] == int(nbytes)]
    if d.empty:
        raise UsageError(f"no rows at {nbytes} bytes; sizes measured: {sorted(df['bytes'].unique())}")
    probe_bytes = int(probe_bytes if probe_bytes is not None else d["probe_bytes"].min())
    d = d[d["probe_bytes"] == probe_bytes]
    # one probe value per run: the probe timed before that size's collective, averaged over the
    # algorithms' launches (they see the same traffic realisation)
    probe = d.groupby("run")["probe_us"].median()
    if edges is None:
        edges = np.unique(np.quantile(probe, np.linspace(0, 1, int(bins) + 1)))
    cut = pd.cut(probe, np.asarray(edges, float), include_lowest=True)
    d = d.assign(range=d["run"].map(cut), v=pd.to_numeric(d[value], errors="coerce"))
    d = d.dropna(subset=["range", "v"])
    q = d.groupby(["range", "algorithm"], observed=True)["v"]
    out = pd.DataFrame(
        {
            "runs": q.size(),
            "min": q.min(),
            "q25": q.quantile(0.25),
            "median": q.median(),
            "q75": q.quantile(0.75),
            "max": q.max(),
        }
    ).reset_index()
    out["best"] = out.groupby("range", observed=True)["median"].transform("min") == out["median"]
    return out
