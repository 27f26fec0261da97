"""Lab 5's rubric on synthetic results with known answers: the decision table per process count,
the regret per algorithm, the rules file read back as Open MPI reads it, and the correlations.

The spot check (one point simulated again) is left out here: these tables are made up on
purpose; tests/test_grade_lab5.py runs it end to end.
"""

import course
import numpy as np
import pandas as pd
import pytest

from mpilab.grade.labs import lab5
from mpilab_key import decision
from mpilab_key.rubrics import lab5 as rubric
from mpilab_key.rules import write_ompi_rules
from mpilab_key.stats import correlate


def quiet(probe=False):
    """bcast rows: basic_linear wins small messages, pipeline large; binomial wins small ones
    from P = 8; three repetitions 1 % apart; the probe grows with P."""
    rows = []
    for p in (2, 4, 8, 16):
        for b in (2, 64, 1024, 65536, 1048576):
            for a, t in {
                "basic_linear": 1 + p * 0.5 + b * 1e-3 * p,
                "pipeline": 20 + b * 1e-3,
                "binomial": (3 if p >= 8 else 50) + b * 2e-3,
            }.items():
                for rep in range(3):
                    rows.append(
                        dict(
                            collective="bcast",
                            algorithm=a,
                            platform="orfeo-thin",
                            nprocs=p,
                            bytes=b,
                            repetition=rep,
                            avg_us=t,
                            maxrank_avg_us=t * (1 + 0.01 * rep),
                            probe_us=(1 + 0.1 * p + (rep * 0.3 if a == "pipeline" else rep))
                            if probe
                            else np.nan,
                        )
                    )
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def no_spot_check(monkeypatch):
    monkeypatch.setattr(rubric, "data_gate", lambda results, what: [])


def judged(gid, workdir=".", points=2, **given):
    return course.judged("lab5", gid, points, workdir, **given)


def test_decision_table_per_process_count():
    q = quiet()
    table = decision.decision_table(q)
    assert all(c.passed for c in lab5.table_form_cases(table, q))
    assert judged("decision_table", points=3, table=table, quiet=q).score == 3
    # the first range of the block P 2..4 says pipeline: P = 2 and 4 wrong, and that range now has
    # the choice of its neighbour (not merged): 2 of 5 cases (P = 2, 4, 8, 16, merged), 3 x 2 / 5
    wrong = table.copy()
    wrong.loc[0, "algorithm"] = "pipeline"
    v = judged("decision_table", points=3, table=wrong, quiet=q)
    assert (
        v.score == 1.2
        and "P = 2: the fastest algorithm at every size: 2 B: pipeline (fastest: basic_linear" in v.text()
    )
    # one row per point: every winner right, nothing merged: 4 of 5
    points = decision.best_per_point(q).rename(columns={"nprocs": "nprocs_min", "bytes": "bytes_min"})
    flat = points.assign(nprocs_max=points.nprocs_min, bytes_max=points.bytes_min)
    v = judged("decision_table", points=3, table=flat, quiet=q)
    assert v.score == 2.4 and "neighbouring ranges with the same choice are merged" in v.text()
    # the mean over ranks of another table (avg_us) is not this one's, but here both agree
    assert (
        judged("decision_table", points=3, table=decision.decision_table(q, value="avg_us"), quiet=q).score
        == 3
    )


def test_regret_per_algorithm():
    q = quiet()
    reg = decision.regret(q)
    assert judged("regret_check", regret=reg, quiet=q).score == 2
    # basic_linear's mean doubled: 2 of 3 algorithms right
    doubled = reg.assign(
        mean_regret=np.where(reg.algorithm == "basic_linear", reg.mean_regret * 2, reg.mean_regret)
    )
    v = judged("regret_check", regret=doubled, quiet=q)
    assert v.score == 1.33 and "basic_linear: mean and worst regret: yours: mean" in v.text()
    # time / best time without the - 1: no algorithm right
    assert (
        judged(
            "regret_check",
            regret=reg.assign(mean_regret=reg.mean_regret + 1, max_regret=reg.max_regret + 1),
            quiet=q,
        ).score
        == 0
    )


def test_rules_file_per_process_count(tmp_path):
    q = quiet()
    q.loc[(q.algorithm == "pipeline") & (q.bytes == 1024), "maxrank_avg_us"] = 0.1  # pipeline wins 1 KiB
    table = decision.decision_table(q)
    path = tmp_path / "rules.txt"
    write_ompi_rules(table, path)
    assert judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).score == 2
    # the block from 1 process runs basic_linear from 1 KiB on, not pipeline: P = 2 and 4 wrong
    text = path.read_text()
    assert "\n1024 3 0 8192\n" in text
    path.write_text(text.replace("\n1024 3 0 8192\n", "\n1024 1 0 0\n", 1))
    v = judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q)
    assert 0 < v.score < 2 and "the file makes Open MPI run basic_linear, the table says pipeline" in v.text()
    path.write_text("1\n7\n")
    assert (
        "Open MPI can read the file"
        in judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).text()
    )
    assert (
        "not found next to the notebook"
        in judged("rules_check", workdir=tmp_path, rules_path="none.txt", table=table, quiet=q).text()
    )


def test_correlations_per_algorithm():
    s = quiet(probe=True)
    corr = correlate(s, y=lab5.VALUE, by=("algorithm", "bytes"))[["algorithm", "bytes", "pearson_r"]]
    assert judged("corr_check", corr=corr, series=s).score == 2
    # every r of pipeline set to 0: 2 of 3 algorithms right
    zero = corr.assign(pearson_r=np.where(corr.algorithm == "pipeline", 0.0, corr.pearson_r))
    v = judged("corr_check", corr=zero, series=s)
    assert v.score == 1.33 and "pipeline: Pearson's r at every size: 2 B: r = 0.0000, expected" in v.text()
    # against the mean over ranks (avg_us) instead of the slowest rank: r differs where the
    # repetitions' probes differ
    mean = correlate(s, y="avg_us", by=("algorithm", "bytes"))[["algorithm", "bytes", "pearson_r"]]
    assert judged("corr_check", corr=mean, series=s).score < 2
