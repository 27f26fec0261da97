"""Answers handed in as data, and the trusted grader that judges them (no nbgrader needed here)."""

import json
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import sympy  # noqa: E402

from mpilab.grade import answers, judge  # noqa: E402
from mpilab.grade.cases import Case, CellVerdict  # noqa: E402
from mpilab.grade.checks import costs as cost_checks  # noqa: E402
from mpilab.grade.checks import plots
from mpilab.grade.verdicts import verdict_outputs  # noqa: E402
from mpilab.model.costs import alpha, beta, n, p  # noqa: E402


def roundtrip(value):
    return answers.decode(json.loads(json.dumps(answers.encode(value))))


def test_values_come_back_as_data():
    assert roundtrip(None) is None
    assert roundtrip(3) == 3 and roundtrip(2.5) == 2.5 and roundtrip(float("nan")) != roundtrip(float("nan"))
    assert roundtrip("ring.c") == "ring.c"
    e = (p - 1) * (alpha + n * beta)
    assert sympy.simplify(roundtrip(e) - e) == 0
    df = pd.DataFrame({"algorithm": ["ring", "bruck"], "bytes": [4, 8], "us": [1.5, None]})
    back = roundtrip(df)
    assert list(back.columns) == ["algorithm", "bytes", "us"] and back["bytes"].tolist() == [4, 8]
    assert roundtrip({"ring": 7, "bruck": [1, 2]}) == {"ring": 7, "bruck": [1, 2]}
    with pytest.raises(Exception, match="cannot hand in a set"):
        answers.encode({1, 2})


def test_a_figure_travels_as_its_axes_and_lines():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [3.0, 2.0, 1.0], label="ring")
    ax.set_xscale("log")
    ax.set_xlabel("bytes (B)")
    ax.legend()
    data = roundtrip(fig)
    a = data["axes"][0]
    assert a["xscale"] == "log" and a["yscale"] == "linear" and a["xlabel"] == "bytes (B)"
    assert a["legend"] == ["ring"] and a["lines"][0]["x"] == [1, 2, 4]
    plt.close(fig)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch /tmp/pwned')",
        "Symbol('x').__class__",
        "Add(Symbol('p'), eval('1'))",
        "Pow(Integer(10), Integer(100000))",
        "Symbol('p', evaluate=lambda: 1)",
        "(" * 500 + "1" + ")" * 500,
        "Integer(" + "9" * 40 + ")",
        "x" * 30000,
        "lambda: 1",
        "Add(*[Symbol('p')])",
    ],
)
def test_a_hostile_expression_is_refused_without_running_it(text, tmp_path):
    with pytest.raises(answers.BadAnswer):
        answers.safe_sympy(text)


def test_srepr_of_every_cost_form_is_read_back():
    for e in [
        sympy.ceiling(sympy.log(p, 2)) * alpha + (p - 1) * n * beta,
        sympy.Piecewise((alpha, sympy.Eq(p, 2)), (2 * alpha, True)),
        sympy.Max(0, sympy.Min(4, p - 1)) * beta,
        (p - 1) / p * n * beta + sympy.Rational(1, 2) * alpha,
    ]:
        assert sympy.simplify(answers.safe_sympy(sympy.srepr(e)) - e) == 0


def test_only_the_cells_own_payload_counts():
    payload = answers.payload("cost_ring", {"cost_ring": (p - 1) * alpha})
    other = answers.payload("cost_bruck", {"cost_bruck": p * alpha})
    cell = {
        "metadata": {"nbgrader": {"grade_id": "cost_ring"}},
        "outputs": [
            {"output_type": "display_data", "data": {answers.MIME: other}},
            {"output_type": "display_data", "data": {answers.MIME: payload}},
            {"output_type": "stream", "text": "PASS"},
        ],
    }
    assert answers.collect(cell) == payload["answers"]
    cell["outputs"] = cell["outputs"][:1]
    assert answers.collect(cell) is None


def test_costs_are_judged_term_by_term():
    want = (p - 1) * alpha + (p - 1) * n * beta
    cases = cost_checks.value_cases((p - 1) * alpha + p * n * beta, want)
    assert [c.passed for c in cases] == [True, False]
    assert "the β coefficient differs at p = 1, n = 1 bytes: yours is 1, expected 0" in cases[1].message
    assert CellVerdict("cost_ring", 1, cases).score == 0.5
    assert all(c.passed for c in cost_checks.value_cases("(p-1)*(alpha+n*beta)", want))
    assert not any(c.passed for c in cost_checks.value_cases(None, want))
    form = cost_checks.form_cases(p * alpha)
    assert [c.passed for c in form] == [True, True, False, True]


def test_an_empty_figure_claiming_log_axes_earns_nothing():
    table = pd.DataFrame({"algorithm": ["ring", "ring"], "bytes": [4, 8], "us": [1.0, 2.0]})
    forged = {
        "axes": [
            {
                "xscale": "log",
                "yscale": "log",
                "xlabel": "bytes (B)",
                "ylabel": "us (us)",
                "title": "",
                "legend": ["ring"],
                "lines": [],
            }
        ]
    }
    cases = plots.latency_plot_cases(forged, table, y="us")
    assert CellVerdict("plot", 2, cases).score == 0
    forged["axes"][0]["lines"] = [{"label": "ring", "x": [4, 8], "y": [1.0, 2.0]}]
    assert CellVerdict("plot", 2, plots.latency_plot_cases(forged, table, y="us")).score == 2


def test_scores_and_the_outputs_nbgrader_reads():
    v = CellVerdict(
        "x", 3, [Case("a", True), Case("b", False, "wrong", hidden=True), Case("c", True, weight=2)]
    )
    assert v.score == 2.25 and "hidden: b: wrong" in v.text()
    outs = verdict_outputs(v, ["a"])
    assert [o["output_type"] for o in outs] == ["stream", "execute_result"]
    assert outs[1]["data"]["text/plain"] == "2.25"
    assert verdict_outputs(CellVerdict("x", 1, [Case("a", False, "no")]), None)[0]["output_type"] == "error"
    assert [o["output_type"] for o in verdict_outputs(CellVerdict("x", 1, [Case("a", True)]), [])] == [
        "stream"
    ]


def _cost(name, expr):
    return {name: answers.encode(expr)}


def _request(submission, cells):
    """A request for lab 2's cells (``{grade_id: {"points", "answers"}}``) on one folder."""
    return {"lab": "lab2", "submission": str(submission), "workdir": str(submission), "cells": cells}


def test_the_judge_runs_as_a_fresh_isolated_process(tmp_path):
    """A request for lab 2's cost cells: right, wrong, forged and missing answers."""
    request = _request(
        tmp_path,
        {
            "cost_ring": {"points": 1, "answers": _cost("cost_ring", (p - 1) * (alpha + n * beta))},
            "cost_bruck": {
                "points": 2,
                "answers": {"cost_bruck": {"kind": "sympy", "srepr": "__import__('os')"}},
            },
            "cost_pairwise": {"points": 1, "answers": None},
            "cost_gather_bcast": {
                "points": 1,
                "answers": {"cost_gather_bcast": {"kind": "text", "value": "PASS"}},
            },
            "ring_correct": {"points": 3, "answers": {}},
        },
    )
    # a module named like the kit in the working directory must not be what the judge imports
    (tmp_path / "mpilab").mkdir()
    (tmp_path / "mpilab" / "__init__.py").write_text("raise SystemExit('imported from the cwd')\n")
    proc = subprocess.run(
        [sys.executable, "-I", "-m", "mpilab.grade.judge"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    v = {k: CellVerdict.from_dict(d) for k, d in json.loads(proc.stdout)["verdicts"].items()}
    assert v["cost_ring"].score == 1
    assert (
        v["cost_bruck"].score == 0
        and "not allowed" in v["cost_bruck"].text() + v["cost_bruck"].cases[0].message
    )
    assert v["cost_pairwise"].score == 0 and "handed nothing in" in v["cost_pairwise"].text()
    assert v["cost_gather_bcast"].score == 0
    assert v["ring_correct"].score == 0 and "ring.c is not in the submission" in v["ring_correct"].text()


def test_a_verdict_that_crashes_is_reported_not_raised():
    class Broken:
        needs = ()

        def __call__(self, answers, ctx):
            raise ZeroDivisionError("bug")

    v = judge.judge_cell(Broken(), "x", {"points": 2}, None)
    assert v.score == 0 and "the grader failed on this cell (ZeroDivisionError: bug)" in v.text()


def test_an_assignment_without_a_rubric_scores_nothing():
    """A notebook of an assignment the answer key has no rubric for: its test cells get 0 and say
    why, whatever they printed (a forged pass included); 'outputs' is the instructor's opt-in."""
    import nbformat

    from mpilab.grade.verdicts import TrustedVerdicts

    cell = nbformat.v4.new_code_cell(
        "check('q1')",
        metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "q1", "points": 2}},
    )
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="all checks passed\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    resources = {"nbgrader": {"assignment": "no_such_lab", "student": "s"}}
    out, _ = TrustedVerdicts().preprocess(nb, resources)
    (o,) = out.cells[0].outputs
    assert o["output_type"] == "error" and "no rubric for no_such_lab" in "\n".join(o["traceback"])
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="all checks passed\n")]
    kept, _ = TrustedVerdicts(without_rubric="outputs").preprocess(
        nbformat.v4.new_notebook(cells=[cell]), resources
    )
    assert kept.cells[0].outputs[0]["text"] == "all checks passed\n"


@pytest.mark.mpi  # the judge builds the ring it is handed
def test_the_judge_runs_confined_on_copies_and_sees_no_course(tmp_path, monkeypatch):
    """Where runs can be confined, the judge is: as the sandbox user (not root), reading the key
    (its verdicts are right) and copies of the submission, with the course out of its sight."""
    from mpilab.grade import sandbox
    from mpilab.grade.verdicts import TrustedVerdicts

    if not sandbox.isolation()[0]:
        pytest.skip(f"runs cannot be confined here: {sandbox.isolation()[1]}")
    course = tmp_path / "course"
    sub = course / "submitted" / "ann" / "lab2"
    sub.mkdir(parents=True)
    (sub / "ring.c").write_text("int x;\n")
    os.chmod(sub / "ring.c", 0o600)  # as a student's file may be: the judge reads its copy
    (course / "gradebook.db").write_text("")
    monkeypatch.setenv("MPILAB_COURSE_ROOT", str(course))
    cells = {
        "cost_ring": {"points": 1, "answers": _cost("cost_ring", (p - 1) * (alpha + n * beta))},
        "cost_pairwise": {"points": 1, "answers": _cost("cost_pairwise", p * alpha)},
        "ring_correct": {"points": 3, "answers": {}},
    }
    tv = TrustedVerdicts()
    v = tv.judge(_request(sub, cells))
    assert v["cost_ring"].score == 1 and v["cost_pairwise"].score == 0
    # the copy of ring.c was read: it is built (and fails to), not "missing"
    assert "not in the submission" not in v["ring_correct"].text(), v["ring_correct"].text()
    assert tv.whereabouts == {"uid": sandbox.sandbox_user()[1], "course_visible": False}
    if os.geteuid() == 0:
        assert tv.whereabouts["uid"] != 0
