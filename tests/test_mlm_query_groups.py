"""Megatron-LM launches: the model's query groups as Megatron-LM builds them. `--num-query-groups` (argparse default 1)
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
