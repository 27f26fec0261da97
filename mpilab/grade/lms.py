"""Submissions downloaded from an LMS, for ``nbgrader zip_collect`` (the course's grader/).

Blackboard names every submitted file
``<assignment>_<student>_attempt_<YYYY-MM-DD-HH-MM-SS>_<original file name>``, e.g.
``lab3_alice_b_attempt_2026-11-20-10-00-00_allreduce_two_level.c``: student ``alice_b``, file
``allreduce_two_level.c``. Student ids and file names may both hold underscores, so the
timestamp's shape is the anchor: the student id is everything between the assignment's name (up
to the first underscore; name the LMS assignment ``lab3``, not ``lab_3``) and ``_attempt_``, the
file name everything after the timestamp. Blackboard's per-attempt receipt,
``<assignment>_<student>_attempt_<timestamp>.txt``, has no file name and is skipped.
"""

import datetime

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

#: A Blackboard file name, matched against the whole extracted path (as nbgrader does).
BLACKBOARD_NAME = (
    r"^(?:.*/)?[^/]+?_(?P<student_id>[^/]+)_attempt_"
    r"(?P<timestamp>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)_(?P<file_id>[^/]+)$"
)
#: The timestamp's format in those names.
BLACKBOARD_TIME = "%Y-%m-%d-%H-%M-%S"


class BlackboardCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector with Blackboard's names and timestamps.

    nbgrader reads a collected timestamp with dateutil, which takes the ``-MM-SS`` of
    ``2026-11-21-09-30-15`` for a time-zone offset (09:00 at UTC-15:00); this collector hands it
    the time itself, so of two attempts of one file the later one is kept.
    """

    named_regexp = Unicode(BLACKBOARD_NAME, help="A submitted file's name (see mpilab.grade.lms).").tag(
        config=True
    )

    def collect(self, submitted_file):
        """The student id, file name and attempt time of one extracted file, or None (skip)."""
        info = super().collect(submitted_file)
        if info and info.get("timestamp"):
            info["timestamp"] = datetime.datetime.strptime(info["timestamp"], BLACKBOARD_TIME)
        return info
