#!/usr/bin/env bash
# Start a single-node Slurm cluster on loopback for offlint's Slurm tests (Debian 12, run as root).
#
# Installs slurm-wlm + munge from Debian's packages when missing, writes /etc/slurm/slurm.conf for this
# machine's CPUs and memory (no cgroups, no accounting database), starts munged, slurmctld and slurmd
# directly (no systemd), and waits until the node is idle. Idempotent: if the node already answers, it
# says so and exits 0. The node also advertises SLURM_FAKE_GPUS (default 2) GPUs as a GRES without device
# files (copies of /dev/null), so GPU-shaped jobs (--gpus-per-node) can be submitted here; no GPU is bound to them.
# Stop it with scripts/stop_slurm.sh. Environment: SLURM_DIR (default /tmp/slurm), SLURM_NODE,
# SLURM_FAKE_GPUS.
set -euo pipefail

SLURM_DIR=${SLURM_DIR:-/tmp/slurm}
NODE=${SLURM_NODE:-$(hostname -s)}
FAKE_GPUS=${SLURM_FAKE_GPUS:-2}
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s%N)
say() { local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf '[start_slurm %d.%03ds] %s\n' $((ms/1000)) $((ms%1000)) "$*"; }

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null || true; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Ask sinfo only when both daemons live: with no slurmctld, sinfo retries for about 10 s before failing.
if alive "$SLURM_DIR/slurmctld.pid" && alive "$SLURM_DIR/slurmd.pid" && command -v sinfo >/dev/null 2>&1; then
  case "$(node_state)" in
    idle|mixed|allocated|completing)
      say "already running: node $NODE is $(node_state); nothing to do"
      exit 0 ;;
  esac
fi

if [ "$(id -u)" != 0 ]; then
  echo "start_slurm: must run as root (installs packages and starts daemons)" >&2
  exit 1
fi

# 1. packages: 9 of them, about 3.7 MB (recommends would add 34 unneeded plugin packages)
missing=0
for p in slurm-wlm munge; do dpkg -s "$p" >/dev/null 2>&1 || missing=1; done
if [ "$missing" = 1 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
say "installed: $(slurmctld -V)"

# 2. munge: key (the package's postinst normally creates one), runtime dir, daemon
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
fi
munge -n | unmunge >/dev/null
say "munged up (pid $(cat /run/munge/munged.pid))"

# 3. slurm.conf: one node on 127.0.0.1, hardware from `slurmd -C`, no cgroups, no accounting
mkdir -p "$SLURM_DIR"/{state,spool,log}
HW=$(slurmd -C | head -n1 | sed 's/^NodeName=[^ ]* //')   # CPUs=.. Boards=.. RealMemory=..
gres_node= gres_types=
if [ "$FAKE_GPUS" -gt 0 ]; then
  gres_types="GresTypes=gpu"
  gres_node="Gres=gpu:$FAKE_GPUS"
  # Slurm counts a GPU only if its File is a character device: use copies of /dev/null (1,3).
  mkdir -p "$SLURM_DIR/fakegpu"
  for i in $(seq 0 $((FAKE_GPUS - 1))); do
    [ -c "$SLURM_DIR/fakegpu/gpu$i" ] || mknod "$SLURM_DIR/fakegpu/gpu$i" c 1 3
  done
  echo "NodeName=$NODE Name=gpu File=$SLURM_DIR/fakegpu/gpu[0-$((FAKE_GPUS - 1))]" > /etc/slurm/gres.conf
else
  rm -f /etc/slurm/gres.conf
fi
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=offlint-ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
MailProg=/bin/true
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=5
MinJobAge=300
InactiveLimit=0
$gres_types
NodeName=$NODE NodeAddr=127.0.0.1 $HW $gres_node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# 4. daemons: they fork into the background and write their pid files. `-c` starts from a clean state
#    (a test cluster keeps no jobs worth keeping, and an old drained node would otherwise stay drained).
slurmctld -c
slurmd -N "$NODE"
say "slurmctld (pid $(cat "$SLURM_DIR/slurmctld.pid")) and slurmd started"

# 5. wait until the node is idle (60 s at most)
state=
for _ in $(seq 1 120); do
  state=$(node_state)
  [ "$state" = idle ] && break
  sleep 0.5
done
if [ "$state" != idle ]; then
  echo "start_slurm: node $NODE not idle (state '$state'); last log lines:" >&2
  tail -n 30 "$SLURM_DIR"/log/*.log >&2
  exit 1
fi
say "node $NODE idle: $(sinfo -h -N -o '%N %c CPUs %m MB %G')"
