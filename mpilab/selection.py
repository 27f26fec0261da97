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
digits inside a comment for numbers).

Message size. Open MPI 4.1 (``coll_tuned_decision_dynamic.c``) compares the file's message
sizes with count × datatype size for bcast, reduce and allreduce, the kit's ``bytes``; for
allgather with datatype size × sendcount × communicator size, the whole gathered buffer, while
the kit's allgather ``bytes`` is one process's contribution. So an allgather threshold depends on
P: :func:`write_ompi_rules` writes one communicator-size block per process count of the table
(the first and last P of each range) with thresholds ``bytes × P``, exact at those P and scaled
by the block's P in between, and :func:`rules_choose` multiplies the query by P as Open MPI
does.
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
    """Look up the decision table as Open MPI reads :func:`write_ompi_rules`' file.

    The process-count range with the largest start not above ``nprocs`` (the first range for
    smaller P, as the file's first block starts at 1), then in that range the size range with
    the largest start not above ``nbytes`` (its first one for smaller sizes, as the file's first
    rule starts at 0).
    """
    t = table[table.collective == collective]
    if t.empty:
        raise UsageError(f"no rule for {collective}; the table has "
                         f"{', '.join(sorted(table.collective.unique())) or 'no collective'}")
    below = t[t.nprocs_min <= nprocs]
    start = below.nprocs_min.max() if not below.empty else t.nprocs_min.min()
    t = t[t.nprocs_min == start].sort_values("bytes_min")
    fits = t[t.bytes_min <= nbytes]
    return (fits if not fits.empty else t).iloc[-1 if not fits.empty else 0]["algorithm"]


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
        An algorithm Open MPI does not have, a row of the kit's own C algorithms (``ring``,
        ``bruck``, ``native``...: Open MPI cannot run them; the library's are ``lib:ring``...),
        or a collective without coll/tuned rules.
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
        for name in t["algorithm"].unique():
            _refuse_kit_algorithm(coll, name)
        blocks = []     # (communicator size written, P the thresholds are scaled by, rules)
        for pmin in sorted(t["nprocs_min"].unique()):
            rules = t[t.nprocs_min == pmin].sort_values("bytes_min")
            pmax = int(rules["nprocs_max"].max())
            at = [int(pmin)] + ([pmax] if coll == "allgather" and pmax != pmin else [])
            blocks += [(p, p if coll == "allgather" else 1, rules) for p in at]
        lines.append(f"{OMPI_COLL_IDS[coll]}")
        lines.append(f"{len(blocks)}")
        for i, (p, scale, rules) in enumerate(blocks):
            lines.append(f"{1 if i == 0 else p}")
            lines.append(f"{len(rules)}")
            for j, (_, r) in enumerate(rules.iterrows()):
                alg = libalgs.lookup(coll, r["algorithm"])
                if alg.ompi_id is None:
                    raise UsageError(f"{coll} algorithm {r['algorithm']!r} is not available on "
                                     f"openmpi; it cannot go into a rules file")
                seg = segsizes.get((coll, alg.name), alg.ompi_segsize)
                start = 0 if j == 0 else int(r["bytes_min"]) * scale
                lines.append(f"{start} {alg.ompi_id} 0 {seg}")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def _refuse_kit_algorithm(coll, name):
    """Raise a UsageError for rows that are not Open MPI algorithms (the kit's C code)."""
    if libalgs.is_library(coll, name):
        return
    hint = (f"; the library's {name} is {libalgs.PREFIX + name!r}"
            if libalgs.PREFIX + name in libalgs.names(coll) else "")
    what = ("the library's own choice, not an algorithm (use 'default' for Open MPI's fixed "
            "rules)" if name == "native" else "the kit's own C algorithm or unknown")
    raise UsageError(f"{coll} algorithm {name!r} in the decision table is {what}: an Open MPI "
                     f"rules file can only name Open MPI's algorithms{hint}; build the table "
                     f"from library rows only, e.g. decision_table(df, algorithms=[...]) with "
                     f"names from `mpilab libalgs --coll {coll}`")


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
            raise UsageError(f"{coll} at {nbytes} B: no process count where every algorithm "
                             f"({', '.join(sorted(g['algorithm'].unique()))}) was measured")
        winners = wide.idxmin(axis=1)
        mean = wide.mean().sort_values(kind="stable")
        for rank, (alg, mu) in enumerate(mean.items(), 1):
            out.append(dict(collective=coll, bytes=int(nbytes), rank=rank, algorithm=alg,
                            mean_us=float(mu), wins=int((winners == alg).sum()),
                            nprocs=len(wide)))
    return pd.DataFrame(out)


def read_ompi_rules(path):
    """Read an Open MPI 4.1 dynamic rules file back into a table.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    pandas.DataFrame
        One row per message-size rule: collective, comm_size (the rule holds from this many
        processes up), msg_size (from this many bytes up, as Open MPI counts them: for
        allgather the whole gathered buffer, P × the kit's ``bytes``), ompi_id, algorithm (the
        kit's name, see :mod:`mpilab.libalgs`), faninout, segsize.

    Raises
    ------
    ParseError
        Naming the file and what was expected where the file stops making sense (too few
        numbers, an unknown collective id or algorithm id, sizes not increasing).
    """
    from pathlib import Path

    from .errors import ParseError

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror}") from None
    words = []
    for line in text.splitlines():
        words += line.split("#", 1)[0].split()
    pos = [0]

    def take(what):
        if pos[0] >= len(words):
            raise ParseError(f"{path}: the file ends where {what} was expected")
        w = words[pos[0]]
        pos[0] += 1
        try:
            return int(w)
        except ValueError:
            raise ParseError(f"{path}: {what} must be an integer, found {w!r} "
                             f"(number {pos[0]} of the file)") from None

    names = {v: k for k, v in OMPI_COLL_IDS.items()}
    rows = []
    for _ in range(take("the number of collectives")):
        cid = take("a collective id")
        if cid not in names:
            raise ParseError(f"{path}: collective id {cid} is not one the kit writes; valid: "
                             + ", ".join(f"{i} ({n})" for i, n in sorted(names.items())))
        coll = names[cid]
        ids = {a.ompi_id: a.name for a in libalgs.TABLE[coll].values() if a.ompi_id is not None}
        last_comm = -1
        for _ in range(take(f"the number of communicator sizes of {coll}")):
            comm = take(f"a communicator size of {coll}")
            if comm <= last_comm:
                raise ParseError(f"{path}: {coll} communicator sizes must increase: {comm} after {last_comm}")
            last_comm, last_msg = comm, -1
            for _ in range(take(f"the number of message sizes of {coll} at {comm} processes")):
                msg = take(f"a message size of {coll} at {comm} processes")
                if msg <= last_msg:
                    raise ParseError(f"{path}: {coll} message sizes at {comm} processes must "
                                     f"increase: {msg} after {last_msg}")
                last_msg = msg
                alg = take(f"the algorithm id of {coll} at {comm} processes, {msg} bytes")
                if alg not in ids:
                    raise ParseError(f"{path}: {coll} algorithm id {alg} (at {comm} processes, "
                                     f"{msg} bytes) is not an Open MPI {coll} algorithm; valid: "
                                     + ", ".join(f"{i} ({n})" for i, n in sorted(ids.items())))
                fan = take("the fan in/out")
                seg = take("the segment size")
                rows.append(dict(collective=coll, comm_size=comm, msg_size=msg, ompi_id=alg,
                                 algorithm=ids[alg], faninout=fan, segsize=seg))
    if pos[0] != len(words):
        raise ParseError(f"{path}: {len(words) - pos[0]} numbers left over after the last rule")
    return pd.DataFrame(rows, columns=["collective", "comm_size", "msg_size", "ompi_id",
                                       "algorithm", "faninout", "segsize"])


def rules_choose(rules, collective, nprocs, nbytes):
    """The algorithm a rules table (from :func:`read_ompi_rules`) gives Open MPI for one call.

    As coll/tuned does: the communicator rule with the largest size not above ``nprocs``, then
    its message rule with the largest size not above the message size. ``nbytes`` is the kit's
    ``bytes``; for allgather Open MPI's message size is ``nbytes × nprocs`` (the gathered
    buffer). ``None`` when no rule applies (Open MPI then uses its fixed decisions).
    """
    r = rules[(rules["collective"] == collective) & (rules["comm_size"] <= nprocs)]
    if r.empty:
        return None
    r = r[r["comm_size"] == r["comm_size"].max()]
    msg = nbytes * nprocs if collective == "allgather" else nbytes
    r = r[r["msg_size"] <= msg]
    if r.empty:
        return None
    return r.sort_values("msg_size").iloc[-1]["algorithm"]


def rules_settings(path):
    """:class:`mpilab.libalgs.Settings` that make Open MPI follow the rules file at ``path``.

    Dynamic rules on, the file named, and :data:`mpilab.forcing.OMPI_VERIFY_ENV` so that the
    run echoes what it read. Open MPI 4.1 consults the file before any forced
    ``coll_tuned_<coll>_algorithm`` (``coll_tuned_decision_dynamic.c``; checked on 4.1.4 by
    ``tests/test_selection.py``), so where the file has a rule it decides.
    """
    import os

    from . import forcing

    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_dynamic_rules_filename": os.path.abspath(path),
           **forcing.OMPI_VERIFY_ENV}
    return libalgs.Settings(env=env, mca={k[len("OMPI_MCA_"):]: v for k, v in env.items()
                                          if k.startswith("OMPI_MCA_")})


def measure_with_rules(launcher, path, collective, nprocs, sizes="2:1M", repetition=0, **kw):
    """Run collbench's native ``collective`` on Open MPI following the rules file ``path``.

    Parameters
    ----------
    launcher : mpilab.launch.Launcher
        An Open MPI launcher.
    path : str or Path
        The rules file (e.g. from :func:`write_ompi_rules`).
    collective : str
    nprocs : int
    sizes : str or (int, int)
    repetition : int
    **kw
        collbench options: iters, warmup, iters_large, warmup_large, probe, check, timeout.

    Returns
    -------
    list of dict
        Results rows with ``algorithm="rules"``, ``requested`` the file's path, and
        ``forced``/``evidence`` saying whether Open MPI echoed that it read the file with
        dynamic rules on (and any ``coll_tuned_<coll>_algorithm`` also set, which the file
        overrides where it has a rule).
    """
    import os

    from . import collbench, forcing
    from .errors import LaunchError

    if launcher.flavour != "openmpi":
        raise UsageError(f"rules files are Open MPI's; launcher flavour is {launcher.flavour!r}, "
                         "valid: openmpi")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise UsageError(f"rules file {path!r} does not exist; write one with write_ompi_rules")
    timeout = kw.pop("timeout", 600)
    args = collbench.collbench_args("native", collective, sizes, **kw)
    proc = forcing.run(launcher, collbench.collbench_program("openmpi"), args, nprocs,
                       rules_settings(path), timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise LaunchError(f"exit {proc.returncode}: {proc.args}\nstderr tail:\n{tail}")
    echo = dict(forcing._OMPI_ECHO.findall(proc.stderr))
    if echo.get("coll_tuned_dynamic_rules_filename") == path and \
            echo.get("coll_tuned_use_dynamic_rules") in ("true", "1"):
        also = echo.get(f"coll_tuned_{collective}_algorithm")
        forced, evidence = "yes", (f"Open MPI echoed coll_tuned_use_dynamic_rules=true and "
                                   f"coll_tuned_dynamic_rules_filename={path}; " +
                                   (f"coll_tuned_{collective}_algorithm={also} was also set, "
                                    f"which Open MPI 4.1 consults only where the file has no rule"
                                    if also else f"no coll_tuned_{collective}_algorithm forced"))
    else:
        forced, evidence = "no", f"Open MPI echoed {echo or 'no MCA parameters'}"
    meta, table = collbench.parse_output(proc.stdout, source=proc.args)
    rows = collbench.to_results_rows(meta, table, launcher=launcher.name, platform="local",
                                     mapping="core", repetition=repetition, requested=path,
                                     forced=forced, evidence=evidence, command=proc.args,
                                     flavour="openmpi")
    for r in rows:
        r["algorithm"] = "rules"
    return rows
