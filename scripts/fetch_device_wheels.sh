#!/usr/bin/env bash
# Download the wheels `scripts/gpu_replay_check.sh` installs on the GPU machine (Python 3.12, x86-64, no network
# there): megatron-core 0.19.2 and offlint's own dependencies that the machine's image lacks.
# Run here, in the repository root; the folder is git-ignored and is carried to the device with `carry`.
set -euo pipefail
dest=${1:-.device-wheels}
mkdir -p "$dest"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
get() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
          "${platforms[@]}" -d "$dest" "$@"; }
get megatron-core==0.19.2
# offlint's dependencies missing from the device image (click, PyYAML, pathspec, packaging are there).
get hydra-core==1.3.2 omegaconf==2.3.0 GitPython==3.1.45 gitdb==4.0.12 smmap==5.0.2
get tree-sitter==0.25.2 tree-sitter-bash==0.25.1 orjson==3.13.0
# antlr4-python3-runtime 4.9.3 (hydra-core's pin) is published as an sdist only: build its pure-Python wheel here.
python3 -m pip wheel -q --no-deps -w "$dest" antlr4-python3-runtime==4.9.3
ls -la "$dest"
