"""OFL217 on a Megatron-LM launch: the global batch against the data-parallel ranks of the world size its launcher
states (DP = world / (TP x PP x CP)). Round 4 of the recall study (X08): `torchrun --nproc_per_node 8` with
`--global-batch-size 100 --micro-batch-size 1` passed, though megatron-core's ConstantNumMicroBatchesCalculator
asserts "global batch size (100) is not divisible by micro batch size (1) times data parallel size (8)", and from 0.18
(Megatron-LM d85365bd23) validate_args asserts the evaluation batch's division first (the evaluation sizes default to
the training ones). Fixtures of our own, in the shape of Megatron-LM's example launchers."""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json, write_tree

SIZES = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 8 --hidden-size 1024 "
         "--num-attention-heads 16 --seq-length 512 --max-position-embeddings 512 --train-iters 10 --bf16")
CALCULATOR = ('its micro-batch calculator asserts "global batch size (100) is not divisible by micro batch size (1) '
              'times data parallel size (8)" when training starts')


def _ofl217(root, launch: str, *args: str, launcher: str = "torchrun --nproc_per_node 8 --nnodes 2") -> list[str]:
    write_tree(root, {"train.sh": f"{launcher} pretrain_gpt.py {SIZES} {launch}\n"})
    return [f["message"] for f in check_json(root, "--no-cache", *args) if f["code"] == "OFL217"]


def test_the_micro_batch_calculator_refuses_a_batch_the_launch_cannot_split(tmp_path):
    """16 GPUs at TP2: DP8; 100 is not a multiple of 1 x 8. megatron-core 0.16.1's validate_args has no
    evaluation check: the calculator's assert is the first."""
    assert _ofl217(tmp_path, "--micro-batch-size 1 --global-batch-size 100", "--mcore-version", "0.16.1") == [
        "global batch size 100 with micro batch size 1 on the 16 GPUs the launch starts (TP2 x PP1 x CP1: DP8): "
        + CALCULATOR]


def test_from_0_18_validate_args_divides_the_evaluation_batch_first(tmp_path):
    assert _ofl217(tmp_path, "--micro-batch-size 1 --global-batch-size 100") == [
        "global batch size 100 with micro batch size 1 on the 16 GPUs the launch starts (TP2 x PP1 x CP1: DP8), which "
        "the evaluation batch sizes default to: Megatron-LM's validate_args asserts \"eval_global_batch_size (100) "
        "must be divisible by eval_micro_batch_size (1) * data_parallel_size (8)\" when the job starts"]


def test_evaluation_sizes_of_their_own(tmp_path):
    """Given evaluation sizes are divided in their place: a dividing pair leaves the calculator's assert, another
    is reported as what it is."""
    dividing = "--micro-batch-size 1 --global-batch-size 100 --eval-global-batch-size 64 --eval-micro-batch-size 2"
    assert _ofl217(tmp_path, dividing) == ["global batch size 100 with micro batch size 1 on the 16 GPUs the launch "
                                           "starts (TP2 x PP1 x CP1: DP8): " + CALCULATOR]
    assert _ofl217(tmp_path, "--micro-batch-size 1 --global-batch-size 64 --eval-global-batch-size 10") == [
        "evaluation batch size 10 with micro batch size 1 on the 16 GPUs the launch starts (TP2 x PP1 x CP1: DP8): "
        "Megatron-LM's validate_args asserts \"eval_global_batch_size (10) must be divisible by eval_micro_batch_size "
        "(1) * data_parallel_size (8)\" when the job starts"]


def test_decreasing_the_batch_if_needed(tmp_path):
    """`--decrease-batch-size-if-needed` rounds the training batch down (100 -> 96), so 0.16.1 runs it; the
    evaluation batch it does not round (0.18 on still refuses it); a batch below one micro-batch per rank rounds to
    nothing."""
    decrease = "--decrease-batch-size-if-needed --micro-batch-size 1"
    assert _ofl217(tmp_path, f"{decrease} --global-batch-size 100", "--mcore-version", "0.16.1") == []
    assert len(_ofl217(tmp_path, f"{decrease} --global-batch-size 100")) == 1
    assert _ofl217(tmp_path, f"{decrease} --global-batch-size 2", "--mcore-version", "0.16.1") == [
        "global batch size 2 with micro batch size 1 on the 16 GPUs the launch starts (TP2 x PP1 x CP1: DP8) is less "
        "than one micro-batch per data-parallel rank: --decrease-batch-size-if-needed rounds it to 0, and its "
        "micro-batch calculator asserts \"number of microbatches should be at least 1, got 0.\" when training starts"]


@pytest.mark.parametrize("launch, launcher", [
    ("--micro-batch-size 1 --global-batch-size 96", "torchrun --nproc_per_node 8 --nnodes 2"),  # it divides
    ("--micro-batch-size 1 --global-batch-size 100 --rampup-batch-size 4 4 1000", ""),  # another calculator
    ("--micro-batch-size 1 --step-batch-size-schedule 0:100", ""),  # another calculator
    ("--micro-batch-size 1", ""),  # validate_args takes micro x DP
    ("--micro-batch-size 1 --global-batch-size 100", "torchrun --nproc_per_node 8 --nnodes ${SLURM_NNODES:-1}"),
    ("--micro-batch-size 1 --global-batch-size 100 $EXTRA_ARGS", ""),  # may give a ramp-up
    ("--micro-batch-size 1 --global-batch-size $GBS", ""),
    ("--micro-batch-size 1 --global-batch-size 100", "torchrun --nproc_per_node 7"),  # OFL216's
])
def test_not_judged(tmp_path, launch, launcher):
    assert _ofl217(tmp_path, launch, launcher=launcher or "torchrun --nproc_per_node 8 --nnodes 2") == []


def test_a_checkout_without_the_evaluation_check_meets_the_calculator(tmp_path):
    """A Megatron-LM checkout labelled 0.18 from before d85365bd23 (or a fork without the check): its validate_args
    is read, and the calculator's assert is the one quoted."""
    arguments = ("def validate_args(args, defaults={}):\n"
                 "    assert args.world_size % total_model_size == 0, (\n"
                 "        f\"world size ({args.world_size}) is not divisible by total_model_size "
                 "({total_model_size=})\"\n"
                 "    )\n")
    write_tree(tmp_path, {"megatron/core/package_info.py": "MAJOR = 0\nMINOR = 20\nPATCH = 0\n",
                          "megatron/core/transformer/transformer_config.py": "class TransformerConfig:\n    pass\n",
                          "megatron/training/__init__.py": "", "megatron/training/arguments.py": arguments})
    (tmp_path / ".git").mkdir()
    assert _ofl217(tmp_path, "--micro-batch-size 1 --global-batch-size 100") == [
        "global batch size 100 with micro batch size 1 on the 16 GPUs the launch starts (TP2 x PP1 x CP1: DP8): "
        + CALCULATOR]
    with_check = arguments + ("    assert args.eval_global_batch_size % (args.eval_micro_batch_size * "
                              "args.data_parallel_size) == 0, \\\n"
                              "        f\"eval_global_batch_size ({args.eval_global_batch_size}) must be divisible "
                              "by \" \\\n"
                              "        f\"eval_micro_batch_size ({args.eval_micro_batch_size}) * data_parallel_size "
                              "({args.data_parallel_size})\"\n")
    (tmp_path / "megatron/training/arguments.py").write_text(with_check)
    assert "validate_args asserts \"eval_global_batch_size (100)" in \
        _ofl217(tmp_path, "--micro-batch-size 1 --global-batch-size 100")[0]
