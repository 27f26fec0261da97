"""The answer key's decisions from measurements: lab 5's decision table and regret, lab 1's ranking.

These functions compute graded answers from a results table (the fastest algorithm per point,
the decision table of seed 003, the regret of each fixed choice, a ranking by mean latency), so
they live on the instructor's side: the rubrics recompute the expected answers with them from the
data a student hands in, and the instructor's guide quotes them. The student's side keeps
:func:`mpilab.model.decision.choose`, the lookup of a decision table as Open MPI reads it.

Every function reads a results table (:mod:`mpilab.core.results`) and uses the median over
repetitions.
"""

import pandas as pd

from mpilab.core.errors import UsageError


def _medians(df, value):
    v = df[value] if value in df and df[value].notna().any() else df["avg_us"]
    d = df.assign(_v=v.astype(float))
    return (
        d.groupby(["collective", "nprocs", "bytes", "algorithm"], as_index=False)["_v"]
        .median()
        .rename(columns={"_v": "median_us"})
    )


def best_per_point(df, value="maxrank_avg_us", algorithms=None):
    """Fastest algorithm at each (collective, nprocs, bytes), by the median over repetitions.

    Returns
    -------
    pandas.DataFrame
        collective, nprocs, bytes, algorithm, median_us.
    """
    if algorithms is not None:
        df = df[df["algorithm"].isin(algorithms)]
    if df.empty:
        raise UsageError("no rows to select from (check the algorithm filter)")
    m = _medians(df, value)
    idx = m.groupby(["collective", "nprocs", "bytes"])["median_us"].idxmin()
    return m.loc[idx].reset_index(drop=True)


def decision_table(df, value="maxrank_avg_us", algorithms=None):
    """The decision table: fastest algorithm per (collective, size range, process-count range).

    Consecutive measured sizes with the same winner form one size range; consecutive process
    counts with identical size ranges form one process-count range. A range holds from its
    ``*_min`` (inclusive) up to the next range's start.

    Returns
    -------
    pandas.DataFrame
        collective, nprocs_min, nprocs_max, bytes_min, bytes_max, algorithm.
    """
    best = best_per_point(df, value, algorithms)
    out = []
    for coll, g in best.groupby("collective"):
        per_p = []
        for p, gp in g.groupby("nprocs"):
            gp = gp.sort_values("bytes")
            ranges = []
            for b, a in zip(gp["bytes"], gp["algorithm"]):
                if ranges and ranges[-1][2] == a:
                    ranges[-1][1] = b
                else:
                    ranges.append([b, b, a])
            per_p.append((p, [tuple(r) for r in ranges]))
        blocks = []
        for p, ranges in per_p:
            if blocks and blocks[-1][2] == ranges:
                blocks[-1][1] = p
            else:
                blocks.append([p, p, ranges])
        for pmin, pmax, ranges in blocks:
            for bmin, bmax, a in ranges:
                out.append(
                    dict(
                        collective=coll,
                        nprocs_min=int(pmin),
                        nprocs_max=int(pmax),
                        bytes_min=int(bmin),
                        bytes_max=int(bmax),
                        algorithm=a,
                    )
                )
    return pd.DataFrame(out)


def regret(df, value="maxrank_avg_us", algorithms=None):
    """Regret of each fixed algorithm against picking the best at every point.

    Regret at a point = time(fixed) / time(best) - 1. Points where the fixed algorithm was not
    measured are left out (``points`` says how many were used).

    Returns
    -------
    pandas.DataFrame
        collective, algorithm, points, mean_regret, max_regret, worst_nprocs, worst_bytes,
        sorted by mean regret.
    """
    if algorithms is not None:
        df = df[df["algorithm"].isin(algorithms)]
    m = _medians(df, value)
    best = m.groupby(["collective", "nprocs", "bytes"])["median_us"].transform("min")
    m = m.assign(regret=m["median_us"] / best - 1.0)
    out = []
    for (coll, alg), g in m.groupby(["collective", "algorithm"]):
        w = g.loc[g["regret"].idxmax()]
        out.append(
            dict(
                collective=coll,
                algorithm=alg,
                points=len(g),
                mean_regret=g["regret"].mean(),
                max_regret=g["regret"].max(),
                worst_nprocs=int(w["nprocs"]),
                worst_bytes=int(w["bytes"]),
            )
        )
    return pd.DataFrame(out).sort_values(["collective", "mean_regret"]).reset_index(drop=True)


def ranking(df, value="avg_us"):
    """Rank the algorithms of each (collective, message size) by their mean latency over P.

    Only the process counts that every algorithm of the group was measured at are used, so
    that an algorithm is never ranked on easier points than the others.

    Parameters
    ----------
    df : pandas.DataFrame
        Results rows (several repetitions per point are reduced to their median).
    value : str
        Timing column (default ``avg_us``, OSU's "Avg Latency").

    Returns
    -------
    pandas.DataFrame
        collective, bytes, rank (1 = fastest), algorithm, mean_us (mean over P of the median),
        wins (process counts where it was the fastest), nprocs (how many P were compared).
    """
    if df.empty:
        raise UsageError("no rows to rank")
    m = _medians(df, value)
    out = []
    for (coll, nbytes), g in m.groupby(["collective", "bytes"]):
        wide = g.pivot_table(index="nprocs", columns="algorithm", values="median_us").dropna()
        if wide.empty:
            raise UsageError(
                f"{coll} at {nbytes} B: no process count where every algorithm "
                f"({', '.join(sorted(g['algorithm'].unique()))}) was measured"
            )
        winners = wide.idxmin(axis=1)
        mean = wide.mean().sort_values(kind="stable")
        for rank, (alg, mu) in enumerate(mean.items(), 1):
            out.append(
                dict(
                    collective=coll,
                    bytes=int(nbytes),
                    rank=rank,
                    algorithm=alg,
                    mean_us=float(mu),
                    wins=int((winners == alg).sum()),
                    nprocs=len(wide),
                )
            )
    return pd.DataFrame(out)
