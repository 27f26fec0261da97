"""What a student's algorithm file may call (mpilab.grade.symbols): the names, and real objects
compiled by each flavour's compiler."""

import re
import shutil

import pytest

from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import sandbox, symbols

TASK = "lab 2 asks you to build the allgather from point-to-point calls"


def test_point_to_point_calls_queries_and_harmless_c_are_allowed():
    for name in (
        "MPI_Sendrecv",
        "MPI_Isend",
        "MPI_Waitall",
        "MPI_Type_get_extent",
        "MPI_Barrier",
        "memcpy",
        "printf",
        "log2",
        "ceil",
        "__stack_chk_fail",
        "stdout",
        "ompi_mpi_comm_world",
        "smpi_shared_malloc_intercept",
        "smpi_MPI_INT",
        "__printf_chk",
    ):
        assert symbols.reason(name, TASK) is None, name


@pytest.mark.parametrize(
    "name, says",
    [
        ("MPI_Allgather", "calls MPI_Allgather: lab 2 asks you"),
        ("MPI_Iallgather", "calls MPI_Iallgather: lab 2 asks you"),
        ("PMPI_Allgather", "calls PMPI_Allgather, MPI's profiling name of MPI_Allgather"),
        ("PMPI_Send", "calls PMPI_Send, MPI's profiling name of MPI_Send"),
        ("dlsym", "calls dlsym (dynamic loading)"),
        ("syscall", "calls syscall (a raw system call)"),
        ("mprotect", "calls mprotect (memory mapping)"),
        ("fopen", "calls fopen (file access)"),
        ("fork", "calls fork (process control)"),
        ("_exit", "calls _exit (process control)"),
        ("getenv", "calls getenv (the environment)"),
        ("pthread_create", "calls pthread_create (threads)"),
        ("MPI_Put", "calls MPI_Put, which is not one of the calls this task allows"),
        ("MPI_Comm_split", "calls MPI_Comm_split, which is not one of the calls this task allows"),
        ("my_helper", "calls my_helper, which is defined nowhere the grader links with (a link error"),
    ],
)
def test_what_is_refused_is_named(name, says):
    assert says in symbols.reason(name, TASK)


def test_a_task_made_of_library_collectives_may_call_them():
    for name in ("MPI_Reduce", "MPI_Bcast", "MPI_Allreduce", "MPI_Comm_split_type", "mpilab_comm_split_type"):
        assert symbols.reason(name, "lab 3 asks for the two-level allreduce", point_to_point=False) is None
    assert "profiling name" in symbols.reason("PMPI_Allreduce", "lab 3", point_to_point=False)


BODY = {
    "pointer": "int (*volatile f)(const void *, int, MPI_Datatype, int, int, MPI_Comm) = MPI_Send;\n"
    "int g(void *b) { return f(b, 1, MPI_INT, 0, 0, MPI_COMM_WORLD); }\n",
    "syscall": 'long g(void) { long r; __asm__ volatile ("syscall" : "=a"(r) : "a"(39)); return r; }\n',
    "defines": "int MPI_Barrier(MPI_Comm c) { (void)c; return 0; }\n",
    "fine": "int g(void *b) { return MPI_Send(b, 1, MPI_INT, 0, 0, MPI_COMM_WORLD); }\n",
}
SAYS = {
    "pointer": "x.c takes the address of MPI_Send (a function pointer)",
    "syscall": "x.c holds a raw system-call instruction",
    "defines": "x.c defines MPI_Barrier: an algorithm file may not replace MPI's functions",
}


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_objects_are_checked_as_each_compiler_makes_them(tmp_path, flavour):
    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{flavour} not installed")
    for what, body in BODY.items():
        (tmp_path / "x.c").write_text("#include <mpi.h>\n" + body)
        res = sandbox.run(
            [COMPILERS[flavour], "-O1", "-std=c99", "-c", "x.c", "-o", "x.o"], cwd=tmp_path, timeout=60
        )
        assert res.ok, res.stderr
        if what == "fine":
            symbols.check_object(str(tmp_path), "x.o", "x.c", TASK)
            continue
        with pytest.raises(symbols.Refused, match=re.escape(SAYS[what])):
            symbols.check_object(str(tmp_path), "x.o", "x.c", TASK)
