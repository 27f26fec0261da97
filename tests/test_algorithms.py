"""The algorithm registry (mpilab.model.algorithms): one record per algorithm, and every other
table of the kit agrees with it: the C registry's names and functions, the skeletons in labs/,
the graders' harnesses, the costs and the schedules, on both sides of the kit."""

import re
import subprocess
import sys

import pytest

from mpilab.core import key, paths
from mpilab.core.errors import UsageError
from mpilab.grade import harness
from mpilab.grade.checks import reductions
from mpilab.grade.labs import lab6
from mpilab.model import algorithms, costs

ROOT = paths.repo_root()
RECORDS = list(algorithms.registry().values())
IDS = [f"{a.collective}-{a.name}" for a in RECORDS]


def _c_rows():
    """``{(collective, name): function}`` of every row of the C registry: registry.c and the key's rows."""
    rows = {}
    for path in (ROOT / "c_reference" / "registry.c", ROOT / "solutions" / "c_reference" / "registry_rows.h"):
        text = path.read_text()
        for name, fn in re.findall(r'\{"(\w+)", LAB_FN\((\w+)\)\}', text):
            rows[(re.match(r"lab_(allgather|bcast|reduce)_", fn).group(1), name)] = fn
    return rows


def test_names_are_unique_and_sides_known():
    assert len({(a.collective, a.name) for a in RECORDS}) == len(RECORDS) == len(algorithms.KIT)
    assert {a.side for a in RECORDS} <= set(algorithms.SIDES)
    assert {a.collective for a in RECORDS} == {
        "allgather",
        "bcast",
        "reduce_scatter_block",
        "allreduce",
        "reduce",
    }


def test_the_c_registry_has_the_same_names_and_functions():
    """Every row of registry.c (and of the key's rows) is a record with that function, and every
    record with a function is a row: the C side holds nothing else."""
    assert _c_rows() == {(a.collective, a.name): a.function for a in RECORDS if a.function}


@pytest.mark.parametrize("a", RECORDS, ids=IDS)
def test_each_record_is_whole(a):
    """With the answer key installed (this checkout): a source that exists and defines the
    function, a cost or the reason there is none, a schedule for what collbench and the tracer run."""
    assert a.description and a.restrictions
    assert a.source and (ROOT / a.source).is_file(), a.source
    if a.function:
        assert re.search(rf"\bint {a.function}\(", (ROOT / a.source).read_text()), a.source
        # the tracer (c_reference/trace/timeline.c) runs allgathers and broadcasts
        assert a.schedule is not None or a.collective not in ("allgather", "bcast")
    assert (a.cost is None) != (not a.cost_note), "a cost, or why there is none, not both"
    if a.cost is not None:
        assert a.cost.domain in costs.DOMAINS
        costs.header_form(a.collective, a.name, e=a.cost)  # prints in the C headers' notation


@pytest.mark.parametrize("a", [a for a in RECORDS if a.skeleton], ids=lambda a: f"{a.collective}-{a.name}")
def test_each_skeleton_is_in_its_lab_and_defines_the_function(a):
    skeleton = ROOT / "labs" / a.lab / a.skeleton_file
    assert re.search(rf"\bint {a.skeleton}\(", skeleton.read_text()), skeleton
    assert "YOUR CODE HERE" in skeleton.read_text() and a.side == "key"


def test_the_graders_read_the_registry():
    assert harness.STUDENT_FUNCTIONS == {"ring": "student_allgather_ring", "bruck": "student_allgather_bruck"}
    assert harness.BCAST_FUNCTIONS == {a.name: a.skeleton for a in algorithms.of("bcast") if a.skeleton}
    assert lab6.C_FILES == {a.name: a.skeleton_file for a in algorithms.of("bcast") if a.skeleton}
    assert reductions.FUNCTIONS == {
        "reduce_scatter": ("student_reduce_scatter_block", 1, True),
        "rabenseifner": ("student_allreduce_rabenseifner", 2, True),
        "two_level": ("student_allreduce_two_level", 2, False),
    }


def test_one_cost_per_algorithm():
    """Where the cost table has an entry under the kit's name (the allgathers), it is the record's
    own object: one definition, read by `mpilab costs` and by the graders alike."""
    for a in algorithms.of("allgather"):
        assert costs.entry("allgather", a.name) is a.cost
    from mpilab_key.rubrics import lab2 as rubric2  # the key's rubrics
    from mpilab_key.rubrics import lab6 as rubric6

    assert rubric6.EXPECTED["chain"] is algorithms.entry("bcast", "chain").cost
    assert rubric2.RUBRIC["cost_ring"].expected == algorithms.entry("allgather", "ring").cost.expr


def test_schedules_by_name_and_bad_names():
    assert set(algorithms.with_schedule()) == {
        "gather_bcast",
        "pairwise",
        "ring",
        "bruck",
        "binomial",
        "ompi_chain",
        "ompi_pipeline",
    }
    assert algorithms.collective_of("binomial") == "bcast"
    assert len(algorithms.schedule("bruck", 5, 8)) == 5
    with pytest.raises(UsageError, match="valid: .*pairwise"):
        algorithms.schedule("rign", 4, 8)
    with pytest.raises(UsageError, match="bad root 4; valid: 0..3"):
        algorithms.schedule("binomial", 4, 8, root=4)
    with pytest.raises(UsageError, match="unknown bcast algorithm 'ring'; valid: binomial, chain, linear"):
        algorithms.entry("bcast", "ring")


def test_the_students_side_without_the_key():
    """With the key hidden: every record is still there with its skeleton, and no cost, schedule
    or source of the key's algorithms is; asking for one says where it is."""
    code = """
import sys
sys.modules["mpilab_key"] = None          # as on the student's side: no answer key
from mpilab.core import key
from mpilab.model import algorithms
from mpilab.core.errors import UsageError
assert not key.installed()
recs = algorithms.registry().values()
assert len(recs) == len(algorithms.KIT)
assert all(a.cost is None for a in recs)
assert [a.name for a in recs if a.schedule] == ["gather_bcast", "pairwise", "ompi_chain", "ompi_pipeline"]
assert [a.name for a in algorithms.compiled("allgather")] == ["gather_bcast", "pairwise"]
assert algorithms.entry("allgather", "ring").skeleton == "student_allgather_ring"
try:
    algorithms.schedule("ring", 4, 8)
except UsageError as exc:
    print(exc)
from mpilab.cli import main
main(["list", "--coll", "bcast"])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "no schedule of 'ring' here: the schedules of ring, bruck, binomial" in proc.stdout
    assert proc.stdout.count("cost: not in this installation") == 5
    assert "you write it in labs/lab6/chain.c" in proc.stdout
    assert key.installed()  # this process still has the key
