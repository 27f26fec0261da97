"""Building a student's C file, alone or with a checking harness, for one flavour.

Everything the grader and the labs compile of a student's C goes through :func:`build`, in a
fresh scratch directory under :mod:`mpilab.grade.sandbox`'s limits, into which the trusted side
copies every file the build needs (the harness, its header, the kit's ``labprov.h``; never
anything of the answer key). With a harness, the student's file is compiled on its own first
(:func:`seal_object`): it may not run code before ``main``, may call only what its task allows
(:mod:`mpilab.grade.symbols`: no library collective, no ``dlsym``, no file or process calls
...), and keeps only the functions the harness calls global, so it cannot stand in for a
function the harness relies on. Every program is linked with the maths library (``-lm``): a
Bruck that calls ``log2()`` links here as it does under ``smpicc``. :func:`build_allgather`
(lab 2) and :func:`build_bcast` (lab 6) build the shipped harnesses; :mod:`mpilab.grade.runner`
runs them.
"""

import importlib.resources
import os
import re
import shutil

from mpilab.core import paths
from mpilab.core.errors import one_of
from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import sandbox, symbols
from mpilab.model import algorithms

#: Linked into every student program the grader builds: names the rank that calls MPI_Abort.
ABORT_REPORTER = "report_abort.c"
#: The case harnesses' shared header (:mod:`mpilab.grade.casedata` is its other side).
HARNESS_HEADER = "harness.h"
#: The kit's provenance block (``c_reference/include``), printed by a harness's timing mode.
PROVENANCE_HEADER = "labprov.h"
#: Lab 3's node shim for SMPI (see docs/DEVELOPING.md, "Nodes under SMPI").
SMPI_NODES = ("smpi_nodes.h", "smpi_nodes.c")


def data_file(*parts):
    """A file shipped in ``mpilab/data`` (a Traversable; use :func:`importlib.resources.as_file`)."""
    return importlib.resources.files("mpilab").joinpath("data", *parts)


class BuildError(AssertionError):
    """The student's code does not build; the message has the compiler's or linker's words.
    ``title`` is what the failed case calls the step ("compiles", "links")."""

    title = "compiles"


class LinkError(BuildError):
    """Every file compiles, and the program does not link (a function no file defines ...)."""

    title = "links"


class Refused(BuildError):
    """The student's object calls or holds what its task does not allow (:mod:`mpilab.grade.symbols`)."""

    title = "uses only what the task allows"


def kit_file(*parts):
    """A file of the kit's C tree (``c_reference/...``) a build copies in."""
    return paths.c_reference_dir().joinpath(*parts)


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
    task=None,
    point_to_point=True,
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
    task : str, optional
        With ``keep``: what the lab asks ("lab 2 asks you to build the allgather from
        point-to-point calls"); each student object must then call only what the task allows
        (:func:`mpilab.grade.symbols.check_object`), and the message says why not.
    point_to_point : bool
        The task allows no library collective (:func:`mpilab.grade.symbols.check_object`).

    Returns
    -------
    str
        The scratch directory; the caller removes it.

    Raises
    ------
    BuildError
        A missing file or a failed build (the compiler's messages, shortened);
        :class:`LinkError` when only the link failed, :class:`Refused` for a student object the
        task does not allow.
    """
    if flavour not in COMPILERS:
        raise one_of("flavour", flavour, COMPILERS)
    sources = [os.fspath(f) for f in sources]
    student = os.path.basename(os.fspath(student or sources[-1]))
    for f in sources:
        if not os.path.isfile(f):
            raise BuildError(f"{os.path.basename(f)} not found: keep the skeleton file next to the notebook")
    shipped = [ABORT_REPORTER, HARNESS_HEADER] + (
        list(SMPI_NODES) if smpi_nodes and flavour == "smpi" else []
    )
    if work is None:
        work = sandbox.scratch_dir(sources)
    else:
        for f in sources:
            shutil.copy(f, work)
    for name in shipped:
        with importlib.resources.as_file(data_file("lab3" if name in SMPI_NODES else "grading", name)) as f:
            shutil.copy(f, work)
    provenance = kit_file("include", PROVENANCE_HEADER)
    if provenance.exists():
        shutil.copy(provenance, work)
    # the scratch directory's name stays out of the program (smpicc hands the compiler absolute
    # paths, and __FILE__ lands in the binary): the same sources build the same bytes, so the
    # student release (its compiled references) and the image built from it are reproducible
    cc = [COMPILERS[flavour], "-O1", "-std=c99", f"-ffile-prefix-map={os.path.realpath(work)}=."]
    if smpi_nodes and flavour == "smpi":
        cc += ["-include", SMPI_NODES[0]]
    names = [os.path.basename(f) for f in sources]
    if keep is not None:
        names = names[:1] + [
            seal_object(
                work, cc + [f"-D{d}" for d in defines], name, keep, flavour, timeout, task, point_to_point
            )
            for name in names[1:]
        ]
    cmd = cc + ([SMPI_NODES[1]] if smpi_nodes and flavour == "smpi" else []) + names + [ABORT_REPORTER]
    cmd += [f"-D{d}" for d in defines] + list(extra) + ["-o", program, "-lm"]
    res = sandbox.run(cmd, cwd=work, timeout=timeout)
    if not res.ok:
        raise _not_compiled(student, flavour, res, linking=keep is not None)
    return work


#: The linker's words for what it could not do (GNU ld, through the compiler driver).
_LINKER = re.compile(r"undefined reference to|multiple definition of|ld returned \d+ exit status")


def _not_compiled(name, flavour, res, linking=False):
    """The BuildError of a failed compiler run: the compiler's last words; a LinkError when the
    files compiled (``linking``: the student's file on its own) and the linker failed."""
    said = (res.stderr or res.stdout)[-2000:]
    if linking and _LINKER.search(said):
        lines = [ln for ln in said.splitlines() if _LINKER.search(ln) or "in function" in ln]
        return LinkError(
            f"{name} compiles but does not link for {flavour} (a link error):\n" + "\n".join(lines[-12:])
        )
    return BuildError(f"{name} does not compile for {flavour}:\n{said}")


#: Sections whose code runs before ``main``: constructors.
_BEFORE_MAIN = re.compile(r"^\s*\[\s*\d+\]\s+(\.init_array|\.ctors|\.preinit_array|\.init)\b", re.M)


def seal_object(work, cc, name, keep, flavour, timeout, task=None, point_to_point=True):
    """Compile the student's ``name`` alone into an object that keeps only the global symbols
    ``keep``; returns the object's name. BuildError if it does not compile or has a constructor;
    with ``task``, Refused if it calls what the task does not allow (:mod:`mpilab.grade.symbols`)."""
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
    if task is not None:
        try:
            symbols.check_object(work, obj, name, task, point_to_point, timeout)
        except symbols.Refused as exc:
            raise Refused(str(exc)) from None
    res = sandbox.run(
        ["objcopy", *[f"--keep-global-symbol={k}" for k in keep], obj], cwd=work, timeout=timeout
    )
    if not res.ok:
        raise BuildError(f"{name}: objcopy failed: {(res.stderr or res.stdout)[-500:]}")
    return obj


def task(collective, name):
    """What a lab asks of a skeleton, in the words of a refusal: "lab 2 asks you to build the
    allgather from point-to-point calls (MPI_Send, MPI_Recv, MPI_Sendrecv, ...)"."""
    a = algorithms.entry(collective, name)
    what = collective.replace("_block", "").replace("_", "-")
    lab = (a.lab or "the lab").replace("lab", "lab ")
    if a.point_to_point:
        calls = "MPI_Send, MPI_Recv, MPI_Sendrecv, ..."
        return f"{lab} asks you to build the {what} from point-to-point calls ({calls})"
    return f"{lab} asks for the {name.replace('_', '-')} {what}"


#: The allgather harness and the function each lab-2 skeleton defines.
ALLGATHER_HARNESS = "check_student.c"
STUDENT_FUNCTIONS = {name: a.skeleton for name, a in algorithms.skeletons("allgather").items()}
#: The kit's reference allgathers ``--time-reference`` times, compiled from the kit's own sources
#: (the student's side of ``c_reference``; never the answer key's build).
REFERENCE_SOURCES = ("allgather/gather_bcast.c", "allgather/pairwise.c", "allgather/common.c")
REFERENCE_HEADERS = ("include/labcoll.h", "include/labcoll_impl.h")


def build_allgather(c_file, algorithm, flavour, work=None, reference=False):
    """Build the allgather harness with a student's file (``check_student`` or ``check_student_smpi``).

    With ``reference`` the kit's reference algorithms (gather_bcast and pairwise, from the kit's
    sources, copied in) are built in too, for ``--time-reference``.
    """
    if algorithm not in STUDENT_FUNCTIONS:
        raise one_of("skeleton algorithm", algorithm, STUDENT_FUNCTIONS)
    extra, defines = [], [f"STUDENT_FN={STUDENT_FUNCTIONS[algorithm]}"]
    if reference:
        missing = [f for f in REFERENCE_SOURCES + REFERENCE_HEADERS if not kit_file(f).exists()]
        if missing:
            raise BuildError(
                f"the kit's reference allgathers are missing ({', '.join(missing)} in c_reference)"
            )
        work = work or sandbox.scratch_dir([])
        for f in REFERENCE_SOURCES + REFERENCE_HEADERS:
            shutil.copy(kit_file(f), work)
        defines.append("WITH_REFERENCE")
        extra = ["-I.", *[os.path.basename(f) for f in REFERENCE_SOURCES]]
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
            task=task("allgather", algorithm),
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
                task=task("bcast", require[0] if len(require) == 1 else "linear"),
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
