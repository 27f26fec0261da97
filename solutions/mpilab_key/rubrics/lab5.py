"""Lab 5's rubric: the decision table, the regret, the rules file and the correlations, judged on
the tables the student hands in (``quiet``, ``series``), one point of each simulated again.

* decision table: one case per process count: at every measured size the table's algorithm is
  the fastest there (median or mean over repetitions; an algorithm within 1 % of the fastest
  also counts: where a range ends between two near-equal algorithms is a convention; so does a
  table that drops a one-point island into its neighbours when that costs at most 10 % there,
  :data:`ISLAND_REGRET`); one case
  for the merging the question asks for (no two neighbouring ranges with the same algorithm, no
  two neighbouring process-count ranges with the same size ranges);
* regret: one case per algorithm: its mean and worst regret over the points it was measured at;
* rules file: the file handed in, read as Open MPI reads it, gives the table's algorithm at every
  measured point (one case per process count), once the table holds every measured point;
* correlation: per algorithm, Pearson's r and Spearman's rho of probe_us and maxrank_avg_us over
  the runs of the load study (randomised background traffic) at every size, once one launch of
  the study is simulated again.
"""

import math

import numpy as np

from mpilab.core.errors import UsageError
from mpilab.grade.cases import Case
from mpilab.grade.checks import Function
from mpilab.grade.checks.tables import frame
from mpilab.grade.labs import lab5
from mpilab.studies import load as load_study
from mpilab_key import InNotebook
from mpilab_key.resimulate import spot_case
from mpilab_key.stats import correlate

#: The notebook's simulated launcher (no selector: every algorithm is forced).
PLATFORM, CFG = "orfeo-thin", ()
SPOT = (("bcast", "binomial", 16), ("bcast", "binomial", 8), ("bcast", "pipeline", 48))
#: An algorithm this close to the fastest (relative) may be the table's choice.
TIE = 0.01
#: Agreement of regrets (relative) and of correlations (absolute).
REGRET_RTOL, R_ATOL = 1e-3, 1e-3


def data_gate(results, what):
    """The failed cases that stop the grading of a cell built on ``results`` (empty: go on)."""
    t = frame(results)
    if "platform" in t:
        t = t[t["platform"].astype(str) == PLATFORM]
    spot = spot_case(t.assign(collective=lab5.COLLECTIVE), what, PLATFORM, CFG, SPOT, value=lab5.VALUE)
    return [] if spot.passed else [spot]


def point_times(results):
    """``{(nprocs, bytes): {algorithm: [median, mean] over repetitions}}``."""
    t = frame(results)
    out = {}
    for (p, b, a), g in t.groupby(["nprocs", "bytes", "algorithm"]):
        v = g[lab5.VALUE].astype(float)
        out.setdefault((int(p), int(b)), {})[str(a)] = (float(v.median()), float(v.mean()))
    return out


def acceptable(times, algorithm):
    """Whether ``algorithm`` is among the fastest at a point (either convention, :data:`TIE`)."""
    if algorithm not in times:
        return False
    return any(times[algorithm][k] <= min(v[k] for v in times.values()) * (1 + TIE) for k in (0, 1))


#: A one-point island (one size whose fastest algorithm differs from the same one at the sizes
#: on both sides) may be dropped from the table, smoothing it into its neighbours, when the
#: neighbours' algorithm loses at most this much there (relative): fewer rules for a small regret.
ISLAND_REGRET = 0.10


def regret_at(times, algorithm):
    """``algorithm``'s regret at a point (the smaller of the median and the mean conventions)."""
    if algorithm not in times:
        return float("inf")
    return min(times[algorithm][k] / min(v[k] for v in times.values()) - 1 for k in (0, 1))


def dropped_island(times, p, sizes, i, algorithm):
    """Whether the table's ``algorithm`` at size ``sizes[i]`` of P = ``p`` drops a one-point
    island: the fastest algorithm at the sizes just below and just above is ``algorithm``, the
    fastest here is another, and ``algorithm`` loses at most :data:`ISLAND_REGRET` here."""
    if i == 0 or i == len(sizes) - 1:
        return False

    def best(b):
        return min(times[(p, b)], key=lambda a: times[(p, b)][a][0])

    return (
        best(sizes[i - 1]) == best(sizes[i + 1]) == algorithm
        and best(sizes[i]) != algorithm
        and regret_at(times[(p, sizes[i])], algorithm) <= ISLAND_REGRET
    )


def merged_case(table):
    """The question's merging: neighbouring ranges of a process-count range never share an
    algorithm, and neighbouring process-count ranges never have the same size ranges."""
    t = frame(table).sort_values(["nprocs_min", "bytes_min"])
    blocks = [
        (key, [(int(r.bytes_min), int(r.bytes_max), str(r.algorithm)) for r in g.itertuples()])
        for key, g in t.groupby(["nprocs_min", "nprocs_max"], sort=True)
    ]
    problems = []
    for (pmin, pmax), ranges in blocks:
        for (b0, _, a0), (b1, _, a1) in zip(ranges, ranges[1:]):
            if a0 == a1:
                problems.append(f"P {pmin}..{pmax}: the ranges from {b0} B and from {b1} B are both {a0}")
    for (k0, r0), (k1, r1) in zip(blocks, blocks[1:]):
        if r0 == r1:
            problems.append(f"P {k0[0]}..{k0[1]} and P {k1[0]}..{k1[1]} have the same size ranges")
    return Case("neighbouring ranges with the same choice are merged", not problems, "; ".join(problems[:3]))


def table_cases(answers, ctx):
    table, quiet = answers["table"], answers["quiet"]
    form = lab5.table_form_cases(table, quiet)
    if (
        len(form) == 1
        and not form[0].passed
        and form[0].name != lab5.coverage_case(frame(table), frame(quiet)).name
    ):
        return form
    gate = data_gate(quiet, "quiet")
    if gate:
        return gate
    times = point_times(quiet)
    out = []
    for p in sorted({p for p, _ in times}):
        wrong = []
        sizes = sorted(b for q, b in times if q == p)
        for i, b in enumerate(sizes):
            says = lab5.lookup(table, p, b)
            if len(says) != 1 or not (
                acceptable(times[(p, b)], says[0]) or dropped_island(times, p, sizes, i, says[0])
            ):
                best = min(times[(p, b)], key=lambda a: times[(p, b)][a][0])
                wrong.append(
                    f"{b} B: {'/'.join(says) or 'no range'} (fastest: {best}, "
                    f"{times[(p, b)][best][0]:.4g} us)"
                )
        out.append(
            Case(
                f"P = {p}: the fastest algorithm at every size",
                not wrong,
                "; ".join(wrong[:3]) + (f"; and {len(wrong) - 3} more" if len(wrong) > 3 else ""),
            )
        )
    return out + [merged_case(table)]


def regret_cases(answers, ctx):
    regret, quiet = answers["regret"], answers["quiet"]
    form = lab5.regret_form_cases(regret, quiet)
    if len(form) == 1 and not form[0].passed:
        return form
    gate = data_gate(quiet, "quiet")
    if gate:
        return gate
    times = point_times(quiet)
    mine = frame(regret).assign(algorithm=lambda d: d["algorithm"].astype(str)).set_index("algorithm")
    out = []
    for alg in sorted({a for v in times.values() for a in v}):
        want = []
        for k in (0, 1):
            r = [v[alg][k] / min(x[k] for x in v.values()) - 1 for v in times.values() if alg in v]
            want.append((float(np.mean(r)), float(np.max(r))))
        title = f"{alg}: mean and worst regret"
        if alg not in mine.index:
            out.append(Case(title, False, f"regret has no row for {alg}"))
            continue
        got = (float(mine.loc[alg, "mean_regret"]), float(mine.loc[alg, "max_regret"]))
        ok = any(
            all(math.isclose(g, w, rel_tol=REGRET_RTOL, abs_tol=1e-9) for g, w in zip(got, ws)) for ws in want
        )
        out.append(
            Case(
                title,
                ok,
                f"yours: mean {got[0]:.4f}, worst {got[1]:.4f}; from quiet (time / best "
                f"time - 1 at each point, {lab5.VALUE}): mean {want[0][0]:.4f}, worst {want[0][1]:.4f}",
            )
        )
    return out


def rules_cases(answers, ctx):
    path, table, quiet = answers["rules_path"], answers["table"], answers["quiet"]
    form = lab5.table_form_cases(table, quiet)
    if not all(c.passed for c in form):
        return [
            Case(
                "the table holds every measured point once",
                False,
                "the rules file is compared with your table where the table says what to run: "
                + "; ".join(c.message for c in form if not c.passed),
            )
        ]
    found = ctx.written_file(str(path).rsplit("/", 1)[-1]) if isinstance(path, str) else None
    if found is None or found.stat().st_size > 1_000_000:
        return [
            Case(
                "the rules file is next to the notebook",
                False,
                "the rules file was not found next to the notebook (rules_path)",
            )
        ]
    return lab5.file_cases(found, table, quiet)


#: The load study's launches, as the notebook's STUDY makes them (mpilab.studies.load.run).
STUDY_BASE, STUDY_MAPPING, STUDY_PROBE = "orfeo-thin-4", "node", 8


def study_gate(study):
    """The failed case that stops the grading of the correlations (empty: go on): one launch of
    ``study`` (its first run, binomial or its first algorithm) simulated again on the same
    realisation of background traffic gives the same times."""
    t = frame(study)
    title = "study is your simulation (one launch simulated again by the grader)"
    try:
        label = sorted(t["platform"].astype(str).unique())[0]
        algs = sorted(t["algorithm"].astype(str).unique())
        alg = "binomial" if "binomial" in algs else algs[0]
        rows = t[(t["platform"].astype(str) == label) & (t["algorithm"].astype(str) == alg)]
        nprocs = int(rows["nprocs"].iloc[0])
        sizes = sorted(int(b) for b in rows["bytes"].unique())
        fresh = load_study.rerun(
            label, alg, nprocs, (sizes[0], sizes[-1]), STUDY_PROBE, STUDY_BASE, STUDY_MAPPING
        )
    except (KeyError, IndexError, ValueError, TypeError, UsageError) as exc:
        return [Case(title, False, f"the grader cannot simulate a launch of study again: {exc}")]
    nbytes = sizes[len(sizes) // 2]
    got = float(rows[rows["bytes"] == nbytes][lab5.VALUE].median())
    want = [float(r[lab5.VALUE]) for r in fresh if int(r["bytes"]) == nbytes]
    ok = bool(want) and math.isclose(got, want[0], rel_tol=0.01, abs_tol=1e-3)
    return (
        []
        if ok
        else [
            Case(
                title,
                False,
                f"{alg} on {label}, P = {nprocs}, {nbytes} B: your table says "
                f"{lab5.VALUE} = {got:.4g} us, the simulation gives "
                f"{want[0] if want else float('nan'):.4g} us",
            )
        ]
    )


def corr_cases(answers, ctx):
    """Per algorithm: Pearson's r and Spearman's rho of probe_us and the slowest rank over the
    runs of the study, at every size (each coefficient one case)."""
    corr, study = answers["corr"], answers["study"]
    form = lab5.corr_form_cases(corr, study)
    if len(form) == 1 and not form[0].passed:
        return form
    gate = study_gate(study)
    if gate:
        return gate
    want = correlate(
        frame(study).assign(collective=lab5.COLLECTIVE),
        x="probe_us",
        y=lab5.VALUE,
        by=("algorithm", "bytes"),
    )
    mine = frame(corr)
    out = []
    for col, what in (("pearson_r", "Pearson's r"), ("spearman_rho", "Spearman's rho")):
        got = {(str(a), int(b)): float(r) for a, b, r in zip(mine["algorithm"], mine["bytes"], mine[col])}
        for alg, g in want.groupby("algorithm"):
            wrong = []
            for b, r in zip(g["bytes"], g[col]):
                m = got.get((str(alg), int(b)))
                same = m is not None and (
                    (math.isnan(m) and math.isnan(r)) or (not math.isnan(r) and abs(m - r) <= R_ATOL)
                )
                if not same:
                    wrong.append(f"{int(b)} B: {'none' if m is None else format(m, '.4f')}, expected {r:.4f}")
            out.append(
                Case(
                    f"{alg}: {what} at every size",
                    not wrong,
                    "; ".join(wrong[:3]) + f" (probe_us against {lab5.VALUE} over the runs of study)",
                )
            )
    return out


RUBRIC = {
    "decision_table": Function(table_cases, ("table", "quiet")),
    "regret_check": Function(regret_cases, ("regret", "quiet")),
    "rules_check": Function(rules_cases, ("rules_path", "table", "quiet")),
    "corr_check": Function(corr_cases, ("corr", "study")),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": (
        "4 to 5 hours for a typical MSc student, section by section below (the notebook's opening "
        "gives the same split; the decision table with pandas, winners then merged ranges, takes "
        "the longest); the notebook's own runs took 7.5 minutes on a busy 2-core machine (load average 17)"
    ),
    "sections": [
        ("1. The measurements (simulated sweep, about 30 s)", "15 min"),
        ("2. The decision table", "1 to 1.5 h"),
        ("3. Regret of a fixed choice", "30 min"),
        ("4. The rules file, written by hand, and a real Open MPI following it", "45 min to 1 h"),
        ("5. Load: busy network (simulated), the probe and the correlation, real load", "45 min to 1 h"),
        ("Written answers (three)", "45 min"),
    ],
    "hidden": {
        **{
            gid: "one point of quiet simulated again ("
            + "; ".join(f"{a} at P = {p}" for _, a, p in SPOT)
            + f"); {what}"
            for gid, what in {
                "decision_table": "the fastest algorithm at every (P, size) recomputed (1 % ties, one-point "
                "islands dropped at up to 10 % regret), and the merging",
                "regret_check": "every algorithm's mean and worst regret recomputed (median or mean)",
            }.items()
        },
        "rules_check": "the handed-in rules file read as Open MPI reads it at every measured point of quiet: "
        "the algorithm and, for the pipeline, the segment size quiet was simulated with (the kit's "
        "clone of Open MPI's pipeline, 8 KiB segments; 0 where a message was one segment)",
        "corr_check": "one launch of the load study simulated again on its realisation of background "
        "traffic; Pearson's r and Spearman's rho recomputed per algorithm and size",
    },
    "quotes": {
        "decision table rows (simulated THIN, slowest rank)": "len(table)",
        "lowest mean regret": (
            "regret.sort_values('mean_regret').iloc[0][['algorithm', 'mean_regret', 'max_regret']].to_dict()"
        ),
        "Pearson's r and Spearman's rho at 128 B (40 runs under random load, P = 16)": (
            "corr[corr.bytes == 128][['algorithm', 'n', 'pearson_r', 'spearman_rho']]"
            ".round(3).to_dict('records')"
        ),
        "the same at 16 KiB": (
            "corr[corr.bytes == 16384][['algorithm', 'n', 'pearson_r', 'spearman_rho']]"
            ".round(3).to_dict('records')"
        ),
        "the rules file's pipeline rules (segment size: the kit's clone's 8 KiB, or 0 up to 8 KiB)": (
            "rules.read_ompi_rules(rules_path).query('algorithm == \"pipeline\"')"
            "[['comm_size', 'msg_size', 'segsize']].to_dict('records')"
        ),
    },
    "wrong": {
        "decision_table": [
            (
                "winners by the mean over ranks (avg_us) instead of the slowest rank",
                {
                    "table": InNotebook(
                        "__import__('mpilab_key.decision', fromlist=['x'])"
                        ".decision_table(quiet, value='avg_us')"
                    ),
                    "quiet": InNotebook("quiet"),
                },
            ),
            (
                "one row per point (nothing merged)",
                {
                    "table": InNotebook(
                        "fastest(quiet).assign(collective='bcast', nprocs_min="
                        "lambda d: d.nprocs, nprocs_max=lambda d: d.nprocs, "
                        "bytes_min=lambda d: d.bytes, bytes_max=lambda d: d.bytes)"
                    ),
                    "quiet": InNotebook("quiet"),
                },
            ),
        ],
        "regret_check": [
            (
                "time / best time (no - 1)",
                {
                    "regret": InNotebook(
                        "regret.assign(mean_regret=regret.mean_regret + 1, max_regret=regret.max_regret + 1)"
                    ),
                    "quiet": InNotebook("quiet"),
                },
            )
        ],
        "corr_check": [
            (
                "correlated with the mean over ranks (avg_us)",
                {
                    "corr": InNotebook(
                        "corr.assign(pearson_r=[g.probe_us.corr(g.avg_us) for _, g in "
                        "study.groupby(['algorithm', 'bytes'])], spearman_rho=[g.probe_us.corr("
                        "g.avg_us, method='spearman') for _, g in study.groupby(['algorithm', 'bytes'])])"
                    ),
                    "study": InNotebook("study"),
                },
            ),
            (
                "Spearman's rho left out (Pearson's r in both columns)",
                {
                    "corr": InNotebook("corr.assign(spearman_rho=corr.pearson_r)"),
                    "study": InNotebook("study"),
                },
            ),
        ],
    },
}
