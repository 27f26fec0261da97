"""The sandbox: time limit kills the process group, memory and output caps, scratch dir, no network."""

import concurrent.futures
import hashlib
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpilab.core import paths
from mpilab.core.errors import UsageError
from mpilab.grade import cgroups, outcome, sandbox
from mpilab.simulate import platforms


def test_ok_run_and_output(tmp_path):
    res = sandbox.run([sys.executable, "-c", "print('hi')"], cwd=tmp_path, timeout=60)
    assert res.ok and res.stdout == "hi\n" and res.failure() is None


def test_timeout_kills_the_whole_group(tmp_path):
    # a child that outlives its parent's kill would keep the marker's sleep alive (the marker is
    # this test's own: other tests on the machine may sleep too)
    marker = f"sleep 300.{os.getpid()}"
    res = sandbox.run(["sh", "-c", f"{marker} & {marker}"], cwd=tmp_path, timeout=1)
    assert res.timed_out and res.returncode is None
    assert res.failure() == "timed out after 1 s — a deadlock? check the order of sends and receives"
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left


def test_memory_limit(tmp_path):
    res = sandbox.run(
        [sys.executable, "-c", "x = bytearray(600 * 2**20)"], cwd=tmp_path, timeout=60, memory_mb=300
    )
    assert not res.ok and "MemoryError" in res.stderr


def test_output_cap(tmp_path):
    res = sandbox.run(
        [sys.executable, "-c", "print('x' * 10**6 + 'END')"], cwd=tmp_path, timeout=60, output_cap=1000
    )
    head, cut, tail = res.stdout.split("\n", 2)
    assert head == "x" * 1000 and res.stdout_bytes == 10**6 + 4 and res.output_cut
    assert (
        cut == f"[output cut at 1000 bytes: {10**6 + 4 - 1000 - sandbox.TAIL_BYTES:,} bytes thrown away; "
        "the last ones follow]"
    )
    assert tail.endswith("xxEND\n") and len(tail) == sandbox.TAIL_BYTES
    assert res.ok  # a long output is not a failure by itself


FLOOD = r"""
#include <stdio.h>
int main(void) {
    for (unsigned long i = 0;; i++)
        printf("rank 0: step %lu of a debugging printf left in a loop\n", i);
}
"""

#: Measures the peak memory of a Python process that runs a flood for 4 s in the sandbox (VmHWM:
#: getrusage's ru_maxrss would keep the high-water mark of the process that forked it).
FLOOD_RUN = """
import sys
from mpilab.grade import sandbox
res = sandbox.run(["./flood"], cwd=sys.argv[1], timeout=4, output_cap=10_000)
with open("/proc/self/status") as f:
    peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(peak_kib // 1024, res.stdout_bytes, len(res.stdout))
print(res.failure())
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_printf_flood_costs_no_memory(tmp_path):
    """A C program printing as fast as it can until the time limit: the grader's memory stays
    flat (the output is read in chunks and thrown away past the cap)."""
    (tmp_path / "flood.c").write_text(FLOOD)
    subprocess.run(["cc", "-O1", "flood.c", "-o", "flood"], cwd=tmp_path, check=True)
    proc = subprocess.run(
        [sys.executable, "-c", FLOOD_RUN, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    first, failure = proc.stdout.splitlines()
    peak_mb, printed, kept = map(int, first.split())
    # holding what was printed would take the grader past 64 MiB; reading in chunks, it stays at
    # its own size (28 MiB measured, for 1.8 GB printed)
    assert printed > 64 * 2**20, f"the flood printed only {printed} bytes: the machine is too busy to tell"
    assert kept < 10_000 + 200 + sandbox.TAIL_BYTES
    assert peak_mb < 60, f"the grader peaked at {peak_mb} MiB while a program printed {printed} bytes"
    assert failure.startswith("timed out after 4 s") and "(output cut at 10000 bytes)" in failure


def test_signal_is_named(tmp_path):
    res = sandbox.run(["sh", "-c", "kill -SEGV $$"], cwd=tmp_path, timeout=60)
    assert res.failure() == "a process crashed: signal 11 (SIGSEGV)"


def test_openmpi_abort_names_rank():
    res = outcome.SandboxResult(
        argv=[],
        returncode=3,
        stdout="",
        timed_out=False,
        timeout=5,
        network_isolated=True,
        stderr="MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 3.",
    )
    assert res.failure() == "rank 2 crashed: MPI_Abort with error code 3"


def test_no_network_when_unshare_works(tmp_path):
    isolated, note = sandbox.network_isolation()
    if not isolated:
        pytest.skip(note)
    res = sandbox.run(["cat", "/proc/net/dev"], cwd=tmp_path, timeout=60)
    interfaces = [line.split(":")[0].strip() for line in res.stdout.splitlines()[2:]]
    assert res.network_isolated and interfaces == ["lo"]


def test_student_programs_see_neither_the_course_nor_the_solutions(tmp_path, monkeypatch):
    """The course being graded and the kit's solutions/ are empty to the program; its scratch
    directory is its own."""
    isolated, note = sandbox.network_isolation()
    if not isolated:
        pytest.skip(note)
    from mpilab.core import paths

    course = tmp_path / "course"
    (course / "submitted" / "bob").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades\n")
    monkeypatch.setenv(sandbox.COURSE_ENV, str(course))
    assert any((paths.repo_root() / "solutions").iterdir())
    work = sandbox.scratch_dir([])
    try:
        res = sandbox.run(
            [
                "sh",
                "-c",
                f"ls -A {course} {paths.repo_root() / 'solutions'}; echo mine > here.txt && cat here.txt",
            ],
            cwd=work,
            timeout=60,
        )
    finally:
        shutil.rmtree(work)
    assert res.ok, res.failure()
    assert [ln for ln in res.stdout.splitlines() if ln and not ln.endswith(":")] == ["mine"]
    assert (course / "gradebook.db").read_text() == "grades\n"


def test_scratch_holds_only_given_files(tmp_path):
    (tmp_path / "student.c").write_text("int x;\n")
    (tmp_path / "solution.c").write_text("secret\n")
    d = sandbox.scratch_dir([tmp_path / "student.c"])
    try:
        res = sandbox.run(["ls", "-A"], cwd=d, timeout=60)
        assert res.stdout.split() == ["student.c"]
    finally:
        shutil.rmtree(d)


def test_bad_timeout(tmp_path):
    with pytest.raises(UsageError, match="timeout must be positive, got 0"):
        sandbox.run(["true"], cwd=tmp_path, timeout=0)


def test_smpi_and_reporter_aborts_are_failures():
    """SMPI exits with status 0 after MPI_Abort; the grader's reporter line names rank and code."""
    smpi = (
        "[thin00-s0-c02:2:(3) 0.000000] ./src/smpi/bindings/smpi_pmpi.cpp:138: [smpi_pmpi/WARNING] "
        "MPI_Abort was called, something went probably wrong in this simulation ! Killing all processes"
    )
    res = outcome.SandboxResult(
        argv=[], returncode=0, stdout="", stderr=smpi, timed_out=False, timeout=5, network_isolated=True
    )
    assert not res.ok and res.failure() == "rank 2 crashed: MPI_Abort"
    res.stderr = "mpilab: rank 2 called MPI_Abort with error code 3\n" + smpi
    assert res.failure() == "rank 2 crashed: MPI_Abort with error code 3"
    # Open MPI lost its own message (it does, about one run in six): the reporter's line remains
    res = outcome.SandboxResult(
        argv=[],
        returncode=3,
        stdout="",
        timed_out=False,
        timeout=5,
        network_isolated=True,
        stderr="mpilab: rank 4 called MPI_Abort with error code 7\n[vm:1] ORTE_ERROR_LOG: "
        "Data unpack would read past end of buffer in file show_help.c",
    )
    assert res.failure() == "rank 4 crashed: MPI_Abort with error code 7"


# --- hostile programs against a confined run ----------------------------------------------------

#: C programs a hostile submission could hand in; each is compiled once (``attacks`` fixture).
ATTACKS = {
    # writes 3 GB to /tmp in 1 MiB pieces, stopping at the first error
    "fill_tmp": r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror(argv[1]); return 1; }
    for (int i = 0; i < 3072; i++)
        if (fwrite(block, 1, sizeof block, f) != sizeof block || fflush(f)) { perror("write"); return 1; }
    return 0;
}""",
    # fills its working directory with 1 MiB files
    "fill_cwd": r"""
#include <stdio.h>
#include <string.h>
int main(void) {
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 3072; i++) {
        char name[32];
        snprintf(name, sizeof name, "junk%d", i);
        FILE *f = fopen(name, "w");
        if (!f || fwrite(block, 1, sizeof block, f) != sizeof block || fclose(f)) { perror(name); return 1; }
    }
    return 0;
}""",
    # forks without end (and keeps trying when fork fails)
    "fork_bomb": r"""
#include <unistd.h>
int main(void) { for (;;) fork(); }""",
    # argv[1] processes, each touching argv[2] MiB; exits 1 when one of them died
    "memory_hog": r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]), child = 0;
    size_t bytes = (size_t)atol(argv[2]) << 20;
    for (int i = 1; i < n && !child; i++) child = fork() == 0;
    volatile char *p = malloc(bytes);
    if (!p) return 2;
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    sleep(1);
    if (child) return 0;
    int status, bad = 0;
    while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
    return bad;
}""",
    # kill(-1, SIGKILL): every process it may signal; then kill(argv[1]) (the grader's PID, as
    # the grader sees it) and its parent
    "kill_all": r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (kill(atoi(argv[1]), SIGKILL)) perror("kill grader");
    if (kill(getppid(), SIGKILL)) perror("kill parent");
    if (kill(-1, SIGKILL)) perror("kill -1");
    sleep(1);
    return 0;
}""",
}


@pytest.fixture(scope="module")
def attacks(tmp_path_factory):
    """The compiled :data:`ATTACKS`, in a directory of their own: {name: path}."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("attacks")
    for name, src in ATTACKS.items():
        (d / f"{name}.c").write_text(src)
        subprocess.run(["cc", "-O1", f"{name}.c", "-o", name], cwd=d, check=True)
    return {name: d / name for name in ATTACKS}


@pytest.fixture
def confined():
    """Skip where runs cannot be confined (not root, no util-linux)."""
    isolated, note = sandbox.isolation()
    if not isolated:
        pytest.skip(note)
    return note


def _work(attacks, *names):
    """A scratch directory holding the named attack programs."""
    return sandbox.scratch_dir([attacks[n] for n in names])


def _listing(d):
    return sorted((str(p.relative_to(d)), p.stat().st_size) for p in Path(d).rglob("*"))


def test_a_3_gb_write_to_tmp_stops_at_the_disk_cap_and_leaves_nothing(attacks, confined, monkeypatch):
    monkeypatch.setenv("MPILAB_SANDBOX_DISK_MB", "64")
    target = f"/tmp/mpilab-attack-{os.getpid()}-{time.monotonic_ns()}"
    work = _work(attacks, "fill_tmp")
    before = _listing(work)
    try:
        res = sandbox.run(["./fill_tmp", target], cwd=work, timeout=60)
        assert not res.ok and "No space left on device" in res.stderr
        assert res.failure() == (
            "the program hit a limit: it filled its 64 MiB of disk (/tmp, /var/tmp, /dev/shm "
            "or its working directory; MPILAB_SANDBOX_DISK_MB)"
        )
        assert not os.path.exists(target)  # its /tmp was its own
        assert _listing(work) == before  # a failed run's files are not copied back
    finally:
        shutil.rmtree(work)


def test_filling_the_working_directory_stops_at_the_cap(attacks, confined, monkeypatch):
    monkeypatch.setenv("MPILAB_SANDBOX_DISK_MB", "32")
    work = _work(attacks, "fill_cwd")
    before = _listing(work)
    try:
        res = sandbox.run(["./fill_cwd"], cwd=work, timeout=60)
        assert (
            res.limit.startswith("it filled its 32 MiB of disk") and "No space left on device" in res.stderr
        )
        assert _listing(work) == before
    finally:
        shutil.rmtree(work)


def test_too_many_files_and_too_large_a_file(confined, tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_SANDBOX_FILES", "200")
    res = sandbox.run(
        ["sh", "-c", "i=0; while touch f$i; do i=$((i+1)); done; exit 1"], cwd=tmp_path, timeout=60
    )
    assert res.failure() == "the program hit a limit: it created more than 200 files (MPILAB_SANDBOX_FILES)"
    monkeypatch.setenv("MPILAB_SANDBOX_FILE_MB", "8")
    res = sandbox.run(["dd", "if=/dev/zero", "of=big", "bs=1M", "count=20"], cwd=tmp_path, timeout=60)
    assert (
        res.failure() == "the program hit a limit: it wrote a file larger than 8 MiB (MPILAB_SANDBOX_FILE_MB)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_fork_bomb_is_stopped_and_the_next_run_works(attacks, confined, monkeypatch):
    monkeypatch.setenv("MPILAB_SANDBOX_PROCS", "64")
    work = _work(attacks, "fork_bomb")
    try:
        start = time.monotonic()
        res = sandbox.run(["./fork_bomb"], cwd=work, timeout=20)
        elapsed = time.monotonic() - start
        assert not res.ok
        if "pids" in cgroups.parents():
            assert res.failure() == (
                "the program hit a limit: it started more than 64 processes/threads and was "
                "stopped (MPILAB_SANDBOX_PROCS)"
            )
            assert elapsed < 10, f"the bomb was stopped after {elapsed:.1f} s"
        else:  # only the sandbox user's RLIMIT_NPROC holds it: the time limit ends it
            assert res.timed_out
        left = subprocess.run(
            ["pgrep", "-f", os.path.join(work, "fork_bomb")], capture_output=True, text=True
        )
        assert left.stdout == ""
        assert sandbox.run(["sh", "-c", "echo fine"], cwd=work, timeout=60).stdout == "fine\n"
    finally:
        shutil.rmtree(work)


def test_a_memory_hog_is_stopped_at_the_total_memory_cap(attacks, confined, monkeypatch):
    if "memory" not in cgroups.parents():
        pytest.skip("no writable memory cgroup here")
    monkeypatch.setenv("MPILAB_SANDBOX_TOTAL_MEMORY_MB", "256")
    work = _work(attacks, "memory_hog")
    try:
        res = sandbox.run(["./memory_hog", "4", "100"], cwd=work, timeout=60, memory_mb=512)
        assert not res.ok
        assert re.fullmatch(
            r"the program hit a limit: it used more than 256 MiB of memory with all its processes "
            r"together \(MPILAB_SANDBOX_TOTAL_MEMORY_MB\); the system killed [1-9]\d* of its "
            r"processes",
            res.failure(),
        )
        # each process alone is well under its address-space limit: the cap is the run's total
        assert sandbox.run(["./memory_hog", "1", "100"], cwd=work, timeout=60, memory_mb=512).ok
    finally:
        shutil.rmtree(work)


def test_killing_everything_it_can_reaches_only_its_own_run(attacks, confined):
    """kill(-1, SIGKILL), kill of its parent and of the grader's PID: a run of another student
    going on at the same time (the same sandbox user) and the grader live on; the verdict names
    the signal that ended the program's shell."""
    work, other = _work(attacks, "kill_all"), sandbox.scratch_dir([])
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            neighbour = pool.submit(sandbox.run, ["sh", "-c", "sleep 4; echo alive"], cwd=other, timeout=60)
            time.sleep(1)
            res = sandbox.run(["sh", "-c", f"./kill_all {os.getpid()}; echo survived"], cwd=work, timeout=60)
            assert neighbour.result().stdout == "alive\n"
        assert res.failure() == "a process crashed: signal 9 (SIGKILL)"
        assert (
            "kill grader: No such process" in res.stderr
            or "kill grader: Operation not permitted" in res.stderr
        )
    finally:
        shutil.rmtree(work)
        shutil.rmtree(other)


def _tree_hashes(*roots):
    out = {}
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_the_kit_the_gradebook_and_other_students_are_out_of_reach(confined, tmp_path, monkeypatch):
    course = tmp_path / "course"
    (course / "submitted" / "bob" / "lab2").mkdir(parents=True)
    (course / "submitted" / "bob" / "lab2" / "ring.c").write_text("bob's ring\n")
    (course / "autograded" / "bob" / "lab2").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades\n")
    monkeypatch.setenv(sandbox.COURSE_ENV, str(course))
    kit = paths.repo_root() / "mpilab"
    before = _tree_hashes(kit, course)
    targets = [
        kit / "__init__.py",
        course / "gradebook.db",
        course / "submitted" / "bob" / "lab2" / "ring.c",
        paths.repo_root() / "README.md",
    ]
    script = "".join(f"echo pwned >> {t}; rm -f {t}; " for t in targets)
    script += f"touch {kit}/evil.py {course}/autograded/bob/lab2/evil; ls -A {course}; echo done"
    work = sandbox.scratch_dir([])
    try:
        res = sandbox.run(["sh", "-c", script], cwd=work, timeout=60)
    finally:
        shutil.rmtree(work)
    assert res.stdout == "done\n", res.stdout  # the course does not exist for it
    for target in targets:  # refused: read-only, not the sandbox user's, or not there at all
        assert re.search(
            f"{re.escape(str(target))}: (Read-only file system|Permission denied|Directory nonexistent)",
            res.stderr,
        ), res.stderr
    assert _tree_hashes(kit, course) == before
    assert not (kit / "evil.py").exists()


def test_a_platform_the_kit_generated_can_be_read_by_a_run(confined, tmp_path):
    """An SMPI run names its platform file; one the kit does not ship is generated in the grader's
    cache (under /root when grading as root), which the run reads read-only."""
    path = platforms.platform_file("jupiter-32x16")
    assert not str(path).startswith(str(paths.PACKAGE_DIR)), "a shipped platform: pick a generated one"
    res = sandbox.run(["sh", "-c", f"head -c 5 {path}; echo x >> {path}"], cwd=tmp_path, timeout=60)
    assert res.stdout == "<?xml" and re.search("(Read-only file system|Permission denied)", res.stderr), (
        res.stderr
    )


def test_the_sandbox_user_is_created_with_useradd(confined):
    """As root the kit creates its own user: a fresh machine's useradd (Debian's shadow 4.13)
    refuses a comment holding a colon, and the runs then fell back to the shared nobody."""
    name, uid, _, note = sandbox.sandbox_user()
    assert (name, note) == (sandbox.SANDBOX_USER, ""), note
    assert uid != pwd.getpwnam("nobody").pw_uid


def test_it_runs_as_the_sandbox_user_alone_and_without_privileges(confined, tmp_path):
    res = sandbox.run(
        ["sh", "-c", "id -u; id -G; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; ps -e | wc -l"],
        cwd=tmp_path,
        timeout=60,
    )
    _, uid, gid, _ = sandbox.sandbox_user()
    assert res.stdout.splitlines() == [
        str(uid),
        str(gid),
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "5",
    ]  # ps's header, PID 1, sh, ps, wc


def test_a_successful_run_s_files_come_back_and_a_failed_one_s_do_not(confined, tmp_path):
    res = sandbox.run(
        ["sh", "-c", "mkdir d && echo out > d/out.txt && chmod u+s d/out.txt && ln -s /etc/passwd link"],
        cwd=tmp_path,
        timeout=60,
    )
    assert res.ok, res.failure()
    out = tmp_path / "d" / "out.txt"
    assert out.read_text() == "out\n" and not os.path.lexists(tmp_path / "link")  # links are not copied
    assert out.stat().st_uid == os.getuid() and not out.stat().st_mode & 0o6000  # nor set-uid bits
    res = sandbox.run(["sh", "-c", "echo lost > lost.txt; exit 3"], cwd=tmp_path, timeout=60)
    assert res.returncode == 3 and not (tmp_path / "lost.txt").exists()


def test_without_root_runs_go_on_unconfined_and_say_so(confined, tmp_path):
    """Inside a confined run (as in a grading kernel) the process is not root: runs there keep
    only the time, memory, file-size and output limits, and the note says what is missing."""
    code = (
        "from mpilab.grade import sandbox\nok, note = sandbox.network_isolation()\n"
        "res = sandbox.run(['sh', '-c', 'echo x'], cwd='.', timeout=30)\n"
        "print(ok, res.ok, res.network_isolated)\nprint(note)"
    )
    res = sandbox.run([sys.executable, "-c", code], cwd=tmp_path, timeout=120)
    assert res.ok, res.failure()
    first, note = res.stdout.splitlines()
    assert first == "False True False"
    assert note == (
        "not root: runs keep the host's network, files, processes and user, with no cap on disk, "
        "total memory or processes"
    )


def test_cgroups_that_fail_are_left_out_and_runs_stay_confined(confined, tmp_path):
    """A machine whose cgroups look writable but do not take the sandbox's processes: here the
    place where the cgroups should be is a plain directory (mkdir and the limit files work, joining
    the cgroup does not). The trial run fails with them, so runs go on confined without them, and
    the note says why. (A fresh process: isolation() is checked once per process.)"""
    fake, work = tmp_path / "not-a-cgroup", tmp_path / "work"
    fake.mkdir()
    work.mkdir()
    code = (
        f"from mpilab.grade import cgroups, sandbox\n"
        f"cgroups.find_parents = lambda: {{'memory': {str(fake)!r}, 'pids': {str(fake)!r}}}\n"
        f"ok, note = sandbox.isolation()\n"
        f"res = sandbox.run(['id', '-u'], cwd={str(work)!r}, timeout=60)\n"
        f"print(ok, res.ok, res.stdout.strip(), bool(cgroups.parents()))\nprint(note)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, note = proc.stdout.splitlines()
    assert first == f"True True {sandbox.sandbox_user()[1]} False"
    assert re.fullmatch(
        r"cgroups failed here \(.*cgroup\.procs.*\): no cap on a run's total memory \(only per "
        r"process\); no cap on a run's processes \(only the sandbox user's, shared by all runs\)",
        note,
    )


def test_bad_limits_and_a_working_directory_too_large_are_refused(confined, tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_SANDBOX_DISK_MB", "lots")
    with pytest.raises(
        UsageError, match=r"MPILAB_SANDBOX_DISK_MB='lots' is not a positive whole number \(default 512\)"
    ):
        sandbox.run(["true"], cwd=tmp_path, timeout=60)
    monkeypatch.delenv("MPILAB_SANDBOX_DISK_MB")
    monkeypatch.setenv("MPILAB_SANDBOX_FILES", "10")
    for i in range(20):
        (tmp_path / f"f{i}").write_text("x")
    with pytest.raises(UsageError, match=f"the working directory {tmp_path} holds more than a run may copy"):
        sandbox.run(["true"], cwd=tmp_path, timeout=60)
