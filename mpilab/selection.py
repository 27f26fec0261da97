"""Algorithm selection (003_25a9e71ac18c5178.txt): the fastest algorithm per (collective,
message-size range, process-count range) from a results table, the regret of any fixed choice,
and the same decision table written as an Open MPI 4.1 dynamic rules file.

Rules file format (Open MPI 4.1 ``coll_tuned_dynamic_file.c``), whitespace-separated integers::

    <number of collectives>
    <collective id>            # COLLTYPE_T: allgather 0, allreduce 2, bcast 7, reduce 11
    <number of communicator sizes>
    <communicator size>        # rule applies from this size up (largest size <= P wins)
    <number of message sizes>
    <message size> <algorithm id> <fan in/out> <segment size>   # from this many bytes up

Use it with ``--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename F``
and no ``coll_tuned_<coll>_algorithm``. The kit writes no comments (the 4.1 reader would take
digits inside a comment for numbers) (a forced algorithm overrides the file). Message size is
count × datatype size in bytes, as the kit's ``bytes`` column for these collectives.
"""

import pandas as pd

from . import libalgs
from .errors import UsageError

OMPI_COLL_IDS = {"allgather": 0, "allreduce": 2, "bcast": 7, "reduce": 11}


def _medians(df, value):
    v = df[value] if value in df and df[value].notna().any() else df["avg_us"]
    d = df.assign(_v=v.astype(float))
    return (d.groupby(["collective", "nprocs", "bytes", "algorithm"], as_index=False)["_v"]
             .median().rename(columns={"_v": "median_us"}))


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
                out.append(dict(collective=coll, nprocs_min=int(pmin), nprocs_max=int(pmax),
                                bytes_min=int(bmin), bytes_max=int(bmax), algorithm=a))
    return pd.DataFrame(out)


def choose(table, collective, nprocs, nbytes):
    """Look up the decision table as Open MPI would (largest P and size not above the query)."""
    t = table[(table.collective == collective) & (table.nprocs_min <= nprocs)]
    if t.empty:
        raise UsageError(f"no rule for {collective} at P={nprocs}")
    t = t[t.nprocs_min == t.nprocs_min.max()]
    t = t[t.bytes_min <= nbytes]
    if t.empty:
        t = table[(table.collective == collective)].nsmallest(1, "bytes_min")
    return t.sort_values("bytes_min").iloc[-1]["algorithm"]


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
        out.append(dict(collective=coll, algorithm=alg, points=len(g),
                        mean_regret=g["regret"].mean(), max_regret=g["regret"].max(),
                        worst_nprocs=int(w["nprocs"]), worst_bytes=int(w["bytes"])))
    return pd.DataFrame(out).sort_values(["collective", "mean_regret"]).reset_index(drop=True)


def write_ompi_rules(table, path, segsizes=None):
    """Write ``table`` (from :func:`decision_table`) as an Open MPI 4.1 dynamic rules file.

    Parameters
    ----------
    table : pandas.DataFrame
    path : str or Path
    segsizes : dict, optional
        ``{(collective, algorithm): bytes}`` overriding the table's default segment sizes.

    Raises
    ------
    UsageError
        An algorithm Open MPI does not have, or a collective without coll/tuned rules.
    """
    segsizes = segsizes or {}
    lines = []
    colls = sorted(table["collective"].unique(), key=lambda c: OMPI_COLL_IDS.get(c, 99))
    lines.append(f"{len(colls)}")
    for coll in colls:
        if coll not in OMPI_COLL_IDS:
            raise UsageError(f"no Open MPI rules for collective {coll!r}; valid: "
                             f"{', '.join(sorted(OMPI_COLL_IDS))}")
        t = table[table.collective == coll]
        sizes = sorted(t["nprocs_min"].unique())
        lines.append(f"{OMPI_COLL_IDS[coll]}")
        lines.append(f"{len(sizes)}")
        for i, p in enumerate(sizes):
            rules = t[t.nprocs_min == p].sort_values("bytes_min")
            lines.append(f"{1 if i == 0 else int(p)}")
            lines.append(f"{len(rules)}")
            for j, (_, r) in enumerate(rules.iterrows()):
                alg = libalgs.lookup(coll, r["algorithm"])
                if alg.ompi_id is None:
                    raise UsageError(f"{coll} algorithm {r['algorithm']!r} is not available on "
                                     f"openmpi; it cannot go into a rules file")
                seg = segsizes.get((coll, alg.name), alg.ompi_segsize)
                start = 0 if j == 0 else int(r["bytes_min"])
                lines.append(f"{start} {alg.ompi_id} 0 {seg}")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text
