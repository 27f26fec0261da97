"""Checks of a notebook cell that runs on MPI ranks with mpi4py (lab 0's ``%%px`` allgather).

In the notebook the cell runs on ipyparallel engines that the student's kernel drives, so what
the engines hold afterwards is the student's to decide. The grader therefore runs the cell's
code itself, taken from the submitted notebook: under real Open MPI, ``python -I`` on each
rank, in :mod:`mpilab.grade.sandbox`, with the given cell's names (``comm``, ``rank``, ``np``,
``MPI``) and a ``send`` of fresh random numbers on every rank. Each rank's ``send`` reaches it
through a file that the rank deletes before the cell's code starts, so the only way for a rank
to learn another's numbers is the communication the cell is asked to write. After the cell,
every rank writes its ``recv`` to a file; the grader compares it with every rank's ``send``, rank 0 first.
One case per process count.
"""

import json
import os
import re
import secrets
import shutil
import stat
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
#: Largest file a rank may hand back (its recv), bytes.
MAX_HANDED_BACK = 1_000_000

#: Runs on every rank, around the student's code (its globals are the cell's namespace). What a
#: rank hands back goes to its own file, not to stdout: mpirun forwards the ranks' output in
#: pieces that may split a line, so a student's own print could garble a result line.
_PROGRAM = r"""
import json as _json, os as _os, traceback as _traceback
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
_dir, _dump, _replace = _os.getcwd(), _json.dump, _os.replace


def _hand_back(kind, value):
    _path = _os.path.join(_dir, f"{kind}.{rank}.json")
    with open(_path + ".part", "w") as _f:
        _dump(value, _f)
    _replace(_path + ".part", _path)


with open(f"send.{rank}.bin", "rb") as _f:
    send = np.frombuffer(_f.read(), dtype="i").copy()
_os.unlink(f"send.{rank}.bin")
comm.Barrier()          # every rank's file is gone before the cell's code starts
del _f
print(f"MPILAB-READY {rank}", flush=True)   # on stdout: a run killed at its time limit copies back no file
with open("cell.py") as _f:
    _code = compile(_f.read(), "your cell", "exec")
try:
    exec(_code, globals())
    _out = {"recv": np.asarray(recv).ravel().tolist(), "dtype": str(np.asarray(recv).dtype)}
except BaseException as _exc:   # the student's error, for the feedback
    _hand_back("error", _traceback.format_exception_only(type(_exc), _exc)[-1].strip())
    MPI.COMM_WORLD.Abort(1)
_hand_back("recv", _out)
"""
_READY = re.compile(r"MPILAB-READY (\d+)\b")
#: A launch whose ranks did not all reach the cell's code in time is tried once more, with this
#: many times the limit: starting Python, numpy and MPI on every rank is the grader's part, and
#: a busy grading machine must not cost the student the case.
SLOW_START_FACTOR = 3


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
        raise ValueError(
            f"line {(exc.lineno or 0) + 1} of the cell is not Python the grader can run "
            f"({exc.msg}); only the first line may be %%px"
        ) from None
    return code


def _sends(p):
    rng = np.random.default_rng(secrets.randbits(64))
    return [rng.integers(-(10**6), 10**6, SEND_LENGTH, dtype=np.int32) for _ in range(p)]


def _launch(work, code, run, timeout):
    """One launch of the cell's code with fresh sends: (sends, sandbox result)."""
    for name in os.listdir(work):
        if name.split(".")[0] in ("recv", "error", "send"):
            os.remove(os.path.join(work, name))
    sends = _sends(run.nprocs)
    for r, s in enumerate(sends):
        with open(os.path.join(work, f"send.{r}.bin"), "wb") as f:
            f.write(s.tobytes())
    with open(os.path.join(work, "cell.py"), "w") as f:
        f.write(code)
    launcher = runner.MPIRUN_OPENMPI if run.flavour == "openmpi" else [MPIRUN[run.flavour], "-n"]
    argv = launcher + [str(run.nprocs), sys.executable, "-I", "rank.py"]
    return sends, sandbox.run(
        argv, cwd=work, timeout=timeout, memory_mb=runner.REAL_MEMORY_MB, copy_back="always"
    )


def _handed_back(work, kind, nprocs):
    """{rank: value} of the ``kind`` files the ranks wrote; a file that is not a regular file of
    at most :data:`MAX_HANDED_BACK` bytes, or not JSON, is left out (the cell could have made it)."""
    out = {}
    for r in range(nprocs):
        try:
            fd = os.open(os.path.join(work, f"{kind}.{r}.json"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_HANDED_BACK:
                continue
            try:
                out[r] = json.loads(f.read(MAX_HANDED_BACK))
            except ValueError:
                pass
    return out


def _started(res):
    """How many ranks reached the cell's code (their ready lines; mpirun may split a line)."""
    return len(set(_READY.findall(res.stdout)))


def run_case(work, code, run, timeout):
    """Run the cell's code on ``run.nprocs`` ranks; one :class:`Case`.

    If the launch times out before every rank has reached the cell's code, it is tried once more
    with :data:`SLOW_START_FACTOR` times the limit; the feedback says so if that fails too.
    """
    title = f"{run.label}, every rank's recv"
    sends, res = _launch(work, code, run, timeout)
    if res.timed_out and _started(res) < run.nprocs:
        sends, res = _launch(work, code, run, timeout * SLOW_START_FACTOR)
        if res.timed_out and _started(res) < run.nprocs:
            return Case(
                title,
                False,
                f"only {_started(res)} of {run.nprocs} ranks started "
                f"within {timeout * SLOW_START_FACTOR:.3g} s, twice: the grading machine was too "
                "busy, not your cell (ask for a regrade)",
                hidden=run.hidden,
            )
    recv, errors = _handed_back(work, "recv", run.nprocs), _handed_back(work, "error", run.nprocs)
    if errors:
        r = min(errors)
        return Case(title, False, f"rank {r}: your cell raised {str(errors[r])[:300]}", hidden=run.hidden)
    want = np.concatenate(sends)
    for r in range(run.nprocs):
        got = recv.get(r)
        if not isinstance(got, dict) or not isinstance(got.get("recv"), list):
            why = runner.failure(res, run) or "it handed back no recv"
            return Case(title, False, f"rank {r} did not finish the cell: {why}", hidden=run.hidden)
        values = got["recv"]
        if len(values) != len(want) or values != want.tolist():
            return Case(
                title,
                False,
                f"rank {r}: recv = {values[:12]}{' ...' if len(values) > 12 else ''}"
                f", expected every rank's send, rank 0 first: {want.tolist()[:12]}"
                f"{' ...' if len(want) > 12 else ''} ({len(want)} ints)",
                hidden=run.hidden,
            )
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
        return [
            Case(
                "the engines are one MPI_COMM_WORLD",
                False,
                f"the engines' ranks are {sorted(ranks)} (restart the cluster with engines.mpi_cluster)",
            )
        ]
    if len({a.tobytes() for a in sends}) < len(sends):
        return [
            Case(
                f"the given {send}",
                False,
                f"two engines hold the same {send!r}: leave the given {send!r} as it is",
            )
        ]
    by_rank = dict(zip(ranks, sends))
    want = np.concatenate([by_rank[r] for r in sorted(by_rank)])
    out = []
    for r, got in sorted(zip(ranks, recvs), key=lambda x: x[0]):
        ok = got.shape == want.shape and np.array_equal(got, want)
        out.append(
            Case(
                f"rank {r}'s {recv}",
                ok,
                f"{recv} = {got.tolist()[:24]}, expected "
                f"{want.tolist()[:24]} (every rank's {send}, rank 0 first)",
            )
        )
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
