#!/bin/sh
# Run a command as another Unix user of a course, in that user's home, with the kit's .venv/bin
# first on PATH (root only):
#
#   scripts/as-user.sh alice nbgrader fetch_assignment lab2
#
# When the kit's Python lives where that user cannot go (a pyenv under /root, whose mode is 700),
# the command runs in a private mount namespace where the blocking directory is an empty tmpfs
# with only the interpreter's own directory bound back: the user reaches Python, not root's files.
# MPILAB_KIT (default: this checkout) names the kit whose .venv is used.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
user=${1:?usage: scripts/as-user.sh USER COMMAND [ARG...]}
shift
[ $# -gt 0 ] || { echo "usage: scripts/as-user.sh USER COMMAND [ARG...]" >&2; exit 2; }
home=$(getent passwd "$user" | cut -d: -f6) || { echo "as-user.sh: no user '$user'" >&2; exit 2; }
venv=${MPILAB_KIT:-$here}/.venv/bin
[ -x "$venv/python" ] || { echo "as-user.sh: $venv/python not found: run make build first" >&2; exit 2; }
prefix=$(dirname "$(dirname "$(readlink -f "$venv/python")")")
blocked="" d=""
for part in $(echo "$prefix" | tr / ' '); do
    d="$d/$part"
    case $(stat -c %a "$d") in
        *[1357]) ;;                       # others may traverse it
        *) blocked=$d; break ;;
    esac
done
cd "$home"
set -- env HOME="$home" USER="$user" LOGNAME="$user" PATH="$venv:/usr/local/bin:/usr/bin:/bin" "$@"
if [ -z "$blocked" ]; then
    exec runuser -u "$user" -- "$@"
fi
exec unshare --mount --propagation private sh -c '
    blocked=$1 prefix=$2 user=$3; shift 3
    keep=$(mktemp -d /tmp/mpilab-as-user-XXXXXX)
    mount --bind "$prefix" "$keep"
    mount -t tmpfs -o mode=755,size=1m tmpfs "$blocked"
    mkdir -p "$prefix"
    mount --move "$keep" "$prefix"
    rmdir "$keep"
    exec runuser -u "$user" -- "$@"' sh "$blocked" "$prefix" "$user" "$@"
