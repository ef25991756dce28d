#!/usr/bin/env bash
# Install what ci/slurm/start.sh needs to run a single-node SLURM cluster
# (Debian/Ubuntu packages). Idempotent: does nothing when everything is there.
#
#   ci/slurm/install.sh            # slurm + munge + slurmdbd + mariadb (for sacct)
#   DPSCALE_SLURM_DBD=0 ci/slurm/install.sh   # without slurmdbd/mariadb
#
# Needs root. Quiet: prints one line, or apt's log tail on failure.
set -euo pipefail

# one install at a time (the test suite may start one in the background at its start): a
# second waits here, then finds everything installed
exec 9>/tmp/dpscale-slurm-install.lock
flock -w 1200 9

want_dbd=${DPSCALE_SLURM_DBD:-1}
pkgs=(slurm-wlm slurmctld slurmd slurm-client munge)
bins=(slurmctld slurmd sbatch srun squeue sacct scontrol munged mungekey)
if [[ "$want_dbd" != 0 ]]; then
    pkgs+=(slurmdbd mariadb-server)
    bins+=(slurmdbd mariadbd mariadb-install-db mariadb sacctmgr)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for b in "${bins[@]}"; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$b" >/dev/null 2>&1 || { missing+=("(binary $b)"); }
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install.sh: all SLURM packages already installed"
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "install.sh: must run as root to install: ${missing[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/dpscale-slurm-install.XXXXXX.log)
apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
          -o DPkg::Lock::Timeout=120)
# policy-rc.d keeps postinst scripts from starting daemons (no systemd here;
# start.sh starts its own private copies).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; made_policy=1
fi
# (an if, not `[[ ]] && rm`: a false test would become the script's exit status)
cleanup() { if [[ $made_policy == 1 ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT

if ! { timeout 300 apt-get update -q >"$log" 2>&1 &&
       timeout 900 apt-get install "${apt_opts[@]}" --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; }; then
    echo "install.sh: apt-get failed; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
echo "install.sh: installed ${pkgs[*]} (log: $log)"
