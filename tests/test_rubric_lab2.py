"""Lab 2's plots and prediction judged on data the grader measures or computes again itself.

The tables are made here as the notebook makes them (``bench.benchmark_c`` of the key's ring.c
and bruck.c with the kit's references: real Open MPI at P = 4, simulated THIN over the sweep's P);
the rubric then measures part of them again. A table typed in, a point doctored, or a prediction
that is not the student's own costs on the grid earns nothing; the prediction's time plays no
part.
"""

import json
import shutil
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from course import ROOT  # noqa: E402

from mpilab.grade import answers, bench, judge  # noqa: E402
from mpilab.grade.labs import lab2  # noqa: E402
from mpilab.model import costs, predict  # noqa: E402
from mpilab_key.rubrics import lab2 as rubric  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("smpirun") is None or shutil.which("mpirun.openmpi") is None,
        reason="SimGrid and Open MPI are needed",
    ),
]
p, n, alpha, beta = costs.p, costs.n, costs.alpha, costs.beta
#: The solution's costs, as the notebook's cost cell writes them.
COSTS = {
    "gather_bcast": 2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta,
    "pairwise": costs.LOG2 * alpha + (p - 1) * n * beta,
    "ring": (p - 1) * alpha + (p - 1) * n * beta,
    "bruck": costs.ROUNDS * alpha + (p - 1) * n * beta,
}


@pytest.fixture(scope="module")
def measured(built_flavour, tmp_path_factory):
    """(submission dir with the key's ring.c and bruck.c, at4, at16k) as the notebook makes them."""
    built_flavour("openmpi")
    built_flavour("smpi")
    sub = tmp_path_factory.mktemp("lab2")
    for name in ("ring.c", "bruck.c"):
        shutil.copy(ROOT / "solutions" / "lab2" / "c_solutions" / name, sub / name)
    files = {"ring": sub / "ring.c", "bruck": sub / "bruck.c"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = bench.benchmark_c(files, nprocs=(2, 4), reference=True)
        sim = bench.benchmark_c(files, nprocs=lab2.P_SIM, flavour="smpi", reference=True)
    return sub, results[results["nprocs"] == 4], sim[sim["bytes"] == 16384]


def _figure(table, x):
    fig, ax = plt.subplots()
    for name, sub in table.groupby("algorithm"):
        ax.plot(sub[x], sub["maxrank_avg_us"], marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="bytes per process (B)", ylabel="latency (us)")
    ax.legend()
    return fig


def _judged(gid, sub, cells=None, **given):
    """The rubric's verdict on ``given`` (encoded as a hand-in), with other cells' hand-ins."""
    enc = {k: json.loads(json.dumps(answers.encode(v))) for k, v in given.items()}
    ctx = judge.Context("lab2", sub, sub, cells or {})
    return judge.judge_cell(rubric.RUBRIC[gid], gid, {"points": 2, "answers": enc}, ctx)


def test_plots_of_the_measured_tables_earn_full_marks(measured):
    sub, at4, at16k = measured
    v = _judged("plot_check", sub, fig=_figure(at4, "bytes"), at4=at4)
    assert v.score == 2, v.text()
    v = _judged("plot_p_check", sub, fig_p=_figure(at16k, "nprocs"), at16k=at16k)
    assert v.score == 2, v.text()
    plt.close("all")


def test_a_one_row_table_and_its_plot_earn_nothing(measured):
    sub = measured[0]
    for gid, fig, name, x in (
        ("plot_check", "fig", "at4", "bytes"),
        ("plot_p_check", "fig_p", "at16k", "nprocs"),
    ):
        one = pd.DataFrame({"algorithm": ["ring"], "nprocs": [4], "bytes": [16384], "maxrank_avg_us": [1.0]})
        v = _judged(gid, sub, **{fig: _figure(one, x), name: one})
        assert v.score == 0 and f"{name} holds the whole measured grid" in v.text(), v.text()
    plt.close("all")


def test_simulated_times_doctored_where_the_grader_looks_earn_nothing(measured, monkeypatch):
    sub, _, at16k = measured
    monkeypatch.setattr(rubric, "draw", lambda choices: 8)
    doctored = at16k.assign(
        maxrank_avg_us=at16k["maxrank_avg_us"].where(at16k["nprocs"] != 8, at16k["maxrank_avg_us"] * 0.9)
    )
    v = _judged("plot_p_check", sub, fig_p=_figure(doctored, "nprocs"), at16k=doctored)
    assert v.score == 0 and "simulated times repeat exactly" in v.text(), v.text()
    plt.close("all")


def test_real_times_far_from_the_graders_earn_nothing(measured):
    sub, at4, _ = measured
    fast = at4.assign(maxrank_avg_us=at4["maxrank_avg_us"] / 100)
    v = _judged("plot_check", sub, fig=_figure(fast, "bytes"), at4=fast)
    assert v.score == 0 and "times the grader's real run's at the median" in v.text(), v.text()
    plt.close("all")


def _cells(given):
    return {f"cost_{a}": {"points": 1, "answers": {f"cost_{a}": answers.encode(e)}} for a, e in given.items()}


def test_the_prediction_is_recomputed_from_the_students_own_costs(measured, tmp_path, monkeypatch):
    """The notebook's prediction of the solution's costs passes; a grid of invented times fails;
    costs handed in differently (text, another but equal form) still match; the time the
    prediction claims plays no part."""
    sub = measured[0]
    monkeypatch.chdir(sub)
    a, b = rubric._thin_alpha_beta()
    made = predict.predict("lab2-thin", COSTS, lab2.P_SIM, lab2.SIZES, a, b)
    for made_at in ("2000-01-01T00:00:00+00:00", "2099-01-01T00:00:00+00:00"):
        v = _judged("prediction_check", sub, _cells(COSTS), prediction=made.table, made_at=made_at, sim=None)
        assert v.score == 2, v.text()
    text_costs = {**COSTS, "ring": "(p-1)(α + nβ)"}
    v = _judged("prediction_check", sub, _cells(text_costs), prediction=made.table, made_at=None, sim=None)
    assert v.score == 2, v.text()
    # what is not the student's own prediction earns nothing, its record included
    invented = made.table.assign(predicted_us=1.0)
    v = _judged("prediction_check", sub, _cells(COSTS), prediction=invented, made_at=None, sim=None)
    assert v.score == 0 and "the prediction says 1 us, your cost there gives" in v.text(), v.text()
    assert "not credited: the prediction is your costs evaluated on the whole grid fails" in v.text()
    v = _judged("prediction_check", sub, {}, prediction=made.table, made_at=None, sim=None)
    assert v.score == 0 and "was not handed in" in v.text(), v.text()
    # the record must hold the prediction handed in, not be any file of that name
    record = sub / "prediction-lab2-thin.json"
    kept = record.read_text()
    for text, said in (
        ("{}", "not a record of predict.predict"),
        ('{"rows": []}', "does not hold the prediction"),
    ):
        record.write_text(text)
        v = _judged("prediction_check", sub, _cells(COSTS), prediction=made.table, made_at=None, sim=None)
        assert v.score == 1 and said in v.text(), v.text()
    record.write_text(kept)
    v = _judged("prediction_check", sub, _cells(COSTS), prediction=made.table, made_at=None, sim=None)
    assert v.score == 2, v.text()
    record.unlink()
    v = _judged("prediction_check", sub, _cells(COSTS), prediction=made.table, made_at=None, sim=None)
    assert v.score == 1 and "prediction-lab2-thin.json is not next to the notebook" in v.text(), v.text()
