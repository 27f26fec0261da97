"""The student versions in labs/ are what nbgrader releases from solutions/ today.

Real ``nbgrader generate_assignment`` with the course's own config, into a private release
directory; every lab's notebook (cell by cell) and its other files must match labs/<lab>/.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from course import ROOT, Course

LABS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())


def _cells(path):
    """Each cell's type, source and metadata: nbgrader's checksum of a locked cell is in its
    metadata, and a hand-edited labs/ notebook with a stale one differs from what students fetch."""
    return [
        (c["cell_type"], "".join(c["source"]), c["metadata"])
        for c in json.loads(Path(path).read_text())["cells"]
    ]


def _files(d):
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if p.is_file())


def test_every_lab_is_released():
    assert LABS == ["lab0", "lab1", "lab2", "lab3", "lab4", "lab5", "lab6"]
    assert sorted(p.name for p in (ROOT / "labs").iterdir() if p.is_dir()) == LABS


@pytest.mark.nbgrader  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.parametrize("lab", LABS)
def test_released_lab_is_in_sync(tmp_path, lab):
    course = Course(tmp_path)
    bindir = Path(sys.executable).parent  # nbgrader and the alembic it calls
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        ["nbgrader", "generate_assignment", lab, "--create", "--force", "--log-level=WARN"],
        cwd=course.root,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh, committed = tmp_path / "release" / lab, ROOT / "labs" / lab
    hint = f"labs/{lab} is stale: cd grader && nbgrader generate_assignment {lab} --create --force"
    assert _files(fresh) == _files(committed), hint
    for name in _files(fresh):
        if name.endswith(".ipynb"):
            assert _cells(fresh / name) == _cells(committed / name), f"{hint} ({name})"
        else:
            assert (fresh / name).read_bytes() == (committed / name).read_bytes(), f"{hint} ({name})"
    assert not any(
        "BEGIN SOLUTION" in src or "BEGIN HIDDEN" in src for _, src, _ in _cells(committed / f"{lab}.ipynb")
    )
