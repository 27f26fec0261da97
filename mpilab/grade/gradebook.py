"""The course's gradebook read back as a table: the scores nbgrader recorded, per student and cell."""

import os

import pandas as pd
from nbgrader.api import Gradebook, MissingEntry

from mpilab.core.errors import UsageError, one_of


def score_table(course_root, assignment):
    """Scores per student and graded cell, from an nbgrader course's gradebook.

    Parameters
    ----------
    course_root : str or path
        The nbgrader course root (holds ``gradebook.db``).
    assignment : str
        The assignment name, e.g. ``"lab2"``.

    Returns
    -------
    pandas.DataFrame
        One row per student; one column per graded cell (``grade_id``), then ``total`` and
        ``max``. Manually graded cells show their score so far (0 until graded).
    """
    db = os.path.join(os.fspath(course_root), "gradebook.db")
    if not os.path.exists(db):
        raise UsageError(f"no gradebook at {db}; run nbgrader generate_assignment there first")
    rows = []
    with Gradebook(f"sqlite:///{db}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            names = [a.name for a in gb.assignments]
            raise one_of("assignment", assignment, names) from None
        for sub in gb.assignment_submissions(assignment):
            row = {"student": sub.student_id}
            for nb in sub.notebooks:
                for grade in nb.grades:
                    row[grade.name] = grade.score
            row["total"], row["max"] = sub.score, sub.max_score
            rows.append(row)
    if not rows:  # every student stopped before nbgrader recorded a submission
        return pd.DataFrame(columns=["student", "total", "max"]).set_index("student")
    return pd.DataFrame(rows).sort_values("student").set_index("student")
