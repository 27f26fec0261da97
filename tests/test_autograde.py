"""The course's Execute step (mpilab.grade.autograde.GuardedExecute) on a tiny nbgrader assignment.

Real nbgrader autograde with grader/nbgrader_config.py, on a three-question notebook made here:
a kernel that ignores the interrupt, a kernel that dies, a cell that prints without end, and
(where the kernel is confined) a notebook that attacks the machine, the grader and the course.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from course import ROOT
from nbformat.v4 import new_code_cell, new_notebook

import mpilab
from mpilab.grade import cgroups, sandbox
from mpilab.grade.gradebook import score_table

pytestmark = pytest.mark.nbgrader  # runs nbgrader autograde on a real course


def _meta(gid, points=None):
    graded = points is not None
    return {
        "nbgrader": {
            "grade": graded,
            "grade_id": gid,
            "locked": graded,
            "schema_version": 3,
            "solution": not graded,
            "task": False,
            **({"points": points} if graded else {}),
        }
    }


def _source():
    cells = [
        new_code_cell("x = 1", metadata=_meta("a")),
        new_code_cell('"""x is 1."""\nassert x == 1', metadata=_meta("t_a", 1)),
        new_code_cell("y = 2", metadata=_meta("b")),
        new_code_cell('"""y is 2."""\nassert y == 2', metadata=_meta("t_b", 1)),
        new_code_cell("z = 3", metadata=_meta("c")),
        new_code_cell('"""z is 3."""\nassert z == 3', metadata=_meta("t_c", 1)),
    ]
    return new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


#: A cell that looks at its limits: the network interfaces it sees, its address-space limit,
#: and a 3 GiB allocation (the fixture sets MPILAB_KERNEL_MEMORY_MB=2048).
PROBE = """y = 2
import resource
with open("/proc/net/dev") as f:
    print("interfaces:", sorted(line.split(":")[0].strip() for line in f.readlines()[2:]))
print("RLIMIT_AS:", resource.getrlimit(resource.RLIMIT_AS))
try:
    big = bytearray(3 * 2**30)
    print("allocated 3 GiB")
except MemoryError:
    print("MemoryError")
import os
import mpilab.core.paths
course = os.environ["MPILAB_COURSE_ROOT"]
try:
    open(os.path.join(course, "gradebook.db"), "a").close()
    print("gradebook: writable")
except OSError as e:
    print("gradebook:", e.strerror)
print("submitted:", os.path.exists(os.path.join(course, "submitted")))
print("solutions:", os.path.exists(mpilab.core.paths.repo_root() / "solutions"))
with open("mine.txt", "w") as f:
    print("own directory: writable")
"""

#: What each student puts in the answer cell "b" (the other answers are right).
ANSWERS = {
    "ignores_sigint": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    "kills_kernel": "import os\nos._exit(1)",
    "prints_forever": "y = 2\nwhile True:\n    print('step ' * 1000)",
    "right": "y = 2",
    "probes": PROBE,
}


def _course(tmp):
    """An nbgrader course under ``tmp`` with the kit's config and the mini assignment as source."""
    course = tmp / "course"
    (tmp / "source" / "mini").mkdir(parents=True)
    course.mkdir()
    cfg = (ROOT / "grader" / "nbgrader_config.py").read_text()
    cfg = cfg.replace('"../solutions"', repr(str(tmp / "source"))).replace(
        '"../labs"', repr(str(tmp / "release"))
    )
    # the mini assignment has no rubric in the answer key: its checks run in the kernel, as an
    # instructor's own exercise would (the labs are judged by the trusted grader)
    (course / "nbgrader_config.py").write_text(cfg + '\nc.TrustedVerdicts.without_rubric = "outputs"\n')
    nbformat.write(_source(), tmp / "source" / "mini" / "mini.ipynb")
    return course


def _submit(course, student, nb):
    (course / "submitted" / student / "mini").mkdir(parents=True)
    nbformat.write(nb, course / "submitted" / student / "mini" / "mini.ipynb")


def _nbgrader(course, env, *args):
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _env(course, **settings):
    return dict(
        os.environ,
        MPILAB_COURSE_ROOT=str(course),
        MPILAB_CELL_OUTPUT_CAP="100000",
        MPILAB_KERNEL_MEMORY_MB="2048",
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        **settings,
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = _course(tmp_path_factory.mktemp("autograde"))
    for student, answer in ANSWERS.items():
        nb = _source()
        nb.cells[2].source = answer
        _submit(course, student, nb)
    env = _env(course, MPILAB_CELL_TIMEOUT="5")
    assert _nbgrader(course, env, "generate_assignment", "mini", "--create", "--force").returncode == 0
    logs = {
        s: _nbgrader(course, env, "autograde", "mini", "--student", s, "--create", "--force") for s in ANSWERS
    }
    return course, score_table(course, "mini"), logs


def _outputs(course, student, index):
    nb = json.loads((course / "autograded" / student / "mini" / "mini.ipynb").read_text())
    return nb["cells"][index]["outputs"]


def test_a_kernel_that_ignores_the_interrupt_is_restarted(graded):
    course, table, logs = graded
    assert logs["ignores_sigint"].returncode == 0, logs["ignores_sigint"].stderr[-2000:]
    # the cell above keeps its point; the lost y costs its test; z is set again in the fresh kernel
    assert table.loc["ignores_sigint", ["t_a", "t_b", "t_c"]].tolist() == [1, 0, 1]
    (err,) = [o for o in _outputs(course, "ignores_sigint", 2) if o["output_type"] == "error"]
    assert err["ename"] == "KernelRestarted" and "ran past its time limit (5 s)" in err["evalue"]


def test_a_dead_kernel_is_restarted(graded):
    course, table, logs = graded
    assert logs["kills_kernel"].returncode == 0, logs["kills_kernel"].stderr[-2000:]
    assert table.loc["kills_kernel", ["t_a", "t_b", "t_c"]].tolist() == [1, 0, 1]
    (err,) = [o for o in _outputs(course, "kills_kernel", 2) if o["output_type"] == "error"]
    assert "the kernel died" in err["evalue"]


def test_endless_printing_is_cut(graded):
    course, table, logs = graded
    assert table.loc["prints_forever", ["t_a", "t_b", "t_c"]].tolist() == [1, 1, 1]  # interrupted, y was set
    text = "".join(
        "".join(o["text"]) for o in _outputs(course, "prints_forever", 2) if o["output_type"] == "stream"
    )
    assert len(text) < 100_000 + 1000
    assert "[output cut at 100000 characters; the rest was thrown away]" in text
    assert table.loc["right", ["t_a", "t_b", "t_c"]].tolist() == [1, 1, 1]


def test_the_kernel_runs_under_a_memory_cap_and_without_network(graded):
    course, table, logs = graded
    assert table.loc["probes", ["t_a", "t_b", "t_c"]].tolist() == [1, 1, 1]
    text = "".join("".join(o["text"]) for o in _outputs(course, "probes", 2) if o["output_type"] == "stream")
    assert f"RLIMIT_AS: ({2**31}, {2**31})" in text and "MemoryError" in text
    isolated, why = sandbox.network_isolation()
    if not isolated:
        pytest.skip(f"memory cap checked; no network namespace here: {why}")
    assert "interfaces: ['lo']" in text
    # files: the gradebook and everyone's submissions out of reach, its own directory its own
    assert re.search(r"gradebook: (Read-only file system|Permission denied)", text)
    assert "submitted: False" in text and "solutions: False" in text and "own directory: writable" in text
    assert (course / "autograded" / "probes" / "mini" / "mine.txt").exists()


# --- a hostile notebook against the confined kernel -----------------------------------------------

#: Cells a hostile student appends after the graded ones (the kernel's limits are made small in
#: the fixture: 64 MiB of disk, 512 MiB of memory, 128 processes). Each prints what it got.
ATTACK_CELLS = {
    "tmp": """marker = "/tmp/mpilab-attack-" + MARK
try:
    with open(marker, "wb") as f:
        for _ in range(3072):
            f.write(b"x" * 2**20)
            f.flush()
    print("tmp: wrote 3 GB")
except OSError as e:
    print("tmp:", e.strerror)""",
    "cwd": """try:
    for i in range(3072):
        with open(f"junk{i}", "wb") as f:
            f.write(b"x" * 2**20)
    print("cwd: wrote 3 GB")
except OSError as e:
    print("cwd:", e.strerror)""",
    "files": """import os, mpilab
course = os.environ["MPILAB_COURSE_ROOT"]
for path in (mpilab.__file__, os.path.join(course, "gradebook.db"),
             os.path.join(course, "autograded", "before", "mini", "mini.ipynb"),
             os.path.join(course, "submitted", "before", "mini", "mini.ipynb")):
    try:
        with open(path, "a") as f:
            f.write("pwned")
        print("files: wrote", path)
    except OSError as e:
        print("files: refused:", e.strerror)""",
    "bomb": """import os, time
if os.fork() == 0:
    while True:
        try:
            os.fork()
        except OSError:
            pass
time.sleep(60)
print("bomb: still running")""",
    "hog": """hog = [b"x" * (200 * 2**20) for _ in range(5)]
print("hog: holds 1000 MiB")""",
    "kill": """import os, signal, sys, time
for who, pid in (("nbgrader", int(os.environ.get("JPY_PARENT_PID", "0"))), ("parent", os.getppid()),
                 ("grader", int(os.environ["MPILAB_TEST_VICTIM"]))):
    try:
        os.kill(pid, signal.SIGKILL)
        print("kill:", who, "killed")
    except OSError as e:
        print("kill:", who, e.strerror)
try:
    os.kill(-1, signal.SIGKILL)   # every process it may signal but itself: none here
except OSError as e:
    print("kill: all others", e.strerror)
sys.stdout.flush()
time.sleep(1)                     # (for the test to read the lines above)
os.killpg(0, signal.SIGKILL)      # its process group, itself included""",
}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Three students graded one after the other: right answers, the same with
    :data:`ATTACK_CELLS` appended, right answers again."""
    isolated, note = sandbox.isolation()
    if not isolated:
        pytest.skip(note)
    tmp = tmp_path_factory.mktemp("attacked")
    course = _course(tmp)
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    students = {"before": _source(), "attacker": _source(), "zafter": _source()}
    for gid, src in ATTACK_CELLS.items():
        students["attacker"].cells.append(new_code_cell(f"MARK = {mark!r}\n" + src, metadata={"attack": gid}))
    for student, nb in students.items():
        _submit(course, student, nb)
    env = _env(
        course,
        MPILAB_CELL_TIMEOUT="60",
        MPILAB_KERNEL_DISK_MB="64",
        MPILAB_KERNEL_TOTAL_MEMORY_MB="512",
        MPILAB_KERNEL_PROCS="128",
        MPILAB_TEST_VICTIM=str(os.getpid()),
    )
    kit = Path(mpilab.__file__).parent
    assert _nbgrader(course, env, "generate_assignment", "mini", "--create", "--force").returncode == 0
    hashes = {"kit": _hashes(kit)}
    logs, seconds = {}, {}
    for student in students:
        start = time.monotonic()
        logs[student] = _nbgrader(
            course, env, "autograde", "mini", "--student", student, "--create", "--force"
        )
        seconds[student] = time.monotonic() - start
        if student == "before":
            hashes["before"] = _hashes(course / "submitted" / "before", course / "autograded" / "before")
            hashes["before_scores"] = score_table(course, "mini").loc["before"].to_dict()
    return course, mark, hashes, logs, seconds


def _hashes(*roots):
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for root in roots
        for p in sorted(Path(root).rglob("*"))
        if p.is_file()
    }


def _attack_output(course, gid):
    nb = json.loads((course / "autograded" / "attacker" / "mini" / "mini.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if c["metadata"].get("attack") == gid]
    text = "".join("".join(o["text"]) for o in cell["outputs"] if o["output_type"] == "stream")
    errors = [o["evalue"] for o in cell["outputs"] if o["output_type"] == "error"]
    return text, errors


@pytest.mark.slow
def test_a_hostile_notebook_changes_nothing_outside_its_own_directory(attacked):
    course, mark, hashes, logs, seconds = attacked
    assert all(log.returncode == 0 for log in logs.values()), {
        s: log.stderr[-2000:] for s, log in logs.items()
    }
    table = score_table(course, "mini")
    for student in ("before", "attacker", "zafter"):
        assert table.loc[student, ["t_a", "t_b", "t_c"]].tolist() == [1, 1, 1], student
    assert table.loc["before"].to_dict() == hashes["before_scores"]
    assert _hashes(course / "submitted" / "before", course / "autograded" / "before") == hashes["before"]
    assert _hashes(Path(mpilab.__file__).parent) == hashes["kit"]
    text, _ = _attack_output(course, "files")
    assert text.count("files: refused:") == 4, text


@pytest.mark.slow
def test_a_hostile_notebook_stops_at_its_disk_caps_and_leaves_nothing(attacked):
    course, mark, *_ = attacked
    text, _ = _attack_output(course, "tmp")
    assert text.startswith("tmp: No space left on device")
    assert not os.path.exists(f"/tmp/mpilab-attack-{mark}")
    text, _ = _attack_output(course, "cwd")
    assert text.startswith("cwd: No space left on device")
    assert (
        "[grader] this cell hit a limit: it filled its 64 MiB of disk (its own directory; "
        "MPILAB_KERNEL_DISK_MB)" in text
    )
    own = course / "autograded" / "attacker" / "mini"
    assert sum(p.stat().st_size for p in own.rglob("*") if p.is_file()) < 66 * 2**20


@pytest.mark.slow
def test_a_fork_bomb_or_a_memory_hog_in_a_cell_costs_a_kernel_restart(attacked):
    course, *_ = attacked
    if "pids" in cgroups.parents():
        _, errors = _attack_output(course, "bomb")
        assert errors and errors[0].endswith(
            "this notebook hit a limit of the grader: it started more than 128 "
            "processes/threads and was stopped (MPILAB_KERNEL_PROCS)"
        )
    if "memory" in cgroups.parents():
        text, errors = _attack_output(course, "hog")
        assert "hog: holds" not in text
        assert (
            errors
            and "this notebook hit a limit of the grader: it used more than 512 MiB of memory" in errors[0]
        )


@pytest.mark.slow
def test_a_kernel_cannot_signal_nbgrader_or_the_grader(attacked):
    course, *_ = attacked
    text, errors = _attack_output(course, "kill")
    assert "kill: nbgrader Operation not permitted" in text and "kill: parent Operation not permitted" in text
    assert "kill: grader No such process" in text and "kill: all others No such process" in text
    assert errors and "the kernel died" in errors[0]
