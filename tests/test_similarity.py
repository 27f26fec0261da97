"""The similarity report (scripts/similarity.sh: JPlag from Maven Central, the lab's skeletons as
base code): two copies of one ring, one with its names changed and its comments gone, are
flagged; two untouched skeletons are not; a submitted link is not followed."""

import csv
import glob
import os
import re
import shutil
import subprocess

import pytest

from mpilab.core import paths

ROOT = paths.repo_root()
SCRIPT = ROOT / "scripts" / "similarity.sh"


def _java21():
    for java in [shutil.which("java") or "", *glob.glob("/usr/lib/jvm/*/bin/java")]:
        if not java or not os.access(os.path.dirname(java) + "/javac", os.X_OK):
            continue
        out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
        m = re.search(r'version "(\d+)', out)
        if m and int(m.group(1)) >= 21:
            return java
    return None


def _run(course, *args, env=None):
    return subprocess.run(
        [str(SCRIPT), *args],
        env=dict(os.environ, COURSE=str(course), **(env or {})),
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_bad_input_is_named(tmp_path):
    (tmp_path / "submitted").mkdir()
    proc = _run(tmp_path, "lab9")
    assert proc.returncode == 2 and "unknown assignment 'lab9'" in proc.stderr and "lab2" in proc.stderr
    proc = _run(tmp_path, "lab2", env={"MPILAB_SIMILARITY_FLAG": "high"})
    assert proc.returncode == 2 and "MPILAB_SIMILARITY_FLAG='high'" in proc.stderr


@pytest.mark.skipif(
    not _java21() or not shutil.which("mvn"), reason="JPlag 6 needs a JDK 21 or newer and Maven"
)
def test_two_copies_of_one_ring_are_flagged_and_the_skeleton_is_not(tmp_path):
    sub = tmp_path / "submitted"
    key = ROOT / "solutions" / "lab2" / "c_solutions"
    skel = ROOT / "labs" / "lab2"
    for student in ("ann", "bob", "cy", "dee", "eve"):
        (sub / student / "lab2").mkdir(parents=True)
    shutil.copy(key / "ring.c", sub / "ann" / "lab2")
    # bob's copy: other names, no comments, another layout of the blank lines
    text = (key / "ring.c").read_text()
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    for old, new in (("left", "prv"), ("right", "nxt"), ("block", "chunk"), ("step", "k")):
        text = re.sub(rf"\b{old}\b", new, text)
    (sub / "bob" / "lab2" / "ring.c").write_text(re.sub(r"\n\s*\n", "\n", text))
    for student in ("cy", "dee"):  # handed in what they were given
        for f in skel.glob("*.c"):
            shutil.copy(f, sub / student / "lab2")
    # eve links the solution instead of copying it: not followed, so eve has nothing to compare
    (sub / "eve" / "lab2" / "ring.c").symlink_to(key / "ring.c")
    proc = _run(tmp_path, "lab2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "similarity-lab2" / "similarity.csv") as f:
        pairs = {frozenset((r["first"], r["second"])): float(r["similarity"]) for r in csv.DictReader(f)}
    assert set().union(*pairs) == {"ann", "bob", "cy", "dee"}, pairs
    assert pairs[frozenset(("ann", "bob"))] >= 0.5, pairs
    assert pairs[frozenset(("cy", "dee"))] < 0.1, pairs  # the base code does not count
    assert max(v for k, v in pairs.items() if k != frozenset(("ann", "bob"))) < 0.5, pairs
    flagged = proc.stdout.split("read them side by side:")[1].split("similarity: every pair")[0]
    assert "ann" in flagged and "bob" in flagged and "cy" not in flagged and "dee" not in flagged
    assert (tmp_path / "similarity-lab2" / "jplag-report.zip").stat().st_size > 0
