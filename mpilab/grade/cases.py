"""Verdicts made of cases: each graded cell's points follow the share of its cases that pass.

A check returns a list of :class:`Case`; :class:`CellVerdict` turns them into a score
(``points × passed weight / total weight``, so a ring that fails only the ``MPI_IN_PLACE`` cases
keeps most of its points) and into the feedback the student reads: a summary line and one line
per failed case, naming the case ("hidden: Open MPI, P = 7, in-place count=8: rank 3: block 2
... is 0, expected 12"), never the code that checks it.
"""

from dataclasses import asdict, dataclass, field

#: Failed cases listed in the feedback of one cell (the rest are counted).
MAX_LISTED = 12


@dataclass
class Case:
    """One thing a check verified.

    Attributes
    ----------
    name : str
        What was checked, in the student's words: "Open MPI, P = 5, in-place count=8".
    passed : bool
    message : str
        Why it failed (empty when it passed).
    weight : float
        Its share of the cell's points, relative to the other cases of the cell.
    hidden : bool
        A case the notebook's own check does not run (its name says so in the feedback).
    """

    name: str
    passed: bool
    message: str = ""
    weight: float = 1.0
    hidden: bool = False

    def line(self):
        """The feedback line of this case."""
        mark = "✓" if self.passed else "✗"
        where = ("hidden: " if self.hidden else "") + self.name
        return f"{mark} {where}" + ("" if self.passed or not self.message else f": {self.message}")


@dataclass
class CellVerdict:
    """The grader's verdict on one graded cell."""

    grade_id: str
    points: float
    cases: list = field(default_factory=list)
    note: str = ""
    #: More feedback after the failed cases (e.g. :mod:`mpilab.grade.diagnose`'s), as text and
    #: as HTML (the feedback shows the HTML, diagrams included, below the text).
    explanation: str = ""
    html: str = ""

    @property
    def total_weight(self):
        return sum(c.weight for c in self.cases)

    @property
    def score(self):
        """Points earned, rounded to hundredths (0 without cases)."""
        total = self.total_weight
        if total <= 0:
            return 0.0
        got = sum(c.weight for c in self.cases if c.passed)
        return round(self.points * got / total, 2)

    def text(self):
        """The feedback: a summary line, the note, then the failed cases (at most :data:`MAX_LISTED`)."""
        passed = sum(c.passed for c in self.cases)
        lines = [
            f"mpilab grader: {self.score:g} of {self.points:g} points "
            f"({passed} of {len(self.cases)} cases passed)"
        ]
        if self.note:
            lines.append(self.note)
        failed = _grouped([c for c in self.cases if not c.passed])
        lines += ["  " + c.line() for c in failed[:MAX_LISTED]]
        if len(failed) > MAX_LISTED:
            lines.append(f"  ... and {len(failed) - MAX_LISTED} more lines of failed cases")
        if not failed and self.cases:
            lines.append("  every case passed")
        if self.explanation:
            lines.append(self.explanation)
        return "\n".join(lines)

    def to_dict(self):
        return {
            "grade_id": self.grade_id,
            "points": self.points,
            "score": self.score,
            "note": self.note,
            "cases": [asdict(c) for c in self.cases],
            "explanation": self.explanation,
            "html": self.html,
        }

    @classmethod
    def from_dict(cls, data):
        return cls(
            data["grade_id"],
            float(data["points"]),
            [Case(**c) for c in data.get("cases", [])],
            data.get("note", ""),
            data.get("explanation", ""),
            data.get("html", ""),
        )


def _grouped(cases):
    """Failed cases of one run that fail for the same reason, as one line: "Open MPI, P = 2:
    char, double, in-place: not run: the int case hung" (the weights are summed)."""
    out, index = [], {}
    for c in cases:
        prefix, _, kind = c.name.rpartition(", ")
        key = (prefix, c.message, c.hidden)
        if prefix and key in index:
            g = out[index[key]]
            g.name = f"{g.name}, {kind}"
            g.weight += c.weight
        else:
            index[key] = len(out)
            out.append(Case(c.name, c.passed, c.message, c.weight, c.hidden))
    return out


def one(name, ok, message="", weight=1.0, hidden=False):
    """A single :class:`Case` (``ok`` truthy: passed)."""
    return Case(name, bool(ok), "" if ok else message, weight, hidden)
