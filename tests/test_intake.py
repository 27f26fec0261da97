"""A submission checked before nbgrader touches it (mpilab.grade.intake), and the student told.

Unit tests on folders made here (links, FIFOs, sockets, device nodes, hard links, large and deep
trees, broken notebooks, grading metadata changed), then nbgrader itself: ``nbgrader collect``
with the course's configuration, and ``scripts/grade.sh`` on lab 0 with a notebook that is not
JSON and one whose test cell was turned into an answer cell.
"""

import json
import os
import socket
import stat
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest
from course import ROOT, Course, released_notebook

from mpilab.core.errors import UsageError
from mpilab.grade import intake

SMALL = intake.Limits(file_mb=1, total_mb=2, entries=20, depth=2)


def _hostile(folder, outside):
    """A submission folder with one of each thing that is not a file nbgrader should copy."""
    folder.mkdir(parents=True)
    (folder / "lab0.ipynb").write_text(json.dumps(released_notebook("lab0")))
    (folder / "hello.c").write_text("int main(void) { return 0; }\n")
    (folder / "shadow.c").symlink_to("/etc/shadow")
    os.mkfifo(outside / "fifo")
    (folder / "waits.c").symlink_to(outside / "fifo")  # followed, it would block forever
    (folder / "etc").symlink_to("/etc")
    os.mkfifo(folder / "pipe.csv")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(folder / "sock"))
    if os.geteuid() == 0:
        os.mknod(folder / "zero.c", stat.S_IFCHR | 0o644, os.makedev(1, 5))
    (outside / "theirs.c").write_text("someone else's\n")
    os.link(outside / "theirs.c", folder / "linked.c")
    (folder / "big.bin").write_bytes(b"x" * (2 << 20))
    deep = folder / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "deep.c").write_text("\n")
    return folder


def test_what_is_not_a_regular_file_or_a_folder_is_moved_out_unfollowed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    sub = _hostile(tmp_path / "sub", outside)
    refused = {r.path: r.why for r in intake.screen(sub, tmp_path / "refused", SMALL, first=("lab0.ipynb",))}
    assert sorted(p.name for p in sub.iterdir()) == ["a", "hello.c", "lab0.ipynb"]
    assert "symbolic link (to /etc/shadow)" in refused["shadow.c"]
    assert "symbolic link (to /etc)" in refused["etc"]
    assert "FIFO" in refused["pipe.csv"] and "a socket" in refused["sock"]
    assert "hard link" in refused["linked.c"] and "at most 1 MiB" in refused["big.bin"]
    assert "deeper than 2 levels" in refused[os.path.join("a", "b", "c")]
    if os.geteuid() == 0:
        assert "a character device, not a regular file" in refused["zero.c"]
    # moved as they were: a link is still a link, a FIFO a FIFO; nothing deleted, nothing read
    q = tmp_path / "refused"
    assert os.readlink(q / "shadow.c") == "/etc/shadow" and stat.S_ISFIFO(os.lstat(q / "pipe.csv").st_mode)
    assert (q / "a" / "b" / "c" / "deep.c").exists() and (
        outside / "theirs.c"
    ).read_text() == "someone else's\n"


def test_limits_of_count_and_total_keep_the_notebook_first(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    for k in range(30):
        (sub / f"f{k:02}.txt").write_bytes(b"y" * 100_000)
    (sub / "zz.ipynb").write_text("{}")
    refused = intake.screen(sub, tmp_path / "q", SMALL, first=("zz.ipynb",))
    assert (sub / "zz.ipynb").exists() and len(list(sub.iterdir())) == 20
    assert {r.why for r in refused} >= {"the submission would pass 2 MiB in all"} or any(
        "more than 20" in r.why for r in refused
    )


def test_limits_come_from_the_environment_and_are_checked(monkeypatch):
    monkeypatch.setenv("MPILAB_INTAKE_FILE_MB", "3")
    assert intake.Limits.from_env().file_mb == 3
    monkeypatch.setenv("MPILAB_INTAKE_ENTRIES", "many")
    with pytest.raises(UsageError, match="MPILAB_INTAKE_ENTRIES='many' is not a positive number"):
        intake.Limits.from_env()


def test_a_notebook_nbgrader_cannot_read_says_why(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [}')
    with pytest.raises(ValueError, match=r"not valid JSON \(line 1, column 12"):
        intake.read_notebook(bad)
    bad.write_text('{"cells": 3}')
    with pytest.raises(ValueError, match="not a valid notebook"):
        intake.read_notebook(bad)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nb.cells[0].metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "task": False,
        "grade_id": "x",
        "schema_version": 3,
    }
    with pytest.raises(ValueError, match="does not have points"):
        intake.check_metadata(nb)


def _released():
    return {
        "answer": {"grade": False, "solution": True, "locked": False, "task": False, "grade_id": "answer"},
        "test": {
            "grade": True,
            "solution": False,
            "locked": True,
            "task": False,
            "grade_id": "test",
            "points": 2.0,
        },
        "setup": {"grade": False, "solution": False, "locked": True, "task": False, "grade_id": "setup"},
    }


def _cell(gid, **meta):
    cell = nbformat.v4.new_code_cell(gid)
    cell.metadata["nbgrader"] = {"grade_id": gid, "schema_version": 3, **meta}
    return cell


def test_grading_metadata_is_set_back_to_the_release(tmp_path):
    released = _released()
    nb = nbformat.v4.new_notebook(
        cells=[
            _cell("answer", grade=True, solution=True, locked=False, task=False, points=5),
            _cell("test", grade=True, solution=True, locked=False, task=False, points=2),  # graded by hand?
            _cell("test", **released["test"]),
            _cell("mine", grade=True, solution=False, locked=True, points=9),
        ]
    )
    notes = intake.restore_grading(nb, released)
    metas = [c.metadata.get("nbgrader") for c in nb.cells]
    assert metas[0] == {**released["answer"], "schema_version": 3}
    assert metas[1] is None and metas[2]["solution"] is False and metas[3] is None
    assert "the cell 'answer' had its grade, points changed: it was graded as released" in notes
    assert "the cell 'test' appears more than once: only the last one is graded" in notes
    assert any("grade id 'mine', which the lab does not have" in n for n in notes)
    assert "the locked cell 'setup' is missing: the cells after it ran without it" in notes
    intake.check_metadata(nb)  # nbgrader takes it now


def test_the_release_as_it_is_changes_nothing():
    """A cell that is not graded has no points in the release nor in the submission: nothing to
    set back, nothing to tell (every locked cell of lab 0 was once told 'its points changed')."""
    released = _released()
    nb = nbformat.v4.new_notebook(cells=[_cell(gid, **meta) for gid, meta in released.items()])
    assert intake.restore_grading(nb, released) == []
    real = json.loads((ROOT / "labs" / "lab0" / "lab0.ipynb").read_text())
    real_released = {
        c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]
        for c in real["cells"]
        if "nbgrader" in c["metadata"]
    }
    assert intake.restore_grading(nbformat.reads(json.dumps(real), as_version=4), real_released) == []


def test_notes_in_markdown_show_their_quotes_and_stay_literal():
    assert intake._markdown("the cell 'x' had its points changed") == "the cell 'x' had its points changed"
    assert intake._markdown("a <b> & *c*") == "a &lt;b&gt; &amp; \\*c\\*"


def _course(tmp_path, notebook_text):
    course = tmp_path / "course"
    sub = course / "submitted" / "alice" / "lab0"
    sub.mkdir(parents=True)
    (sub / "lab0.ipynb").write_text(notebook_text)
    (sub / "hello.c").symlink_to("/etc/shadow")
    return course


def test_before_and_after_tell_the_student_in_the_feedback(tmp_path):
    course = _course(tmp_path, "not json")
    record = intake.before(course, "lab0", "alice", SMALL)
    assert record["unreadable"].startswith("lab0.ipynb cannot be read: it is not valid JSON")
    assert [r["path"] for r in record["refused"]] == ["hello.c"]
    assert os.readlink(course / "refused" / "lab0" / "alice" / "hello.c") == "/etc/shadow"
    intake.after(course, "lab0", "alice", "failed (exit 1)")
    page = (course / "feedback" / "alice" / "lab0" / "lab0.html").read_text()
    assert "could not be graded" in page and "not valid JSON" in page and "hello.c: a symbolic link" in page
    # a graded notebook gets the notes at its top instead
    graded = course / "autograded" / "alice" / "lab0" / "lab0.ipynb"
    graded.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), graded)
    (course / "submitted" / "alice" / "lab0" / "lab0.ipynb").write_text(json.dumps(released_notebook("lab0")))
    (course / "submitted" / "alice" / "lab0" / "x_*.c").symlink_to("/etc/passwd")
    intake.before(course, "lab0", "alice", SMALL)
    lines = intake.after(course, "lab0", "alice", "ok")
    first = nbformat.read(graded, as_version=4).cells[0]
    assert first.cell_type == "markdown" and "x\\_\\*.c: a symbolic link (to /etc/passwd)" in first.source
    assert lines == [
        "x_*.c: a symbolic link (to /etc/passwd): the grader reads only files you wrote; it was not graded"
    ]


def test_a_student_folder_that_is_a_link_is_refused(tmp_path):
    course = tmp_path / "course"
    (course / "submitted" / "mallory").mkdir(parents=True)
    (course / "submitted" / "mallory" / "lab0").symlink_to(ROOT / "solutions" / "lab0")
    record = intake.before(course, "lab0", "mallory", SMALL)
    assert "was a symbolic link, not a folder" in record["unreadable"]
    assert not os.path.lexists(course / "submitted" / "mallory" / "lab0")
    with pytest.raises(UsageError, match="plain folder name"):
        intake.before(course, "lab0", "..", SMALL)


def test_copy_tree_copies_files_and_folders_only(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    src = _hostile(tmp_path / "src", outside)
    refused = {r.path for r in intake.copy_tree(src, tmp_path / "dest", SMALL)}
    dest = tmp_path / "dest"
    assert {"shadow.c", "etc", "pipe.csv", "sock", "linked.c", "big.bin", "waits.c"} <= refused
    assert sorted(p.name for p in dest.iterdir()) == ["a", "hello.c", "lab0.ipynb"]
    assert all(not p.is_symlink() for p in dest.rglob("*"))


def test_an_archive_too_large_unpacked_is_moved_out_before_zip_collect(tmp_path):
    archive = tmp_path / "downloaded" / "lab0" / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("lab0_eve_attempt_2026-11-20-10-00-00_hello.c", b"\0" * (3 << 20))
    with zipfile.ZipFile(archive / "fine.zip", "w") as z:
        z.writestr("lab0_bob_attempt_2026-11-20-10-00-00_hello.c", "int x;\n")
    tiny = intake.Limits(total_mb=0.002, entries=1)
    assert intake.archives(tmp_path, "lab0", tiny) == {"bomb.zip": "it unpacks to more than 2 MiB"}
    assert (tmp_path / "refused" / "lab0" / "archive" / "bomb.zip").exists() and (
        archive / "fine.zip"
    ).exists()


@pytest.mark.nbgrader
@pytest.mark.skipif(os.geteuid() != 0, reason="nbgrader collect across users needs root here")
def test_nbgrader_collect_follows_no_link(tmp_path):
    """The course's configuration makes ``nbgrader collect`` copy regular files only: a student's
    link to a file only the instructor reads stays in the exchange, and the course records it."""
    course = Course(tmp_path)
    exchange = tmp_path / "exchange"
    cfg = course.root / "nbgrader_config.py"
    cfg.write_text(
        cfg.read_text()
        + f"\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = 'mpilab'\n"
        + "c.ExchangeCollect.check_owner = False\n"
    )
    secret = tmp_path / "instructor-only.txt"
    secret.write_text("the answer key\n")
    inbound = exchange / "mpilab" / "inbound" / "alice+lab0+2026-11-20 10:00:00.000000 UTC+abc"
    inbound.mkdir(parents=True)
    # a student id that would climb out of submitted/ is not collected
    climbing = exchange / "mpilab" / "inbound" / "..+lab0+2026-11-20 10:00:00.000000 UTC+abc"
    climbing.mkdir()
    (climbing / "lab0.ipynb").write_text("{}")
    (inbound / "lab0.ipynb").write_text(json.dumps(released_notebook("lab0")))
    (inbound / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    (inbound / "hello.c").symlink_to(secret)
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}")
    proc = subprocess.run(
        ["nbgrader", "collect", "lab0", "--log-level=WARN"],
        cwd=course.root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    got = course.root / "submitted" / "alice" / "lab0"
    assert (got / "lab0.ipynb").is_file() and not os.path.lexists(got / "hello.c")
    rec = json.loads((course.root / "intake" / "lab0" / "alice.collect.json").read_text())
    assert rec["refused"][0]["path"] == "hello.c" and os.path.islink(inbound / "hello.c")
    assert not (course.root / "lab0").exists()


@pytest.mark.slow
def test_grade_sh_tells_why_a_notebook_was_not_graded(tmp_path, built_flavour):
    """grade.sh on lab 0: a notebook that is not JSON gets a feedback page saying so (not a silent
    0); a test cell turned into an answer cell, with a forged output, is graded as the test it
    is (0 points, automatically), and its feedback says what was set back."""
    built_flavour("openmpi")
    course = Course(tmp_path)
    bad = course.submit("bad_json", "lab0", {})
    (bad / "lab0.ipynb").write_text('{"cells": [')
    nb = released_notebook("lab0")
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade_id") == "pingpong_fit":
            meta["solution"], meta["locked"] = True, False
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "all checks passed\n"}]
    course.submit("flipped", "lab0", nb)
    table, _ = course.grade("lab0", cell_timeout=60, name="intake_lab0")
    page = (course.root / "feedback" / "bad_json" / "lab0" / "lab0.html").read_text()
    assert "could not be graded" in page and "not valid JSON" in page
    assert float(table.loc["flipped", "pingpong_fit"]) == 0
    feedback = course.feedback("flipped", "lab0")
    assert "The grader&#x27;s notes on your submission" in feedback or "grader's notes" in feedback
    assert "the cell &#x27;pingpong_fit&#x27; had its locked, solution changed" in feedback.replace(
        "'", "&#x27;"
    )
    assert "needs manual grade" not in course.output.lower()


def test_grade_sh_calls_the_intake_for_every_student():
    """grade_one (every student, in every mode: the serial loop and each SLURM array task) screens
    the submission before nbgrader reads it and tells the student after."""
    text = (ROOT / "scripts" / "grade.sh").read_text()
    one = text[text.index("grade_one() {") :]
    one = one[: one.index("\n}\n")]
    assert one.index("intake before") < one.index("nbgrader autograde") < one.index("intake after")
    # a submission the intake could not screen is not graded (its links would be followed)
    screen = one[one.index("intake before") : one.index("nbgrader autograde")]
    assert "return 1" in screen
    assert "if ! python -m mpilab.grade.intake before" in one
    # both paths grade through grade_one, never nbgrader autograde on their own
    assert text.count("nbgrader autograde") == 1
    task = text[text.index('if [ "$mode" = task ]') :]
    assert 'grade_one "$student"' in task[: task.index("\nfi\n")]
    serial = text[text.index("for dir in submitted/") :]
    assert "grade_one" in serial[: serial.index("done")]
    assert "mpilab.grade.intake.SafeCollect" in (ROOT / "grader" / "nbgrader_config.py").read_text()
    assert Path(intake.__file__).name == "intake.py"
