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
from mpilab.measure import libalgs
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


def _simulated_segments(q):
    """The segment size of each table row as the simulation ran it (the kit's clone of Open MPI's
    pipeline, 8 KiB segments; 0 where every message was one segment): the notebook's answer."""
    pts = lab5.points(q)

    def seg(r):
        inside = [
            (p, b) for p, b in pts if r.nprocs_min <= p <= r.nprocs_max and r.bytes_min <= b <= r.bytes_max
        ]
        return max(libalgs.segment_size("smpi", "bcast", r.algorithm, p, b) for p, b in inside)

    return seg


def test_rules_file_per_process_count(tmp_path):
    q = quiet()
    q.loc[(q.algorithm == "pipeline") & (q.bytes == 1024), "maxrank_avg_us"] = 0.1  # pipeline wins 1 KiB
    table = decision.decision_table(q)
    path = tmp_path / "rules.txt"
    write_ompi_rules(table, path, segsizes=_simulated_segments(q), comments=True)
    assert "#" in path.read_text()  # Open MPI and the kit's reader skip comments
    assert judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).score == 2
    # the block from 1 process runs basic_linear from 1 KiB on, not pipeline: P = 2 and 4 wrong
    text = path.read_text()
    first = next(ln for ln in text.splitlines() if ln.startswith("1024 3 0 "))
    path.write_text(text.replace(first, "1024 1 0 0", 1))
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


def test_rules_file_takes_the_segments_the_curve_was_measured_with(tmp_path):
    """quiet is simulated: SMPI ran the kit's clone of Open MPI's pipeline, given the kit's 8 KiB
    segments (libalgs ``kit:``). A rule with those segments runs the same pipeline on Open MPI;
    one with SimGrid's own copy's segments (16 or 128 KiB) or none runs another."""
    q = quiet()
    table = decision.decision_table(q)
    assert set(table[table.bytes_max == 1048576].algorithm) == {"pipeline"}
    write_ompi_rules(table, tmp_path / "rules.txt", segsizes=_simulated_segments(q))
    assert judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).score == 2
    write_ompi_rules(table, tmp_path / "rules.txt")  # 8192 everywhere: the same
    assert judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).score == 2
    write_ompi_rules(table, tmp_path / "rules.txt", segsizes={("bcast", "pipeline"): 131072})
    v = judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q)
    assert v.score < 2 and "8192" in v.text(), v.text()
    write_ompi_rules(table, tmp_path / "rules.txt", segsizes={("bcast", "pipeline"): 0})  # unsegmented
    assert judged("rules_check", workdir=tmp_path, rules_path="rules.txt", table=table, quiet=q).score < 2


def test_a_table_without_one_point_islands_passes():
    """At P = 16, 1 KiB, binomial wins by 5 % between two sizes where pipeline wins: a table that
    gives 1 KiB to pipeline (one range instead of three) is defensible; at 40 % it is not."""
    for gap, passes in ((1.05, True), (1.4, False)):
        q = quiet()
        at = (q.nprocs == 16) & (q.bytes == 1024)
        for a in ("basic_linear", "binomial"):
            q.loc[at & (q.algorithm == a), ["avg_us", "maxrank_avg_us"]] = 1e6
        pipe = q.loc[at & (q.algorithm == "pipeline"), "maxrank_avg_us"].median()
        q.loc[at & (q.algorithm == "binomial"), ["avg_us", "maxrank_avg_us"]] = pipe / gap
        for b in (64, 65536):  # pipeline wins on both sides of 1 KiB at P = 16
            q.loc[
                (q.nprocs == 16) & (q.bytes == b) & (q.algorithm != "pipeline"), ["avg_us", "maxrank_avg_us"]
            ] = 1e6
        exact = decision.decision_table(q)
        assert len(exact[exact.nprocs_min == 16]) > len(
            exact[exact.nprocs_max == 16].drop_duplicates("algorithm")
        )
        assert judged("decision_table", points=3, table=exact, quiet=q).score == 3
        rows = exact[exact.nprocs_min == 16]
        smooth = exact[exact.nprocs_min != 16].copy()
        pmax = int(rows.nprocs_max.iloc[0])
        ranges = [(int(r.bytes_min), int(r.bytes_max), r.algorithm) for r in rows.itertuples()]
        merged = []
        for bmin, bmax, a in ranges:
            a = "pipeline" if (bmin, bmax) == (1024, 1024) else a
            if merged and merged[-1][2] == a:
                merged[-1] = (merged[-1][0], bmax, a)
            else:
                merged.append((bmin, bmax, a))
        smooth = pd.concat(
            [
                smooth,
                pd.DataFrame(
                    [
                        dict(
                            collective="bcast",
                            nprocs_min=16,
                            nprocs_max=pmax,
                            bytes_min=b0,
                            bytes_max=b1,
                            algorithm=a,
                        )
                        for b0, b1, a in merged
                    ]
                ),
            ],
            ignore_index=True,
        )
        assert len(merged) < len(ranges)
        v = judged("decision_table", points=3, table=smooth, quiet=q)
        assert (v.score == 3) is passes, v.text()


def study(seed=0):
    """Rows of a load study: 30 runs of two algorithms at two sizes; the probe grows with the
    load and the broadcast with it, plus noise (pipeline: one extreme run)."""
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(30):
        load = rng.uniform(0, 1)
        probe = 2 + load + rng.normal(0, 0.05)
        for a, k in (("binomial", 10), ("pipeline", 30)):
            for b in (128, 16384):
                t = k * (1 + load) * (1 if b == 128 else 3) + rng.normal(0, 2 if b == 128 else 20)
                if a == "pipeline" and run == 7:
                    t *= 5
                rows.append(
                    dict(
                        collective="bcast",
                        algorithm=a,
                        platform=f"orfeo-thin-4+load{run:03d}",
                        nprocs=16,
                        bytes=b,
                        repetition=0,
                        avg_us=t,
                        maxrank_avg_us=t * 1.1,
                        probe_us=probe,
                    )
                )
    return pd.DataFrame(rows)


def test_correlations_per_algorithm(monkeypatch):
    monkeypatch.setattr(rubric, "study_gate", lambda s: [])
    s = study()
    corr = correlate(s, y=lab5.VALUE, by=("algorithm", "bytes"))[
        ["algorithm", "bytes", "n", "pearson_r", "spearman_rho"]
    ]
    assert (corr.pearson_r - corr.spearman_rho).abs().max() > 0.05  # the two differ here
    assert all(c.passed for c in lab5.corr_form_cases(corr, s))
    assert judged("corr_check", corr=corr, study=s).score == 2
    # every r of pipeline set to 0: 3 of 4 cases right
    zero = corr.assign(pearson_r=np.where(corr.algorithm == "pipeline", 0.0, corr.pearson_r))
    v = judged("corr_check", corr=zero, study=s)
    assert v.score == 1.5 and "pipeline: Pearson's r at every size: 128 B: 0.0000, expected" in v.text()
    # Pearson's r in the Spearman column: the rho cases fail
    v = judged("corr_check", corr=corr.assign(spearman_rho=corr.pearson_r), study=s)
    assert v.score < 2 and "Spearman's rho at every size" in v.text()
    # against the mean over ranks (avg_us) instead of the slowest rank
    mean = correlate(s, y="avg_us", by=("algorithm", "bytes"))
    assert judged("corr_check", corr=mean, study=s).score == 2  # avg_us is a fixed multiple here ...
    noisy = s.assign(maxrank_avg_us=s.maxrank_avg_us * np.linspace(0.5, 1.5, len(s)))
    assert judged("corr_check", corr=mean, study=noisy).score < 2  # ... and not in general
