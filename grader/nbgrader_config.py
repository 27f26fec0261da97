"""nbgrader configuration of the mpilab course (run nbgrader from this directory).

Source notebooks live in ../solutions/<lab>/, student versions are released to ../labs/<lab>/;
submissions go to submitted/<student>/<lab>/.
"""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "../solutions"
c.CourseDirectory.release_directory = "../labs"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "check_student*", "test-output", "c_solutions"]

# MPI cells run sweeps and compile C: nbgrader's 30 s default would kill them. Each grading
# check still has its own per-run limit (mpilab.grading.RUN_TIMEOUT) well inside this one.
c.ExecutePreprocessor.timeout = int(os.environ.get("MPILAB_CELL_TIMEOUT", "600"))
c.ExecutePreprocessor.startup_timeout = 120

# Autograde normally copies the source's files over the submission's: the students' C files
# (the skeletons they filled in) must be graded as submitted, so every *.c of a lab is excluded.
_solutions = os.path.join(c.CourseDirectory.root, c.CourseDirectory.source_directory)
c.Autograde.exclude_overwriting = {
    lab: sorted(f for f in os.listdir(os.path.join(_solutions, lab)) if f.endswith(".c"))
    for lab in (os.listdir(_solutions) if os.path.isdir(_solutions) else [])
    if os.path.isdir(os.path.join(_solutions, lab))
}

# Students' files downloaded from an LMS (zip files in downloaded/<lab>/archive/, nbgrader's
# default place) are collected with: nbgrader zip_collect <lab>. The names are Blackboard's,
# <assignment>_<student>_attempt_<date>_<file>, e.g. lab2_alice_attempt_2026-11-20-10-00-00_ring.c.
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".c", ".csv", ".txt"]   # notebooks, C files, results
c.FileNameCollectorPlugin.named_regexp = r".*_(?P<student_id>\w+)_attempt_.*_(?P<file_id>[^/]+)$"
