#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the tests, CI and trying the templates.
#
#   scripts/local-slurm.sh start     configure munge + slurm and start munged, slurmctld, slurmd
#                                    (and, with accounting, mariadbd and slurmdbd)
#   scripts/local-slurm.sh stop      stop slurmd, slurmctld, slurmdbd, mariadbd (munged keeps running)
#   scripts/local-slurm.sh status    print whether they run and what `sinfo` says
#   scripts/local-slurm.sh conf      print the slurm.conf that `start` would write
#   scripts/local-slurm.sh nodes     (multi-node) one line per node: name, address, namespace, slurmd's state
#   scripts/local-slurm.sh kill-node NAME
#                                    (multi-node) a node failure: SIGKILL every process of that node (its
#                                    slurmd and its jobs); `start` brings it back
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
#   MPILAB_SLURM_NODES       a multi-node private cluster (with MPILAB_SLURM_CONF and _PORT): that many
#                            compute nodes, each a slurmd in a network and UTS namespace of its own
#                            (`ip netns`), with its own hostname (MPILAB_SLURM_NODE_PREFIX + number,
#                            default node1, node2, ...) and address on a bridge of this machine; the
#                            controller runs here and is reached at the bridge's address. Unset: one
#                            node, this machine, as above.
#   MPILAB_SLURM_SUBNET      the nodes' /24, as its first three numbers (default 198.18.N with N the
#                            port modulo 256: RFC 2544's range for test networks, routed nowhere);
#                            .1 is the bridge (the controller), .2 the first node, and so on
#   MPILAB_SLURM_NODE_TIMEOUT  seconds after which the controller declares a silent node DOWN and
#                            requeues or fails its jobs (SlurmdTimeout; default 10 with nodes)
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
NODES="${MPILAB_SLURM_NODES:-}"
NODE_PREFIX="${MPILAB_SLURM_NODE_PREFIX:-node}"
NODE_TIMEOUT="${MPILAB_SLURM_NODE_TIMEOUT:-10}"
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

if [ -n "$NODES" ]; then
    [[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "MPILAB_SLURM_NODES='$NODES'; valid: a number of nodes, 1 to 99"
    [ -n "$PORT" ] && [ "$CONF" != /etc/slurm/slurm.conf ] \
        || die "MPILAB_SLURM_NODES needs a private cluster: set MPILAB_SLURM_CONF, MPILAB_SLURM_PORT and MPILAB_SLURM_DIR too"
    [[ "$NODE_PREFIX" =~ ^[a-z][a-z0-9-]{0,20}$ ]] \
        || die "MPILAB_SLURM_NODE_PREFIX='$NODE_PREFIX'; valid: a lower-case letter, then letters, digits and '-' (at most 21)"
    [[ "$NODE_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "MPILAB_SLURM_NODE_TIMEOUT='$NODE_TIMEOUT'; valid: seconds, a positive integer"
    SUBNET="${MPILAB_SLURM_SUBNET:-198.18.$((PORT % 256))}"
    [[ "$SUBNET" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] && (( BASH_REMATCH[1] < 256 && BASH_REMATCH[2] < 256 && BASH_REMATCH[3] < 256 )) \
        || die "MPILAB_SLURM_SUBNET='$SUBNET'; valid: the first three numbers of a /24, e.g. 198.18.7"
    GATEWAY="$SUBNET.1"
    BRIDGE="mplbr$PORT"           # interface names: 15 characters at most
    [ "${#BRIDGE}" -le 11 ] || die "MPILAB_SLURM_PORT='$PORT' is too long for the bridge's name; valid: up to 5 digits"
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

node_names() {   # the compute nodes of a multi-node cluster, one a line
    local i
    for i in $(seq 1 "$NODES"); do echo "$NODE_PREFIX$i"; done
}
node_addr() { echo "$SUBNET.$(( ${1#"$NODE_PREFIX"} + 1 ))"; }   # node_addr NAME
node_ns() { echo "$CLUSTER-$1"; }                                # node_ns NAME: its network namespace

write_conf() {
    local mem name
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
    if [ -n "$NODES" ]; then
        cat <<EOF
$MARK — a test cluster of $NODES nodes, each a slurmd in a network namespace of its own
# (addresses $SUBNET.2-$((NODES + 1)) on bridge $BRIDGE); stop with: scripts/local-slurm.sh stop
ClusterName=$CLUSTER
SlurmctldHost=$NODE($GATEWAY)
EOF
    else
        cat <<EOF
$MARK — a single-node test cluster; stop with: scripts/local-slurm.sh stop
ClusterName=$CLUSTER
SlurmctldHost=$NODE
EOF
    fi
    port_lines
    local each=""    # a multi-node cluster's slurmd files, one per node (%n: the node's name)
    [ -z "$NODES" ] || each="-%n"
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool${each:+/%n}
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd$each.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd$each.log
EOF
    if [ -n "$NODES" ]; then
        echo "# A node that stops answering is DOWN after this many seconds; its jobs are requeued or fail."
        echo "SlurmdTimeout=$NODE_TIMEOUT"
        echo "# Each node's own temporary directory (the nodes share this machine's /tmp): srun's PMIx"
        echo "# plugin makes a directory per job step there, of the same name on every node."
        echo "TmpFS=$DIR/tmp/%n"
    fi
    cat <<EOF
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
EOF
    if [ -z "$NODES" ]; then
        cat <<EOF
NodeName=$NODE $(node_shape) RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=$MAXTIME State=UP OverSubscribe=NO
EOF
        return
    fi
    for name in $(node_names); do
        echo "NodeName=$name NodeAddr=$(node_addr "$name") $(node_shape) RealMemory=$(( mem / NODES )) State=UNKNOWN"
    done
    # LLN: a job goes to the least loaded node, so that small jobs spread over the nodes
    echo "PartitionName=$PARTITION Nodes=${NODE_PREFIX}[1-$NODES] Default=YES MaxTime=$MAXTIME State=UP OverSubscribe=NO LLN=YES"
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
    [ -z "$NODES" ] || net_up
    if [ "$ACCOUNTING" = yes ]; then
        start_accounting
    else
        stop_one slurmdbd
    fi
    if ! running "$DIR/slurmctld.pid" slurmctld; then
        say "starting slurmctld"
        slurmctld 9>&-
    fi
    if [ -n "$NODES" ]; then
        start_nodes
        return
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

# ---- the nodes of a multi-node cluster (MPILAB_SLURM_NODES)
# A bridge on this machine carries the controller's address ($GATEWAY); each node is a network
# namespace joined to it by a veth pair (eth0 inside, with the node's address), and a UTS namespace
# with the node's name as hostname, in which its slurmd runs (and so every job step it starts).
# The nodes have no default route: they reach each other, the controller and their own loopback.
node_veth() { echo "mpl${PORT}n${1#"$NODE_PREFIX"}"; }   # the host's end of a node's veth pair

net_up() {
    need ip nsenter unshare
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        say "creating bridge $BRIDGE ($GATEWAY/24)"
        ip link add "$BRIDGE" type bridge
        ip addr add "$GATEWAY/24" dev "$BRIDGE"
    fi
    ip link set "$BRIDGE" up
    local name ns veth
    for name in $(node_names); do
        ns=$(node_ns "$name")
        veth=$(node_veth "$name")
        [ -e "/run/netns/$ns" ] || ip netns add "$ns"
        if ! ip link show "$veth" >/dev/null 2>&1; then
            ip link add "$veth" type veth peer name eth0 netns "$ns"
            ip link set "$veth" master "$BRIDGE" up
            ip -n "$ns" addr add "$(node_addr "$name")/24" dev eth0
            ip -n "$ns" link set eth0 up
            ip -n "$ns" link set lo up
        fi
    done
}

net_down() {
    local name ns
    for name in $(node_names); do
        ns=$(node_ns "$name")
        [ -e "/run/netns/$ns" ] || continue
        kill_node_processes "$name"
        ip link del "$(node_veth "$name")" 2>/dev/null || true
        ip netns del "$ns"
    done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        say "removing bridge $BRIDGE and the nodes' namespaces"
        ip link del "$BRIDGE"
    fi
}

kill_node_processes() {  # kill_node_processes NAME: SIGKILL everything in the node's namespace
    local ns pids _
    ns=$(node_ns "$1")
    [ -e "/run/netns/$ns" ] || return 0
    for _ in $(seq 1 20); do
        pids=$(ip netns pids "$ns")
        [ -n "$pids" ] || return 0
        # shellcheck disable=SC2086  # one pid a word
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    die "processes of node $1 survive SIGKILL: $(ip netns pids "$ns" | tr '\n' ' ')"
}

check_node() {  # check_node NAME: die unless NAME is one of the cluster's nodes
    node_names | grep -qx -- "$1" || die "unknown node '$1'; valid: $(node_names | tr '\n' ' ')"
}

start_nodes() {
    local name _ states
    for name in $(node_names); do
        running "$DIR/slurmd-$name.pid" slurmd && continue
        say "starting slurmd on $name ($(node_addr "$name"), namespace $(node_ns "$name"))"
        mkdir -p "$DIR/spool/$name" "$DIR/tmp/$name"
        chmod 1777 "$DIR/tmp/$name"
        # nsenter, not `ip netns exec`: that one mounts a sysfs of its own, without the cgroup
        # file system that slurmd needs
        nsenter --net="/run/netns/$(node_ns "$name")" unshare --uts sh -c 'hostname "$1" && exec slurmd' sh "$name" 9>&-
    done
    for _ in $(seq 1 90); do
        states=$(sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null || true)
        if [ "$(grep -cE ' (idle|mix|alloc)$' <<< "$states")" -eq "$NODES" ]; then
            say "up: partition $PARTITION on $NODES nodes (${NODE_PREFIX}[1-$NODES], $SUBNET.2-$((NODES + 1))), $CPUS CPUs each, accounting: $ACCOUNTING (logs in $DIR/log)"
            return 0
        fi
        # a node that was down (killed, or after an unclean stop) and whose slurmd runs again
        while read -r name; do
            scontrol update NodeName="$name" State=RESUME 2>/dev/null || true
        done < <(awk '$2 ~ /^(down|drain)/ {print $1}' <<< "$states")
        sleep 0.5
    done
    sinfo -N -l || true
    tail -n 20 "$DIR/log/slurmctld.log" >&2 || true
    die "not every node became idle within 45 s (logs: $DIR/log/slurmd-NODE.log)"
}

list_nodes() {
    local name state
    for name in $(node_names); do
        state=stopped
        running "$DIR/slurmd-$name.pid" slurmd && state=running
        echo "$name $(node_addr "$name") $(node_ns "$name") slurmd:$state"
    done
}

stop_one() {  # stop_one <name>: stop the daemon whose pid is in $DIR/<name>.pid, if it runs
    local pidfile="$DIR/$1.pid" pid
    if running "$pidfile" "${1%%-*}"; then   # slurmd-node1.pid: a slurmd
        pid="$(cat "$pidfile")"
        say "stopping $1 ($pid)"
        kill "$pid"
        for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
}

stop_daemons() {
    local name
    if [ -n "$NODES" ]; then
        for name in $(node_names); do stop_one "slurmd-$name"; done
    else
        stop_one slurmd
    fi
    stop_one slurmctld
}

status() {
    local rc=0 name
    local daemons=(slurmctld slurmd)
    [ -z "$NODES" ] || mapfile -t daemons < <(echo slurmctld; node_names | sed 's/^/slurmd-/')
    for name in "${daemons[@]}"; do
        running "$DIR/$name.pid" "${name%%-*}" && say "$name: running" || { say "$name: stopped"; rc=3; }
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
    stop) stop_daemons; stop_one slurmdbd; stop_one mariadbd; [ -z "$NODES" ] || net_down ;;
    status) status ;;
    conf) write_conf ;;
    nodes) [ -n "$NODES" ] || die "'nodes' is for a multi-node cluster (MPILAB_SLURM_NODES)"; list_nodes ;;
    kill-node)
        [ -n "$NODES" ] || die "'kill-node' is for a multi-node cluster (MPILAB_SLURM_NODES)"
        check_node "${2:-}"
        say "killing node ${2}: every process in namespace $(node_ns "$2")"
        kill_node_processes "$2" ;;
    *) echo "usage: scripts/local-slurm.sh start|stop|status|conf|nodes|kill-node NAME (got '${1:-}')" >&2; exit 2 ;;
esac
