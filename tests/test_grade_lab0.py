"""End to end: release lab 0, grade four submissions with scripts/grade.sh, check every score.

Real nbgrader, Open MPI, SMPI, ipyparallel engines and mpi4py; the points come from the trusted
grader (mpilab.grade.judge with the answer key's rubric, solutions/mpilab_key/rubrics/lab0.py).
The wrong submission's hello.c never asks for the processor name, and it hands in the bandwidth
in MB/s where GB/s is asked; it arrives as an LMS download (a zip with Blackboard's file names)
that grade.sh collects with zip_collect. Another one's %%px cell only works on 4 ranks.
"""

import html
import shutil
import subprocess

import pytest
from course import ROOT, Course, assert_scores, mutant, released_notebook, solved_notebook

from mpilab.grade import sandbox

SOL = ROOT / "solutions" / "lab0"
#: Autograded points per cell (the two written answers are graded by hand: 0 here).
FULL = {"hello_correct": 2, "px_allgather": 2, "pingpong_fit": 2, "order_answer": 0, "pingpong_answer": 0}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    # hello: 7 runs (Open MPI P = 1..4, SMPI P = 8; hidden: Open MPI P = 6, SMPI P = 30) x 2
    # cases (the ranks and the size; the hosts): every host case fails, 2 x 7/14 = 1.
    # fit: alpha and beta right, the bandwidth wrong (MB/s): 2 x 2/3 = 1.33.
    "wrong": {**FULL, "hello_correct": 1.0, "pingpong_fit": 1.33},
    # %%px: recv of 12 ints whatever the size: right at P = 4, wrong at the hidden P = 5 and 6:
    # 2 x 1/3 = 0.67 (the notebook's own check, on its 4 engines, passed).
    "px_fixed_size": {**FULL, "px_allgather": 0.67},
}


def _edit_fit(gid, src):
    if gid == "fit_answer":
        return src.replace(
            "bandwidth_GBps = 1e-3 / beta_us_per_byte", "bandwidth_GBps = 1 / beta_us_per_byte"
        )
    return src


def _edit_px(gid, src):
    if gid == "px_answer":
        return src.replace(
            'recv = np.empty(3 * comm.Get_size(), dtype="i")', 'recv = np.empty(12, dtype="i")'
        )
    return src


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="needs Open MPI and SimGrid SMPI",
)
def test_grade_lab0(tmp_path, built_flavour):
    built_flavour("openmpi")
    built_flavour("smpi")
    course = Course(tmp_path)
    hello = SOL / "c_solutions" / "hello.c"
    no_host = mutant(hello, "MPI_Get_processor_name(host, &len);", "", tmp_path / "hello.c")
    course.submit("solution", "lab0", solved_notebook("lab0"), {"hello.c": hello})
    course.submit("untouched", "lab0", released_notebook("lab0"), {"hello.c": SOL / "hello.c"})
    course.submit_lms_zip("wrong", "lab0", solved_notebook("lab0", _edit_fit), {"hello.c": no_host})
    course.submit("px_fixed_size", "lab0", solved_notebook("lab0", _edit_px), {"hello.c": hello})
    table, elapsed = course.grade("lab0", cell_timeout=300)
    assert_scores(table, EXPECTED, course, "lab0")
    assert {status for _, status in course.autograde_runs("lab0").values()} == {"ok"}
    feedback = html.unescape(course.feedback("wrong", "lab0"))
    assert (
        "SMPI on orfeo-thin, P = 8, mapping node, each rank's simulated core: a rank printed host '?' "
        "— did you call MPI_Get_processor_name?" in feedback
    )
    assert "hidden: Open MPI, P = 6, each rank's host: a rank printed host '?'" in feedback
    assert "divide by 1000 for GB/s" in feedback
    px = html.unescape(course.feedback("px_fixed_size", "lab0"))
    assert (
        "hidden: Open MPI, P = 5, every rank's recv: rank 0: your cell raised ValueError: message: cannot "
        "infer count, number of entries 12 is not a multiple of required number of blocks 5" in px
    )
    untouched = html.unescape(course.feedback("untouched", "lab0"))
    assert "hello_correct" in untouched
    assert "your cell raised NotImplementedError" in untouched
    assert "no answer named 'alpha_us' was handed in" in untouched


#: The wall limit of the stalling students: long enough for a kernel on a loaded machine (load 20
#: on 2 cores here) to reach the added cell, far below the 280 s it then sleeps.
WALL_LIMIT = 60


def _stalls(marker):
    """The released lab 0 with a cell added at the top (students may add cells): it starts a
    process that leaves its session, then sleeps in a way each cell's time limit would allow."""
    nb = released_notebook("lab0")
    nb["cells"].insert(
        1,
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": "import pathlib, subprocess, time\n"
            "subprocess.Popen(['sleep', '86399'], start_new_session=True)\n"
            "try:\n"
            f"    pathlib.Path({str(marker)!r}).touch()\n"
            "except OSError:   # a confined kernel writes only its own folder\n"
            "    pass\n"
            "time.sleep(280)\n",
        },
    )
    return nb


# make test-all only; make test keeps the kernel's limits (test_autograde.py) and the kill of a
# whole process group (test_process.py)
@pytest.mark.extended
@pytest.mark.slow
def test_a_student_past_the_wall_limit_is_stopped_and_the_batch_goes_on(tmp_path):
    """MPILAB_STUDENT_TIMEOUT stops one student's whole autograde; the next student is graded,
    the table says who was stopped, and nothing the stopped submission started keeps running."""
    course = Course(tmp_path)
    for student in ("stalls_a", "stalls_b"):
        course.submit(student, "lab0", _stalls(tmp_path / f"{student}.started"), {"hello.c": SOL / "hello.c"})
    table, elapsed = course.grade(
        "lab0", cell_timeout=300, student_timeout=WALL_LIMIT, name="grade_lab0_wall_limit"
    )
    runs = course.autograde_runs("lab0")
    assert {s: status for s, (_, status) in runs.items()} == dict.fromkeys(
        ("stalls_a", "stalls_b"), f"killed at the {WALL_LIMIT} s limit"
    )
    assert f"autograde of stalls_a stopped at the {WALL_LIMIT} s limit" in course.output
    rows = [line for line in course.output.splitlines() if line.startswith("stalls_")]
    assert len(rows) == 2 and all(line.endswith(f"killed at the {WALL_LIMIT} s limit") for line in rows), rows
    assert all(table.loc[s, k] == 0 for s in table.index for k in FULL)  # whatever nbgrader saved
    if (
        shutil.which("unshare")
        and subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"]).returncode == 0
    ):
        # a confined kernel writes only its own folder, which is not copied back when its student
        # is stopped: the marker is then out of sight, and the stopped status above is the test
        if not sandbox.isolation()[0]:
            assert (tmp_path / "stalls_a.started").exists(), "the added cell never ran: nothing was tested"
        left = subprocess.run(["pgrep", "-f", "sleep 86399"], capture_output=True, text=True).stdout.split()
        assert not left, f"a stopped submission's process is still running: {left}"
