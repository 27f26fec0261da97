"""Grading a class as a SLURM job array (mpilab/grade/batch.py, scripts/grade.sh --slurm) into a
MariaDB gradebook (scripts/gradebook-db.sh): which students a rerun grades, the progress line,
and, end to end on the local SLURM, a task killed mid-grading, the rerun that grades only its
student, and the same scores as the serial path into SQLite; on a private three-node SLURM, a
node that dies while it grades and the requeued task that grades its student again."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest
from course import ROOT, Course, released_notebook, solved_notebook

from mpilab.cluster.slurm.jobs import TaskState
from mpilab.core.errors import UsageError
from mpilab.grade import batch, gradebook


def _course_with(tmp_path, files):
    root = tmp_path / "course"
    for rel, text in files.items():
        p = root / "submitted" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_the_digest_follows_content_and_names_not_times(tmp_path):
    root = _course_with(tmp_path, {"ann/lab2/ring.c": "int x;", "ann/lab2/lab2.ipynb": "{}"})
    sub = root / "submitted" / "ann" / "lab2"
    first = batch.submission_digest(sub)
    os.utime(sub / "ring.c", (1, 1))
    assert batch.submission_digest(sub) == first
    (sub / "ring.c").write_text("int y;")
    assert batch.submission_digest(sub) != first
    (sub / "ring.c").write_text("int x;")
    assert batch.submission_digest(sub) == first
    (sub / "ring.c").rename(sub / "bruck.c")
    assert batch.submission_digest(sub) != first


def test_the_digest_does_not_follow_a_submitted_link(tmp_path):
    root = _course_with(tmp_path, {"ann/lab2/lab2.ipynb": "{}"})
    sub = root / "submitted" / "ann" / "lab2"
    secret = tmp_path / "secret"
    secret.write_text("one")
    (sub / "ring.c").symlink_to(secret)
    first = batch.submission_digest(sub)
    secret.write_text("two")  # the link's target is not read
    assert batch.submission_digest(sub) == first


def test_a_rerun_grades_only_what_changed_or_failed(tmp_path, monkeypatch):
    monkeypatch.delenv("MPILAB_DB_URL", raising=False)
    root = _course_with(
        tmp_path,
        {f"{s}/lab2/lab2.ipynb": "{}" for s in ("ann", "bob", "cy", "dee")} | {"eve/lab1/lab1.ipynb": "{}"},
    )
    assert batch.pending(root, "lab2") == ["ann", "bob", "cy", "dee"]
    for s in ("ann", "bob", "cy"):
        batch.write_record(root, "lab2", s, 12, "ok")
    batch.write_record(root, "lab2", "dee", 3, "failed (exit 1)")
    assert batch.pending(root, "lab2") == ["dee"]
    (root / "submitted" / "bob" / "lab2" / "ring.c").write_text("late")
    assert batch.pending(root, "lab2") == ["bob", "dee"]
    # the same submissions into another gradebook: everyone again
    monkeypatch.setenv("MPILAB_DB_URL", "mysql+pymysql://mpilab:pw@127.0.0.1:1/gb")
    assert batch.pending(root, "lab2") == ["ann", "bob", "cy", "dee"]
    monkeypatch.delenv("MPILAB_DB_URL")
    batch.write_times(root, "lab2")
    rows = (root / "autograde-times-lab2.csv").read_text().splitlines()
    assert rows[0] == "student,seconds,autograde" and "dee,3,failed (exit 1)" in rows
    # a record cut short (a task killed while writing) counts as never graded
    (root / batch.STATE_DIR / "lab2" / "ann.json").write_text('{"status": "o')
    assert "ann" in batch.pending(root, "lab2")


def test_the_password_stays_out_of_records(tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_DB_URL", "mysql+pymysql://mpilab:s3cret@db.example:3306/gb")
    root = _course_with(tmp_path, {"ann/lab2/lab2.ipynb": "{}"})
    rec = batch.write_record(root, "lab2", "ann", 5, "ok")
    assert (
        "s3cret" not in json.dumps(rec)
        and rec["gradebook"] == "mysql+pymysql://mpilab:***@db.example:3306/gb"
    )


def test_a_bad_database_url_names_the_valid_schemes(tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_DB_URL", "postgres://u:pw@h/db")
    with pytest.raises(UsageError) as e:
        gradebook.db_url(tmp_path)
    assert "'postgres'" in str(e.value) and "mysql+pymysql" in str(e.value) and "pw" not in str(e.value)


def test_the_progress_line_counts_tasks_and_gives_an_eta():
    states = [
        TaskState("7", "0", "COMPLETED", "0:0"),
        TaskState("7", "1", "FAILED", "1:0"),
        TaskState("7", "2", "RUNNING"),
        TaskState("7", "[3-9%2]", "PENDING"),
    ]
    line, counts = batch.progress(states, started=0.0, now=120.0)
    assert counts == {"done": 1, "failed": 1, "running": 1, "pending": 7}
    # 2 finished in 120 s: 8 left take about 480 s at the same pace
    assert line.startswith("grade: 1 graded, 1 failed, 1 running, 7 waiting") and "8 min 00 s left" in line
    first, _ = batch.progress([TaskState("7", "[0-3]", "PENDING")], started=0.0, now=3.0)
    assert "ETA after the first student" in first


def test_batch_commands_refuse_bad_input(capsys):
    assert batch.main(["frobnicate"]) == 2
    assert "bad command" in capsys.readouterr().err
    assert batch.main(["pending", "only-one"]) == 2


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _grade(course, *args, env=None, timeout=1800):
    proc = subprocess.run(
        [str(ROOT / "scripts" / "grade.sh"), *args],
        env=dict(os.environ, COURSE=str(course), MPILAB_CELL_TIMEOUT="300", **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = proc.stdout + proc.stderr
    (ROOT / "test-output").mkdir(exist_ok=True)
    return proc.returncode, out


def _table(course, env=None):
    saved = os.environ.get("MPILAB_DB_URL")
    try:
        if env:
            os.environ.update(env)
        return gradebook.score_table(course, "lab0").drop(columns=["max"], errors="ignore")
    finally:
        os.environ.pop("MPILAB_DB_URL", None)
        if saved is not None:
            os.environ["MPILAB_DB_URL"] = saved


@pytest.mark.slow
def test_a_class_graded_as_a_job_array_into_mariadb_scores_as_the_serial_path(local_slurm, tmp_path):
    """Two lab 0 submissions (the solution, the untouched release): graded serially into SQLite,
    and as a job array into the course's MariaDB with the first task killed while it grades.
    The rerun grades only that student; the scores then equal the serial path's, and a third
    run grades nobody."""
    if not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        pytest.skip("mariadbd is not installed (Debian: mariadb-server)")
    courses = {}
    for path in ("serial", "array"):
        (tmp_path / path).mkdir()
        course = Course(tmp_path / path)
        course.submit(
            "ann", "lab0", solved_notebook("lab0"), {"hello.c": ROOT / "solutions/lab0/c_solutions/hello.c"}
        )
        course.submit("bob", "lab0", released_notebook("lab0"), {"hello.c": ROOT / "labs/lab0/hello.c"})
        courses[path] = course.root
    rc, out = _grade(courses["serial"], "lab0")
    (ROOT / "test-output" / "batch_serial.txt").write_text(out)
    assert rc == 0, out[-3000:]
    serial = _table(courses["serial"])
    assert serial.loc["ann", "total"] > 0 and serial.loc["bob", "total"] == 0

    env = {"MPILAB_DB_PORT": str(_free_port()), "MPILAB_GRADE_PARTITION": local_slurm}
    try:
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "grade.sh"), "--slurm", "lab0"],
            env=dict(os.environ, COURSE=str(courses["array"]), MPILAB_CELL_TIMEOUT="300", **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # kill the task of the first student in the list as soon as it runs
        deadline = time.monotonic() + 300
        killed = None
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            q = subprocess.run(
                ["squeue", "-h", "-n", "mpilab-grade-lab0", "-t", "RUNNING", "-o", "%i"],
                capture_output=True,
                text=True,
            ).stdout.split()
            task0 = [j for j in q if j.endswith("_0")]
            if task0:
                time.sleep(3)  # well into the student's autograde
                subprocess.run(["scancel", "--signal=KILL", "--full", task0[0]], check=True)
                killed = task0[0]
            time.sleep(0.5)
        out, _ = proc.communicate(timeout=1800)
        (ROOT / "test-output" / "batch_array.txt").write_text(out)
        assert killed, f"task 0 never ran:\n{out[-3000:]}"
        assert proc.returncode == 0, out[-3000:]
        assert "grading 2 of 2 students as SLURM array job" in out
        assert "not graded this time: ann" in out, out[-3000:]
        assert "failed" in out and "graded" in out  # the progress lines

        rc, again = _grade(courses["array"], "--slurm", "lab0", env=env)
        (ROOT / "test-output" / "batch_rerun.txt").write_text(again)
        assert rc == 0, again[-3000:]
        assert "grading 1 of 2 students" in again and "not graded this time" not in again, again[-3000:]
        url = subprocess.run(
            [str(ROOT / "scripts" / "gradebook-db.sh"), "url"],
            env=dict(os.environ, COURSE=str(courses["array"]), **env),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert url.startswith("mysql+pymysql://")
        assert not (courses["array"] / "gradebook.db").exists()  # nothing went to SQLite
        array = _table(courses["array"], {"MPILAB_DB_URL": url})
        assert array.to_dict() == serial.to_dict()

        rc, third = _grade(courses["array"], "--slurm", "lab0", env=env)
        assert rc == 0 and "nothing to grade" in third, third[-3000:]
    finally:
        subprocess.run(
            [str(ROOT / "scripts" / "gradebook-db.sh"), "stop"],
            env=dict(os.environ, COURSE=str(courses["array"]), **env),
            capture_output=True,
        )


@pytest.mark.parametrize(
    "seconds, partition, minutes, student, noted",
    [
        (3600, "infinite", 65, 3600, False),
        (3600, "2:00:00", 65, 3600, False),
        (3600, "1:00:00", 60, 3300, True),  # else the array waits for ever (PartitionTimeLimit)
        (600, "", 15, 600, False),
    ],
)
def test_a_task_fits_its_partition(seconds, partition, minutes, student, noted):
    got_minutes, got_student, note = batch.task_limits(seconds, partition)
    assert (got_minutes, got_student, bool(note)) == (minutes, student, noted)


def test_a_partition_too_short_to_grade_is_refused():
    with pytest.raises(UsageError, match="MPILAB_GRADE_PARTITION"):
        batch.task_limits(3600, "5")


def test_the_course_database_starts_from_a_course_deep_in_the_tree(tmp_path):
    """A Unix socket's path may not pass 107 bytes; a course this deep still gets its MariaDB."""
    if not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        pytest.skip("mariadbd is not installed (Debian: mariadb-server)")
    course = tmp_path / ("c" * 60) / ("d" * 40) / "course"
    course.mkdir(parents=True)
    assert len(str(course / ".gradebook-db" / "mysql.sock")) > 107
    env = dict(os.environ, COURSE=str(course), MPILAB_DB_PORT=str(_free_port()))
    script = str(ROOT / "scripts" / "gradebook-db.sh")
    try:
        r = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        url = r.stdout.strip().splitlines()[-1]
        assert url.startswith("mysql+pymysql://mpilab:") and url.endswith("/mpilab_gradebook")
        import sqlalchemy

        with sqlalchemy.create_engine(url).connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)


def _automatic_points(lab):
    """The points of a lab's autograded cells (the solution earns them all)."""
    return sum(
        c["metadata"]["nbgrader"].get("points", 0)
        for c in released_notebook(lab)["cells"]
        if c["cell_type"] == "code"
        and c["metadata"].get("nbgrader", {}).get("grade")
        and not c["metadata"]["nbgrader"].get("solution")
    )


@pytest.mark.slow
@pytest.mark.slurm
def test_a_node_that_dies_while_it_grades_costs_no_student_a_grade(tmp_path):
    """Three lab 0 students graded as a job array on a private three-node SLURM, one task a node,
    into a MariaDB on the controller's address. The node grading the first student is killed
    (its slurmd and every process in it) while it grades: SLURM declares it DOWN and requeues
    that task (grade.sh submits with --requeue), which grades the student again on a node that
    is left. grade.sh ends with every student graded, and each has the grade their submission
    earns: both solutions every automatic point, the untouched release none."""
    from slurm_cluster import multinode_cluster, wait_until

    if not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        pytest.skip("mariadbd is not installed (Debian: mariadb-server)")
    course = Course(tmp_path)
    solution = {"hello.c": ROOT / "solutions/lab0/c_solutions/hello.c"}
    course.submit("ann", "lab0", solved_notebook("lab0"), solution)
    course.submit("bob", "lab0", released_notebook("lab0"), {"hello.c": ROOT / "labs/lab0/hello.c"})
    course.submit("cid", "lab0", solved_notebook("lab0"), solution)
    with multinode_cluster("grading", nodes=3, cpus=2, partition="nodes") as cluster:
        env = {
            "MPILAB_DB_PORT": str(_free_port()),
            "MPILAB_DB_HOST": cluster.controller_address,  # where the nodes reach the gradebook
            "MPILAB_GRADE_PARTITION": cluster.partition,
            "MPILAB_GRADE_CPUS": str(cluster.cpus),  # one task a node
            "SLURM_CONF": cluster.conf,
        }
        full = dict(os.environ, COURSE=str(course.root), MPILAB_CELL_TIMEOUT="300", **env)
        proc = None
        try:
            proc = subprocess.Popen(
                [str(ROOT / "scripts" / "grade.sh"), "--slurm", "lab0"],
                env=full,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )

            def running():
                rows = cluster.run("squeue", "-h", "-n", "mpilab-grade-lab0", "-o", "%i %T %N").stdout
                where = {
                    r.split()[0]: r.split()[2] for r in rows.splitlines() if r.split()[1:2] == ["RUNNING"]
                }
                return where if len(where) == 3 else None

            where = wait_until("the three grading tasks running", running, 300)
            (task0,) = [t for t in where if t.endswith("_0")]
            victim = where[task0]
            assert sorted(where.values()) == cluster.nodes, where  # one task a node
            time.sleep(8)  # well into ann's autograde
            cluster.kill_node(victim)
            wait_until(
                f"{victim} DOWN",
                lambda: (
                    cluster.run("sinfo", "-h", "-n", victim, "-o", "%t").stdout.strip().startswith("down")
                ),
                90,
            )

            def requeued():
                shown = cluster.run("scontrol", "show", "job", "-o", task0, check=False).stdout
                return shown if "Restarts=1" in shown else None

            info = wait_until(f"{task0} requeued", requeued, 60)
            # SLURM 22.05 holds a requeued batch job about two minutes; let it go at once
            if "JobState=PENDING" in info:
                cluster.run("scontrol", "update", f"JobId={task0}", "StartTime=now", check=False)
            out, _ = proc.communicate(timeout=1500)
            (ROOT / "test-output").mkdir(exist_ok=True)
            (ROOT / "test-output" / "batch_node_failure.txt").write_text(out)
            assert proc.returncode == 0, out[-3000:]
            assert "grading 3 of 3 students as SLURM array job" in out, out[-3000:]
            assert "not graded this time" not in out, out[-3000:]
            url = subprocess.run(
                [str(ROOT / "scripts" / "gradebook-db.sh"), "url"],
                env=full,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            table = _table(course.root, {"MPILAB_DB_URL": url})
            most = _automatic_points("lab0")
            assert most > 0
            assert table["total"].to_dict() == {"ann": most, "bob": 0, "cid": most}, table.to_string()
            print(f"{task0} on {victim}: killed, requeued, graded again; totals {table['total'].to_dict()}")
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
            subprocess.run([str(ROOT / "scripts" / "gradebook-db.sh"), "stop"], env=full, capture_output=True)
