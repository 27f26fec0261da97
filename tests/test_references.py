"""No dead ends: a later section runs on the kit's compiled reference of an earlier C task, and
its grade does not depend on that C.

Lab 6's segment sweep (section 4) times the student's pipeline.c, lab 3's study (section 4) the
student's allreduce_two_level.c. With a broken file the notebook's cell runs the compiled
reference instead (mpilab.grade.references.or_reference), and the grader accepts the numbers of
either; the student's tree holds the references built and stripped, without their source.
"""

import shutil
import warnings

import pandas as pd
import pytest

from mpilab.core.errors import LaunchError
from mpilab.grade import bench, harness, references
from mpilab.grade.checks import segments
from mpilab.grade.labs.lab6 import SEGSIZES, SWEEP_BYTES
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
    for name, ref in references.REFERENCES.items():
        prog = tmp_path / "student" / "c_reference" / "compiled" / "smpi" / name / ref.program
        assert prog.is_file() and prog.read_bytes()[:4] == b"\x7fELF"
        assert not any(f.name == ref.source for f in files if f.parts[0] != "labs")
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
TIMED_OUT = "pipeline at P = 32 left out: it timed out after 30 s"


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
