"""Building a student's C file, alone or with a checking harness, for one flavour.

Everything the grader and the labs compile of a student's C goes through :func:`build`, in a
fresh scratch directory under :mod:`mpilab.grade.sandbox`'s limits. With a harness, the
student's file is compiled on its own first (:func:`seal_object`): it may not run code before
``main`` and keeps only the functions the harness calls global, so it cannot stand in for a
function the harness relies on. :func:`build_allgather` (lab 2) and :func:`build_bcast` (lab 6)
build the shipped harnesses; :mod:`mpilab.grade.runner` runs them.
"""

import importlib.resources
import os
import re
import shutil

from mpilab.core import paths
from mpilab.core.errors import one_of
from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import sandbox
from mpilab.model import algorithms

#: Linked into every student program the grader builds: names the rank that calls MPI_Abort.
ABORT_REPORTER = "report_abort.c"
#: The header of the case harnesses' private data and sealed lines (:mod:`mpilab.grade.sealed`).
SEALED_HEADER = "sealed.h"
#: Lab 3's node shim for SMPI (see docs/DEVELOPING.md, "Nodes under SMPI").
SMPI_NODES = ("smpi_nodes.h", "smpi_nodes.c")


def data_file(*parts):
    """A file shipped in ``mpilab/data`` (a Traversable; use :func:`importlib.resources.as_file`)."""
    return importlib.resources.files("mpilab").joinpath("data", *parts)


class BuildError(AssertionError):
    """The student's code does not compile; the message has the compiler's words."""


def build(
    sources,
    flavour,
    program,
    defines=(),
    work=None,
    smpi_nodes=False,
    student=None,
    extra=(),
    timeout=120,
    keep=None,
):
    """Compile C files for one flavour in a scratch directory, under the sandbox.

    Parameters
    ----------
    sources : sequence of path
        The C files, copied in (a harness first, then the student's file).
    flavour : {"openmpi", "mpich", "smpi"}
    program : str
        Name of the executable.
    defines : sequence of str
        ``-D`` definitions, without the ``-D``.
    work : str, optional
        An existing scratch directory to build in (default: a new one).
    smpi_nodes : bool
        For SMPI: force-include the node shim (lab 3), so ``MPI_Comm_split_type`` groups ranks
        by simulated node.
    student : path, optional
        The student's file, named in a compile error (default: the last source).
    extra : sequence of str
        More compiler arguments (e.g. a library to link).
    keep : sequence of str, optional
        For a harness (the first source) with the student's files (the others): the functions
        the harness calls. Each student file is compiled on its own, refused if it runs code
        before ``main`` (a constructor: the harness's private files are still there), and keeps
        only these global symbols (:func:`seal_object`), so it cannot replace a function the
        harness calls (``MPI_Allreduce``, ``printf`` ...). Then all is linked.

    Returns
    -------
    str
        The scratch directory; the caller removes it.

    Raises
    ------
    BuildError
        A missing file or a failed build (the compiler's messages, shortened).
    """
    if flavour not in COMPILERS:
        raise one_of("flavour", flavour, COMPILERS)
    sources = [os.fspath(f) for f in sources]
    student = os.path.basename(os.fspath(student or sources[-1]))
    for f in sources:
        if not os.path.isfile(f):
            raise BuildError(f"{os.path.basename(f)} not found: keep the skeleton file next to the notebook")
    shipped = [ABORT_REPORTER, SEALED_HEADER] + (list(SMPI_NODES) if smpi_nodes and flavour == "smpi" else [])
    if work is None:
        work = sandbox.scratch_dir(sources)
    else:
        for f in sources:
            shutil.copy(f, work)
    for name in shipped:
        with importlib.resources.as_file(data_file("lab3" if name in SMPI_NODES else "grading", name)) as f:
            shutil.copy(f, work)
    # the scratch directory's name stays out of the program (smpicc hands the compiler absolute
    # paths, and __FILE__ lands in the binary): the same sources build the same bytes, so the
    # student release (its compiled references) and the image built from it are reproducible
    cc = [COMPILERS[flavour], "-O1", "-std=c99", f"-ffile-prefix-map={os.path.realpath(work)}=."]
    if smpi_nodes and flavour == "smpi":
        cc += ["-include", SMPI_NODES[0]]
    names = [os.path.basename(f) for f in sources]
    if keep is not None:
        names = names[:1] + [
            seal_object(work, cc + [f"-D{d}" for d in defines], name, keep, flavour, timeout)
            for name in names[1:]
        ]
    cmd = cc + ([SMPI_NODES[1]] if smpi_nodes and flavour == "smpi" else []) + names + [ABORT_REPORTER]
    cmd += [f"-D{d}" for d in defines] + list(extra) + ["-o", program]
    res = sandbox.run(cmd, cwd=work, timeout=timeout)
    if not res.ok:
        raise _not_compiled(student, flavour, res)
    return work


def _not_compiled(name, flavour, res):
    """The BuildError of a failed compiler run: the compiler's last words."""
    return BuildError(f"{name} does not compile for {flavour}:\n{(res.stderr or res.stdout)[-2000:]}")


#: Sections whose code runs before ``main``: constructors.
_BEFORE_MAIN = re.compile(r"^\s*\[\s*\d+\]\s+(\.init_array|\.ctors|\.preinit_array|\.init)\b", re.M)


def seal_object(work, cc, name, keep, flavour, timeout):
    """Compile the student's ``name`` alone into an object that keeps only the global symbols
    ``keep``; returns the object's name. BuildError if it does not compile or has a constructor."""
    obj = f"{os.path.splitext(name)[0]}.student.o"
    res = sandbox.run(cc + ["-c", name, "-o", obj], cwd=work, timeout=timeout)
    if not res.ok:
        raise _not_compiled(name, flavour, res)
    res = sandbox.run(["readelf", "-S", "-W", obj], cwd=work, timeout=timeout)
    found = _BEFORE_MAIN.search(res.stdout)
    if not res.ok or found:
        raise BuildError(
            f"{name} runs code before main (a {found.group(1) if found else 'unreadable'} "
            "section, e.g. __attribute__((constructor))): the grader does not run such a file; "
            "keep to the function the skeleton asks for"
        )
    res = sandbox.run(
        ["objcopy", *[f"--keep-global-symbol={k}" for k in keep], obj], cwd=work, timeout=timeout
    )
    if not res.ok:
        raise BuildError(f"{name}: objcopy failed: {(res.stderr or res.stdout)[-500:]}")
    return obj


#: The allgather harness and the function each lab-2 skeleton defines.
ALLGATHER_HARNESS = "check_student.c"
STUDENT_FUNCTIONS = {name: a.skeleton for name, a in algorithms.skeletons("allgather").items()}


#: The objects of the kit's reference allgathers that ``--time-reference`` links.
REFERENCE_OBJECTS = ("gather_bcast", "pairwise", "common")


def build_allgather(c_file, algorithm, flavour, work=None, reference=False):
    """Build the allgather harness with a student's file (``check_student`` or ``check_student_smpi``).

    With ``reference`` the kit's reference algorithms (their objects in
    ``c_reference/build/<flavour>/obj/allgather/``) are linked in too, for ``--time-reference``.
    """
    if algorithm not in STUDENT_FUNCTIONS:
        raise one_of("skeleton algorithm", algorithm, STUDENT_FUNCTIONS)
    extra, defines = [], [f"STUDENT_FN={STUDENT_FUNCTIONS[algorithm]}"]
    if reference:
        objs = [paths.build_dir(flavour) / "obj" / "allgather" / f"{n}.o" for n in REFERENCE_OBJECTS]
        missing = [o for o in objs if not o.exists()]
        if missing:
            raise BuildError(
                f"{missing[0]} is missing: build the reference with make -C c_reference FLAVOUR={flavour}"
            )
        defines.append("WITH_REFERENCE")
        # a confined build sees its scratch directory only: the reference's objects (not the
        # library, which holds the answer key's on the instructor's side) and header go there
        work = work or sandbox.scratch_dir([])
        for f in [*objs, paths.c_reference_dir() / "include" / "labcoll.h"]:
            shutil.copy(f, work)
        extra = [o.name for o in objs]
    program = "check_student" + ("_smpi" if flavour == "smpi" else "")
    with importlib.resources.as_file(data_file("grading", ALLGATHER_HARNESS)) as harness:
        return build(
            [harness, c_file],
            flavour,
            program,
            defines,
            work=work,
            student=c_file,
            extra=extra,
            keep=[STUDENT_FUNCTIONS[algorithm]],
        )


#: Lab 6's broadcast harness and the function each of its skeletons defines.
BCAST_HARNESS = "check_bcast.c"
BCAST_FUNCTIONS = {name: a.skeleton for name, a in algorithms.skeletons("bcast").items()}


def build_bcast(c_files, flavour, work=None, require=()):
    """Build the broadcast harness with students' files (``check_bcast`` or ``check_bcast_smpi``).

    Parameters
    ----------
    c_files : sequence of path
        Students' files, each defining one function of :data:`BCAST_FUNCTIONS` (the harness
        declares them weak: the ones not linked are left out at run time).
    flavour : {"openmpi", "mpich", "smpi"}
    work : str, optional
        An existing scratch directory to build in.
    require : sequence of str
        Algorithms of :data:`BCAST_FUNCTIONS` whose functions must be defined: the link fails
        (with the linker naming the function) when the files do not define one.

    Raises
    ------
    BuildError
    """
    require = [require] if isinstance(require, str) else list(require)
    for name in require:
        if name not in BCAST_FUNCTIONS:
            raise one_of("broadcast algorithm", name, BCAST_FUNCTIONS)
    extra = [f"-Wl,--require-defined={BCAST_FUNCTIONS[name]}" for name in require]
    program = "check_bcast" + ("_smpi" if flavour == "smpi" else "")
    files = [os.fspath(f) for f in c_files]
    with importlib.resources.as_file(data_file("grading", BCAST_HARNESS)) as harness:
        try:
            return build(
                [harness, *files],
                flavour,
                program,
                work=work,
                student=files[-1] if files else None,
                extra=extra,
                keep=list(BCAST_FUNCTIONS.values()),
            )
        except BuildError as exc:
            missing = [n for n in require if f"`{BCAST_FUNCTIONS[n]}'" in str(exc)]
            if missing:
                raise BuildError(
                    f"{os.path.basename(files[-1])} does not define "
                    f"{BCAST_FUNCTIONS[missing[0]]} (keep the skeleton's function name "
                    f"and signature):\n{exc}"
                ) from None
            raise
