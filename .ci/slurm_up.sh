#!/usr/bin/env bash
# Bring up a one-node Slurm cluster on this machine, as root, without systemd:
# Debian's slurmctld, slurmd, slurm-client and munge, daemons started by hand.
# For tests/workflow/test_slurm.py (CI); undo it with .ci/slurm_down.sh PREFIX.
#
# Usage: .ci/slurm_up.sh PREFIX
#   PREFIX  an empty scratch folder: keys, state, spool, logs and pid files go there
#   NCPUS   CPUs the node advertises (default 8; more than nproc is allowed through
#           SlurmdParameters=config_overrides, so several small MPI jobs run at once)
#
# slurm.conf goes to /etc/slurm/slurm.conf, the path compiled into Debian's
# libslurm: the Snakemake plugin's job step drops SLURM_CONF, so a config
# anywhere else is lost inside jobs. An existing file there is moved to
# PREFIX/slurm.conf.orig and put back by slurm_down.sh. Ports: 6817/6818, or
# free ones above 16817 when those are taken.
#
# Exit status: 0 up; 3 Slurm cannot be installed here (not root, no apt, apt
# failed): the caller skips; anything else: it was installed but did not start.
set -euo pipefail
PREFIX=${1:?usage: slurm_up.sh PREFIX}
NCPUS=${NCPUS:-8}
PREFIX=$(cd "$PREFIX" && pwd)

cannot_install() { echo "cannot install Slurm: $*" >&2; exit 3; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  [ "$(id -u)" = 0 ] || cannot_install "not root"
  command -v apt-get >/dev/null || cannot_install "no apt-get (not a Debian-family system)"
  apt-get update -qq >"$PREFIX/apt.log" 2>&1 || cannot_install "apt-get update failed: $(tail -n 3 "$PREFIX/apt.log")"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >>"$PREFIX/apt.log" 2>&1 \
    || cannot_install "apt-get install failed: $(tail -n 3 "$PREFIX/apt.log")"
fi
[ "$(id -u)" = 0 ] || cannot_install "not root (the daemons and /etc/slurm need it)"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
CPORT=6817 DPORT=6818
if ! port_free $CPORT || ! port_free $DPORT; then
  for base in $(seq 16817 1000 46817); do
    if port_free "$base" && port_free $((base + 1)); then CPORT=$base DPORT=$((base + 1)); break; fi
  done
fi

dir=$PREFIX                                   # munged: every folder above its socket must be o+x
while [ "$dir" != / ]; do
  [ "$(( 0$(stat -c %a "$dir") & 01 ))" = 1 ] || { echo "munged needs o+x on $dir; use another PREFIX" >&2; exit 1; }
  dir=$(dirname "$dir")
done
mkdir -p "$PREFIX"/munge "$PREFIX"/slurm/{state,spool,log,run}
chmod 755 "$PREFIX" "$PREFIX"/munge          # munged: the socket folder must be o+x
[ -f "$PREFIX/munge/munge.key" ] || mungekey -c -k "$PREFIX/munge/munge.key"
chmod 600 "$PREFIX/munge/munge.key"
munged -S "$PREFIX/munge/munge.socket" --key-file="$PREFIX/munge/munge.key" \
  --pid-file="$PREFIX/munge/munged.pid" --log-file="$PREFIX/munge/munged.log" \
  --seed-file="$PREFIX/munge/munged.seed"

# MpiDefault=none: only the profile's explicit `srun --mpi=pmi2` wires the MPI
# ranks (so the test proves that setting matters), and the plugin's `srun -n1`
# around ordinary jobs sets no PMI variables (scaledl's CLI initialises MPI when
# it starts, which fails on an srun PMI-2 descriptor its shell did not inherit).
# MinJobAge keeps finished jobs visible to squeue (the plugin's status command
# here: no slurmdbd, no sacct).
cat > "$PREFIX/slurm/slurm.conf" <<CONF
ClusterName=scaledlci
SlurmctldHost=localhost
SlurmctldPort=$CPORT
SlurmdPort=$DPORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$PREFIX/munge/munge.socket
StateSaveLocation=$PREFIX/slurm/state
SlurmdSpoolDir=$PREFIX/slurm/spool
SlurmctldPidFile=$PREFIX/slurm/run/slurmctld.pid
SlurmdPidFile=$PREFIX/slurm/run/slurmd.pid
SlurmctldLogFile=$PREFIX/slurm/log/slurmctld.log
SlurmdLogFile=$PREFIX/slurm/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$NCPUS RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

mkdir -p /etc/slurm
if [ -e /etc/slurm/slurm.conf ] && [ ! -e "$PREFIX/slurm.conf.orig" ]; then
  mv /etc/slurm/slurm.conf "$PREFIX/slurm.conf.orig"
fi
cp "$PREFIX/slurm/slurm.conf" /etc/slurm/slurm.conf
touch "$PREFIX/owns-etc-slurm-conf"           # slurm_down.sh removes or restores it

slurmctld
slurmd -N localhost
for _ in $(seq 120); do
  if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then
    echo "slurm up: node localhost, $NCPUS CPUs, partition debug, ports $CPORT/$DPORT, prefix $PREFIX"
    exit 0
  fi
  sleep 0.25
done
echo "slurm did not come up" >&2
tail -n 20 "$PREFIX"/slurm/log/*.log "$PREFIX"/munge/munged.log >&2 || true
exit 1
