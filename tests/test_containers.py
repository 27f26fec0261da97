"""The kit's Apptainer images, built and run with the real Apptainer.

The session fixture ``image`` builds an image with ``scripts/build-image.sh`` the first time a
test asks for it (the system layer, the student image on it, the instructor image on that) into
``build/images/``; the script keeps a layer whose inputs have not changed, so a second run on the
same machine reuses them. Every test that needs an image is in this file, so one pytest-xdist
worker builds them. The build times and sizes go to ``test-output/containers.txt`` (printed at
the end of ``make test``).

``make test`` builds and tests one image, the Open MPI student image (the one students use);
the tests of the other three (MPICH, the instructor variants) are marked ``all_images`` and
run with ``make test-images``: each image adds minutes of building (containers/README.md has
the times), more than CI's 45 minutes leave room for.

Without ``apptainer`` these tests skip, naming the reason, except where the vendored source
is next to the repository (CI, the developers' machines): there a missing apptainer fails.
As root on a VM without CAP_SYS_RESOURCE, exec/run/test need ``--no-privs``
(``APPTAINER_NO_PRIVS=1``, set here); builds must not have it.
"""

import csv
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from mpilab import __version__
from mpilab.cluster import slurm
from mpilab.core.paths import repo_root
from mpilab.grade import release
from mpilab.measure import launch, osu

REPO = repo_root()
VENDOR = REPO.parent / "shared" / "vendor"
OSU_TARBALL = VENDOR / "osu-micro-benchmarks-7.4.tar.gz"
IMAGES = REPO / "build" / "images"
SUMMARY = REPO / "test-output" / "containers.txt"
LOGS = REPO / "test-output" / "images"
FLAVOURS = ("openmpi", "mpich")
VARIANTS = ("student", "instructor")
#: exec/run/test as root here need --no-privs (../shared/vendor/README.md); harmless otherwise.
RUN_ENV = dict(
    os.environ, APPTAINER_NO_PRIVS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
)
HOST_MPIRUN = {"openmpi": ["mpirun.openmpi", "--oversubscribe"], "mpich": ["mpirun.mpich"]}
#: The image `make test` builds and tests; the others are marked all_images (`make test-images`).
DEFAULT_IMAGE = ("openmpi", "student")
ALL_IMAGES = pytest.mark.all_images


def images_of(flavours=FLAVOURS, variants=("student",)):
    """(flavour, variant) parameters, all but DEFAULT_IMAGE marked all_images."""
    return [
        pytest.param(f, v, id=f"{f}-{v}", marks=() if (f, v) == DEFAULT_IMAGE else ALL_IMAGES)
        for v in variants
        for f in flavours
    ]


def require_apptainer():
    if shutil.which("apptainer"):
        return
    if (VENDOR / "apptainer-1.5.3-vendored.tar.gz").is_file():
        pytest.fail(
            f"apptainer is not installed, but its source is in {VENDOR}: run "
            "scripts/install-apptainer.sh as root (.ci/run does)"
        )
    pytest.skip("apptainer is not installed (containers/README.md says how to get it)")


def fail_with_log_tail(what, returncode, log, lines=40):
    """Fail the test naming the command and its exit code, with the last lines of its log."""
    tail = "\n".join(Path(log).read_text(errors="replace").splitlines()[-lines:])
    pytest.fail(f"{what} exited {returncode}; the last {lines} lines of {log}:\n{tail}", pytrace=False)


def run_logged(argv, log, timeout=3600, **kw):
    """Run a long command with its output in ``log``; on failure, fail with the log's end."""
    with open(log, "w") as fh:
        proc = subprocess.run(
            [str(a) for a in argv], stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, **kw
        )
    if proc.returncode != 0:
        fail_with_log_tail(" ".join(map(str, argv)), proc.returncode, log)
    return Path(log).read_text()


def run(argv, timeout=600, check=True, **kw):
    """Run a command with RUN_ENV; on failure, fail the test with its output."""
    kw.setdefault("env", RUN_ENV)
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, argv))} exited {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


LAYER_LINE = re.compile(r"^build-image: (?:built (\S+) in (\d+) s|(\S+) is up to date)", re.M)


def build_image(flavour, variant):
    """scripts/build-image.sh FLAVOUR VARIANT; returns the image and, for each layer it built
    or found up to date, {name: (seconds or None when reused, size in MB)}."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{flavour}-{variant}.log"
    env = dict(os.environ, MPILAB_IMAGE_DIR=str(IMAGES))
    if OSU_TARBALL.is_file():
        env["OSU_SOURCE"] = str(OSU_TARBALL)  # else the definition's default URL
    text = run_logged(["bash", REPO / "scripts" / "build-image.sh", flavour, variant], log, env=env)
    layers = {}
    for built, seconds, reused in LAYER_LINE.findall(text):
        path = Path(built or reused)
        layers[path.name] = (int(seconds) if built else None, path.stat().st_size / 2**20)
    name = f"mpilab-{flavour}{'-instructor' if variant == 'instructor' else ''}.sif"
    assert name in layers, text[-2000:]
    return IMAGES / name, layers


@pytest.fixture(scope="session")
def image():
    """``image(flavour, variant) -> Path``: builds (or reuses) that image the first time a test
    of this session asks for it, and rewrites the summary of what was built."""
    require_apptainer()
    started, built, layers, failed = time.strftime("%Y-%m-%d %H:%M"), {}, {}, {}
    version = run(["apptainer", "--version"]).stdout.strip()

    def get(flavour, variant):
        if (flavour, variant) in failed:
            # one build a session: a failed one is not tried again by every test that needs it
            pytest.fail(
                f"the {flavour} {variant} image did not build earlier in this session: "
                f"{failed[(flavour, variant)]}",
                pytrace=False,
            )
        if (flavour, variant) not in built:
            t0 = time.monotonic()
            try:
                built[(flavour, variant)], new = build_image(flavour, variant)
            except (pytest.fail.Exception, subprocess.TimeoutExpired, AssertionError) as exc:
                failed[(flavour, variant)] = str(exc)
                raise
            layers.update({k: v for k, v in new.items() if k not in layers or v[0] is not None})
            lines = [
                f"Apptainer images, {started}, {version}; {flavour} {variant} (with the layers "
                f"below it) in {time.monotonic() - t0:.0f} s",
                f"{'image':34} {'built in s':>10} {'SIF size':>9}",
            ]
            lines += [
                f"{name:34} {'reused' if seconds is None else seconds:>10} {size:7.0f}MB"
                for name, (seconds, size) in layers.items()
            ]
            SUMMARY.parent.mkdir(parents=True, exist_ok=True)
            SUMMARY.write_text("\n".join(lines) + "\n")
        return built[(flavour, variant)]

    return get


def labels(image):
    proc = run(["apptainer", "inspect", "--json", "--labels", image])
    data = json.loads(proc.stdout)
    return data.get("data", {}).get("attributes", {}).get("labels", data)


def host_mpi_version(flavour):
    if flavour == "openmpi":
        version = launch.ompi_version(run(["mpirun.openmpi", "--version"]).stdout)
        return ".".join(map(str, version))
    return re.search(r"MPICH Version:\s*(\S+)", run(["mpichversion"]).stdout).group(1)


# ----------------------------------------------------------------------------- build and %test


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("flavour, variant", images_of(variants=VARIANTS))
def test_test_section_passes_and_labels_name_what_is_inside(image, flavour, variant):
    """`apptainer test` reruns %test; the labels name the host's Debian MPI (the images install
    the same packages), the kit's version, the variant and OSU 7.4."""
    sif = image(flavour, variant)
    proc = run(["apptainer", "test", sif], timeout=900)
    assert f"mpilab {flavour} {variant} image: test passed" in proc.stdout
    if (REPO / "build" / "labextension" / "mpilab-saved-check" / "package.json").is_file():
        # the host built the kit's JupyterLab extension: %test found it enabled in the image
        assert "no mpilab-saved-check extension" not in proc.stdout
    lab = labels(sif)
    assert lab["org.mpilab.flavour"] == flavour and lab["org.mpilab.variant"] == variant
    assert lab["org.mpilab.mpi.version"] == host_mpi_version(flavour)
    assert lab["org.mpilab.kit.version"] == __version__
    assert lab["org.mpilab.osu.version"] == "7.4"
    # A second build with the same inputs reuses every layer (the cache a second `make test` uses).
    again, layers = build_image(flavour, variant)
    assert again == sif
    names = [f"mpilab-{flavour}-base.sif", f"mpilab-{flavour}.sif", f"mpilab-{flavour}-instructor.sif"]
    assert {name: seconds for name, (seconds, _) in layers.items()} == dict.fromkeys(
        names[: 3 if variant == "instructor" else 2]
    )


def repo_files(*paths):
    """Files git tracks or would add under ``paths`` (what scripts/build-image.sh stages)."""
    out = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            *paths,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return {f for f in out.stdout.split("\0") if f and (os.path.lexists(REPO / f))}


def student_tree():
    """The student's tree, as scripts/build-image.sh stages it: the files under $STUDENT_TREE,
    else the student release (`make student-release`, :mod:`mpilab.grade.release`)."""
    if os.environ.get("STUDENT_TREE"):
        root = Path(os.environ["STUDENT_TREE"])
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    with tempfile.TemporaryDirectory() as tmp:
        return {str(f) for f in release.build(Path(tmp) / "student")} | {"RELEASE.txt"}


def image_tree(image):
    proc = run(
        [
            "apptainer",
            "exec",
            image,
            "find",
            "/opt/mpilab",
            "(",
            "-type",
            "f",
            "-o",
            "-type",
            "l",
            ")",
            "-printf",
            "%P\\n",
        ]
    )
    return set(proc.stdout.split())


@pytest.mark.slow
@pytest.mark.parametrize("flavour, variant", images_of())
def test_student_image_holds_the_student_tree_plus_the_built_c_code(image, flavour, variant):
    student, built_here = student_tree(), {"c_reference/build/"}
    have = image_tree(image(flavour, variant))
    assert not student - have, f"missing from the student image: {sorted(student - have)[:20]}"
    extra = have - student
    assert extra and all(f.startswith(tuple(built_here)) for f in extra), sorted(extra)[:20]
    for prog in (f"c_reference/build/{flavour}/collbench", "c_reference/build/smpi/collbench"):
        assert prog in extra
    assert not any(f.startswith(("solutions/", "grader/")) for f in have)


@pytest.mark.slow
@pytest.mark.parametrize("flavour, variant", images_of(variants=("instructor",)))
def test_instructor_image_adds_solutions_grader_and_its_app(image, flavour, variant):
    student, instructor = image(flavour, "student"), image(flavour, variant)
    have, inst = image_tree(student), image_tree(instructor)
    assert inst - have == repo_files("solutions", "grader")
    assert have <= inst
    assert "nbgrader" in run(["apptainer", "run", "--app", "grader", instructor, "--help"]).stdout.lower()


# ----------------------------------------------------------------------------- hybrid MPI


def collbench_in(flavour):
    return f"/opt/mpilab/c_reference/build/{flavour}"


@pytest.mark.slow
@pytest.mark.parametrize("flavour, variant", images_of())
def test_hybrid_launch_prints_correct_allgather_results(image, flavour, variant):
    """The host's launcher (Open MPI's mpirun, MPICH's hydra) starts one container per rank."""
    sif = image(flavour, variant)
    host = HOST_MPIRUN[flavour]
    proc = run(
        [*host, "-np", "2", "apptainer", "exec", sif, f"{collbench_in(flavour)}/check_allgather", "--quick"]
    )
    passed, failed = map(int, re.search(r"(\d+) passed, (\d+) failed", proc.stdout).groups())
    assert passed > 100 and failed == 0
    algos = json.loads(
        run(["apptainer", "exec", sif, f"{collbench_in(flavour)}/collbench", "--list", "--json"]).stdout
    )["algorithms"]
    for algo in [a["name"] for a in algos] + ["native"]:
        proc = run(
            [
                *host,
                "-np",
                "2",
                "apptainer",
                "exec",
                sif,
                f"{collbench_in(flavour)}/collbench",
                "--check",
                "--algo",
                algo,
                "-m",
                "8:64K",
                "--iters",
                "3",
                "--warmup",
                "1",
            ]
        )
        assert f"# algorithm: {algo}" in proc.stdout and "# nprocs: 2" in proc.stdout
        library = "Open MPI v4" if flavour == "openmpi" else "MPICH Version:"
        assert library in proc.stdout  # the image's MPI, seen by the program
        rows = [ln for ln in proc.stdout.splitlines() if re.match(r"^\d+,", ln)]
        assert [int(r.split(",")[0]) for r in rows] == [8 << k for k in range(14)]


@pytest.mark.slow
@pytest.mark.parametrize("flavour, variant", images_of())
def test_osu_runs_in_the_image_with_a_forced_algorithm(image, flavour, variant, tmp_path):
    """OSU 7.4, built against the image's MPI, run as seed 000 ran it, parsed by mpilab.measure.osu."""
    sif = image(flavour, variant)
    found = run(
        [
            "apptainer",
            "exec",
            sif,
            "python",
            "-c",
            "import json; from mpilab.measure.osu import osu_programs; print(json.dumps(osu_programs()))",
        ]
    )
    programs = json.loads(found.stdout)
    assert programs == {p: f"/opt/osu/bin/{p}" for p in osu.OSU_PROGRAMS}
    host = HOST_MPIRUN[flavour]
    if flavour == "openmpi":
        force = [
            "--mca",
            "coll_tuned_use_dynamic_rules",
            "1",
            "--mca",
            "coll_tuned_bcast_algorithm",
            "3",
            "--mca",
            "mpi_show_mca_params",
            "enviro",
        ]
    else:
        force = [
            "-genv",
            "MPIR_CVAR_DEVICE_COLLECTIVES",
            "none",
            "-genv",
            "MPIR_CVAR_COLLECTIVE_FALLBACK",
            "error",
            "-genv",
            "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
            "binomial",
        ]
    proc = run(
        [
            *host,
            "-np",
            "2",
            *force,
            "apptainer",
            "exec",
            sif,
            "osu_bcast",
            "-m",
            "1024:4096",
            "-i",
            "20",
            "-x",
            "2",
            "-f",
        ]
    )
    out = tmp_path / "bcast_np2_osu.txt"
    out.write_text(proc.stdout)
    parsed = osu.parse(out)
    assert parsed["collective"] == "bcast" and parsed["version"] == "v7.4"
    assert [p["bytes"] for p in parsed["points"]] == [1024, 2048, 4096]
    assert all(p["avg_us"] > 0 and p["iterations"] == 20 for p in parsed["points"])
    if flavour == "openmpi":  # each rank echoes what its Open MPI (the image's) read
        assert "coll_tuned_bcast_algorithm=pipeline" in proc.stdout + proc.stderr
    else:  # an inapplicable forced algorithm fails loudly, not silently
        bad = run(
            [
                *host,
                "-np",
                "3",
                "-genv",
                "MPIR_CVAR_DEVICE_COLLECTIVES",
                "none",
                "-genv",
                "MPIR_CVAR_COLLECTIVE_FALLBACK",
                "error",
                "-genv",
                "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM",
                "recursive_doubling",
                "apptainer",
                "exec",
                sif,
                "osu_allgather",
                "-m",
                "64:64",
                "-i",
                "2",
            ],
            check=False,
            timeout=120,
        )
        assert bad.returncode != 0
    for prog, title in (("osu_reduce", "reduce"), ("osu_allgather", "allgather"), ("osu_latency", "pt2pt")):
        proc = run([*host, "-np", "2", "apptainer", "exec", sif, prog, "-m", "64:64", "-i", "10", "-x", "2"])
        out = tmp_path / f"{prog}.txt"
        out.write_text(proc.stdout)
        assert osu.parse(out)["collective"] == title


# ----------------------------------------------------------------------------- MPI versions


@pytest.fixture(scope="session")
def mismatched_image(image, tmp_path_factory):
    """The Open MPI student image relabelled as Open MPI 5.0.3 (a localimage build to a
    sandbox: the MPI inside is still the host's 4.1.4, only the label disagrees)."""
    tmp = tmp_path_factory.mktemp("mismatch")
    (tmp / "mismatch.def").write_text(
        f"Bootstrap: localimage\nFrom: {image(*DEFAULT_IMAGE)}\n\n%labels\n    org.mpilab.mpi.version 5.0.3\n"
    )
    sandbox = tmp / "mpilab-openmpi-5.0.3"
    env = {k: v for k, v in os.environ.items() if k != "APPTAINER_NO_PRIVS"}
    # --force: without it Apptainer keeps the base image's value of a label the new one repeats
    run(
        [
            "apptainer",
            "build",
            "--fakeroot",
            "--force",
            "--notest",
            "--sandbox",
            sandbox,
            tmp / "mismatch.def",
        ],
        env=env,
        timeout=900,
    )
    assert labels(sandbox)["org.mpilab.mpi.version"] == "5.0.3"
    return sandbox


@pytest.mark.slow
def test_mpi_version_mismatch_gives_the_promised_warning(image, mismatched_image, monkeypatch):
    """mpilab.measure.launch's apptainer launcher and `mpilab image host-check` read the real image's
    label and name both versions; a matching image gives no warning."""
    monkeypatch.setenv("APPTAINER_NO_PRIVS", "1")
    host = host_mpi_version("openmpi")
    lau = launch.get_launcher("apptainer", image=mismatched_image, inner="openmpi", cores=2)
    bench = f"{collbench_in('openmpi')}/collbench"
    with pytest.warns(UserWarning) as caught:
        out = lau.run(bench, ["-m", "32:32", "--iters", "5", "--format", "csv"], 2).stdout
    (w,) = [w for w in caught if "major version" in str(w.message)]
    assert str(w.message).startswith(
        f"{mismatched_image}: host Open MPI {host} and the image's Open MPI 5.0.3 differ in major version"
    )
    assert "# nprocs: 2" in out  # it warns, then starts (the MPI inside is 4.1)
    good = launch.get_launcher("apptainer", image=image(*DEFAULT_IMAGE), inner="openmpi", cores=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "# nprocs: 2" in good.run(bench, ["-m", "32:32", "--iters", "5"], 2).stdout
    cli = [sys.executable, "-m", "mpilab.cli", "image", "host-check"]
    bad = run([*cli, mismatched_image, "--mpirun", "mpirun.openmpi"], check=False)
    assert bad.returncode == 1 and f"host Open MPI {host} and the image's Open MPI 5.0.3" in bad.stderr
    ok = run([*cli, image(*DEFAULT_IMAGE), "--mpirun", "mpirun.openmpi"])
    assert f"agree (image {host})" in ok.stdout


@pytest.mark.slow
@ALL_IMAGES
def test_host_check_refuses_an_mpich_image(image):
    cli = [sys.executable, "-m", "mpilab.cli", "image", "host-check"]
    mpich = run([*cli, image("mpich", "student")], check=False)
    assert mpich.returncode == 2 and "no Open MPI version in its labels" in mpich.stderr


@pytest.mark.parametrize(
    "host, image, warns",
    [
        ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "4.1.4", False),
        ("mpirun (Open MPI) 4.0.3", "4.1.4", False),
        ("mpirun.openmpi (OpenRTE) 4.1.4", "5.0.3", True),
        ("mpirun (Open MPI) 5.0.3", "4.1.4", True),
        ("HYDRA build details:\n    Version: 4.0.2", "4.1.4", False),
    ],
)
def test_host_image_open_mpi_major_mismatch(host, image, warns):
    msg = launch.host_image_mismatch(host, image)
    if warns:
        assert (
            "5.0.3" in msg
            and "4.1.4" in msg
            and msg.index("host") < msg.index("image")
            and "major version" in msg
        )
    else:
        assert msg is None


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_host_check_cli_with_a_version():
    if shutil.which("mpirun.openmpi") is None:
        pytest.skip("Open MPI not installed")
    cli = [sys.executable, "-m", "mpilab.cli", "image", "host-check"]
    r = run([*cli, "9.9.9", "--mpirun", "mpirun.openmpi"], check=False)
    assert r.returncode == 1 and "9.9.9" in r.stderr and "differ in major version" in r.stderr
    r = run([*cli, "4.1.9", "--mpirun", "mpirun.openmpi"])
    assert "agree (image 4.1.9)" in r.stdout


# ----------------------------------------------------------------------------- SLURM


@pytest.mark.slow
@pytest.mark.parametrize("flavour, image_key", [*images_of(), ("openmpi", "mismatched")])
def test_sweep_apptainer_template_runs_under_real_slurm(
    image, local_slurm, tmp_path, flavour, image_key, request
):
    """The hybrid model under the local SLURM: srun --mpi=pmix (Open MPI) or pmi2 (MPICH) starts
    one `apptainer exec` per rank; the points land in the results table; with an image labelled
    Open MPI 5.0.3 the job prints both versions and warns before srun."""
    image = (
        request.getfixturevalue("mismatched_image")
        if image_key == "mismatched"
        else image(flavour, image_key)
    )
    run_dir = tmp_path / "run"
    script = slurm.render_to_dir(
        "sweep-apptainer",
        "local",
        "local",
        run_dir,
        flavour=flavour,
        image=str(image),
        algos="native",
        nprocs="2",
        sizes="32:1K",
        iters=5,
        time="5",
    )
    assert f"srun --mpi={'pmix' if flavour == 'openmpi' else 'pmi2'}" in script.read_text()
    job = slurm.submit(script, env={"APPTAINER_NO_PRIVS": "1"})
    states = slurm.wait(job, timeout=300)
    report = slurm.collect(run_dir)
    assert [s.state for s in states] == ["COMPLETED"], report.summary()
    assert not report.failed
    with open(run_dir / "results.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [(r["launcher"], r["nprocs"], r["bytes"], r["flavour"]) for r in got] == [
        ("apptainer", "2", str(32 << k), flavour) for k in range(6)
    ]
    out = (run_dir / "logs" / f"mpilab-sweep-apptainer_{job}_0.out").read_text()
    err = (run_dir / "logs" / f"mpilab-sweep-apptainer_{job}_0.err").read_text()
    if flavour == "openmpi":
        host = host_mpi_version("openmpi")
        want = "5.0.3" if image_key == "mismatched" else host
        assert f"Open MPI: host {host} (mpirun --version), image {want} ({image})" in out
        assert out.index("Open MPI: host") < out.index("run: srun")
        warned = f"mpilab: warning: host Open MPI {host} and the image's Open MPI 5.0.3 differ" in err
        assert warned == (image_key == "mismatched"), err


# ----------------------------------------------------------------------------- JupyterLab


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_jupyterlab_from_the_image_runs_a_lab_cell_in_chromium(image, tmp_path):
    """`apptainer run IMAGE` copies the labs to a writable folder and serves them; Chromium
    opens lab 0 there and runs its cells, whose kernel is the image's Python."""
    import test_browser

    if test_browser.CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/packages.txt)")
    port, token = _free_port(), secrets.token_hex(16)
    labs = tmp_path / "my-labs"
    env = dict(
        RUN_ENV,
        JUPYTER_TOKEN=token,
        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
    )
    log = open(tmp_path / "jupyter.log", "w")
    proc = subprocess.Popen(
        ["apptainer", "run", str(image(*DEFAULT_IMAGE)), "--port", str(port), "--dir", str(labs)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "JupyterLab from the image did not answer:\n"
                        + (tmp_path / "jupyter.log").read_text()[-3000:]
                    )
                time.sleep(0.5)
        assert (labs / "lab0" / "lab0.ipynb").is_file()
        text = test_browser.run_lab0_cells(url, token, "lab0-in-image.png")
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        log.close()
    for line in ("openmpi    ok", "smpi       ok", "jupyter    ok"):
        assert line in text, f"{line!r} not in the doctor report the page shows:\n{text}"
    assert "copied the labs to" in (tmp_path / "jupyter.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("flavour, variant", images_of())
def test_apps_and_runscript_answer(image, flavour, variant):
    student = image(flavour, variant)
    out = run(["apptainer", "run", "--app", "collbench", student, "--help"]).stdout
    assert out.startswith("usage: collbench")
    assert run(["apptainer", "run", "--app", "mpilab", student, "--help"]).stdout.startswith("usage: mpilab")
    bad = run(["apptainer", "run", student, "--prot", "1"], check=False)
    assert bad.returncode == 2 and "unknown argument '--prot'" in bad.stderr


# ----------------------------------------------------------------------------- the scripts


def test_build_image_script_refuses_bad_arguments_and_says_what_to_install(tmp_path):
    script = ["bash", str(REPO / "scripts" / "build-image.sh")]
    r = run([*script, "lam"], check=False)
    assert r.returncode == 2 and "unknown flavour 'lam'; valid: mpich, openmpi" in r.stderr
    r = run([*script, "openmpi", "teacher"], check=False)
    assert r.returncode == 2 and "unknown variant 'teacher'; valid: instructor, student" in r.stderr
    r = run([*script, "openmpi"], check=False, env=dict(os.environ, STUDENT_TREE=str(tmp_path)))
    assert r.returncode == 2 and f"STUDENT_TREE '{tmp_path}' is not a student tree" in r.stderr
    # A PATH without apptainer (what a user's machine has before installing it).
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "dirname", "cat"):
        (bare / tool).symlink_to(shutil.which(tool))
    r = run([*script, "openmpi"], check=False, env=dict(os.environ, PATH=str(bare)))
    assert (
        r.returncode == 3 and "apptainer is not installed" in r.stderr and "install-apptainer.sh" in r.stderr
    )
    if shutil.which("apptainer"):
        r = run(
            [*script, "openmpi"],
            check=False,
            env=dict(os.environ, OSU_SOURCE=str(tmp_path / "osu.tgz"), MPILAB_IMAGE_DIR=str(tmp_path)),
        )
        assert r.returncode == 2 and f"OSU_SOURCE '{tmp_path / 'osu.tgz'}' is neither a URL" in r.stderr


@pytest.mark.image  # launches it (tests/conftest.py LAUNCHES)
def test_a_failing_build_fails_the_test_with_the_end_of_its_log(tmp_path):
    """What the image fixture does when a build fails: the test fails with the command, its exit
    code and the last lines of the build log (here Apptainer's own error, for a real build of a
    definition file whose base image does not exist), not with an exit code alone."""
    require_apptainer()
    missing = tmp_path / "no-such-base.sif"
    (tmp_path / "broken.def").write_text(f"Bootstrap: localimage\nFrom: {missing}\n")
    env = {k: v for k, v in os.environ.items() if k != "APPTAINER_NO_PRIVS"}
    with pytest.raises(pytest.fail.Exception) as failed:
        run_logged(
            ["apptainer", "build", "--fakeroot", tmp_path / "broken.sif", tmp_path / "broken.def"],
            tmp_path / "build.log",
            timeout=300,
            env=env,
        )
    msg = str(failed.value)
    assert msg.startswith(f"apptainer build --fakeroot {tmp_path / 'broken.sif'}")
    assert re.search(r" exited [1-9]\d*; the last 40 lines of .*build\.log:", msg)
    last = (tmp_path / "build.log").read_text().strip().splitlines()[-1]
    assert "FATAL" in last and msg.rstrip().endswith(last.strip())


def test_install_apptainer_script_without_a_source_says_where_to_get_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("install-apptainer.sh needs root")
    env = dict(
        os.environ, MPILAB_VENDOR=str(tmp_path / "empty"), MPILAB_APPTAINER_PREFIX=str(tmp_path / "none")
    )
    r = run([str(REPO / "scripts" / "install-apptainer.sh")], check=False, env=env)
    assert r.returncode == 3
    assert f"{tmp_path / 'empty'}/apptainer-1.5.3-vendored.tar.gz does not exist" in r.stderr
    assert "apptainer/releases" in r.stderr
    if shutil.which("apptainer"):  # installed: a second run is a quick no-op
        t0 = time.monotonic()
        r = run([str(REPO / "scripts" / "install-apptainer.sh")])
        assert "already installed" in r.stdout and time.monotonic() - t0 < 10
