"""Shared fixtures: build c_reference once per flavour per session, temporary results files."""

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS, OPENMPI_PMIX_ENV

# The tests' own mpirun calls start as fast as the kit's launchers make theirs (2.6 s -> 0.33 s
# per launch here while no munged runs: mpilab.core.vocabulary.OPENMPI_PMIX_ENV).
for _key, _value in OPENMPI_PMIX_ENV.items():
    os.environ.setdefault(_key, _value)


@pytest.fixture(scope="session")
def built_flavour():
    """A function ``build(flavour) -> build dir`` that runs ``make -C c_reference FLAVOUR=...``
    once per flavour per session; skips only if that flavour's compiler is absent."""
    done = {}

    def build(flavour):
        if flavour in done:
            return done[flavour]
        if shutil.which(COMPILERS[flavour]) is None:
            pytest.skip(f"{COMPILERS[flavour]} not installed (flavour {flavour})")
        lock = paths.c_reference_dir() / ".build.lock"
        with open(lock, "w") as f:
            # other test sessions may build at the same time
            fcntl.flock(f, fcntl.LOCK_EX)
            proc = subprocess.run(
                ["make", "-C", str(paths.c_reference_dir()), f"FLAVOUR={flavour}"],
                capture_output=True,
                text=True,
                timeout=900,
            )
        if proc.returncode != 0:
            pytest.fail(
                f"make -C c_reference FLAVOUR={flavour} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        done[flavour] = paths.build_dir(flavour)
        return done[flavour]

    return build


@pytest.fixture(scope="session")
def local_slurm():
    """A running single-node SLURM (partition ``local``), started by the kit's script."""
    if not (shutil.which("slurmctld") or Path("/usr/sbin/slurmctld").exists()):
        pytest.skip("slurmctld is not installed (Debian: slurm-wlm munge)")
    proc = subprocess.run(
        [str(paths.repo_root() / "scripts" / "local-slurm.sh"), "start"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Idempotent: a second start changes nothing and succeeds.
    again = subprocess.run(
        [str(paths.repo_root() / "scripts" / "local-slurm.sh"), "start"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "starting" not in again.stdout, again.stdout + again.stderr
    if shutil.which("slurmdbd") or Path("/usr/sbin/slurmdbd").exists():  # accounting, as in CI
        assert "accounting: yes" in again.stdout, again.stdout
    return "local"


@pytest.fixture
def results_csv(tmp_path):
    """A path for a results CSV that does not exist yet."""
    return tmp_path / "results.csv"


#: The longest groups (minutes each on two cores), longest first, as measured in a full run.
#: ``make test``'s ``pytest -n 2 --dist loadscope --no-loadscope-reorder`` hands a test file
#: whole to one worker (its tests share module fixtures and, for the images, one build), and a
#: test class whole (tests/test_cheating.py: one class per lab). Collected first, these are
#: handed out first, so that the workers end together instead of one of them starting a
#: six-minute group when the other is nearly done.
LONGEST_FIRST = (
    "test_containers.py",
    "test_cheating.py::TestLab2",
    "test_grade_lab2.py",
    "test_cheating.py::TestLab3",
    "test_grade_lab3.py",
    "test_grade_lab6.py",
    "test_cheating.py::TestLab0",
    "test_cheating.py::TestLab1",
    "test_cheating.py::TestLab4",
    "test_cheating.py::TestLab6",
    "test_cheating.py::TestLab5",
    "test_grade_lab0.py",
    "test_grade_lab1.py",
    "test_exchange.py",
    "test_grade_lab4.py",
    "test_grade_lab5.py",
    "test_browser.py",
    "test_autograde.py",
)


def _group(item):
    """The file, or file::class, that xdist's loadscope hands out whole."""
    cls = getattr(item, "cls", None)
    return f"{item.path.name}::{cls.__name__}" if cls else item.path.name


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))  # stable: file order otherwise


_SESSION_START = time.time()


def pytest_terminal_summary(terminalreporter):
    """Show the container build times and sizes that tests/test_containers.py measured in
    this run (test-output/containers.txt), also under xdist, where the test ran in a worker."""
    summary = paths.repo_root() / "test-output" / "containers.txt"
    if summary.is_file() and summary.stat().st_mtime >= _SESSION_START:
        terminalreporter.write_sep("-", "container builds (test-output/containers.txt)")
        terminalreporter.write(summary.read_text())
