"""The grading checks, on the lab's real solutions and on broken student code (real Open MPI)."""

import shutil
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from mpilab.grade import grading
from mpilab.measure import rules
from mpilab.model import decision, fits as models
from mpilab.core.errors import LaunchError

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mpilab.core.vocabulary import COMPILERS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")


@needs_openmpi
@pytest.mark.parametrize("algorithm", ["ring", "bruck"])
def test_solutions_pass_hidden_cases(algorithm):
    grading.check_allgather_c(ROOT / "solutions" / "lab2" / "c_solutions" / f"{algorithm}.c", algorithm, hidden=True)


@needs_openmpi
def test_deadlock_is_a_failed_check():
    with pytest.raises(AssertionError, match=r"P = 2: timed out after 5 s — a deadlock\? check the order"):
        grading.check_allgather_c(DATA / "ring_deadlock.c", "ring", timeout=5)


@needs_openmpi
def test_segfault_names_rank_and_signal():
    with pytest.raises(AssertionError, match=r"P = 2: rank 1 crashed: signal 11 \(SIGSEGV\)"):
        grading.check_allgather_c(DATA / "bruck_segfault.c", "bruck")


@needs_openmpi
def test_abort_names_rank_and_error_code():
    with pytest.raises(AssertionError, match=r"^ring allgather with P = 3: rank 2 crashed: MPI_Abort with error code 3$"):
        grading.check_allgather_c(DATA / "ring_abort.c", "ring", nprocs=(1, 3), smpi_runs=())


@needs_openmpi
@pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")
def test_abort_under_smpi_is_a_crash():
    """SMPI exits with status 0 after MPI_Abort: the check still fails, naming the rank."""
    with pytest.raises(AssertionError, match=r"P = 3 \(simulated, core mapping on orfeo-thin\): rank 2 crashed: "
                                             r"MPI_Abort with error code 3$"):
        grading.check_allgather_c(DATA / "ring_abort.c", "ring", nprocs=(1,), smpi_runs=(("orfeo-thin", 3, "core"),))


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_run_c_names_the_aborting_rank(flavour):
    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{flavour} not installed")
    with pytest.raises(LaunchError, match=rf"abort_rank2.c on {flavour}.*, P = 3: rank 2 crashed: MPI_Abort with error code 3$"):
        grading.run_c(DATA / "abort_rank2.c", flavour, nprocs=3)


@needs_openmpi
def test_wrong_element_and_compile_error(tmp_path):
    skeleton = ROOT / "labs" / "lab2" / "ring.c"
    with pytest.raises(AssertionError, match=r"P = 1: .*recvbuf\[0\]"):
        grading.check_allgather_c(skeleton, "ring")
    bad = tmp_path / "ring.c"
    bad.write_text("int student_allgather_ring( {\n")
    with pytest.raises(AssertionError, match="ring.c does not compile"):
        grading.check_allgather_c(bad, "ring")


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="unknown skeleton algorithm 'rign'; valid: bruck, ring"):
        grading.check_allgather_c("x.c", "rign")


def test_cost_expressions():
    a, b, p, n = grading.alpha, grading.beta, grading.p, grading.n
    grading.check_cost_expression((p - 1) * a + (p - 1) * n * b, "allgather", "ring")
    grading.check_cost_expression("log(p, 2)*alpha + (p-1)*n*beta", "allgather", "pairwise")
    with pytest.raises(AssertionError, match=r"differs at p = 1, n = 1 bytes"):
        grading.check_cost_expression(p * (a + n * b), "allgather", "ring")
    # the old "p - 1 rounds" answer is wrong for pairwise.c (recursive doubling)
    with pytest.raises(AssertionError, match=r"\(for p power of two\) differs at p = 4"):
        grading.check_cost_expression("(p-1)*(alpha + n*beta)", "allgather", "pairwise")
    with pytest.raises(ValueError, match="unknown allgather algorithm 'rign'"):
        grading.check_cost_expression(p, "allgather", "rign")


def test_gather_bcast_cost_under_the_one_port_model():
    """Lab 2's answer, and the two usual slips: latencies overlapped although the root's messages
    go one after the other, and the broadcast counted as n bytes instead of the p·n gathered."""
    a, b, p, n = grading.alpha, grading.beta, grading.p, grading.n
    grading.check_cost_expression(2 * (p - 1) * a + (p - 1) * (p + 1) * n * b, "allgather", "gather_bcast")
    grading.check_cost_expression("2*(p-1)*alpha + (p**2 - 1)*n*beta", "allgather", "gather_bcast")
    with pytest.raises(AssertionError, match=r"gather_bcast cost differs at p = 1, n = 1 bytes .* expected 0 us"):
        grading.check_cost_expression(2 * a + (p - 1) * (p + 1) * n * b, "allgather", "gather_bcast")
    with pytest.raises(AssertionError, match=r"gather_bcast cost differs at p = 2, n = 1 bytes .* gives 3.002 us, expected 3.003 us"):
        grading.check_cost_expression(2 * (p - 1) * (a + n * b), "allgather", "gather_bcast")


def _table():
    return pd.DataFrame({"algorithm": ["ring"] * 3 + ["bruck"] * 3, "bytes": [4, 64, 1024] * 2,
                         "avg_us": [1.0, 2.0, 5.0, 1.5, 2.5, 6.0]})


def _plot(df, log=True, skip=()):
    fig, ax = plt.subplots()
    for name, sub in df.groupby("algorithm"):
        if name not in skip:
            ax.plot(sub["bytes"], sub["avg_us"], marker="o", label=name)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("bytes per process (B)")
    ax.set_ylabel("latency (us)")
    ax.legend()
    return fig, ax


def test_latency_plot():
    df = _table()
    fig, _ = _plot(df)
    grading.check_latency_plot(fig, df)
    _, ax = _plot(df, log=False, skip=("bruck",))
    with pytest.raises(AssertionError, match=r"x axis is linear.*no line labelled bruck"):
        grading.check_latency_plot(ax, df)
    other = df.assign(avg_us=df["avg_us"] * 2)
    with pytest.raises(AssertionError, match="line 'ring' does not match"):
        grading.check_latency_plot(_plot(other)[1], df)
    plt.close("all")


# --- lab 1 and lab 5 checks, on synthetic results with known answers ---------------------------

def _results(probe=False):
    """bcast/reduce rows: latency piecewise linear in P (a break at 24), two sizes, 2 reps."""
    import numpy as np
    rows = []
    slopes = {"basic_linear": 1.0, "chain": 0.5, "pipeline": 2.0}
    for coll in ("bcast", "reduce"):
        for alg, k in slopes.items():
            for p in range(2, 49, 2):
                for b in (2, 1024):
                    t = (3 + k * p if p < 24 else 3 + 24 * k + 3 * k * (p - 24)) * (1 + b / 1024)
                    for rep in range(2):
                        rows.append(dict(collective=coll, algorithm=alg, nprocs=p, bytes=b,
                                         repetition=rep, avg_us=t, maxrank_avg_us=t * 1.5,
                                         probe_us=(1 + 0.1 * p + rep) if probe else np.nan))
    return pd.DataFrame(rows)


def test_segmented_fits_check():
    df = _results()
    fits = models.segmented_fit_p(df[df.bytes == 1024], segments=2, value="avg_us")
    grading.check_segmented_fits(fits, df, 1024, segments=2)
    chain = fits[(fits.collective == "bcast") & (fits.algorithm == "chain")]
    assert chain["slope"].round(6).tolist() == [1.0, 3.0]   # the known slopes (x2 at 1 KiB)
    with pytest.raises(AssertionError, match=r"bcast basic_linear, segment 1: intercept 3.0059, expected 6.0000"):
        grading.check_segmented_fits(models.segmented_fit_p(df[df.bytes == 2], segments=2), df, 1024, segments=2)
    with pytest.raises(AssertionError, match="bcast basic_linear: 3 segments in fits, expected 2"):
        grading.check_segmented_fits(models.segmented_fit_p(df[df.bytes == 1024], segments=3), df, 1024, segments=2)
    with pytest.raises(AssertionError, match="no rows at 4096 bytes"):
        grading.check_segmented_fits(fits, df, 4096, segments=2)
    with pytest.raises(AssertionError, match="no answer yet"):
        grading.check_segmented_fits(None, df, 1024)


def test_ranking_check():
    df = _results()
    grading.check_ranking({"bcast": ["chain", "basic_linear", "pipeline"],
                           "reduce": ["chain", "basic_linear", "pipeline"]}, df, 1024)
    with pytest.raises(AssertionError, match=r"reduce: your ranking is \['pipeline', 'chain', 'basic_linear'\]; "
                                             r"your results give \['chain', 'basic_linear', 'pipeline'\]"):
        grading.check_ranking({"bcast": ["chain", "basic_linear", "pipeline"],
                               "reduce": ["pipeline", "chain", "basic_linear"]}, df, 1024)
    with pytest.raises(AssertionError, match="bcast: your ranking is missing"):
        grading.check_ranking({}, df, 1024)


def test_decision_table_and_regret_checks():
    df = _results()
    table = decision.decision_table(df)
    grading.check_decision_table(table, df)
    wrong = table.copy()
    wrong.loc[0, "algorithm"] = "pipeline"
    with pytest.raises(AssertionError, match=r"row 0 of the decision table is bcast P 2..48, 2..1024 B: pipeline; "
                                             r"from your results \(fastest by median maxrank_avg_us\) it is "
                                             r"bcast P 2..48, 2..1024 B: chain"):
        grading.check_decision_table(wrong, df)
    reg = decision.regret(df)
    grading.check_regret(reg, df)
    with pytest.raises(AssertionError, match=r"bcast basic_linear: mean_regret 1.5324, expected 0.7662 \(time / best time - 1"):
        grading.check_regret(reg.assign(mean_regret=reg.mean_regret * 2), df)
    with pytest.raises(AssertionError, match="median avg_us"):
        grading.check_regret(reg.assign(max_regret=reg.max_regret + 1), df, value="avg_us")


def test_rules_file_check(tmp_path):
    df = _results()
    df.loc[(df.algorithm == "pipeline") & (df.bytes == 1024), "maxrank_avg_us"] = 0.1  # pipeline wins 1 KiB
    table = decision.decision_table(df)
    assert table.algorithm.tolist() == ["chain", "pipeline"] * 2
    path = tmp_path / "rules.txt"
    rules.write_ompi_rules(table, path)
    grading.check_rules_file(path, table)
    text = path.read_text().replace("\n1024 3 0 8192\n", "\n1024 1 0 0\n")
    path.write_text(text)
    with pytest.raises(AssertionError, match="bcast at P = 2, 1024 B: the file makes Open MPI run basic_linear, "
                                             "the table says pipeline"):
        grading.check_rules_file(path, table)
    path.write_text("1\n7\n")
    with pytest.raises(AssertionError, match="Open MPI could not read it: .* the file ends"):
        grading.check_rules_file(path, table)
    with pytest.raises(AssertionError, match="not found"):
        grading.check_rules_file(tmp_path / "none.txt", table)


def test_correlation_check():
    from mpilab.model import stats
    df = _results(probe=True)
    sub = df[(df.collective == "bcast") & (df.algorithm == "chain") & (df.bytes == 1024)]
    r = float(stats.correlate(sub, by=())["pearson_r"][0])
    grading.check_correlation(r, sub)
    grading.check_correlation(stats.correlate(df), df)
    with pytest.raises(AssertionError, match=r"r = 1.0000; Pearson's r of probe_us and avg_us over your rows is 0.9"):
        grading.check_correlation(1.0, sub)
    bad = stats.correlate(df).assign(pearson_r=0.0)
    with pytest.raises(AssertionError, match="collective bcast, algorithm basic_linear, bytes 2: r = 0.0000"):
        grading.check_correlation(bad, df)


def test_latency_plot_over_processes():
    """plots.latency_vs_nprocs passes the check for latency over P (no unit needed for P)."""
    from mpilab.studies import plots
    df = _results().assign(flavour="smpi", platform="orfeo-thin", mapping="core")
    at = df[(df.collective == "bcast") & (df.bytes == 1024)]
    fig, ax = plots.latency_vs_nprocs(df, 1024, collective="bcast", metric="avg_us")
    grading.check_latency_plot(ax, at, x="nprocs", log="y")
    ax.set_xscale("linear")
    grading.check_latency_plot(ax, at, x="nprocs", log="y")
    with pytest.raises(AssertionError, match="the x axis is linear"):
        grading.check_latency_plot(ax, at, x="nprocs")
    fig, ax = plots.latency_vs_nprocs(df, 1024, collective="bcast")   # maxrank_avg_us, not avg_us
    with pytest.raises(AssertionError, match="line 'chain' does not match your results table's avg_us by nprocs"):
        grading.check_latency_plot(ax, at, x="nprocs", log="y")
    plt.close("all")


@needs_openmpi
def test_simulated_run_catches_what_one_rank_cannot():
    # P = 1 passes on Open MPI; the visible check's simulated run (13 ranks on THIN) deadlocks
    grading.check_allgather_c(DATA / "ring_deadlock.c", "ring", nprocs=[1], smpi_runs=())
    with pytest.raises(AssertionError, match=r"ring allgather with P = 13 \(simulated, node mapping on "
                                             r"orfeo-thin\): the simulator found every rank waiting"):
        grading.check_allgather_c(DATA / "ring_deadlock.c", "ring", nprocs=[1])


@needs_openmpi
def test_benchmark_simulated_with_the_reference_algorithms():
    sol = ROOT / "solutions" / "lab2" / "c_solutions"
    df = grading.benchmark_c({"ring": sol / "ring.c"}, nprocs=(2, 16), flavour="smpi", reference=True)
    assert sorted(df["algorithm"].unique()) == ["gather_bcast", "native", "pairwise", "ring"]
    t = df[df["bytes"] == 16384].pivot_table(index="nprocs", columns="algorithm", values="avg_us")
    # simulated time repeats exactly, and the root of gather_bcast sends p blocks p - 1 times
    assert t.loc[16, "gather_bcast"] > 4 * t.loc[16, "pairwise"]
    with pytest.raises(ValueError, match="unknown flavour for benchmark_c 'mpich'; valid: openmpi, smpi"):
        grading.benchmark_c({"ring": sol / "ring.c"}, flavour="mpich")
