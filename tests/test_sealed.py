"""The case harnesses' defences against the student's function they call (mpilab.grade.sealed,
mpilab/data/grading/sealed.h): private data, sealed result lines, a student object that cannot
replace the harness's functions or run before main. Each cheat is a real C file, built and run
by the grader's own code on real Open MPI and on SMPI."""

import re
import shutil
from pathlib import Path

import pytest

from mpilab.grade import sealed
from mpilab.grade.checks import ccode
from mpilab.grade.runner import Run

ROOT = Path(__file__).resolve().parents[1]
CHEATS = ROOT / "tests" / "data" / "cheats"
needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="needs Open MPI and SimGrid SMPI",
)
RUNS = [Run("openmpi", 2), Run("smpi", 5, "orfeo-thin", "core")]


def test_siphash_matches_the_papers_vector():
    # SipHash-2-4, key 00..0f, message 00..0e (Aumasson and Bernstein 2012, appendix A)
    assert sealed.siphash24(bytes(range(16)), bytes(range(15))) == 0xA129CA6149BE45E5
    with pytest.raises(ValueError, match="16 bytes, not 3"):
        sealed.siphash24(b"abc", b"")


def test_unseal_keeps_only_lines_with_their_seal():
    key = bytes(range(16))
    line = "CASE int count=1\tPASS"
    good = f"{line}\t{sealed.siphash24(key, line.encode()):016x}"
    out = "\n".join([good, "CASE int count=4\tPASS", good.replace("count=1", "count=9"), "noise"])
    assert sealed.unseal(out, key) == ([line], 2)
    assert sealed.unseal(good, bytes(16)) == ([], 1)


def test_prepare_writes_a_seed_per_rank_and_clear_removes_them(tmp_path):
    key = sealed.prepare(tmp_path, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key", "seed.0", "seed.1", "seed.2"]
    assert (tmp_path / "key").read_bytes() == key and key != sealed.prepare(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key", "seed.0"]
    sealed.clear(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_the_reference_ring_still_passes_everywhere():
    cases = ccode.allgather_cases(ROOT / "solutions" / "lab2" / "c_solutions" / "ring.c", "ring", RUNS)
    assert [c.line() for c in cases if not c.passed] == []


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_blocks_computed_from_the_old_public_formula_fail():
    cases = ccode.allgather_cases(CHEATS / "ring_computed.c", "ring", RUNS)
    # only where a rank has no other rank's block to fill: the one-rank halves at P = 2
    assert [c.name for c in cases if c.passed] == ["Open MPI, P = 2, sub-communicator"]
    # a rank reports another rank's block (which one: the data is random, and one element of
    # 127 values can match the formula by chance)
    found = re.search(r"rank (\d): block (\d) \(rank \2's data\)", cases[0].message)
    assert found and found.group(1) != found.group(2), cases[0].message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_passing_lines_printed_by_the_function_count_for_nothing():
    cases = ccode.allgather_cases(CHEATS / "ring_forged.c", "ring", RUNS[:1])
    assert not any(c.passed for c in cases)
    assert "without the harness's seal counted for nothing" in cases[0].message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_a_function_named_like_one_the_harness_calls_replaces_nothing():
    cases = ccode.allgather_cases(CHEATS / "ring_interposed.c", "ring", RUNS)
    assert not any(c.passed for c in cases)
    assert "element 0 is -1, expected" in cases[0].message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_a_constructor_is_refused_at_build():
    cases = ccode.allgather_cases(CHEATS / "ring_constructor.c", "ring", RUNS[:1])
    assert [c.name for c in cases] == ["ring_constructor.c compiles"] and not cases[0].passed
    assert "runs code before main (a .init_array section" in cases[0].message
