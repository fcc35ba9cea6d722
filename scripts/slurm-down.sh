#!/bin/bash
# Stops the lab cluster started by scripts/slurm-up.sh: every PID recorded in
# $SLURM_LAB_DIR/pids (default /tmp/arbiter-slurm/pids) gets SIGTERM, then SIGKILL if still
# alive after a few seconds (a slurmd that cannot reach its controller ignores SIGTERM), and the
# script waits for each to exit. Idempotent: nothing recorded, nothing running => no-op.
# Running jobs die with their slurmd (proctrack/linuxproc leaves no cgroup behind).
set -euo pipefail
START_NS=$(date +%s%N)
elapsed() { echo "$(( ($(date +%s%N) - START_NS) / 1000000 )) ms"; }

[ "$(id -u)" = 0 ] || { echo "slurm-down.sh: must run as root" >&2; exit 1; }

LAB=${SLURM_LAB_DIR:-/tmp/arbiter-slurm}
PIDS=$LAB/pids
GRACE_S=${SLURM_DOWN_GRACE_S:-3}

# slurmd first (so they do not log controller-lost noise), then slurmctld, then munged.
order="slurmd-n1 slurmd-n2 slurmd-n3 slurmd-n4 slurmctld munged"
declare -a live=()
for name in $order; do
    f=$PIDS/$name.pid
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    # Only signal a PID that is still the daemon we started (PIDs get reused).
    if kill -0 "$pid" 2>/dev/null && grep -qE 'slurm|munge' "/proc/$pid/cmdline" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        live+=("$pid")
    fi
    rm -f "$f"
done

gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

deadline=$(( $(date +%s%N) + GRACE_S * 1000000000 ))
for pid in "${live[@]}"; do
    while ! gone "$pid" && [ "$(date +%s%N)" -lt "$deadline" ]; do sleep 0.1; done
    if ! gone "$pid"; then
        echo "PID $pid ignored SIGTERM for ${GRACE_S}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
done
for pid in "${live[@]}"; do
    for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
    gone "$pid" || { echo "PID $pid still alive after SIGKILL" >&2; exit 1; }
done
rm -f "$PIDS"/*.daemon.pid

echo "slurm lab cluster down (${#live[@]} daemons stopped) in $(elapsed)"
