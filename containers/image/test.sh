#!/bin/sh
# The %test of every mpilab image (both flavours, both variants): `apptainer build` runs it at
# the end of a build, `apptainer test IMAGE` reruns it (as root on a VM without
# CAP_SYS_RESOURCE: `apptainer test --no-privs IMAGE`). The flavour and the variant come from
# the image's labels, which this test checks against what is really inside.
set -eu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# no munged runs in a build: without this each mpirun retries munge's socket for 2.3 s
# (mpilab.core.vocabulary.OPENMPI_PMIX_ENV)
export PMIX_MCA_psec="${PMIX_MCA_psec:-^munge}"
here=$(cd "$(dirname "$0")" && pwd)
kit=/opt/mpilab
fail() { echo "image test: $*" >&2; exit 1; }
label() {
    python3 -c 'import json, sys; print(json.load(open("/.singularity.d/labels.json")).get(sys.argv[1], ""))' "$1"
}
flavour=$(label org.mpilab.flavour)
variant=$(label org.mpilab.variant)

case "$flavour" in
    openmpi)
        mpicc=mpicc.openmpi; mpirun="mpirun.openmpi --oversubscribe"; library="Open MPI"
        mpi_version=$(mpirun.openmpi --version | sed -n 's/^mpirun[^ ]* ([^)]*) \([0-9][0-9.]*\).*/\1/p')
        # bcast algorithm 3 (pipeline) forced through coll_tuned, as seed 000's job does
        force_bcast="--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm 3" ;;
    mpich)
        mpicc=mpicc.mpich; mpirun=mpirun.mpich; library=MPICH
        mpi_version=$(mpichversion | sed -n 's/^MPICH Version:[[:space:]]*//p')
        force_bcast="-genv MPIR_CVAR_DEVICE_COLLECTIVES none -genv MPIR_CVAR_COLLECTIVE_FALLBACK error -genv MPIR_CVAR_BCAST_INTRA_ALGORITHM binomial" ;;
    *) fail "label org.mpilab.flavour is '$flavour'; valid: openmpi, mpich" ;;
esac

# The variant: a student image has no solutions/ and no grader/, an instructor image both.
case "$variant" in
    student)
        for d in solutions grader; do
            if [ -e "$kit/$d" ]; then fail "student image contains $d/"; fi
        done ;;
    instructor)
        for d in solutions grader; do
            if [ ! -d "$kit/$d" ]; then fail "instructor image lacks $d/"; fi
        done ;;
    *) fail "label org.mpilab.variant is '$variant'; valid: student, instructor" ;;
esac

# The labels (what `apptainer inspect` shows) name what is really inside.
kit_version=$(python -c 'import mpilab; print(mpilab.__version__)')
for pair in "org.mpilab.mpi.version $mpi_version" "org.mpilab.kit.version $kit_version"; do
    # shellcheck disable=SC2086 # split "label value" into $1 $2
    set -- $pair
    have=$(label "$1")
    [ "$have" = "$2" ] || fail "label $1 is '$have' but the image has '$2': fix %labels"
done
osu_title=$($mpirun -np 2 osu_latency -m 1:1 -i 2 -x 1 | sed -n 's/^# OSU MPI Latency Test v//p')
[ "$osu_title" = "$(label org.mpilab.osu.version)" ] \
    || fail "label org.mpilab.osu.version is '$(label org.mpilab.osu.version)' but osu_latency says v$osu_title"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MPLCONFIGDIR="$work/matplotlib"     # the image is read-only, $HOME may be too
$mpicc -O2 -o "$work/smoke" "$here/smoke_allgather.c"
$mpirun -np 3 "$work/smoke"
smpicc -O2 -o "$work/smoke_smpi" "$here/smoke_allgather.c"
smpirun -np 4 -platform "$here/smoke_platform.xml" "$work/smoke_smpi"
# the correctness sweep of the reference algorithms, on the image's MPI and under SMPI
$mpirun -np 3 "$kit/c_reference/build/$flavour/check_allgather" --quick
smpirun -np 4 -platform "$here/smoke_platform.xml" "$kit/c_reference/build/smpi/check_allgather" --quick
# every lab's C skeleton compiles with the image's MPI, as a student's first attempt must
for skel in "$kit"/labs/*/*.c; do
    [ -e "$skel" ] || continue
    $mpicc -std=c99 -Wall -c -o "$work/skeleton.o" "$skel"
done
# OSU's collectives with a forced algorithm, as students run them (on PATH from /opt/osu/bin)
# shellcheck disable=SC2086 # $force_bcast is the launcher's options, one word each
$mpirun -np 2 $force_bcast osu_bcast -m 1024:1024 -i 5 -x 1 -f | grep -q '^1024 '
for prog in osu_reduce osu_allgather; do
    $mpirun -np 2 "$prog" -m 1024:1024 -i 5 -x 1 | grep -q '^1024 ' || fail "$prog printed no 1024-byte row"
done
$mpirun -np 2 python -c "from mpi4py import MPI; c = MPI.COMM_WORLD; assert c.Get_size() == 2, c.Get_size(); assert '$library' in MPI.Get_library_version()"
python -c 'import numpy, matplotlib, jupyterlab, nbgrader, ipyparallel, mpi4py, mpilab'
# the kit's JupyterLab extension (the unsaved-files warning), when the build had it
if [ -d "$here/labextension/mpilab-saved-check" ]; then
    jupyter labextension list 2>&1 | grep -q 'mpilab-saved-check v[0-9.]* .*enabled.*OK' \
        || fail "jupyter labextension list does not show mpilab-saved-check enabled and OK"
else
    echo "image test: no mpilab-saved-check extension in this build (the host had no Node.js/npm)"
fi
echo "mpilab $flavour $variant image: test passed"
