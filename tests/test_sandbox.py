"""The sandbox: time limit kills the process group, memory and output caps, scratch dir, no network."""

import concurrent.futures
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from mpilab.core import paths
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import cgroups, outcome, runner, sandbox
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


# --- what a confined run sees: an allow-list, not the machine minus a list -------------------------

#: Printed by a shell in a confined run: for each path, whether it can be listed or read. What a
#: student's program would try to reach the answer key, the course and other students.
PROBE = r"""
for p in "$@"; do
    if ls -A "$p" >/dev/null 2>&1 || cat "$p" >/dev/null 2>&1; then echo "SEEN $p"; else echo "UNSEEN $p"; fi
done
git -C "$KIT" show HEAD:solutions/lab2/ring.c >/dev/null 2>&1 && echo "SEEN git" || echo "UNSEEN git"
echo "INTERFACES $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')"
echo "PROCESSES $(ls /proc | grep -c '^[0-9]')"
echo "HOMES $(ls -A /home 2>/dev/null | tr '\n' ' ')"
"""


def _secrets(kit, course):
    """What no confined run may list or read: the kit's .git, the key (sources, package,
    compiled objects), tests/, dist/, the course's other students and gradebook, other homes."""
    return [
        kit / ".git",
        kit / ".git" / "HEAD",
        kit / "solutions",
        kit / "solutions" / "lab2" / "ring.c",
        kit / "solutions" / "mpilab_key",
        kit / "c_reference" / "build" / "openmpi" / "obj" / "key",
        kit / "c_reference" / "build" / "openmpi" / "liblabcoll.a",
        kit / "tests",
        kit / "dist",
        kit / "grader",
        kit / "README.md",
        course / "submitted" / "bob" / "lab2" / "ring.c",
        course / "submitted",
        course / "gradebook.db",
        Path("/etc/shadow"),
    ]


def under_home(p):
    return isinstance(p, str) and p.startswith("/home/")


def _probe_lines(stdout):
    seen = {line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith("SEEN ")}
    fields = dict(
        line.split(" ", 1)
        for line in stdout.splitlines()
        if line.startswith(("INTERFACES", "PROCESSES", "HOMES"))
    )
    return seen, fields


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course being graded: another student's submission and the gradebook."""
    course = tmp_path / "course"
    (course / "submitted" / "bob" / "lab2").mkdir(parents=True)
    (course / "submitted" / "bob" / "lab2" / "ring.c").write_text("bob's ring\n")
    (course / "gradebook.db").write_text("grades\n")
    monkeypatch.setenv(sandbox.COURSE_ENV, str(course))
    return course


def test_a_confined_run_sees_only_its_allow_list(confined, course):
    """A run lists /: the system, its private /tmp, /dev, /proc and /etc; of the kit only the
    .venv and the platforms; none of the secrets, no network, no process but its own."""
    kit = paths.repo_root()
    assert (kit / ".git").exists() and (kit / "solutions" / "lab2" / "ring.c").exists()
    made_dist = not (kit / "dist").exists()
    (kit / "dist").mkdir(exist_ok=True)  # (make student-release writes it; ignored by git)
    work = sandbox.scratch_dir([])
    try:
        res = sandbox.run(
            [
                "sh",
                "-c",
                PROBE + f"echo KIT; ls -A {kit}; echo ETC; ls /etc",
                "sh",
                *map(str, _secrets(kit, course)),
            ],
            cwd=work,
            timeout=60,
            env={"KIT": str(kit)},
        )
    finally:
        shutil.rmtree(work)
        if made_dist:
            (kit / "dist").rmdir()
    seen, fields = _probe_lines(res.stdout)
    assert seen == set(), f"a confined run reached {sorted(seen)}"
    assert fields["INTERFACES"] == "lo " and int(fields["PROCESSES"]) < 8, fields
    # of /home, at most the way to the kit's .venv and package
    assert set(fields["HOMES"].split()) <= {Path(p).parts[2] for p in sandbox.kit_paths() if under_home(p)}
    lines = res.stdout.splitlines()
    kit_entries, etc = lines[lines.index("KIT") + 1 : lines.index("ETC")], lines[lines.index("ETC") + 1 :]
    assert kit_entries == [".venv", "mpilab"]  # mpilab/data/platforms only
    assert {"passwd", "group", "hosts", "ld.so.cache", "openmpi"} <= set(etc)
    assert not {"shadow", "slurm", "munge", "ssh"} & set(etc)


def test_the_kit_is_readable_only_when_named_and_the_key_only_for_the_judge(
    confined, course, tmp_path, built_flavour
):
    """``read=kit_paths()`` (a grading kernel): the mpilab package imports, the answer key does
    not, and the C build it runs (collbench ...) is one without the key; ``kit_paths(key=True)``
    (the judge): both import, the key's objects are there. Neither sees .git nor tests/."""
    build = built_flavour("openmpi")
    code = (
        "import os, sys\nimport mpilab\nprint('mpilab', mpilab.__file__)\ntry:\n"
        "    import mpilab_key\n    print('key', mpilab_key.__file__)\n"
        "except ImportError:\n    print('key none')\n"
        f"print('git', os.path.exists({str(paths.repo_root() / '.git')!r}))\n"
        f"print('tests', os.path.exists({str(paths.repo_root() / 'tests')!r}))\n"
        f"print('collbench', os.path.exists({str(build / 'collbench')!r}))\n"
        f"print('objects', os.path.exists({str(build / 'obj' / 'key')!r}))\n"
        f"print('ring', 'ring' in open({str(build / 'registry.json')!r}).read())\n"
    )
    out = {}
    for key in (False, True):
        res = sandbox.run(
            [sys.executable, "-c", code], cwd=tmp_path, timeout=120, read=sandbox.kit_paths(key=key)
        )
        assert res.ok, res.failure()
        out[key] = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert out[False]["key"] == "none" and out[True]["key"].endswith("mpilab_key/__init__.py")
    assert {out[k]["mpilab"] for k in out} == {str(paths.PACKAGE_DIR / "__init__.py")}
    assert {out[k]["git"] for k in out} == {out[k]["tests"] for k in out} == {"False"}
    assert out[False]["collbench"] == out[True]["collbench"] == "True"
    assert (out[False]["objects"], out[False]["ring"]) == ("False", "False")
    assert (out[True]["objects"], out[True]["ring"]) == ("True", "True")


def test_a_grading_kernel_builds_lab_2s_harness_with_the_kits_reference_allgathers(
    confined, course, tmp_path, built_flavour
):
    """Lab 2's benchmark (``bench.benchmark_c(..., reference=True)``) compiles the kit's own
    allgathers next to the student's: a kernel's view (``read=kit_paths()``) has their sources."""
    built_flavour("openmpi")
    shutil.copy(paths.repo_root() / "solutions" / "lab2" / "c_solutions" / "ring.c", tmp_path / "ring.c")
    code = (
        "import os, shutil\nfrom mpilab.grade import harness\n"
        "work = harness.build_allgather('ring.c', 'ring', 'openmpi', reference=True)\n"
        "print(sorted(f for f in os.listdir(work) if f.endswith('.c')))\nshutil.rmtree(work)\n"
    )
    res = sandbox.run([sys.executable, "-c", code], cwd=tmp_path, timeout=300, read=sandbox.kit_paths())
    assert res.ok, res.failure()
    assert "'gather_bcast.c', 'pairwise.c'" in res.stdout


def test_a_path_that_holds_the_kit_or_the_course_cannot_be_named(confined, course, tmp_path):
    for bad in (paths.repo_root(), paths.repo_root().parent, course, "/"):
        with pytest.raises(UsageError, match=f"a confined run may not read {re.escape(str(bad))}: it holds"):
            sandbox.run(["true"], cwd=tmp_path, timeout=60, read=[bad])


HELLO = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.mpi
@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_mpi_programs_build_and_run_confined(confined, flavour, tmp_path):
    """The kit's own road for a student's C (lab 0's run_c: build, then launch), confined."""
    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{COMPILERS[flavour]} not installed")
    (tmp_path / "hello.c").write_text(HELLO)
    out = runner.run_c(tmp_path / "hello.c", flavour=flavour, nprocs=3)
    assert sorted(out.splitlines()) == [f"rank {r} of 3: sum 3" for r in range(3)]


#: A student's C that looks for the answer key where the judge (one level up) can read it.
KEY_HUNT = r"""
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        FILE *f = fopen(KEY_FILE, "r");
        DIR *d = opendir(KEY_DIR);
        printf("key file %s, key dir %s\n", f ? "READ" : "unseen", d ? "LISTED" : "unseen");
    }
    MPI_Finalize();
    return 0;
}
"""

#: The judge's side of the nesting test: confined, it reads the key, then builds and runs the
#: student's C with the kit's runner (a nested confined run) and says what each level saw.
JUDGE = """
import os, sys
import mpilab_key
from mpilab.grade import runner, sandbox
key_file = mpilab_key.__file__
print("judge reads the key:", open(key_file).read(0) == "" and os.path.isfile(key_file))
print("judge isolation:", sandbox.isolation()[0])
src = open("hunt.c").read().replace("KEY_FILE", repr(key_file).replace("'", '"'))
src = src.replace("KEY_DIR", repr(os.path.dirname(key_file)).replace("'", '"'))
with open("hunt_now.c", "w") as f:
    f.write(src)
print(runner.run_c("hunt_now.c", flavour=sys.argv[1], nprocs=2).strip())
"""


@pytest.mark.mpi
def test_nesting_the_judge_reads_the_key_the_student_code_it_runs_does_not(confined, tmp_path):
    """A confined judge (the key readable: kit_paths(key=True)) builds and runs a student's C
    in a nested confined run of its own, which does not see the key."""
    flavour = "openmpi"
    (tmp_path / "hunt.c").write_text(KEY_HUNT)
    (tmp_path / "judge.py").write_text(JUDGE)
    res = sandbox.run(
        [sys.executable, "-I", "judge.py", flavour],
        cwd=tmp_path,
        timeout=300,
        read=sandbox.kit_paths(key=True),
        memory_mb=0,
    )
    assert res.ok, f"{res.failure()}\n{res.stdout}\n{res.stderr[-3000:]}"
    assert res.stdout.splitlines() == [
        "judge reads the key: True",
        "judge isolation: True",
        "key file unseen, key dir unseen",
    ]


# --- as a real non-root user, with a kit that user installed ---------------------------------------

#: The user the non-root tests create (and remove at the end): one per test process, since two
#: (pytest -n 2, or another checkout's run) must not remove each other's user and kit.
NONROOT_USER = f"mpilab-nonroot-{os.getpid()}"

#: What the non-root user runs: one JSON line per check (see test_as_an_ordinary_user_...).
NONROOT_CHECKS = r"""
import json, os, sys
from pathlib import Path
from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import runner, sandbox
import shutil

def say(key, value):
    print(json.dumps({key: value}), flush=True)

kit, course = paths.repo_root(), Path(os.environ["MPILAB_COURSE_ROOT"])
with open("settings.json") as f:
    SECRETS, PROBE, BOMB = json.load(f)
say("kit", str(kit))
say("isolation", sandbox.isolation())
work = sandbox.scratch_dir([])
res = sandbox.run(["sh", "-c", PROBE + "id -u", "sh", *SECRETS], cwd=work, timeout=60, env={"KIT": str(kit)})
say("probe", [res.ok, res.stdout, res.stderr[-2000:]])
for flavour in ("openmpi", "mpich", "smpi"):
    if shutil.which(COMPILERS[flavour]):
        say(flavour, runner.run_c("hello.c", flavour=flavour, nprocs=3))
res = sandbox.run([sys.executable, "-I", "judge.py", "openmpi"], cwd=os.getcwd(), timeout=300,
                  read=sandbox.kit_paths(key=True), memory_mb=0)
say("nested", [res.ok, res.stdout, res.stderr[-2000:]])
os.environ["MPILAB_SANDBOX_PROCS"] = "64"
res = sandbox.run([sys.executable, "-c", BOMB], cwd=work, timeout=60)
say("bomb", [res.ok, res.stdout, res.stderr[-2000:]])
os.environ["MPILAB_SANDBOX_DISK_MB"] = "32"
res = sandbox.run(["dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=100"], cwd=work, timeout=60)
say("disk", [res.ok, res.failure()])
"""

#: Forks children that sleep until a fork fails; prints how many it made.
BOMB = """
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("forked", n, "then", e.strerror)
"""


def _as(user, *argv, env=None, cwd=None, timeout=600):
    """Run ``argv`` as ``user`` (runuser), in its home, with a clean environment."""
    home = pwd.getpwnam(user).pw_dir
    base = {
        "HOME": home,
        "USER": user,
        "LOGNAME": user,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    return subprocess.run(
        [
            "runuser",
            "-u",
            user,
            "--",
            "env",
            "-i",
            *[f"{k}={v}" for k, v in {**base, **(env or {})}.items()],
            *argv,
        ],
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def nonroot_kit():
    """An ordinary user with the kit installed in its home, as that user installs it.

    The user copies this checkout's files (those git tracks or would track: the working tree as
    it is, answer key included) to ``~/kit`` and commits them to a git repository of its own
    (so ``.git`` holds the key), makes a virtual environment ``~/venv`` with the system's
    Python and installs the kit and the key into it with pip, editable (as ``make setup``).
    Smallest faithful equivalent, said here: the third-party packages (numpy, pandas, pip ...)
    are not downloaded again (7 minutes here) but read from this test's own environment through a
    ``.pth`` file, as a site-wide package tree would be (``~/kit/.venv`` is ``~/venv``, with
    ``nbgrader``, ``jupyter`` and ``alembic`` commands that start its Python); the C build
    (``c_reference/build``, the key's objects in it) is copied, not rebuilt. Removed, user and
    home, at the end.
    """
    if not sandbox.host_root():
        pytest.skip("creating a user needs root")
    py = "/usr/bin/python3"
    probe = subprocess.run(
        [py, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if probe.returncode or probe.stdout.strip() != str(tuple(sys.version_info[:2])):
        pytest.skip(f"{py} is not Python {sys.version_info[0]}.{sys.version_info[1]} (this environment's)")
    for tool in ("useradd", "userdel", "runuser", "git"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    subprocess.run(["userdel", "--remove", NONROOT_USER], capture_output=True)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", NONROOT_USER], check=True)
    home = Path(pwd.getpwnam(NONROOT_USER).pw_dir)
    try:
        os.chmod(home, 0o700)
        root = paths.repo_root()
        files = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        pack = subprocess.run(
            ["tar", "-C", str(root), "-c", "--null", "-T", "-"],
            input=b"\0".join(f for f in files if f and os.path.isfile(root / os.fsdecode(f))),
            capture_output=True,
            check=True,
        ).stdout
        unpack = subprocess.run(
            ["runuser", "-u", NONROOT_USER, "--", "sh", "-c", "mkdir ~/kit && tar -C ~/kit -x"],
            input=pack,
            capture_output=True,
        )
        assert unpack.returncode == 0, unpack.stderr
        git = "git -c user.name=T -c user.email=t@example.org"
        shared = sysconfig.get_paths()["purelib"]
        steps = [
            f"cd ~/kit && git init -q && git add -A && {git} commit -q -m kit",
            f"{py} -m venv --without-pip ~/venv",
            f"echo {shared} > ~/venv/lib/python3.{sys.version_info[1]}/site-packages/shared.pth",
            "~/venv/bin/python -m pip install -q --no-deps -e ~/kit -e ~/kit/solutions",
            "mkdir -p ~/kit/dist/student && echo kit > ~/kit/dist/student/README",
        ]
        for step in steps:
            proc = _as(NONROOT_USER, "sh", "-c", step)
            assert proc.returncode == 0, f"{step}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        build = home / "kit" / "c_reference" / "build"
        shutil.copytree(paths.c_reference_dir() / "build", build, symlinks=True)
        subprocess.run(["chown", "-R", f"{NONROOT_USER}:", str(build)], check=True)
        # the kit's .venv, where scripts/grade.sh looks for it, with the console scripts of the
        # packages read through shared.pth (theirs start this environment's Python, not ~/venv's)
        venv = home / "venv"
        (home / "kit" / ".venv").symlink_to(venv)
        for command, module in (("nbgrader", "nbgrader"), ("jupyter", "jupyter"), ("alembic", "alembic")):
            script = venv / "bin" / command
            script.write_text(f'#!/bin/sh\nexec {venv}/bin/python -m {module} "$@"\n')
            script.chmod(0o755)
        subprocess.run(
            ["chown", "-hR", f"{NONROOT_USER}:", str(home / "kit" / ".venv"), str(venv / "bin")], check=True
        )
        yield home
    finally:
        subprocess.run(["userdel", "--remove", NONROOT_USER], capture_output=True)


def _nonroot_course(home):
    bob = "~/course/submitted/bob/lab2"
    steps = f"mkdir -p {bob} && echo bob > {bob}/ring.c && echo g > ~/course/gradebook.db"
    assert _as(NONROOT_USER, "sh", "-c", steps).returncode == 0
    return home / "course"


@pytest.mark.slow
@pytest.mark.mpi
def test_as_an_ordinary_user_the_guarantees_hold(nonroot_kit):
    """Graded by an ordinary user (no root, no cgroup of its own here): confined all the same in
    user namespaces: the secrets of its own kit and course unseen, no network, MPI for the three
    flavours, nesting that hides the key, processes capped per run, the disk capped."""
    home = nonroot_kit
    course = _nonroot_course(home)
    kit = home / "kit"
    secrets = _secrets(kit, course) + [kit / "solutions" / "mpilab_key" / "__init__.py"]
    files = {
        "checks.py": NONROOT_CHECKS,
        "settings.json": json.dumps([[str(p) for p in secrets], PROBE, BOMB]),
        "hello.c": HELLO,
        "hunt.c": KEY_HUNT,
        "judge.py": JUDGE,
    }
    for name, text in files.items():
        (home / name).write_text(text)
        os.chown(home / name, pwd.getpwnam(NONROOT_USER).pw_uid, -1)
    proc = _as(
        NONROOT_USER,
        str(home / "venv" / "bin" / "python"),
        "checks.py",
        env={"MPILAB_COURSE_ROOT": str(course)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for line in proc.stdout.splitlines():
        out.update(json.loads(line))
    assert out["kit"] == str(kit)
    ok, note = out["isolation"]
    assert ok and note.startswith(f"not root: confined in user namespaces as {NONROOT_USER} itself"), note
    ran, stdout, stderr = out["probe"]
    seen, fields = _probe_lines(stdout)
    assert ran and seen == set(), f"reached {sorted(seen)}: {stderr}"
    assert fields["INTERFACES"] == "lo " and int(fields["PROCESSES"]) < 8, fields
    assert fields["HOMES"].split() == [NONROOT_USER], fields  # no other user's home
    assert stdout.splitlines()[-1] == str(pwd.getpwnam(NONROOT_USER).pw_uid)  # its own uid, not root
    for flavour in ("openmpi", "mpich", "smpi"):
        if shutil.which(COMPILERS[flavour]):
            assert sorted(out[flavour].splitlines()) == [f"rank {r} of 3: sum 3" for r in range(3)]
    ran, stdout, stderr = out["nested"]
    assert ran and stdout.splitlines() == [
        "judge reads the key: True",
        "judge isolation: True",
        "key file unseen, key dir unseen",
    ], stderr
    ran, stdout, _ = out["bomb"]
    forked = int(re.fullmatch(r"forked (\d+) then Resource temporarily unavailable\n", stdout).group(1))
    assert 50 <= forked < 64  # RLIMIT_NPROC = MPILAB_SANDBOX_PROCS, counted in the run's user namespace
    assert out["disk"] == [
        False,
        "the program hit a limit: it filled its 32 MiB of disk (/tmp, /var/tmp, /dev/shm or its "
        "working directory; MPILAB_SANDBOX_DISK_MB)",
    ]


#: The cheating suite's techniques graded by the ordinary user (tests/cheats.py): a kernel that
#: runs as the instructor's own uid, so that only its confinement keeps the kit, the course and
#: the grader's processes out of its reach; and a cost answer for the judge, confined as well.
NONROOT_CHEATS = ("writes", "kill", "monkeypatch", "cost_text", "symlinks")


def _kit_digest(kit):
    return {
        str(p.relative_to(kit)): hashlib.sha256(p.read_bytes()).hexdigest()
        for d in ("mpilab", "solutions", "grader", "scripts", "labs")
        for p in sorted((kit / d).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.nbgrader
@pytest.mark.e2e
def test_an_ordinary_user_grades_the_cheating_suite_as_root_does(nonroot_kit):
    """The ordinary user grades lab 0 with its own kit's scripts/grade.sh: cheats of
    :data:`NONROOT_CHEATS` and then the solution. Every cheat scores 0, the solution keeps its
    points, and the user's kit and the solution's submitted files are as they were, as on the root
    path (tests/test_cheating.py), here with every kernel, judge and C run confined in user
    namespaces as that same user."""
    sys.path.insert(0, str(paths.repo_root() / "tests"))
    from cheats import TECHNIQUES, Technique, cheating_notebook
    from course import released_notebook, solved_notebook

    from mpilab.grade.gradebook import score_table

    home, lab = nonroot_kit, "lab0"
    kit, course = home / "kit", home / "cheat-course"
    (course / "submitted").mkdir(parents=True)
    cfg = (kit / "grader" / "nbgrader_config.py").read_text()
    cfg = cfg.replace('"../solutions"', repr(str(kit / "solutions"))).replace(
        '"../labs"', repr(str(home / "release"))
    )
    (course / "nbgrader_config.py").write_text(cfg)
    skeleton = {"hello.c": kit / "labs" / lab / "hello.c"}

    def submit(student, notebook, files):
        folder = course / "submitted" / student / lab
        folder.mkdir(parents=True)
        (folder / f"{lab}.ipynb").write_text(json.dumps(notebook))
        for name, src in files.items():
            shutil.copy(src, folder / name)
        return folder

    for t in NONROOT_CHEATS:
        folder = submit(f"cheat_{t}", cheating_notebook(lab, t), skeleton)
        if isinstance(TECHNIQUES[t], Technique) and TECHNIQUES[t].files:
            TECHNIQUES[t].files(folder, lab)
    victim = submit(
        "zz_solution", solved_notebook(lab), {"hello.c": kit / "solutions" / lab / "c_solutions" / "hello.c"}
    )
    subprocess.run(["chown", "-R", f"{NONROOT_USER}:", str(course)], check=True)
    before, victim_before = _kit_digest(kit), {p.name: p.read_bytes() for p in victim.iterdir()}
    assert released_notebook(lab)  # the release the solution was pasted into exists
    proc = _as(
        NONROOT_USER,
        str(kit / "scripts" / "grade.sh"),
        lab,
        env={"COURSE": str(course), "MPILAB_CELL_TIMEOUT": "60", "MPILAB_RUN_TIMEOUT": "10"},
        timeout=1800,
    )
    (paths.repo_root() / "test-output").mkdir(exist_ok=True)
    (paths.repo_root() / "test-output" / "cheating_nonroot_lab0.txt").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert f"the trusted grader run confined as {NONROOT_USER} (not root" in proc.stdout, proc.stdout[-2000:]
    table = score_table(course, lab)
    auto = {gid: float(table.loc["zz_solution", gid]) for gid in table.columns if gid not in ("total", "max")}
    for t in NONROOT_CHEATS:
        # a submission the intake refused whole (a linked notebook) is not in the gradebook: 0
        got = {
            gid: float(table.loc[f"cheat_{t}", gid]) if f"cheat_{t}" in table.index else 0.0 for gid in auto
        }
        assert not any(got.values()), f"{t} scored as {NONROOT_USER}: {got}"
    solved = json.loads((kit / "solutions" / lab / f"{lab}.ipynb").read_text())
    points = {
        c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"]["points"])
        for c in solved["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution")
    }
    assert {gid: auto[gid] for gid in points} == points
    assert _kit_digest(kit) == before
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == victim_before


@pytest.mark.slow
def test_without_user_namespaces_grading_says_what_is_lost(nonroot_kit, tmp_path):
    """The same user where the kernel gives no user namespace (here: max_user_namespaces set to 0
    inside a namespace of its own): isolation() says exactly which guarantees are lost, and runs
    go on with the time and output limits."""
    code = (
        "from mpilab.grade import sandbox\nok, note = sandbox.isolation()\nprint(ok)\nprint(note)\n"
        "res = sandbox.run(['sh', '-c', 'sleep 30'], cwd='.', timeout=1)\nprint(res.failure())"
    )
    script = f'echo 0 > /proc/sys/user/max_user_namespaces && exec {nonroot_kit}/venv/bin/python -c "$0"'
    proc = _as(NONROOT_USER, "unshare", "--user", "--map-root-user", "sh", "-c", script, code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, note, failure = proc.stdout.splitlines()
    assert ok == "False"
    assert note.startswith(
        "not root, and runs cannot be confined in a user namespace here ("
    ) and note.endswith("): " + sandbox.UNCONFINED), note
    assert "No space left on device" in note  # the kernel's own refusal
    assert failure.startswith("timed out after 1 s")


def test_a_kit_below_an_allowed_directory_is_covered(confined, tmp_path, monkeypatch):
    """The safety net: a checkout that lies below a directory the allow-list holds (here one of
    $LD_LIBRARY_PATH; a kit under /usr/local would be the same) is an empty directory for the run,
    while the rest of that directory is there."""
    lib = tmp_path / "lib"
    (lib / "kit" / ".git").mkdir(parents=True)
    (lib / "kit" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (lib / "libthing.so").write_text("")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    monkeypatch.setenv("MPILAB_ROOT", str(lib / "kit"))
    work = sandbox.scratch_dir([])
    try:
        res = sandbox.run(["sh", "-c", f"ls -A {lib}; ls -A {lib / 'kit'}; echo end"], cwd=work, timeout=60)
    finally:
        shutil.rmtree(work)
    assert res.stdout.splitlines() == ["kit", "libthing.so", "end"], res.stderr


def test_a_grading_kernel_s_own_runs_keep_the_limits_only(confined, tmp_path):
    """A confined process made with nest=False (a grading kernel, whose notebook could run
    anything itself) starts its runs with the limits only: no second confinement (~0.4 s each)."""
    code = (
        "from mpilab.grade import sandbox\nok, note = sandbox.isolation()\nprint(ok)\nprint(note)\n"
        "res = sandbox.run(['sh', '-c', 'sleep 30'], cwd='.', timeout=1)\nprint(res.failure())"
    )
    with sandbox.Sandbox(outcome.Limits.from_env("KERNEL"), read=sandbox.kit_paths(), nest=False) as box:
        proc = subprocess.run(
            box.argv([sys.executable, "-c", code]),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            pass_fds=box.pass_fds,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok, note, failure = proc.stdout.splitlines()
    assert ok == "False" and note.startswith("inside a confined grading kernel: runs keep the time")
    assert failure.startswith("timed out after 1 s")
