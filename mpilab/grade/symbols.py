"""What a student's algorithm file may call: the object's symbols, checked before it is linked.

A lab asks for a collective built from point-to-point messages. After the student's file is
compiled on its own (:func:`mpilab.grade.harness.seal_object`), :func:`check_object` lists the
object's undefined symbols (``nm -u``) and accepts only those the task allows: the
point-to-point calls, communicator and datatype queries, and harmless C library functions
(memory, strings, printing, maths). Anything else is refused with a named reason ("ring.c calls
MPI_Allgather: lab 2 asks you to build the allgather from point-to-point calls"): any library
collective (by its ``MPI_`` or ``PMPI_`` name), dynamic loading (``dlsym``), raw system calls,
memory mapping, files, processes, signals, threads and the environment. Allowed functions may
only be called: an object that takes the address of one (a function pointer, to call it where
a check cannot see) is refused too, and so is an object that defines a function with an MPI
name or holds a system-call instruction. What the harness sees at run time (every collective
and every message, :file:`mpilab/data/grading/harness.h`) is the second line of defence.
"""

import re

from mpilab.grade import sandbox

#: Point-to-point calls the harnesses see (harness.h defines each) and their completions.
POINT_TO_POINT = (
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Rsend",
    "MPI_Isend",
    "MPI_Issend",
    "MPI_Irsend",
    "MPI_Recv",
    "MPI_Irecv",
    "MPI_Sendrecv",
    "MPI_Sendrecv_replace",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
    "MPI_Probe",
    "MPI_Iprobe",
    "MPI_Get_count",
    "MPI_Get_elements",
    "MPI_Request_free",
)
#: Questions about communicators, groups and datatypes, and other calls that move no data.
QUERIES = (
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Comm_group",
    "MPI_Comm_compare",
    "MPI_Comm_dup",
    "MPI_Comm_free",
    "MPI_Comm_test_inter",
    "MPI_Comm_get_attr",
    "MPI_Comm_set_attr",
    "MPI_Comm_delete_attr",
    "MPI_Comm_create_keyval",
    "MPI_Comm_free_keyval",
    "MPI_Comm_set_errhandler",
    "MPI_Comm_get_errhandler",
    "MPI_Group_rank",
    "MPI_Group_size",
    "MPI_Group_translate_ranks",
    "MPI_Group_free",
    "MPI_Group_incl",
    "MPI_Type_size",
    "MPI_Type_get_extent",
    "MPI_Type_get_true_extent",
    "MPI_Type_contiguous",
    "MPI_Type_vector",
    "MPI_Type_create_resized",
    "MPI_Type_commit",
    "MPI_Type_free",
    "MPI_Type_dup",
    "MPI_Type_get_envelope",
    "MPI_Pack",
    "MPI_Unpack",
    "MPI_Pack_size",
    "MPI_Op_commutative",
    "MPI_Reduce_local",
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Error_string",
    "MPI_Error_class",
    "MPI_Abort",
    "MPI_Get_processor_name",
    "MPI_Initialized",
    "MPI_Alloc_mem",
    "MPI_Free_mem",
    # a barrier carries no data: a ring that waits for the others between steps is a ring
    "MPI_Barrier",
)
#: Communicator constructors: collectives that move no user data, allowed where a task builds
#: its own communicators (lab 3's two-level allreduce).
CONSTRUCTORS = ("MPI_Comm_split", "MPI_Comm_split_type", "MPI_Comm_create", "MPI_Comm_create_group")
#: The library's collectives, by name (every other MPI_ function is refused as "not a call this
#: task allows" anyway; these get the lab's own words).
COLLECTIVES = re.compile(
    r"^MPI_I?(allgatherv?|allreduce|alltoall[vw]?|barrier|bcast|exscan|gatherv?|reduce(_scatter(_block)?)?"
    r"|scan|scatterv?|neighbor_\w+)(_init)?$",
    re.IGNORECASE,
)

#: C library functions an algorithm file may call: memory, strings, printing to stdout or
#: stderr (any other stream needs fopen), maths, and what the compiler itself calls.
LIBC = (
    "memcpy memmove memset memcmp memchr strlen strnlen strcmp strncmp strcpy strncpy strcat strncat "
    "strchr strrchr strstr strdup malloc calloc realloc free aligned_alloc posix_memalign mallopt "
    "printf fprintf vprintf vfprintf puts fputs putchar fputc putc fflush fwrite snprintf sprintf "
    "vsnprintf vsprintf perror abs labs llabs div ldiv qsort bsearch rand srand rand_r atoi atol "
    "atoll strtol strtoul strtoll strtoull strtod exit abort __assert_fail __stack_chk_fail "
    "__errno_location __ctype_b_loc __ctype_tolower_loc __ctype_toupper_loc toupper tolower "
    "__printf_chk __fprintf_chk __sprintf_chk __snprintf_chk __vsnprintf_chk __vfprintf_chk "
    "__vprintf_chk __memcpy_chk __memmove_chk __memset_chk __strcpy_chk __strcat_chk "
    "__strncpy_chk __strncat_chk time clock clock_gettime gettimeofday sleep usleep "
    "log log2 log10 log1p exp exp2 expm1 pow sqrt cbrt ceil floor round lround llround trunc rint "
    "lrint nearbyint fabs fmin fmax fmod remainder frexp ldexp ilogb logb hypot "
    "logf log2f log10f expf exp2f powf sqrtf ceilf floorf roundf lroundf truncf fabsf fminf fmaxf "
    "fmodf ldexpf frexpf ilogbf"
).split()
#: The names SMPI's headers give some of them (smpi_helpers.h: malloc is
#: smpi_shared_malloc_intercept, ...), each with the function the student wrote.
SMPI_ALIASES = {
    "smpi_shared_malloc_intercept": "malloc",
    "smpi_shared_calloc_intercept": "calloc",
    "smpi_shared_realloc_intercept": "realloc",
    "smpi_shared_free": "free",
    "smpi_exit": "exit",
    "smpi_sleep": "sleep",
    "smpi_usleep": "usleep",
    "smpi_gettimeofday": "gettimeofday",
    "smpi_clock_gettime": "clock_gettime",
    "smpi_trace_set_call_location": "sleep",
    "mpilab_comm_split_type": "MPI_Comm_split_type",
}
#: Data the headers refer to (predefined handles, stdout and stderr, MPI's predefined callback
#: functions): any reference is fine.
DATA = re.compile(
    r"^(_GLOBAL_OFFSET_TABLE_|stdout|stderr|ompi_mpi_\w+|ompi_request_null|ompi_message_null|OMPI_C_MPI_\w+_FN"
    r"|smpi_MPI_\w+|MPI_COMM_WORLD|MPI_COMM_SELF|MPI_COMM_NULL)$"
)

#: Named reasons for what is refused, checked in order: (pattern, why).
REFUSED = (
    (
        re.compile(r"^PMPI_"),
        "MPI's profiling name of {mpi}, which goes around the grader's view of your calls",
    ),
    (re.compile(r"^(dlopen|dlsym|dlvsym|dladdr1?|dlinfo|dl_iterate_phdr|dlmopen)$"), "dynamic loading"),
    (re.compile(r"^(syscall|__syscall\w*)$"), "a raw system call"),
    (re.compile(r"^(mmap|mmap64|munmap|mprotect|mremap|madvise|brk|sbrk)$"), "memory mapping"),
    (
        re.compile(
            r"^(fopen|fopen64|freopen|fdopen|tmpfile|open|open64|openat|creat|read|write|pread|pwrite"
            r"|readv|writev|close|unlink|unlinkat|remove|rename|mkdir|rmdir|chmod|chdir|opendir"
            r"|readdir|stat|lstat|fstat|readlink|symlink|link|truncate|ftruncate|dup|dup2|pipe"
            r"|__open\w*|__read\w*|fread|fscanf|fgets|fgetc|getc|fclose|fseek|fseeko|ftell|ftello|rewind"
            r"|setvbuf|setbuf|__xstat\w*|statx|access|realpath)$"
        ),
        "file access",
    ),
    (
        re.compile(
            r"^(fork|vfork|clone|clone3|execv|execve|execvp|execvpe|execl|execle|execlp|system|popen"
            r"|posix_spawnp?|kill|raise|ptrace|process_vm_readv|process_vm_writev|_exit|_Exit"
            r"|waitpid|wait|setuid|setgid|prctl|atexit|on_exit|at_quick_exit)$"
        ),
        "process control",
    ),
    (re.compile(r"^(signal|sigaction|sigprocmask|alarm|setitimer|timer_create)$"), "signals"),
    (re.compile(r"^(pthread_\w+|thrd_\w+)$"), "threads"),
    (
        re.compile(r"^(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv|environ|__environ)$"),
        "the environment",
    ),
    (
        re.compile(r"^(socket|connect|bind|listen|accept|send|recv|sendto|recvfrom|getaddrinfo)$"),
        "the network",
    ),
)
#: A raw system-call instruction in the object's code (objdump's spelling).
_SYSCALL_INSN = re.compile(r"^\s*[0-9a-f]+:\s+(syscall|sysenter|int\s+\$0x80)\b", re.M)
#: Relocation types of a call (or a tail call) to a function.
_CALL_RELOCATIONS = ("R_X86_64_PLT32",)


class Refused(AssertionError):
    """An object that calls or holds what its task does not allow; the message says what and why."""


def allowed_functions(point_to_point=True):
    """The MPI functions a task may call: point-to-point calls and queries, plus, where the task
    is not built from point-to-point messages alone (``point_to_point=False``), communicator
    constructors and every library collective."""
    return set(POINT_TO_POINT) | set(QUERIES) | (set() if point_to_point else set(CONSTRUCTORS))


def reason(symbol, task, point_to_point=True):
    """Why ``symbol`` is refused in ``task`` (a sentence), or None when it is allowed.

    Parameters
    ----------
    symbol : str
        An undefined symbol of the student's object.
    task : str
        What the lab asks, for the sentence ("lab 2 asks you to build the allgather from
        point-to-point calls").
    """
    name = SMPI_ALIASES.get(symbol, symbol)
    if DATA.match(name) or name in LIBC:
        return None
    if name in allowed_functions(point_to_point):
        return None
    if not point_to_point and (COLLECTIVES.match(name) or name == "MPI_Barrier"):
        return None
    for pattern, why in REFUSED:
        if pattern.match(name):
            if why.startswith("MPI's profiling"):
                return f"calls {name}, {why.format(mpi=name[1:])}: {task}"
            return f"calls {name} ({why}), which an algorithm file may not use"
    if COLLECTIVES.match(name):
        return f"calls {name}: {task}"
    if name.startswith("MPI_"):
        return (
            f"calls {name}, which is not one of the calls this task allows (MPI_Send, MPI_Recv, "
            f"MPI_Sendrecv, MPI_Isend, MPI_Irecv, MPI_Wait..., and questions about communicators and "
            f"datatypes): {task}"
        )
    return (
        f"calls {name}, which is defined nowhere the grader links with (a link error: define it in "
        "the file), or is a library function an algorithm file may not use (allowed: MPI's "
        "point-to-point calls and queries, and C's memory, string, printing and maths functions)"
    )


def _tool(argv, work, timeout):
    res = sandbox.run(argv, cwd=work, timeout=timeout)
    if not res.ok:
        raise Refused(f"{argv[-1]} could not be inspected ({argv[0]}): {(res.stderr or res.stdout)[-300:]}")
    return res.stdout


def check_object(work, obj, name, task, point_to_point=True, timeout=60):
    """Refuse an object whose symbols its task does not allow (see the module's docstring).

    Parameters
    ----------
    work : str
        The scratch directory that holds ``obj``.
    obj : str
        The student's object file (in ``work``).
    name : str
        The student's file, named in the message.
    task : str
        What the lab asks, for the message.
    point_to_point : bool
        The task builds a collective from point-to-point messages: no library collective, no
        communicator constructor.

    Raises
    ------
    Refused
        Naming every refused symbol with its reason.
    """
    undefined = sorted(set(_tool(["nm", "-u", "--format=posix", obj], work, timeout).split("\n")) - {""})
    undefined = [line.split()[0] for line in undefined if line.split()]
    problems = [f"{name} {why}" for why in (reason(s, task, point_to_point) for s in undefined) if why]
    defined = _tool(["nm", "--defined-only", "--format=posix", obj], work, timeout)
    for line in defined.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in "TtWwDdBb" and re.match(r"^P?MPI_", parts[0]):
            problems.append(
                f"{name} defines {parts[0]}: an algorithm file may not replace MPI's functions "
                "(call them; name your own helpers otherwise)"
            )
    for sym in sorted(_addresses_taken(_tool(["readelf", "-rW", obj], work, timeout), undefined)):
        shown = SMPI_ALIASES.get(sym, sym)
        problems.append(
            f"{name} takes the address of {shown} (a function pointer): call MPI's and C's "
            "functions directly, where the grader sees the call"
        )
    if _SYSCALL_INSN.search(
        _tool(["objdump", "-d", "--no-show-raw-insn", obj], work, timeout).replace("\t", " ")
    ):
        problems.append(
            f"{name} holds a raw system-call instruction (inline assembly), which an algorithm "
            "file may not use"
        )
    if problems:
        raise Refused("; ".join(dict.fromkeys(problems)))


def _addresses_taken(relocations, undefined):
    """Undefined functions the object refers to other than by a call: relocations of another type
    against a symbol that is neither data nor a callback MPI predefines."""
    out = set()
    functions = {s for s in undefined if not DATA.match(SMPI_ALIASES.get(s, s))}
    for line in relocations.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[2].startswith("R_X86_64_") and parts[4] in functions:
            if parts[2] not in _CALL_RELOCATIONS:
                out.add(parts[4])
    return out
