"""No dead ends: a later section runs on the kit's compiled reference of an earlier C task, and
its grade does not depend on that C.

Lab 6's segment sweep (section 4) times the student's pipeline.c, lab 3's study (section 4) the
student's allreduce_two_level.c. With a broken file the notebook's cell runs the compiled
reference instead (mpilab.grade.references.or_reference), and the grader accepts the numbers of
either. Lab 6's crossover maps (section 5) and seed 000 retold (section 6) time all five
broadcasts, or the pipeline and the chain, in one run: each broken file's algorithm runs on its
own reference (or_references), the rest on the student's files. The student's tree holds the
references built and stripped, without their source.
"""

import shutil
import warnings

import pandas as pd
import pytest

from mpilab.core.errors import LaunchError, LeftOut
from mpilab.grade import bench, harness, references
from mpilab.grade.checks import segments
from mpilab.grade.labs.lab6 import C_FILES, SEGSIZES, SWEEP_BYTES
from mpilab_key.rubrics import lab3 as rubric3

BROKEN = "int student_bcast_pipeline(void) { return this is not C; }\n"


def _sweep(c_file):
    return bench.benchmark_bcast(
        {"pipeline": c_file},
        nprocs=(8,),
        sizes=(SWEEP_BYTES,),
        segsizes=SEGSIZES,
        flavour="smpi",
        native=False,
    ).assign(platform="orfeo-thin")


@pytest.mark.smpi
def test_the_reference_is_the_keys_program():
    ref = _sweep(references.reference("pipeline"))
    key = _sweep(references.key_source("pipeline"))
    assert ref.maxrank_avg_us.tolist() == key.maxrank_avg_us.tolist() and len(ref) == len(SEGSIZES)


@pytest.mark.smpi
def test_a_broken_pipeline_runs_the_section_on_the_reference_and_earns_its_points(tmp_path, capsys):
    broken = tmp_path / "pipeline.c"
    broken.write_text(BROKEN)
    sweep = references.or_reference("pipeline", broken, _sweep)
    assert "runs on the kit's compiled pipeline (lab6, no source) instead" in capsys.readouterr().out
    assert len(sweep) == len(SEGSIZES) and (sweep.maxrank_avg_us > 0).all()
    # the grader's rerun of the submitted (broken) file fails, the reference's matches
    case = segments.rerun_case(broken, sweep, "orfeo-thin", 8, SWEEP_BYTES, SEGSIZES)
    assert case.passed and "compiled reference" in case.message
    doctored = sweep.assign(maxrank_avg_us=sweep.maxrank_avg_us * 0.9)
    case = segments.rerun_case(broken, doctored, "orfeo-thin", 8, SWEEP_BYTES, SEGSIZES)
    assert not case.passed and "nor is it the kit's compiled reference's" in case.message
    # a working file is used as it is, with no note
    good = references.or_reference("pipeline", references.key_source("pipeline"), _sweep)
    assert (
        "instead" not in capsys.readouterr().out
        and good.maxrank_avg_us.tolist() == sweep.maxrank_avg_us.tolist()
    )


def _map(files):
    """Section 5's run (code_map_run) on a smaller grid."""
    return bench.benchmark_bcast(
        files, nprocs=(4, 8), sizes=(8, 4096), segsizes=(8192,), flavour="smpi", native=False
    )


@pytest.mark.smpi
def test_the_map_runs_a_broken_files_broadcast_on_its_reference_and_says_so(tmp_path, capsys):
    files = {}
    for name in C_FILES:
        shutil.copy(references.key_source(name), tmp_path / f"{name}.c")
        files[name] = tmp_path / f"{name}.c"
    # chain.c does not build; binomial.c builds but broadcasts nothing (the harness's check fails)
    files["chain"].write_text("int student_bcast_chain(void) { return this is not C; }\n")
    files["binomial"].write_text(
        "#include <mpi.h>\nint student_bcast_binomial(void *b, int c, MPI_Datatype t, int r, MPI_Comm m)\n"
        "{ (void)b; (void)c; (void)t; (void)r; (void)m; return MPI_SUCCESS; }\n"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = references.or_references(files, _map)
    said = capsys.readouterr().out
    assert sim.attrs["reference"] == ["chain", "binomial"]
    for name, why in (("chain", "chain.c does not compile"), ("binomial", "a rank got a wrong byte")):
        assert f"{name}.c cannot run this section yet ({why}" in said
        assert f"the {name} rows below come from the kit's compiled {name} (lab6, no source) instead" in said
    assert "linear.c" not in said and "pipeline.c" not in said
    # the broken ones' warnings are answered by the note; nothing else was left out
    assert not [str(w.message) for w in caught if "left out" in str(w.message) or "SKIP" in str(w.message)]
    # every algorithm on the whole grid: the broken ones the references', the others the files'
    assert list(dict.fromkeys(sim.algorithm)) == list(C_FILES)
    assert (sim.groupby("algorithm").size() == 4).all() and (sim.maxrank_avg_us > 0).all()
    key = _map({n: references.key_source(n) for n in C_FILES})
    assert (
        sim.maxrank_avg_us.tolist() == key.set_index("algorithm").loc[list(C_FILES)].maxrank_avg_us.tolist()
    )


@pytest.mark.smpi
def test_two_wrong_broadcasts_of_one_launch_are_each_said_and_replaced(tmp_path, capsys):
    """The harness prints one "# skip:" line per wrong algorithm, the provenance block keeps the
    last: benchmark_bcast finds the other by its missing rows."""
    files = {name: references.key_source(name) for name in C_FILES}
    for name in ("linear", "binomial"):
        files[name] = tmp_path / f"{name}.c"
        files[name].write_text(
            f"#include <mpi.h>\nint student_bcast_{name}(void *b, int c, MPI_Datatype t, int r, MPI_Comm m)\n"
            "{ (void)b; (void)c; (void)t; (void)r; (void)m; return MPI_SUCCESS; }\n"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench.benchmark_bcast(files, nprocs=(4,), sizes=(8,), flavour="smpi", native=False)
    skipped = sorted(str(w.message) for w in caught if "SKIP" in str(w.message))
    assert skipped == [
        f"P = 4: SKIP {name} 8: a rank got a wrong byte or an error" for name in ("binomial", "linear")
    ]
    sim = references.or_references(files, _map)
    assert sim.attrs["reference"] == ["linear", "binomial"]
    assert "linear.c cannot run this section yet (a rank got a wrong byte or an error, at P = 4, 8 B)" in (
        capsys.readouterr().out
    )


@pytest.mark.smpi
@pytest.mark.slow
def test_lab3_study_of_the_reference_earns_the_plot_points(tmp_path):
    from mpilab.studies import repro

    broken = tmp_path / "allreduce_two_level.c"
    broken.write_text("int nope(void) { return 1 }\n")
    medians = repro.point_medians(references.reference("allreduce_two_level"), (16, 32), 8)
    s8 = pd.DataFrame([dict(algorithm=a, nprocs=p, median_us=v) for (a, p), v in medians.items()])
    case = rubric3.study_table_case(s8, str(broken))
    assert case.passed and "compiled reference" in case.message
    case = rubric3.study_table_case(s8.assign(median_us=s8.median_us * 2), str(broken))
    assert not case.passed


@pytest.mark.mpi  # builds the compiled references (tests/conftest.py LAUNCHES)
def test_the_student_tree_ships_the_references_without_source(tmp_path):
    from mpilab.grade import release

    files = release.build(tmp_path / "student")
    progs = [f for f in files if f.parts[:3] == ("c_reference", "compiled", "smpi")]
    assert sorted(p.parts[3] for p in progs) == sorted(references.REFERENCES)
    # lab 6's five broadcasts (sections 5 and 6 time them all), each in the broadcast harness
    assert {n: references.REFERENCES[n].program for n in harness.BCAST_FUNCTIONS} == dict.fromkeys(
        C_FILES, "check_bcast_smpi"
    )
    for name, ref in references.REFERENCES.items():
        prog = tmp_path / "student" / "c_reference" / "compiled" / "smpi" / name / ref.program
        assert prog.is_file() and prog.read_bytes()[:4] == b"\x7fELF"
        assert not any(f.name == ref.source for f in files if f.parts[0] != "labs")
        # the lab's file of that name is the skeleton handed out, not the key's source
        handed_out = tmp_path / "student" / "labs" / ref.lab / ref.source
        assert handed_out.read_text() != references.key_source(name).read_text()
    shutil.rmtree(tmp_path / "student")


def _runs(outcomes):
    """A section's ``run`` whose outcome on the student's file and on the reference is given:
    a table, an exception to raise, or a table with a warning that a run was left out."""

    def run(what):
        result = outcomes["reference" if what == "REFERENCE" else "student"]
        if isinstance(result, Exception):
            raise result
        table, warning = result
        if warning:
            warnings.warn(warning)
        return table

    return run


STUDENT = pd.DataFrame(dict(maxrank_avg_us=[1.0, 2.0]))
REFERENCE = pd.DataFrame(dict(maxrank_avg_us=[3.0, 4.0]))
TIMED_OUT = LeftOut("pipeline at P = 32 left out: it timed out after 30 s", ["pipeline"], "it timed out", 32)


@pytest.mark.parametrize(
    "student,reference,expected,note",
    [
        # a working file is the student's own, with no note
        ((STUDENT, None), (REFERENCE, None), STUDENT, False),
        # a file that does not build, or fails the section's check: the reference, said so
        (harness.BuildError("pipeline.c:1: error: expected ';'"), (REFERENCE, None), REFERENCE, True),
        (AssertionError("rank 3 received wrong bytes"), (REFERENCE, None), REFERENCE, True),
        # a run left out, where the reference runs them all: the reference
        ((STUDENT, TIMED_OUT), (REFERENCE, None), REFERENCE, True),
        # the reference fails as well (a machine too slow for the time limit): not the file's
        # fault, the student's partial result stays, without blaming the file
        ((STUDENT, TIMED_OUT), (REFERENCE, TIMED_OUT), STUDENT, False),
        ((STUDENT, TIMED_OUT), LaunchError("smpirun timed out"), STUDENT, False),
    ],
    ids=["works", "no-build", "wrong", "left-out", "both-slow", "reference-fails"],
)
def test_or_reference_falls_back_only_when_the_reference_does_better(
    monkeypatch, capsys, student, reference, expected, note
):
    monkeypatch.setattr(references, "reference", lambda name: "REFERENCE")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        run = _runs(dict(student=student, reference=reference))
        out = references.or_reference("pipeline", "pipeline.c", run)
    assert out is expected
    said = capsys.readouterr().out
    assert ("pipeline.c cannot run this section yet" in said) == note, said


def test_or_reference_says_so_when_neither_gives_anything(monkeypatch, capsys):
    monkeypatch.setattr(references, "reference", lambda name: "REFERENCE")
    run = _runs(dict(student=harness.BuildError("no main"), reference=LaunchError("smpirun: not found")))
    with pytest.raises(AssertionError, match="REFERENCE did not run either: smpirun: not found"):
        references.or_reference("pipeline", "pipeline.c", run)
    assert "cannot run this section yet (no main)" in capsys.readouterr().out


GRID = [(4, 8), (4, 4096), (8, 8), (8, 4096)]


def _bcast_runs(outcomes):
    """A section's ``run`` over several broadcasts, as bench.benchmark_bcast behaves: per algorithm
    and side (the student's file, the reference), "ok" (every point), "short" (a point missing,
    unsaid), "wrong" (wrong at the larger size: a SKIP warning, the points before it) or "none"
    (left out with a warning); a run where nothing is timed raises."""

    def run(files):
        rows = []
        for name, what in files.items():
            side = "reference" if str(what).startswith("REF:") else "student"
            outcome = outcomes.get(name, {}).get(side, "ok")
            grid = {"ok": GRID, "short": GRID[:-1], "wrong": GRID[::2], "none": []}[outcome]
            if outcome == "wrong":
                why = "a rank got a wrong byte or an error"
                warnings.warn(LeftOut(f"P = 4: SKIP {name} 4096: {why}", [name], why, 4, 4096))
            if outcome == "none":
                why = f"{name}.c does not compile for smpi:\nchain.c:1: error"
                warnings.warn(LeftOut(f"{name} left out: {why}", [name], why))
            value = 100.0 if side == "reference" else 1.0
            rows += [
                dict(algorithm=name, nprocs=q, bytes=b, segsize=0, maxrank_avg_us=value) for q, b in grid
            ]
        if not rows:
            raise AssertionError("no broadcast could be timed; fix the correctness checks first")
        return pd.DataFrame(rows)

    return run


@pytest.mark.parametrize(
    "outcomes,from_reference,left_out,note",
    [
        # every file works: the student's rows, no note
        ({}, [], [], None),
        # a file that does not build: its rows are the reference's, said so
        (
            {"chain": {"student": "none"}},
            ["chain"],
            [],
            "chain.c cannot run this section yet (chain.c does not compile",
        ),
        # wrong at a size (a SKIP), or points missing without a warning: the reference
        (
            {"binomial": {"student": "wrong"}},
            ["binomial"],
            [],
            "(a rank got a wrong byte or an error, at P = 4, 4096 B)",
        ),
        ({"pipeline": {"student": "short"}}, ["pipeline"], [], "(some of its points are missing)"),
        # the reference fails as well: the student's partial rows stay, without blaming the file
        ({"chain": {"student": "wrong", "reference": "none"}}, [], [], None),
        # neither gives a row: that algorithm alone is left out, with a warning saying both
        ({"chain": {"student": "none", "reference": "none"}}, [], ["chain"], None),
    ],
    ids=["works", "no-build", "wrong", "short", "both-fail", "neither"],
)
def test_or_references_replaces_only_the_broken_algorithms(
    monkeypatch, capsys, outcomes, from_reference, left_out, note
):
    monkeypatch.setattr(references, "reference", lambda name: f"REF:{name}")
    files = {name: f"{name}.c" for name in ("linear", "chain", "pipeline", "binomial")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = references.or_references(files, _bcast_runs(outcomes))
    said = capsys.readouterr().out
    assert sim.attrs["reference"] == from_reference
    assert list(dict.fromkeys(sim.algorithm)) == [n for n in files if n not in left_out]
    from_ref = sim[sim.maxrank_avg_us == 100.0]
    assert sorted(set(from_ref.algorithm)) == sorted(from_reference)
    assert (sim[sim.algorithm.isin(from_reference)].groupby("algorithm").size() == len(GRID)).all()
    if note:
        assert note in said and "rows below come from REF:" in said
    else:
        assert "cannot run this section yet" not in said
    messages = [str(w.message) for w in caught]
    for name in left_out:
        assert any(
            m.startswith(f"{name} left out: {name}.c: ") and "did not run either" in m for m in messages
        )
    # a replaced algorithm's own warnings are answered by the note, not repeated
    assert not [m for m in messages if any(n in m for n in from_reference)]


def test_or_references_says_so_when_nothing_runs(monkeypatch):
    monkeypatch.setattr(references, "reference", lambda name: f"REF:{name}")
    everything = {n: {"student": "none", "reference": "none"} for n in ("pipeline", "chain")}
    run = _bcast_runs(everything)
    with warnings.catch_warnings(record=True):
        with pytest.raises(AssertionError, match="no algorithm could be timed"):
            references.or_references({"pipeline": "pipeline.c", "chain": "chain.c"}, run)
