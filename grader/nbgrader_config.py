"""nbgrader configuration of the mpilab course (run nbgrader from this directory).

Source notebooks live in ../solutions/<lab>/, student versions are released to ../labs/<lab>/;
submissions go to submitted/<student>/<lab>/.
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "../solutions"
c.CourseDirectory.release_directory = "../labs"
# The gradebook: the course's SQLite file (gradebook.db) on one machine; a database server
# (scripts/gradebook-db.sh, or the cluster's own) when grading tasks run at once: MPILAB_DB_URL.
if os.environ.get("MPILAB_DB_URL", "").strip():
    c.CourseDirectory.db_url = os.environ["MPILAB_DB_URL"].strip()
    # A database server checks the gradebook's foreign keys (SQLite does not): nbgrader files an
    # assignment under the course id, which must then name a course.
    if not c.CourseDirectory.get("course_id"):
        c.CourseDirectory.course_id = os.environ.get("MPILAB_COURSE_ID", "mpilab")
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "check_student*",
    "test-output",
    "c_solutions",
]

# MPI cells run sweeps and compile C: nbgrader's 30 s default would kill them. Each grading
# check still has its own per-run limit (mpilab.grade.runner.RUN_TIMEOUT) well inside this one.
c.ExecutePreprocessor.timeout = int(os.environ.get("MPILAB_CELL_TIMEOUT", "600"))
c.ExecutePreprocessor.startup_timeout = 120

# Autograde executes the notebooks with mpilab.grade.autograde.GuardedExecute instead of nbgrader's
# Execute: a kernel that does not stop when a cell's time is up (it ignores SIGINT) or that dies
# is restarted, so only the cells from there on lose their points (nbgrader alone fails the whole
# notebook), and a cell's printed text is cut at MPILAB_CELL_OUTPUT_CAP characters as it arrives.
# LimitOutput then keeps at most 500 lines of a cell's output and 60 lines of a traceback.
from nbgrader.converters.autograde import Autograde  # noqa: E402

#
# The points come from the trusted grader, not from the notebook: mpilab.grade.verdicts.
# TrustedVerdicts, just before SaveAutoGrades, replaces every test cell's outputs with the verdict
# of a fresh grader process (mpilab.grade.judge) on the answers the cell handed in and on the
# submitted files, with the hidden cases of the answer key (solutions/mpilab_key).
_steps = []
for pp in Autograde.class_traits()["autograde_preprocessors"].default():
    if pp.__name__ == "SaveAutoGrades":
        _steps.append("mpilab.grade.verdicts.TrustedVerdicts")
    _steps.append("mpilab.grade.autograde.GuardedExecute" if pp.__name__ == "Execute" else pp)
c.Autograde.autograde_preprocessors = _steps
c.LimitOutput.max_lines = 500
c.LimitOutput.max_traceback = 60

# Autograde normally copies the source's files over the submission's: the students' C files
# (the skeletons they filled in) must be graded as submitted, so every *.c of a lab is excluded.
_solutions = os.path.join(c.CourseDirectory.root, c.CourseDirectory.source_directory)
c.Autograde.exclude_overwriting = {
    lab: sorted(f for f in os.listdir(os.path.join(_solutions, lab)) if f.endswith(".c"))
    for lab in (os.listdir(_solutions) if os.path.isdir(_solutions) else [])
    if os.path.isdir(os.path.join(_solutions, lab))
}

# Students' files downloaded from an LMS (zip files in downloaded/<lab>/archive/, nbgrader's
# default place) are collected with: nbgrader zip_collect <lab>, into submitted/<student>/<lab>/
# under the file's original name. The names are Blackboard's,
#   <assignment>_<student>_attempt_<YYYY-MM-DD-HH-MM-SS>_<original file name>
# e.g. lab3_alice_b_attempt_2026-11-20-10-00-00_allreduce_two_level.c (student alice_b); the
# collector (mpilab/grade/lms.py) anchors on the timestamp and reads it, so a later attempt wins.
c.ZipCollectApp.collector_plugin = "mpilab.grade.lms.BlackboardCollector"
# nbgrader collect copies from the exchange following links (a student's ring.c -> a file only the
# instructor can read): this one copies regular files and folders only (mpilab.grade.intake), and
# scripts/grade.sh moves anything else out of each submission before autograde.
c.ExchangeFactory.collect = "mpilab.grade.intake.SafeCollect"
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".c", ".csv", ".txt"]  # notebooks, C files, results
