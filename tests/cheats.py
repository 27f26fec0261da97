"""Cheating submissions: one per technique, for any lab (issue 14's suite).

A cheating notebook is the released notebook cut down to what a student who wants points
without work keeps: the locked import cells, one cell of their own (the technique, and dummy
values for every answer the graded cells hand in), and the graded test cells. Each must score 0
on every automatic cell, and nothing it does may reach the kit's files, the course, or the
student graded after it.
"""

import ast
import json
import re

from course import ROOT, released_notebook

#: In-notebook techniques: the code of the student's own cell.
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
