#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the tests, CI and trying the templates.
#
#   scripts/local-slurm.sh start     configure munge + slurm and start munged, slurmctld, slurmd
#                                    (and, with accounting, mariadbd and slurmdbd)
#   scripts/local-slurm.sh stop      stop slurmd, slurmctld, slurmdbd, mariadbd (munged keeps running)
#   scripts/local-slurm.sh status    print whether they run and what `sinfo` says
#   scripts/local-slurm.sh conf      print the slurm.conf that `start` would write
#
# Environment:
#   MPILAB_SLURM_DIR         state, spool and logs (default /var/lib/mpilab-slurm)
#   MPILAB_SLURM_PARTITION   partition name, matching slurm_templates/profiles/local.toml (default: local)
#   MPILAB_SLURM_CPUS        CPUs the node declares (default: 4; more than `nproc` is allowed on
#                            purpose so that P=4 jobs run on a 2-core laptop, oversubscribed)
#   MPILAB_SLURM_MAXTIME     partition time limit in minutes (default: 60)
#   MPILAB_SLURM_ACCOUNTING  yes, no or auto (default): job accounting through slurmdbd, as on a
#                            real cluster, so that `sacct` answers; auto means yes when slurmdbd
#                            and mariadbd are installed (Debian: slurmdbd, mariadb-server)
#   MPILAB_SLURM_DBPORT      TCP port of the accounting database, on 127.0.0.1 only (default: 16033)
#   MPILAB_SLURM_SOCKETS, MPILAB_SLURM_CORES_PER_SOCKET
#                            declare the node as SOCKETS x CORES_PER_SOCKET cores (one thread
#                            each) instead of MPILAB_SLURM_CPUS CPUs, so that the controller
#                            places a job's CPUs by socket (see `scontrol show job -d`, CPU_IDs);
#                            more than the machine has is allowed, as for MPILAB_SLURM_CPUS
#   MPILAB_SLURM_CONF, MPILAB_SLURM_PORT, MPILAB_SLURM_CLUSTER
#                            a second, private cluster next to the shared one: its slurm.conf
#                            (default /etc/slurm/slurm.conf; the clients need SLURM_CONF set to
#                            it), slurmctld's port (slurmd takes the next one; default SLURM's
#                            6817/6818) and its name (default mpilab-local). Give it its own
#                            MPILAB_SLURM_DIR and MPILAB_SLURM_ACCOUNTING=no.
#
# With accounting, `start` also runs a MariaDB server of its own (data in $DIR/mysql, listening
# on 127.0.0.1 only; the system's /var/lib/mysql is not touched) and slurmdbd, and registers the
# cluster: `sacct` then reports every job and array task with its state, exit code and node
# list. Measured on the 2-core CI machine: installing the two packages takes ~30 s, creating
# the database and starting both daemons a few seconds. Without accounting
# (`AccountingStorageType=accounting_storage/none`) `sacct` reports nothing and
# `mpilab slurm collect` reads `scontrol show job` and the job completion log instead. That log
# (`JobCompType=jobcomp/filetxt`, one line per finished job with its state and exit code) is
# written in both cases. Jobs run as root here (SlurmUser=root), as everything on this test
# machine does. `start` is idempotent: it leaves running daemons alone and only (re)writes the
# configuration when it changed. It refuses to touch an /etc/slurm/slurm.conf that it did not write.
set -euo pipefail

DIR="${MPILAB_SLURM_DIR:-/var/lib/mpilab-slurm}"
PARTITION="${MPILAB_SLURM_PARTITION:-local}"
CPUS="${MPILAB_SLURM_CPUS:-4}"
MAXTIME="${MPILAB_SLURM_MAXTIME:-60}"
ACCOUNTING="${MPILAB_SLURM_ACCOUNTING:-auto}"
DBPORT="${MPILAB_SLURM_DBPORT:-16033}"
SOCKETS="${MPILAB_SLURM_SOCKETS:-}"
CORES_PER_SOCKET="${MPILAB_SLURM_CORES_PER_SOCKET:-}"
CONF="${MPILAB_SLURM_CONF:-/etc/slurm/slurm.conf}"
PORT="${MPILAB_SLURM_PORT:-}"
export SLURM_CONF="$CONF"      # the daemons and the clients below read this configuration
DBDCONF=/etc/slurm/slurmdbd.conf
CLUSTER="${MPILAB_SLURM_CLUSTER:-mpilab-local}"
MARK="# written by mpilab scripts/local-slurm.sh"
NODE="$(hostname -s)"
say() { printf 'local-slurm: %s\n' "$*"; }
die() { printf 'local-slurm: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1; }

if [ -n "$SOCKETS$CORES_PER_SOCKET" ] && ! [[ "$SOCKETS" =~ ^[1-9][0-9]*$ && "$CORES_PER_SOCKET" =~ ^[1-9][0-9]*$ ]]; then
    die "MPILAB_SLURM_SOCKETS='$SOCKETS', MPILAB_SLURM_CORES_PER_SOCKET='$CORES_PER_SOCKET'; valid: both positive integers, or neither"
fi
if [ -n "$PORT" ] && ! [[ "$PORT" =~ ^[1-9][0-9]*$ ]]; then
    die "MPILAB_SLURM_PORT='$PORT'; valid: a TCP port number (slurmd takes the next one)"
fi

case "$ACCOUNTING" in
    yes|no) ;;
    auto) if have slurmdbd && have mariadbd; then ACCOUNTING=yes; else ACCOUNTING=no; fi ;;
    *) die "MPILAB_SLURM_ACCOUNTING='$ACCOUNTING'; valid: yes, no, auto" ;;
esac

need() {
    local tool
    for tool in "$@"; do
        have "$tool" || die "$tool is not installed; install slurm-wlm and munge, and for accounting
  slurmdbd and mariadb-server (scripts/setup.sh system), or set MPILAB_SLURM_ACCOUNTING=no"
    done
}

accounting_lines() {
    if [ "$ACCOUNTING" = yes ]; then
        echo "# Accounting: slurmdbd on this node, storing into the MariaDB that local-slurm.sh starts."
        echo "AccountingStorageType=accounting_storage/slurmdbd"
        echo "AccountingStorageHost=$NODE"
    else
        echo "# No accounting database: sacct reports nothing."
        echo "AccountingStorageType=accounting_storage/none"
    fi
}

port_lines() {   # nothing for the shared cluster (SLURM's default ports)
    [ -z "$PORT" ] || printf 'SlurmctldPort=%s\nSlurmdPort=%s\n' "$PORT" "$((PORT + 1))"
}

select_unit() {  # a node declared by sockets is allocated by cores, which sockets group
    if [ -n "$SOCKETS" ]; then echo CR_Core; else echo CR_CPU; fi
}

node_shape() {
    if [ -n "$SOCKETS" ]; then
        echo "Sockets=$SOCKETS CoresPerSocket=$CORES_PER_SOCKET ThreadsPerCore=1"
    else
        echo "CPUs=$CPUS"
    fi
}

write_conf() {
    local mem
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
    cat <<EOF
$MARK — a single-node test cluster; stop with: scripts/local-slurm.sh stop
ClusterName=$CLUSTER
SlurmctldHost=$NODE
EOF
    port_lines
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=$(select_unit)
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
# Time limits are enforced promptly: SIGTERM at the limit, SIGKILL 5 s later.
KillWait=5
OverTimeLimit=0
MinJobAge=600
JobAcctGatherType=jobacct_gather/linux
$(accounting_lines)
# Every finished job is also logged here, whether or not there is accounting.
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
NodeName=$NODE $(node_shape) RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=$MAXTIME State=UP OverSubscribe=NO
EOF
}

write_dbd_conf() {
    cat <<EOF
$MARK — the accounting daemon of the test cluster
DbdHost=$NODE
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DBPORT
StorageUser=slurm
StoragePass=$(cat "$DIR/mysql.password")
StorageLoc=slurm_acct_db
EOF
}

running() {  # running <pidfile> <name>
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && grep -q "$2" "/proc/$(cat "$1")/comm" 2>/dev/null
}

sql() { mariadb --no-defaults --socket="$DIR/mysql.sock" -u root "$@"; }

# The accounting database (a MariaDB of our own: its data directory, socket and port) and
# slurmdbd, then the cluster's record in it. Run before slurmctld starts, so that slurmctld
# registers with slurmdbd at once.
start_accounting() {
    need slurmdbd mariadbd mariadb mariadb-install-db sacctmgr
    if [ -f "$DBDCONF" ] && ! head -1 "$DBDCONF" | grep -q "^$MARK"; then
        die "$DBDCONF exists and was not written by this script; refusing to replace it"
    fi
    if [ ! -d "$DIR/mysql/mysql" ]; then
        say "creating the accounting database in $DIR/mysql"
        rm -rf "$DIR/mysql"
        mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root \
            --auth-root-authentication-method=socket --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 \
            || { tail -n 20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    local _
    if ! running "$DIR/mariadbd.pid" mariadbd; then
        say "starting mariadbd (127.0.0.1:$DBPORT, data in $DIR/mysql)"
        setsid mariadbd --no-defaults --datadir="$DIR/mysql" --user=root --bind-address=127.0.0.1 \
            --port="$DBPORT" --socket="$DIR/mysql.sock" --pid-file="$DIR/mariadbd.pid" \
            --log-error="$DIR/log/mariadb.log" --innodb-buffer-pool-size=32M \
            </dev/null >/dev/null 2>&1 9>&- &
        for _ in $(seq 1 120); do sql -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.25; done
        sql -e 'SELECT 1' >/dev/null 2>&1 || { tail -n 20 "$DIR/log/mariadb.log" >&2; die "mariadbd did not start"; }
    fi
    if [ ! -s "$DIR/mysql.password" ]; then
        (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$DIR/mysql.password")
    fi
    local pass
    pass="$(cat "$DIR/mysql.password")"
    sql -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    local new="$DIR/slurmdbd.conf.new"
    (umask 077; write_dbd_conf > "$new")
    if ! cmp -s "$new" "$DBDCONF" 2>/dev/null; then
        mv "$new" "$DBDCONF"
        if running "$DIR/slurmdbd.pid" slurmdbd; then
            say "slurmdbd.conf changed: restarting slurmdbd"
            stop_one slurmdbd
        fi
    else
        rm -f "$new"
    fi
    if ! running "$DIR/slurmdbd.pid" slurmdbd; then
        say "starting slurmdbd"
        slurmdbd 9>&-
    fi
    for _ in $(seq 1 60); do
        sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; then
        say "registering cluster $CLUSTER with slurmdbd"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null \
            || die "sacctmgr add cluster $CLUSTER failed; see $DIR/log/slurmdbd.log"
    fi
}

start() {
    need munged slurmctld slurmd sinfo
    [ "$(id -u)" -eq 0 ] || die "run as root: the daemons and /etc/slurm/slurm.conf need it"
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" /etc/slurm /run/munge /var/log/munge /var/lib/munge
    # Several test sessions may start the cluster at once: one at a time.
    # The daemons must not inherit fd 9: a munged or slurmctld holding the lock would make
    # every later `start` wait forever.
    exec 9>"$DIR/.start.lock"
    flock -w 120 9 || die "another 'local-slurm.sh start' holds $DIR/.start.lock for more than 120 s"
    if [ -f "$CONF" ] && ! head -1 "$CONF" | grep -q "^$MARK"; then
        die "$CONF exists and was not written by this script; refusing to replace it"
    fi
    local new="$DIR/slurm.conf.new" changed=no
    write_conf > "$new"
    if ! cmp -s "$new" "$CONF" 2>/dev/null; then
        mv "$new" "$CONF"
        changed=yes
    else
        rm -f "$new"
    fi

    # munge: a key (kept if present), then the daemon.
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating /etc/munge/munge.key"
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
    chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
    chmod 0400 /etc/munge/munge.key
    if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "starting munged"
        if id munge >/dev/null 2>&1; then
            runuser -u munge -- munged 9>&-
        else
            munged --force 9>&-
        fi
        sleep 0.5
        munge -n </dev/null | unmunge >/dev/null || die "munged does not answer; see /var/log/munge/munged.log"
    fi

    if [ "$changed" = yes ] && running "$DIR/slurmctld.pid" slurmctld; then
        say "configuration changed: restarting the daemons"
        stop_daemons
    fi
    if [ "$ACCOUNTING" = yes ]; then
        start_accounting
    else
        stop_one slurmdbd
    fi
    if ! running "$DIR/slurmctld.pid" slurmctld; then
        say "starting slurmctld"
        slurmctld 9>&-
    fi
    if ! running "$DIR/slurmd.pid" slurmd; then
        say "starting slurmd"
        slurmd 9>&-
    fi
    local _
    for _ in $(seq 1 60); do
        if sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            say "up: partition $PARTITION on $NODE, $CPUS CPUs, accounting: $ACCOUNTING (logs in $DIR/log)"
            return 0
        fi
        # A node that was down (e.g. after an unclean stop) is brought back.
        if sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | grep -qE '^(down|drain)'; then
            scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true
        fi
        sleep 0.5
    done
    sinfo -N -l || true
    tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "the node did not become idle within 30 s"
}

stop_one() {  # stop_one <name>: stop the daemon whose pid is in $DIR/<name>.pid, if it runs
    local pidfile="$DIR/$1.pid" pid
    if running "$pidfile" "$1"; then
        pid="$(cat "$pidfile")"
        say "stopping $1 ($pid)"
        kill "$pid"
        for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
}

stop_daemons() {
    stop_one slurmd
    stop_one slurmctld
}

status() {
    local rc=0 name
    for name in slurmctld slurmd; do
        running "$DIR/$name.pid" "$name" && say "$name: running" || { say "$name: stopped"; rc=3; }
    done
    if [ "$ACCOUNTING" = yes ]; then
        for name in slurmdbd mariadbd; do
            running "$DIR/$name.pid" "$name" && say "$name: running" || { say "$name: stopped"; rc=3; }
        done
    fi
    [ "$rc" -eq 0 ] && sinfo
    return "$rc"
}

case "${1:-}" in
    start) start ;;
    stop) stop_daemons; stop_one slurmdbd; stop_one mariadbd ;;
    status) status ;;
    conf) write_conf ;;
    *) echo "usage: scripts/local-slurm.sh start|stop|status|conf (got '${1:-}')" >&2; exit 2 ;;
esac
