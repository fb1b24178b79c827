#!/usr/bin/env bash
# The GPU validation of `offlint replay`, in one command, on a CUDA machine with Python 3.12 and torch but no
# megatron-core and no network (the device machine; docs/gpu-validation.md). Run from the repository root after
# `scripts/fetch_device_wheels.sh` has filled .device-wheels/ (carried along; it is git-ignored):
#
#   bash scripts/gpu_replay_check.sh            # results under $OUT (the device tool's folder), else ./gpu-replay-out
#
# Writes: env.txt (GPU, driver, versions), gpu-tests.txt (pytest -m gpu), verify.txt + verify.json
# (--verify of optimizer offloading), sweep.txt + sweep.json + sweep.png (fractions 0..1).
set -uo pipefail
out=${OUT:-gpu-replay-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/offlint-site \
  .device-wheels/*.whl || { echo "cannot install .device-wheels (run scripts/fetch_device_wheels.sh here first)"; exit 2; }
export PYTHONPATH="$PWD:/tmp/offlint-site${PYTHONPATH:+:$PYTHONPATH}"

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, megatron.core as m; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'megatron-core', m.__version__)"
  python3 -c "import transformer_engine" 2>/dev/null && echo "transformer-engine: installed" || echo "transformer-engine: absent"
  nproc; free -g | head -2; } > "$out/env.txt" 2>&1
cat "$out/env.txt"

python3 -m pytest tests/test_replay_cli.py -m gpu -q -rs -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.txt"
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
