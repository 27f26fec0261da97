"""Checks of predict-then-run (:mod:`mpilab.model.predict`): a prediction was made, of the whole
grid, before the measurement. Its accuracy is not graded.

The notebook's visible check (:func:`prediction_cases`) also compares the prediction's time with
the measurement's. The grader does not: both times are typed in the student's kernel, so its
verdict (:class:`PredictionVerdict`) recomputes the prediction from the student's own cost
answers instead (:func:`recomputed_cases`).
"""

import datetime as dt
import json
import math

import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.grade.answers import BadAnswer
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict, missing
from mpilab.model import predict


def _when(text):
    try:
        t = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def prediction_cases(table, made_at, measured, algorithms, nprocs, sizes):
    """Cases: the prediction covers every algorithm at every (P, n) of the grid, and it was made
    before the first measurement of ``measured`` (its ``date`` column)."""
    if not isinstance(table, pd.DataFrame) or not {"algorithm", "nprocs", "bytes", "predicted_us"} <= set(
        table.columns
    ):
        return [Case("the prediction", False, "hand in prediction.table (made by predict.predict)")]
    have = {
        (str(a), int(p), int(n))
        for a, p, n in zip(table["algorithm"], table["nprocs"], table["bytes"])
        if pd.notna(a)
    }
    want = {(a, p, n) for a in algorithms for p in nprocs for n in sizes}
    lacking = sorted(want - have)
    out = [
        Case(
            "the prediction covers every algorithm at every P and size",
            not lacking,
            f"{len(lacking)} points are missing, e.g. {lacking[0][0]} at P = {lacking[0][1]}, "
            f"{lacking[0][2]} B"
            if lacking
            else "",
        )
    ]
    made = _when(made_at)
    dates = (
        [d for d in map(_when, measured["date"]) if d]
        if isinstance(measured, pd.DataFrame) and "date" in measured.columns
        else []
    )
    if made is None:
        out.append(Case("the prediction came before the measurement", False, "no time of the prediction"))
    elif not dates:
        out.append(
            Case(
                "the prediction came before the measurement",
                False,
                "the measurement has no date column: hand in the table bench.benchmark_c returned",
            )
        )
    else:
        first = min(dates)
        out.append(
            Case(
                "the prediction came before the measurement",
                made <= first,
                f"the prediction was made at {made.isoformat()}, after the measurement started "
                f"({first.isoformat()}): predict first, then run",
            )
        )
    return out


def recomputed_cases(table, expressions, nprocs, sizes, alpha_us, beta_us_per_byte, segment=8192):
    """The grader's case: ``table`` is the prediction of ``expressions`` (the student's own cost
    answers, as handed in) on the whole grid, at the grader's α and β.

    A prediction's time is typed in the student's kernel and proves nothing; what it predicts
    can be recomputed, so that is what earns the point.
    """
    title = "the prediction is your costs evaluated on the whole grid"
    if not isinstance(table, pd.DataFrame) or not {"algorithm", "nprocs", "bytes", "predicted_us"} <= set(
        table.columns
    ):
        return [Case(title, False, "hand in prediction.table (made by predict.predict)")]
    unread = [a for a, e in expressions.items() if e is None or isinstance(e, BadAnswer)]
    if unread:
        return [
            Case(
                title,
                False,
                f"your cost of {unread[0]} was not handed in (or cannot be read): the grader "
                "recomputes the prediction from your cost answers",
            )
        ]
    try:
        _, rows = predict.predicted_rows(expressions, nprocs, sizes, alpha_us, beta_us_per_byte, segment)
    except UsageError as exc:
        return [Case(title, False, f"your costs cannot be evaluated: {exc}")]
    mine = {}
    for a, q, b, v in zip(table["algorithm"], table["nprocs"], table["bytes"], table["predicted_us"]):
        try:
            mine[(str(a), int(q), int(b))] = float(v)
        except (TypeError, ValueError):
            continue
    for r in rows:
        point = (r["algorithm"], r["nprocs"], r["bytes"])
        got, want = mine.get(point), r["predicted_us"]
        same = got is not None and (
            (math.isnan(got) and math.isnan(want))
            or (math.isfinite(want) and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9))
        )
        if not same:
            where = f"{point[0]} at P = {point[1]}, {point[2]} B"
            return [
                Case(
                    title,
                    False,
                    f"{where}: the prediction has no row"
                    if got is None
                    else f"{where}: the prediction says {got:.6g} us, your cost there gives {want:.6g} us",
                )
            ]
    return [Case(title, True)]


#: The largest prediction record read (bytes): a grid's record is some kB.
RECORD_MAX_BYTES = 4 << 20


def _points(rows):
    """``{(algorithm, P, bytes): predicted µs}`` of a table's or a record's rows (unreadable rows
    left out)."""
    out = {}
    for r in rows:
        try:
            out[(str(r["algorithm"]), int(r["nprocs"]), int(r["bytes"]))] = float(r["predicted_us"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def record_case(path, name, table):
    """The case: the file ``path`` (``name`` next to the notebook, None when missing) is a record
    of :func:`mpilab.model.predict.predict` holding the prediction ``table`` handed in. Read as
    JSON data, at most :data:`RECORD_MAX_BYTES`."""
    title = f"the notebook wrote {name}"
    if path is None:
        return Case(
            title, False, f"{name} is not next to the notebook: make the prediction with predict.predict"
        )
    try:
        if path.stat().st_size > RECORD_MAX_BYTES:
            raise ValueError(f"larger than {RECORD_MAX_BYTES} bytes")
        record = json.loads(path.read_text())
        rows = record["rows"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError("its rows are not a list of points")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Case(
            title, False, f"{name} is not a record of predict.predict ({exc}): make the prediction with it"
        )
    kept, handed = _points(rows), _points(table.to_dict("records"))
    same = kept.keys() == handed.keys() and all(
        math.isclose(kept[k], handed[k], rel_tol=1e-9, abs_tol=1e-12)
        or (math.isnan(kept[k]) and math.isnan(handed[k]))
        for k in kept
    )
    return Case(
        title,
        same,
        ""
        if same
        else f"{name} does not hold the prediction handed in: make the prediction with predict.predict",
    )


class PredictionVerdict(Verdict):
    """The grader's verdict on a prediction: the handed-in table must be what the student's own
    cost answers (the cells ``costs`` names) give on the grid at the grader's α and β; and the
    notebook must have recorded that prediction (``record``), which counts only with the first.
    When it was made is not graded: a time typed in the notebook proves nothing."""

    def __init__(self, table, costs, grid, alpha_beta, segment=8192, record=None):
        """``costs``: ``{algorithm: (grade_id, answer name)}``; ``grid``: ``(nprocs, sizes)``;
        ``alpha_beta()``: the α (µs) and β (µs/B) the notebook predicts with, computed here."""
        self.table = table
        self.needs = (table,)
        self.costs = dict(costs)
        self.grid = tuple(map(tuple, grid))
        self.alpha_beta = alpha_beta
        self.segment = segment
        self.record = record

    def cases(self, answers, ctx):
        bad = missing(answers, self.table)
        if bad:
            return [bad]
        expressions = {a: ctx.answer(gid, name) for a, (gid, name) in self.costs.items()}
        out = recomputed_cases(answers[self.table], expressions, *self.grid, *self.alpha_beta(), self.segment)
        if self.record:
            failed = [c for c in out if not c.passed]
            if failed:  # a record of a prediction that is not the student's own earns nothing
                why = f"not credited: {failed[0].name} fails"
                out.append(Case(f"the notebook wrote {self.record}", False, why))
            else:
                out.append(record_case(ctx.written_file(self.record), self.record, answers[self.table]))
        return out
