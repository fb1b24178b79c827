"""How many tokens a Qwen3-VL micro-batch holds is the tree's behaviour, read from its own training step.

Megatron Bridge's `qwen3_vl_step.forward_step` pads every micro-batch to seq_length only where the condition it
passes as `force_to_pad_to_seq_len=` holds (Bridge 067f987: PP or EP above 1; Bridge forks of early 2026: PP above 1
alone), else to the batch's longest sample. OFL303 sized every micro-batch at seq_length, which made false OOM
findings on forks whose step does not pad at EP8 PP1 (zidanehuang001's `qwen3_vl_30b_a3b_sft_config`, ananthsub's
`qwen3_vl_30b_a3b_pretrain_config`). The trees here are fixtures of our own in Bridge's shapes.
"""

from __future__ import annotations

import ast

import pytest

from offlint.api import CheckOptions, check
from offlint.estimate import oom
from offlint.estimate.inputs import read_inputs
from offlint.sources import bridge_vlm_step
from offlint.sources.bridge_vlm_step import KEY, _condition
from offlint.types import Unknown
from offlint.units import load_unit
from tests.estimate_helpers import BRIDGE_PADDING, TRAINS, VLM_SIZES, lookup, write_qwen3_vl_step


@pytest.mark.parametrize(("text", "groups"), [
    ("this_pg_collection.pp.size() > 1 or this_pg_collection.ep.size() > 1", ("ep", "pp")),
    ("pg.pp.size() > 1", ("pp",)),
    ("pg.cp.size() >= 2 or pg.tp.size() != 1", ("cp", "tp")),
    ("True", (bridge_vlm_step.ALWAYS,)),
    ("False", ()),
    ("pg.pp.size() > 1 and pg.ep.size() > 1", None),  # (a conjunction is not read)
    ("pg.pp.size() > 2", None),
    ("is_pipeline(pg)", None),
    ("pg.dp.size() > 1", None),
])
def test_the_conditions_read(text, groups):
    assert _condition(ast.parse(text, mode="eval").body) == groups


RECIPE = '''\
from megatron.bridge.models import AutoBridge
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, DistributedDataParallelConfig


def vl_sft_config():
    cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("Qwen/Qwen3-VL-30B-A3B-Instruct").to_megatron_provider(
        load_weights=False), optimizer=OptimizerConfig(use_distributed_optimizer=True),
        ddp=DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True))
    cfg.model.seq_length = 4096
    cfg.model.tensor_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.expert_model_parallel_size = 8
    cfg.model.expert_tensor_parallel_size = 1
    cfg.model.freeze_language_model = False
    cfg.model.freeze_vision_model = False
    cfg.model.freeze_vision_projection = False
    cfg.train.micro_batch_size = 2
    cfg.train.global_batch_size = 32
    return cfg
'''


def _tree(tmp_path, monkeypatch, condition: str | None):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    recipes = tmp_path / "src" / "megatron" / "bridge" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / "vl.py").write_text(RECIPE)
    if condition is not None:
        write_qwen3_vl_step(tmp_path, condition)
    return "src/megatron/bridge/recipes/vl.py"


def _oom_findings(path: str, tmp_path) -> list:
    result = check([path], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL303"]))
    assert not result.errors, result.errors
    return result.findings


def test_the_step_s_condition_is_noted_on_the_model(tmp_path, monkeypatch):
    path = _tree(tmp_path, monkeypatch, "this_pg_collection.pp.size() > 1")
    assert load_unit(path, "vl_sft_config", mcore_version="0.20.0").resolved.get(KEY).value == ("pp",)


def test_a_tree_without_the_step_leaves_the_condition_unknown(tmp_path, monkeypatch):
    path = _tree(tmp_path, monkeypatch, None)
    value = load_unit(path, "vl_sft_config", mcore_version="0.20.0").resolved.get(KEY)
    assert value.is_unknown and "qwen3_vl_step.py" in value.value.reason


def test_an_oom_resting_on_padding_the_step_does_not_do_is_not_claimed(tmp_path, monkeypatch):
    # EP8 PP1: a step padding under PP alone gives micro-batches as long as the data makes them
    path = _tree(tmp_path, monkeypatch, "this_pg_collection.pp.size() > 1")
    assert _oom_findings(path, tmp_path) == []


def test_the_same_recipe_is_an_oom_where_the_step_pads_under_ep(tmp_path, monkeypatch):
    path = _tree(tmp_path, monkeypatch, BRIDGE_PADDING)
    (finding,) = _oom_findings(path, tmp_path)
    assert finding.unit == "vl_sft_config"


def _short_tokens(**values):
    return read_inputs(lookup({**VLM_SIZES, **TRAINS, **values}), "x_sft_config").short_tokens


def test_the_fewest_tokens_the_step_gives():
    # the longest sample rounded up to TP (x 2 CP): one sample of one token gives that many
    assert _short_tokens(**{KEY: ("pp",)}) == 1
    assert _short_tokens(**{KEY: ("pp",), "model.tensor_model_parallel_size": 2,
                            "model.context_parallel_size": 3, "model.num_attention_heads": 4}) == 12
    assert _short_tokens(**{KEY: Unknown("no step")}) == 1  # a condition not read leaves it open too


@pytest.mark.parametrize("values", [
    {KEY: ("pp",), "model.pipeline_model_parallel_size": 2},
    {KEY: (bridge_vlm_step.ALWAYS,)},
    {KEY: ("pp",), "dataset.pad_to_max_length": True},  # the collate pads to seq_length
    {},  # inputs made without reading the tree's step keep seq_length
])
def test_padded_micro_batches_hold_seq_length(values):
    assert _short_tokens(**values) is None


def test_a_verdict_needs_the_padded_and_the_shortest_micro_batch_to_agree():
    inputs = read_inputs(lookup({**VLM_SIZES, **TRAINS, KEY: ("pp",)}), "x_sft_config")
    what, alts = oom.alternatives(inputs)
    assert "the tokens a micro-batch holds" in what
    lengths = {a.inputs.model.seq_length for a in alts}
    assert lengths == {256, 1} and all(a.inputs.short_tokens is None for a in alts)
    assert any("with the shortest (1 token)" in a.label for a in alts)
