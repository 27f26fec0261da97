"""The case harnesses' data and hand-back (mpilab.grade.casedata, mpilab/data/grading/harness.h)
and what they leave a cheating student's function: no secret decides a verdict, so C that reads
the program's own memory, prints or writes results, or sends a seed instead of the data gains
nothing, even with the grader's check of the object's symbols (mpilab.grade.symbols) turned off
here. Every cheat is a real C file, built and run by the grader's own code on real Open MPI and
on SMPI."""

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from cheats import C_TECHNIQUES

from mpilab.grade import casedata, symbols
from mpilab.grade.cases import CellVerdict
from mpilab.grade.checks import ccode
from mpilab.grade.checks.collectives import AllgatherCases, BcastCases, ReductionCases
from mpilab.grade.runner import Run

ROOT = Path(__file__).resolve().parents[1]
CHEATS = ROOT / "tests" / "data" / "cheats"
SKELETON = ROOT / "labs" / "lab2" / "ring.c"
needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="needs Open MPI and SimGrid SMPI",
)
RUNS = [Run("openmpi", 2), Run("smpi", 5, "orfeo-thin", "core")]


# --- the files ------------------------------------------------------------------------------------


def test_prepare_writes_the_plan_and_each_ranks_own_input(tmp_path):
    cases = AllgatherCases()
    specs = cases.specs(3, ["int", "sub-communicator"])
    gen = casedata.rng()
    inputs = {s.seq: cases.inputs(s, 3, gen) for s in specs}
    casedata.prepare(tmp_path, specs, 3, inputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.0", "in.1", "in.2", "plan"]
    plan = (tmp_path / "plan").read_text().splitlines()
    assert plan[0] == f"# mpilab-plan 1 guard={casedata.GUARD} fill={casedata.FILL}"
    assert plan[1] == "1\tint\tint\t1\tworld\t0\t0\t0\tcount=1"
    assert plan[-1].split("\t")[4] == "halves" and len(plan) == 1 + 6 + 4
    # rank 1's file holds its own input of every case, and nobody else's
    data = (tmp_path / "in.1").read_bytes()
    at, seen = 0, []
    while at < len(data):
        seq, n = struct.unpack_from("<iq", data, at)
        assert data[at + 12 : at + 12 + n] == inputs[seq][1]
        seen.append(seq)
        at += 12 + n
    assert seen == [s.seq for s in specs]
    casedata.clear(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_inputs_are_fresh_random_data_and_doubles_are_finite():
    cases = AllgatherCases()
    [spec] = [s for s in cases.specs(2, ["double"]) if s.count == 512]
    a, b = cases.inputs(spec, 2, casedata.rng()), cases.inputs(spec, 2, casedata.rng())
    assert a[0] != b[0] and a[0] != a[1]
    values = np.frombuffer(a[0], dtype="<f8")
    assert np.all(np.isfinite(values)) and len(set(values.tolist())) == 512


def _record(seq, rank, size, regions, sends=(), colls="", error=""):
    """The bytes of one record as harness.h writes it."""
    out = b"MPLBCAS1" + struct.pack(
        "<9i", seq, rank, size, 0, len(regions), len(sends), 0, len(colls), len(error)
    )
    out += colls.encode() + error.encode()
    for name, data, guards in regions:
        out += struct.pack("<8s5q", name.encode(), len(data), *guards) + data
    for peer, nbytes in sends:
        out += struct.pack("<4iq", 0, peer, 0, 8, nbytes)
    return out


def test_records_are_read_back_and_anything_else_is_refused(tmp_path):
    data = _record(3, 1, 2, [("recvbuf", b"\x01\x02", (0, 0, 4, 7))], [(0, 4)], "MPI_Bcast/2 ")
    (tmp_path / "out.0").write_bytes(data + _record(4, 1, 2, []))
    os.symlink("/etc/passwd", tmp_path / "out.1")
    records, bad = casedata.read_records(tmp_path, 3)
    rec = records[0][3]
    assert (rec.seq, rec.rank, rec.size, rec.collectives) == (3, 1, 2, [("MPI_Bcast", 2)])
    assert rec.regions["recvbuf"].data == b"\x01\x02" and rec.regions["recvbuf"].after_reach == 7
    assert rec.sends() == [(0, 4, 0, "Sendrecv")] and sorted(records[0]) == [3, 4]
    assert records[2] == {} and 2 not in bad  # no file: no records
    assert "cannot be read" in bad[1] or "not a regular file" in bad[1]
    (tmp_path / "out.0").write_bytes(b"CASE int count=1\tPASS\n" + data)
    assert "does not start where one should" in casedata.read_records(tmp_path, 1)[1][0]


# --- the verdicts, on what ranks hand back -----------------------------------------------------------


def _judge(cases, spec, nprocs, inputs, buffers, guards=None, sends=None):
    records = {}
    for w, regions in buffers.items():
        rec = casedata.Record(spec.seq, w, nprocs, 0)
        for name, data in regions.items():
            rec.regions[name] = casedata.Region(name, data, *(guards or {}).get((w, name), (0, 0, 0, 0)))
        records[w] = rec
    return cases.judge(spec, nprocs, inputs, records)


def test_the_allgather_verdict_says_whose_data_landed_where():
    cases = AllgatherCases()
    spec = next(s for s in cases.specs(3, ["int"]) if s.count == 4)
    inputs = cases.inputs(spec, 3, casedata.rng())
    right = b"".join(inputs[r] for r in range(3))
    ok = {r: {"sendbuf": inputs[r], "recvbuf": right} for r in range(3)}
    assert _judge(cases, spec, 3, inputs, ok) == ""
    swapped = {**ok, 1: {"sendbuf": inputs[1], "recvbuf": inputs[2] + inputs[1] + inputs[2]}}
    assert (
        _judge(cases, spec, 3, inputs, swapped) == "rank 1: block 0 holds rank 2's block instead of rank 0's"
    )
    empty = bytes([casedata.FILL]) * 16
    half = {**ok, 2: {"sendbuf": inputs[2], "recvbuf": inputs[0] + empty + inputs[2]}}
    assert _judge(cases, spec, 3, inputs, half) == "rank 2: block 1 (rank 1's data) was never written"
    over = _judge(cases, spec, 3, inputs, ok, guards={(0, "recvbuf"): (0, 0, 16, 16)})
    assert over == "rank 0: wrote 16 bytes past the end of recvbuf (48 bytes long)"


def test_the_bcast_and_reduction_verdicts_name_the_element():
    bcast = BcastCases("pipeline")
    spec = next(s for s in bcast.specs(3, ["int"]) if s.count == 7)
    inputs = bcast.inputs(spec, 3, casedata.rng())
    data = inputs[0]
    shifted = data[:8] + data[:20]
    got = _judge(bcast, spec, 3, inputs, {0: {"buffer": data}, 1: {"buffer": data}, 2: {"buffer": shifted}})
    assert (
        got.startswith("rank 2: its first 2 elements are right, element 2 is ")
        and "(the root's element 0)" in got
    )
    reduce = ReductionCases(2)
    spec = next(s for s in reduce.specs(3, ["int"]) if s.count == 5)
    inputs = reduce.inputs(spec, 3, casedata.rng())
    ins = [np.frombuffer(inputs[r], "<i4") for r in range(3)]
    total = (ins[0] + ins[1] + ins[2]).astype("<i4").tobytes()
    missing = (ins[0] + ins[1]).astype("<i4").tobytes()
    bufs = {r: {"sendbuf": inputs[r], "recvbuf": total} for r in range(3)}
    assert _judge(reduce, spec, 3, inputs, bufs) == ""
    bufs[1] = {"sendbuf": inputs[1], "recvbuf": missing}
    assert "(the sum without rank 2's input)" in _judge(reduce, spec, 3, inputs, bufs)


# --- the defences, on real runs -------------------------------------------------------------------


def _cheat(tmp_path, technique, skeleton=SKELETON):
    path = tmp_path / f"{technique}.c"
    path.write_text(C_TECHNIQUES[technique](skeleton.read_text()))
    return path


@pytest.fixture
def no_symbol_check(monkeypatch):
    """What the run-time defences alone do: the object's symbols are not checked."""
    monkeypatch.setattr(symbols, "check_object", lambda *args, **kwargs: None)


def _score(cases, points=3):
    return CellVerdict("ring_correct", points, cases).score


class Ctx:
    def __init__(self, path):
        self.path = path

    def submitted_file(self, name):
        return self.path

    def untouched(self, name):
        return False


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_the_reference_ring_passes_everywhere():
    cases = ccode.allgather_cases(ROOT / "solutions" / "lab2" / "c_solutions" / "ring.c", "ring", RUNS)
    assert [c.line() for c in cases if not c.passed] == []


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_blocks_computed_from_the_old_public_formula_fail(no_symbol_check):
    cases = ccode.allgather_cases(CHEATS / "ring_computed.c", "ring", RUNS)
    assert _score(cases) < 0.5
    assert any("holds" in c.message or "element 0 is" in c.message for c in cases if not c.passed)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
@pytest.mark.parametrize("technique", ["c_forged", "c_symtab", "c_seed", "c_writes", "c_interposed"])
def test_cheats_score_nothing_without_the_symbol_check(tmp_path, no_symbol_check, technique):
    """Passing lines, the old seal key or seeds read from the ELF symbol table, result files
    written directly, a replaced MPI_Allreduce: none moves any data, and only data counts."""
    verdict = ccode.AllgatherVerdict("ring.c", "ring", RUNS, diagnose=False)
    cases = verdict.cases({}, Ctx(_cheat(tmp_path, technique)))
    assert _score(cases) == 0, [c.line() for c in cases]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
@pytest.mark.parametrize("technique", ["c_pmpi", "c_dlsym", "c_library", "c_funcptr"])
def test_a_library_collective_scores_nothing_without_the_symbol_check(tmp_path, no_symbol_check, technique):
    """MPI_Allgather by its MPI_ name (seen by the harness), its PMPI_ name or through dlsym (not
    seen, but no message brought the data): the cell scores nothing, and says why."""
    verdict = ccode.AllgatherVerdict("ring.c", "ring", RUNS[:1], diagnose=False)
    [case] = verdict.cases({}, Ctx(_cheat(tmp_path, technique)))
    assert not case.passed and "scores nothing" in case.message, case.message
    assert ("calls MPI_Allgather" in case.message) == (technique in ("c_library", "c_funcptr"))


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_a_constructor_is_refused_at_build():
    cases = ccode.allgather_cases(CHEATS / "ring_constructor.c", "ring", RUNS[:1])
    assert [c.name for c in cases] == ["ring_constructor.c compiles"] and not cases[0].passed
    assert "runs code before main (a .init_array section" in cases[0].message
