"""Selective 'layernorm' recompute in a hybrid model's MoE layers with CUDA graphs capturing the MoE router:
megatron-core decides from the configuration whether the pre-MLP norm is recomputed (0.20.0
transformer_layer.py:481-527, can_recompute_pre_mlp_layernorm_for_cudagraph), and the estimate follows it
(inputs_hybrid.pre_mlp_norm_recomputed). Fixtures of this file's own, a small hybrid model with MoE layers."""

from __future__ import annotations

import pytest

from offlint.estimate import activations as act
from offlint.estimate import memory
from offlint.estimate.inputs import read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

_RECIPE = {"model.hidden_size": 512, "model.num_attention_heads": 8, "model.num_query_groups": 4,
           "model.kv_channels": 64, "model.ffn_hidden_size": 1024, "model.vocab_size": 2048,
           "model.seq_length": 1024, "model.hybrid_layer_pattern": "ME*MEME", "model.mamba_num_heads": 16,
           "model.mamba_head_dim": 64, "model.mamba_num_groups": 4, "model.mamba_state_dim": 64,
           "model.num_moe_experts": 16, "model.moe_ffn_hidden_size": 256, "model.moe_router_topk": 4,
           "model.moe_shared_expert_intermediate_size": 512, "model.moe_token_dispatcher_type": "flex",
           "model.recompute_granularity": "selective", "model.recompute_modules": ["layernorm"],
           "model.cuda_graph_impl": "transformer_engine",
           "model.cuda_graph_scope": ["attn", "mamba", "moe_router", "moe_preprocess"],
           "train.micro_batch_size": 2, "train.global_batch_size": 64}


def _read(**changes):
    return read_inputs(lookup({**_RECIPE, **changes}))


def _moe_layer(inputs):
    m, p, t = inputs.model, inputs.parallel, inputs.training
    return act.after_selective_recompute(act.layer_terms(m, p, t, True, hybrid="E"), t, "E").terms


@pytest.mark.parametrize(("changes", "recomputed"), [
    ({"model.moe_latent_size": 128}, True),  # latent MoE with the preprocess captured (:504-513)
    ({"model.moe_token_dispatcher_type": "alltoall"}, True),
    ({}, False),  # flex without latent MoE: the norm's output is a graph output (:510-521)
    ({"model.moe_latent_size": 128, "model.cuda_graph_scope": ["attn", "mamba", "moe_router"]}, False),
    ({"model.moe_latent_size": 128, "model.moe_shared_expert_overlap": True}, False),  # :489-503
    ({"model.cuda_graph_impl": "local"}, True),  # :482-488
    ({"model.cuda_graph_scope": ["attn", "mamba"]}, True),  # the router not captured
])
def test_the_pre_mlp_norm_is_recomputed_as_megatron_core_decides(changes, recomputed):
    inputs = _read(**changes)
    assert not inputs.unsupported and inputs.complete, (inputs.unsupported, inputs.unknown)
    assert inputs.training.pre_mlp_norm_recompute is recomputed
    assert ("moe_input" in _moe_layer(inputs)) is not recomputed


def test_a_kept_norm_output_costs_the_moe_layers_their_moe_input():
    kept, dropped = _read(), _read(**{"model.moe_token_dispatcher_type": "alltoall"})
    assert kept.training.pre_mlp_norm_recompute is False and dropped.training.pre_mlp_norm_recompute is True
    plain = _read(**{"model.recompute_modules": ["core_attn"]})
    assert _moe_layer(kept) == _moe_layer(plain)  # 'layernorm' drops nothing where the graphs keep the output
    extra = memory.estimate(kept).peak.total - memory.estimate(dropped).peak.total
    assert extra > 0


def test_an_unknown_overlap_leaves_the_estimate_unknown():
    inputs = _read(**{"model.moe_shared_expert_overlap": Unknown("helper")})
    assert "model.moe_shared_expert_overlap" in inputs.unknown and not inputs.unsupported
