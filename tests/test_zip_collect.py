"""zip_collect with the course's Blackboard file-name pattern (grader/nbgrader_config.py).

Real nbgrader: the assignment is released and an LMS download collected exactly as
scripts/grade.sh does; the test looks at what lands in submitted/<student>/<lab>/.
"""

import os
import subprocess
import sys

import pytest
from course import ROOT, Course, released_notebook

SOL = ROOT / "solutions" / "lab3"
FILES = ("reduce_scatter.c", "allreduce_rabenseifner.c", "allreduce_two_level.c")


def _nbgrader(course, *args):
    # nbgrader runs alembic, a script next to the interpreter, as grade.sh finds it
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=INFO"],
        cwd=course.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


@pytest.mark.nbgrader  # launches it (tests/conftest.py LAUNCHES)
def test_underscores_in_student_ids_and_file_names(tmp_path):
    course = Course(tmp_path)
    old, new = "2026-11-20-10-00-00", "2026-11-21-09-30-00"
    # two students whose ids differ only before an underscore, files with underscores in their
    # names, a first attempt of one file that a later attempt replaces, and Blackboard's
    # per-attempt receipt (no file name after the timestamp), which is not a submission
    course.submit_lms_zip("alice_b", "lab3", released_notebook("lab3"), {f: SOL / f for f in FILES})
    course.submit_lms_zip(
        "carol_b",
        "lab3",
        released_notebook("lab3"),
        {"reduce_scatter.c": SOL / "reduce_scatter.c"},
        extra={f"lab3_carol_b_attempt_{old}.txt": "Name: Carol B\n"},
    )
    course.submit_lms_zip(
        "carol_b", "lab3", files={"reduce_scatter.c": SOL / "c_solutions" / "reduce_scatter.c"}, date=new
    )
    _nbgrader(course, "generate_assignment", "lab3", "--create", "--force")
    _nbgrader(course, "zip_collect", "lab3", "--force")
    sub = course.root / "submitted"
    assert sorted(p.name for p in sub.iterdir()) == ["alice_b", "carol_b"]
    alice = sub / "alice_b" / "lab3"
    assert sorted(p.name for p in alice.iterdir()) == sorted(["lab3.ipynb", "timestamp.txt", *FILES])
    for f in FILES:
        assert (alice / f).read_bytes() == (SOL / f).read_bytes()
    carol = sub / "carol_b" / "lab3"
    assert sorted(p.name for p in carol.iterdir()) == ["lab3.ipynb", "reduce_scatter.c", "timestamp.txt"]
    assert (carol / "reduce_scatter.c").read_bytes() == (
        SOL / "c_solutions" / "reduce_scatter.c"
    ).read_bytes()
    assert (carol / "timestamp.txt").read_text().startswith("2026-11-21 09:30:00")


def test_blackboard_names():
    from mpilab.grade.lms import BlackboardCollector

    collector = BlackboardCollector(valid_ext=[".ipynb", ".c", ".txt"])
    got = collector.collect(
        "/c/downloaded/lab3/extracted/lab3-gradebook/"
        "lab3_alice_b_attempt_2026-11-21-09-30-15_allreduce_two_level.c"
    )
    assert got["student_id"] == "alice_b" and got["file_id"] == "allreduce_two_level.c"
    assert str(got["timestamp"]) == "2026-11-21 09:30:15"
    assert collector.collect("/c/lab3_alice_b_attempt_2026-11-21-09-30-15.txt") is None
    assert collector.collect("/c/lab3_alice_b_attempt_2026-11-21-09-30-15_notes.pdf") is None
