"""Lab 3's checks (mpilab.grade.checks.reductions) and its SMPI node shim, on real Open MPI and
SimGrid SMPI.

The solutions passing every case of every visible and hidden run, the untouched skeletons
scoring nothing and wrong submissions are scored end to end in test_grade_lab3.py; this file
covers what that test does not: the message of each failure on both back-ends, a file that
calls the library's collective instead of sending its own messages, how SimGrid groups
MPI_COMM_TYPE_SHARED on the kit's platforms with and without the shim, the answer key's
two-level reduce (every root), and that the visible runs cover every kind of case.
"""

import importlib.resources
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from course import mutant

from mpilab.grade import casedata, harness, runner, sandbox
from mpilab.grade.checks import reductions
from mpilab.grade.checks.collectives import ReductionCases
from mpilab.grade.labs import lab3
from mpilab.grade.runner import SMALL_CLUSTER, Run
from mpilab.simulate import platform_xml, platforms

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab3" / "c_solutions"
KEY_REDUCE = ROOT / "solutions" / "c_reference" / "reduce" / "two_level.c"
needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")
needs_smpi = pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")
SMALL = Run("smpi", 5, SMALL_CLUSTER, "core")


def wrong_block(dest):
    """The solution's reduce-scatter copying the block of its *virtual* rank (the one it has
    after the fold) instead of its real rank: right for powers of two only."""
    return mutant(
        SOL / "reduce_scatter.c",
        "acc + (MPI_Aint)rank * recvcount * extent + true_lb",
        "acc + (MPI_Aint)(vrank >= 0 ? vrank : rank) * recvcount * extent + true_lb",
        dest,
    )


def _by_name(cases):
    return {c.name: c for c in cases}


def _failed(cases, prefix):
    """The failed cases of a run and kind ("Open MPI, P = 3, in-place"): failures of several kinds
    of one run are one case when they fail alike ("Open MPI, P = 3, int (count=1), in-place")."""
    run, _, kind = prefix.rpartition(", ")
    return [c for c in cases if not c.passed and c.name.startswith(run + ", ") and kind in c.name[len(run) :]]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
@needs_smpi
def test_wrong_block_fails_case_by_case_naming_rank_and_element(tmp_path):
    wrong = wrong_block(tmp_path / "reduce_scatter.c")
    found = reductions.reduction_cases(wrong, "reduce_scatter", [Run("openmpi", 2), Run("openmpi", 3), SMALL])
    cases = _by_name(found)
    # P = 2 is a power of two: every kind passes
    assert all(cases[f"Open MPI, P = 2, {k}"].passed for k in reductions.KINDS)
    # at P = 3 rank 1 stands for ranks 0 and 1; its halves (2 and 1 ranks) are powers of two
    bad = _failed(found, "Open MPI, P = 3, in-place")[0]
    assert bad.message.startswith("rank 1: recvbuf[0] is "), bad.message
    assert "(element 0 of block 1, the sum over all ranks; " in bad.message
    assert cases["Open MPI, P = 3, sub-communicator"].passed
    # the same bug under SMPI, 5 ranks on 3 nodes x 3 cores
    smpi = _failed(found, "SMPI on 3 nodes x 3 cores, P = 5, mapping core, int")[0]
    assert smpi.message.startswith("rank 1: recvbuf[0]")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
@needs_smpi
def test_crash_and_deadlock_on_both_backends():
    segv = reductions.reduction_cases(
        DATA / "allreduce_rabenseifner_segfault.c",
        "rabenseifner",
        [
            Run("openmpi", 1, kinds=("int",)),
            Run("openmpi", 2, kinds=("int",)),
            Run("smpi", 5, SMALL_CLUSTER, "core", kinds=("int",)),
        ],
    )
    assert _by_name(segv)["Open MPI, P = 1, int"].passed  # one rank never reaches the bad write
    assert _failed(segv, "Open MPI, P = 2, int")[0].message == "rank 1 crashed: signal 11 (SIGSEGV)"
    assert _failed(segv, "SMPI on 3 nodes x 3 cores, P = 5, mapping core, int")[0].message.startswith(
        "a rank crashed: signal 11 (SIGSEGV) (the simulator runs every rank in one process"
    )
    dead = reductions.reduction_cases(
        DATA / "allreduce_two_level_deadlock.c",
        "two_level",
        [Run("openmpi", 2), Run("smpi", 5, SMALL_CLUSTER, "core", kinds=("int",))],
        timeout=9,
    )
    first = _failed(dead, "Open MPI, P = 2, int")[0]
    assert first.name == "Open MPI, P = 2, int (count=1), double (count=1)"
    assert first.message == (
        "no result after 3 s — every rank is in MPI_Recv: each waits for a message before it sends its "
        "own, so nobody sends; at least one rank must send first (MPI_Sendrecv does both at once)"
    )
    assert any(c.message.startswith("not run: the first case of int and of double hung") for c in dead)
    smpi = _failed(dead, "SMPI on 3 nodes x 3 cores, P = 5, mapping core, int")[0]
    assert smpi.message.startswith("the simulator found every rank blocked, for good (a deadlock) — ")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_library_collective_in_place_of_the_algorithm_fails_every_case(tmp_path):
    """The lab asks for the reduce-scatter and Rabenseifner's allreduce from point-to-point
    messages: a file that calls the library's collective is right in every element and still
    fails, naming the call; the two-level allreduce may (must) use the library's collectives."""
    wrapper = tmp_path / "allreduce_rabenseifner.c"
    wrapper.write_text(
        "#include <mpi.h>\nint student_allreduce_rabenseifner(const void *s, void *r, int c,\n"
        "    MPI_Datatype t, MPI_Op o, MPI_Comm comm) { return MPI_Allreduce(s, r, c, t, o, comm); }\n"
    )
    [case] = reductions.reduction_cases(wrapper, "rabenseifner", [Run("openmpi", 2)])
    assert case.name == "allreduce_rabenseifner.c uses only what the task allows"
    assert case.weight == len(reductions.KINDS)
    assert (
        "allreduce_rabenseifner.c calls MPI_Allreduce: lab 3 asks you to build the allreduce from"
        in case.message
    )
    scatter = tmp_path / "reduce_scatter.c"
    scatter.write_text(
        "#include <mpi.h>\nint student_reduce_scatter_block(const void *s, void *r, int c,\n"
        "    MPI_Datatype t, MPI_Op o, MPI_Comm comm) {\n"
        "    MPI_Request q; int rc = MPI_Ireduce_scatter_block(s, r, c, t, o, comm, &q);\n"
        "    return rc ? rc : MPI_Wait(&q, MPI_STATUS_IGNORE); }\n"
    )
    [case] = reductions.reduction_cases(
        scatter, "reduce_scatter", [Run("openmpi", 3, kinds=("int", "double"))]
    )
    assert "calls MPI_Ireduce_scatter_block: lab 3 asks you" in case.message
    # the two-level allreduce may call the library's collectives, but not hand it the whole job
    two = tmp_path / "allreduce_two_level.c"
    two.write_text(wrapper.read_text().replace("rabenseifner", "two_level"))
    assert all(c.passed for c in reductions.reduction_cases(two, "two_level", [Run("openmpi", 2)]))
    verdict = reductions.ReductionVerdict("allreduce_two_level.c", "two_level", [Run("openmpi", 2)])
    [case] = verdict.cases({}, _Ctx(two))
    assert (
        "hands the whole allreduce to the library's MPI_Allreduce on the whole communicator" in case.message
    )


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_skeleton_compile_error_missing_file_and_bad_name(tmp_path):
    cases = reductions.reduction_cases(
        ROOT / "labs" / "lab3" / "allreduce_rabenseifner.c",
        "rabenseifner",
        reductions.runs_at("openmpi", (1,)),
    )
    # P = 1 leaves out MPI_IN_PLACE (right there without any code): the skeleton passes nothing
    assert not any(c.passed for c in cases) and sum(c.weight for c in cases) == len(reductions.KINDS) - 1
    assert all(k in " ".join(c.name for c in cases) for k in reductions.KINDS if k != "in-place")
    # the expected value is the sum of the data the grader chose
    assert re.match(
        r"rank 0: recvbuf\[0\] is -286331154 \(never written\), expected -?\d+ "
        r"\(the sum over all ranks; 1 element wrong\)",
        cases[0].message,
    ), cases[0].message
    bad = tmp_path / "reduce_scatter.c"
    bad.write_text("int student_reduce_scatter_block( {\n")
    runs = [Run("openmpi", 1), Run("openmpi", 2)]
    cases = reductions.reduction_cases(bad, "reduce_scatter", runs)
    assert len(cases) == 1 and cases[0].name == "reduce_scatter.c compiles" and cases[0].weight == 10
    assert "reduce_scatter.c does not compile for openmpi" in cases[0].message
    cases = reductions.reduction_cases(tmp_path / "nothere.c", "two_level", runs)
    assert "nothere.c not found" in cases[0].message
    with pytest.raises(
        ValueError, match="unknown lab 3 algorithm 'ring'; valid: rabenseifner, reduce_scatter, two_level"
    ):
        reductions.reduction_cases("x.c", "ring", runs)


def test_visible_runs_cover_every_kind_and_hidden_runs_only_vary_where():
    """Issue 21: the hidden runs test no kind of case the notebook's check does not run."""
    from mpilab_key.rubrics import lab3 as rubric

    seen = set()
    for run in lab3.VISIBLE_RUNS:
        seen |= set(run.kinds or reductions.KINDS)
    assert seen == set(reductions.KINDS)
    assert {r.flavour for r in lab3.VISIBLE_RUNS} == {"openmpi", "smpi"}
    visible = {(r.flavour, r.nprocs, r.platform, r.mapping) for r in lab3.VISIBLE_RUNS}
    for run in rubric.HIDDEN_RUNS:
        assert run.hidden and (run.flavour, run.nprocs, run.platform, run.mapping) not in visible
        assert set(run.kinds or reductions.KINDS) <= seen
    assert all(not r.hidden for r in lab3.VISIBLE_RUNS)


def _split_sizes(work, program, nprocs, platform, mapping):
    argv = runner.argv(work, program, [], Run("smpi", nprocs, platform, mapping))
    res = sandbox.run(argv, cwd=work, timeout=60, memory_mb=0)
    assert res.ok, res.stderr[-2000:]
    lines = dict(line.split(":", 1) for line in res.stdout.splitlines() if ":" in line)
    return [int(x) for x in lines["nodes"].split()], [int(x) for x in lines["leaders"].split()]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_split_type_on_simulated_nodes(tmp_path):
    """SimGrid groups MPI_COMM_TYPE_SHARED by host: on the kit's platforms (one host per core)
    every rank is alone; with the kit's shim the ranks of one simulated node are together."""
    src = ROOT / "tests" / "data" / "split_type_sizes.c"
    plain = tmp_path / "plain"
    subprocess.run(["smpicc", "-O1", str(src), "-o", str(plain)], check=True, capture_output=True)
    sizes, _ = _split_sizes(str(tmp_path), "plain", 20, "jupiter-32x16", "core")
    assert sizes == [1] * 20
    work = harness.build([src], "smpi", "nodes", smpi_nodes=True)
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
        other.write_text(platform_xml.render_xml(platforms.Spec("x", 1, 1, 4)).replace("x00-s0-c0", "cpu"))
        sizes, _ = _split_sizes(work, "nodes", 4, str(other), "core")
        assert sizes == [1] * 4
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
@needs_smpi
def test_key_two_level_reduce_every_root():
    """The answer key's two-level reduce (the study's reduce two_level, instructor's side),
    through the harness as a reduce: roots 0, p/2 and p-1, in place, every kind, on Open MPI and
    on simulated nodes, with SMPI's default collectives and with Open MPI's selector."""
    runs = reductions.runs_at("openmpi", (1, 3, 6), kinds=reductions.REDUCE_KINDS) + (
        Run("smpi", 7, SMALL_CLUSTER, "node"),
        Run("smpi", 8, SMALL_CLUSTER, "core"),
        Run("smpi", 37, "jupiter-32x16", "node"),
    )
    cases = reductions.harness_cases(KEY_REDUCE, "lab_reduce_two_level", 3, runs)
    assert [c.line() for c in cases if not c.passed] == []
    assert {c.name.rsplit(", ", 1)[1] for c in cases} == set(reductions.REDUCE_KINDS)
    # SMPI's "ompi" selector (the study's) crashed in MPI_Reduce on one-rank communicators once
    work = reductions.build(KEY_REDUCE, "lab_reduce_two_level", 3, ["smpi"])
    try:
        run = Run("smpi", 7, SMALL_CLUSTER, "node")
        argv = runner.argv(work, "check_reduce_smpi", [], run, cfg=["smpi/coll-selector:ompi"])
        cases = ReductionCases(3)
        specs = cases.specs(run.nprocs)
        gen = casedata.rng()
        inputs = {s.seq: cases.inputs(s, run.nprocs, gen) for s in specs}
        casedata.prepare(work, specs, run.nprocs, inputs)
        res = runner.execute(work, argv, run)
        assert runner.failure(res, run) is None, res.stderr[-500:]
        records, bad = casedata.read_records(work, run.nprocs)
        assert not bad and len(specs) == 4 + 3 + 2 + 3 + 3 + 5
        for s in specs:
            assert cases.judge(s, run.nprocs, inputs[s.seq], {r: records[r][s.seq] for r in range(7)}) == ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_harness_is_shipped():
    with importlib.resources.as_file(harness.data_file("grading", reductions.HARNESS)) as f:
        assert "hx_emit(c, comm, rc, regions, nr)" in Path(f).read_text()


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
@pytest.mark.parametrize(
    "algorithm, c_file",
    [("reduce_scatter", "reduce_scatter.c"), ("rabenseifner", "allreduce_rabenseifner.c")],
)
def test_the_keys_algorithms_are_the_algorithms_asked_for(algorithm, c_file):
    """The schedule check reads a reduce-scatter's count as one block of p (its n is the whole
    vector) and does not compare a case whose schedule would split an element (1 int over 2
    ranks): the answer key's files pass every case, the schedule check included."""
    key = SOL / c_file
    runs = [Run("openmpi", 2), Run("openmpi", 8)]
    from mpilab_key.rubrics import lab3

    graded = next(v for v in lab3.RUBRIC.values() if getattr(v, "c_file", None) == c_file)
    verdict = reductions.ReductionVerdict(c_file, algorithm, runs, graded.schedules)
    cases = verdict.cases({}, _Ctx(key))
    assert cases and all(c.passed for c in cases), [c.line() for c in cases if not c.passed]


class _Ctx:
    def __init__(self, path):
        self.path = path

    def submitted_file(self, name):
        return self.path

    def untouched(self, name):
        return False
