"""``make bench``'s grading part: a class of lab 2 graded serially and as a SLURM job array.

``bench/bench.py --parts grading [--students 100] [--seed 1]`` builds two identical nbgrader
courses of generated lab 2 submissions, a seeded mix of

* correct: the answer key's notebook and C files (half of the class);
* broken: real-world-style C (``tests/data/grading``: a deadlocking ring, an overrun, a ring
  right only for ``MPI_INT``, the right results by the wrong algorithm) or the untouched
  release (three in ten);
* hostile: a technique of the cheating suite (``tests/cheats.py``) that applies to lab 2 and
  needs no size-capped disk (one in five);

then grades one course with ``scripts/grade.sh lab2`` (serial, SQLite) and the other with
``scripts/grade.sh --slurm lab2`` (one array task per student, the course's MariaDB) on the
local SLURM (``scripts/local-slurm.sh``, partition ``local``: one node, ``MPILAB_SLURM_CPUS``
CPUs, 2 per task), and prints, side by side: students per minute, CPU seconds per submission,
peak memory per student, and whether the two paths gave every student the same scores.

The courses and submissions are made with the end-to-end tests' own helpers (``tests/course.py``,
``tests/cheats.py``), so the bench grades what the tests grade. Serial CPU time is the grading
tree's (``RUSAGE_CHILDREN``, every process waited for); its memory the peak PSS of that tree,
sampled each second. The array's CPU time and memory are SLURM's accounting (``sacct``
``TotalCPU`` and ``MaxRSS`` of each task), so the two memory columns are not the same measure:
PSS counts a shared page once, RSS every time.
"""

import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cheats import C_TECHNIQUES, TECHNIQUES, Technique, cheating_c_files, cheating_notebook  # noqa: E402
from course import Course, released_notebook, solved_notebook  # noqa: E402

LAB = "lab2"
SOL = ROOT / "solutions" / LAB / "c_solutions"
DATA = ROOT / "tests" / "data" / "grading"
#: Broken submissions: (ring.c, bruck.c) from tests/data/grading; None is the untouched release.
BROKEN = (
    ("ring_deadlock.c", "bruck_segfault.c"),
    ("ring_mpi_int.c", "bruck_log2.c"),
    ("ring_send_first.c", "bruck_overrun.c"),
    ("ring_gather_bcast.c", "ring_spread.c"),
    None,
)
MIX = (("correct", 0.5), ("broken", 0.3), ("hostile", 0.2))


def hostile_techniques():
    """The cheating suite's techniques that apply to lab 2 and need no size-capped disk."""
    out = []
    for name, t in TECHNIQUES.items():
        if isinstance(t, Technique) and (not t.applies(LAB) or t.disk_capped):
            continue
        out.append(name)
    return out + [name for name in C_TECHNIQUES if name not in out]


def make_class(course, n, seed, scratch):
    """Put ``n`` seeded submissions in ``course``; return ``{student: kind}``."""
    rng = random.Random(seed)
    skeletons = {p.name: p for p in sorted((ROOT / "labs" / LAB).glob("*.c"))}
    hostile = hostile_techniques()
    kinds = {}
    for i in range(n):
        kind = rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX])[0]
        student = f"s{i:03d}"
        if kind == "correct":
            course.submit(
                student, LAB, solved_notebook(LAB), {"ring.c": SOL / "ring.c", "bruck.c": SOL / "bruck.c"}
            )
            label = "correct"
        elif kind == "broken":
            pair = rng.choice(BROKEN)
            if pair is None:
                course.submit(student, LAB, released_notebook(LAB), skeletons)
                label = "broken: untouched"
            else:
                files = {"ring.c": DATA / pair[0], "bruck.c": DATA / pair[1]}
                course.submit(student, LAB, solved_notebook(LAB), files)
                label = f"broken: {pair[0]}, {pair[1]}"
        else:
            t = rng.choice(hostile)
            files = skeletons
            if t in C_TECHNIQUES:
                files = {}
                for name, text in cheating_c_files(skeletons, t).items():
                    files[name] = scratch / f"{student}-{name}"
                    files[name].write_text(text)
            folder = course.submit(student, LAB, cheating_notebook(LAB, t), files)
            if isinstance(TECHNIQUES.get(t), Technique) and TECHNIQUES[t].files:
                TECHNIQUES[t].files(folder, LAB)
            label = f"hostile: {t}"
        kinds[student] = label
    return kinds


def _env(course, cell_timeout, run_timeout, **more):
    """grade.sh's environment: the course, the limits, and no gradebook URL from outside."""
    env = {k: v for k, v in os.environ.items() if k != "MPILAB_DB_URL"}
    return env | {
        "COURSE": str(course),
        "MPILAB_CELL_TIMEOUT": str(cell_timeout),
        "MPILAB_RUN_TIMEOUT": str(run_timeout),
        **more,
    }


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grade_serial(course, env, log):
    """``grade.sh lab2``: (wall s, CPU s of the tree, peak PSS bytes of the tree)."""
    from bench import _children, _pss

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "grade.sh"), LAB], env=env, stdout=out, stderr=subprocess.STDOUT
        )
        peak = 0
        while proc.poll() is None:
            peak = max(peak, sum(_pss(p) for p in _children(proc.pid)))
            time.sleep(1.0)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"grade.sh {LAB} exited {proc.returncode}: see {log}")
    return wall, cpu, peak


def _seconds(text):
    """sacct's TotalCPU ([D-]HH:MM:SS[.fff] or MM:SS.fff) in seconds."""
    days, _, rest = text.rpartition("-")
    parts = [float(x) for x in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return (float(days) if days else 0.0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def _bytes(text):
    """sacct's MaxRSS (e.g. 123456K) in bytes; 0 when empty."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if not text:
        return 0
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def array_accounting(job):
    """Per array task of ``job``: (CPU s, MaxRSS bytes) of its batch step, from sacct."""
    out = subprocess.run(
        ["sacct", "-j", job, "-n", "-P", "--format=JobID,TotalCPU,MaxRSS"], capture_output=True, text=True
    ).stdout
    tasks = {}
    for line in out.splitlines():
        jobid, cpu, rss = (line.split("|") + ["", "", ""])[:3]
        if jobid.endswith(".batch"):
            tasks[jobid.split(".")[0]] = (_seconds(cpu) if cpu else 0.0, _bytes(rss))
    return tasks


def grade_array(course, env, log):
    """``grade.sh --slurm lab2``: (wall s, {task: (CPU s, MaxRSS bytes)}, job ids)."""
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(
            [str(ROOT / "scripts" / "grade.sh"), "--slurm", LAB],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wall = time.monotonic() - start
    text = Path(log).read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"grade.sh --slurm {LAB} exited {proc.returncode}: see {log}")
    jobs = re.findall(r"as SLURM array job (\d+)", text)
    tasks = {}
    for job in jobs:
        tasks.update(array_accounting(job))
    return wall, tasks, jobs


#: Scores closer than this are the same: MariaDB keeps nbgrader's scores as single-precision
#: FLOAT (0.2222222 of a point comes back 1e-8 off), SQLite as double.
SAME_SCORE = 1e-4


def differing(serial, array):
    """The students whose scores (every column, aligned by name) differ between two tables, or
    who are in one table only."""
    students = sorted(set(serial.index) ^ set(array.index))
    both = sorted(set(serial.index) & set(array.index))
    columns = sorted(set(serial.columns) | set(array.columns))
    a, b = serial.reindex(index=both, columns=columns), array.reindex(index=both, columns=columns)
    far = ((a - b).abs() > SAME_SCORE) | (a.isna() != b.isna())
    return students + [s for s in both if far.loc[s].any()]


def run(args, outdir, say=print):
    """The grading part: build the class, grade it both ways, print the table."""
    from mpilab.grade import gradebook

    if not shutil.which("sbatch"):
        raise RuntimeError("the grading part needs SLURM (Debian: slurm-wlm munge slurmdbd mariadb-server)")
    work = outdir / "grading"
    if work.exists():
        shutil.rmtree(work)
    (work / "scratch").mkdir(parents=True)
    courses = {}
    for path in ("serial", "array"):
        (work / path).mkdir()
        course = Course(work / path)
        kinds = make_class(course, args.students, args.seed, work / "scratch")
        courses[path] = course.root
    counts = {}
    for label in kinds.values():
        counts[label.split(":")[0]] = counts.get(label.split(":")[0], 0) + 1
    (work / "class.txt").write_text("".join(f"{s}\t{k}\n" for s, k in kinds.items()))
    say(
        f"\n## Grading: {args.students} lab 2 submissions (seed {args.seed}: "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
        + f"; who is what: {work / 'class.txt'}), cell limit {args.cell_timeout:g} s, run limit "
        f"{args.run_timeout:g} s"
    )
    started = subprocess.run(
        [str(ROOT / "scripts" / "local-slurm.sh"), "start"], capture_output=True, text=True
    )
    if started.returncode != 0:
        raise RuntimeError("scripts/local-slurm.sh start failed:\n" + started.stdout + started.stderr)
    cpus = subprocess.run(
        ["sinfo", "-h", "-p", "local", "-o", "%c"], capture_output=True, text=True
    ).stdout.split()
    declared = cpus[0] if cpus else "?"
    say(
        f"# machine: {os.cpu_count()} CPUs; SLURM partition local: one node declaring {declared} CPUs, "
        "2 per task"
    )
    s_wall, s_cpu, s_peak = grade_serial(
        courses["serial"], _env(courses["serial"], args.cell_timeout, args.run_timeout), work / "serial.log"
    )
    say(f"# serial: {s_wall:.0f} s ({work / 'serial.log'})")
    a_env = _env(
        courses["array"],
        args.cell_timeout,
        args.run_timeout,
        MPILAB_GRADE_PARTITION="local",
        MPILAB_DB_PORT=str(_free_port()),
    )
    a_wall, tasks, jobs = grade_array(courses["array"], a_env, work / "array.log")
    say(f"# array: {a_wall:.0f} s, job(s) {', '.join(jobs) or '?'} ({work / 'array.log'})")
    db = [str(ROOT / "scripts" / "gradebook-db.sh")]
    url = subprocess.run([*db, "url"], env=a_env, capture_output=True, text=True).stdout.strip()
    serial = gradebook.score_table(courses["serial"], LAB)
    saved = os.environ.get("MPILAB_DB_URL")
    try:
        os.environ["MPILAB_DB_URL"] = url
        array = gradebook.score_table(courses["array"], LAB)
    finally:
        os.environ.pop("MPILAB_DB_URL", None)
        if saved is not None:
            os.environ["MPILAB_DB_URL"] = saved
        subprocess.run([*db, "stop"], env=a_env, capture_output=True)
    differ = differing(serial, array)
    same = not differ
    n = args.students
    a_cpu = sum(c for c, _ in tasks.values())
    a_peak = max((r for _, r in tasks.values()), default=0)
    say(f"{'path':>8} {'students/min':>13} {'CPU s/submission':>17} {'peak memory/student':>20}")
    rate = n / s_wall * 60
    say(f"{'serial':>8} {rate:13.2f} {s_cpu / n:17.1f} {s_peak / 2**20:15.0f} MiB (PSS of the tree)")
    say(
        f"{'array':>8} {n / a_wall * 60:13.2f} {a_cpu / max(len(tasks), 1):17.1f} {a_peak / 2**20:15.0f} MiB "
        f"(MaxRSS, {len(tasks)} tasks accounted)"
    )
    say(f"array / serial, students per minute: {s_wall / a_wall:.2f}")
    say("same scores on both paths: " + ("yes, every student" if same else f"NO: {', '.join(differ)}"))
    return same
