"""Decision table, regret, and an Open MPI rules file that Open MPI really follows."""

import os

import pandas as pd
import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import collbench, driver, forcing, launch, libalgs, load, rules
from mpilab.measure.driver import BenchOptions
from mpilab.model import decision as lookup
from mpilab_key import decision
from mpilab_key.rules import write_ompi_rules


def _synthetic():
    # linear wins small messages, pipeline wins large; at P >= 8 binomial wins small ones
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
                            nprocs=p,
                            bytes=b,
                            repetition=rep,
                            maxrank_avg_us=t * (1 + 0.01 * rep),
                        )
                    )
    return pd.DataFrame(rows)


def test_decision_table_ranges():
    t = decision.decision_table(_synthetic())
    small = t[(t.nprocs_min == 2)]
    assert small.nprocs_max.iloc[0] == 4  # P=2 and P=4 share their ranges
    assert list(small.algorithm) == ["basic_linear", "pipeline"]
    big = t[t.nprocs_min == 8]
    assert big.nprocs_max.iloc[0] == 16 and big.algorithm.iloc[0] == "binomial"
    assert lookup.choose(t, "bcast", 12, 2) == "binomial"
    assert lookup.choose(t, "bcast", 3, 1 << 20) == "pipeline"


def test_choose_stays_in_the_chosen_process_count_range():
    """Below the first size rule of a P range, the range's own first rule holds (the rules
    file starts it at 0), not the smallest-size rule of another P range."""
    t = pd.DataFrame(
        [
            dict(
                collective="bcast",
                nprocs_min=2,
                nprocs_max=4,
                bytes_min=2,
                bytes_max=64,
                algorithm="basic_linear",
            ),
            dict(
                collective="bcast",
                nprocs_min=8,
                nprocs_max=16,
                bytes_min=64,
                bytes_max=1024,
                algorithm="binomial",
            ),
            dict(
                collective="bcast",
                nprocs_min=8,
                nprocs_max=16,
                bytes_min=2048,
                bytes_max=1 << 20,
                algorithm="pipeline",
            ),
        ]
    )
    assert lookup.choose(t, "bcast", 8, 2) == "binomial"
    assert lookup.choose(t, "bcast", 12, 4096) == "pipeline"
    assert lookup.choose(t, "bcast", 1, 1 << 20) == "basic_linear"  # the file's block from 1
    with pytest.raises(UsageError, match="no rule for reduce"):
        lookup.choose(t, "reduce", 4, 8)


def test_rules_file_refuses_the_kits_algorithms(tmp_path):
    """Kit rows (ring, bruck, native) are not Open MPI algorithms: never mapped to its ids."""
    row = dict(collective="allgather", nprocs_min=2, nprocs_max=4, bytes_min=1, bytes_max=64)
    for name, hint in (
        ("ring", "the library's ring is 'lib:ring'"),
        ("bruck", "the library's bruck is 'lib:bruck'"),
        ("pairwise", "kit's own C algorithm"),
        ("native", "use 'default'"),
    ):
        with pytest.raises(UsageError, match=hint):
            write_ompi_rules(pd.DataFrame([dict(row, algorithm=name)]), tmp_path / "r.txt")
    text = write_ompi_rules(pd.DataFrame([dict(row, algorithm="lib:ring")]), tmp_path / "r.txt")
    assert text.split()[-4:] == ["0", "4", "0", "0"]  # Open MPI's ring is allgather id 4


def test_allgather_thresholds_are_the_gathered_buffer(tmp_path):
    """Open MPI compares allgather rules with type size x sendcount x P; the kit's bytes are per
    process: one block per P of the table, thresholds x P, and rules_choose multiplies too."""
    t = pd.DataFrame(
        [
            dict(
                collective="allgather",
                nprocs_min=2,
                nprocs_max=4,
                bytes_min=1,
                bytes_max=512,
                algorithm="lib:ring",
            ),
            dict(
                collective="allgather",
                nprocs_min=2,
                nprocs_max=4,
                bytes_min=1024,
                bytes_max=65536,
                algorithm="lib:bruck",
            ),
            dict(
                collective="allgather",
                nprocs_min=8,
                nprocs_max=8,
                bytes_min=1,
                bytes_max=65536,
                algorithm="recursive_doubling",
            ),
        ]
    )
    write_ompi_rules(t, tmp_path / "r.txt")
    read = rules.read_ompi_rules(tmp_path / "r.txt")
    assert read.comm_size.unique().tolist() == [1, 4, 8]
    assert read[read.algorithm == "lib:bruck"].msg_size.tolist() == [2 * 1024, 4 * 1024]
    for p in (2, 4, 8):
        for b in (1, 512, 1024, 65536):
            assert rules.rules_choose(read, "allgather", p, b) == lookup.choose(t, "allgather", p, b)


def test_regret():
    r = decision.regret(_synthetic())
    assert set(r.algorithm) == {"basic_linear", "pipeline", "binomial"}
    assert (r.mean_regret >= 0).all() and (r.max_regret > 0).all()
    lin = r[r.algorithm == "basic_linear"].iloc[0]
    assert lin.worst_bytes == 1048576 and lin.worst_nprocs == 16


def test_rules_file_text(tmp_path):
    t = decision.decision_table(_synthetic())
    text = write_ompi_rules(t, tmp_path / "r.txt")
    nums = [int(x) for x in text.split()]
    # 1 collective, bcast = 7, 2 comm sizes, first from 1 with 2 message rules starting at 0
    assert nums[:6] == [1, 7, 2, 1, 2, 0]
    assert nums[6] == libalgs.lookup("bcast", "basic_linear").ompi_id
    with pytest.raises(UsageError, match="not available on openmpi"):
        write_ompi_rules(t.iloc[:1].assign(collective="allreduce", algorithm="smp"), tmp_path / "x")


def _median_us(settings, sizes="1K:64K"):
    L = launch.get_launcher("openmpi")
    prog = collbench.collbench_program("openmpi")
    args = collbench.collbench_args(
        "native",
        "bcast",
        BenchOptions(sizes=sizes, iters=20, warmup=2, iters_large=20, warmup_large=2, check=True),
    )
    proc = forcing.run(L, prog, args, 2, settings, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = driver.parse(proc.stdout).table
    return {r["bytes"]: r["maxrank_median_us"] for r in table}, proc.stderr


@pytest.mark.slow
@pytest.mark.serial
def test_openmpi_follows_rules_file(built_flavour, tmp_path):
    """Table: bcast below 8 KiB basic_linear, from 8 KiB pipeline with 64-byte segments.

    The 64-byte pipeline is ~1000 segments for 64 KiB: far slower than linear, so which
    algorithm Open MPI ran is visible in the timing even on a loaded machine.
    """
    built_flavour("openmpi")
    table = pd.DataFrame(
        [
            dict(
                collective="bcast",
                nprocs_min=2,
                nprocs_max=2,
                bytes_min=1,
                bytes_max=4096,
                algorithm="basic_linear",
            ),
            dict(
                collective="bcast",
                nprocs_min=2,
                nprocs_max=2,
                bytes_min=8192,
                bytes_max=65536,
                algorithm="pipeline",
            ),
        ]
    )
    path = tmp_path / "rules.txt"
    write_ompi_rules(table, path, segsizes={("bcast", "pipeline"): 64})
    env = {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
        "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(path),
        **forcing.OMPI_VERIFY_ENV,
    }
    with_rules, err = _median_us(libalgs.Settings(env=env))
    assert f"coll_tuned_dynamic_rules_filename={path}" in err  # Open MPI read our file
    linear, _ = _median_us(forcing.prepare("openmpi", "bcast", "basic_linear"))
    seg = forcing.prepare("openmpi", "bcast", "pipeline")
    seg.env["OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize"] = "64"
    pipe64, _ = _median_us(seg)
    # large message: the file's pipeline, not linear
    assert with_rules[65536] > 5 * linear[65536]
    assert with_rules[65536] > 0.2 * pipe64[65536]
    # small message: the file's linear, not the 64-byte pipeline
    assert with_rules[1024] < pipe64[1024]


@pytest.mark.slow
@pytest.mark.serial
def test_probe_and_collective_both_move_under_load(built_flavour):
    """--probe stores a ping-pong next to each collective point; CPU hogs slow both down."""
    built_flavour("openmpi")
    L = launch.get_launcher("openmpi", bind=False)  # unbound ranks share the cores with the hogs
    prog = collbench.collbench_program("openmpi")
    # an allgather: every rank waits for every other, so a rank that lost its CPU holds up the
    # call (in a bcast at P = 2 the root only sends, and a late rank's wait falls in the barrier)

    def measure(iters=200):
        args = collbench.collbench_args(
            "native", "allgather", BenchOptions(sizes="1K:8K", iters=iters, warmup=2, probe=8)
        )
        proc = forcing.run(L, prog, args, 2, libalgs.Settings(forcing=False), timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        table = driver.parse(proc.stdout).table
        assert all(r["probe_us"] not in ("", None) for r in table)
        return (sum(float(r["probe_us"]) for r in table), sum(float(r["avg_us"]) for r in table))

    # Quiet: the ranks on (at most) two CPUs of their own. Loaded: the ranks and three busy loops
    # squeezed onto one CPU, every loop a session of its own as another job would be (with the
    # kernel's autogroup scheduling, CPU time is shared between sessions first). Hogs beside
    # unbound ranks on two CPUs were tried: the probe always moved, the collective only in some
    # runs. The machine is shared: the quietest of three runs, the most loaded of three.
    with load.background(cpus=min(2, len(os.sched_getaffinity(0))), settle=0):
        quiet = [min(v) for v in zip(*(measure() for _ in range(3)))]
    with load.background(cpu=3, cpus=1, settle=1.0):
        loaded = [max(v) for v in zip(*(measure(iters=20) for _ in range(3)))]  # slow: fewer
    assert loaded[0] > 2 * quiet[0], (quiet, loaded)  # the probe sees the load...
    assert loaded[1] > 2 * quiet[1], (quiet, loaded)  # ...and so does the collective


def test_ranking_uses_common_process_counts():
    df = _synthetic()
    # binomial is also measured at P = 64 (very slow there): that point must not count
    extra = pd.DataFrame(
        [
            dict(
                collective="bcast", algorithm="binomial", nprocs=64, bytes=b, repetition=0, maxrank_avg_us=1e6
            )
            for b in (2, 64, 1024, 65536, 1048576)
        ]
    )
    r = decision.ranking(pd.concat([df, extra]), value="maxrank_avg_us")
    small = r[r.bytes == 2].sort_values("rank")
    # at 2 B: linear 1 + 0.502 p (mean over 2, 4, 8, 16: 4.765), pipeline 20, binomial 26.5
    assert small.algorithm.tolist() == ["basic_linear", "pipeline", "binomial"]
    assert small.nprocs.tolist() == [4, 4, 4]
    assert small.mean_us.iloc[0] == pytest.approx(4.765 * 1.01)  # median of 1.00, 1.01, 1.02
    assert small.wins.tolist() == [2, 0, 2]  # binomial wins at P = 8 and 16
    with pytest.raises(UsageError, match="no process count where every algorithm"):
        decision.ranking(
            pd.DataFrame(
                [
                    dict(collective="bcast", algorithm=a, nprocs=p, bytes=8, avg_us=1.0)
                    for a, p in (("x", 2), ("y", 4))
                ]
            )
        )


def test_rules_file_read_back_picks_the_table(tmp_path):
    t = decision.decision_table(_synthetic())
    write_ompi_rules(t, tmp_path / "r.txt")
    read = rules.read_ompi_rules(tmp_path / "r.txt")
    assert list(read.columns) == [
        "collective",
        "comm_size",
        "msg_size",
        "ompi_id",
        "algorithm",
        "faninout",
        "segsize",
    ]
    assert read.comm_size.unique().tolist() == [1, 8]
    for p in (2, 3, 4, 8, 12, 16, 100):
        for b in (2, 64, 1000, 1024, 65536, 1 << 20):
            assert rules.rules_choose(read, "bcast", p, b) == lookup.choose(t, "bcast", p, b)
    assert rules.rules_choose(read, "reduce", 4, 8) is None


@pytest.mark.parametrize(
    "text, match",
    [
        ("1\n7\n1\n1\n2\n0 1 0 0\n", "file ends where a message size of bcast at 1 processes"),
        ("1\n7\n1\n1\n1\n0 42 0 0\n", r"bcast algorithm id 42 .* valid: 0 \(default\), 1 \(basic_linear\)"),
        ("1\n9\n", r"collective id 9 .* valid: 0 \(allgather\)"),
        ("1\n7\n1\n1\n2\n0 1 0 0\n0 3 0 0\n", "message sizes at 1 processes must increase: 0 after 0"),
        ("1\n7\n1\n1\n1\n0 x 0 0\n", "must be an integer, found 'x'"),
        ("1\n7\n1\n1\n1\n0 1 0 0\n5\n", "1 numbers left over"),
    ],
)
def test_rules_file_errors(tmp_path, text, match):
    from mpilab.core.errors import ParseError

    (tmp_path / "r.txt").write_text(text)
    with pytest.raises(ParseError, match=match):
        rules.read_ompi_rules(tmp_path / "r.txt")


@pytest.mark.slow
def test_measure_with_rules_says_whether_open_mpi_read_the_file(built_flavour, tmp_path, monkeypatch):
    built_flavour("openmpi")
    table = pd.DataFrame(
        [
            dict(
                collective="bcast",
                nprocs_min=2,
                nprocs_max=2,
                bytes_min=1,
                bytes_max=1024,
                algorithm="binomial",
            )
        ]
    )
    rules_path = tmp_path / "rules.txt"
    write_ompi_rules(table, rules_path)
    L = launch.get_launcher("openmpi")
    rows = rules.measure_with_rules(L, rules_path, "bcast", 2, sizes="1K:2K", iters=5, warmup=1)
    assert [r["bytes"] for r in rows] == [1024, 2048]
    assert {r["algorithm"] for r in rows} == {"rules"} and rows[0]["requested"] == str(rules_path)
    assert rows[0]["forced"] == "yes", rows[0]["evidence"]
    assert f"coll_tuned_dynamic_rules_filename={rules_path}" in rows[0]["evidence"]
    # a forced algorithm in the environment as well: Open MPI 4.1 still follows the file
    # (test_open_mpi_consults_the_file_before_a_forced_algorithm); the evidence says both
    monkeypatch.setenv("OMPI_MCA_coll_tuned_bcast_algorithm", "1")
    rows = rules.measure_with_rules(L, rules_path, "bcast", 2, sizes="1K:1K", iters=5, warmup=1)
    assert rows[0]["forced"] == "yes"
    assert "coll_tuned_bcast_algorithm=basic_linear was also set" in rows[0]["evidence"]
    with pytest.raises(UsageError, match="valid: openmpi"):
        rules.measure_with_rules(launch.get_launcher("mpich"), rules_path, "bcast", 2)
    with pytest.raises(UsageError, match="does not exist"):
        rules.measure_with_rules(L, tmp_path / "none.txt", "bcast", 2)


def _allgather_with_rules(rules_path, nprocs, extra=()):
    """Run collbench's MPI_Allgather at 256 B..4 KiB per process with a rules file; return the
    sizes it completed and its stderr."""
    L = launch.get_launcher("openmpi")
    prog = collbench.collbench_program("openmpi")
    args = collbench.collbench_args("native", "allgather", BenchOptions(sizes="256:4K", iters=3, warmup=1))
    settings = rules.rules_settings(rules_path)
    settings.env.update(dict(extra))
    proc = forcing.run(L, prog, args, nprocs, settings, timeout=120)
    table = driver.parse(proc.stdout).table
    return [r["bytes"] for r in table], proc.stderr


@pytest.mark.slow
def test_openmpi_follows_allgather_rules_at_the_right_size(built_flavour, tmp_path):
    """A real round trip for allgather: the table switches to two_proc (which Open MPI refuses
    at P != 2 with MPI_ERR_UNSUPPORTED_OPERATION) from 1 KiB per process at P = 3 and from
    512 B at P = 4. The first size that fails is where Open MPI applied the switch: exactly
    the table's, so the file's thresholds are per-process bytes x P (thresholds left per
    process would switch at 512 B at P = 3 and 256 B at P = 4)."""
    built_flavour("openmpi")
    table = pd.DataFrame(
        [
            dict(
                collective="allgather",
                nprocs_min=3,
                nprocs_max=3,
                bytes_min=1,
                bytes_max=512,
                algorithm="lib:ring",
            ),
            dict(
                collective="allgather",
                nprocs_min=3,
                nprocs_max=3,
                bytes_min=1024,
                bytes_max=4096,
                algorithm="two_proc",
            ),
            dict(
                collective="allgather",
                nprocs_min=4,
                nprocs_max=4,
                bytes_min=1,
                bytes_max=256,
                algorithm="lib:ring",
            ),
            dict(
                collective="allgather",
                nprocs_min=4,
                nprocs_max=4,
                bytes_min=512,
                bytes_max=4096,
                algorithm="two_proc",
            ),
        ]
    )
    rules_path = tmp_path / "rules.txt"
    write_ompi_rules(table, rules_path)
    done, err = _allgather_with_rules(rules_path, 3)
    assert done == [256, 512], err[-1500:]
    assert "failed at size 1024 bytes" in err and "MPI_ERR_UNSUPPORTED_OPERATION" in err
    done, err = _allgather_with_rules(rules_path, 4)
    assert done == [256], err[-1500:]
    assert "failed at size 512 bytes" in err
    parsed = rules.read_ompi_rules(rules_path)
    assert [rules.rules_choose(parsed, "allgather", 3, b) for b in (512, 1024)] == ["lib:ring", "two_proc"]


@pytest.mark.slow
def test_open_mpi_consults_the_file_before_a_forced_algorithm(built_flavour, tmp_path):
    """Open MPI 4.1.4 looks at the rules file first: with two_proc in the file at P = 3 and
    the ring forced by coll_tuned_allgather_algorithm, the call still fails; and a forced run
    that also reads a rules file is not labelled forced."""
    built_flavour("openmpi")
    table = pd.DataFrame(
        [
            dict(
                collective="allgather",
                nprocs_min=1,
                nprocs_max=3,
                bytes_min=1,
                bytes_max=4096,
                algorithm="two_proc",
            )
        ]
    )
    rules_path = tmp_path / "rules.txt"
    write_ompi_rules(table, rules_path)
    done, err = _allgather_with_rules(rules_path, 3, {"OMPI_MCA_coll_tuned_allgather_algorithm": "4"})
    assert done == [] and "failed at size 256 bytes" in err
    forced, evidence = forcing.verify("openmpi", "allgather", "lib:ring", err)
    assert forced == "no" and "rules file" in evidence
