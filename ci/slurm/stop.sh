#!/usr/bin/env bash
# Stop what ci/slurm/start.sh started (by pid file, nothing else) and restore
# /etc/slurm/slurm.conf. Never hangs: each daemon gets SIGTERM, then SIGKILL
# after a bounded wait. Safe to run twice or when nothing is running.
#
#   ci/slurm/stop.sh [STATE_DIR]        (default /tmp/dpscale-slurm)
set -uo pipefail

STATE=${1:-/tmp/dpscale-slurm}
RUN=$STATE/run
export PATH="$PATH:/usr/sbin:/sbin"

# is_ours PID NAME: the pid is alive and its command name is NAME (guards
# against a recycled pid from a stale pid file).
is_ours() {
    local pid=$1 name=$2 comm state
    kill -0 "$pid" 2>/dev/null || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$name"* ]] || return 1
    # A zombie (exited, parent has not reaped it yet) counts as stopped.
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [[ $state != Z ]]
}

stop_daemon() {   # stop_daemon NAME [COMM]
    local name=$1 comm=${2:-$1} pidfile=$RUN/$1.pid pid i
    [[ -s $pidfile ]] || return 0
    pid=$(cat "$pidfile" 2>/dev/null)
    if [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$comm"; then
        kill -TERM "$pid" 2>/dev/null
        for ((i = 0; i < 40; i++)); do      # up to 10 s
            is_ours "$pid" "$comm" || break
            sleep 0.25
        done
        if is_ours "$pid" "$comm"; then
            echo "stop.sh: $name (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null
            sleep 0.5
        fi
    fi
    rm -f "$pidfile"
}

# slurmstepd processes of our node (they carry our SLURM_CONF from slurmd).
our_stepds() {
    local p
    for p in $(pgrep -x slurmstepd 2>/dev/null); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" |
            grep -qx "SLURM_CONF=$STATE/etc/slurm.conf" && echo "$p"
    done
}

# Cancel jobs still queued or running, and give their steps up to 10 s to end.
if [[ -s $RUN/slurmctld.pid ]] && command -v scancel >/dev/null; then
    SLURM_CONF=$STATE/etc/slurm.conf timeout 5 scancel --quiet --state=PENDING >/dev/null 2>&1
    SLURM_CONF=$STATE/etc/slurm.conf timeout 5 scancel --quiet --state=RUNNING >/dev/null 2>&1
    for ((i = 0; i < 40; i++)); do
        [[ -z $(our_stepds) ]] && break
        sleep 0.25
    done
fi

stop_daemon slurmd
for f in "$RUN"/slurmd-*.pid; do   # DPSCALE_SLURM_NODES > 1: one slurmd per node
    [[ -e $f ]] && stop_daemon "$(basename "$f" .pid)" slurmd
done
for p in $(our_stepds); do
    echo "stop.sh: killing leftover slurmstepd $p" >&2
    pkill -KILL -P "$p" 2>/dev/null   # its job processes
    kill -KILL "$p" 2>/dev/null
done
stop_daemon slurmctld
stop_daemon slurmdbd
stop_daemon mariadbd
stop_daemon munged

# Restore /etc/slurm/slurm.conf.
if [[ -e $STATE/slurm.conf.orig ]]; then
    cp -p "$STATE/slurm.conf.orig" /etc/slurm/slurm.conf && rm -f "$STATE/slurm.conf.orig"
elif [[ -e $STATE/slurm.conf.none ]]; then
    if grep -qs "dpscale ci/slurm/start.sh" /etc/slurm/slurm.conf; then
        rm -f /etc/slurm/slurm.conf
    fi
    rm -f "$STATE/slurm.conf.none"
fi
rm -f "$STATE/munge/munge.socket.2" "$STATE/munge/munge.socket.2.lock" "$STATE/cluster.env"
echo "stop.sh: stopped SLURM cluster in $STATE"
exit 0
