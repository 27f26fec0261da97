"""Shared fixtures (build c_reference once per flavour per session, a local SLURM, temporary
results files, a throw-away grading course) and the markers that say what a test needs.

A test's markers come from the fixtures it uses (:data:`NEEDS`), from the flavour it is
parametrized with, and for end-to-end grading from its file's name (:data:`E2E_FILES`), so that
``-m`` selects what a developer expects: ``-m mpi`` every test that builds and runs the C code,
``-m "not slurm"`` none that needs the local SLURM, and ``make test-quick`` the unit and contract
tests (``QUICK`` in the Makefile). The markers are declared in pyproject.toml.
"""

import fcntl
import fnmatch
import os
import shutil
import subprocess
import time
from pathlib import Path, PurePath

import pytest
from course import Course

from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS, FLAVOURS, OPENMPI_PMIX_ENV

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


@pytest.fixture
def grading_course(tmp_path):
    """A throw-away nbgrader course (``tests/course.py``) graded through ``scripts/grade.sh``: a
    test that uses it grades end to end and is marked ``e2e``."""
    return Course(tmp_path)


#: What a test needs, told by a fixture it uses (directly or through another fixture): the
#: marker it gets. A new fixture that needs one of these things gets its line here.
NEEDS = {
    "built_flavour": "mpi",  # builds c_reference and runs its programs
    "local_slurm": "slurm",  # the shared local SLURM (scripts/local-slurm.sh)
    "two_socket_slurm": "slurm",  # tests/test_slurm_placement.py's private SLURM
    "image": "image",  # builds an Apptainer image (tests/test_containers.py)
    "jupyter_lab": "browser",  # JupyterLab in headless Chromium (tests/test_browser.py)
    "grading_course": "e2e",  # grades a submission end to end
    "course": "e2e",  # tests/test_exchange.py: a course of Unix users, hand-in to feedback
}
#: Files that grade end to end without the ``grading_course`` fixture: by the naming scheme, a
#: ``test_grade_labN.py`` grades lab N end to end; the cheating suites grade a submission per
#: technique.
E2E_FILES = ("test_grade_lab*.py", "test_cheating.py")


#: Programs whose launch means a test needs more than Python: the marker such a test carries.
#: Under ``make test-quick`` (``MPILAB_TEST_LAUNCHES=fail``) a test that launches one of these
#: without its marker fails and says which marker or fixture it needs, so the quick loop stays
#: quick and ``-m`` stays true; ``MPILAB_TEST_LAUNCHES=record:FILE`` writes every such launch to
#: FILE instead (``node id<TAB>program`` a line), to find what a test file needs.
LAUNCHES = {
    **dict.fromkeys(("mpirun", "mpiexec", "smpirun", "mpicc", "smpicc", "make"), "mpi"),
    **dict.fromkeys(("srun", "sbatch", "salloc"), "slurm"),
    "apptainer": "image",
    **dict.fromkeys(("nbgrader", "jupyter", "ipykernel_launcher"), "nbgrader"),
    "chromium": "browser",
}


def launched(argv):
    """The programs of :data:`LAUNCHES` in a command line (``mpirun.openmpi`` is ``mpirun``;
    a launcher, ``python -m``, the sandbox's wrapper or a ``-c`` shell command before them), and
    any program of ``c_reference/build/`` (collbench, pingpong, the checkers: MPI programs, which
    start as singletons without mpirun), as ``{program: marker}``."""
    words = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
    build = os.path.join(paths.c_reference_dir(), "build", "")
    found = {}
    for word in words:
        for token in os.fsdecode(word).split():
            name = PurePath(token).name.split(".")[0]
            if name in LAUNCHES:
                found.setdefault(name, LAUNCHES[name])
            elif os.path.abspath(token).startswith(build):
                found.setdefault(PurePath(token).name, "mpi")
    return found


#: The test being run (setup, call, teardown), to whom a launch is charged: a launch in a module
#: or session fixture's setup is the first test's that needs it.
_RUNNING = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _RUNNING["item"] = item
    try:
        yield
    finally:
        _RUNNING.pop("item", None)


def _watch(mode, original):
    """``subprocess.Popen.__init__`` that checks (or records) each launch of :data:`LAUNCHES`
    against the markers of the test running; launches outside a test are not checked."""

    def watched(self, args, *rest, **kw):
        item = _RUNNING.get("item")
        for program, marker in launched(args).items() if item is not None else ():
            if mode.startswith("record:"):
                with open(mode[len("record:") :], "a") as f:
                    f.write(f"{item.nodeid}\t{program}\n")
            elif item.get_closest_marker(marker) is None:
                pytest.fail(
                    f"{item.nodeid} launches {program} but is not marked "
                    f"{marker}: use the fixture that says so (tests/conftest.py NEEDS) "
                    f"or mark it @pytest.mark.{marker}",
                    pytrace=False,
                )
        original(self, args, *rest, **kw)

    return watched


def pytest_configure(config):
    """Watch every launch of the session (fixtures of any scope too) when MPILAB_TEST_LAUNCHES
    asks for it (see :data:`LAUNCHES`)."""
    mode = os.environ.get("MPILAB_TEST_LAUNCHES", "")
    if mode and not hasattr(subprocess.Popen.__init__, "mpilab_original"):
        original = subprocess.Popen.__init__
        subprocess.Popen.__init__ = _watch(mode, original)
        subprocess.Popen.__init__.mpilab_original = original


def pytest_unconfigure(config):
    original = getattr(subprocess.Popen.__init__, "mpilab_original", None)
    if original is not None:
        subprocess.Popen.__init__ = original


def needs(item):
    """The markers of :data:`NEEDS`, :data:`E2E_FILES` and a ``flavour`` parameter for ``item``."""
    found = {NEEDS[f] for f in getattr(item, "fixturenames", ()) if f in NEEDS}
    if any(fnmatch.fnmatch(item.path.name, pattern) for pattern in E2E_FILES):
        found.add("e2e")
    flavour = getattr(getattr(item, "callspec", None), "params", {}).get("flavour")
    if flavour in FLAVOURS:  # parametrized over the flavours: runs that MPI
        found.add("mpi")
        if flavour == "smpi":
            found.add("smpi")
    return found


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
    "test_batch.py",
    "test_cheating.py::TestLab3",
    "test_grade_lab3.py",
    "test_grade_lab6.py",
    "test_cheating.py::TestLab0",
    "test_cheating.py::TestLab1",
    "test_cheating.py::TestLab4",
    "test_cheating.py::TestLab6",
    "test_cheating.py::TestLab5",
    "test_grade_lab0.py",
    "test_sandbox.py",
    "test_grade_lab1.py",
    "test_exchange.py",
    "test_intake.py",
    "test_grade_lab4.py",
    "test_grade_lab5.py",
    "test_browser.py",
    "test_autograde.py",
)


def _group(item):
    """The file, or file::class, that xdist's loadscope hands out whole."""
    cls = getattr(item, "cls", None)
    return f"{item.path.name}::{cls.__name__}" if cls else item.path.name


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these markers
def pytest_collection_modifyitems(items):
    for item in items:
        for marker in sorted(needs(item)):
            item.add_marker(marker)
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
