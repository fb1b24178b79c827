#!/usr/bin/env bash
# The larger GPU validation of `offlint replay` (docs/gpu-validation.md), after scripts/gpu_replay_check.sh:
# a 1.3B-parameter GPT at sequence 4096 (fixtures/replay/gpt_1b_recipes.py) swept over optimizer offload
# fractions, the precision-aware optimizer, a deliberate OOM under a --gpu-memory cap and the same recipe fitting
# with the offload, and a replay bisect over a generated history whose one commit drops the offload.
#
#   bash scripts/gpu_validation_1b.sh [ITERS]       # results under $OUT, else ./gpu-replay-out
#
# It needs what gpu_replay_check.sh needs (torch with CUDA, megatron-core; .device-wheels/ on a machine without
# network) and git. Each part has its own time limit, so one that hangs does not take the others with it.
set -uo pipefail
iters=${1:-6}
. "$(dirname "$0")/device_env.sh"  # out, the wheels, PYTHONPATH
recipes=fixtures/replay/gpt_1b_recipes.py
log=$out/validation-1b.txt
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
replay() { local limit=$1; shift; timeout "$limit" python3 -m offlint replay "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }

say "1. sweep: optimizer offload fractions 0, 0.25, 0.5, 0.75, 1 against a baseline without offloading, $iters iterations"
replay 900 "$recipes" --recipe gpt_1b_optimizer_offload_config --iters "$iters" --verify --fractions 0,0.25,0.5,0.75,1 \
  --plot "$out/sweep-1b.png" --result-json "$out/sweep-1b.json" --run-dir /tmp/sweep-1b
say "sweep exit $?"

say "1b. without train.manual_gc: the first HybridDeviceOptimizer's copies stay (expect memory-regression, exit 7)"
replay 300 "$recipes" --recipe gpt_1b_optimizer_offload_config --override train.manual_gc=false \
  --override optimizer.optimizer_offload_fraction=0 --iters "$iters" --verify --result-json /tmp/no-gc.json \
  --run-dir /tmp/no-gc
say "fraction 0 without manual_gc exit $?"

say "2. precision-aware optimizer, with the offload (fraction 1) and without it"
replay 300 "$recipes" --recipe gpt_1b_precision_aware_offload_config --iters "$iters" \
  --result-json /tmp/pa-offload.json --run-dir /tmp/pa-offload
say "precision-aware with offload exit $?"
replay 300 "$recipes" --recipe gpt_1b_config --override optimizer.use_precision_aware_optimizer=true \
  --iters "$iters" --result-json /tmp/pa-only.json --run-dir /tmp/pa-only
say "precision-aware without offload exit $?"

# The cap: halfway between the measured reserved peaks of the baseline and of the full offload.
cap=$(python3 - "$out/sweep-1b.json" <<'EOF'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
    base = max(report["baseline"]["peak_reserved_bytes"])
    full = max(report["runs"]["1"]["peak_reserved_bytes"])
    print(f"{(base + full) / 2 / 2**30:.2f}")
except Exception as exc:
    print(f"no cap: {exc}", file=sys.stderr)
EOF
)
say "3. OOM under --gpu-memory ${cap:-?} GiB: the baseline must be cuda-oom (exit 3), the offload must pass (exit 0)"
if [ -n "$cap" ]; then
  replay 300 "$recipes" --recipe gpt_1b_config --iters 2 --gpu-memory "$cap" --result-json /tmp/oom.json \
    --run-dir /tmp/oom
  say "baseline under the cap exit $?"
  replay 300 "$recipes" --recipe gpt_1b_optimizer_offload_config --iters 2 --gpu-memory "$cap" \
    --result-json /tmp/fits.json --run-dir /tmp/fits
  say "offload under the cap exit $?"
fi

say "4. replay bisect: 8 commits, commit 5 drops the optimizer offload; budget ${cap:-?} GiB"
if [ -n "$cap" ] && command -v git >/dev/null; then
  bash scripts/make_offload_history.sh /tmp/history "$PWD/$recipes" 8 5 >>"$log" 2>&1
  started=$(date +%s)
  timeout 900 python3 -m offlint bisect fixtures/gpt_1b_recipes.py --repo /tmp/history --recipe gpt_1b_offload \
    --good HEAD~7 --bad HEAD --probe replay --iters 2 --memory-budget "${cap}GiB" --timeout 300 \
    --report "$out/bisect-1b.md" --report-json /tmp/bisect.json --color never 2>&1 | tee -a "$log"
  say "bisect exit ${PIPESTATUS[0]} in $(( $(date +%s) - started )) s"
fi

# The result files of the single runs, gathered into one (at most 8 files come back from a device machine).
python3 - "$out/runs-1b.json" /tmp/no-gc.json /tmp/pa-offload.json /tmp/pa-only.json /tmp/oom.json /tmp/fits.json /tmp/bisect.json <<'EOF'
import json, os, sys
json.dump({os.path.basename(p): json.load(open(p)) for p in sys.argv[2:] if os.path.exists(p)},
          open(sys.argv[1], "w"), indent=1)
EOF
say "done"
