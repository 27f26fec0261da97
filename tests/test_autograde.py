"""The course's Execute step (mpilab.grade.autograde.GuardedExecute) on a tiny nbgrader assignment.

Real nbgrader autograde with grader/nbgrader_config.py, on a three-question notebook made here:
a kernel that ignores the interrupt, a kernel that dies, and a cell that prints without end.
"""

import json
import os
import subprocess
import sys

import nbformat
import pytest
from course import ROOT
from nbformat.v4 import new_code_cell, new_notebook

from mpilab.grade import sandbox
from mpilab.grade.grading import score_table


def _meta(gid, points=None):
    graded = points is not None
    return {"nbgrader": {"grade": graded, "grade_id": gid, "locked": graded, "schema_version": 3,
                         "solution": not graded, "task": False, **({"points": points} if graded else {})}}


def _source():
    cells = [new_code_cell("x = 1", metadata=_meta("a")),
             new_code_cell('"""x is 1."""\nassert x == 1', metadata=_meta("t_a", 1)),
             new_code_cell("y = 2", metadata=_meta("b")),
             new_code_cell('"""y is 2."""\nassert y == 2', metadata=_meta("t_b", 1)),
             new_code_cell("z = 3", metadata=_meta("c")),
             new_code_cell('"""z is 3."""\nassert z == 3', metadata=_meta("t_c", 1))]
    return new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})


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
print("submitted:", os.listdir(os.path.join(course, "submitted")))
print("solutions:", os.listdir(mpilab.core.paths.repo_root() / "solutions"))
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autograde")
    course = tmp / "course"
    (tmp / "source" / "mini").mkdir(parents=True)
    course.mkdir()
    cfg = (ROOT / "grader" / "nbgrader_config.py").read_text()
    cfg = cfg.replace('"../solutions"', repr(str(tmp / "source"))).replace('"../labs"', repr(str(tmp / "release")))
    (course / "nbgrader_config.py").write_text(cfg)
    nbformat.write(_source(), tmp / "source" / "mini" / "mini.ipynb")
    for student, answer in ANSWERS.items():
        nb = _source()
        nb.cells[2].source = answer
        (course / "submitted" / student / "mini").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / "mini" / "mini.ipynb")
    env = dict(os.environ, MPILAB_COURSE_ROOT=str(course), MPILAB_CELL_TIMEOUT="5", MPILAB_CELL_OUTPUT_CAP="100000", MPILAB_KERNEL_MEMORY_MB="2048",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])

    def nbgrader(*args):
        return subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"], cwd=course,
                              env=env, capture_output=True, text=True, timeout=300)

    assert nbgrader("generate_assignment", "mini", "--create", "--force").returncode == 0
    logs = {s: nbgrader("autograde", "mini", "--student", s, "--create", "--force") for s in ANSWERS}
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
    assert table.loc["prints_forever", ["t_a", "t_b", "t_c"]].tolist() == [1, 1, 1]   # interrupted, y was set
    text = "".join("".join(o["text"]) for o in _outputs(course, "prints_forever", 2) if o["output_type"] == "stream")
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
    assert "gradebook: Read-only file system" in text
    assert "submitted: []" in text and "solutions: []" in text and "own directory: writable" in text
    assert (course / "autograded" / "probes" / "mini" / "mine.txt").exists()
