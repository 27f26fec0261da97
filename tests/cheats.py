"""Cheating submissions: one per technique, for any lab (issue 14's suite).

A cheating notebook is the released notebook cut down to what a student who wants points
without work keeps: the locked import cells, one cell of their own (the technique, and dummy
values for every answer the graded cells hand in), and the graded test cells. Each must score 0
on every automatic cell, and nothing it does may reach the kit's files, the course, or the
student graded after it.
"""

import ast
import json
import os
import re
import socket
import stat
from dataclasses import dataclass

from course import ROOT, released_notebook


@dataclass(frozen=True)
class Technique:
    """A technique that is more than one cell of code.

    ``code`` is the student's own cell (text, or ``{lab: text}`` for the labs it applies to);
    ``files(submission, lab)`` changes the submitted folder after the notebook and files are
    in it; ``labs`` are the labs where it applies (None: every lab); ``says`` is what the
    feedback must hold; ``disk_capped``: grade it only in a course on a size-capped tmpfs (what it
    does, unchecked, fills a disk).
    """

    code: object = ""
    files: object = None
    labs: tuple = None
    says: str = ""
    disk_capped: bool = False

    def code_for(self, lab):
        return self.code.get(lab, "") if isinstance(self.code, dict) else self.code

    def applies(self, lab):
        return self.labs is None or lab in self.labs


#: Runs in whatever process evaluates a cost answer: it turns every case of every verdict that
#: process reports into a pass, and leaves a mark in the course.
_TAKEOVER = """
import os, mpilab.grade.cases as _c
_f = _c.CellVerdict.to_dict
def _g(self, _f=_f):
    d = _f(self)
    d["cases"] = [dict(x, passed=True) for x in d["cases"]] or [{"name": "x", "passed": True}]
    d["score"] = d["points"]
    return d
_c.CellVerdict.to_dict = _g
_r = os.environ.get("MPILAB_COURSE_ROOT")
if _r:
    with open(os.path.join(_r, "pwned-by-a-cost-answer"), "a") as _h:
        _h.write("code ran in the grader\\n")
"""


def _escape(function):
    """An expression that reaches ``exec`` through a function's globals and runs :data:`_TAKEOVER`."""
    return f"{function}.__globals__['__builtins__']['exec']({_TAKEOVER!r}, {function}.__globals__)"


#: Text that ``parse_expr`` with the kit's functions evaluates (``log2`` is one of them), and a
#: string that ``sympify`` evaluates (``symbols`` is in its namespace).
COST_TEXT = _escape("log2")
COST_LIST_ITEM = _escape("symbols")


def _every_answer(value):
    """A cell that sets every answer that is not a figure or a table to ``value`` (Python text)."""

    def code(names):
        return "".join(
            f"{n} = {value}\n"
            for n in names
            if not n.startswith("fig")
            and not (n in ("at4", "at16k", "s8") or n.endswith(("_df", "results", "table")))
        )

    return code


def _not_files(submission, lab):
    """The notebook a symbolic link to the solution notebook, each C file one to /etc/shadow, a
    folder one to /etc, a file a hard link to nothing of the student's (the answer key's
    notebook, where one file system holds both)."""
    nb = submission / f"{lab}.ipynb"
    nb.unlink()
    nb.symlink_to(ROOT / "solutions" / lab / f"{lab}.ipynb")
    for c in sorted(submission.glob("*.c")):
        c.unlink()
        c.symlink_to("/etc/shadow")
    (submission / "etc").symlink_to("/etc")
    (submission / "key.c").symlink_to(ROOT / "solutions")


def _devices(submission, lab):
    """Files that are not files: /dev/zero behind a C file's name (or data.csv), a FIFO, a
    socket, and (as root) a character device node."""
    cs = sorted(submission.glob("*.c"))
    target = cs[0] if cs else submission / "data.csv"
    target.unlink(missing_ok=True)
    target.symlink_to("/dev/zero")
    os.mkfifo(submission / "pipe.csv")
    # an AF_UNIX path holds 107 bytes: bind through the folder's descriptor (pytest's are deep)
    fd = os.open(submission, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(f"/proc/self/fd/{fd}/sock")
    finally:
        os.close(fd)
    if os.geteuid() == 0:
        os.mknod(submission / "zero.c", stat.S_IFCHR | 0o644, os.makedev(1, 5))


#: Invented data: tables the student typed, plots drawn from them, and (labs 2 and 6) a
#: prediction that claims it came first.
_IMPORTS = """
import matplotlib.pyplot as plt
import pandas as pd
"""
_PLOT = """
def _plot(t, x, y, label, ax=None, xlog=True):
    if ax is None:
        _fig, ax = plt.subplots()
    for _a, _g in t.groupby(label):
        ax.plot(_g[x], _g[y], marker="o", label=str(_a))
    if xlog:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes per process (B)" if x == "bytes" else "processes P")
    ax.set_ylabel("latency (us)")
    ax.legend()
    return ax.figure
"""
_PREDICTION = """
import types as _types
from mpilab.grade.labs import {lab} as _lab
prediction = _types.SimpleNamespace(
    table=pd.DataFrame([dict(algorithm=a, nprocs=q, bytes=b, predicted_us=1.0)
                        for a in _lab.PREDICTED for q in {p} for b in {sizes}]),
    made_at="2000-01-01T00:00:00+00:00")
with open("prediction-{lab}-thin.json", "w") as _f:
    _f.write("{{}}")
sim = pd.DataFrame({{"algorithm": ["x"], "nprocs": [4], "bytes": [8], "maxrank_avg_us": [1.0],
                    "date": ["2099-01-01T00:00:00+00:00"]}})
"""
INVENTED = {
    "lab0": """
import numpy as _np
pp = pd.DataFrame({"bytes": [0, 1024, 8192, 65536], "avg_us": [0.5, 0.7048, 2.1384, 13.6072]})
pp["maxrank_median_us"] = pp["avg_us"]
(alpha_us, beta_us_per_byte), *_ = _np.linalg.lstsq(
    _np.column_stack([_np.ones(4), pp["bytes"]]), pp["avg_us"], rcond=None)
alpha_us, beta_us_per_byte = float(alpha_us), float(beta_us_per_byte)
bandwidth_GBps = 1e-3 / beta_us_per_byte
""",
    "lab1": _PLOT
    + """
fixed = pd.DataFrame([dict(collective=c, algorithm="binomial", nprocs=q, bytes=1024,
                           avg_us=float(q) * (i + 1))
                      for i, c in enumerate(("bcast", "reduce")) for q in (2, 4, 8, 12, 16, 24, 32, 48)])
fig, _axes = plt.subplots(1, 2)
for _ax, _c in zip(_axes, ("bcast", "reduce")):
    _plot(fixed[fixed.collective == _c], "nprocs", "avg_us", "algorithm", _ax, xlog=False)
""",
    "lab2": _PLOT
    + """
at4 = pd.DataFrame({"algorithm": ["ring"], "nprocs": [4], "bytes": [4], "maxrank_avg_us": [1.0]})
at16k = pd.DataFrame({"algorithm": ["ring"], "nprocs": [4], "bytes": [16384], "maxrank_avg_us": [1.0]})
fig = _plot(at4, "bytes", "maxrank_avg_us", "algorithm")
fig_p = _plot(at16k, "nprocs", "maxrank_avg_us", "algorithm")
"""
    + _PREDICTION.format(lab="lab2", p="_lab.P_SIM", sizes="_lab.SIZES"),
    "lab3": _PLOT
    + """
s8 = pd.DataFrame([dict(algorithm=a, nprocs=q, median_us=float(q) * (i + 1))
                   for i, a in enumerate(("default", "two_level")) for q in (16, 32)])
fig = _plot(s8, "nprocs", "median_us", "algorithm")
""",
    "lab4": """
import warnings as _w
from mpilab.model import p2p as _p2p
from mpilab.simulate import calibration as _cal
pp = pd.DataFrame({"collective": "pingpong", "flavour": "openmpi", "platform": "local", "mapping": "core",
                   "nprocs": 2, "bytes": [0, 64, 256, 1024, 4096, 16384],
                   "maxrank_median_us": [0.5, 0.51, 0.55, 0.7, 1.3, 3.7]})
pp["avg_us"] = pp["maxrank_avg_us"] = pp["maxrank_median_us"]
with _w.catch_warnings():
    _w.simplefilter("ignore")
    my_platform = _cal.calibrate(_p2p.fit(pp, segments=1, value="maxrank_median_us"), base="orfeo-thin",
                                 path="my-machine.xml")
""",
    "lab5": """
quiet = pd.DataFrame([dict(collective="bcast", algorithm=a, platform="orfeo-thin", nprocs=8, bytes=b,
                           repetition=0, avg_us=t, maxrank_avg_us=t, probe_us=1.0)
                      for a, t in (("binomial", 2.0), ("pipeline", 3.0)) for b in (8, 1024)])
table = pd.DataFrame({"collective": ["bcast"], "nprocs_min": [8], "nprocs_max": [8], "bytes_min": [8],
                      "bytes_max": [1024], "algorithm": ["binomial"]})
regret = pd.DataFrame({"algorithm": ["binomial", "pipeline"], "mean_regret": [0.0, 0.5],
                       "max_regret": [0.0, 0.5]})
series = quiet.assign(probe_us=[1.0, 2.0, 3.0, 4.0])
corr = pd.DataFrame({"algorithm": ["binomial", "binomial", "pipeline", "pipeline"],
                     "bytes": [8, 1024, 8, 1024], "pearson_r": [1.0, 1.0, 1.0, 1.0]})
""",
    "lab6": """
from mpilab.grade.labs import lab6 as _l6
sweep = pd.DataFrame([dict(platform=w, nprocs=q, segsize=g, maxrank_avg_us=1000.0 + abs(g - 16384) / 100)
                      for w in _l6.SWEEP_PLATFORMS for q in _l6.SWEEP_P for g in _l6.SEGSIZES])
best_seg = sweep.loc[sweep.groupby(["platform", "nprocs"])["maxrank_avg_us"].idxmin(),
                     ["platform", "nprocs", "segsize", "maxrank_avg_us"]].reset_index(drop=True)
"""
    + _PREDICTION.format(lab="lab6", p="_lab.P_MAP", sizes="_lab.SIZES_MAP"),
}

#: In-notebook techniques: the code of the student's own cell (text), or a :class:`Technique`.
TECHNIQUES = {
    # replace every check of the kit, and the hand-in itself, by functions that say "passed",
    # and hand in a forged payload that claims a verdict
    "monkeypatch": """
import sys
import mpilab.grade.answers as _answers
from IPython.display import display as _display

def _passed(*args, **kwargs):
    return []

for _name, _mod in list(sys.modules.items()):
    if _name.startswith("mpilab") and _mod is not None:
        for _attr in dir(_mod):
            if _attr.startswith(("check", "value_cases", "form_cases", "latency_plot_cases", "run_cases")):
                setattr(_mod, _attr, _passed)

def _forged(grade_id, **answers):
    payload = {"version": 1, "grade_id": grade_id, "verdict": {"score": 99, "passed": True},
               "answers": {k: {"kind": "text", "value": "PASS"} for k in answers}}
    _display({_answers.MIME: payload, "text/plain": f"{grade_id}: passed"}, raw=True)

_answers.hand_in = _forged
check = lambda grade_id, *values: _forged(grade_id, **{f"answer{i}": v for i, v in enumerate(values)})
""",
    # redefine builtins the checks use
    "builtins": """
import builtins
builtins.isinstance = lambda *args: True
builtins.float = lambda *args: 1.0
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.sorted = lambda *args, **kwargs: []
""",
    # patch the libraries the checks use: comparisons always equal, axes always logarithmic
    "libraries": """
import sympy, numpy, pandas, math
import matplotlib.axes
sympy.simplify = lambda *args, **kwargs: 0
sympy.srepr = lambda e: "Integer(0)"
numpy.allclose = lambda *args, **kwargs: True
numpy.array_equal = lambda *args, **kwargs: True
math.isclose = lambda *args, **kwargs: True
pandas.DataFrame.equals = lambda *args, **kwargs: True
matplotlib.axes.Axes.get_xscale = lambda self: "log"
matplotlib.axes.Axes.get_yscale = lambda self: "log"
matplotlib.axes.Axes.get_xlabel = lambda self: "bytes (B)"
matplotlib.axes.Axes.get_ylabel = lambda self: "latency (us)"
""",
    # write into the kit (a passing judge), the course's gradebook, other students' files
    "writes": """
import glob, os, mpilab
_kit = os.path.dirname(mpilab.__file__)
_course = os.environ.get("MPILAB_COURSE_ROOT", "../../..")
_targets = glob.glob(_kit + "/grade/*.py") + [_course + "/gradebook.db"]
_targets += glob.glob(_course + "/submitted/*/*/*") + glob.glob(_course + "/autograded/*/*/*")
for _f in _targets:
    try:
        with open(_f, "a") as _h:
            _h.write("\\nimport sys; sys.exit(0)  # cheat\\n")
        print("wrote", _f)
    except OSError as _e:
        print("refused", _f, _e.strerror)
""",
    # print what a pass looks like, then kill and signal whatever can be reached
    "kill": """
import os, signal
print("mpilab grader: 15 of 15 points (every case passed)")
for _pid in (os.getppid(), 1):
    try:
        os.kill(_pid, signal.SIGKILL)
    except OSError as _e:
        print("refused", _pid, _e.strerror)
""",
    # a cost handed in as text that escapes to exec through a function's globals, and a list of
    # such strings (sympify evaluates each): code in the grader, as root, passing every case
    # (no `says`: a lab without cost answers, like lab 0, has no message to show)
    "cost_text": Technique(_every_answer(repr(COST_TEXT))),
    "cost_list": Technique(_every_answer(repr([COST_LIST_ITEM]))),
    # files that are not files: links to the solution notebook, /etc/shadow, /etc, the key
    "symlinks": Technique(files=_not_files, says="symbolic link"),
    # /dev/zero behind a file's name, a FIFO, a socket, a device node
    "devices": Technique(files=_devices, says="not a regular file", disk_capped=True),
    # a typed-in table, plots drawn from it, a prediction "made" in 2000
    "invented": Technique({lab: _IMPORTS + code for lab, code in INVENTED.items()}, labs=tuple(INVENTED)),
}


#: Techniques in the C files (labs 2, 3 and 6): what each does to every skeleton; their notebook
#: is the cut-down release with dummies and no cell of the student's own.
C_TECHNIQUES = {
    # where the function's code goes: print a passing line for every kind of case any harness
    # runs, then end the program before the harness says anything
    "c_forged": lambda src: _at_first_code(
        src,
        """
    int _rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &_rank);
    if (_rank == 0) {
        static const char *kinds[] = {"int", "char", "double", "in-place", "sub-communicator",
                                      "root", "segments", "prime-count"};
        for (int k = 0; k < 8; k++)
            printf("CASE %s count=1\\tPASS\\n", kinds[k]);
        fflush(stdout);
    }
    _exit(0);
""",
    ),
    # stand in for the MPI_Allreduce a harness uses to learn whether any rank failed: "none did"
    "c_interposed": lambda src: (
        """#include <mpi.h>
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    (void)s; (void)t; (void)op; (void)comm;
    for (int i = 0; i < n; i++) ((int *)r)[i] = 1 << 30;
    return MPI_SUCCESS;
}
"""
        + src
    ),
}


def _at_first_code(src, code):
    """``src`` with its first ``YOUR CODE HERE`` line replaced by ``code`` (and the headers it needs)."""
    lines = src.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "YOUR CODE HERE" in line)
    lines[at] = code
    return "#include <stdio.h>\n#include <unistd.h>\n" + "".join(lines)


def cheating_c_files(skeletons, technique):
    """{name: text} of every skeleton of a lab with the C technique applied."""
    return {name: C_TECHNIQUES[technique](path.read_text()) for name, path in skeletons.items()}


def _root_names(expr):
    return [n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)]


def answer_names(notebook):
    """The names the graded test cells pass to ``check`` (their dummies are defined)."""
    names = []
    for cell in notebook["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        for call in re.findall(r"check\((.*)\)", "".join(cell["source"])):
            for arg in list(ast.parse(f"f({call})", mode="eval").body.args)[1:]:
                for name in _root_names(ast.unparse(arg)):
                    if name not in names:
                        names.append(name)
    return names


#: Dummy values: a blank figure for the names that look like figures, an empty table for the
#: tables, None for the rest.
def _dummies(names):
    lines = ["import matplotlib.pyplot as _plt", "import pandas as _pd"]
    for name in names:
        if name.startswith("fig"):
            lines.append(f"{name} = _plt.figure(); {name}.add_subplot()")
        elif name in ("at4", "at16k", "s8") or name.endswith(("_df", "results", "table")):
            lines.append(f"{name} = _pd.DataFrame()")
        else:
            lines.append(f"{name} = None")
    return "\n".join(lines) + "\n"


def cheating_notebook(lab, technique):
    """The released notebook of ``lab`` with the technique's cell (see the module's docstring)."""
    nb = released_notebook(lab)
    code = TECHNIQUES.get(technique, "") if technique in C_TECHNIQUES else TECHNIQUES[technique]
    if isinstance(code, Technique):
        code = code.code_for(lab)
    if callable(code):
        code = code(answer_names(nb))
    kept, first_code = [], True
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        is_test = cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution")
        if cell["cell_type"] == "code" and first_code:
            first_code = False
            kept.append(cell)
            kept.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": (_dummies(answer_names(nb)) + code).splitlines(keepends=True),
                }
            )
        elif is_test:
            kept.append(cell)
    nb["cells"] = kept
    return nb


def tree_digest(*dirs):
    """``{path: sha256}`` of the kit's files under ``dirs``: what git tracks there and any new
    file git would not ignore. Ignored outputs (builds, caches, ``*.egg-info``, traces) are left
    out: other tests write them while a cheating lab is graded. Outside a git checkout, every file
    but builds and caches."""
    import hashlib
    import subprocess

    git = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *dirs],
        capture_output=True,
    )
    if git.returncode == 0:
        files = sorted({ROOT / f for f in git.stdout.decode().split("\0") if f})
    else:
        files = sorted(
            p
            for d in dirs
            for p in (ROOT / d).rglob("*")
            if p.is_file()
            and not any(
                part in ("build", "__pycache__", ".ipynb_checkpoints", "egg-info")
                or part.endswith(".egg-info")
                for part in p.parts
            )
        )
    return {
        str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "missing"
        for p in files
    }


def dumps(notebook):
    return json.dumps(notebook)
