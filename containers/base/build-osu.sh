#!/bin/sh
# Build the OSU Micro-Benchmarks into an image, against the image's MPI (run by %post):
#   sh build-osu.sh openmpi|mpich SOURCE
# SOURCE is a URL (OSU's download page by default, see the definition files' OSU_SOURCE) or a
# tarball inside the build (scripts/build-image.sh stages a local one in /.mpilab-build/).
# Installs to /opt/osu, links every osu_* program into /opt/osu/bin (on PATH in the image) and
# labels the image with the version: org.mpilab.osu.version, org.mpilab.osu.source.
set -eu
flavour=$1
source=$2
case "$flavour" in
    openmpi) cc=mpicc.openmpi; cxx=mpicxx.openmpi ;;
    mpich) cc=mpicc.mpich; cxx=mpicxx.mpich ;;
    *) echo "build-osu: unknown flavour '$flavour'; valid: mpich, openmpi" >&2; exit 2 ;;
esac
work=$(mktemp -d)
case "$source" in
    http://*|https://*) curl -fsSL --retry 3 -o "$work/osu.tar.gz" "$source" ;;
    *)
        if [ ! -f "$source" ]; then
            echo "build-osu: OSU_SOURCE '$source' is neither a URL nor a tarball in the build" \
                 "(give scripts/build-image.sh a local path: it stages it)" >&2
            exit 1
        fi
        cp "$source" "$work/osu.tar.gz" ;;
esac
mkdir "$work/src"
tar -C "$work/src" --strip-components=1 -xzf "$work/osu.tar.gz"
cd "$work/src"
./configure CC="$cc" CXX="$cxx" --prefix=/opt/osu > "$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" > "$work/make.log" 2>&1 || { tail -n 30 "$work/make.log" >&2; exit 1; }
make install > /dev/null
version=$(sed -n "s/^PACKAGE_VERSION='\(.*\)'$/\1/p" configure)
mkdir -p /opt/osu/bin
find /opt/osu/libexec -type f -name 'osu_*' -perm -u+x -exec ln -sf {} /opt/osu/bin/ \;
for prog in osu_bcast osu_reduce osu_allgather osu_latency; do
    [ -x "/opt/osu/bin/$prog" ] || { echo "build-osu: $prog was not built" >&2; exit 1; }
done
case "$source" in
    /.mpilab-build/*) origin="local tarball $(basename "$source")" ;;
    *) origin=$source ;;
esac
if [ -n "${APPTAINER_LABELS:-}" ]; then
    printf 'org.mpilab.osu.version %s\norg.mpilab.osu.source %s\n' "$version" "$origin" >> "$APPTAINER_LABELS"
fi
cd /
rm -rf "$work"
echo "build-osu: OSU $version built with $cc into /opt/osu ($(find /opt/osu/bin -mindepth 1 -maxdepth 1 | wc -l) programs in /opt/osu/bin)"
