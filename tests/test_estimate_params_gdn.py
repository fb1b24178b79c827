"""Gated delta net (GDN) models, Qwen3-Next's shape: parameter counts from offlint.estimate.params equal those of
real megatron-core 0.16.1 GPTModels built on CPU from megatron-core's own layer mix
(`get_transformer_block_with_experimental_attention_variant_spec`: GDN where `linear_attention_freq` says so,
softmax attention elsewhere, MoE or dense MLPs by `moe_layer_freq`), per layer and for the MTP block.

The models are tiny; each case differs in one structural feature. Transformer Engine and flash-linear-attention
are not installed, so these stand-ins make the CPU build possible (each holds exactly the parameters of what it
replaces):
- the spec's backend (Transformer Engine's, which megatron-core asks for) is megatron-core's local one with
  TE's fused layernorm-linear: `TELayerNormColumnParallelLinear` (GDN's in_proj, linear_qkv, a dense fc1) is
  ColumnParallelLinear plus TE's `layer_norm_weight` (and `layer_norm_bias` for LayerNorm), TERowParallelLinear
  is RowParallelLinear, TENorm (the q/k norms, GDN's output norm, pre-MoE and final norms) is WrappedTorchNorm,
  core attention has no parameters; the softmax layer's spec (megatron-core asks the TE GPT layer spec for it)
  is SelfAttention with those linears;
- GatedDeltaNet refuses to build without flash-linear-attention (HAVE_FLA; its constructor uses none of it): the
  flag is set, and its own parameters (conv1d, dt_bias, A_log) are built by megatron-core itself with
  `torch.cuda.current_device()` answering "cpu" and the CUDA RNG tracker's fork doing nothing.
"""

from __future__ import annotations

import contextlib

import pytest

from offlint.estimate import params, precision
from offlint.estimate.inputs import ModelShape, Parallelism
from tests.estimate_helpers import count_params
from tests.test_estimate_params_hybrid import _layernorm_column, _NoParams, _NoRNGFork, _row

torch = pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")

# Qwen3-Next in miniature: RMSNorm, gated MLPs, no linear biases, q/k norms, the attention output gate, a softmax
# layer every 4th layer, MoE everywhere with a gated shared expert, GDN with more value than key heads.
_BASE = dict(num_layers=4, hidden_size=64, ffn_hidden_size=96, num_attention_heads=4, num_query_groups=2,
             kv_channels=16, vocab_size=100, seq_length=16, gated_linear_unit=True, add_bias_linear=False,
             rms_norm=True, tied_embeddings=False, learned_position_embeddings=False, qk_layernorm=True,
             attention_output_gate=True, linear_attention_freq=4, gdn_key_heads=2, gdn_value_heads=4,
             gdn_key_head_dim=16, gdn_value_head_dim=8, gdn_conv_kernel=4)
_MOE = dict(num_moe_experts=4, moe_ffn_hidden_size=40, moe_router_topk=2, moe_shared_expert_intermediate_size=24,
            moe_shared_expert_gate=True)

CASES = {
    "qwen3-next-like": _BASE | _MOE,
    "dense-no-output-gate": _BASE | dict(attention_output_gate=False, qk_layernorm=False),
    "layernorm-bias-list-pattern": _BASE | dict(rms_norm=False, add_bias_linear=True, num_layers=3,
                                                linear_attention_freq=(1, 0, 1), gdn_conv_kernel=3),
    "mtp-moe-last-softmax": _BASE | _MOE | dict(mtp_num_layers=1),
    "mtp-dense-list-pattern": _BASE | dict(num_layers=3, linear_attention_freq=(1, 0, 0), mtp_num_layers=2),
}


class _Backend:
    """The spec backend: megatron-core's local provider with TE's fused layernorm-linear (see the docstring)."""

    def __new__(cls):
        from megatron.core.models.backends import LocalSpecProvider
        from megatron.core.transformer.torch_norm import WrappedTorchNorm

        class Backend(LocalSpecProvider):
            def fuse_layernorm_and_linear(self) -> bool:
                return True

            def column_parallel_layer_norm_linear(self):
                return _layernorm_column()

            def row_parallel_linear(self):
                return _row()

            def layer_norm(self, rms_norm: bool = False, for_qk: bool = False):
                return WrappedTorchNorm

        return Backend()


def _softmax_layer_spec(qk_layernorm: bool = False, **kwargs):
    """What megatron-core takes the softmax attention from (get_gpt_layer_with_transformer_engine_spec's
    self_attention), with the stand-ins."""
    from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.torch_norm import WrappedTorchNorm
    from megatron.core.transformer.transformer_layer import TransformerLayer, TransformerLayerSubmodules

    norm = WrappedTorchNorm if qk_layernorm else IdentityOp
    attention = ModuleSpec(module=SelfAttention, params={"attn_mask_type": AttnMaskType.causal},
                           submodules=SelfAttentionSubmodules(linear_qkv=_layernorm_column(),
                                                              core_attention=_NoParams, linear_proj=_row(),
                                                              q_layernorm=norm, k_layernorm=norm))
    return ModuleSpec(module=TransformerLayer, submodules=TransformerLayerSubmodules(self_attention=attention))


@contextlib.contextmanager
def _cpu_stand_ins():
    import megatron.core.models.gpt.experimental_attention_variant_module_specs as variant
    import megatron.core.models.gpt.gpt_layer_specs as gpt_specs
    import megatron.core.ssm.gated_delta_net as gdn

    saved = (torch.cuda.current_device, gdn.HAVE_FLA, gdn.get_cuda_rng_tracker, variant._get_backend_spec_provider,
             gpt_specs.get_gpt_layer_with_transformer_engine_spec)
    torch.cuda.current_device = lambda: "cpu"
    gdn.HAVE_FLA, gdn.get_cuda_rng_tracker = True, _NoRNGFork
    variant._get_backend_spec_provider = lambda config: _Backend()
    gpt_specs.get_gpt_layer_with_transformer_engine_spec = _softmax_layer_spec
    try:
        yield
    finally:
        (torch.cuda.current_device, gdn.HAVE_FLA, gdn.get_cuda_rng_tracker, variant._get_backend_spec_provider,
         gpt_specs.get_gpt_layer_with_transformer_engine_spec) = saved


def _build(shape: ModelShape):
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import (
        get_transformer_block_with_experimental_attention_variant_spec)
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec
    from megatron.core.transformer import TransformerConfig

    freq = shape.linear_attention_freq
    config = TransformerConfig(
        num_layers=shape.num_layers, hidden_size=shape.hidden_size, ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_attention_heads, num_query_groups=shape.num_query_groups,
        kv_channels=shape.kv_channels, gated_linear_unit=shape.gated_linear_unit,
        activation_func=F.silu, add_bias_linear=shape.add_bias_linear, qk_layernorm=shape.qk_layernorm,
        normalization="RMSNorm" if shape.rms_norm else "LayerNorm", use_cpu_initialization=True,
        attention_output_gate=shape.attention_output_gate, experimental_attention_variant="gated_delta_net",
        linear_attention_freq=list(freq) if isinstance(freq, tuple) else freq,
        linear_num_key_heads=shape.gdn_key_heads, linear_num_value_heads=shape.gdn_value_heads,
        linear_key_head_dim=shape.gdn_key_head_dim, linear_value_head_dim=shape.gdn_value_head_dim,
        linear_conv_kernel_dim=shape.gdn_conv_kernel, num_moe_experts=shape.num_moe_experts,
        moe_ffn_hidden_size=shape.moe_ffn_hidden_size, moe_router_topk=shape.moe_router_topk,
        moe_shared_expert_intermediate_size=shape.moe_shared_expert_intermediate_size,
        moe_shared_expert_gate=shape.moe_shared_expert_gate, mtp_num_layers=shape.mtp_num_layers or None)
    with _cpu_stand_ins():
        spec = get_transformer_block_with_experimental_attention_variant_spec(config)
        # Bridge's mtp_block_spec: the MTP layer from the block's last layer spec (use_transformer_engine=False
        # gives local norms and eh_proj, whose parameters are TE's).
        mtp = get_gpt_mtp_block_spec(config, spec, use_transformer_engine=False) if shape.mtp_num_layers else None
        return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=shape.vocab_size,
                        max_sequence_length=shape.seq_length, position_embedding_type="rope",
                        share_embeddings_and_output_weights=shape.tied_embeddings, mtp_block_spec=mtp)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_equals_megatron_core(name, model_parallel):
    shape = ModelShape(**CASES[name])
    model = _build(shape)
    assert params.total(shape) == count_params(model)
    (stage,) = params.stages(shape, Parallelism())
    assert stage.params.total == count_params(model)
    for i in range(shape.num_layers):  # GDN and softmax layers each on their own
        assert params.layer(shape, i).total == count_params(model, f"decoder.layers.{i}."), shape.is_gdn_layer(i)
    if shape.mtp_num_layers:
        assert params.mtp_block(shape).total == count_params(model, "mtp.")


_GEMMS = ("in_proj.weight", "out_proj.weight", "linear_qkv.weight", "linear_proj.weight", "linear_fc1.weight",
          "linear_fc2.weight", "eh_proj.weight")


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp8_gemm_weights_are_the_real_layers_linear_weights(name, model_parallel):
    """What FP8 quantizes per layer (precision.gemm_weights with the layer's GDN flag): the weights of the real
    layer's Transformer Engine linears (GDN's in_proj and out_proj, not its conv1d, dt_bias, A_log or norms;
    linear_qkv with the output gate's part, linear_proj; MLP, expert and shared-expert linears), and the MTP
    block's (its eh_proj and its layer's)."""
    shape = ModelShape(**CASES[name])
    model = _build(shape)

    def real(prefix: str) -> int:
        return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefix) and n.endswith(_GEMMS))

    for i in range(shape.num_layers):
        ours = precision.gemm_weights(shape, shape.is_moe_layer(i), gdn=shape.is_gdn_layer(i))
        assert sum(ours) == real(f"decoder.layers.{i}."), i
    if shape.mtp_num_layers:
        assert sum(precision.mtp_gemm_weights(shape)) == real("mtp.")


def test_layer_mix_is_megatron_cores(model_parallel):
    """Which layers are GDN: megatron-core's get_linear_attention_pattern, for an int and for a list."""
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import get_linear_attention_pattern

    for freq in (4, 3, 1, (1, 0, 0, 1, 1, 0, 1, 0)):
        shape = ModelShape(**_BASE | dict(num_layers=8, linear_attention_freq=freq))
        config = type("Config", (), dict(linear_attention_freq=list(freq) if isinstance(freq, tuple) else freq,
                                         num_layers=8, experimental_attention_variant="gated_delta_net"))
        assert [int(shape.is_gdn_layer(i)) for i in range(8)] == get_linear_attention_pattern(config), freq


def test_gdn_layer_is_split_over_tensor_parallelism_but_its_norms():
    """Every GDN tensor is split over TP (in_proj, conv1d and out_proj by megatron-core's partition_dim, dt_bias
    and A_log per head) but the fused input norm and the output norm over one head's width."""
    shape = ModelShape(**CASES["qwen3-next-like"])
    gdn = params.gdn_attention(shape)
    assert gdn.replicated == shape.hidden_size + shape.gdn_value_head_dim
    dense, _ = gdn.per_rank(Parallelism(tp=2))
    assert dense == gdn.tp / 2 + gdn.replicated


def test_mtp_after_a_last_gdn_layer_is_refused_like_megatron_core(model_parallel):
    """The MTP layer is built from the last layer's spec; megatron-core asserts its attention has a mask type, which
    the GDN spec has not, so offlint gives no verdict there (inputs_hybrid.gdn_unsupported)."""
    shape = ModelShape(**_BASE | dict(num_layers=3, linear_attention_freq=(0, 1, 1), mtp_num_layers=1))
    with pytest.raises(AssertionError, match="attention mask"):
        _build(shape)
    from offlint.estimate.inputs import read_inputs
    from tests.estimate_helpers import lookup

    why = read_inputs(lookup(_recipe_values(shape))).unsupported
    assert why == ["multi-token prediction after a gated-delta-net last layer (megatron-core asserts that the MTP "
                   "layer's attention has a causal mask type)"]


def _recipe_values(shape: ModelShape) -> dict:
    """The configuration keys a Bridge recipe sets for `shape` (as Qwen3NextBridge maps the Hugging Face config)."""
    freq = shape.linear_attention_freq
    return {"model.num_layers": shape.num_layers, "model.hidden_size": shape.hidden_size,
            "model.ffn_hidden_size": shape.ffn_hidden_size, "model.num_attention_heads": shape.num_attention_heads,
            "model.num_query_groups": shape.num_query_groups, "model.kv_channels": shape.kv_channels,
            "model.vocab_size": shape.vocab_size, "model.seq_length": shape.seq_length,
            "model.experimental_attention_variant": "gated_delta_net",
            "model.linear_attention_freq": list(freq) if isinstance(freq, tuple) else freq,
            "model.mtp_num_layers": shape.mtp_num_layers, "mixed_precision": "bf16_mixed",
            "ddp.use_megatron_fsdp": False}
