#!/bin/bash
# Brings up a one-machine Slurm 22.05 lab cluster for Arbiter's Slurm executor:
# munged + slurmctld + 4 slurmd (n1..n4) on loopback, with fake typed GPUs.
#
#   n1,n2: 4x gpu:v100, Feature=v100,rack1    n3,n4: 4x gpu:a100, Feature=a100,rack2
#   each CPUs=8 RealMemory=16000, one partition "arbiter" (Default=YES).
#
# Arbiter is the scheduler here; Slurm only runs jobs Arbiter pins with --nodelist. Hence:
# no Slurm preemption, no accounting (no slurmdbd), one partition.
#
# Needs root (apt-get, mknod, setpriv, slurmd as root). Idempotent: if the cluster recorded in
# $SLURM_LAB_DIR/pids is still running, it only prints sinfo. Stop with scripts/slurm-down.sh.
#
# Environment (all optional):
#   SLURM_LAB_DIR      lab root (default /tmp/arbiter-slurm): logs/, pids/, spool/, state/, fakegpu/
#   SLURM_LAB_LOG_DIR  daemon logs            (default $SLURM_LAB_DIR/logs)
#   SLURM_LAB_STATE_DIR slurmctld state       (default $SLURM_LAB_DIR/state)
#   SLURM_LAB_SPOOL_DIR slurmd spool          (default $SLURM_LAB_DIR/spool)
#   SLURM_LAB_GPU_DIR  fake GPU char devices  (default $SLURM_LAB_DIR/fakegpu)
#   SLURM_CONF_DIR     where slurm.conf/gres.conf go (default /etc/slurm, where the tools look
#                      without SLURM_CONF; any other dir prints the `export SLURM_CONF=...` needed)
set -euo pipefail
START_NS=$(date +%s%N)
elapsed() { echo "$(( ($(date +%s%N) - START_NS) / 1000000 )) ms"; }

[ "$(id -u)" = 0 ] || { echo "slurm-up.sh: must run as root (mknod, slurmd, setpriv)" >&2; exit 1; }

LAB=${SLURM_LAB_DIR:-/tmp/arbiter-slurm}
LOGS=${SLURM_LAB_LOG_DIR:-$LAB/logs}
STATE=${SLURM_LAB_STATE_DIR:-$LAB/state}
SPOOL=${SLURM_LAB_SPOOL_DIR:-$LAB/spool}
GPUS=${SLURM_LAB_GPU_DIR:-$LAB/fakegpu}
CONF_DIR=${SLURM_CONF_DIR:-/etc/slurm}
PIDS=$LAB/pids
MUNGE_RUN=/run/munge
NODES="n1 n2 n3 n4"
PARTITION=arbiter
export SLURM_CONF=$CONF_DIR/slurm.conf

# Counts nodes of our partition that are idle. `timeout`, because with no controller every
# sinfo call blocks for seconds.
idle_nodes() { timeout 3 sinfo -h -N -p "$PARTITION" -o %t 2>/dev/null | grep -c '^idle$' || true; }

# A recorded daemon counts as running if its PID exists, is not a zombie (PID 1 here may
# reap late) and still runs a slurm/munge program (PIDs get reused).
running() {
    local f=$PIDS/$1.pid pid
    [ -s "$f" ] || return 1
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null \
        && grep -qE 'slurm|munge' "/proc/$pid/cmdline" 2>/dev/null
}

# A recorded daemon's process exists and is not a zombie.
alive() {
    local f=$PIDS/$1.pid pid
    [ -s "$f" ] || return 1
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null
}

# --- Already up? Every recorded daemon alive => nothing to do. -----------------------------
alive=0
for name in munged slurmctld $(printf 'slurmd-%s ' $NODES); do
    if running "$name"; then alive=$((alive + 1)); fi
done
if [ "$alive" = 6 ]; then
    echo "slurm lab cluster already running (PIDs in $PIDS)"
    timeout 5 sinfo -N -p "$PARTITION" -o "%N %t %G %f" || true
    [ "$CONF_DIR" = /etc/slurm ] || echo "export SLURM_CONF=$SLURM_CONF"
    echo "checked in $(elapsed)"
    exit 0
elif [ "$alive" != 0 ]; then
    # Half a cluster (a daemon died): start clean rather than guess which parts to keep.
    echo "partial cluster found ($alive of 6 daemons alive); stopping it first"
    SLURM_LAB_DIR=$LAB "$(dirname "$0")/slurm-down.sh"
fi

# --- Install. --no-install-recommends skips ~35 plugin -dev packages; it is enough here. -----
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    echo "installing slurm + munge from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    pkgs="slurmctld slurmd slurm-client munge"
    if ! apt-get install -y --no-install-recommends $pkgs; then
        apt-get update
        apt-get install -y --no-install-recommends $pkgs || apt-get install -y $pkgs
    fi
    echo "installed in $(elapsed)"
fi
getent passwd slurm >/dev/null || { echo "user 'slurm' missing after install" >&2; exit 1; }
[ -s /etc/munge/munge.key ] || {
    # The munge postinst normally creates the key; recreate it if someone removed it.
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
}

# --- Directories and fake GPUs --------------------------------------------------------------
mkdir -p "$LAB" "$LOGS" "$STATE" "$SPOOL" "$GPUS" "$PIDS" "$CONF_DIR" "$MUNGE_RUN"
chown slurm:slurm "$STATE" "$LOGS"
chown munge:munge "$MUNGE_RUN"
# Character devices (same device as /dev/null): slurmd rejects plain files as GPU devices and
# then leaves CUDA_VISIBLE_DEVICES empty.
for i in 0 1 2 3; do
    [ -c "$GPUS/gpu$i" ] || { rm -f "$GPUS/gpu$i"; mknod "$GPUS/gpu$i" c 1 3; }
done

# --- Config ---------------------------------------------------------------------------------
cat >"$CONF_DIR/slurm.conf" <<EOF
# Arbiter lab cluster (written by scripts/slurm-up.sh; rewritten on every start).
# One slurmctld + 4 slurmd (multiple-slurmd build) on loopback with fake typed GPUs.
ClusterName=arbiterlab
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/%n
SlurmctldPidFile=$PIDS/slurmctld.daemon.pid
SlurmdPidFile=$PIDS/slurmd-%n.daemon.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# No cgroups in a container: track processes by /proc scan, no CPU binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
# Trust the node lines below, not the hardware (each fake node claims 8 CPUs on a small box).
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to squeue --states=all for an hour: exit codes without slurmdbd.
MinJobAge=3600
# Arbiter decides placement and pins every job with --nodelist and exact resources, so
# Slurm's own ordering (backfill) is not wanted: FIFO builtin. Batch jobs are not placed inside
# the sbatch RPC; slurmctld's 1 s background tick runs the scheduler once batch_sched_delay
# (default 3 s) has passed. batch_sched_delay=0 + sched_min_interval=0: pinned jobs RUNNING in
# 0.5-1.0 s (measured; 2-3 s with the default; backfill with bf_interval=1 was no faster).
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# No Slurm-side preemption or automatic requeue: Arbiter preempts by itself.
PreemptType=preempt/none
JobRequeue=0
KillWait=5
# No accounting: slurmdbd is not run (AccountingStorageTRES would be fatal without it).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001 CPUs=8 RealMemory=16000 Gres=gpu:v100:4 Feature=v100,rack1
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=17002 CPUs=8 RealMemory=16000 Gres=gpu:v100:4 Feature=v100,rack1
NodeName=n3 NodeHostname=localhost NodeAddr=127.0.0.1 Port=17003 CPUs=8 RealMemory=16000 Gres=gpu:a100:4 Feature=a100,rack2
NodeName=n4 NodeHostname=localhost NodeAddr=127.0.0.1 Port=17004 CPUs=8 RealMemory=16000 Gres=gpu:a100:4 Feature=a100,rack2
PartitionName=$PARTITION Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$CONF_DIR/gres.conf" <<EOF
AutoDetect=off
# Fake GPUs: char devices stand in for /dev/nvidiaN so Slurm tracks indices and sets
# CUDA_VISIBLE_DEVICES.
NodeName=n[1-2] Name=gpu Type=v100 File=$GPUS/gpu[0-3]
NodeName=n[3-4] Name=gpu Type=a100 File=$GPUS/gpu[0-3]
EOF

# --- Daemons, in the foreground (-D) so this script owns their PIDs -------------------------
setsid setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F \
    >"$LOGS/munged.out" 2>&1 </dev/null &
echo $! >"$PIDS/munged.pid"
for _ in $(seq 100); do munge -n >/dev/null 2>&1 && break; sleep 0.05; done
munge -n >/dev/null 2>&1 || { echo "munged did not start:" >&2; tail -5 "$LOGS/munged.out" >&2; exit 1; }

# -i: ignore saved state from a previous lab run (job ids restart, no stale jobs).
setsid /usr/sbin/slurmctld -D -i >"$LOGS/slurmctld.out" 2>&1 </dev/null &
echo $! >"$PIDS/slurmctld.pid"
for n in $NODES; do
    setsid /usr/sbin/slurmd -D -N "$n" >"$LOGS/slurmd-$n.out" 2>&1 </dev/null &
    echo $! >"$PIDS/slurmd-$n.pid"
done

ok=0
for _ in $(seq 300); do
    # Alive is enough here: just after the start its command line may still be the shell's
    # (before exec), which `running` would take for another process.
    alive slurmctld || { echo "slurmctld exited:" >&2; tail -5 "$LOGS/slurmctld.out" >&2; exit 1; }
    [ "$(idle_nodes)" = 4 ] && { ok=1; break; }
    sleep 0.1
done
[ "$ok" = 1 ] || { echo "nodes not idle after 30 s; see $LOGS" >&2; timeout 5 sinfo -N || true; exit 1; }

timeout 5 sinfo -N -p "$PARTITION" -o "%N %t %G %f"
[ "$CONF_DIR" = /etc/slurm ] || echo "export SLURM_CONF=$SLURM_CONF"
echo "slurm lab cluster up in $(elapsed) (logs in $LOGS, PIDs in $PIDS)"
