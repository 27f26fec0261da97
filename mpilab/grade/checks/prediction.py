"""Checks of predict-then-run (:mod:`mpilab.model.predict`): a prediction was made, of the whole
grid, before the measurement. Its accuracy is not graded."""

import datetime as dt

import pandas as pd

from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict, missing


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


class PredictionVerdict(Verdict):
    """The grader's verdict on a prediction handed in as (table, made_at, measured)."""

    def __init__(self, table, made_at, measured, algorithms, nprocs, sizes, record=None):
        self.names = (table, made_at, measured)
        self.needs = self.names
        self.grid = (tuple(algorithms), tuple(nprocs), tuple(sizes))
        self.record = record

    def cases(self, answers, ctx):
        bad = missing(answers, *self.names)
        if bad:
            return [bad]
        out = prediction_cases(*(answers[n] for n in self.names), *self.grid)
        if self.record:
            out.append(
                Case(
                    f"the notebook wrote {self.record}",
                    ctx.written_file(self.record) is not None,
                    f"{self.record} is not next to the notebook: make the prediction with predict.predict",
                )
            )
        return out
