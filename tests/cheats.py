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
#: is the cut-down release with dummies and no cell of the student's own. Each takes the
#: skeleton's text and returns the cheating file (the skeleton unchanged where the technique
#: does not apply: ``c_renamed`` needs a reference of the same collective on the kit's side).
C_TECHNIQUES = {
    # print a passing line for every kind of case any harness runs, then end the program
    "c_forged": lambda src: _with_body(src, _FORGED),
    # stand in for the MPI_Allreduce a harness uses to learn whether any rank failed: "none did"
    "c_interposed": lambda src: _INTERPOSED + src,
    # read the harness's secret (the old SipHash key of rank 0) out of the program's own ELF
    # symbol table and seal passing lines with it
    "c_symtab": lambda src: _with_body(src, _SYMTAB, prelude=_elf_symbol()),
    # the library does the work: the very collective the function implements, by its MPI_ name
    "c_library": lambda src: _with_body(src, _library_call(src, "MPI_")),
    # ... by its profiling name, which a harness's interposed MPI_ functions do not see
    "c_pmpi": lambda src: _with_body(src, _library_call(src, "PMPI_")),
    # ... resolved at run time by name
    "c_dlsym": lambda src: _with_body(src, _dlsym_call(src), prelude="#include <dlfcn.h>\n"),
    # ... through a function pointer set at run time
    "c_funcptr": lambda src: _with_body(src, _pointer_call(src)),
    # another algorithm under the asked one's name: the kit's own reference code (lab 2)
    "c_renamed": lambda src: _renamed(src),
    # send each rank's seed instead of its data and compute the other ranks' data from it (the
    # old harnesses derived every value from an 8-byte seed per rank, found here in the symbol
    # table), so that the right numbers appear without the data ever travelling
    "c_seed": lambda src: _with_body(src, _seed_body(src), prelude=_elf_symbol()),
    # write the files a harness reads results from (and the course's gradebook), print passing
    # lines, and do no work
    "c_writes": lambda src: _with_body(src, _WRITES),
}

CHEATS_DIR = ROOT / "tests" / "data" / "cheats"
#: Kinds of case any harness runs (allgather, bcast, reductions).
_KINDS = '"int", "char", "double", "in-place", "sub-communicator", "root", "segments", "prime-count"'

_FORGED = (
    """
    int _rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &_rank);
    if (_rank == 0) {
        static const char *kinds[] = {"""
    + _KINDS
    + """};
        for (int k = 0; k < 8; k++)
            printf("CASE %s count=1\\tPASS\\n", kinds[k]);
        fflush(stdout);
    }
    _exit(0);
"""
)

_INTERPOSED = """#include <mpi.h>
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    (void)s; (void)t; (void)op; (void)comm;
    for (int i = 0; i < n; i++) ((int *)r)[i] = 1 << 30;
    return MPI_SUCCESS;
}
"""

_SYMTAB = (
    """
    /* SipHash-2-4 of a line under the key found in the symbol table (the old sealed.h's seal) */
    const unsigned char *key = cheat_symbol("sealed_key");
    int _rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &_rank);
    if (_rank == 0 && key) {
        static const char *kinds[] = {"""
    + _KINDS
    + """};
        for (int k = 0; k < 8; k++) {
            char line[128];
            snprintf(line, sizeof line, "CASE %s count=1\\tPASS", kinds[k]);
            uint64_t k0 = 0, k1 = 0;
            for (int i = 7; i >= 0; i--) { k0 = k0 << 8 | key[i]; k1 = k1 << 8 | key[8 + i]; }
            uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
            uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define ROUND do { v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); v2 += v3; \\
    v3 = ROTL(v3, 16); v3 ^= v2; v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; v2 += v1; \\
    v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); } while (0)
            size_t len = strlen(line), whole = len - len % 8;
            for (size_t i = 0; i < whole; i += 8) {
                uint64_t w = 0;
                for (int j = 7; j >= 0; j--) w = w << 8 | (unsigned char)line[i + j];
                v3 ^= w; ROUND; ROUND; v0 ^= w;
            }
            uint64_t last = (uint64_t)len << 56;
            for (size_t j = 0; j < len % 8; j++)
                last |= (uint64_t)(unsigned char)line[whole + j] << (8 * j);
            v3 ^= last; ROUND; ROUND; v0 ^= last; v2 ^= 0xff; ROUND; ROUND; ROUND; ROUND;
            printf("%s\\t%016llx\\n", line, (unsigned long long)(v0 ^ v1 ^ v2 ^ v3));
        }
        fflush(stdout);
        _exit(0);
    }
    int _never;   /* the other ranks wait for the end rank 0 brings */
    MPI_Recv(&_never, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    _exit(0);
"""
)

_WRITES = """
    static const char *names[] = {"out.%d", "result.%d", "seed.%d", "in.%d", "trace.%d.csv", "key"};
    char name[512];
    for (int n = 0; n < 6; n++)
        for (int r = 0; r < 64; r++) {
            snprintf(name, sizeof name, names[n], r);
            FILE *f = fopen(name, "w");
            if (f) {
                fputs("CASE int count=1\\tPASS\\n", f);
                fclose(f);
            }
        }
    const char *course = getenv("MPILAB_COURSE_ROOT");
    if (course) {
        snprintf(name, sizeof name, "%s/gradebook.db", course);
        FILE *f = fopen(name, "a");
        if (f) {
            fputs("cheat", f);
            fclose(f);
        }
    }
    printf("CASE int count=1\\tPASS\\n");
    fflush(stdout);
    return MPI_SUCCESS;
"""

#: The collective each skeleton's function implements, and its arguments, by the function's
#: name prefix.
_COLLECTIVES = {
    "student_allgather_": ("Allgather", "sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm"),
    "student_bcast_": ("Bcast", "buffer, count, datatype, root, comm"),
    "student_reduce_scatter_block": (
        "Reduce_scatter_block",
        "sendbuf, recvbuf, recvcount, datatype, op, comm",
    ),
    "student_allreduce_": ("Allreduce", "sendbuf, recvbuf, count, datatype, op, comm"),
}

_FUNCTION = re.compile(r"^int\s+(student_\w+)\s*\(([^)]*)\)\s*\{", re.M)


def _function(src):
    """(name, parameter names, start of the body, end of the body) of the skeleton's function
    (the last ``student_*`` function of the file)."""
    m = list(_FUNCTION.finditer(src))[-1]
    params = [re.findall(r"\w+", p)[-1] for p in m.group(2).split(",")]
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return m.group(1), params, m.end(), i - 1


def _collective(src):
    name, params, _, _ = _function(src)
    coll, args = next(v for k, v in _COLLECTIVES.items() if name.startswith(k))
    return coll, args, params


def _with_body(src, body, prelude=""):
    """``src`` with the skeleton's function's body replaced by ``body`` (the parameters it
    leaves unused are voided), and ``prelude`` and the usual headers at the top."""
    _, params, start, end = _function(src)
    unused = "".join(f"    (void){p};\n" for p in params if not re.search(rf"\b{p}\b", body))
    head = "#define _GNU_SOURCE\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    head += "#include <string.h>\n#include <unistd.h>\n" + prelude
    return head + src[:start] + "\n" + unused + body + src[end:]


def _segsize(params):
    return "    (void)segsize;\n" if "segsize" in params else ""


def _library_call(src, prefix):
    coll, args, params = _collective(src)
    return f"{_segsize(params)}    return {prefix}{coll}({args});\n"


def _dlsym_call(src):
    coll, args, params = _collective(src)
    fn = f"__typeof__(PMPI_{coll}) *"
    return (
        f'{_segsize(params)}    {fn}f = ({fn})dlsym(RTLD_DEFAULT, "PMPI_{coll}");\n'
        f'    if (f == NULL)\n        f = ({fn})dlsym(RTLD_DEFAULT, "MPI_{coll}");\n'
        f"    return f({args});\n"
    )


def _pointer_call(src):
    coll, args, params = _collective(src)
    pointer = f"    static __typeof__(MPI_{coll}) *volatile f;\n    f = MPI_{coll};\n"
    return f"{_segsize(params)}{pointer}    return f({args});\n"


#: The kit's reference algorithm handed in under each lab-2 skeleton's name.
_RENAMED = {
    "student_allgather_ring": "pairwise_renamed.c",
    "student_allgather_bruck": "gather_bcast_renamed.c",
}


def _renamed(src):
    name = _function(src)[0]
    if name not in _RENAMED:
        return src
    return (CHEATS_DIR / _RENAMED[name]).read_text().replace("STUDENT_FUNCTION", name)


def _elf_symbol():
    return (CHEATS_DIR / "elf_symbol.inc").read_text()


def _seed_body(src):
    """Every rank sends its old 8-byte seed to every other rank, then fills its result from the
    seeds with the old public formula (sealed.h's sealed_value): no data travels."""
    coll, _, params = _collective(src)
    exchange = """
    uint64_t *seedp = cheat_symbol("sealed_seed");
    int *seqp = cheat_symbol("seq");
    int p, me;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &me);
    uint64_t *seeds = calloc((size_t)p, sizeof *seeds);
    long seq = seqp ? *seqp : 0;
    seeds[me] = seedp ? *seedp : 0;
    for (int k = 1; k < p; k++)
        MPI_Sendrecv(&seeds[me], 8, MPI_BYTE, (me + k) % p, 5, &seeds[(me - k + p) % p], 8, MPI_BYTE,
                     (me - k + p) % p, 5, comm, MPI_STATUS_IGNORE);
"""
    put = """
#define PUT(t, buf, i, v) do { if ((t) == MPI_CHAR) ((signed char *)(buf))[i] = (signed char)(v); \\
    else if ((t) == MPI_INT) ((int *)(buf))[i] = (int)(v); else ((double *)(buf))[i] = (v); } while (0)
"""
    if coll == "Allgather":
        fill = """
    for (int j = 0; j < p; j++)
        for (int i = 0; i < recvcount; i++)
            PUT(recvtype, recvbuf, (long)j * recvcount + i, cheat_value(seeds[j], seq, i, 127));
"""
    elif coll == "Bcast":
        fill = """
    if (me != root)
        for (int i = 0; i < count; i++)
            PUT(datatype, buffer, i, cheat_value(seeds[root], seq, i, 100));
"""
    else:
        first = "(long)me * recvcount" if coll == "Reduce_scatter_block" else "0"
        n = "recvcount" if coll == "Reduce_scatter_block" else "count"
        fill = f"""
    for (int i = 0; i < {n}; i++) {{
        double sum = 0;
        for (int r = 0; r < p; r++)
            sum += (cheat_value(seeds[r], seq, {first} + i, 127) - 63) / (datatype == MPI_DOUBLE ? 4 : 1);
        PUT(datatype, recvbuf, i, sum);
    }}
"""
    return put + _segsize(params) + exchange + fill + "    free(seeds);\n    return MPI_SUCCESS;\n"


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
