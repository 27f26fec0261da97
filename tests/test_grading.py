"""The grading checks, on the lab's real solutions and on broken student code (real Open MPI)."""

import shutil
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from mpilab import grading

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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
