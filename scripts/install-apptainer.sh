#!/usr/bin/env bash
# Install Apptainer from the vendored source next to the repository (CI and development machines).
#
#   scripts/install-apptainer.sh          build and install Apptainer 1.5.3 into /opt/apptainer
#
# MPILAB_APPTAINER_PREFIX installs elsewhere (then /usr/local/bin is left alone).
#
# Needs root. Reads <repo>/../shared/vendor/apptainer-1.5.3-vendored.tar.gz (MPILAB_VENDOR names
# another folder), whose Go modules are vendored so the build is offline, and a Go toolchain
# (GO=/path/to/go, else `go` on PATH, else /usr/local/go/bin/go or Debian's /usr/lib/go*/bin/go).
# It also installs the Debian build dependencies and gives root a subuid/subgid range, which
# `apptainer build --fakeroot` needs. When Apptainer 1.5.3 is already in /opt/apptainer it only
# checks the PATH link and the subuid/subgid entries (well under a second).
# Exit codes: 0 installed, 1 the build failed, 3 nothing to build from (the message says where
# to get Apptainer), 4 not root.
set -euo pipefail

VERSION=1.5.3
PREFIX=${MPILAB_APPTAINER_PREFIX:-/opt/apptainer}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENDOR="${MPILAB_VENDOR:-$ROOT/../shared/vendor}"
TARBALL="$VENDOR/apptainer-$VERSION-vendored.tar.gz"
# Debian packages the build and the runtime need (measured list: ../shared/vendor/README.md).
DEPS="build-essential pkg-config fakeroot debootstrap libseccomp-dev libtalloc-dev libattr1-dev
libprotobuf-c-dev uidmap cryptsetup dh-apparmor libsubid-dev squashfs-tools squashfuse fuse2fs
fuse-overlayfs fuse3 libfuse3-dev"
say() { printf 'install-apptainer: %s\n' "$*"; }

installed_version() {
    "$PREFIX/bin/apptainer" --version 2>/dev/null | sed -n 's/^apptainer version \([0-9][0-9.]*\).*/\1/p' || true
}

# root:START:65536 in /etc/subuid and /etc/subgid, START past every range already there, so that
# `--fakeroot` maps root's user namespace onto ids nobody else owns.
add_subids() {
    local file start
    for file in /etc/subuid /etc/subgid; do
        touch "$file"
        if grep -q '^root:' "$file"; then continue; fi
        start=$(awk -F: 'BEGIN { end = 100000 } NF == 3 && $2 + $3 > end { end = $2 + $3 } END { print end }' "$file")
        echo "root:$start:65536" >> "$file"
        say "added root:$start:65536 to $file (for apptainer build --fakeroot)"
    done
}

# /usr/local/bin/apptainer -> the default prefix's; an install into another prefix
# (MPILAB_APPTAINER_PREFIX, e.g. to time a build) leaves the machine's apptainer alone.
link_on_path() {
    if [ "$PREFIX" != /opt/apptainer ]; then
        say "not linking $PREFIX/bin/apptainer into /usr/local/bin (not the default prefix)"
        return 0
    fi
    ln -sfn "$PREFIX/bin/apptainer" /usr/local/bin/apptainer
    ln -sfn "$PREFIX/bin/singularity" /usr/local/bin/singularity 2>/dev/null || true
}

find_go() {
    local cand
    for cand in "${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go*/bin/go; do
        if [ -n "$cand" ] && [ -x "$cand" ]; then echo "$cand"; return 0; fi
    done
    return 1
}

if [ "$(id -u)" -ne 0 ]; then
    say "needs root (it installs Debian packages and writes $PREFIX, /etc/subuid, /etc/subgid);"
    say "run: sudo $0"
    exit 4
fi

if [ "$(installed_version)" = "$VERSION" ]; then
    link_on_path
    add_subids
    say "Apptainer $VERSION is already installed in $PREFIX ($(command -v apptainer))"
    exit 0
fi

if [ ! -f "$TARBALL" ]; then
    cat >&2 <<MSG
install-apptainer: no Apptainer source here: $TARBALL does not exist.
  On a cluster, Apptainer comes from its admins (try: module avail apptainer).
  On your own machine, install Apptainer >= 1.2 from its project:
    Ubuntu:  sudo add-apt-repository ppa:apptainer/ppa && sudo apt install apptainer
    Debian and others: the packages of https://github.com/apptainer/apptainer/releases
    or from source: https://apptainer.org/docs/admin/main/installation.html
  To build from a vendored source tarball instead, set MPILAB_VENDOR to the folder holding
  apptainer-$VERSION-vendored.tar.gz.
MSG
    exit 3
fi

GO_BIN="$(find_go)" || {
    say "no Go toolchain found (tried \$GO, go on PATH, /usr/local/go/bin/go, /usr/lib/go*/bin/go);" >&2
    say "install Go >= the version in Apptainer's go.mod (https://go.dev/dl/) or set GO=/path/to/go" >&2
    exit 1
}

exec 9> /var/lock/mpilab-install-apptainer.lock
flock 9       # two sessions on one machine: the second waits, then finds it installed
if [ "$(installed_version)" = "$VERSION" ]; then
    link_on_path; add_subids
    say "Apptainer $VERSION was installed meanwhile by another run"
    exit 0
fi

started=$(date +%s)
missing=""
for pkg in $DEPS; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    say "installing build dependencies:$missing"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null \
        || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null; }
fi

work="$(mktemp -d /var/tmp/mpilab-apptainer-build.XXXXXX)"
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$TARBALL"
src="$work/apptainer-$VERSION"
[ -f "$src/mconfig" ] || { say "$TARBALL does not hold apptainer-$VERSION/mconfig" >&2; exit 1; }
say "building Apptainer $VERSION with $("$GO_BIN" version) (a few minutes)"
PATH="$(dirname "$GO_BIN"):$PATH"
export PATH
# Offline: modules from vendor/, no proxy, no toolchain download; a scratch build cache, because
# Apptainer's Makefile runs `go clean -cache`.
export GOPROXY=off GOFLAGS="-mod=vendor -buildvcs=false" GOTOOLCHAIN=local
export GOCACHE="$work/gocache" GOPATH="$work/gopath"
cd "$src"
./mconfig --prefix="$PREFIX" > "$work/mconfig.log" 2>&1 || { tail -n 30 "$work/mconfig.log" >&2; exit 1; }
make -C builddir > "$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
make -C builddir install > "$work/install.log" 2>&1 || { tail -n 30 "$work/install.log" >&2; exit 1; }
link_on_path
add_subids
have="$(installed_version)"
if [ "$have" != "$VERSION" ]; then
    say "built, but $PREFIX/bin/apptainer --version says '${have:-nothing}', not $VERSION" >&2
    exit 1
fi
say "Apptainer $VERSION installed in $PREFIX in $(( $(date +%s) - started )) s ($(du -sh "$PREFIX" | cut -f1))"
