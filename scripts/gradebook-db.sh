#!/usr/bin/env bash
# A MariaDB server of the course's own for nbgrader's gradebook, so that many grading tasks (a
# SLURM job array: scripts/grade.sh --slurm) can write to it at once; SQLite, nbgrader's default,
# is not safe for concurrent writers. Works as root or as an ordinary user (the instructor).
#   scripts/gradebook-db.sh start    create (first time) and start it; prints its URL
#   scripts/gradebook-db.sh url      print its URL (for MPILAB_DB_URL), if it is running
#   scripts/gradebook-db.sh stop     stop it (the data stays)
# Env:
#   COURSE               the nbgrader course (default: grader/ of this kit); the server's data,
#                        socket, log and password live in COURSE/.gradebook-db/ (mode 0700;
#                        the socket in /tmp/mpilab-db-UID-HASH/ when that path is too long)
#   MPILAB_DB_PORT       TCP port (default: 16034)
#   MPILAB_DB_HOST       address it listens on (default: 127.0.0.1; on a cluster, the login
#                        node's address that the compute nodes reach)
# A cluster with a database service of its own needs none of this: set
# MPILAB_DB_URL=mysql+pymysql://USER:PASSWORD@HOST/DATABASE for scripts/grade.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
course=$(cd "${COURSE:-$here/grader}" && pwd -P)
DIR="$course/.gradebook-db"
PORT="${MPILAB_DB_PORT:-16034}"
HOST="${MPILAB_DB_HOST:-127.0.0.1}"
DATABASE=mpilab_gradebook
say() { printf 'gradebook-db: %s\n' "$*"; }
die() { printf 'gradebook-db: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1; }
PATH="$PATH:/usr/sbin:/sbin"

case "$PORT" in ''|*[!0-9]*) die "MPILAB_DB_PORT='$PORT' is not a port number (e.g. 16034)" ;; esac
if [ "$(id -u)" -eq 0 ]; then
    as_user=(--user=root)
    admin=root
else
    as_user=()
    admin=$(id -un)  # mariadb-install-db lets the user who ran it in through the socket
fi
# A Unix socket's path may not pass 107 bytes: a course deep in the tree gets its socket in a
# private directory of /tmp named after the course instead.
SOCKET="$DIR/mysql.sock"
if [ "${#SOCKET}" -gt 100 ]; then
    sockdir="/tmp/mpilab-db-$(id -u)-$(printf '%s' "$DIR" | sha256sum | cut -c1-16)"
    mkdir -m 700 "$sockdir" 2>/dev/null || true
    [ -O "$sockdir" ] && [ "$(stat -c %a "$sockdir")" = 700 ] \
        || die "$sockdir (the socket's directory) is not this user's alone; remove it and retry"
    SOCKET="$sockdir/mysql.sock"
fi
sql() { mariadb --no-defaults --socket="$SOCKET" -u "$admin" "$@"; }
running() { [ -f "$DIR/mariadbd.pid" ] && kill -0 "$(cat "$DIR/mariadbd.pid")" 2>/dev/null; }
url() { printf 'mysql+pymysql://mpilab:%s@%s:%s/%s\n' "$(cat "$DIR/password")" "$HOST" "$PORT" "$DATABASE"; }

start() {
    for tool in mariadbd mariadb mariadb-install-db; do
        have "$tool" || die "$tool is not installed (Debian: mariadb-server mariadb-client)"
    done
    mkdir -p "$DIR" && chmod 700 "$DIR"
    if [ ! -d "$DIR/data/mysql" ]; then
        say "creating the gradebook database in $DIR/data"
        rm -rf "$DIR/data"
        mariadb-install-db --no-defaults --datadir="$DIR/data" "${as_user[@]}" \
            --auth-root-authentication-method=socket --skip-test-db >"$DIR/install.log" 2>&1 \
            || { tail -n 20 "$DIR/install.log" >&2; die "mariadb-install-db failed"; }
    fi
    if ! running; then
        say "starting mariadbd ($HOST:$PORT, data in $DIR/data)"
        setsid mariadbd --no-defaults --datadir="$DIR/data" "${as_user[@]}" --bind-address="$HOST" \
            --port="$PORT" --socket="$SOCKET" --pid-file="$DIR/mariadbd.pid" \
            --log-error="$DIR/mariadb.log" --innodb-buffer-pool-size=64M --max-connections=400 \
            </dev/null >/dev/null 2>&1 &
        for _ in $(seq 1 120); do sql -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.25; done
        sql -e 'SELECT 1' >/dev/null 2>&1 || { tail -n 20 "$DIR/mariadb.log" >&2; die "mariadbd did not start (port $PORT taken? set MPILAB_DB_PORT)"; }
    fi
    [ -s "$DIR/password" ] || (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$DIR/password")
    local pass
    pass=$(cat "$DIR/password")
    # the grading tasks run on the compute nodes: the user may connect from any host, by password
    sql -e "CREATE DATABASE IF NOT EXISTS $DATABASE CHARACTER SET utf8mb4;
            CREATE USER IF NOT EXISTS 'mpilab'@'%' IDENTIFIED BY '$pass';
            ALTER USER 'mpilab'@'%' IDENTIFIED BY '$pass';
            GRANT ALL ON $DATABASE.* TO 'mpilab'@'%';"
    url
}

stop() {
    if running; then
        say "stopping mariadbd"
        kill "$(cat "$DIR/mariadbd.pid")"
        for _ in $(seq 1 120); do running || return 0; sleep 0.25; done
        die "mariadbd did not stop; see $DIR/mariadb.log"
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) running || die "not running; start it with: COURSE=$course scripts/gradebook-db.sh start"; url ;;
    *) die "usage: scripts/gradebook-db.sh start|url|stop (got '${1:-}')" ;;
esac
