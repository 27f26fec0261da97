"""The judge's side of the cheating suite, in-process and fast: what a cheating notebook can hand
in scores 0 on every judged lab's automatic cells.

tests/test_cheating.py grades the cheating notebooks end to end (minutes per lab); whatever a
kernel does, all that reaches the trusted grader is its payloads: the dummies the cheats define
(None, empty tables, blank figures) and forged payloads that claim a pass. This test hands both
to each rubric directly, with the cell's real answer names (a forger who read the notebook), and
the cheats' cost payloads (text that escaped parse_expr to exec, strings sympify evaluated) in
every answer.
"""

import importlib.util

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from cheats import COST_LIST_ITEM, COST_TEXT  # noqa: E402
from course import ROOT  # noqa: E402
from test_cheating import _automatic  # noqa: E402

from mpilab.grade import answers, judge  # noqa: E402
from mpilab.grade.cases import CellVerdict  # noqa: E402
from mpilab.grade.labs import cells  # noqa: E402

LABS = sorted(
    p.name
    for p in (ROOT / "solutions").glob("lab*")
    if (p / f"{p.name}.ipynb").exists()
    and importlib.util.find_spec(f"mpilab_key.rubrics.{p.name}") is not None
    and importlib.util.find_spec(f"mpilab.grade.labs.{p.name}") is not None
)


def _dummy(name):
    """The cheats' dummy for an answer name (tests/cheats.py: figures, tables, None)."""
    if name.startswith("fig"):
        fig = plt.figure()
        fig.add_subplot()
        return fig
    if name in ("at4", "at16k", "s8") or name.endswith(("_df", "results", "table")):
        return pd.DataFrame()
    return None


def _verdicts(lab, payload):
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    points = _automatic(lab)
    out = {}
    for gid, cell in cells(lab).items():
        if gid not in rubric.RUBRIC:
            continue
        out[gid] = judge.judge_cell(
            rubric.RUBRIC[gid],
            gid,
            {"points": points.get(gid, 1), "answers": payload(cell)},
            judge.Context(lab, ROOT / "labs" / lab, ROOT / "labs" / lab),
        ).score
    return out


#: make test runs labs 0 and 2 (the %%px road, the C harness); the others run in make test-all.
PARAMS = [pytest.param(lab, marks=() if lab in ("lab0", "lab2") else pytest.mark.extended) for lab in LABS]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.parametrize("lab", PARAMS)
def test_dummies_score_nothing(lab):
    got = _verdicts(lab, lambda cell: {n: answers.encode(_dummy(n)) for n in cell.names})
    plt.close("all")
    assert not any(got.values()), got


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.parametrize("lab", PARAMS)
def test_forged_passes_score_nothing(lab):
    forged = {"kind": "text", "value": "PASS", "verdict": {"score": 99, "passed": True}}
    got = _verdicts(lab, lambda cell: {n: dict(forged) for n in cell.names})
    assert not any(got.values()), got


@pytest.mark.mpi  # lab 2's cost cells compile the C harness
@pytest.mark.parametrize("lab", LABS)
@pytest.mark.parametrize("payload", [COST_TEXT, [COST_LIST_ITEM]], ids=["text", "list"])
def test_cost_payloads_are_data_in_every_answer(lab, payload, tmp_path, monkeypatch):
    """Every answer of every cell is the escape: it scores nothing, and its code never runs
    (it would patch CellVerdict.to_dict and leave a file in MPILAB_COURSE_ROOT)."""
    monkeypatch.setenv("MPILAB_COURSE_ROOT", str(tmp_path))
    to_dict = CellVerdict.to_dict
    got = _verdicts(lab, lambda cell: {n: answers.encode(payload) for n in cell.names})
    assert CellVerdict.to_dict is to_dict and not list(tmp_path.iterdir())
    assert not any(got.values()), got
