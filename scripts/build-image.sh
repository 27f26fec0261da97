#!/bin/sh
# Build the mpilab Apptainer image of one MPI flavour: scripts/build-image.sh openmpi|mpich [instructor]
# (make image FLAVOUR=openmpi|mpich [VARIANT=instructor]). Needs Apptainer >= 1.2 (for --build-arg).
set -eu
flavour=${1:-${FLAVOUR:-openmpi}}
variant=${2:-${VARIANT:-student}}
case "$flavour" in openmpi|mpich) ;; *) echo "build-image: unknown flavour '$flavour'; valid: mpich, openmpi" >&2; exit 2 ;; esac
case "$variant" in student|instructor) ;; *) echo "build-image: unknown variant '$variant'; valid: instructor, student" >&2; exit 2 ;; esac
if ! command -v apptainer >/dev/null 2>&1; then
    cat >&2 <<MSG
build-image: apptainer is not installed, so the image cannot be built here.
  Install Apptainer >= 1.2: https://apptainer.org/docs/admin/main/installation.html
  (Ubuntu: sudo add-apt-repository ppa:apptainer/ppa && sudo apt install apptainer;
   Debian bookworm has no package: use the .deb from https://github.com/apptainer/apptainer/releases).
  Without Apptainer you can still check the definition file in a chroot (root needed):
    mpilab image check containers/mpilab-$flavour.def
MSG
    exit 3
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# A clean build context: the repository without VCS, venvs and build products.
tar -C "$repo" --exclude=.git --exclude=.venv --exclude=build --exclude=__pycache__ \
    --exclude='*.egg-info' --exclude='*.sif' -cf - . | tar -C "$ctx" -xf -
out="$repo/mpilab-$flavour.sif"
if [ "$variant" = instructor ]; then out="$repo/mpilab-$flavour-instructor.sif"; fi
cd "$ctx"
apptainer build --fakeroot --force --build-arg VARIANT="$variant" "$out" "$repo/containers/mpilab-$flavour.def"
echo "built $out"
