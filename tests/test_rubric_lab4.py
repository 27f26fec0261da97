"""Lab 4's checks on right and wrong answers: the notebook's visible checks
(mpilab.grade.labs.lab4) and the trusted grader's verdicts (the answer key's rubric), on
schedules, model options against real SMPI traces, the error table and a calibrated platform.

Answers go through the same path as in a notebook: the cell's ``prepare`` turns them into data,
they are encoded and decoded as JSON, and the rubric judges them.
"""

import warnings
from pathlib import Path

import course
import numpy as np
import pandas as pd
import pytest

from mpilab.grade.labs import lab4
from mpilab.measure import trace
from mpilab.model import algorithms, costs, p2p, schedules
from mpilab.simulate import calibration, clusters
from mpilab_key.rubrics import lab4 as rubric

LINEAR_COST = "(p - 1)*(alpha + n*beta)"


def linear(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        if r == root:
            for dst in range(p):
                if dst != root:
                    progs[r].send(dst, n)
        else:
            progs[r].recv(root, n)
    return progs


def chain(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        v = (r - root) % p
        if v > 0:
            progs[r].recv((r - 1) % p, n)
        if v < p - 1:
            progs[r].send((r + 1) % p, n)
    return progs


def forwards_early(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        v = (r - root) % p
        if v < p - 1:
            progs[r].isend((r + 1) % p, n)
        if v > 0:
            progs[r].recv((r - 1) % p, n)
    return progs


def judged(gid, workdir=".", points=2, **given):
    return course.judged("lab4", gid, points, workdir, **given)


def test_bcast_schedules_right():
    assert judged("linear_bcast_check", linear_bcast=linear, cost_linear_bcast=LINEAR_COST).score == 2
    # a chain also takes (p - 1) hops of one message each: the same time, every rank served
    assert judged("linear_bcast_check", linear_bcast=chain, cost_linear_bcast=LINEAR_COST).score == 2
    assert all(c.passed for c in lab4.linear_bcast_cases(linear, LINEAR_COST))


#: Wrong schedules with the right cost: the visible check's message, and the grader's score of
#: 13 cases (5 visible and 6 hidden (p, root), the cost's α and β terms), 2 points x passed / 13.
@pytest.mark.parametrize(
    "build, message, score",
    [
        # no case served: the two cost terms only, 2 x 2 / 13
        (
            lambda p, n, root: linear(p, n, root)[:-1],
            "p = 2, root = 0: 1 programs for 2 ranks: return one per rank",
            0.31,
        ),
        (lambda p, n, root: linear(p, n, root)[::-1], "list item 0 is the program of rank", 0.31),
        (lambda p, n, root: 1 / 0, "p = 2, root = 0: your function raised ZeroDivisionError", 0.31),
        # a binomial tree takes the linear time at p = 2 and 3 only (and 2 of 13 for the cost): 4 of 13
        (
            lambda p, n, root: algorithms.schedule("binomial", p, n, root),
            "p = 5, root = 0: your schedule takes 7.5 us",
            0.62,
        ),
        # forwarding before receiving is right only at p = 2 (no one forwards): 3 of 13
        (forwards_early, "p = 3, root = 0: rank 1 sends to rank 2 at 0 us, before it has the buffer", 0.46),
        (
            lambda p, n, root: [schedules.Program(r) for r in range(p)],
            "p = 2, root = 0: rank(s) [1] never receive",
            0.31,
        ),
    ],
)
def test_bcast_schedules_wrong(build, message, score):
    """The visible check names what is wrong; the grader scores each (p, root) on its own."""
    visible = lab4.linear_bcast_cases(build, LINEAR_COST)
    text = "\n".join(c.line() for c in visible if not c.passed)
    assert message in text, text
    v = judged("linear_bcast_check", linear_bcast=build, cost_linear_bcast=LINEAR_COST)
    assert v.score == score, v.text()


def test_hidden_roots_and_the_cost_score_per_case():
    def root_zero_only(p, n, root=0):
        return linear(p, n, 0)

    # visible: root 0 at p = 2, 3, 5, 8 pass, root 2 at p = 5 does not
    visible = lab4.linear_bcast_cases(root_zero_only, LINEAR_COST)
    assert [c.passed for c in visible[:5]] == [True] * 4 + [False]
    # grader: 4 visible schedule cases + 0 of 6 hidden (roots 1 and p - 1) + 2 cost terms: 6 of 13
    v = judged("linear_bcast_check", linear_bcast=root_zero_only, cost_linear_bcast=LINEAR_COST)
    assert v.score == 0.92 and "hidden: p = 4, root = 1" in v.text()
    # the right schedule with the overlapping sends' cost: α once; the β term is right: 12 of 13
    one_alpha = judged("linear_bcast_check", linear_bcast=linear, cost_linear_bcast="alpha + (p - 1)*n*beta")
    assert one_alpha.score == 1.85 and "α term" in one_alpha.text()


def test_the_cost_is_not_on_the_student_side():
    """The visible check times the schedule against the student's own formula, never the key's."""
    wrong_cost = "2*(p - 1)*(alpha + n*beta)"
    visible = lab4.linear_bcast_cases(linear, wrong_cost)
    assert not visible[0].passed and "your cost_linear_bcast's time is 5 us" in visible[0].message
    assert all(c.passed for c in visible[5:])  # its form is fine: only the grader knows


@pytest.fixture(scope="module")
def smpi_traces(built_flavour):
    built_flavour("smpi")
    return [
        trace.run_traced(a, p, b, flavour="smpi", platform=lab4.PLATFORM, reps=1)
        for a, p, b in lab4.VISIBLE_TRACES
    ]


@pytest.mark.smpi
def test_model_options(smpi_traces):
    right = dict(ports="shared", eager_bytes=4096)  # THIN's eager limit: sends below 4 KiB
    assert all(c.passed for c in lab4.model_cases(right, smpi_traces))
    one_port = lab4.model_cases(dict(ports=1), smpi_traces)
    assert not one_port[0].passed and one_port[0].name == "gather_bcast, P = 8, 1024 B"
    assert "the model ends rank" in one_port[0].message
    # the visible runs leave 2049..4096: pairwise at P = 8, 1 KiB sends 2048 and 4096 B, so
    # SimGrid's default 64 KiB and 2 KiB fail there, and 4097 (4096 B eager too)
    for wrong, run in (
        (65536, "gather_bcast, P = 8, 1024 B"),
        (2048, "pairwise, P = 8, 1024 B"),
        (4097, "pairwise, P = 8, 1024 B"),
    ):
        failed = [
            c.name
            for c in lab4.model_cases(dict(ports="shared", eager_bytes=wrong), smpi_traces)
            if not c.passed
        ]
        assert run in failed, (wrong, failed)
    # 4 kB read as 4000 B passes the visible runs, not gather_bcast at P = 6 with 4095 B blocks
    eager_4000 = dict(ports="shared", eager_bytes=4000)
    assert all(c.passed for c in lab4.model_cases(eager_4000, smpi_traces))
    assert judged("model_check", model=right, traces=smpi_traces).score == 2
    v = judged("model_check", model=eager_4000, traces=smpi_traces)
    # 4 visible and 5 hidden runs, the one with 4095 B blocks fails: 2 x 8 / 9 = 1.78
    assert v.score == 1.78 and "hidden: gather_bcast, P = 6, 4095 B" in v.text()
    # the same threshold given as the largest eager size (Open MPI's "maximum size of eager
    # messages"): 4095 for "sends below 4096 B" — the same reasoning, accepted by the grader
    assert judged("model_check", model=dict(ports="shared", eager_bytes=4095), traces=smpi_traces).score == 2
    assert (
        judged("model_check", model=dict(ports="shared", eager_bytes=4095.0), traces=smpi_traces).score == 2
    )
    assert "valid: ports, eager_bytes" in lab4.model_cases(dict(port=None), smpi_traces)[0].message
    assert not lab4.model_cases(dict(ports=0), smpi_traces)[0].passed
    assert "no SMPI traces" in lab4.model_cases(right, [])[0].message


@pytest.mark.smpi
def test_rank0_messages(built_flavour):
    """The grader traces the library's broadcasts itself (P = 8): rank 0 sends 3 messages in the
    binomial tree (to ranks 1, 2 and 4) and 3 + 7 in scatter + ring allgather (the binomial
    scatter's, then one per ring step); each broadcast is one case."""
    built_flavour("smpi")
    children_only = {"binomial": 3, "pipeline": 1, "scatter_allgather_ring": 3}
    v = judged("rank0_check", points=1, messages_from_rank0=children_only)
    # binomial right, pipeline and scatter + ring wrong: 1 x 1 / 3
    assert v.score == 0.33, v.text()
    assert "scatter_allgather_ring: rank 0's messages: you counted 3" in v.text()
    assert "binomial" not in v.text()
    right = {**children_only, "scatter_allgather_ring": 3 + 7}
    assert "scatter_allgather_ring" not in judged("rank0_check", points=1, messages_from_rank0=right).text()


def _results(alpha, beta):
    """A results table whose avg_us is the key's cost x 1.1, and gather_bcast's x 0.2."""
    rows = []
    for algo in lab4.ERROR_ALGORITHMS:
        for p in (2, 4, 8):
            for b in (1024, 65536):
                model = float(costs.evaluate("allgather", algo, p, b, alpha, beta))
                rows.append(
                    dict(
                        collective="allgather",
                        algorithm=algo,
                        nprocs=p,
                        bytes=b,
                        avg_us=model * (0.2 if algo == "gather_bcast" else 1.1),
                    )
                )
    return pd.DataFrame(rows)


def test_error_table(monkeypatch):
    from mpilab.grade.cases import Case

    monkeypatch.setattr(rubric, "spot_case", lambda *a, **k: Case("spot", True))  # no SMPI run here
    alpha, beta = rubric.platform_alpha_beta()
    res = _results(alpha, beta)
    my_costs = {a: str(costs.entry("allgather", a).expr) for a in lab4.ERROR_ALGORITHMS}
    errors = pd.DataFrame(
        [
            dict(algorithm=a, mape=rubric.mape(g, my_costs[a], alpha, beta, "avg_us"))
            for a, g in res.groupby("algorithm")
        ]
    )
    assert errors.set_index("algorithm")["mape"].round(6).to_dict() == {
        "gather_bcast": 400.0,
        "lib:bruck": pytest.approx(9.090909, abs=1e-6),
        "pairwise": pytest.approx(9.090909, abs=1e-6),
    }
    given = dict(errors=errors, worst="gather_bcast", results_df=res, my_costs=my_costs)
    assert judged("errors_check", points=1, **given).score == 1
    # worst wrong: one of 4 cases (3 mapes and worst)
    v = judged("errors_check", points=1, **{**given, "worst": "pairwise"})
    assert v.score == 0.75 and "worst = 'pairwise'; the largest error is gather_bcast's" in v.text()
    # errors computed with another alpha: every mape off
    off = errors.assign(
        mape=[rubric.mape(g, my_costs[a], 2 * alpha, beta, "avg_us") for a, g in res.groupby("algorithm")]
    )
    v = judged("errors_check", points=1, **{**given, "errors": off})
    assert v.score == 0.25 and "gather_bcast: its mape: yours is" in v.text()
    assert not all(c.passed for c in lab4.errors_form_cases(errors, "pairwise", res, my_costs))


def test_calibrated_platform(tmp_path, monkeypatch):
    from mpilab.grade.cases import Case

    # pp taken as the grader's own ping-pong (the gate, a real run, is lab 0's test)
    monkeypatch.setattr(rubric, "pingpong_gates", lambda pp, what, **options: [Case("gate", True)])
    sizes = [0] + [2**k for k in range(15)]
    rng = np.random.default_rng(4)
    pp = pd.DataFrame(
        dict(
            collective="pingpong",
            flavour="openmpi",
            platform="local",
            mapping="core",
            nprocs=2,
            bytes=sizes,
            maxrank_median_us=[0.3 + 2.5e-4 * b + rng.normal(0, 0.005) for b in sizes],
        )
    )
    pp["avg_us"] = pp["maxrank_median_us"]
    fit = p2p.fit(pp, segments=1, value="maxrank_median_us")
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = calibration.calibrate(fit, base="orfeo-thin", path="mine.xml")
    assert all(c.passed for c in lab4.platform_cases(mine, pp))
    assert judged("calibrate_check", workdir=tmp_path, my_platform=mine, pp=pp).score == 2
    # THIN's own platform copied next to the notebook: neither its latency nor its bandwidth is pp's
    from mpilab.simulate import platforms

    (tmp_path / "thin.xml").write_text(Path(platforms.platform_file("orfeo-thin")).read_text())
    v = judged("calibrate_check", workdir=tmp_path, my_platform="thin.xml", pp=pp)
    assert (
        v.score == 0
        and "a fit of pp gives 0.2995 us" in v.text()
        and "a fit of pp gives 0.0002504 us/B" in v.text()
    )
    # ... and the feedback quotes THIN's calibrated core link (mpilab.simulate.clusters)
    alpha, beta = clusters.THIN_PINGPONG_FIT["core"]
    assert (
        f"the platform's core latency is {alpha:.4g} us" in v.text()
        and f"the platform's core link costs {beta:.4g} us/B" in v.text()
    ), v.text()
    assert (
        "not found next to the notebook"
        in judged("calibrate_check", workdir=tmp_path, my_platform="nosuch.xml", pp=pp).text()
    )
