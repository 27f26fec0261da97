"""The answer key of mpilab: the instructor's side of the kit.

What answers a graded question lives here and nowhere on the student's side: the cost table
(:mod:`mpilab_key.costs`), and the rubric of each lab (:mod:`mpilab_key.rubrics`), with the
expected answers and the hidden cases the trusted grader (:mod:`mpilab.grade.judge`) uses.
``make student-release`` leaves it out; ``scripts/setup.sh`` installs it into the kit's .venv
(``pip install -e solutions``) where ``solutions/`` exists.
"""


class InNotebook(str):
    """A value of the instructor's guide (a rubric's ``GUIDE["wrong"]``) that is an expression
    evaluated in the executed solution notebook, e.g. ``InNotebook("fits.assign(slope=0.0)")``:
    a wrong answer made from the solution's own data."""
