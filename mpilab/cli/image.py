"""``mpilab image``: check the Apptainer definition files without Apptainer.

``mpilab image check DEF`` builds a definition file in a debootstrap chroot and runs its
``%test`` and ``%runscript`` (see :mod:`mpilab.cluster.apptainer_check`, which is test tooling, not a
replacement for Apptainer). ``mpilab image host-check VERSION`` warns if the host Open MPI's
major version differs from an image's.
"""

import argparse
import os
import sys
import tempfile
import warnings

from mpilab import cli
from mpilab.cluster import apptainer_check
from mpilab.measure import launch


def configure(p):
    """Add the arguments of ``mpilab image`` to its parser ``p``."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = p.add_subparsers(dest="image_cmd", required=True)
    c = sub.add_parser("check", help="build DEF in a debootstrap chroot, run %%test and %%runscript")
    c.add_argument("definition", metavar="DEF", help="the .def file, e.g. containers/mpilab-openmpi.def")
    c.add_argument("--build-arg", action="append", default=[], metavar="K=V",
                   help="a {{ K }} value, e.g. VARIANT=instructor (repeatable)")
    c.add_argument("--keep", metavar="DIR", help="build the chroot in DIR and keep it")
    c.add_argument("--context", metavar="DIR",
                   help="directory %%files sources are relative to (default: a clean copy of the "
                        "repository holding DEF)")
    c.add_argument("--base", metavar="TARBALL", help="start from this base tree instead of debootstrap")
    c.add_argument("--no-runscript", action="store_true", help="skip starting JupyterLab")
    c.add_argument("--start-from", metavar="DIR",
                   help="build on top of a tree an earlier check kept with --keep (e.g. the student "
                        "build, to check --build-arg VARIANT=instructor without a second full build)")
    c.set_defaults(func=_check)
    h = sub.add_parser("host-check", help="warn if the host Open MPI's major version differs from an image's")
    h.add_argument("image_version", metavar="VERSION",
                   help="the image's org.mpilab.mpi.version label, e.g. 4.1.4")
    h.add_argument("--mpirun", default="mpirun", help="host launcher to ask (default: mpirun)")
    h.set_defaults(func=_host_check)
    return p


def _check(args):
    build_args = apptainer_check.parse_build_args(args.build_arg)
    apptainer_check.parse(args.definition, build_args)  # fail fast on a bad file
    opts = dict(keep=args.keep, base=args.base, runscript=not args.no_runscript,
                start_from=args.start_from)
    if args.context:
        return _report(apptainer_check.check(args.definition, build_args, args.context, **opts))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(args.definition)))
    with tempfile.TemporaryDirectory(prefix="mpilab-ctx-") as tmp:
        ctx = apptainer_check.stage_context(repo, os.path.join(tmp, "ctx"))
        return _report(apptainer_check.check(args.definition, build_args, ctx, **opts))


def _report(result):
    print(f"ok: {result['seconds']} s, chroot size {result['size']}, apps {', '.join(result['apps'])}")
    for app, first in result.get("app_help", {}).items():
        print(f"  app {app} --help: {first}")
    for key in ("org.mpilab.mpi.version", "org.mpilab.kit.version", "org.mpilab.variant"):
        if key in result.get("labels", {}):
            print(f"  label {key}: {result['labels'][key]}")
    return 0


def _host_check(args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # printed below as the CLI's own warning
        msg = launch.warn_if_mismatch(args.image_version, args.mpirun)
    if msg:
        print(f"mpilab: warning: {msg}", file=sys.stderr)
        return 1
    print("host and image Open MPI major versions agree (or the host has no Open MPI mpirun)")
    return 0


if __name__ == "__main__":   # python -m mpilab.cli.image ARGS
    sys.exit(cli.main(["image", *sys.argv[1:]]))
