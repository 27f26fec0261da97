"""The sandbox: time limit kills the process group, memory and output caps, scratch dir, no network."""

import shutil
import subprocess
import sys

import pytest

from mpilab.grade import sandbox
from mpilab.core.errors import UsageError


def test_ok_run_and_output(tmp_path):
    res = sandbox.run([sys.executable, "-c", "print('hi')"], cwd=tmp_path, timeout=60)
    assert res.ok and res.stdout == "hi\n" and res.failure() is None


def test_timeout_kills_the_whole_group(tmp_path):
    # a child that outlives its parent's kill would keep the marker's sleep alive
    res = sandbox.run(["sh", "-c", "sleep 300 & sleep 300"], cwd=tmp_path, timeout=1)
    assert res.timed_out and res.returncode is None
    assert res.failure() == "timed out after 1 s — a deadlock? check the order of sends and receives"
    left = subprocess.run(["pgrep", "-f", "sleep 300"], capture_output=True, text=True).stdout.split()
    assert not left


def test_memory_limit(tmp_path):
    res = sandbox.run([sys.executable, "-c", "x = bytearray(600 * 2**20)"], cwd=tmp_path,
                      timeout=60, memory_mb=300)
    assert not res.ok and "MemoryError" in res.stderr


def test_output_cap(tmp_path):
    res = sandbox.run([sys.executable, "-c", "print('x' * 10**6 + 'END')"], cwd=tmp_path, timeout=60,
                      output_cap=1000)
    head, cut, tail = res.stdout.split("\n", 2)
    assert head == "x" * 1000 and res.stdout_bytes == 10**6 + 4 and res.output_cut
    assert cut == f"[output cut at 1000 bytes: {10**6 + 4 - 1000 - sandbox.TAIL_BYTES:,} bytes thrown away; " \
        "the last ones follow]"
    assert tail.endswith("xxEND\n") and len(tail) == sandbox.TAIL_BYTES
    assert res.ok   # a long output is not a failure by itself


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
    proc = subprocess.run([sys.executable, "-c", FLOOD_RUN, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
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
    res = sandbox.SandboxResult(argv=[], returncode=3, stdout="", timed_out=False, timeout=5,
                                network_isolated=True,
                                stderr="MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 3.")
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
        res = sandbox.run(["sh", "-c", f"ls -A {course} {paths.repo_root() / 'solutions'}; "
                                       f"echo mine > here.txt && cat here.txt"], cwd=work, timeout=60)
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
    smpi = ("[thin00-s0-c02:2:(3) 0.000000] ./src/smpi/bindings/smpi_pmpi.cpp:138: [smpi_pmpi/WARNING] "
            "MPI_Abort was called, something went probably wrong in this simulation ! Killing all processes")
    res = sandbox.SandboxResult(argv=[], returncode=0, stdout="", stderr=smpi, timed_out=False, timeout=5,
                                network_isolated=True)
    assert not res.ok and res.failure() == "rank 2 crashed: MPI_Abort"
    res.stderr = "mpilab: rank 2 called MPI_Abort with error code 3\n" + smpi
    assert res.failure() == "rank 2 crashed: MPI_Abort with error code 3"
    # Open MPI lost its own message (it does, about one run in six): the reporter's line remains
    res = sandbox.SandboxResult(argv=[], returncode=3, stdout="", timed_out=False, timeout=5, network_isolated=True,
                                stderr="mpilab: rank 4 called MPI_Abort with error code 7\n[vm:1] ORTE_ERROR_LOG: "
                                       "Data unpack would read past end of buffer in file show_help.c")
    assert res.failure() == "rank 4 crashed: MPI_Abort with error code 7"
