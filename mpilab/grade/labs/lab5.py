"""Lab 5's graded cells, as the notebook sees them: the answers each hands in, the visible checks.

The visible checks look at the form of the answers (columns, one row per algorithm, every
measured point in one range of the decision table) and at what two of the student's own answers
must agree on (the rules file and the decision table). What the values should be — the fastest
algorithm at each point, the regrets, the correlations — the grader recomputes from the tables
handed in.
"""

import os

from mpilab.core.errors import ParseError
from mpilab.grade.cases import Case
from mpilab.grade.checks.tables import frame, slim, table_case
from mpilab.grade.labs import Cell
from mpilab.measure import libalgs, rules

#: The collective of the lab and the timing column its choices use.
COLLECTIVE, VALUE = "bcast", "maxrank_avg_us"
TABLE_COLUMNS = ("nprocs_min", "nprocs_max", "bytes_min", "bytes_max", "algorithm")
RESULT_COLUMNS = ("algorithm", "nprocs", "bytes", VALUE)
REGRET_COLUMNS = ("algorithm", "mean_regret", "max_regret")
CORR_COLUMNS = ("algorithm", "bytes", "pearson_r", "spearman_rho")


def points(results):
    """The measured (nprocs, bytes) points of a results table, sorted."""
    return sorted({(int(p), int(b)) for p, b in zip(results["nprocs"], results["bytes"])})


def lookup(table, nprocs, nbytes):
    """The algorithms of the rows of a decision table whose ranges (both ends included) hold the
    point: one name when the table says, none or several when it does not."""
    t = frame(table)
    hit = t[
        (t["nprocs_min"] <= nprocs)
        & (nprocs <= t["nprocs_max"])
        & (t["bytes_min"] <= nbytes)
        & (nbytes <= t["bytes_max"])
    ]
    return [str(a) for a in hit["algorithm"]]


def coverage_case(table, results):
    """A case: every measured point of ``results`` is in exactly one row of ``table``."""
    holes, twice = [], []
    for p, b in points(frame(results)):
        n = len(lookup(table, p, b))
        (holes if n == 0 else twice if n > 1 else []).append(f"P = {p}, {b} B")
    msg = []
    if holes:
        msg.append(f"no range holds {', '.join(holes[:4])}" + (" ..." if len(holes) > 4 else ""))
    if twice:
        msg.append(f"several ranges hold {', '.join(twice[:4])}" + (" ..." if len(twice) > 4 else ""))
    return Case("every measured point is in one range of the table", not msg, "; ".join(msg))


def table_form_cases(table, quiet):
    bad = table_case(quiet, "quiet", RESULT_COLUMNS) or table_case(table, "table", TABLE_COLUMNS)
    if bad:
        return [bad]
    try:
        frame(table)[list(TABLE_COLUMNS[:4])].astype(float)
    except (TypeError, ValueError):
        return [Case("table's bounds are numbers", False, "nprocs_min .. bytes_max must be numbers")]
    return [coverage_case(table, quiet)]


def regret_form_cases(regret, quiet):
    bad = table_case(quiet, "quiet", RESULT_COLUMNS) or table_case(regret, "regret", REGRET_COLUMNS)
    if bad:
        return [bad]
    regret, quiet = frame(regret), frame(quiet)
    want = sorted(set(quiet["algorithm"].astype(str)))
    got = sorted(regret["algorithm"].astype(str))
    out = [Case("regret has one row per algorithm of quiet", got == want, f"regret has {got}, quiet {want}")]
    try:
        mean, top = regret["mean_regret"].astype(float), regret["max_regret"].astype(float)
        ok = bool(((mean >= 0) & (top >= mean - 1e-12)).all())
    except (TypeError, ValueError):
        ok = False
    out.append(
        Case(
            "regrets are at least 0 and the worst at least the mean",
            ok,
            "a regret is time / best time - 1 >= 0, and max_regret >= mean_regret",
        )
    )
    return out


def rules_cases(rules_path, table, quiet):
    """The file at ``rules_path`` (next to the notebook), read as Open MPI reads it, picks the
    algorithm ``table`` gives at every measured point of ``quiet``: one case per process count."""
    bad = table_form_cases(table, quiet)
    if len(bad) == 1 and not bad[0].passed:
        return bad
    if not isinstance(rules_path, (str, os.PathLike)):
        return [
            Case(
                "rules_path is a file",
                False,
                f"rules_path should be the file's path, got {type(rules_path).__name__}",
            )
        ]
    name = os.path.basename(str(rules_path))
    if not os.path.isfile(name):
        return [
            Case(
                "the rules file is next to the notebook",
                False,
                f"no file {name!r} next to this notebook: write the rules file there",
            )
        ]
    return file_cases(name, table, quiet)


def segment_problem(segsize, measured, covered):
    """Why a rule's segment size is not the one its points were measured with (None when it is).

    ``measured`` is the segment size each point the rule covers was simulated with
    (:func:`libalgs.segment_size`, 0 where the message went in one piece): under SMPI the sweep
    runs the kit's clone of Open MPI's pipeline (libalgs ``kit:ompi_pipeline``) with the kit's
    8 KiB segments, so a message of at most 8 KiB is one piece. ``covered`` are those points'
    sizes. Where the messages were cut, the rule must give one of the segment sizes they were cut
    into; where none was, the rule must not cut them either (0, or a segment at least as large
    as the largest message).
    """
    used = sorted({m for m in measured if m})
    clone = "the simulation ran the kit's clone of Open MPI's pipeline"
    if used:
        return None if segsize in used else f"{clone} with {' or '.join(map(str, used))}-byte segments"
    return (
        None
        if segsize == 0 or segsize >= max(covered)
        else f"{clone}, and none of them was larger than its segments: each went whole (segment size 0)"
    )


def file_cases(path, table, quiet):
    """The rules file at ``path`` against ``table`` at every measured point of ``quiet``: the
    algorithm the table names, and for a segmented one (the pipeline) the segments it was
    measured with (``quiet`` is simulated with the kit's clone of Open MPI's pipeline and its 8 KiB
    segments, :func:`libalgs.segment_size`)."""
    try:
        read = rules.read_ompi_rules(path)
    except ParseError as exc:
        return [Case("Open MPI can read the file", False, str(exc))]
    wrong, by_rule = {}, {}
    for p, b in points(frame(quiet)):
        wrong.setdefault(p, [])
        says = lookup(table, p, b)
        rule = rules.rules_rule(read, COLLECTIVE, p, b)
        got = None if rule is None else rule["algorithm"]
        if len(says) == 1 and got != says[0]:
            wrong[p].append(
                f"{b} B: the file makes Open MPI run {got or 'its fixed rules'}, the table says {says[0]}"
            )
        elif got is not None and libalgs.segmented(COLLECTIVE, got):
            key = (int(rule["comm_size"]), int(rule["msg_size"]), got, int(rule["segsize"]))
            by_rule.setdefault(key, []).append((p, b))
    for (_comm, msg, alg, seg), pts in by_rule.items():
        why = segment_problem(
            seg, [libalgs.segment_size("smpi", COLLECTIVE, alg, q, b) for q, b in pts], [b for _, b in pts]
        )
        for q in sorted({q for q, _ in pts}) if why else ():
            wrong[q].append(
                f"the rule from {msg} B cuts {alg} into {seg}-byte segments (0: none), but the "
                f"messages of quiet it covers at P = {q} were measured otherwise: {why}"
            )
    return [
        Case(f"P = {p}: the file follows the table", not w, "; ".join(w[:3]))
        for p, w in sorted(wrong.items())
    ]


def corr_form_cases(corr, study):
    """The visible checks of the correlation table: one row per algorithm and size of ``study``
    (the runs under randomised load), both coefficients between -1 and 1."""
    bad = table_case(study, "study", RESULT_COLUMNS + ("probe_us",)) or table_case(corr, "corr", CORR_COLUMNS)
    if bad:
        return [bad]
    corr, study = frame(corr), frame(study)
    want = sorted({(str(a), int(b)) for a, b in zip(study["algorithm"], study["bytes"])})
    got = sorted({(str(a), int(b)) for a, b in zip(corr["algorithm"], corr["bytes"])})
    out = [
        Case(
            "corr has one row per algorithm and size of study",
            got == want and len(corr) == len(want),
            f"corr has {len(corr)} rows for {len(got)} (algorithm, size) pairs; study has {len(want)}",
        )
    ]
    for col in ("pearson_r", "spearman_rho"):
        try:
            r = corr[col].astype(float)
            ok = bool(((r.abs() <= 1 + 1e-9) | r.isna()).all())
        except (TypeError, ValueError):
            ok = False
        out.append(Case(f"{col} is between -1 and 1", ok, "a correlation coefficient lies between -1 and 1"))
    return out


#: The columns of a results table the grader reads (the rest stays in the notebook).
KEPT = ("collective", "algorithm", "platform", "nprocs", "bytes", "repetition", "avg_us", VALUE, "probe_us")


def _slim(answer, results):
    return answer, slim(results, KEPT)


def _rules(path, table, quiet):
    return (str(path) if isinstance(path, (str, os.PathLike)) else None), table, slim(quiet, KEPT)


_NOTE = "The grader recomputes the values from your table after you hand in."

CELLS = {
    "decision_table": Cell(("table", "quiet"), table_form_cases, _NOTE, _slim),
    "regret_check": Cell(("regret", "quiet"), regret_form_cases, _NOTE, _slim),
    "rules_check": Cell(
        ("rules_path", "table", "quiet"),
        rules_cases,
        "The grader reads the file you handed in again, as Open MPI reads it.",
        _rules,
    ),
    "corr_check": Cell(("corr", "study"), corr_form_cases, _NOTE, _slim),
}
