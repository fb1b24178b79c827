"""Selective recompute per `recompute_modules` name in a GPT layer of megatron-core's Transformer Engine spec
(activations.RECOMPUTE_DROPS, MLA_LAYERNORM_DROPS). What megatron-core does (2a75ac12; 0.16.1 and 0.19.2 alike):
TransformerLayer recomputes a norm only where it is a module of its own (not IdentityOp). The TE spec fuses the input
norm into linear_qkv and a dense layer's pre-MLP norm into fc1, so `layernorm` frees nothing there; a MoE layer's
pre-MLP norm and MLA's input norm are TENorms, whose outputs it frees. `mlp` checkpoints a dense layer's whole MLP:
only its input (the residual stream, which fc1's fused norm saved anyway) stays. The expected values are built from
the fixtures' own sizes here, not from the estimate's output.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations as act
from offlint.estimate import memory
from offlint.estimate.inputs import Inputs, LowPrecision, ModelShape, Parallelism, Training

# Small fixtures of this file's own: a dense model, a MoE model with one dense layer first, an MLA model.
DENSE = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3072, num_attention_heads=16, num_query_groups=4,
                   kv_channels=64, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)
MIXED = replace(DENSE, num_moe_experts=8, moe_ffn_hidden_size=512, moe_router_topk=2,
                moe_layer_freq=(0, 1, 1, 1), moe_shared_expert_intermediate_size=1024)
MLA = replace(MIXED, multi_latent_attention=True, q_lora_rank=384, kv_lora_rank=256, qk_head_dim=64,
              qk_pos_emb_head_dim=32, v_head_dim=64, qk_layernorm=True)
TP2 = Parallelism(tp=2, sequence_parallel=True)


def _selective(*modules: str, **kw) -> Training:
    return Training(recompute_granularity="selective", recompute_modules=modules, **kw)


def _dropped(m: ModelShape, moe: bool, t: Training, p: Parallelism = TP2, fp8: bool = False) -> set[str]:
    full = act.layer_terms(m, p, t, moe, fp8=fp8)
    return set(full.terms) - set(act.after_selective_recompute(full, t, fp8=fp8).terms)


def test_layernorm_frees_nothing_in_a_dense_te_layer():
    """Both norms of a dense layer are fused (linear_qkv, fc1): recompute_input_layernorm and
    recompute_pre_mlp_layernorm stay False, so the layer saves what it saves without recompute."""
    assert _dropped(DENSE, False, _selective("layernorm")) == set()
    assert _dropped(DENSE, False, _selective("core_attn", "layernorm")) == set()


def test_layernorm_frees_the_moe_layers_pre_mlp_norm_output_only():
    """A MoE layer's pre-MLP TENorm is checkpointed: its output (the router's, the shared expert fc1's input) goes;
    the attention's fused norm output (linear_qkv's saved input) stays."""
    t = _selective("layernorm")
    assert _dropped(MIXED, True, t) == {"moe_input"}
    assert _dropped(MIXED, False, t) == set()  # the dense first layer of the same model


def test_mlp_frees_fc1_input_output_and_activation_of_a_dense_layer():
    """The checkpoint around the whole MLP keeps its input (the residual stream, `mlp_norm_input`) and drops fc1's
    normed input, its output and the activation's output, with their exact sizes."""
    t = _selective("mlp")
    full = act.layer_terms(DENSE, TP2, t, False)
    kept = act.after_selective_recompute(full, t)
    assert set(full.terms) - set(kept.terms) == {"fc1_input", "fc1_output", "act_output"}
    assert "mlp_norm_input" in kept.terms and "qkv_input" in kept.terms
    n = DENSE.seq_length * t.micro_batch_size
    freed = 2 * n * DENSE.hidden_size / 2 + 2 * n * DENSE.ffn_hidden_size * 2 / 2 + 2 * n * DENSE.ffn_hidden_size / 2
    assert full.total - kept.total == pytest.approx(freed)


def test_mlp_leaves_a_moe_layer_alone():
    """recompute_mlp is set only where the layer is not a MoE layer; `moe` is the MoE layer's own name."""
    assert _dropped(MIXED, True, _selective("mlp")) == set()


def test_gpt_and_hybrid_mlp_layers_recompute_alike():
    """A hybrid model's MLP layer ("-") is the same fused-norm dense MLP: the same tensors go."""
    assert set(act.RECOMPUTE_DROPS["mlp"]) == set(act.HYBRID_RECOMPUTE_DROPS["-"]["mlp"])
    assert set(act.RECOMPUTE_DROPS["layernorm"]) == set(act.HYBRID_RECOMPUTE_DROPS["E"]["layernorm"])


def test_layernorm_frees_mlas_separate_input_norm_output():
    """MLA's input norm is a separate TENorm (not fused into the down projections): its output, the down
    projections' saved input, goes; in a MoE layer the pre-MLP norm's output too."""
    t = _selective("layernorm")
    assert _dropped(MLA, False, t) == {"qkv_input"}
    assert _dropped(MLA, True, t) == {"qkv_input", "moe_input"}
    assert _dropped(replace(MLA, q_lora_rank=None, qk_layernorm=False), False, t) == {"qkv_input"}


@pytest.mark.parametrize("recipe", ["tensorwise", "mxfp8", "nvfp4"])
def test_fp8_mla_without_q_lora_keeps_q_projs_quantized_copy(recipe):
    """With FP8/FP4 the down projections save the original (discarded) input; without q_lora_rank linear_q_proj
    reads the normed input too and keeps its own quantized copy, which recompute does not free."""
    t = _selective("layernorm", low_precision=LowPrecision(recipe))
    assert _dropped(MLA, False, t, fp8=True) == {"qkv_input"}
    no_q_lora = replace(MLA, q_lora_rank=None, qk_layernorm=False)
    assert _dropped(no_q_lora, False, t, fp8=True) == set()
    assert _dropped(no_q_lora, True, t, fp8=True) == {"moe_input"}
    assert _dropped(no_q_lora, False, t, fp8=False) == {"qkv_input"}  # a bf16 layer of the same run


def _layers(m: ModelShape, t: Training) -> float:
    stage = memory.estimate(Inputs(m, Parallelism(tp=2, sequence_parallel=True, world_size=2),
                                   replace(t, global_batch_size=8))).peak
    return sum(p.bytes for p in stage.parts if p.name.startswith("activations: transformer layers"))


def test_whole_model_layernorm_recompute_counts_only_the_moe_layers():
    """Through memory.estimate: adding `layernorm` to core_attn changes nothing for the dense model and frees one
    pre-MLP norm output per MoE layer (three of the four layers) and micro-batch in flight."""
    base = _selective("core_attn")
    assert _layers(DENSE, _selective("core_attn", "layernorm")) == pytest.approx(_layers(DENSE, base))
    moe_input = act.layer_terms(MIXED, TP2, base, True).terms["moe_input"]
    in_flight = memory.estimate(Inputs(MIXED, Parallelism(tp=2, sequence_parallel=True, world_size=2),
                                       replace(base, global_batch_size=8))).peak.microbatches_in_flight
    saved = _layers(MIXED, base) - _layers(MIXED, _selective("core_attn", "layernorm"))
    assert saved == pytest.approx(3 * moe_input * in_flight)
