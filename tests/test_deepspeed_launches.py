"""A `deepspeed` launch's ranks and the script's environment (launch.deepspeed_ranks_environment).

DeepSpeed's runner starts a multi-node job's ranks over ssh: they get each node's login environment, the launching
shell's NCCL*, PYTHON*, MV2*, UCX* and MLFLOW* variables and the lines of `.deepspeed_env`, not the rest of what the
script exports. A Megatron-DeepSpeed fork sets PYTORCH_CUDA_ALLOC_CONF in its committed `.deepspeed_env`, and OFL301
had said 63 multi-node launches ran without it. A local run (no hostfile, one node, `--no_ssh`) inherits the
script's environment, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check

FLAGS = "pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 --train-iters 10 --deepspeed"


def _check(tmp_path: Path, script: str, strict: bool = False):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    (tmp_path / ".deepspeed_env").write_text("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    (tmp_path / "launch.sh").write_text(f"#!/bin/bash\n{script}\n")
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL301"],
                                                 cache=False, strict=strict))
    assert not result.errors, result.errors
    return result.findings


@pytest.mark.parametrize("launcher", [
    "deepspeed --hostfile hosts --num_nodes 2 --num_gpus 8",
    "deepspeed --hostfile=hosts --num_nodes=2",
    "deepspeed -H hosts --include 'node1@node2:0,1'",
    "deepspeed --force_multi --num_gpus 8",
    "deepspeed --hostfile hosts --num_gpus 8",  # the hostfile's hosts decide: not known
    "deepspeed --hostfile hosts --num_nodes $NODES",
])
def test_a_launch_that_may_run_on_several_nodes_does_not_know_its_ranks_allocator_options(tmp_path, launcher):
    assert _check(tmp_path, f"{launcher} {FLAGS}") == []
    assert _check(tmp_path, f"{launcher} {FLAGS}", strict=True) == []  # (as for any launch whose environment is open)


@pytest.mark.parametrize("launcher", [
    "deepspeed --num_gpus 8",
    "deepspeed --hostfile hosts --num_nodes 1 --num_gpus 8",
    "deepspeed -H hosts --include node1:0,1,2,3",
    "deepspeed --no_ssh --hostfile hosts --num_nodes 2 --node_rank 0",
    "deepspeed --num_nodes $NODES --num_gpus 8",  # no hostfile: more than one node is refused
])
def test_a_local_launch_runs_with_the_scripts_environment(tmp_path, launcher):
    found = _check(tmp_path, f"{launcher} {FLAGS}")
    assert [(f.code, f.possible) for f in found] == [("OFL301", False)]


def test_the_script_exports_reach_the_ranks_only_where_deepspeed_passes_them(tmp_path):
    """On several nodes, the allocator options the script exports are not passed (their name has none of the
    prefixes), so OFL301's info about the options it chose is not given either; locally it still is."""
    export = "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256\n"
    assert _check(tmp_path, f"{export}deepspeed --hostfile hosts --num_nodes 2 {FLAGS}") == []
    local = _check(tmp_path, f"{export}deepspeed --num_gpus 8 {FLAGS}")
    assert [(f.code, f.severity) for f in local] == [("OFL301", "info")]
