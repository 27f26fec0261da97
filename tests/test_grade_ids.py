"""A graded cell's id is written in four places, and they agree for every lab.

1. the notebook's nbgrader metadata (solutions/<lab>/<lab>.ipynb, and the released labs/<lab>/),
2. the cell's own ``check("<id>", ...)`` line (what it hands in under),
3. ``CELLS`` in mpilab/grade/labs/<lab>.py (its answer names and visible check),
4. ``RUBRIC`` in the answer key's mpilab_key/rubrics/<lab>.py (its verdict).

A mismatch used to show only when a course was graded (a cell with no verdict scores 0); here it
fails with the ids that differ and where.
"""

import ast
import importlib
import json

import pytest
from course import ROOT

from mpilab.grade.labs import cells

LABS = sorted(p.name for p in (ROOT / "solutions").glob("lab*") if (p / f"{p.name}.ipynb").exists())


def graded_cells(path):
    """``{grade_id: (id its check(...) line names, how many answers it hands in)}`` of the graded test
    cells of a notebook (code, graded, not an answer cell)."""
    out = {}
    for cell in json.loads(path.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        calls = [
            node
            for node in ast.walk(ast.parse("".join(cell["source"])))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check"
        ]
        named, handed = None, 0
        if len(calls) == 1 and calls[0].args and isinstance(calls[0].args[0], ast.Constant):
            named = calls[0].args[0].value
            handed = len(calls[0].args) - 1
        out[meta["grade_id"]] = (named, handed)
    return out


def test_the_reader_finds_the_id_and_the_names(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": "plot_check"}},
                "source": ['"""doc."""\n', 'check("plot_check", fig, at4[at4.bytes > 0])\n'],
            },
            {
                "cell_type": "code",
                "metadata": {"nbgrader": {"grade": True, "solution": True, "grade_id": "answer"}},
                "source": ["x = 1\n"],
            },
        ]
    }
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    assert graded_cells(tmp_path / "nb.ipynb") == {"plot_check": ("plot_check", 2)}


@pytest.mark.parametrize("lab", LABS)
def test_every_grade_id_is_the_same_in_notebook_check_cells_and_rubric(lab):
    solution = graded_cells(ROOT / "solutions" / lab / f"{lab}.ipynb")
    released = graded_cells(ROOT / "labs" / lab / f"{lab}.ipynb")
    cell_ids = set(cells(lab))
    rubric_ids = set(importlib.import_module(f"mpilab_key.rubrics.{lab}").RUBRIC)
    places = {
        "solutions notebook": set(solution),
        "released notebook": set(released),
        f"mpilab/grade/labs/{lab}.py CELLS": cell_ids,
        f"mpilab_key/rubrics/{lab}.py RUBRIC": rubric_ids,
    }
    every = set().union(*places.values())
    missing = {where: sorted(every - ids) for where, ids in places.items() if every - ids}
    assert not missing, f"{lab}: grade ids missing from: {missing}"
    wrong = {gid: named for gid, (named, _) in solution.items() if named != gid}
    assert not wrong, f"{lab}: cells whose check(...) names another id (metadata id: named): {wrong}"
    counts = {gid: (handed, len(cells(lab)[gid].names)) for gid, (_, handed) in solution.items()}
    differ = {gid: pair for gid, pair in counts.items() if pair[0] != pair[1]}
    assert not differ, f"{lab}: check(...) hands in another number of answers than CELLS names: {differ}"
