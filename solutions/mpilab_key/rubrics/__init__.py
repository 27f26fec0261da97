"""One rubric per lab: ``RUBRIC = {grade_id: verdict}`` (see :mod:`mpilab.grade.checks`)."""
