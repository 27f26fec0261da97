"""The student's side of the kit as one tree: ``make student-release`` writes ``dist/student/``.

That tree is what an instructor hands out without the image and exactly what the student image
installs: the labs (the released notebooks and the C skeletons), the ``mpilab`` package, the C
reference code a student may read (allgather by gather + broadcast and by pairwise exchange, the
two algorithms of the homework seed, with the benchmark driver, the tracer and the checking
harnesses), the compiled references that later sections run on while a student's C task does
not work yet (built, stripped, no source: :mod:`mpilab.grade.references`), the documentation,
the SLURM templates and the image definitions. It holds no answer to a graded question: the
answer key (``solutions/``: the C solutions, the costs, the rubrics with their hidden cases) and
the course (``grader/``) stay on the instructor's side, with the tests. ``tests/test_release.py``
checks that no graded answer is in the tree or computable from it.

Usage: ``python -m mpilab.grade.release [DEST]`` (default ``dist/student``).
"""

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from mpilab.core import paths
from mpilab.core.errors import ToolMissing, UsageError
from mpilab.grade import references

#: What the student tree holds, relative to the repository's root (folders are copied whole,
#: but for :data:`LEFT_OUT`).
SHIPPED = (
    "README.md",
    "Makefile",
    "pyproject.toml",
    "environment.yml",
    ".gitignore",
    "mpilab",
    "c_reference",
    "labs",
    "labext",
    "docs",
    "slurm_templates",
    "containers",
    "scripts/setup.sh",
    "scripts/build-image.sh",
    "scripts/local-slurm.sh",
    "scripts/packages.txt",
)
#: Never shipped, wherever they are: build products, caches, notebooks' checkpoints.
LEFT_OUT = (
    "build",
    "__pycache__",
    "*.pyc",
    ".ipynb_checkpoints",
    "*.egg-info",
    "*.sif",
    "test-output",
    ".pytest_cache",
    "node_modules",
)
#: The instructor's side: never in the student tree.
INSTRUCTOR_SIDE = ("solutions", "grader", "tests", ".ci", "scripts/grade.sh")


def tracked(root):
    """The files git tracks under ``root`` (None outside a git checkout): untracked files of a
    developer's checkout (results, scratch) stay out of the release."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {Path(p) for p in out.decode().split("\0") if p}


def build(dest, root=None):
    """Write the student tree to ``dest`` (replacing it); return the list of files written.

    Raises
    ------
    UsageError
        When ``dest`` is inside a shipped folder, or the repository misses a shipped item.
    """
    root = Path(root or paths.repo_root()).resolve()
    dest = Path(dest).resolve()
    for item in SHIPPED:
        if dest == root / item or (root / item) in dest.parents:
            raise UsageError(
                f"the release cannot go inside {item}/ (it would copy itself); "
                f"choose another place, e.g. dist/student"
            )
    missing = [item for item in SHIPPED if not (root / item).exists()]
    if missing:
        raise UsageError(f"{root} is not a full mpilab checkout: {', '.join(missing)} missing")
    keep = tracked(root)
    if dest.exists():
        shutil.rmtree(dest)
    written = []
    for item in SHIPPED:
        src = root / item
        for path in [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file()):
            rel = path.relative_to(root)
            if any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in LEFT_OUT):
                continue
            if keep is not None and rel not in keep:
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            written.append(rel)
    # the compiled references (mpilab.grade.references): built from the answer key, no source
    try:
        for prog in references.build_all(references.shipped_dir(dest)):
            written.append(prog.relative_to(dest))
    except ToolMissing as exc:
        warnings.warn(f"the student tree has no compiled references: {exc}")
    (dest / "RELEASE.txt").write_text(
        "The student's side of the mpilab kit (make student-release). Start with README.md:\n"
        "'make lab' opens the labs in JupyterLab. The answer key and the course's grader are\n"
        "the instructor's and are not part of this tree.\n"
    )
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mpilab.grade.release", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "dest", nargs="?", default="dist/student", help="where to write the tree (default dist/student)"
    )
    args = parser.parse_args(argv)
    try:
        files = build(args.dest)
    except UsageError as exc:
        print(f"student-release: {exc}", file=sys.stderr)
        return 2
    size = sum(os.path.getsize(Path(args.dest) / f) for f in files)
    print(f"student-release: {len(files)} files, {size / 2**20:.1f} MiB in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
