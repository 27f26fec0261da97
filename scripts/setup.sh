#!/usr/bin/env bash
# One-command setup for mpilab: system packages, the Python environment, the C build.
#
#   scripts/setup.sh            everything (what `make demo` and `make test` run first)
#   scripts/setup.sh system     only the Debian/Ubuntu packages of scripts/packages.txt
#   scripts/setup.sh venv       only the .venv with the mpilab package
#
# System packages are installed with apt-get when we are root (or have password-less
# sudo); otherwise the script prints the exact command to run and stops.
# Each step is skipped when it is already done, so running it again is cheap.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${MPILAB_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

missing_packages() {
    local pkg
    while read -r pkg; do
        [ -z "$pkg" ] && continue
        case "$pkg" in \#*) continue ;; esac
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
    done < "$ROOT/scripts/packages.txt"
}

setup_system() {
    if ! command -v dpkg-query >/dev/null; then
        say "not a Debian/Ubuntu system: install the equivalents of scripts/packages.txt yourself"
        return 0
    fi
    local missing
    missing="$(missing_packages | tr '\n' ' ')"
    if [ -z "${missing// /}" ]; then
        say "system packages: all present"
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo="sudo"
        else
            say "these system packages are missing: $missing"
            say "install them with:  sudo apt-get update && sudo apt-get install -y $missing"
            exit 1
        fi
    fi
    say "installing system packages: $missing"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}

setup_venv() {
    local stamp="$VENV/.mpilab-installed"
    local want
    want="$(cat "$ROOT/pyproject.toml" "$ROOT"/solutions/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        say "python environment: up to date ($VENV)"
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    say "installing the mpilab package and its dependencies into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # mpi4py is compiled against the default mpicc (Open MPI through Debian's alternatives).
    MPICC="$(command -v mpicc.openmpi || command -v mpicc || true)" \
        "$VENV/bin/python" -m pip install -q -e "$ROOT[test,lab]"
    # the answer key (costs, rubrics, hidden cases): only in an instructor's checkout
    if [ -f "$ROOT/solutions/pyproject.toml" ]; then
        say "installing the answer key (solutions/mpilab_key): this is an instructor's checkout"
        "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT/solutions"
    fi
    echo "$want" > "$stamp"
}

case "${1:-all}" in
    system) setup_system ;;
    venv) setup_venv ;;
    all) setup_system; setup_venv ;;
    *) echo "setup.sh: unknown step '$1'; valid: all, system, venv" >&2; exit 2 ;;
esac
