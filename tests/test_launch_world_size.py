"""OFL216 on a launch: the world size its launcher states (torchrun's `--nproc-per-node` x `--nnodes`) against its
parallel layout. Megatron-LM d98e8a6's examples/bert/train_bert_340m_distributed.sh starts 8 processes
(GPUS_PER_NODE=8, NUM_NODES=1) with TP8 x PP16: validate_args asserts before anything else (a helper's triage of
two forks found OFL218 naming a later assert as the first failure). A count the environment chooses
(`NNODES=${SLURM_NNODES:-1}`, PAI's `${WORLD_SIZE:-1}`) is not the launch's: no finding. Fixtures of our own.
"""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json

FLAGS = ("pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --num-layers 32 "
         "--hidden-size 1024 --num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 --train-iters 10 "
         "--seq-length 512 --max-position-embeddings 512\n")


def _ofl216(tmp_path, script: str) -> list[str]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.sh").write_text(script)
    return [f["message"] for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL216"]


def test_a_launch_stating_fewer_gpus_than_its_layout_needs(tmp_path):
    script = ('GPUS_PER_NODE=8\nNUM_NODES=1\n'
              'DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES --master_addr $MASTER_ADDR)\n'
              f'torchrun ${{DISTRIBUTED_ARGS[@]}} {FLAGS}')
    assert _ofl216(tmp_path, script) == [
        'TP8 x PP16 x CP1 needs a multiple of 128 GPUs, and the launch starts 8: Megatron-LM\'s validate_args asserts '
        '"world size (8) is not divisible by total_model_size (total_model_size=128)"']


@pytest.mark.parametrize("defaults, reported", [
    ("GPUS_PER_NODE=8\nNODE_RANK=${NODE_RANK:-0}\nMASTER_ADDR=${MASTER_ADDR:-localhost}\n", True),  # not the count's
    ("GPUS_PER_NODE=${GPUS_PER_NODE:-8}\nNODE_RANK=${NODE_RANK:-0}\n", False),  # the count the environment chooses
])
def test_an_arrays_element_taking_a_default_leaves_the_count_beside_it_stated(tmp_path, defaults, reported):
    """`DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES --node_rank $NODE_RANK)` with
    `NODE_RANK=${NODE_RANK:-0}` (a helper's sweep: YoumiMa's Megatron-LM scripts, TP8 x PP4 on 8 GPUs): the array's
    words had all taken NODE_RANK's default, so the count was taken for one the environment chooses, and neither
    OFL216 nor `offlint estimate` saw the launch's 8 GPUs. Each element takes its own defaults."""
    script = (f'NUM_NODES=1\n{defaults}'
              'DISTRIBUTED_ARGS=(\n    --nproc_per_node $GPUS_PER_NODE\n    --nnodes $NUM_NODES\n'
              '    --node_rank $NODE_RANK\n    --master_addr $MASTER_ADDR\n)\n'
              f'torchrun ${{DISTRIBUTED_ARGS[@]}} {FLAGS}')
    assert bool(_ofl216(tmp_path, script)) == reported


@pytest.mark.parametrize("count", ["$((G*2))", "$(( $G * 2 ))", "$((10#$G * 2))"])
@pytest.mark.parametrize("array", [False, True])
def test_a_count_computed_from_a_default_is_the_environments(tmp_path, count, array):
    """`G=${G:-4}; NPROC=$((G*2))`: a bare name in arithmetic is its variable's value, defaults and all, as `$G` is.
    It had counted as stated (false OFL216 on TP4 x PP4 started on 8 processes; a helper's reproductions, which the
    arrays' own defaults had hidden behind `--node_rank ${NODE_RANK:-0}` until each element kept its own)."""
    launch = "DISTRIBUTED_ARGS=(--nproc_per_node $NPROC --nnodes 1 --node_rank ${NODE_RANK:-0})\n" \
        "torchrun ${DISTRIBUTED_ARGS[@]} " if array else "torchrun --nproc_per_node $NPROC --nnodes 1 "
    script = f"G=${{G:-4}}\nNPROC={count}\n{launch}{FLAGS}".replace("--pipeline-model-parallel-size 16",
                                                                      "--pipeline-model-parallel-size 2")
    assert _ofl216(tmp_path, script) == []
    assert len(_ofl216(tmp_path, script.replace("G=${G:-4}", "G=4"))) == 1  # (stated: 8 processes for 16)


@pytest.mark.parametrize("launcher", [
    "torchrun --nproc_per_node 8 --nnodes 16",  # 128 GPUs: it divides
    "torchrun --nproc_per_node 8 --nnodes ${SLURM_NNODES:-1}",  # the scheduler chooses
    'NNODES=${WORLD_SIZE:-1}\ntorchrun --nproc_per_node 8 --nnodes $NNODES',  # the platform chooses
    'NNODES=${WORLD_SIZE:-1}\ncmd="torchrun --nproc_per_node 8 --nnodes $NNODES"\neval $cmd',  # (Pai's convertors)
    "torchrun --nproc_per_node 8 --nnodes 1:16",  # elastic
    "torchrun $DIST_ARGS",  # not in the script
    "torchrun --nproc_per_node gpu",
    "python",  # no launcher: the environment's world size
])
def test_no_finding_where_the_launch_does_not_state_its_world_size_or_it_divides(tmp_path, launcher):
    assert _ofl216(tmp_path, f"{launcher} {FLAGS}") == []


def test_a_bridge_launch_is_judged_on_its_overrides(tmp_path):
    script = ("torchrun --nproc-per-node 2 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
              "model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=1 model.context_parallel_size=1\n")
    assert _ofl216(tmp_path, script) == [
        'TP4 x PP1 x CP1 needs a multiple of 4 GPUs, and the launch starts 2: megatron-core raises '
        '"world_size (2) is not divisible by 4"']


@pytest.mark.parametrize("old, reported", [
    ("--checkpoint-activations", False), ("--data-impl mmap", False), ("--recompute-activations", True)])
def test_a_launch_for_a_megatron_lm_before_2023_09_runs_its_layout_smaller(tmp_path, old, reported):
    """BigScience's launches of 2021 pass `--checkpoint-activations --data-impl mmap` (a Megatron-LM from before
    2023-09 only) with TP4 x PP8 on 16 GPUs: every Megatron-LM they run on predates 8af3dae (2024-08), whose
    validate_args clamps PP to what TP leaves of the world (PP4) instead of asserting, as an old checkout in the
    tree is judged."""
    script = ("python -m torch.distributed.launch --nproc_per_node 4 --nnodes 4 pretrain_gpt.py "
              "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8 --num-layers 40 --hidden-size 1024 "
              "--num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 --train-iters 10 "
              f"--seq-length 512 --max-position-embeddings 512 {old}\n")
    assert bool(_ofl216(tmp_path, script)) == reported


def test_an_option_of_one_path_only_says_nothing_of_the_version(tmp_path):
    script = ("if [ \"$OLD\" = 1 ]; then EXTRA=--checkpoint-activations; else EXTRA=--recompute-activations; fi\n"
              "python -m torch.distributed.launch --nproc_per_node 4 --nnodes 4 pretrain_gpt.py "
              "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8 --num-layers 40 --hidden-size 1024 "
              "--num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 --train-iters 10 "
              "--seq-length 512 --max-position-embeddings 512 $EXTRA\n")
    assert len(_ofl216(tmp_path, script)) == 1
