"""Lab 3's grading checks and its SMPI node shim, on real Open MPI and SimGrid SMPI.

The solutions passing every hidden case, the wrong reduce-scatter and the deadlocking
two-level allreduce are scored end to end in test_grade_lab3.py; this file covers what that
test does not: the messages of each failure kind on both back-ends, how SimGrid groups
MPI_COMM_TYPE_SHARED on the kit's platforms with and without the shim, and the kit's two-level
reduce used by the study.
"""

import shutil
import subprocess
from pathlib import Path

import pytest
from course import mutant

from mpilab.grade import grading, sandbox
from mpilab.simulate import platforms

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
LAB3 = ROOT / "mpilab" / "data" / "lab3"
needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")
needs_smpi = pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")
SOL = ROOT / "solutions" / "lab3" / "c_solutions"


def wrong_block(dest):
    """The solution's reduce-scatter copying the block of its *virtual* rank (the one it has
    after the fold) instead of its real rank: right for powers of two only."""
    return mutant(SOL / "reduce_scatter.c", "acc + (MPI_Aint)rank * recvcount * extent + true_lb",
                  "acc + (MPI_Aint)(vrank >= 0 ? vrank : rank) * recvcount * extent + true_lb", dest)


@needs_openmpi
@needs_smpi
def test_wrong_block_names_case_rank_and_element(tmp_path):
    wrong = wrong_block(tmp_path / "reduce_scatter.c")
    # P = 2 is a power of two and passes; at P = 3 rank 1 stands for ranks 0 and 1
    with pytest.raises(AssertionError, match=r"^reduce-scatter with P = 3: int, count=1: rank 1: "
                                             r"recvbuf\[0\] is -?\d+, expected -?\d+ \(the sum of "
                                             r"element 0 of block 1 over all ranks\)"):
        grading.check_reduction_c(wrong, "reduce_scatter", nprocs=(2, 3), smpi_runs=())
    # the same bug under SMPI: 5 ranks
    with pytest.raises(AssertionError, match=r"P = 5 \(simulated, core mapping on 3 nodes x 3 cores\)"
                                             r": int, count=1: rank \d: recvbuf\[0\]"):
        grading.check_reduction_c(wrong, "reduce_scatter", nprocs=(1,))


@needs_openmpi
@needs_smpi
def test_crash_and_deadlock_on_both_backends():
    segv = DATA / "allreduce_rabenseifner_segfault.c"
    with pytest.raises(AssertionError, match=r"^Rabenseifner allreduce with P = 2: rank 1 crashed: "
                                             r"signal 11 \(SIGSEGV\)$"):
        grading.check_reduction_c(segv, "rabenseifner", nprocs=(1, 2), smpi_runs=())
    with pytest.raises(AssertionError, match=r"P = 5 \(simulated.*\): a rank crashed: signal 11 "
                                             r"\(SIGSEGV\) \(the simulator runs every rank in one process"):
        grading.check_reduction_c(segv, "rabenseifner", nprocs=(1,))
    dead = DATA / "allreduce_two_level_deadlock.c"
    with pytest.raises(AssertionError, match=r"^two-level allreduce with P = 2: timed out after 4 s — "
                                             r"a deadlock\? check the order of sends and receives$"):
        grading.check_reduction_c(dead, "two_level", nprocs=(2,), smpi_runs=(), timeout=4)
    with pytest.raises(AssertionError, match=r"P = 5 \(simulated.*\): the simulator found every rank "
                                             r"waiting .* a deadlock\? check the order"):
        grading.check_reduction_c(dead, "two_level", nprocs=(1,))


@needs_openmpi
def test_skeleton_compile_error_and_bad_name(tmp_path):
    with pytest.raises(AssertionError, match=r"P = 1: int, count=1: rank 0: recvbuf\[0\] is -1000"):
        grading.check_reduction_c(ROOT / "labs" / "lab3" / "allreduce_rabenseifner.c", "rabenseifner",
                                  nprocs=(1,), smpi_runs=())
    bad = tmp_path / "reduce_scatter.c"
    bad.write_text("int student_reduce_scatter_block( {\n")
    with pytest.raises(AssertionError, match="reduce_scatter.c does not compile"):
        grading.check_reduction_c(bad, "reduce_scatter", nprocs=(1,), smpi_runs=())
    with pytest.raises(AssertionError, match="nothere.c not found"):
        grading.check_reduction_c(tmp_path / "nothere.c", "two_level")
    with pytest.raises(ValueError, match="unknown lab 3 algorithm 'ring'; valid: rabenseifner, "
                                         "reduce_scatter, two_level"):
        grading.check_reduction_c("x.c", "ring")


def _split_sizes(work, program, nprocs, platform, mapping):
    argv = grading._smpi_argv(work, program, [], nprocs, platform, mapping)
    res = sandbox.run(argv, cwd=work, timeout=60, memory_mb=0)
    assert res.ok, res.stderr[-2000:]
    lines = dict(line.split(":", 1) for line in res.stdout.splitlines() if ":" in line)
    return [int(x) for x in lines["nodes"].split()], [int(x) for x in lines["leaders"].split()]


@needs_smpi
def test_split_type_on_simulated_nodes(tmp_path):
    """SimGrid groups MPI_COMM_TYPE_SHARED by host: on the kit's platforms (one host per core)
    every rank is alone; with the kit's shim the ranks of one simulated node are together."""
    src = ROOT / "tests" / "data" / "split_type_sizes.c"
    plain = tmp_path / "plain"
    subprocess.run(["smpicc", "-O1", str(src), "-o", str(plain)], check=True, capture_output=True)
    sizes, _ = _split_sizes(str(tmp_path), "plain", 20, "jupiter-32x16", "core")
    assert sizes == [1] * 20
    work = grading.build_lab3([src], "smpi", "nodes")
    try:
        sizes, leaders = _split_sizes(work, "nodes", 20, "jupiter-32x16", "core")
        assert sizes == [16] * 16 + [4] * 4 and leaders == [0] * 16 + [16] * 4
        # round-robin over the nodes: rank r shares node r % 32 with r + 32
        sizes, leaders = _split_sizes(work, "nodes", 40, "jupiter-32x16", "node")
        assert sizes == [2] * 8 + [1] * 24 + [2] * 8
        assert leaders == list(range(32)) + list(range(8))
        # a platform whose hosts do not follow the naming scheme: one node per host, as SimGrid
        # (in the run's working directory, as the grader writes its own: a confined run sees
        # nothing else of /tmp)
        other = Path(work) / "flat.xml"
        other.write_text(platforms.render_xml(platforms.Spec("x", 1, 1, 4)).replace("x00-s0-c0", "cpu"))
        sizes, _ = _split_sizes(work, "nodes", 4, str(other), "core")
        assert sizes == [1] * 4
    finally:
        shutil.rmtree(work, ignore_errors=True)


@needs_openmpi
@needs_smpi
def test_kit_two_level_reduce_every_root():
    """The study's two-level reduce, through the reduce harness: roots 0, p/2, p-1, in place."""
    harness = ROOT / "mpilab" / "data" / "grading" / "check_reduce.c"
    sources = [harness, LAB3 / "reduce_two_level.c"]
    defines = ["STUDENT_FN=lab_reduce_two_level", "KIND=3"]
    work = grading.build_lab3(sources, "openmpi", "red", defines)
    try:
        for p in (1, 3, 6):
            res = sandbox.run(grading.MPIRUN_OPENMPI + [str(p), "./red", "--hidden"], cwd=work, timeout=60)
            assert res.ok and "PASS" in res.stdout, (p, res.stdout[-500:], res.stderr[-500:])
        grading.build_lab3(sources, "smpi", "red_smpi", defines, work=work)
        for platform, p, mapping in ((grading.LAB3_SMALL_CLUSTER, 7, "node"),
                                     (grading.LAB3_SMALL_CLUSTER, 8, "core"), ("jupiter-32x16", 37, "node")):
            for cfg in ((), ("smpi/coll-selector:ompi",)):
                from mpilab.measure import launch
                argv = launch.get_launcher("smpi", platform=grading._lab3_platform(platform, work),
                                           workdir=work, cfg=list(cfg)).command(
                    str(Path(work) / "red_smpi"), ["--hidden"], p, mapping).argv
                res = sandbox.run(argv, cwd=work, timeout=60, memory_mb=0)
                assert grading.smpi_failure(res) is None, (platform, p, mapping, cfg, res.stdout[-500:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
