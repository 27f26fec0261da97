"""Grading a class as a SLURM job array: which students need grading, what each task recorded,
and the progress of the array on the instructor's terminal.

``scripts/grade.sh --slurm lab2`` (``make grade ASSIGNMENT=lab2 SLURM=1``) submits one array
task per student that needs grading; each task autogrades its student (confined, as the serial
path does) into a gradebook that many tasks can write to at once (``MPILAB_DB_URL``), and
records what it graded in ``<course>/autograde-state/<lab>/<student>.json``: the digest of the
submission, the gradebook, the seconds and how it ended. A rerun grades only the students whose
submission changed, whose gradebook changed, or whose last task did not end well. A task
killed with its node is requeued by SLURM (``--requeue``) and grades its student again.

Run as ``python -m mpilab.grade.batch COMMAND ...`` by ``scripts/grade.sh``:

``pending COURSE LAB``                  the students to grade, one per line
``record COURSE LAB STUDENT SECONDS STATUS``   a task's record (STATUS ``ok`` or why not)
``watch JOB COURSE LAB LIST``           progress until the array ends; the students it did not grade
``times COURSE LAB``                    ``autograde-times-LAB.csv`` from the records
``limits SECONDS PARTITION_LIMIT``      a task's minutes and its student's seconds (:func:`task_limits`)
"""

import csv
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from mpilab.cluster.slurm import jobs
from mpilab.cluster.slurm.profiles import parse_time
from mpilab.core.errors import UsageError
from mpilab.grade.gradebook import db_url, redact

STATE_DIR = "autograde-state"


def submission_digest(folder):
    """SHA-256 of a submission folder: every entry's relative path and kind, a regular file's
    bytes, a link's target (never followed: a submitted link is the intake's to refuse)."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".ipynb_checkpoints"):
            continue
        if path.is_symlink():
            h.update(f"L {rel} -> {os.readlink(path)}\n".encode())
        elif path.is_file():
            h.update(f"F {rel} {path.stat().st_size}\n".encode())
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        elif path.is_dir():
            h.update(f"D {rel}\n".encode())
        else:
            h.update(f"O {rel}\n".encode())
    return h.hexdigest()


def gradebook_id(course):
    """Which gradebook the grades went to (its URL without the password), so that grading into
    another gradebook (SQLite, then MariaDB) grades everyone again."""
    return redact(db_url(course))


def submitted(course, assignment):
    """The students with a submission of ``assignment``, sorted."""
    root = Path(course) / "submitted"
    return sorted(p.parent.name for p in root.glob(f"*/{assignment}") if p.is_dir())


def _state_path(course, assignment, student):
    return Path(course) / STATE_DIR / assignment / f"{student}.json"


def read_record(course, assignment, student):
    """The last record of ``student``'s grading, or None (never graded, or unreadable)."""
    try:
        return json.loads(_state_path(course, assignment, student).read_text())
    except (OSError, ValueError):
        return None


def write_record(course, assignment, student, seconds, status):
    """Record a task's grading of ``student``: written whole or not at all (rename)."""
    path = _state_path(course, assignment, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "student": student,
        "digest": submission_digest(Path(course) / "submitted" / student / assignment),
        "gradebook": gradebook_id(course),
        "seconds": int(seconds),
        "status": status,
        # grade.sh --task keeps the task's ids under these names (it hides SLURM's from the notebook)
        "job": os.environ.get("MPILAB_GRADE_JOB", ""),
        "task": os.environ.get("MPILAB_GRADE_TASK", ""),
        "node": os.environ.get("MPILAB_GRADE_NODE", ""),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, path)
    return record


def up_to_date(course, assignment, student):
    """True when ``student``'s last grading ended well, on this submission, into this gradebook."""
    rec = read_record(course, assignment, student)
    return bool(
        rec
        and rec.get("status") == "ok"
        and rec.get("gradebook") == gradebook_id(course)
        and rec.get("digest") == submission_digest(Path(course) / "submitted" / student / assignment)
    )


def pending(course, assignment):
    """The students to grade: those not :func:`up_to_date`."""
    return [s for s in submitted(course, assignment) if not up_to_date(course, assignment, s)]


def progress(states, started, now):
    """One progress line and the counts behind it.

    Parameters
    ----------
    states : list of jobs.TaskState
        The array's tasks (a pending range counts as its number of tasks). A task whose
        student's autograde did not end well exits non-zero, so SLURM says FAILED.
    started, now : float
        ``time.monotonic()`` at submission, and now.

    Returns
    -------
    (str, dict)
    """
    counts = {"done": 0, "failed": 0, "running": 0, "pending": 0}
    for s in states:
        n = _range_size(s.array_task)
        if s.state.startswith("RUNNING") or s.state.startswith("COMPLETING"):
            counts["running"] += n
        elif s.state.startswith("PENDING") or s.state.startswith("REQUEUED"):
            counts["pending"] += n
        elif s.failed:
            counts["failed"] += n
        elif s.done:
            counts["done"] += n
    left = counts["running"] + counts["pending"]
    finished = counts["done"] + counts["failed"]
    eta = ""
    if left and finished:
        # the array's own pace: tasks finished per second since it started, at its parallelism
        rate = finished / max(now - started, 1e-9)
        eta = f", about {_clock(left / rate)} left"
    elif left:
        eta = ", ETA after the first student"
    line = (
        f"grade: {counts['done']} graded, {counts['failed']} failed, {counts['running']} running, "
        f"{counts['pending']} waiting ({_clock(now - started)} so far{eta})"
    )
    return line, counts


def _range_size(task):
    """Number of tasks in an array id as SLURM prints it: ``3``, ``[4-9]``, ``[4-9%2]``, ``[1,3-5]``."""
    task = task.strip("[]").split("%")[0]
    if not task or task == "N/A":
        return 1
    n = 0
    for part in task.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


def _clock(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def watch(job_id, course, assignment, students, poll=5.0, out=sys.stderr, timeout=None):
    """Print the array's progress until every task has ended; return the students it left
    ungraded (their task failed, or it ended without a good record)."""
    started = time.monotonic()
    last = None
    while True:
        states = jobs.job_states(job_id)
        line, counts = progress(states, started, time.monotonic())
        if line.split(" (")[0] != last:
            print(line, file=out, flush=True)
            last = line.split(" (")[0]
        ended = states and not counts["running"] and not counts["pending"]
        if ended:
            break
        if timeout is not None and time.monotonic() - started > timeout:
            raise UsageError(f"job {job_id} still running after {timeout} s")
        time.sleep(poll)
    return [s for s in students if not up_to_date(course, assignment, s)]


def task_limits(student_seconds, partition_limit):
    """A task's time (minutes, for ``sbatch --time``) and its student's autograde limit (s).

    The task gets the student's limit plus 5 minutes for nbgrader's start and the record. A
    partition whose time limit (``sinfo -o %l``: ``1:00:00``, ``infinite``) is shorter would
    leave the array pending for ever: the task then gets the partition's limit, and the
    student's autograde 5 minutes less, with a note saying so.
    """
    minutes = -(-int(student_seconds) // 60) + 5
    note = ""
    text = (partition_limit or "").strip()
    if text and text not in ("infinite", "UNLIMITED", "n/a"):
        cap = int(parse_time(text) // 60)
        if cap < minutes:
            if cap <= 6:
                raise UsageError(
                    f"the partition's time limit {text} leaves no time to grade a student; "
                    "choose another partition (MPILAB_GRADE_PARTITION)"
                )
            student_seconds = (cap - 5) * 60
            note = (
                f"the partition's time limit is {text}: each student's autograde is limited to "
                f"{student_seconds} s instead of the asked {minutes - 5} min (MPILAB_STUDENT_TIMEOUT)"
            )
            minutes = cap
    return minutes, int(student_seconds), note


def write_times(course, assignment):
    """``autograde-times-<lab>.csv`` (student, seconds, autograde) from the records."""
    path = Path(course) / f"autograde-times-{assignment}.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "seconds", "autograde"])
        for s in submitted(course, assignment):
            rec = read_record(course, assignment, s)
            if rec is None:
                w.writerow([s, 0, "not graded"])
            else:
                w.writerow([s, rec["seconds"], rec["status"]])
    return path


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m mpilab.grade.batch pending COURSE LAB | record COURSE LAB STUDENT SECONDS STATUS"
        " | watch JOB COURSE LAB LISTFILE | times COURSE LAB | limits STUDENT_SECONDS PARTITION_LIMIT"
    )
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    cmd, args = argv[0], argv[1:]
    arity = {"pending": 2, "record": 5, "watch": 4, "times": 2, "limits": 2}
    if cmd not in arity or len(args) != arity[cmd]:
        print(f"batch: bad command {' '.join(argv)!r}\n{usage}", file=sys.stderr)
        return 2
    try:
        if cmd == "pending":
            print("\n".join(pending(*args)))
        elif cmd == "record":
            course, lab, student, seconds, status = args
            write_record(course, lab, student, float(seconds), status)
        elif cmd == "watch":
            job, course, lab, listfile = args
            students = Path(listfile).read_text().split()
            left = watch(job, course, lab, students)
            print("\n".join(left))
        elif cmd == "limits":
            minutes, seconds, note = task_limits(*args)
            if note:
                print(f"grade.sh: {note}", file=sys.stderr)
            print(minutes, seconds)
        else:
            write_times(*args)
    except UsageError as e:
        print(f"batch: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
