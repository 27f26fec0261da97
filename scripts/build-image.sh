#!/usr/bin/env bash
# Build an mpilab Apptainer image:
#   scripts/build-image.sh openmpi|mpich [student|instructor]
#   make image FLAVOUR=openmpi|mpich [VARIANT=instructor] [OSU=URL|TARBALL] [STUDENT_TREE=DIR]
# Writes build/images/mpilab-<flavour>.sif (student) or mpilab-<flavour>-instructor.sif
# (MPILAB_IMAGE_DIR names another folder), in layers, each built on the SIF of the one below
# (Bootstrap: localimage) after that one is built or found up to date:
#   mpilab-<flavour>-base.sif        containers/mpilab-<flavour>.def: Debian, the MPI, SMPI, Python, OSU
#   mpilab-<flavour>.sif             containers/mpilab-student.def: + the student's tree, its C code built
#   mpilab-<flavour>-instructor.sif  containers/mpilab-instructor.def: + solutions/ and grader/
#
# A layer whose inputs have not changed since it was built is kept: a hash of its definition
# file, its staged build context, its build arguments and the layer below is stored next to it
# (<image>.inputs). FORCE=1 rebuilds. OSU_SOURCE (make's OSU) is the OSU Micro-Benchmarks tarball,
# a URL or a local file (default: OSU's download URL in containers/mpilab-<flavour>.def).
# Exit codes: 0 built or up to date, 2 bad arguments, 3 no apptainer, other: the build failed.
set -euo pipefail

# Copy the files of the repository that git tracks or would add (untracked, not ignored) under
# the given paths into DEST; outside a git checkout, the folders minus the usual build products.
copy_repo_files() {    # copy_repo_files DEST PATH...
    local dest=$1; shift
    mkdir -p "$dest"
    if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$repo" && git ls-files -z --cached --others --exclude-standard -- "$@" \
            | while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done \
            | tar --null -T - -cf -) | tar -C "$dest" -xf -
    else
        (cd "$repo" && tar --exclude-vcs --exclude=.venv --exclude='.venv-*' --exclude=build \
            --exclude=__pycache__ --exclude='*.egg-info' --exclude=results --exclude=test-output \
            --exclude=.ipynb_checkpoints --exclude=dist -cf - "$@") | tar -C "$dest" -xf -
    fi
}

# THE STUDENT'S TREE: what /opt/mpilab holds in the student image (the image adds the C code it
# builds there). STUDENT_TREE (make's STUDENT_TREE) names a folder whose contents are copied as
# they are, e.g. dist/student/ as `make student-release` writes it. Unset: the repository without
# the instructor's solutions/ and grader/ and the developers' tests/ (until student-release
# exists; then its dist/student/ becomes the default here and in tests/test_containers.py).
stage_student_tree() {
    if [ -n "${STUDENT_TREE:-}" ]; then
        mkdir -p "$1" && cp -a "$STUDENT_TREE/." "$1"
    else   # the student release (make student-release): no answer key, no grader, no tests
        local py="$repo/.venv/bin/python"
        [ -x "$py" ] || py=python3
        PYTHONPATH="$repo" "$py" -m mpilab.grade.release "$1" >/dev/null
    fi
}

# The kit's Python dependencies and its [lab] extra, one a line, from pyproject.toml: the system
# layer installs these, so an edit elsewhere in pyproject.toml (a pytest marker) does not
# rebuild it. Needs a Python with tomllib (3.11+): the kit's .venv, else python3.
kit_requirements() {
    local py
    for py in "$repo/.venv/bin/python" python3; do
        if "$py" -c 'import tomllib' 2>/dev/null; then
            "$py" -c 'import sys, tomllib; p = tomllib.load(open(sys.argv[1], "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["lab"]))' \
                "$repo/pyproject.toml"
            return
        fi
    done
    echo "build-image: no Python 3.11+ (with tomllib) to read $repo/pyproject.toml: run 'make build' first, or install python3 >= 3.11" >&2
    exit 2
}

# The CA bundle the host names for a TLS-intercepting proxy (PIP_CERT, SSL_CERT_FILE,
# REQUESTS_CA_BUNDLE, or `cert =` in a pip configuration file); nothing on a machine without one.
host_ca_bundle() {
    local v f c
    for v in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" "${REQUESTS_CA_BUNDLE:-}"; do
        if [ -n "$v" ] && [ -f "$v" ]; then echo "$v"; return; fi
    done
    for f in "${PIP_CONFIG_FILE:-}" /etc/pip.conf /etc/xdg/pip/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
        [ -n "$f" ] && [ -f "$f" ] || continue
        c=$(sed -n 's/^[[:space:]]*cert[[:space:]]*=[[:space:]]*//p' "$f" | tail -n 1)
        if [ -n "$c" ] && [ -f "$c" ]; then echo "$c"; return; fi
    done
}

# sha256 of a definition file, the build arguments and every file of a build context (path,
# mode, content), except inputs/host-ca.crt, which changes how pip connects, not the image.
inputs_hash() {    # inputs_hash DEF CONTEXT ARG...
    local def=$1 ctx=$2; shift 2
    {
        apptainer --version
        sha256sum < "$def"
        printf '%s\n' "$@"
        (cd "$ctx" && find . \( -type f -o -type l \) ! -path ./inputs/host-ca.crt -printf '%m %p %l\n' | LC_ALL=C sort)
        (cd "$ctx" && find . -type f ! -path ./inputs/host-ca.crt -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
    } | sha256sum | cut -c1-64
}

# mksquashfs's gzip at level 1 instead of its default 9: measured here on the 1.6 GB tree of an
# image, 25 s instead of 324 s for a SIF of 555 MB instead of 492 MB, still gzip (which every
# kernel and squashfuse mount). MPILAB_MKSQUASHFS_ARGS="" gives mksquashfs's default.
squash_args=${MPILAB_MKSQUASHFS_ARGS--Xcompression-level 1}

# build OUT DEF CONTEXT ARG...: apptainer build --fakeroot unless OUT's inputs are unchanged.
build() {
    local out=$1 def=$2 ctx=$3; shift 3
    local args=() a want started
    for a in "$@"; do args+=(--build-arg "$a"); done
    want=$(inputs_hash "$def" "$ctx" "$@" "mksquashfs $squash_args")
    exec 8> "$out.lock"
    flock 8           # another session building the same image: wait for it, then reuse it
    if [ -z "${FORCE:-}" ] && [ -f "$out" ] && [ "$(cat "$out.inputs" 2>/dev/null)" = "$want" ]; then
        echo "build-image: $out is up to date (inputs $(cut -c1-12 <<< "$want"))"
        return 0
    fi
    rm -f "$out.inputs"
    started=$(date +%s)
    # Never with APPTAINER_NO_PRIVS: apt in %post then fails (setgroups); it is for exec/run only.
    # --force replaces OUT.part and lets %labels replace a label of the image below (the variant).
    (cd "$ctx" && env -u APPTAINER_NO_PRIVS -u SINGULARITY_NO_PRIVS \
        apptainer build --fakeroot --force --mksquashfs-args "$squash_args" "${args[@]}" "$out.part" "$def")
    mv -f "$out.part" "$out"
    echo "$want" > "$out.inputs"
    echo "build-image: built $out in $(( $(date +%s) - started )) s, $(du -h "$out" | cut -f1)"
}

# The whole script runs from this function, read before it starts: editing or checking out the
# file during a long build cannot change what the running build does.
main() {
    local flavour=${1:-${FLAVOUR:-openmpi}} variant=${2:-${VARIANT:-student}}
    case "$flavour" in openmpi|mpich) ;; *) echo "build-image: unknown flavour '$flavour'; valid: mpich, openmpi" >&2; exit 2 ;; esac
    case "$variant" in student|instructor) ;; *) echo "build-image: unknown variant '$variant'; valid: instructor, student" >&2; exit 2 ;; esac
    repo=$(cd "$(dirname "$0")/.." && pwd)
    if [ -n "${STUDENT_TREE:-}" ] && [ ! -f "$STUDENT_TREE/pyproject.toml" ]; then
        echo "build-image: STUDENT_TREE '$STUDENT_TREE' is not a student tree (no pyproject.toml in it);" \
             "give a folder such as dist/student, or leave it unset for the repository minus solutions/, grader/, tests/" >&2
        exit 2
    fi
    if ! command -v apptainer >/dev/null 2>&1; then
        cat >&2 <<MSG
build-image: apptainer is not installed, so the image cannot be built here.
  Install Apptainer >= 1.2: https://apptainer.org/docs/admin/main/installation.html
  (Ubuntu: sudo add-apt-repository ppa:apptainer/ppa && sudo apt install apptainer;
   Debian bookworm has no package: use the .deb from https://github.com/apptainer/apptainer/releases,
   or, with the kit's vendored source in ../shared/vendor, run scripts/install-apptainer.sh as root).
MSG
        exit 3
    fi
    # OSU Micro-Benchmarks: a URL goes to the build as it is, a local tarball is staged.
    local osu_args=()
    case "${OSU_SOURCE:-}" in
        "") ;;
        http://*|https://*) osu_args=("OSU_SOURCE=$OSU_SOURCE") ;;
        *)
            if [ ! -f "$OSU_SOURCE" ]; then
                echo "build-image: OSU_SOURCE '$OSU_SOURCE' is neither a URL (http://, https://) nor a file" >&2
                exit 2
            fi
            osu_args=("OSU_SOURCE=/.mpilab-build/$(basename "$OSU_SOURCE")") ;;
    esac
    local images=${MPILAB_IMAGE_DIR:-$repo/build/images}
    mkdir -p "$images"
    images=$(cd "$images" && pwd)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpilab-image.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT

    # 1. The flavour's system layer (mpilab-FLAVOUR.def): inputs/ -> /.mpilab-build, removed by %post.
    local ctx="$tmp/base" ca
    mkdir -p "$ctx/inputs"
    cp "$repo/containers/base/build-osu.sh" "$ctx/inputs/"
    kit_requirements > "$ctx/inputs/requirements.txt"
    ca=$(host_ca_bundle)
    if [ -n "$ca" ]; then cp "$ca" "$ctx/inputs/host-ca.crt"; else : > "$ctx/inputs/host-ca.crt"; fi
    if [ ${#osu_args[@]} -gt 0 ] && [ -f "${OSU_SOURCE:-}" ]; then cp "$OSU_SOURCE" "$ctx/inputs/"; fi
    local base="$images/mpilab-$flavour-base.sif"
    build "$base" "$repo/containers/mpilab-$flavour.def" "$ctx" "${osu_args[@]}"

    # 2. The student image (mpilab-student.def): kit/ -> /opt/mpilab, image/ -> /opt/mpilab-image.
    ctx="$tmp/student"
    stage_student_tree "$ctx/kit"
    mkdir -p "$ctx/image"
    cp -a "$repo/containers/image/." "$ctx/image/"
    cp "$repo/containers/README.md" "$ctx/image/README.md"
    # the kit's JupyterLab extension (labext/), as make setup built it with Node.js and npm
    if [ -f "$repo/build/labextension/mpilab-saved-check/package.json" ]; then
        mkdir -p "$ctx/image/labextension"
        cp -a "$repo/build/labextension/mpilab-saved-check" "$ctx/image/labextension/"
    else
        echo "build-image: no build/labextension/mpilab-saved-check (make setup builds it when Node.js and npm are there):"
        echo "build-image: the image's JupyterLab will not warn when a lab's file has unsaved edits"
    fi
    cp "$base.inputs" "$ctx/base.inputs"          # the layer below is an input too
    local student="$images/mpilab-$flavour.sif"
    build "$student" "$repo/containers/mpilab-student.def" "$ctx" "BASE_IMAGE=$base"
    [ "$variant" = instructor ] || return 0

    # 3. The instructor image (mpilab-instructor.def): the student image plus solutions/ and grader/.
    ctx="$tmp/instructor"
    copy_repo_files "$ctx" solutions grader
    cp "$student.inputs" "$ctx/student.inputs"
    build "$images/mpilab-$flavour-instructor.sif" "$repo/containers/mpilab-instructor.def" "$ctx" \
        "STUDENT_IMAGE=$student"
}

main "$@"
