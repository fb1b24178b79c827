"""Parameter counts from offlint.estimate.params equal those of real megatron-core GPTModels built on CPU.

The models are small (a few layers, narrow) so building them takes seconds; each case differs in one structural
feature the counter must get right: MHA with biases and LayerNorm, GQA with RMSNorm/SwiGLU/untied output,
QK-norm, and MoE with shared experts and a MoE layer frequency.
"""

from __future__ import annotations


import pytest

from offlint.estimate import params
from offlint.estimate.inputs import ModelShape, Parallelism

torch = pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")

CASES = {
    "mha-layernorm-bias-learned-pos": dict(
        num_layers=2, hidden_size=64, ffn_hidden_size=256, num_attention_heads=4, vocab_size=1000, seq_length=32,
        add_bias_linear=True, rms_norm=False, learned_position_embeddings=True, tied_embeddings=True),
    "gqa-rmsnorm-swiglu-untied": dict(
        num_layers=3, hidden_size=96, ffn_hidden_size=160, num_attention_heads=6, num_query_groups=2,
        vocab_size=777, seq_length=16, gated_linear_unit=True, add_bias_linear=False, rms_norm=True,
        tied_embeddings=False, learned_position_embeddings=False),
    "gqa-qk-norm-qkv-bias-kv-channels": dict(
        num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=8, num_query_groups=4,
        kv_channels=16, vocab_size=512, seq_length=16, gated_linear_unit=True, add_bias_linear=False,
        add_qkv_bias=True, qk_layernorm=True, rms_norm=True, tied_embeddings=False,
        learned_position_embeddings=False),
    "moe-shared-experts-freq": dict(
        num_layers=4, hidden_size=64, ffn_hidden_size=192, num_attention_heads=4, num_query_groups=2,
        vocab_size=640, seq_length=16, gated_linear_unit=True, add_bias_linear=False, rms_norm=True,
        tied_embeddings=False, learned_position_embeddings=False, num_moe_experts=8, moe_ffn_hidden_size=48,
        moe_router_topk=2, moe_shared_expert_intermediate_size=96, moe_layer_freq=(0, 1, 1, 1)),
    "moe-every-layer-gelu-bias": dict(
        num_layers=2, hidden_size=32, ffn_hidden_size=64, num_attention_heads=4, vocab_size=300, seq_length=8,
        add_bias_linear=True, rms_norm=False, tied_embeddings=True, learned_position_embeddings=True,
        num_moe_experts=4, moe_ffn_hidden_size=40, moe_router_topk=2),
}


def _shape(spec: dict) -> ModelShape:
    spec = dict(spec)
    spec.setdefault("num_query_groups", spec["num_attention_heads"])
    spec.setdefault("kv_channels", spec["hidden_size"] // spec["num_attention_heads"])
    return ModelShape(**spec)


def _build(shape: ModelShape):
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer import TransformerConfig

    moe = bool(shape.num_moe_experts)
    config = TransformerConfig(
        num_layers=shape.num_layers, hidden_size=shape.hidden_size, ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_attention_heads, num_query_groups=shape.num_query_groups,
        kv_channels=shape.kv_channels, gated_linear_unit=shape.gated_linear_unit,
        activation_func=F.silu if shape.gated_linear_unit else F.gelu, add_bias_linear=shape.add_bias_linear,
        add_qkv_bias=shape.add_qkv_bias, qk_layernorm=shape.qk_layernorm,
        normalization="RMSNorm" if shape.rms_norm else "LayerNorm", use_cpu_initialization=True,
        num_moe_experts=shape.num_moe_experts, moe_ffn_hidden_size=shape.moe_ffn_hidden_size if moe else None,
        moe_router_topk=shape.moe_router_topk,
        moe_shared_expert_intermediate_size=shape.moe_shared_expert_intermediate_size,
        moe_layer_freq=list(shape.moe_layer_freq) if isinstance(shape.moe_layer_freq, tuple) else 1,
    )
    spec = get_gpt_layer_local_spec(num_experts=shape.num_moe_experts, qk_layernorm=shape.qk_layernorm,
                                    normalization="RMSNorm" if shape.rms_norm else "LayerNorm")
    if moe and isinstance(shape.moe_layer_freq, tuple):
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                          normalization="RMSNorm" if shape.rms_norm else "LayerNorm")
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=shape.vocab_size,
                    max_sequence_length=shape.seq_length,
                    position_embedding_type="learned_absolute" if shape.learned_position_embeddings else "rope",
                    share_embeddings_and_output_weights=shape.tied_embeddings)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_equals_megatron_core(name, model_parallel):
    shape = _shape(CASES[name])
    model = _build(shape)
    real = sum(p.numel() for p in model.parameters())
    assert params.total(shape) == real
    # With PP=1 the single stage holds everything.
    (stage,) = params.stages(shape, Parallelism())
    assert stage.params.total == real


def test_active_parameters_count_topk_experts_only():
    shape = _shape(CASES["moe-shared-experts-freq"])
    expert = params.mlp(shape, 48)
    assert params.total(shape) - params.active(shape) == 3 * (8 - 2) * expert


def test_pipeline_stages_hold_every_layer_once_and_the_output_copy():
    shape = _shape(CASES["gqa-rmsnorm-swiglu-untied"] | {"num_layers": 4, "tied_embeddings": True})
    stages = params.stages(shape, Parallelism(pp=2))
    assert [s.layers for s in stages] == [2, 2]
    assert stages[0].has_embedding and stages[1].has_output
    # PP>1 with tied weights: the last stage allocates its own output weight.
    extra = shape.vocab_size * shape.hidden_size
    assert sum(s.params.total for s in stages) == params.total(shape) + extra


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp8_gemm_weights_equal_the_linear_weights_of_megatron_core(name, model_parallel):
    """What FP8 training quantizes (offlint.estimate.precision): the weight matrices of the layers' linears
    (QKV, output projection, fc1, fc2 of dense, shared and routed experts), not biases, norms or the router."""
    from offlint.estimate import precision

    shape = _shape(CASES[name])
    model = _build(shape)
    linears = ("linear_qkv.weight", "linear_proj.weight", "linear_fc1.weight", "linear_fc2.weight")
    real = sum(p.numel() for n, p in model.named_parameters() if n.startswith("decoder.layers.")
               and n.endswith(linears))
    counted = sum(sum(precision.gemm_weights(shape, shape.is_moe_layer(i))) for i in range(shape.num_layers))
    assert counted == real
