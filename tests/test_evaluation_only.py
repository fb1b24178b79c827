"""A launch that only evaluates: Megatron-LM's `--skip-train` (pretrain's loop is bypassed, and setup builds no
optimizer), Megatron Bridge's `validation.skip_train=true` (pretrain.py runs train() only without it) or the
deprecated `train.skip_train=true` (ConfigContainer.validate copies a TrainingConfig field that is set onto
ValidationConfig's), or a Megatron-LM launch whose own flags give it no iteration (`--train-iters 0`: pretrain trains
only `if args.do_train and args.train_iters > 0`; a Megatron-DeepSpeed fork's loss evaluations pass it). OFL301's
advice is about training's fragmentation: it said "this training launch runs with PYTORCH_CUDA_ALLOC_CONF unset" of a
fork's evaluation-only launch."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

RECIPE = """\
def r_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    return cfg
"""


def _ofl301(tmp_path, script: str, recipe: str = RECIPE) -> list[int]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(recipe)
    (tmp_path / "run.sh").write_text("#!/bin/bash\n" + script)
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL301"])
    return [f.location.line for f in check([str(tmp_path)], options).findings if f.location.path.endswith("run.sh")]


BRIDGE = "torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe r_config"
MLM = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --train-iters 10"


@pytest.mark.parametrize("launch", [f"{BRIDGE} validation.skip_train=true", f"{BRIDGE} train.skip_train=true",
                                    f"{MLM} --skip-train",
                                    f"{MLM} --eval-iters 4 --train-iters 0",
                                    f"{MLM} --train-iters=0 --train-samples 0",
                                    # (a fork's conversion job: setup saves the loaded checkpoint and exits)
                                    f"{MLM} --load /ckpt --ckpt-convert-format torch --ckpt-convert-save /out"])
def test_an_evaluation_only_launch_gets_no_training_advice(tmp_path, launch):
    assert _ofl301(tmp_path, f"{launch}\n{BRIDGE}\n{MLM}\n") == [3, 4]


def test_training_still_gets_it(tmp_path):
    """Given false, or turned back on by the deprecated field (validate copies it last); an RL step still trains; a
    skip given on some paths only leaves the others training."""
    assert _ofl301(tmp_path, f"{BRIDGE} validation.skip_train=false\n{MLM} --skip-train --perform-rl-step\n"
                             f"{BRIDGE} validation.skip_train=true train.skip_train=false\n") == [2, 3, 4]
    some_paths = 'A=()\nif [ "$(cat mode)" = eval ]; then A+=(--skip-train); fi\n' + MLM + ' "${A[@]}"\n'
    assert _ofl301(tmp_path, some_paths) == [4]


def test_iterations_that_may_be_given_still_train(tmp_path):
    """`--train-iters 0` with samples to train on (update_train_iters counts the iterations from them), given again
    (argparse keeps the last), or with samples offlint cannot read, still trains."""
    assert _ofl301(tmp_path, f"{MLM} --train-iters 0 --train-samples 1000\n"
                             f"{MLM} --train-iters 0 --eval-iters 1 --train-iters 5\n"
                             f"{MLM} --train-iters 0 --train-samples $SAMPLES\n") == [2, 3, 4]
