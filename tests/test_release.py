"""make student-release: the student's tree holds no answer to a graded question.

The tree is built for real, its C code built from it, and its Python imported from it with the
answer key made unimportable, as on a student's machine. Then, for every graded cell of every
lab's rubric (solutions/mpilab_key/rubrics): its answer is neither in the tree nor computable
from it — no C symbol or code line of a solution, no cost table entry or text (files, --help and
--list outputs) equal to a graded cost, no line of a solution cell, no hidden case.
"""

import importlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

from mpilab.grade import release
from mpilab.grade.checks.costs import CostVerdict
from mpilab.model import costs

pytestmark = pytest.mark.mpi  # its release builds the compiled references (tests/conftest.py LAUNCHES)

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted(p.name for p in (ROOT / "solutions").glob("lab*") if p.is_dir())
TEXT = (".py", ".c", ".h", ".md", ".ipynb", ".toml", ".txt", ".j2", ".def", ".sh", ".json", ".xml", "")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    dest = tmp_path_factory.mktemp("release") / "student"
    subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], check=True)
    files = release.build(dest)
    return dest, files


def _texts(dest):
    for path in sorted(dest.rglob("*")):
        if path.is_file() and path.suffix in TEXT and path.stat().st_size < 5_000_000:
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                continue


def _rubrics():
    out = {}
    for lab in LABS:
        try:
            out[lab] = importlib.import_module(f"mpilab_key.rubrics.{lab}").RUBRIC
        except ModuleNotFoundError:
            continue
    return out


def test_the_tree_has_the_students_side_only(tree):
    dest, files = tree
    tops = {f.parts[0] for f in files}
    assert {"mpilab", "labs", "c_reference"} <= tops
    for item in release.INSTRUCTOR_SIDE:
        assert not (dest / item).exists(), item
    assert not list(dest.rglob("mpilab_key")), "the answer key is in the student tree"
    assert not list(dest.rglob("c_solutions")), "C solutions are in the student tree"
    size = sum((dest / f).stat().st_size for f in files)
    assert size < 20 * 2**20, f"the student tree is {size / 2**20:.1f} MiB"


def _student_python(dest, code):
    """Run Python on the tree's package with the answer key made unimportable."""
    prog = (f"import sys; sys.modules['mpilab_key'] = None; sys.path.insert(0, {str(dest)!r})\n") + code
    return subprocess.run([sys.executable, "-I", "-c", prog], capture_output=True, text=True, timeout=300)


def test_no_cost_is_known_without_the_key(tree):
    dest, _ = tree
    r = _student_python(
        dest,
        "import mpilab, json\nfrom mpilab.model import costs\n"
        "assert mpilab.__file__.startswith(sys.path[0]), mpilab.__file__\n"
        "print(json.dumps(len(costs.table())))",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


# ---- graded costs, wherever they could be written --------------------------------------------


def _graded_costs():
    found = []
    for lab, rubric in _rubrics().items():
        for gid, verdict in rubric.items():
            if isinstance(verdict, CostVerdict):
                found.append((lab, gid, verdict.expected, verdict.domain))
    return found


_WORDS = [
    ("α", "alpha"),
    ("β", "beta"),
    ("·", "*"),
    ("⌈log₂ p⌉", "ceiling(log(p,2))"),
    ("⌊log₂ p⌋", "floor(log(p,2))"),
    ("log₂ p", "log(p,2)"),
    ("log2(p)", "log(p,2)"),
    ("log₂", "log2"),
    ("²", "**2"),
    ("−", "-"),
]
_CANDIDATE = re.compile(r"[0-9a-zA-Z_()+\-*/^ .,]*(?:alpha|beta)[0-9a-zA-Z_()+\-*/^ .,]*")


def _expressions(text):
    """Expressions in alpha/beta that a line of text may hold (C headers' α, β, N = p·n too)."""
    for line in text.splitlines():
        if not any(w in line for w in ("alpha", "beta", "α", "β")):
            continue
        for a, b in _WORDS:
            line = line.replace(a, b)
        for m in _CANDIDATE.finditer(line):
            cand = m.group(0).strip(" ,.")
            if "alpha" not in cand or "beta" not in cand:
                continue
            for start in range(len(cand)):
                if cand[start] in "(0123456789apnl":
                    try:
                        e = costs.parse(cand[start:].replace("N", "(p*n)"))
                    except Exception:
                        continue
                    yield e
                    break


def _equal(e, want, domain):
    pts = costs.check_points(domain)
    subs = {costs.alpha: sympy.Rational(3, 2), costs.beta: sympy.Rational(1, 1000), costs.s: 8192}
    for pv, nv in pts:
        try:
            a = float(e.subs({**subs, costs.p: pv, costs.n: nv}))
            b = float(want.subs({**subs, costs.p: pv, costs.n: nv}))
        except (TypeError, ValueError):
            return False
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return False
    return True


def test_no_graded_cost_is_written_in_the_tree(tree):
    dest, _ = tree
    graded = _graded_costs()
    assert graded, "no rubric has a cost question: the test would check nothing"
    leaks = []
    for path, text in _texts(dest):
        for e in _expressions(text):
            for lab, gid, want, domain in graded:
                if _equal(e, want, domain):
                    leaks.append(f"{path.relative_to(dest)}: {e} answers {lab} {gid}")
    assert not leaks, "\n".join(sorted(set(leaks)))


@pytest.fixture(scope="module")
def built_tree(tree):
    dest, _ = tree
    r = subprocess.run(
        ["make", "-C", str(dest / "c_reference"), "FLAVOUR=openmpi"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return dest / "c_reference" / "build" / "openmpi"


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_no_graded_cost_in_the_help_and_lists(tree, built_tree):
    dest, _ = tree
    outputs = [
        subprocess.run([str(built_tree / "collbench"), *args], capture_output=True, text=True).stdout
        for args in (["--help"], ["--list"], ["--list", "--json"])
    ]
    for args in (["list"], ["costs"], ["costs", "--coll", "allgather"], ["--help"]):
        r = _student_python(
            dest,
            f"import os; os.environ['MPILAB_ROOT'] = {str(dest)!r}\n"
            f"from mpilab.cli import main; sys.exit(main({args!r}))",
        )
        outputs.append(r.stdout + r.stderr)
    graded = _graded_costs()
    leaks = [
        f"{e} answers {lab} {gid}"
        for out in outputs
        for e in _expressions(out)
        for lab, gid, want, domain in graded
        if _equal(e, want, domain)
    ]
    assert not leaks, leaks


@pytest.mark.mpi  # fixture built_tree builds with make/mpicc
def test_a_lab_task_asked_of_the_students_collbench_says_where_it_is(tree, built_tree):
    """The student's collbench has no ring (lab 2's task): `mpilab sweep --algos ring` says so, and
    what it has, instead of 'unknown algorithm'."""
    dest, _ = tree
    r = _student_python(
        dest,
        f"import os; os.environ['MPILAB_ROOT'] = {str(dest)!r}\n"
        "from mpilab.cli import main\n"
        "sys.exit(main(['sweep', '--algos', 'ring', '--nprocs', '2', '-o', os.devnull]))",
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        "mpilab: 'ring' is not in this build of collbench: lab2 asks you to write it (labs/lab2/ring.c), "
        "and its reference is in the answer key"
    ) in r.stderr, r.stderr
    assert "Here: gather_bcast, pairwise, native" in r.stderr


# ---- the C solutions ---------------------------------------------------------------------------


def _solution_c_files():
    return sorted(
        p
        for p in (ROOT / "solutions").rglob("*.c")
        if "c_solutions" in p.parts
        or p.parts[-3:-1] == ("c_reference", "allgather")
        or "c_reference" in p.parts
    )


def _code_lines(text):
    """The statements of a C file, one per line, whitespace normalised (comments and braces out)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        s = re.sub(r"\s+", " ", line.split("//")[0]).strip()
        if len(s) >= 8 and s not in ("{", "}", "fn_exit:", "fn_fail:"):
            out.append(s)
    return out


def _longest_common_run(a, b):
    """The longest run of consecutive lines of ``a`` that also stands, in order, in ``b``."""
    best, prev = 0, {}
    where = {}
    for j, line in enumerate(b):
        where.setdefault(line, []).append(j)
    for line in a:
        cur = {}
        for j in where.get(line, ()):
            cur[j] = prev.get(j - 1, 0) + 1
            best = max(best, cur[j])
        prev = cur
    return best


#: Consecutive statements a student file may share with a solution, once the prologue every
#: algorithm shares (statements found in two student files or more, or in two solutions or more
#: and in a student file) is left out.
SHARED_RUN = 3


@pytest.mark.mpi  # fixture built_tree builds with make/mpicc
def test_no_solution_c_code_in_the_tree(tree, built_tree):
    dest, _ = tree
    nm = subprocess.run(["nm", str(built_tree / "liblabcoll.a")], capture_output=True, text=True).stdout
    key_rows = (ROOT / "solutions" / "c_reference" / "registry_rows.h").read_text()
    for fn in set(re.findall(r"\b(lab_\w+)\(", key_rows)):
        assert f" T {fn}" not in nm, f"{fn} is built into the student tree's liblabcoll.a"
    student = {p: _code_lines(p.read_text()) for p in dest.rglob("*") if p.suffix in (".c", ".h")}
    files_with = {}
    for lines in student.values():
        for s in set(lines):
            files_with[s] = files_with.get(s, 0) + 1
    solutions = _solution_c_files()
    assert solutions
    in_solutions = {}
    for f in solutions:
        for s in set(_code_lines(f.read_text())):
            in_solutions[s] = in_solutions.get(s, 0) + 1
    # the prologue every algorithm shares: in two student files, or an idiom of two solutions
    # or more that the student tree also uses (includes, the CHECK macro, the commutativity test)
    common = {s for s, k in files_with.items() if k >= 2 or in_solutions.get(s, 0) >= 2}
    for f in solutions:
        # what a solution keeps of its own skeleton was given to the student, not answered (a
        # skeleton that gives the answer away is caught by the untouched release scoring 0)
        skeleton = dest / "labs" / f.parts[-3] / f.name if f.parent.name == "c_solutions" else None
        given = set(_code_lines(skeleton.read_text())) if skeleton and skeleton.exists() else set()
        lines = [s for s in _code_lines(f.read_text()) if s not in common and s not in given]
        for p, other in student.items():
            run = _longest_common_run(lines, other)
            assert run <= SHARED_RUN, (
                f"{f.relative_to(ROOT)} and {p.relative_to(dest)} share {run} consecutive statements"
            )


@pytest.mark.mpi  # fixture built_tree builds with make/mpicc
def test_the_tracer_says_why_the_student_tree_has_no_broadcast(built_tree):
    """The kit's binomial broadcast is lab 6's task: the student tree's timeline refuses
    --coll bcast and says where the broadcasts are, instead of tracing an answer."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(
        [str(built_tree / "timeline"), "--coll", "bcast", "--algo", "binomial"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 2
    assert "unknown bcast algorithm 'binomial'; valid: " in r.stderr
    valid = r.stderr.split("unknown bcast algorithm 'binomial'; valid: ", 1)[1].splitlines()[0]
    # only the kit's clones of Open MPI's own broadcasts, never lab 6's answers
    assert "binomial" not in valid.split(" (")[0] and "pipeline," not in valid.replace("ompi_pipeline", "")
    assert (
        "(the kit's binomial and pipeline broadcasts are lab 6's tasks: they are on the instructor's "
        "side, solutions/c_reference/bcast)"
    ) in valid


# ---- solution cells and hidden cases -------------------------------------------------------------


def test_no_solution_cell_in_the_tree(tree):
    dest, _ = tree
    corpus = "\n".join(re.sub(r"\s+", " ", t) for _, t in _texts(dest))
    pattern = r"### BEGIN SOLUTION\n(.*?)### END SOLUTION"
    sources = {
        lab: [
            "".join(c["source"])
            for c in json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())["cells"]
        ]
        for lab in LABS
    }
    # what the notebooks show outside their solutions is no answer (a call they repeat, say)
    given = re.sub(
        r"\s+", " ", "\n".join(re.sub(pattern, "", s, flags=re.S) for srcs in sources.values() for s in srcs)
    )
    for lab, srcs in sources.items():
        for src in srcs:
            for block in re.findall(pattern, src, flags=re.S):
                for line in block.splitlines():
                    s = re.sub(r"\s+", " ", line).strip()
                    if len(s) >= 40 and not s.startswith("#") and s not in given:
                        assert s not in corpus, f"{lab}: a solution line is in the student tree: {s}"


def test_hidden_cases_are_not_in_the_tree(tree):
    dest, _ = tree
    for lab, rubric in _rubrics().items():
        visible = importlib.import_module(f"mpilab.grade.labs.{lab}")
        seen = {(r.flavour, r.nprocs, r.platform, r.mapping) for r in getattr(visible, "VISIBLE_RUNS", ())}
        for gid, verdict in rubric.items():
            for run in getattr(verdict, "runs", ()):
                key = (run.flavour, run.nprocs, run.platform, run.mapping)
                if run.hidden:
                    assert key not in seen, f"{lab} {gid}: hidden run {key} is a visible one"
                else:
                    assert key in seen, f"{lab} {gid}: {key} is not hidden, but the notebook does not run it"
