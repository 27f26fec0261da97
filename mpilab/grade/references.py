"""Compiled references: the kit's own code for a C task, built and shipped without its source.

Some sections of the labs build on a C file the student wrote earlier: lab 3's reproduction
study (section 4) times the student's two-level allreduce, lab 6's segment sweep (section 4) the
student's pipelined broadcast, and lab 6's crossover maps (section 5) and seed 000 retold
(section 6) all five broadcasts, or the pipeline and the chain. A student whose file does not
work yet would lose those sections too. So the kit keeps, for each C task, the program those
sections run built with the answer key's file instead (:data:`REFERENCES`): a section runs on it
where the student's file gives nothing usable (:func:`or_reference` for one file,
:func:`or_references` per algorithm of several), and says so; the grader, which checks a
section's numbers by simulating them again, accepts the numbers of the reference as well as those
of the student's own file, and the rubrics of the sections graded by hand accept curves from it.
The grade of the later section does not depend on the earlier C; the earlier C keeps its own
points.

Where the programs are:

* in the student's tree (``make student-release``): ``c_reference/compiled/smpi/<name>/<program>``,
  built and stripped by :func:`build_all` when the release is made (the source stays with the
  instructor);
* in an instructor's checkout: built from the answer key on first use into
  ``c_reference/build/smpi/references/<name>/`` (:func:`program_dir`).

Usage (instructor side): ``python -m mpilab.grade.references DEST`` builds every reference
into ``DEST/<name>/``.
"""

import argparse
import importlib.resources
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mpilab.core import key, paths
from mpilab.core.errors import LaunchError, LeftOut, ToolMissing, UsageError, one_of
from mpilab.grade import harness, sandbox
from mpilab.model import algorithms

#: The flavour of every reference: both sections run simulated.
FLAVOUR = "smpi"


@dataclass(frozen=True)
class Compiled:
    """A compiled reference of one C task, usable where that task's C file is.

    Attributes
    ----------
    name : str
        The task (``allreduce_two_level``, or one of lab 6's broadcasts: ``pipeline``, ``chain`` ...).
    lab : str
        The lab whose C task it is.
    source : str
        The answer key's file (``solutions/<lab>/c_solutions/<source>``).
    program : str
        The program the later section runs, as built with the task's file.
    """

    name: str
    lab: str
    source: str
    program: str

    def __str__(self):
        return f"the kit's compiled {self.name} ({self.lab}, no source)"

    def scratch(self):
        """A new scratch directory holding the program, ready to run; the caller removes it."""
        prog = program_dir(self.name) / self.program
        work = sandbox.scratch_dir([prog])
        os.chmod(os.path.join(work, self.program), 0o755)
        return work


#: The references, by task name: lab 3's two-level allreduce in its study's program, and each of
#: lab 6's broadcasts (the skeletons it hands out) alone in the broadcast harness, the program
#: :func:`mpilab.grade.bench.benchmark_bcast` runs.
REFERENCES = {
    "allreduce_two_level": Compiled("allreduce_two_level", "lab3", "allreduce_two_level.c", "bench_reduce"),
    **{
        name: Compiled(name, a.lab, a.skeleton_file, "check_bcast_smpi")
        for name, a in algorithms.skeletons("bcast").items()
    },
}


def reference(name):
    """The :class:`Compiled` reference of task ``name`` (pass it where the C file would go)."""
    if name not in REFERENCES:
        raise one_of("compiled reference", name, REFERENCES)
    return REFERENCES[name]


def shipped_dir(root=None):
    """Where the student's tree keeps the compiled references."""
    return Path(root or paths.repo_root()) / "c_reference" / "compiled" / FLAVOUR


def key_source(name):
    """The answer key's C file of task ``name``, or None without the key."""
    answers = key.module("guide")
    if answers is None:
        return None
    ref = reference(name)
    path = Path(answers.__file__).resolve().parents[1] / ref.lab / "c_solutions" / ref.source
    return path if path.is_file() else None


def build_bench_reduce(sources, defines=(), work=None, student=None):
    """Compile lab 3's ``bench_reduce`` for SMPI with two-level allreduce (and reduce) files:
    the program of the reproduction study (:func:`mpilab.studies.repro.build_bench`), the node
    shim included. Returns the scratch directory (the caller removes it).

    Raises
    ------
    mpilab.grade.harness.BuildError
    """
    # bench_reduce.c includes the drivers' headers (labopts.h, labprov.h): they go next to it
    headers = [paths.c_reference_dir() / "include" / h for h in ("labopts.h", "labprov.h")]
    if work is None:
        work = sandbox.scratch_dir(headers)
    else:
        for header in headers:
            shutil.copy(header, work)
    bench = importlib.resources.files("mpilab") / "data" / "lab3" / "bench_reduce.c"
    with importlib.resources.as_file(bench) as path:
        return harness.build(
            [path, *map(os.fspath, sources)],
            FLAVOUR,
            "bench_reduce",
            list(defines),
            work=work,
            smpi_nodes=True,
            student=student or sources[0],
        )


def build(name, dest):
    """Build the reference of task ``name`` from the answer key into ``dest/<name>/``, stripped.

    Raises
    ------
    ToolMissing
        Without the answer key (a student's tree has the built programs instead).
    mpilab.grade.harness.BuildError
        The key's file does not build (a broken installation).
    """
    ref = reference(name)
    src = key_source(name)
    if src is None:
        raise ToolMissing(
            f"the compiled {name} reference is built from the answer key, which is not installed here; "
            f"a student's tree has it in {shipped_dir()}"
        )
    if ref.program == "bench_reduce":
        work = build_bench_reduce([src])
    else:  # a broadcast, alone in the harness
        work = harness.build_bcast([src], FLAVOUR, require=[name])
    try:
        out = Path(dest) / name
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(work) / ref.program, out / ref.program)
        subprocess.run(
            ["strip", "--strip-unneeded", str(out / ref.program)], check=False, capture_output=True
        )
        return out / ref.program
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_all(dest):
    """Build every reference into ``dest`` (:func:`build`); return the programs written."""
    return [build(name, dest) for name in REFERENCES]


def prepare_for_kernels():
    """Build every reference, from the answer key, where a grading kernel finds it; the grader
    calls this before any student's turn (``scripts/grade.sh``).

    A grading kernel cannot read the answer key, so it cannot build a reference on first use;
    it sees ``c_reference/build/student`` (an instructor's checkout) or ``c_reference/build`` as
    ``c_reference/build`` (:func:`mpilab.grade.allowlist.c_paths`). Both get the programs, built
    again every time so that they follow the key. Returns the directories written, ``[]`` on the
    student's side (no key; the programs are shipped there).
    """
    if any(key_source(name) is None for name in REFERENCES):
        return []
    dest = paths.build_dir(FLAVOUR) / "references"
    programs = build_all(dest)
    out = [dest]
    student = paths.c_reference_dir() / "build" / "student" / FLAVOUR
    if student.is_dir():
        for prog in programs:
            target = student / "references" / prog.parent.name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(prog, target / prog.name)
        out.append(student / "references")
    return out


def program_dir(name):
    """The directory holding the built reference of task ``name``: the shipped one, else one built
    from the answer key on first use.

    Raises
    ------
    ToolMissing
        Neither shipped nor buildable here (the message says where it should be).
    """
    ref = reference(name)
    shipped = shipped_dir() / name
    if (shipped / ref.program).is_file():
        return shipped
    built = paths.build_dir(FLAVOUR) / "references" / name
    if not (built / ref.program).is_file():
        build(name, built.parent)
    return built


def or_reference(name, c_file, run):
    """``run(c_file)``, or ``run(reference(name))`` when the student's file gives nothing usable.

    A later section that measures an earlier C task calls this: when the student's file does not
    build, fails the section's own correctness check, or is left out of some of the section's
    runs (each of these raises or warns), the section runs on the kit's compiled reference
    instead and says so, so that a student stuck on the C task can go on. Its numbers are graded
    as the reference's.

    Parameters
    ----------
    name : str
        The task (:data:`REFERENCES`).
    c_file : path
        The student's file.
    run : callable
        ``run(c_file or Compiled) -> result`` (a table: empty counts as nothing usable).
    """
    out, why, caught = _attempt(run, c_file)
    if why is None:
        _warn_again(caught)
        return out
    ref = reference(name)
    ref_out, ref_why, ref_caught = _attempt(run, ref)
    if ref_why is not None and out is not None:
        # the reference fails too (a machine too slow for the runs' time limit, say): the
        # student's file is not to blame, keep what it gave
        _warn_again(caught)
        return out
    print(
        f"{_base(c_file)} cannot run this section yet ({why}); it runs on {ref} instead, and its numbers "
        f"are graded as the reference's. Fix the file and run the cell again to measure your own."
    )
    _warn_again(ref_caught)
    if ref_out is None:
        raise AssertionError(f"{_base(c_file)}: {why}; and {ref} did not run either: {ref_why}")
    return ref_out


def or_references(c_files, run):
    """``run(c_files)``, with every algorithm whose file gives nothing usable run on its compiled
    reference instead: :func:`or_reference` for a section that times several C tasks at once.

    Lab 6's crossover maps (section 5) time all five broadcasts in one
    :func:`mpilab.grade.bench.benchmark_bcast`, seed 000 retold (section 6) the pipeline and the
    chain. The student's files run first, together. An algorithm whose file does not build,
    fails the harness's check, is left out of a run (each of these warns) or has fewer points
    than the others is then run on its reference (all of them in one more ``run``), and its rows
    are the reference's: the cell prints which, and the rubric grades them as the reference's.
    As in :func:`or_reference`, an algorithm whose reference fails as well (a machine too slow
    for the time limit) keeps the rows the student's file gave, and one with none at all is left
    out with a warning.

    Parameters
    ----------
    c_files : dict
        Algorithm (a task of :data:`REFERENCES`) to the student's file.
    run : callable
        ``run({algorithm: c_file or Compiled}) -> table`` with an ``algorithm`` column, one row per
        point (:func:`mpilab.grade.bench.benchmark_bcast`'s; it warns when it leaves an algorithm
        out, and raises when none ran).

    Returns
    -------
    pandas.DataFrame
        The rows of every algorithm, in the order of ``c_files``; ``attrs["reference"]`` lists the
        algorithms whose rows are the reference's.

    Raises
    ------
    AssertionError
        No algorithm gave a row, from the student's files or the references.
    """
    refs = {name: reference(name) for name in c_files}  # an unknown task: say so before running
    out, why, caught = _attempt_each(run, dict(c_files))
    ref_out, ref_why, ref_caught = _attempt_each(run, {n: refs[n] for n in why}) if why else (None, {}, [])
    use = [n for n in why if n not in ref_why]
    for name in use:
        print(
            f"{_base(c_files[name])} cannot run this section yet ({why[name]}); the {name} rows below "
            f"come from {refs[name]} instead, and are graded as the reference's. Fix the file and run "
            f"the cell again to measure your own."
        )
    for name in why:
        if name in ref_why and _rows(out, name).empty:
            warnings.warn(
                f"{name} left out: {_base(c_files[name])}: {why[name]}; and {refs[name]} did not run "
                f"either: {ref_why[name]}"
            )
    # the student's warnings but about what the reference replaced; the reference's about what it did
    _warn_again([w for w in caught if not _about(w) & set(use)])
    _warn_again([w for w in ref_caught if not _about(w) - set(use)])
    parts = [_rows(ref_out if name in use else out, name) for name in c_files]
    if out is not None:  # MPI_Bcast's rows ("native"), if the run timed it
        parts.append(out[~out["algorithm"].isin(list(c_files))])
    parts = [t for t in parts if not t.empty]
    if not parts:
        raise AssertionError(
            "no algorithm could be timed, from your files or the kit's compiled references: "
            + "; ".join(f"{n}: {why.get(n)}" for n in c_files)
        )
    table = pd.concat(parts, ignore_index=True)
    table.attrs["reference"] = use
    return table


def _base(c_file):
    return os.path.basename(os.fspath(c_file))


def _rows(table, name):
    """The rows of algorithm ``name`` (none without a table)."""
    if table is None or "algorithm" not in getattr(table, "columns", ()):
        return pd.DataFrame()
    return table[table["algorithm"] == name]


def _about(w):
    """The algorithms a warning of :func:`mpilab.grade.bench.benchmark_bcast` leaves out (its
    :class:`mpilab.core.errors.LeftOut`; none for any other warning)."""
    return set(getattr(w.message, "algorithms", ()))


def _why(w):
    """What a :class:`mpilab.core.errors.LeftOut` says went wrong, in a few words, and where."""
    m = w.message
    why = (getattr(m, "why", None) or str(m)).strip().splitlines()[0].rstrip(":")
    if getattr(m, "nbytes", None) is not None:
        return f"{why}, at P = {m.nprocs}, {m.nbytes} B"
    return why


def _attempt_each(run, files):
    """``(result or None, {algorithm: why its rows are not usable}, warnings)`` of ``run(files)``."""
    out, failed, caught = _caught(run, files)
    if out is not None and "algorithm" not in getattr(out, "columns", ()):
        out, failed = None, "it gave no table"
    ran = [_rows(out, name) for name in files]
    grid = set().union(*(set(zip(t["nprocs"], t["bytes"])) for t in ran if not t.empty))
    why = {}
    for name, mine in zip(files, ran):
        said = [_why(w) for w in caught if name in _about(w)]
        if said:
            why[name] = said[0]
        elif mine.empty:
            why[name] = failed or "it gave no measurement"
        else:
            points = mine.groupby(["nprocs", "bytes"]).size()
            if set(points.index) != grid or points.nunique() > 1:
                why[name] = "some of its points are missing"
    return out, why, caught


def _caught(run, what):
    """``(result or None, the first line of the error it raised or None, its warnings)`` of
    ``run(what)``: a section's run fails by a wrong file's error or says so in warnings."""
    out, failed = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = run(what)
        except (AssertionError, harness.BuildError, LaunchError, ToolMissing) as exc:
            failed = _first_line(exc)
    return out, failed, caught


def _first_line(exc):
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _attempt(run, what):
    """``(result, why it is not usable or None, warnings)`` of ``run(what)``."""
    out, why, caught = _caught(run, what)
    bad = [str(w.message) for w in caught if isinstance(w.message, LeftOut)]
    if why is None and bad:
        why = bad[0].splitlines()[0]
    if why is None and out is not None and getattr(out, "empty", False):
        why = "it gave no measurement"
    return out, why, caught


def _warn_again(caught):
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mpilab.grade.references", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("dest", help="where to write <name>/<program> for every reference")
    args = parser.parse_args(argv)
    try:
        for prog in build_all(args.dest):
            print(f"references: {prog}")
    except (ToolMissing, UsageError, harness.BuildError) as exc:
        print(f"references: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
