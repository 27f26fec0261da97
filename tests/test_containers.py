"""Tests of the Apptainer definition files and their checker (mpilab.apptainer_check).

The slow test builds both images for real: in a debootstrap chroot here (Apptainer is not
packaged for bookworm), or with ``apptainer build`` + ``apptainer test`` where it is installed.
"""

import concurrent.futures
import os
import shutil
import subprocess
import sys

import pytest

from mpilab import apptainer_check as ac
from mpilab.errors import LaunchError, ParseError, UsageError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFS = {f: os.path.join(REPO, "containers", f"mpilab-{f}.def") for f in ("openmpi", "mpich")}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot and mount need root")


def write(tmp_path, text, name="t.def"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def tiny_base(tmp_path):
    """A tarball of a tree holding only /bin/sh and its libraries: enough to chroot into."""
    tree = tmp_path / "tree"
    sh = os.path.realpath("/bin/sh")
    libs = subprocess.run(["ldd", sh], capture_output=True, text=True).stdout.split()
    for f in [sh] + [x for x in libs if x.startswith("/")]:
        dest = tree / f.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    (tree / "bin").mkdir(exist_ok=True)
    if not (tree / "bin/sh").exists():
        shutil.copy2(sh, tree / "bin/sh")
    (tree / "etc").mkdir()
    tarball = tmp_path / "base.tar"
    subprocess.run(["tar", "-C", str(tree), "-cf", str(tarball), "."], check=True)
    return str(tarball)


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


@pytest.mark.parametrize("host, image, warns", [
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "4.1.4", False),
    ("mpirun (Open MPI) 4.0.3", "4.1.4", False),
    ("mpirun.openmpi (OpenRTE) 4.1.4", "5.0.3", True),
    ("mpirun (Open MPI) 5.0.3", "4.1.4", True),
    ("HYDRA build details:\n    Version: 4.0.2", "4.1.4", False),
])
def test_host_image_open_mpi_major_mismatch(host, image, warns):
    msg = ac.host_image_mismatch(host, image)
    if warns:
        assert "5.0.3" in msg and "4.1.4" in msg and msg.index("host") < msg.index("image") and "major version" in msg
    else:
        assert msg is None


def test_warn_if_mismatch_uses_real_host_mpirun():
    if shutil.which("mpirun.openmpi") is None:
        pytest.skip("Open MPI not installed")
    with pytest.warns(UserWarning, match=r"Open MPI 9\.0\.0"):
        assert ac.warn_if_mismatch("9.0.0", "mpirun.openmpi")
    assert ac.warn_if_mismatch("4.1.9", "mpirun.openmpi") is None


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mpilab.cli", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def test_cli_help_and_errors(tmp_path):
    r = run_cli("image", "check", "--help")
    assert r.returncode == 0 and "--build-arg" in r.stdout and "--keep" in r.stdout
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


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_images_build_and_test(tmp_path):
    """Build both images from scratch; %test passes and JupyterLab answers from inside.

    The two chroot builds run side by side: most of each is one compiler (mpi4py) or a
    download, so on two cores the pair takes little more than one.
    """
    ctx = ac.stage_context(REPO, str(tmp_path / "ctx"))
    if shutil.which("apptainer"):
        for flavour in DEFS:
            sif = ac.build_with_apptainer(DEFS[flavour], context=ctx, out=str(tmp_path / f"{flavour}.sif"))
            assert os.path.exists(sif)
        return
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        pytest.skip("needs root and debootstrap (CI has both)")
    with concurrent.futures.ThreadPoolExecutor(len(DEFS)) as pool:
        jobs = {f: pool.submit(ac.check, path, context=ctx, log=lambda m, f=f: print(f"[{f}] {m}", flush=True))
                for f, path in DEFS.items()}
    for flavour, job in jobs.items():
        res = job.result()
        print(f"\n{flavour}: {res}")
        assert res["runscript"]["status"] == 200
        assert res["apps"] == ["collbench", "grader", "mpilab"]


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
