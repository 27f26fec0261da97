"""Can the host's MPI launch an mpilab image's MPI? (The hybrid model of containers/README.md.)

In the hybrid model the host's ``mpirun`` or ``srun`` starts one ``apptainer exec IMAGE prog``
per rank and the MPI inside the image talks to the host's launcher: Open MPI needs the same
major version on both sides. The images carry their MPI's version in the label
``org.mpilab.mpi.version``; :func:`host_image_mismatch` compares it with the host's
``mpirun --version`` and says why a launch would fail. ``mpilab.launch``'s apptainer launcher,
``mpilab image host-check`` and the ``sweep-apptainer`` SLURM template give this warning.

(The debootstrap chroot that replayed the definition files when Apptainer could not be
installed here is gone: ``scripts/install-apptainer.sh`` builds the real one, and the tests
build, test and run the real images.)
"""

import re
import shutil
import subprocess
import warnings

_OMPI_RE = re.compile(r"\((?:Open MPI|OpenRTE)\)\s+v?(\d+)\.(\d+)(?:\.(\d+))?")


def ompi_version(text):
    """Parse an Open MPI version from ``mpirun --version`` output or a label value.

    Returns
    -------
    tuple of int or None
        ``(major, minor, patch)``; None if ``text`` is not an Open MPI version.
    """
    m = _OMPI_RE.search(text) or re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?\s*", text)
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())


def host_image_mismatch(host_text, image_text):
    """Say why a host Open MPI cannot launch an image's Open MPI (hybrid model), or None.

    Parameters
    ----------
    host_text : str
        The host's ``mpirun --version`` output.
    image_text : str
        The image's ``org.mpilab.mpi.version`` label (e.g. ``4.1.4``) or its ``mpirun --version``.

    Returns
    -------
    str or None
        A warning naming both versions when the major versions differ.
    """
    host, image = ompi_version(host_text), ompi_version(image_text)
    if host is None or image is None:
        return None
    if host[0] != image[0]:
        return (f"host Open MPI {'.'.join(map(str, host))} and the image's Open MPI "
                f"{'.'.join(map(str, image))} differ in major version; the hybrid model "
                "(mpirun/srun outside, MPI inside) needs the same major version. Load a matching "
                "module on the host or use the bind model (containers/README.md).")
    return None


def warn_if_mismatch(image_text, mpirun="mpirun"):
    """Warn (``UserWarning``) before a launch if the host Open MPI's major version differs.

    Returns
    -------
    str or None
        The warning text, if any.
    """
    exe = shutil.which(mpirun)
    if exe is None:
        return None
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    host = proc.stdout + proc.stderr
    msg = host_image_mismatch(host, image_text)
    if msg:
        warnings.warn(msg, stacklevel=2)
    return msg
