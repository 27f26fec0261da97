"""The course's gradebook read back as a table: the scores nbgrader recorded, per student and cell."""

import os

import pandas as pd
from nbgrader.api import Gradebook, MissingEntry

from mpilab.core.errors import UsageError, one_of

#: The gradebook's SQLAlchemy URL when it is not the course's SQLite file: a database server that
#: many grading tasks can write to at once (``scripts/gradebook-db.sh`` starts a MariaDB of the
#: course's own), e.g. ``mysql+pymysql://mpilab:PASSWORD@127.0.0.1:16034/mpilab_gradebook``.
DB_URL_ENV = "MPILAB_DB_URL"

#: The database drivers the kit installs, by URL scheme.
DB_SCHEMES = ("sqlite", "mysql+pymysql", "mariadb+pymysql")


def db_url(course_root):
    """The course's gradebook URL: ``$MPILAB_DB_URL``, else ``sqlite:///<course>/gradebook.db``."""
    url = os.environ.get(DB_URL_ENV, "").strip()
    if not url:
        return "sqlite:///" + os.path.join(os.path.abspath(os.fspath(course_root)), "gradebook.db")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in DB_SCHEMES:
        raise one_of(f"{DB_URL_ENV} scheme (in {redact(url)!r})", scheme, list(DB_SCHEMES))
    return url


def redact(url):
    """``url`` without its password, for messages and records."""
    head, sep, tail = url.partition("://")
    if "@" in tail and ":" in tail.split("@", 1)[0]:
        user = tail.split("@", 1)[0].split(":", 1)[0]
        tail = f"{user}:***@{tail.split('@', 1)[1]}"
    return head + sep + tail


def score_table(course_root, assignment):
    """Scores per student and graded cell, from an nbgrader course's gradebook.

    Parameters
    ----------
    course_root : str or path
        The nbgrader course root (holds ``gradebook.db``, unless ``$MPILAB_DB_URL`` names the
        gradebook's database server).
    assignment : str
        The assignment name, e.g. ``"lab2"``.

    Returns
    -------
    pandas.DataFrame
        One row per student; one column per graded cell (``grade_id``), then ``total`` and
        ``max``. Manually graded cells show their score so far (0 until graded).
    """
    url = db_url(course_root)
    db = url[len("sqlite:///") :] if url.startswith("sqlite:///") else None
    if db is not None and not os.path.exists(db):
        raise UsageError(f"no gradebook at {db}; run nbgrader generate_assignment there first")
    rows = []
    with Gradebook(url) as gb:
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
