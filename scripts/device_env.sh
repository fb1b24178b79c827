# Sourced by scripts/gpu_replay_check.sh and scripts/gpu_validation_1b.sh (run from the repository root): the
# output folder ($OUT, else ./gpu-replay-out) as `out`, and torch, megatron-core and matplotlib importable with
# this checkout's offlint first, installing .device-wheels/ (scripts/fetch_device_wheels.sh) where they are missing.
out=${OUT:-gpu-replay-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
if ! python3 -c "import torch, megatron.core, matplotlib" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/offlint-site \
    .device-wheels/*.whl || { echo "torch, megatron-core or matplotlib is missing: pip install -e '.[replay]'" \
                                   "(or fill .device-wheels/ with scripts/fetch_device_wheels.sh)"; exit 2; }
  export PYTHONPATH="/tmp/offlint-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
