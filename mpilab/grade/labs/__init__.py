"""The graded cells of each lab as the student's notebook sees them.

A lab's notebook starts with ``check = labs.checker("lab2")``; every graded test cell then ends
with one line, e.g. ``check("cost_ring", cost_ring)``, which

1. hands the answers in for the grader (:func:`mpilab.grade.answers.hand_in`): the points come
   from the trusted grader's verdict on them, after the notebook has run;
2. runs the cell's visible checks now, so the student sees what is wrong while working
   (skipped during autograding, where the grader runs them again with the hidden cases).

Each lab module (``mpilab/grade/labs/lab2.py`` ...) defines ``CELLS``: grade id ->
:class:`Cell`. The expected answers and the hidden cases are not here: they are in the answer
key, on the instructor's side.
"""

import importlib
import os
from dataclasses import dataclass, field

from mpilab.core.errors import UsageError, one_of
from mpilab.grade import answers
from mpilab.grade.checks import ccode


@dataclass
class Cell:
    """A graded test cell: the names of the answers it hands in, and its visible check.

    ``visible(*values)`` returns a list of :class:`mpilab.grade.cases.Case` (None: the cell has
    no visible check, e.g. a cost whose value only the grader knows).

    ``prepare(*values)``, optional, turns values that are not data into data before they are
    handed in (e.g. a function the student wrote into what it returns on the cases the grader
    looks at); it returns one value per name. ``visible`` still gets the values as given.
    """

    names: tuple = ()
    visible: object = None
    doc: str = field(default="")
    prepare: object = None


def c_file_cell(c_file, cases):
    """The graded cell of a C file: its visible check first says which saved version of the file
    it tests (:func:`mpilab.grade.checks.ccode.saved_note`), then returns ``cases()``."""

    def visible():
        print(ccode.saved_note(c_file))
        return cases()

    return Cell((), visible)


def cells(lab):
    """The ``CELLS`` of a lab module."""
    try:
        module = importlib.import_module(f"mpilab.grade.labs.{lab}")
    except ModuleNotFoundError:
        raise UsageError(f"no graded cells for lab {lab!r}") from None
    return module.CELLS


def checker(lab):
    """The ``check(grade_id, *answers)`` function of a lab's notebook (see the module's docstring)."""
    table = cells(lab)

    def check(grade_id, *values):
        if grade_id not in table:
            raise one_of(f"graded cell of {lab}", grade_id, table)
        cell = table[grade_id]
        if len(values) != len(cell.names):
            raise UsageError(
                f"check({grade_id!r}, ...) hands in {len(cell.names)} answer(s): "
                f"{', '.join(cell.names) or 'none'}; got {len(values)}"
            )
        handed = cell.prepare(*values) if cell.prepare is not None else values
        answers.hand_in(grade_id, **dict(zip(cell.names, handed)))
        if os.environ.get("NBGRADER_EXECUTION") == "autograde" or cell.visible is None:
            return None
        results = cell.visible(*values)
        failed = [c for c in results if not c.passed]
        if failed:
            raise AssertionError(
                "\n".join(
                    [f"{len(failed)} of {len(results)} visible checks failed:"] + [c.line() for c in failed]
                )
            )
        print(
            f"{len(results)} visible checks passed. "
            + (cell.doc or "The grader runs them again, with more cases, after you hand in.")
        )
        return None

    return check
