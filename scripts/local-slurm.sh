#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the tests, CI and trying the templates.
#
#   scripts/local-slurm.sh start     configure munge + slurm and start munged, slurmctld, slurmd
#   scripts/local-slurm.sh stop      stop slurmctld and slurmd (munged keeps running)
#   scripts/local-slurm.sh status    print whether they run and what `sinfo` says
#   scripts/local-slurm.sh conf      print the slurm.conf that `start` would write
#
# Environment:
#   MPILAB_SLURM_DIR         state, spool and logs (default /var/lib/mpilab-slurm)
#   MPILAB_SLURM_PARTITION   partition name, matching slurm_templates/profiles/local.toml (default: local)
#   MPILAB_SLURM_CPUS        CPUs the node declares (default: 4; more than `nproc` is allowed on
#                            purpose so that P=4 jobs run on a 2-core laptop, oversubscribed)
#   MPILAB_SLURM_MAXTIME     partition time limit in minutes (default: 60)
#
# There is no accounting database: `AccountingStorageType=accounting_storage/none`, so `sacct`
# reports nothing. The job completion log (`JobCompType=jobcomp/filetxt`, one line per finished
# job with its state and exit code) and `scontrol show job` are what `mpilab slurm collect`
# reads instead. Jobs run as root here (SlurmUser=root), as everything on this test machine does.
# `start` is idempotent: it leaves running daemons alone and only (re)writes the configuration
# when it changed. It refuses to touch an /etc/slurm/slurm.conf that it did not write.
set -euo pipefail

DIR="${MPILAB_SLURM_DIR:-/var/lib/mpilab-slurm}"
PARTITION="${MPILAB_SLURM_PARTITION:-local}"
CPUS="${MPILAB_SLURM_CPUS:-4}"
MAXTIME="${MPILAB_SLURM_MAXTIME:-60}"
CONF=/etc/slurm/slurm.conf
MARK="# written by mpilab scripts/local-slurm.sh"
NODE="$(hostname -s)"
say() { printf 'local-slurm: %s\n' "$*"; }
die() { printf 'local-slurm: %s\n' "$*" >&2; exit 1; }

need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 \
            || die "$tool is not installed; install slurm-wlm and munge (scripts/setup.sh system)"
    done
}

write_conf() {
    local mem
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
    cat <<EOF
$MARK — a single-node test cluster; stop with: scripts/local-slurm.sh stop
ClusterName=mpilab-local
SlurmctldHost=$NODE
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
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
# Time limits are enforced promptly: SIGTERM at the limit, SIGKILL 5 s later.
KillWait=5
OverTimeLimit=0
MinJobAge=600
# No database: sacct is empty; finished jobs are logged here instead.
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
NodeName=$NODE CPUs=$CPUS RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=$MAXTIME State=UP OverSubscribe=NO
EOF
}

running() {  # running <pidfile> <name>
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && grep -q "$2" "/proc/$(cat "$1")/comm" 2>/dev/null
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
    if ! running "$DIR/slurmctld.pid" slurmctld; then
        say "starting slurmctld"
        slurmctld 9>&-
    fi
    if ! running "$DIR/slurmd.pid" slurmd; then
        say "starting slurmd"
        slurmd 9>&-
    fi
    local i
    for i in $(seq 1 60); do
        if sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            say "up: partition $PARTITION on $NODE, $CPUS CPUs (logs in $DIR/log)"
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

stop_daemons() {
    local name pidfile pid
    for name in slurmd slurmctld; do
        pidfile="$DIR/$name.pid"
        if running "$pidfile" "$name"; then
            pid="$(cat "$pidfile")"
            say "stopping $name ($pid)"
            kill "$pid"
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        fi
    done
}

status() {
    local rc=0
    running "$DIR/slurmctld.pid" slurmctld && say "slurmctld: running" || { say "slurmctld: stopped"; rc=3; }
    running "$DIR/slurmd.pid" slurmd && say "slurmd: running" || { say "slurmd: stopped"; rc=3; }
    [ "$rc" -eq 0 ] && sinfo
    return "$rc"
}

case "${1:-}" in
    start) start ;;
    stop) stop_daemons ;;
    status) status ;;
    conf) write_conf ;;
    *) echo "usage: scripts/local-slurm.sh start|stop|status|conf (got '${1:-}')" >&2; exit 2 ;;
esac
