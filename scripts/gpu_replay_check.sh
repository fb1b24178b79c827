#!/usr/bin/env bash
# The GPU validation of `offlint replay`, in one command, on a machine with a CUDA GPU (docs/gpu-validation.md).
# Run from the repository root:
#
#   bash scripts/gpu_replay_check.sh            # results under $OUT, else ./gpu-replay-out
#
# It uses the torch and megatron-core it finds (pip install -e '.[replay]'). On a machine without network and
# without megatron-core, fill .device-wheels/ with scripts/fetch_device_wheels.sh on a connected machine first
# (git-ignored; copy it along): the script then installs those wheels into /tmp/offlint-site.
# Writes: env.txt (GPU, driver, versions), gpu-tests.txt (pytest -m gpu), verify.txt + verify.json
# (--verify of optimizer offloading), sweep.txt + sweep.json + sweep.png (fractions 0..1).
set -uo pipefail
. "$(dirname "$0")/device_env.sh"  # out, the wheels, PYTHONPATH

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, megatron.core as m; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'megatron-core', m.__version__)"
  python3 -c "import transformer_engine" 2>/dev/null && echo "transformer-engine: installed" || echo "transformer-engine: absent"
  nproc; free -g | head -2; } > "$out/env.txt" 2>&1
cat "$out/env.txt"

python3 -m pytest tests/test_replay_cli.py -m gpu -n 0 -rs -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.txt"
tests=${PIPESTATUS[0]}

recipe=(fixtures/replay/tiny_gpt_recipes.py --recipe tiny_gpt_optimizer_offload_config --iters 10)
python3 -m offlint replay "${recipe[@]}" --verify --result-json "$out/verify.json" --run-dir /tmp/replay-verify \
  2>&1 | tee "$out/verify.txt"
verify=${PIPESTATUS[0]}
python3 -m offlint replay "${recipe[@]}" --verify --fractions 0,0.25,0.5,0.75,1 --plot "$out/sweep.png" \
  --result-json "$out/sweep.json" --run-dir /tmp/replay-sweep 2>&1 | tee "$out/sweep.txt"
sweep=${PIPESTATUS[0]}

echo "gpu tests exit $tests, verify exit $verify, sweep exit $sweep" | tee -a "$out/env.txt"
[ "$tests" = 0 ] && [ "$verify" = 0 ] && [ "$sweep" = 0 ]
