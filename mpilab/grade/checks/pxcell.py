"""Checks of a notebook cell that runs on MPI ranks with mpi4py (lab 0's ``%%px`` allgather).

In the notebook the cell runs on ipyparallel engines that the student's kernel drives, so what
the engines hold afterwards is the student's to decide. The grader therefore runs the cell's
code itself, taken from the submitted notebook: under real Open MPI, ``python -I`` on each
rank, in :mod:`mpilab.grade.sandbox`, with the given cell's names (``comm``, ``rank``, ``np``,
``MPI``) and a ``send`` of fresh random numbers on every rank. Each rank's ``send`` reaches it
through a file that the rank deletes before the cell's code starts, so the only way for a rank
to learn another's numbers is the communication the cell is asked to write. After the cell,
every rank prints its ``recv``; the grader compares it with every rank's ``send``, rank 0 first.
One case per process count.
"""
import json
import os
import re
import secrets
import shutil
import sys

import numpy as np

from mpilab.core.vocabulary import MPIRUN
from mpilab.grade import runner, sandbox
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict

#: Largest notebook the grader reads for a cell's source, bytes.
MAX_NOTEBOOK = 20_000_000
#: Elements of each rank's ``send`` (the notebook's: 3 ints).
SEND_LENGTH = 3

#: Runs on every rank, around the student's code (its globals are the cell's namespace).
_PROGRAM = r'''
import json as _json, os as _os, sys as _sys, traceback as _traceback
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
_print, _dumps, _flush = print, _json.dumps, _sys.stdout.flush
with open(f"send.{rank}.bin", "rb") as _f:
    send = np.frombuffer(_f.read(), dtype="i").copy()
_os.unlink(f"send.{rank}.bin")
comm.Barrier()          # every rank's file is gone before the cell's code starts
del _f
with open("cell.py") as _f:
    _code = compile(_f.read(), "your cell", "exec")
try:
    exec(_code, globals())
    _out = {"recv": np.asarray(recv).ravel().tolist(), "dtype": str(np.asarray(recv).dtype)}
except BaseException as _exc:   # the student's error, for the feedback
    _last = _traceback.format_exception_only(type(_exc), _exc)[-1].strip()
    _print("MPILAB-ERROR", rank, _dumps(_last), flush=True)
    MPI.COMM_WORLD.Abort(1)
_print("MPILAB-RECV", rank, _dumps(_out), flush=True)
'''
_LINE = re.compile(r"^MPILAB-(RECV|ERROR) (\d+) (.*)$")


def cell_source(notebook, grade_id):
    """The source of the notebook's cell ``grade_id``, or raise ValueError saying why not."""
    if notebook is None or os.path.getsize(notebook) > MAX_NOTEBOOK:
        raise ValueError("the notebook was not handed in (or is too large to read)")
    try:
        with open(notebook, encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"the notebook cannot be read ({type(exc).__name__})") from None
    for cell in cells if isinstance(cells, list) else []:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id") == grade_id and cell.get("cell_type") == "code":
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else str(src)
    raise ValueError(f"the notebook has no answer cell {grade_id!r} (was it deleted?)")


def python_code(source):
    """The cell's Python: its ``%%px`` line (with options) removed; ValueError for other IPython syntax."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        if not lines[0].lstrip().startswith("%%px"):
            raise ValueError(f"the cell starts with {lines[0].split()[0]}, not %%px")
        lines = lines[1:]
    code = "\n".join(lines) + "\n"
    try:
        compile(code, "your cell", "exec")
    except SyntaxError as exc:
        raise ValueError(f"line {(exc.lineno or 0) + 1} of the cell is not Python the grader can run "
                         f"({exc.msg}); only the first line may be %%px") from None
    return code


def _sends(p):
    rng = np.random.default_rng(secrets.randbits(64))
    return [rng.integers(-10**6, 10**6, SEND_LENGTH, dtype=np.int32) for _ in range(p)]


def run_case(work, code, run, timeout):
    """Run the cell's code on ``run.nprocs`` ranks; one :class:`Case`."""
    title = f"{run.label}, every rank's recv"
    sends = _sends(run.nprocs)
    for r, s in enumerate(sends):
        with open(os.path.join(work, f"send.{r}.bin"), "wb") as f:
            f.write(s.tobytes())
    with open(os.path.join(work, "cell.py"), "w") as f:
        f.write(code)
    launcher = runner.MPIRUN_OPENMPI if run.flavour == "openmpi" else [MPIRUN[run.flavour], "-n"]
    argv = launcher + [str(run.nprocs), sys.executable, "-I", "rank.py"]
    res = sandbox.run(argv, cwd=work, timeout=timeout, memory_mb=runner.REAL_MEMORY_MB)
    recv, errors = {}, {}
    for line in res.stdout.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        try:
            data = json.loads(m.group(3))
        except ValueError:
            continue
        (recv if m.group(1) == "RECV" else errors)[int(m.group(2))] = data
    if errors:
        r = min(errors)
        return Case(title, False, f"rank {r}: your cell raised {errors[r]}", hidden=run.hidden)
    want = np.concatenate(sends)
    for r in range(run.nprocs):
        got = recv.get(r)
        if not isinstance(got, dict) or not isinstance(got.get("recv"), list):
            why = runner.failure(res, run) or "it printed nothing"
            return Case(title, False, f"rank {r} did not finish the cell: {why}", hidden=run.hidden)
        values = got["recv"]
        if len(values) != len(want) or values != want.tolist():
            return Case(title, False, f"rank {r}: recv = {values[:12]}{' ...' if len(values) > 12 else ''}"
                        f", expected every rank's send, rank 0 first: {want.tolist()[:12]}"
                        f"{' ...' if len(want) > 12 else ''} ({len(want)} ints)", hidden=run.hidden)
    return Case(title, True, hidden=run.hidden)


def px_cases(source, runs, timeout=runner.RUN_TIMEOUT):
    """Run a ``%%px`` cell's source on each run's ranks; one case per run.

    Parameters
    ----------
    source : str
        The cell as written in the notebook (its first line may be ``%%px``).
    runs : sequence of mpilab.grade.runner.Run
        Real runs, of the MPI that this Python's mpi4py loads
        (:func:`mpilab.cluster.engines.mpi4py_flavour`).
    timeout : float
        Limit of one launch, seconds.
    """
    try:
        code = python_code(source)
    except ValueError as exc:
        return [Case(f"{r.label}, every rank's recv", False, str(exc), hidden=r.hidden) for r in runs]
    work = sandbox.scratch_dir([])
    try:
        with open(os.path.join(work, "rank.py"), "w") as f:
            f.write(_PROGRAM)
        return [run_case(work, code, run, timeout) for run in runs]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def engine_cases(state, send="send", recv="recv"):
    """The notebook's visible check: on every engine ``recv`` holds every engine's ``send``.

    Parameters
    ----------
    state : dict
        ``{"rank": [...], send: [...], recv: [...]}`` pulled from the engines
        (:func:`mpilab.cluster.engines.pull`), one entry per engine.
    """
    try:
        ranks = [int(r) for r in state["rank"]]
        sends = [np.asarray(a).ravel() for a in state[send]]
        recvs = [np.asarray(a).ravel() for a in state[recv]]
    except (KeyError, TypeError, ValueError) as exc:
        return [Case("the engines' arrays", False, f"could not read {send!r} and {recv!r} ({exc})")]
    if sorted(ranks) != list(range(len(ranks))):
        return [Case("the engines are one MPI_COMM_WORLD", False, f"the engines' ranks are {sorted(ranks)} "
                     "(restart the cluster with engines.mpi_cluster)")]
    if len({a.tobytes() for a in sends}) < len(sends):
        return [Case(f"the given {send}", False, f"two engines hold the same {send!r}: leave the given "
                     f"{send!r} as it is")]
    by_rank = dict(zip(ranks, sends))
    want = np.concatenate([by_rank[r] for r in sorted(by_rank)])
    out = []
    for r, got in sorted(zip(ranks, recvs), key=lambda x: x[0]):
        ok = got.shape == want.shape and np.array_equal(got, want)
        out.append(Case(f"rank {r}'s {recv}", ok, f"{recv} = {got.tolist()[:24]}, expected "
                        f"{want.tolist()[:24]} (every rank's {send}, rank 0 first)"))
    return out


class PxCellVerdict(Verdict):
    """The grader's verdict on a ``%%px`` answer cell: its code, from the submitted notebook,
    run on each run's ranks."""

    def __init__(self, notebook, grade_id, runs):
        self.notebook, self.grade_id, self.runs = notebook, grade_id, list(runs)

    def cases(self, answers, ctx):
        try:
            source = cell_source(ctx.submitted_file(self.notebook), self.grade_id)
        except ValueError as exc:
            return [Case(f"the cell {self.grade_id}", False, str(exc), weight=float(len(self.runs)))]
        return px_cases(source, self.runs)
