#!/usr/bin/env bash
# Stop the daemons scripts/start_slurm.sh started, by the PIDs in their pid files (never by name).
# Packages and /etc/slurm stay; start_slurm.sh starts it again in a second or two.
SLURM_DIR=${SLURM_DIR:-/tmp/slurm}
for f in "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid" /run/munge/munged.pid; do
  [ -s "$f" ] || continue
  p=$(cat "$f")
  kill "$p" 2>/dev/null || continue
  for _ in $(seq 1 80); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$p" 2>/dev/null; then echo "stop_slurm: pid $p ($f) still alive, sending KILL"; kill -9 "$p"; fi
  echo "stop_slurm: stopped pid $p ($f)"
done
