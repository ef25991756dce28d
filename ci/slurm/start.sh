#!/usr/bin/env bash
# Start a real single-node SLURM cluster on this machine, without systemd.
#
#   ci/slurm/start.sh [STATE_DIR]        (default /tmp/dpscale-slurm)
#
# Starts, each with a pid file under STATE_DIR/run:
#   munged (private socket and key), mariadbd + slurmdbd (unless
#   DPSCALE_SLURM_DBD=0), slurmctld, slurmd.
# One node (this host's short name) at 127.0.0.1 with the CPU count and memory
# `slurmd -C` reports, in partition $DPSCALE_SLURM_PARTITION (default "dpscale").
# Writes /etc/slurm/slurm.conf (job steps of the snakemake slurm plugin strip
# SLURM_CONF, so the default path must hold the right file); an existing one is
# backed up to STATE_DIR/slurm.conf.orig and restored by stop.sh.
# Every wait is bounded; exits non-zero with the daemon log tails if the node is
# not idle within DPSCALE_SLURM_START_TIMEOUT seconds (default 60).
# Writes STATE_DIR/cluster.env (NODE, NODES, CPUS, MEM_MB, PARTITION, DBD, STATE).
#
# DPSCALE_SLURM_NODES=N (default 1) declares N nodes instead, dpscale-n1..N, each
# served by its own slurmd on this machine (own port, spool, pid and log file), all
# at 127.0.0.1, each with all of this machine's CPUs and 1/N of its memory: a real
# multi-node allocation (srun --nodes=N) on one machine. NODE is then the first.
set -euo pipefail

STATE=${1:-/tmp/dpscale-slurm}
DBD=${DPSCALE_SLURM_DBD:-1}
PARTITION=${DPSCALE_SLURM_PARTITION:-dpscale}
NNODES=${DPSCALE_SLURM_NODES:-1}
[[ $NNODES =~ ^[1-9][0-9]*$ ]] || { echo "start.sh: DPSCALE_SLURM_NODES=$NNODES is not a count" >&2; exit 1; }
CLUSTER=${DPSCALE_SLURM_CLUSTER:-dpscale}
DB_PORT=${DPSCALE_SLURM_DB_PORT:-33061}
START_TIMEOUT=${DPSCALE_SLURM_START_TIMEOUT:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/sbin:/sbin"

die() { echo "start.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (slurmd runs jobs as the submitting user)"
for b in munged slurmctld slurmd sbatch scontrol; do
    command -v "$b" >/dev/null || die "$b not found; run ci/slurm/install.sh first"
done
if [[ $DBD != 0 ]]; then
    for b in slurmdbd mariadbd mariadb-install-db mariadb sacctmgr; do
        command -v "$b" >/dev/null || die "$b not found; run ci/slurm/install.sh (or set DPSCALE_SLURM_DBD=0)"
    done
fi

STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
RUN=$STATE/run LOG=$STATE/log ETC=$STATE/etc
mkdir -p "$RUN" "$LOG" "$ETC" "$STATE/spool/ctld" "$STATE/spool/d" "$STATE/munge"
chmod 755 "$STATE" "$RUN" "$LOG" "$ETC"

# alive PID: running and not a zombie (an exited daemon whose parent, often a
# container's pid 1, has not reaped it yet).
alive() {
    [[ $1 =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null &&
        [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}
pid_alive() { [[ -s $1 ]] && alive "$(cat "$1")"; }

# Refuse to start twice, and refuse to fight a cluster we did not start.
for f in "$RUN"/{munged,mariadbd,slurmdbd,slurmctld,slurmd}.pid "$RUN"/slurmd-*.pid; do
    if [[ -e $f ]] && pid_alive "$f"; then
        die "$(basename "$f" .pid) from a previous start is still running (pid $(cat "$f")); run ci/slurm/stop.sh $STATE first"
    fi
done
for d in slurmctld slurmd slurmdbd; do
    for p in $(pgrep -x "$d" 2>/dev/null); do
        alive "$p" && die "a $d not started by this script is running (pid $p); stop it first"
    done
done

dump_logs() {
    local f
    echo "---- log tails from $LOG ----"
    for f in "$LOG"/*.log; do
        [[ -f $f ]] || continue
        echo "==== $f"
        tail -n 25 "$f"
    done
}
# On failure: stop what was started (unless DPSCALE_SLURM_KEEP_ON_FAIL=1, for
# debugging), then print the daemon log tails. Robust to a closed stderr.
fail() {
    set +e
    trap - INT TERM HUP
    trap '' PIPE
    local node_info
    node_info=$(timeout 5 scontrol show node 2>&1)
    if [[ ${DPSCALE_SLURM_KEEP_ON_FAIL:-0} != 1 ]]; then
        timeout 60 "$HERE/stop.sh" "$STATE" >/dev/null 2>&1
    fi
    {
        echo "start.sh: $*"
        dump_logs
        echo "==== scontrol show node"
        echo "$node_info"
    } >&2 2>/dev/null
    exit 1
}
trap 'fail "interrupted by a signal"' INT TERM HUP

# wait_for SECONDS DESCRIPTION COMMAND...: poll every 0.5 s until COMMAND
# succeeds or SECONDS (wall clock) have passed.
wait_for() {
    local secs=$1 what=$2; shift 2
    local deadline=$((SECONDS + secs))
    while ((SECONDS < deadline)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    fail "timed out after ${secs}s waiting for $what"
}

# ---------------------------------------------------------------- node facts
NODE=$(hostname -s)
NODELINE=$(timeout 20 slurmd -C | head -n 1) || die "slurmd -C failed"
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODELINE")
MEM_MB=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODELINE")
[[ -n $CPUS && -n $MEM_MB ]] || die "cannot parse 'slurmd -C': $NODELINE"
# slurmd -C names the node after the host; keep its topology fields.
TOPO=${NODELINE#NodeName=* }
DEF_MEM=$((MEM_MB / CPUS)); ((DEF_MEM > 1024)) && DEF_MEM=1024
if ((NNODES == 1)); then
    NODES=("$NODE")
    SLURMDS=(slurmd)   # pid file names under $RUN
    NODE_LINES="NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE $TOPO State=UNKNOWN"
    SLURMD_FILES="SlurmdSpoolDir=$STATE/spool/d
SlurmdPidFile=$RUN/slurmd.pid
SlurmdLogFile=$LOG/slurmd.log"
else
    NODES=() SLURMDS=() NODE_LINES=""
    for ((i = 1; i <= NNODES; i++)); do
        NODES+=("dpscale-n$i")
        SLURMDS+=("slurmd-dpscale-n$i")
        mkdir -p "$STATE/spool/d-dpscale-n$i"
        NODE_LINES+="NodeName=dpscale-n$i NodeAddr=127.0.0.1 NodeHostname=$NODE Port=$((6830 + i)) CPUs=$CPUS RealMemory=$((MEM_MB / NNODES)) State=UNKNOWN
"
    done
    # several slurmd on one host: per-node files; nodes declared, not detected
    SLURMD_FILES="SlurmdSpoolDir=$STATE/spool/d-%n
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmdParameters=config_overrides"
fi
NODE=${NODES[0]}
NODELIST=$(IFS=,; echo "${NODES[*]}")

# ---------------------------------------------------------------- munge
MUNGE_SOCK=$STATE/munge/munge.socket.2
KEY=$STATE/munge/munge.key
if [[ ! -s $KEY ]]; then
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile="$KEY" --force >/dev/null
    else
        dd if=/dev/urandom bs=1 count=1024 of="$KEY" status=none
    fi
fi
# munged wants the socket's directory searchable by all, the key private.
chmod 755 "$STATE/munge"; chmod 400 "$KEY"
rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
munged --force --key-file="$KEY" --socket="$MUNGE_SOCK" \
    --pid-file="$RUN/munged.pid" --log-file="$LOG/munged.log" \
    --seed-file="$STATE/munge/munged.seed" </dev/null >>"$LOG/munged.log" 2>&1 \
    || fail "munged failed to start"
wait_for 10 "munged socket" test -S "$MUNGE_SOCK"

# ---------------------------------------------------------------- slurm.conf
if [[ $DBD != 0 ]]; then
    ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
# Clients' connections to slurmdbd use this munge socket, not AuthInfo's.
AccountingStoragePass=$MUNGE_SOCK
# Store sbatch --comment (the plugin puts rule_<name>[_wildcards_...] there).
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
# A step over its --mem is killed when its usage is sampled, and the job ends
# OUT_OF_MEMORY, as cgroup enforcement ends it on a real cluster (this machine's
# container cannot hand slurmd a cgroup: task/none, proctrack/linuxproc).
JobAcctGatherParams=OverMemoryKill"
else
    ACCT="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi
cat >"$ETC/slurm.conf" <<CONF
# Written by dpscale ci/slurm/start.sh for a throw-away single-node cluster.
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/spool/ctld
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmctldLogFile=$LOG/slurmctld.log
$SLURMD_FILES
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=$DEF_MEM
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
$ACCT
JobCompType=jobcomp/none
$NODE_LINES
# Preemption as sites set it up: a job of the urgent partition requeues the jobs of the
# default one whose CPUs it needs (tests/e2e/test_slurm_faults.py preempts a cell so).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=$PARTITION Nodes=$NODELIST Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=$PARTITION-urgent Nodes=$NODELIST Default=NO MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
CONF
chmod 644 "$ETC/slurm.conf"
export SLURM_CONF=$ETC/slurm.conf

# /etc/slurm/slurm.conf: back up a foreign one once, then install ours.
mkdir -p /etc/slurm
if [[ -e /etc/slurm/slurm.conf && ! -e $STATE/slurm.conf.orig && ! -e $STATE/slurm.conf.none ]]; then
    if ! grep -q "dpscale ci/slurm/start.sh" /etc/slurm/slurm.conf; then
        cp -p /etc/slurm/slurm.conf "$STATE/slurm.conf.orig"
    else
        : >"$STATE/slurm.conf.none"
    fi
elif [[ ! -e /etc/slurm/slurm.conf && ! -e $STATE/slurm.conf.orig ]]; then
    : >"$STATE/slurm.conf.none"
fi
cp "$ETC/slurm.conf" /etc/slurm/slurm.conf

# ---------------------------------------------------------------- mariadb + slurmdbd
if [[ $DBD != 0 ]]; then
    DB=$STATE/mysql
    SOCK=$RUN/mysqld.sock
    if [[ ! -d $DB/mysql ]]; then
        rm -rf "$DB"
        timeout 120 mariadb-install-db --no-defaults --datadir="$DB" --user=root \
            --skip-test-db --auth-root-authentication-method=socket \
            >"$LOG/mariadb-install.log" 2>&1 || fail "mariadb-install-db failed"
    fi
    setsid mariadbd --no-defaults --user=root --datadir="$DB" --socket="$SOCK" \
        --pid-file="$RUN/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --log-error="$LOG/mariadb.log" --skip-log-bin \
        --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900 \
        </dev/null >>"$LOG/mariadb.log" 2>&1 &
    wait_for 60 "mariadbd" timeout 5 mariadb --no-defaults --socket="$SOCK" -e "SELECT 1"
    timeout 30 mariadb --no-defaults --socket="$SOCK" -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'dpscale';
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'dpscale';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
        CREATE DATABASE IF NOT EXISTS slurm_acct_db;" >>"$LOG/mariadb.log" 2>&1 \
        || fail "could not create the slurm database user"

    # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF.
    cat >"$ETC/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=$(hostname -s)
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=dpscale
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$ETC/slurmdbd.conf"
    slurmdbd </dev/null >>"$LOG/slurmdbd.log" 2>&1 || fail "slurmdbd failed to start"
    wait_for 30 "slurmdbd" timeout 5 sacctmgr -n list cluster
    if ! timeout 10 sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        timeout 20 sacctmgr -i add cluster "$CLUSTER" >>"$LOG/slurmdbd.log" 2>&1 \
            || fail "sacctmgr add cluster failed"
    fi
fi

# ---------------------------------------------------------------- slurmctld + slurmd
# No -c: state (next job id) survives a restart, so sacct ids stay unique.
slurmctld -f "$ETC/slurm.conf" </dev/null >>"$LOG/slurmctld.log" 2>&1 || fail "slurmctld failed to start"
wait_for 30 "slurmctld" timeout 5 scontrol ping
for n in "${NODES[@]}"; do
    slurmd -f "$ETC/slurm.conf" -N "$n" </dev/null >>"$LOG/slurmd.log" 2>&1 || fail "slurmd -N $n failed to start"
done

node_idle() {   # every node idle
    local st
    st=$(timeout 5 sinfo -h -N -n "$NODELIST" -o '%T' 2>/dev/null) || return 1
    [[ -n $st ]] && ! grep -qv '^idle' <<<"$st"
}
deadline=$((SECONDS + START_TIMEOUT)) resumed=0
while ((SECONDS < deadline)); do
    node_idle && break
    if ((SECONDS + START_TIMEOUT - deadline >= 3)); then
        for d in slurmctld "${SLURMDS[@]}"; do
            pid_alive "$RUN/$d.pid" || fail "$d exited during start-up (see $LOG/$d.log)"
        done
    fi
    # A node left DOWN/DRAINED by an earlier run: resume it once.
    if ((resumed == 0 && SECONDS + START_TIMEOUT - deadline >= 5)); then
        timeout 5 scontrol update nodename="$NODELIST" state=resume >/dev/null 2>&1 || true
        resumed=1
    fi
    sleep 0.5
done
node_idle || fail "nodes $NODELIST not idle after ${START_TIMEOUT}s (state: $(timeout 5 sinfo -h -N -n "$NODELIST" -o '%N=%T' 2>/dev/null | tr '\n' ' '))"

cat >"$STATE/cluster.env" <<ENV
STATE=$STATE
NODE=$NODE
NODES=$NODELIST
CPUS=$CPUS
MEM_MB=$MEM_MB
PARTITION=$PARTITION
CLUSTER=$CLUSTER
DBD=$DBD
SLURM_CONF=$ETC/slurm.conf
ENV
echo "start.sh: node(s) $NODELIST idle (CPUs=$CPUS each, RealMemory=$MEM_MB partition=$PARTITION slurmdbd=$DBD) state=$STATE"
