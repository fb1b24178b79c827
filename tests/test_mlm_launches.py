"""Megatron-LM launches: which commands are, and the model's query groups as Megatron-LM builds them. `--num-query-groups` (argparse default 1)
reaches the TransformerConfig only under `--group-query-attention`; without it the model has one group per head
(megatron/training/argument_utils.py: `kw_args['num_query_groups'] = None`). offlint had taken the default 1 for
every launch without the flag: a 48-head multi-head model sized as multi-query, 23.7B parameters for 28.4B (a
fork's simulation launches), its memory under-estimated."""

from __future__ import annotations

import pytest

from offlint.estimate import params
from offlint.estimate.inputs import read_inputs
from offlint.resolve import resolve
from offlint.sources.shell import read_shell
from offlint.types import Unknown
from offlint.versions import parse_version

LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 40 --hidden-size 7680 --num-attention-heads 48 "
          "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 "
          "--train-iters 10 --lr 1e-4 --vocab-size 3200 {extra}\n")


def _groups(extra: str):
    [unit] = read_shell("run.sh", LAUNCH.format(extra=extra))
    resolved = resolve(unit, parse_version("0.20.0"))
    return resolved.get("model.num_query_groups").value, read_inputs(resolved.get, unit.name).model


@pytest.mark.parametrize("extra", ["", "--num-query-groups 8"])
def test_without_group_query_attention_every_head_is_its_own_group(extra):
    value, model = _groups(extra)
    assert value is None
    assert model.num_query_groups == 48
    assert round(params.total(model) / 1e9, 2) == 28.36  # 40 x 12 x 7680^2 + embeddings: full multi-head attention


@pytest.mark.parametrize(("extra", "groups"), [("--group-query-attention --num-query-groups 8", 8),
                                               ("--group-query-attention", 1)])
def test_with_group_query_attention_the_flag_or_its_default_stands(extra, groups):
    value, model = _groups(extra)
    assert value == groups and model.num_query_groups == groups


def test_a_word_that_may_give_the_flag_leaves_the_groups_unknown():
    value, _ = _groups('$EXTRA_ARGS')
    assert isinstance(value, Unknown) and "--group-query-attention" in str(value)


# ---- which commands are Megatron-LM launches -----------------------------------------------------------------

HF_STYLE = ("torchrun --nproc_per_node=8 examples/train/run_train.py --do_train --stage=sft "
            "--per_device_train_batch_size=1 --tensor_model_parallel_size 2 --use_distributed_optimizer "
            "--max_steps=100 --learning_rate=2e-5 --bf16 --use_mca\n")


def test_a_hugging_face_style_command_with_bf16_is_no_megatron_lm_launch():
    """ROLL's mcore_adapter examples (LLaMA-Factory's trainer on megatron-core): `--bf16` is a Megatron-LM flag too,
    and was the only one there: the command was read as a Megatron-LM launch of argparse defaults (TP 1, where its
    `--tensor_model_parallel_size 2` says 2), and OFL301 judged it."""
    assert read_shell("run.sh", HF_STYLE) == []
    # a Megatron-LM flag of its own makes it one, as does a pretrain_ script; `--bf16` alone, without that style's
    # underscore options (the rest in a word offlint cannot read), still does
    for text in (HF_STYLE.replace("--use_mca", "--use-distributed-optimizer"),
                 HF_STYLE.replace("examples/train/run_train.py", "pretrain_gpt.py"),
                 "torchrun --nproc_per_node 8 train.py --bf16 $MODEL_ARGS --train-iters 10\n",
                 "torchrun --nproc_per_node 8 train.py --bf16 $MODEL_ARGS\n"):
        assert len(read_shell("run.sh", text)) == 1, text


def test_a_plain_pytorch_job_whose_flags_other_trainers_share_is_no_megatron_lm_launch():
    """MLPerf's retired RNN-T and UNet3D references (`train.py --optimizer sgd --batch_size 2 --learning_rate 0.8`,
    run in images of PyTorch 1.7): `--optimizer` is a Megatron-LM flag too, and was the only one there, so OFL301
    advised an allocator option those images do not have. Like `--bf16`, a flag many trainers spell so (`--optimizer`,
    `--num-layers`, `--hidden-size`, `--seq-length`) makes no launch Megatron-LM's beside underscore options."""
    assert read_shell("run.sh", "python -m torch.distributed.launch --nproc_per_node=8 train.py --epochs 10 "
                                "--batch_size 2 --optimizer sgd --learning_rate 0.8\n") == []
    assert read_shell("run.sh", "python main.py --num-layers 50 --optimizer sgd --data_dir /d\n") == []
    assert len(read_shell("run.sh", "torchrun train.py --optimizer sgd --micro-batch-size 2 --data_dir /d\n")) == 1


def test_a_word_whose_paths_give_the_flag_leaves_the_groups_unknown():
    script = ('if [ "$GQA" = 1 ]; then EXTRA="--group-query-attention --num-query-groups 8"; '
              'else EXTRA="--seed 1"; fi\n' + LAUNCH.format(extra="$EXTRA"))
    [unit] = read_shell("run.sh", script)
    value = resolve(unit, parse_version("0.20.0")).get("model.num_query_groups").value
    assert not (value is None or value == 1), value


def test_a_script_whose_directory_is_unknown_is_taken_by_its_name():
    """A Megatron-LM fork's Slurm launchers: `TRAINING_CMD="python3 $MEGATRON_LM_DIR/pretrain_gpt.py ..."` with
    `MEGATRON_LM_DIR=/scratch/$USER/Megatron-LM`, run by `srun bash -c "... $TRAINING_CMD"`; Pai-Megatron-Patch's
    `torchrun $DISTRIBUTED_ARGS $MEGATRON_PATH/pretrain_gpt.py` with MEGATRON_PATH=$2. The script word had no value,
    so the command was no launch (no unit, no finding)."""
    flags = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --train-iters 10 --lr 1e-4"
    for text in (f"python3 $MEGATRON_LM_DIR/pretrain_gpt.py {flags}\n",
                 f'D=/scratch/$USER/mlm\nCMD="python3 $D/pretrain_gpt.py {flags}"\nsrun -lu bash -c "RANK=1 $CMD"\n',
                 f'MEGATRON_PATH=$2\nrun_cmd="torchrun $DISTRIBUTED_ARGS $MEGATRON_PATH/pretrain_gpt.py {flags}"\n'
                 "eval ${run_cmd}\n"):
        [unit] = read_shell("run.sh", text)
        assert unit.entry_script == "pretrain_gpt.py" and unit.launches_training, text
    # a name that is itself unknown, or no Python file, is still no launch
    assert read_shell("run.sh", f"python3 $DIR/$SCRIPT {flags}\n") == []
    assert read_shell("run.sh", f"python3 $DIR/train.sh {flags}\n") == []


@pytest.mark.parametrize("given, expected", [("4", True), ("0", False), ("$N", None)])
def test_the_offloaded_layer_count_turns_offloading_on_or_leaves_it_unknown(given, expected):
    """Megatron-LM's validate_args turns cpu_offloading on when --cpu-offloading-num-layers is above 0 (CLI-6). A
    count the script takes from its user (`--num-layer` through getopt, a forked launcher) left cpu_offloading at its
    default, off: OFL202 then said, as possible, that the unknown count had no effect ("these layer-offload settings
    have no effect: ?"). Its switch is as unknown as the count."""
    script = (f"N=$1\ntorchrun pretrain_gpt.py --num-layers 8 --train-iters 10 --cpu-offloading-num-layers {given}\n")
    [unit] = read_shell("run.sh", script)
    value = resolve(unit, parse_version("0.20.0")).get("model.cpu_offloading")
    if expected is None:
        assert value.state == "unknown" and "--cpu-offloading-num-layers" in value.value.reason, value
    else:
        assert value.value is expected


def test_an_unknown_offloaded_layer_count_is_no_inert_setting(tmp_path):
    """The count is what turns offloading on from the command line, so it is never left over with the switch off
    (OFL202's explanation says as much): a launch whose user gives the count (through getopt) had a possible OFL202
    under --strict. What does hold where the branch gives the count (offloading with recompute) stays possible."""
    (tmp_path / "run.sh").write_text(
        'N=4; OFF=false\nparams=$(getopt -o "" --long "num-layer:,offload-act" -- "$@"); eval set -- "$params"\n'
        'while true; do case "$1" in\n  --num-layer) N="$2"; shift 2 ;; --offload-act) OFF=true; shift ;;\n'
        '  --) shift; break ;;\nesac; done\n'
        'A=(); if [ "$OFF" = true ]; then A+=(--cpu-offloading-num-layers $N); fi\n'
        'torchrun pretrain_gpt.py --num-layers 8 --train-iters 10 --recompute-granularity selective ${A[@]}\n')
    from offlint.api import CheckOptions, check

    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, strict=True,
                                                select=["OFL202", "OFL103"])).findings
    assert [(f.code, f.possible) for f in found] == [("OFL103", True)], found
