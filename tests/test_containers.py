"""Tests of the Apptainer definition files and their checker (mpilab.cluster.apptainer_check).

The slow test builds both images for real: in a debootstrap chroot here (Apptainer is not
packaged for bookworm), or with ``apptainer build`` + ``apptainer test`` where it is installed.
"""

import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from mpilab.cluster import apptainer_check as ac
from mpilab.core.errors import LaunchError, ParseError, UsageError
from mpilab.measure import launch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFS = {f: os.path.join(REPO, "containers", f"mpilab-{f}.def") for f in ("openmpi", "mpich")}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot and mount need root")


def write(tmp_path, text, name="t.def"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def tiny_base(tmp_path):
    """A tarball of a tree holding only /bin/sh, /bin/rm and their libraries: enough to chroot into."""
    tree = tmp_path / "tree"
    for tool in ("/bin/sh", "/bin/rm"):
        exe = os.path.realpath(tool)
        libs = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout.split()
        for f in [exe] + [x for x in libs if x.startswith("/")]:
            dest = tree / f.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)
    (tree / "bin").mkdir(exist_ok=True)
    for tool in ("/bin/sh", "/bin/rm"):
        if not (tree / tool.lstrip("/")).exists():
            shutil.copy2(os.path.realpath(tool), tree / tool.lstrip("/"))
    (tree / "etc").mkdir()
    tarball = tmp_path / "base.tar"
    subprocess.run(["tar", "-C", str(tree), "-cf", str(tarball), "."], check=True)
    return str(tarball)


def variant_tree(tmp_path, dirs=()):
    """A tiny chroot (only /bin/sh) with /opt/mpilab and the given subdirectories of it."""
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", tiny_base(tmp_path)], check=True)
    for d in ("opt/mpilab",) + tuple(f"opt/mpilab/{d}" for d in dirs):
        (root / d).mkdir(parents=True, exist_ok=True)
    ac._script(str(root), "environment.sh", "")
    return str(root)


def test_both_definitions_parse_with_apps_labels_and_variant():
    for flavour, path in DEFS.items():
        d = ac.parse(path)
        assert d.header["bootstrap"] == "debootstrap" and d.header["osversion"] == "bookworm"
        assert d.apps() == ["collbench", "grader", "mpilab"]
        assert d.labels()["org.mpilab.flavour"] == flavour
        assert d.labels()["org.mpilab.variant"] == "student"
        for name in ("files", "environment", "post", "test", "runscript", "help"):
            assert d.section(name) is not None, (flavour, name)
        inst = ac.parse(path, {"VARIANT": "instructor"})
        assert inst.labels()["org.mpilab.variant"] == "instructor"
        assert '"instructor" != instructor' in inst.section("post").body
    assert "btl_vader_single_copy_mechanism=none" in ac.parse(DEFS["openmpi"]).section("environment").body


def test_unknown_section_names_section_and_line(tmp_path):
    path = write(tmp_path, "Bootstrap: debootstrap\n\n%post\n    true\n%postt\n    echo\n")
    with pytest.raises(ParseError, match=r"t\.def:5: unknown section %postt; valid: .*%post"):
        ac.parse(path)


def test_build_arg_without_value_and_bad_build_arg(tmp_path):
    path = write(tmp_path, "Bootstrap: debootstrap\n%post\n    echo {{ FLAVOR }}\n")
    with pytest.raises(ParseError, match=r"t\.def:3: build argument 'FLAVOR' has no value"):
        ac.parse(path)
    assert "echo x" in ac.parse(path, {"FLAVOR": "x"}).section("post").body
    with pytest.raises(UsageError, match="bad --build-arg 'VARIANT'; expected NAME=VALUE"):
        ac.parse_build_args(["VARIANT"])


def test_missing_files_source_names_line(tmp_path):
    (tmp_path / "here.txt").write_text("x")
    path = write(tmp_path, "Bootstrap: debootstrap\n%files\n    here.txt /opt/\n    labs /opt/labs\n")
    with pytest.raises(ParseError, match=r"t\.def:4: %files source 'labs' does not exist"):
        ac.files_entries(ac.parse(path), str(tmp_path))


@needs_root
def test_failing_post_names_line_and_unmounts(tmp_path):
    base = tiny_base(tmp_path)
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "data.txt").write_text("hello")
    path = write(tmp_path, "Bootstrap: debootstrap\n%files\n    data.txt /opt/data.txt\n"
                           "%post\n    echo step one\n    test -d /no/such/dir\n    echo never\n")
    root = str(tmp_path / "root")
    with pytest.raises(LaunchError, match=r"t\.def:6: %post failed \(exit 1\) at 'test -d /no/such/dir'"):
        ac.check(path, context=str(tmp_path / "ctx"), keep=root, base=base, runscript=False)
    with open("/proc/mounts") as fh:
        assert root not in fh.read()
    assert (tmp_path / "root/opt/data.txt").read_text() == "hello"


@needs_root
def test_passing_post_and_test_with_environment(tmp_path):
    base = tiny_base(tmp_path)
    (tmp_path / "ctx").mkdir()
    path = write(tmp_path, "Bootstrap: debootstrap\n%arguments\n    WHO=kit\n%environment\n"
                           "    export GREETING=hi\n%post\n    echo {{ WHO }} > /who\n"
                           "%test\n    test \"$GREETING\" = hi\n    test \"$(read x < /who; echo $x)\" = kit\n")
    res = ac.check(path, context=str(tmp_path / "ctx"), base=base, runscript=False)
    assert res["cached_base"] and res["size"] != "?"


@needs_root
@pytest.mark.parametrize("flavour", sorted(DEFS))
@pytest.mark.parametrize("variant, present, message", [
    ("student", ("labs", "solutions"), "student image contains solutions/"),
    ("student", ("labs", "grader"), "student image contains grader/"),
    ("instructor", ("labs", "solutions"), "instructor image lacks grader/"),
    ("instructor", ("labs",), "instructor image lacks solutions/"),
])
def test_test_section_checks_the_variant_first(tmp_path, flavour, variant, present, message):
    """The real %test of each definition refuses a student tree with solutions/ or grader/
    and an instructor tree without both; the check comes first, so it runs on a tree that
    holds nothing but a shell."""
    defn = ac.parse(DEFS[flavour], {"VARIANT": variant})
    root = variant_tree(tmp_path, present)
    with pytest.raises(LaunchError, match=rf"%test failed \(exit 1\)(.|\n)*{message}"):
        ac.run_section(root, defn, defn.section("test"), with_environment=True, log=lambda m: None)


@needs_root
def test_post_refuses_an_unknown_variant(tmp_path):
    defn = ac.parse(DEFS["openmpi"], {"VARIANT": "teacher"})
    root = variant_tree(tmp_path)
    with pytest.raises(LaunchError, match=r"%post failed(.|\n)*VARIANT=teacher is not a variant; "
                                          r"valid: student, instructor"):
        ac.run_section(root, defn, defn.section("post"), log=lambda m: None)


@needs_root
def test_labels_json_and_apps_as_apptainer_makes_them(tmp_path):
    """labels.json holds %labels and what %post appended to $APPTAINER_LABELS (which wins, as
    in Apptainer) before %test runs; each %apprun runs with --help, and a failing one is named."""
    base = tiny_base(tmp_path)
    (tmp_path / "ctx").mkdir()
    text = ("Bootstrap: debootstrap\n%labels\n    org.x.static 1\n    org.x.both from-labels\n"
            "%post\n    echo 'org.x.dynamic 2' >> \"$APPTAINER_LABELS\"\n"
            "    echo 'org.x.both from-post' >> \"$APPTAINER_LABELS\"\n"
            "%test\n    found=no\n    while read -r line; do\n"
            "        case \"$line\" in *'\"org.x.dynamic\": \"2\"'*) found=yes ;; esac\n"
            "    done < /.singularity.d/labels.json\n    test $found = yes\n"
            "%apprun hello\n    echo \"hello app $*\"\n")
    res = ac.check(write(tmp_path, text), context=str(tmp_path / "ctx"), base=base, runscript=False)
    assert res["labels"] == {"org.x.static": "1", "org.x.both": "from-post", "org.x.dynamic": "2"}
    assert res["app_help"] == {"hello": "hello app --help"}
    bad = write(tmp_path, text + "%apprun broken\n    echo 'no such option' >&2\n    exit 3\n", "bad.def")
    with pytest.raises(LaunchError, match=r"bad\.def:16: %apprun broken: '--help' failed \(exit 3\)"
                                          r"(.|\n)*no such option"):
        ac.check(bad, context=str(tmp_path / "ctx"), base=base, runscript=False)


@needs_root
def test_start_from_a_kept_tree_reruns_files_post_and_test(tmp_path):
    """The cheap instructor check: a second check on the kept tree of the first, with another
    build argument, copies %files again and reruns %post and %test there."""
    base = tiny_base(tmp_path)
    ctx = tmp_path / "ctx"
    (ctx / "solutions").mkdir(parents=True)
    (ctx / "solutions" / "answer.txt").write_text("42")
    path = write(tmp_path, "Bootstrap: debootstrap\n%arguments\n    VARIANT=student\n"
                           "%files\n    solutions /opt/kit/solutions\n"
                           "%post\n    if [ {{ VARIANT }} != instructor ]; then rm -r /opt/kit/solutions; fi\n"
                           "%test\n    if [ {{ VARIANT }} = instructor ]; then test -f /opt/kit/solutions/answer.txt;"
                           " else test ! -e /opt/kit/solutions; fi\n")
    root = str(tmp_path / "kept")
    first = ac.check(path, context=str(ctx), keep=root, base=base, runscript=False)
    assert first["root"] == root and not os.path.exists(os.path.join(root, "opt/kit/solutions"))
    second = ac.check(path, {"VARIANT": "instructor"}, context=str(ctx), start_from=root, runscript=False)
    assert second["cached_base"] and os.path.exists(os.path.join(root, "opt/kit/solutions/answer.txt"))
    with pytest.raises(UsageError, match="not a tree an earlier check kept"):
        ac.check(path, context=str(ctx), start_from=str(tmp_path / "nothing"))


@pytest.mark.parametrize("host, image, warns", [
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "4.1.4", False),
    ("mpirun (Open MPI) 4.0.3", "4.1.4", False),
    ("mpirun.openmpi (OpenRTE) 4.1.4", "5.0.3", True),
    ("mpirun (Open MPI) 5.0.3", "4.1.4", True),
    ("HYDRA build details:\n    Version: 4.0.2", "4.1.4", False),
])
def test_host_image_open_mpi_major_mismatch(host, image, warns):
    msg = launch.host_image_mismatch(host, image)
    if warns:
        assert "5.0.3" in msg and "4.1.4" in msg and msg.index("host") < msg.index("image") and "major version" in msg
    else:
        assert msg is None


def test_warn_if_mismatch_uses_real_host_mpirun():
    if shutil.which("mpirun.openmpi") is None:
        pytest.skip("Open MPI not installed")
    with pytest.warns(UserWarning, match=r"Open MPI 9\.0\.0"):
        assert launch.warn_if_mismatch("9.0.0", "mpirun.openmpi")
    assert launch.warn_if_mismatch("4.1.9", "mpirun.openmpi") is None


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mpilab.cli", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def test_cli_help_and_errors(tmp_path):
    r = run_cli("image", "check", "--help")
    assert r.returncode == 0 and "--build-arg" in r.stdout and "--keep" in r.stdout and "--start-from" in r.stdout
    bad = write(tmp_path, "Bootstrap: debootstrap\n%bogus\n")
    r = run_cli("image", "check", bad)
    assert r.returncode == 2 and "unknown section %bogus" in r.stderr and ":2:" in r.stderr
    r = run_cli("image", "check", DEFS["openmpi"], "--build-arg", "nonsense")
    assert r.returncode == 2 and "bad --build-arg 'nonsense'" in r.stderr
    r = run_cli("image", "host-check", "9.9.9", "--mpirun", "mpirun.openmpi")
    assert r.returncode == 1 and "9.9.9" in r.stderr


def test_build_image_script_says_what_to_install():
    if shutil.which("apptainer"):
        pytest.skip("apptainer is installed: the slow test builds for real")
    r = subprocess.run(["sh", os.path.join(REPO, "scripts/build-image.sh"), "openmpi"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "apptainer is not installed" in r.stderr and "mpilab image check" in r.stderr
    r = subprocess.run(["sh", os.path.join(REPO, "scripts/build-image.sh"), "lam"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown flavour 'lam'; valid: mpich, openmpi" in r.stderr


#: Where the slow test writes the build times and chroot sizes; conftest.py prints it at the
#: end of the run (pytest's terminal summary), so CI's log shows the numbers.
SUMMARY = os.path.join(REPO, "test-output", "containers.txt")


def build_both_variants(flavour, ctx):
    """Build the student image in a chroot, then the instructor variant on the same tree.

    Returns the two results; the tree is removed afterwards.
    """
    log = lambda m: print(f"[{flavour}] {m}", flush=True)   # noqa: E731
    root = tempfile.mkdtemp(prefix=f"mpilab-{flavour}-", dir="/var/tmp")
    try:
        student = ac.check(DEFS[flavour], context=ctx, keep=root, log=log)
        instructor = ac.check(DEFS[flavour], {"VARIANT": "instructor"}, context=ctx,
                              start_from=root, runscript=False, log=log)
        # The student %test on this instructor tree must refuse it.
        with pytest.raises(LaunchError, match="student image contains solutions/"):
            ac.run_tests(root, ac.parse(DEFS[flavour]), log=log)
        return student, instructor
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_summary(results, started):
    lines = [f"container builds, {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}: "
             "mpilab.cluster.apptainer_check in a debootstrap chroot (Apptainer is not installed here)",
             f"{'flavour':8} {'variant':10} {'started from':28} {'%post done s':>12} "
             f"{'+%test,apps s':>13} {'chroot size':>11}"]
    for flavour, (student, instructor) in results.items():
        base = "debootstrap" + (" (cached tarball)" if student["cached_base"] else " bookworm")
        for variant, res, start in (("student", student, base),
                                    ("instructor", instructor, "the student tree")):
            lines.append(f"{flavour:8} {variant:10} {start:28} {res['build_seconds']:12.1f} "
                         f"{res['seconds']:13.1f} {res['size']:>11}")
    os.makedirs(os.path.dirname(SUMMARY), exist_ok=True)
    with open(SUMMARY, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_images_build_and_test(tmp_path):
    """Build both images from scratch; %test passes, every app answers --help, the labels name
    the installed MPI and kit, JupyterLab answers from inside; then the instructor variant.

    The two chroot builds run side by side: most of each is one compiler (mpi4py) or a
    download, so on two cores the pair takes little more than one. The instructor variant is
    checked on the student tree (``start_from``): %files copied again, %post, %test and the
    apps rerun with VARIANT=instructor, without a third and fourth full build.
    """
    ctx = ac.stage_context(REPO, str(tmp_path / "ctx"))
    if shutil.which("apptainer"):
        for flavour in DEFS:
            for variant in ("student", "instructor"):
                sif = ac.build_with_apptainer(DEFS[flavour], {"VARIANT": variant}, context=ctx,
                                              out=str(tmp_path / f"{flavour}-{variant}.sif"))
                assert os.path.exists(sif)
        return
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        pytest.skip("needs root and debootstrap (CI has both)")
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(len(DEFS)) as pool:
        jobs = {f: pool.submit(build_both_variants, f, ctx) for f in DEFS}
    results = {f: job.result() for f, job in jobs.items()}
    print("\n" + write_summary(results, started))
    from mpilab import __version__
    mpi = {"openmpi": "4.1.4", "mpich": "4.0.2"}        # Debian bookworm's, as FACTS.md says
    for flavour, (student, instructor) in results.items():
        assert student["runscript"]["status"] == 200
        assert student["apps"] == ["collbench", "grader", "mpilab"]
        assert student["app_help"]["collbench"].startswith("usage: collbench")
        assert student["app_help"]["mpilab"].startswith("usage: mpilab")
        for res, variant in ((student, "student"), (instructor, "instructor")):
            assert res["labels"]["org.mpilab.variant"] == variant
            assert res["labels"]["org.mpilab.kit.version"] == __version__
            assert res["labels"]["org.mpilab.mpi.version"] == mpi[flavour]
        assert set(instructor["app_help"]) == {"collbench", "grader", "mpilab"}
    with open(SUMMARY) as fh:
        rows = [ln.split() for ln in fh.read().splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [(f, v) for f in DEFS for v in ("student", "instructor")]
    assert all(r[-1][-1] in "KMG" for r in rows)                 # a du size on each row


def test_host_ca_bundle_is_passed_into_the_chroot(tmp_path, monkeypatch):
    bundle = tmp_path / "ca.crt"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_CERT", str(bundle))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    root = tmp_path / "root"
    ac._copy_host_ca(str(root))
    assert (root / ".mpilab-check/host-ca.crt").read_text() == bundle.read_text()
    assert ac._chroot_env()["PIP_CERT"] == "/.mpilab-check/host-ca.crt"
    assert "SSL_CERT_FILE" not in ac._chroot_env()
