"""Schedule-level feedback (mpilab.grade.diagnose): real SMPI runs of wrong lab 2 rings, traced.

Each diagnosis is one build and one SMPI run at P = 6 (a few seconds)."""

import base64
import io
import re
import shutil

import matplotlib.image
import pytest
from course import ROOT, mutant

from mpilab.grade import diagnose, judge, runner
from mpilab.grade.cases import CellVerdict
from mpilab.grade.checks import ccode
from mpilab.grade.verdicts import verdict_outputs

pytestmark = [
    pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed"),
    pytest.mark.mpi,  # builds and runs under smpirun
]

RING = ROOT / "solutions" / "lab2" / "c_solutions" / "ring.c"
DATA = ROOT / "tests" / "data" / "grading"
NEIGHBOURS = "int right = (rank + 1) % p, left = (rank - 1 + p) % p;"


def two_on(tmp_path):
    """The solution's ring, with each block sent two ranks on (and received from two back)."""
    return mutant(
        RING, NEIGHBOURS, "int right = (rank + 2) % p, left = (rank - 2 + p) % p;", tmp_path / "ring.c"
    )


def png_shape(png):
    return matplotlib.image.imread(io.BytesIO(png), format="png").shape


def test_two_ranks_on_names_its_first_wrong_message(tmp_path):
    d = diagnose.diagnose_allgather(two_on(tmp_path), "ring")
    assert d.status == "wrong"
    text = d.text()
    assert (
        "First difference from the ring: step 1: rank 0 sent block 0 to rank 2; the ring sends "
        "block 0 to rank 1." in text
    )
    # every message goes to the wrong neighbour: 6 ranks x 5 steps
    assert "30 messages went between ranks the ring never connects: 0 → 2 (5×), 1 → 3 (5×)" in text
    assert "30 messages of the ring between ranks yours never connected were not sent: 0 → 1 (5×)" in text
    assert re.search(r"wrong result on 6 ranks: rank 0's block 1 holds block \d", text)
    # both diagrams: the reference's timeline above, the student's below, on one time axis
    ref, mine = d.timelines
    assert len(ref.messages) == len(mine.messages) == 30
    fig, axes = diagnose.figure(ref, mine, "ring")
    assert "reference" in axes[0].get_title() and "your ring" in axes[1].get_title()
    height, width, _ = png_shape(d.png)
    assert height > 300 and width > 500


def test_deadlock_names_the_wait_for_cycle():
    d = diagnose.diagnose_allgather(DATA / "ring_deadlock.c", "ring")
    assert d.status == "deadlock"
    assert (
        "deadlock: rank 0 waits for 5, 5 waits for 4, 4 waits for 3, 3 waits for 2, 2 waits for 1, "
        "1 waits for 0, all in MPI_Recv."
    ) in d.text()
    assert (
        "step 1: rank 0 sent nothing (it was blocked in MPI_Recv); the ring sends block 0 to rank 1"
        in d.text()
    )
    assert "yours never finished" in d.text()
    _, mine = d.timelines
    assert sorted(mine.meta["blocked"]) == list(range(6))
    assert png_shape(d.png)[0] > 300


def test_slow_but_right_ring_is_explained(tmp_path):
    """The whole ring twice: right, twice the time, five extra messages per rank."""
    slow = mutant(
        RING,
        "    for (int s = 0; s < p - 1; s++) {",
        "    for (int twice = 0; twice < 2; twice++)\n    for (int s = 0; s < p - 1; s++) {",
        tmp_path / "ring.c",
    )
    d = diagnose.diagnose_allgather(slow, "ring", failed=False)
    assert d.status == "slow"
    assert d.student_us > diagnose.SLOW * d.reference_us
    assert "step 6: rank 0 sent block 0 to rank 1; the ring has only 5 steps on rank 0" in d.text()
    assert "more than 1.5× slower" in d.text()


def test_right_ring_gets_no_feedback():
    d = diagnose.diagnose_allgather(RING, "ring", failed=False)
    assert d.status == "ok" and d.lines == [] and d.png == b""
    assert abs(d.student_us - d.reference_us) <= 0.01 * d.reference_us


def test_verdict_carries_text_and_diagrams(tmp_path):
    """The judge's verdict on a wrong ring: the score of its cases, the diagnosis in the text
    and, as HTML, the same sentences with the diagrams embedded."""
    sub = tmp_path / "sub"
    sub.mkdir()
    two_on(sub)
    verdict = ccode.AllgatherVerdict("ring.c", "ring", [runner.Run("smpi", 4, "orfeo-thin")])
    ctx = judge.Context("lab2", sub, sub)
    v = judge.judge_cell(verdict, "ring_correct", {"points": 3}, ctx)
    assert v.score == 0 and sum(c.weight for c in v.cases) == len(ccode.ALLGATHER_KINDS)
    first = "step 1: rank 0 sent block 0 to rank 2; the ring sends block 0 to rank 1"
    assert first in v.text()
    v = CellVerdict.from_dict(v.to_dict())  # through the judge's JSON
    outputs = verdict_outputs(v, None)
    assert outputs[0].output_type == "error"  # nbgrader still scores 0
    html = outputs[1].data["text/html"]
    assert first in html
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1))
    assert png_shape(png)[0] > 300


def test_right_file_keeps_its_plain_verdict(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(RING, sub / "ring.c")
    verdict = ccode.AllgatherVerdict("ring.c", "ring", [runner.Run("smpi", 4, "orfeo-thin")])
    v = judge.judge_cell(verdict, "ring_correct", {"points": 3}, judge.Context("lab2", sub, sub))
    assert v.score == 3 and v.html == "" and v.explanation == ""
    assert [o.output_type for o in verdict_outputs(v, None)] == ["stream"]


def test_crash_is_not_called_a_deadlock():
    """Rank 1 writes through a null pointer: the simulation dies; no wait-for cycle is made up."""
    d = diagnose.diagnose_allgather(DATA / "bruck_segfault.c", "bruck", draw=False)
    assert d.status == "crash"
    assert "the run stopped before your function returned: a rank crashed: signal 11 (SIGSEGV)" in d.text()
    assert "deadlock" not in d.text() and "waits for" not in d.text()


def test_bruck_that_sends_from_the_wrong_place(tmp_path):
    """Each step sends from the second block of the temporary buffer: at step 1 that block was
    never written, and the feedback says so."""
    wrong = mutant(
        ROOT / "solutions" / "lab2" / "c_solutions" / "bruck.c",
        "MPI_Sendrecv(tmp, n * recvcount",
        "MPI_Sendrecv(tmp + block, n * recvcount",
        tmp_path / "bruck.c",
    )
    d = diagnose.diagnose_allgather(wrong, "bruck", draw=False)
    assert d.status == "wrong"
    # (the heap may still hold an earlier block there: then the message did carry that block)
    assert re.search(
        r"First difference from Bruck's algorithm: step 1: rank 0 sent (16 KiB that is no rank's "
        r"data \(a part of a buffer nothing was written to\)|block \d) to rank 5; Bruck's "
        r"algorithm sends block 0 to rank 5\.",
        d.text(),
    )
    assert "missing messages compared with Bruck's algorithm: rank 0 → rank 2: blocks 0, 1" in d.text()
