#!/usr/bin/env bash
# A small generated git history for a replay bisect (scripts/gpu_validation_1b.sh): COMMITS commits of
# fixtures/gpt_1b_recipes.py, each with a harmless edit, and commit BREAK drops the optimizer offload from the
# recipe gpt_1b_offload, so that from there on it no longer fits a memory budget the offload fits.
#
#   bash scripts/make_offload_history.sh DIR RECIPES_FILE [COMMITS] [BREAK]
set -euo pipefail
dir=$1 source=$2 commits=${3:-8} break_at=${4:-5}
[ -e "$dir" ] && { echo "make_offload_history: $dir exists; give a new folder"; exit 2; }
mkdir -p "$dir/fixtures"
git -C "$dir" init -q
git -C "$dir" config user.email bisect@offlint.invalid
git -C "$dir" config user.name "offlint history"
for i in $(seq 1 "$commits"); do
  offload=True
  [ "$i" -ge "$break_at" ] && offload=False
  { cat "$source"
    printf '\n\ndef gpt_1b_offload():\n'
    printf '    cfg = gpt_1b_optimizer_offload_config()\n'
    printf '    cfg.optimizer.optimizer_cpu_offload = %s\n' "$offload"
    printf '    # the harmless edit of commit %d\n' "$i"
    printf '    return cfg\n'; } > "$dir/fixtures/gpt_1b_recipes.py"
  git -C "$dir" add -A
  message="revision $i"
  [ "$i" = "$break_at" ] && message="revision $i: drop the optimizer offload"
  git -C "$dir" commit -q -m "$message"
done
git -C "$dir" log --oneline
