#!/usr/bin/env bash
# One-command setup for mpilab: system packages, the Python environment, the C build.
#
#   scripts/setup.sh            everything (what `make demo` and `make test` run first)
#   scripts/setup.sh system     only the Debian/Ubuntu packages of scripts/packages.txt
#   scripts/setup.sh venv       only the .venv with the mpilab package
#   scripts/setup.sh labext     only the JupyterLab extension (labext/; needs Node.js and npm)
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
    # shellcheck disable=SC2086 # $missing is a list of package names
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
        "$VENV/bin/python" -m pip install -q -e "${ROOT}[test,lab]"
    # the answer key (costs, rubrics, hidden cases): only in an instructor's checkout
    if [ -f "$ROOT/solutions/pyproject.toml" ]; then
        say "installing the answer key (solutions/mpilab_key): this is an instructor's checkout"
        "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT/solutions"
    fi
    echo "$want" > "$stamp"
}

# The kit's JupyterLab extension (labext/): a notebook that runs a cell while a file of its lab
# folder has unsaved edits in an editor says so. Built with Node.js and npm into
# build/labextension/ and copied where the .venv's JupyterLab looks for prebuilt extensions. The
# kit works without it (the checks then only print which saved version they test), so a machine
# without npm, or a build that fails, gets a message and no error.
setup_labext() {
    # JupyterLab's settings for the kit (mpilab/data/jupyterlab/overrides.json): no prompt about
    # Jupyter's news feed and no update check, which reach the internet, in front of a lab
    mkdir -p "$VENV/share/jupyter/lab/settings"
    cp "$ROOT/mpilab/data/jupyterlab/overrides.json" "$VENV/share/jupyter/lab/settings/overrides.json"
    local built="$ROOT/build/labextension/mpilab-saved-check"
    local target="$VENV/share/jupyter/labextensions/mpilab-saved-check"
    local stamp="$VENV/.mpilab-labext" want
    want="$(cat "$ROOT/labext/package.json" "$ROOT/labext/package-lock.json" "$ROOT"/labext/src/*.js | sha256sum | cut -c1-16)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$target/package.json" ]; then
        say "JupyterLab extension: up to date ($target)"
        return 0
    fi
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        say "Node.js and npm are not installed: JupyterLab will not warn when a lab's file has unsaved edits"
        say "(install Node.js 20.19 or later with npm, then run make setup again)"
        return 0
    fi
    # the builder (@jupyter/builder, with rspack) runs on Node.js ^20.19 or >= 22.12
    if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
                  process.exit((a === 20 && b >= 19) || (a === 22 && b >= 12) || a > 22 ? 0 : 1)'; then
        say "Node.js $(node --version) is too old to build the kit's JupyterLab extension (needs ^20.19 or >= 22.12):"
        say "JupyterLab will not warn when a lab's file has unsaved edits"
        return 0
    fi
    say "building the JupyterLab extension mpilab-saved-check (labext/, npm ci + jupyter-builder)"
    mkdir -p "$ROOT/build"
    if ! (cd "$ROOT/labext" && npm ci --no-audit --no-fund --loglevel=error >/dev/null \
            && PATH="$VENV/bin:$PATH" npm run --silent build >"$ROOT/build/labextension.log" 2>&1); then
        say "the JupyterLab extension did not build (npm's registry unreachable? see build/labextension.log);"
        say "JupyterLab will not warn about unsaved files until make setup builds it"
        return 0
    fi
    rm -rf "$target"
    mkdir -p "$(dirname "$target")"
    cp -R "$built" "$target"
    echo "$want" > "$stamp"
}

case "${1:-all}" in
    system) setup_system ;;
    venv) setup_venv ;;
    labext) setup_labext ;;
    all) setup_system; setup_venv; setup_labext ;;
    *) echo "setup.sh: unknown step '$1'; valid: all, system, venv, labext" >&2; exit 2 ;;
esac
