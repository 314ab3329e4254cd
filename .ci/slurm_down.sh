#!/usr/bin/env bash
# Undo .ci/slurm_up.sh PREFIX: stop its daemons by their pid files (never by
# name: another Slurm may run on this machine) and put /etc/slurm/slurm.conf
# back as it was. Safe to run twice or after a failed bring-up.
set -uo pipefail
PREFIX=${1:?usage: slurm_down.sh PREFIX}

stop() {  # stop the process in pid file $1: TERM, then KILL after 5 s
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
}

# cancel what is left in our cluster (its controller is the one slurm.conf names)
if [ -e "$PREFIX/owns-etc-slurm-conf" ] && [ -f "$PREFIX/slurm/run/slurmctld.pid" ]; then
  jobs=$(timeout 10 squeue -h -o %i 2>/dev/null)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 20); do [ -z "$(timeout 5 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.5; done
  fi
fi

stop "$PREFIX/slurm/run/slurmd.pid"
stop "$PREFIX/slurm/run/slurmctld.pid"
stop "$PREFIX/munge/munged.pid"

if [ -e "$PREFIX/owns-etc-slurm-conf" ]; then
  if [ -e "$PREFIX/slurm.conf.orig" ]; then
    mv "$PREFIX/slurm.conf.orig" /etc/slurm/slurm.conf
  else
    rm -f /etc/slurm/slurm.conf
  fi
  rm -f "$PREFIX/owns-etc-slurm-conf"
fi
echo "slurm down (prefix $PREFIX)"
