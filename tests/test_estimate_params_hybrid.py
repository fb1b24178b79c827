"""Hybrid Mamba models: parameter counts from offlint.estimate.params equal those of real megatron-core 0.16.1
MambaModels built on CPU, per layer kind and for the pipeline split.

The models are tiny; each case differs in one structural feature. mamba_ssm and causal_conv1d are not installed,
so these stand-ins make the CPU build possible (each holds exactly the parameters of what it replaces):
- the MambaMixer refuses to build without mamba_ssm and einops (HAVE_MAMBA_SSM, HAVE_EINOPS, also in
  MambaContextParallel; their constructors use neither): the flags are set, and mamba_ssm's gated
  RMSNorm (ExtendedRMSNorm's base, a MagicMock without it) is a module with its one `weight` [d_inner / TP];
- Transformer Engine's TELayerNormColumnParallelLinear (in_proj, linear_qkv and fc1 of the hybrid spec, the
  layer's norm fused in) is megatron-core's ColumnParallelLinear plus TE's `layer_norm_weight` (and
  `layer_norm_bias` for LayerNorm); TERowParallelLinear is RowParallelLinear; core attention has no parameters;
  the final norm (TENorm) is megatron-core's WrappedTorchNorm (weight, and bias for LayerNorm, as TE's norms);
- the mixer's own parameters (conv1d, dt_bias, A_log, D) are built by megatron-core itself, with
  `torch.cuda.current_device()` answering "cpu" and the CUDA RNG tracker's fork doing nothing while the model is
  built.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from offlint.estimate import params, precision
from offlint.estimate.inputs import ModelShape, Parallelism
from tests.estimate_helpers import count_params

torch = pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")

_BASE = dict(num_layers=4, hidden_size=64, ffn_hidden_size=96, num_attention_heads=4, num_query_groups=2,
             kv_channels=16, vocab_size=100, seq_length=16, gated_linear_unit=False, add_bias_linear=False,
             rms_norm=True, tied_embeddings=False, learned_position_embeddings=False,
             hybrid_pattern="M*-M", mamba_num_heads=8, mamba_head_dim=16, mamba_num_groups=2, mamba_state_dim=8)
_MOE = dict(num_moe_experts=4, moe_ffn_hidden_size=40, moe_router_topk=2, moe_shared_expert_intermediate_size=48)

CASES = {
    "nemotron-h-like": _BASE,
    "mamba-only-tied": _BASE | dict(num_layers=2, hybrid_pattern="MM", tied_embeddings=True),
    "layernorm-bias-qk-norm": _BASE | dict(rms_norm=False, add_bias_linear=True, qk_layernorm=True),
    "moe-nano-like": _BASE | _MOE | dict(num_layers=6, hybrid_pattern="MEM*EM"),
    "gated-mlp-more-groups": _BASE | dict(gated_linear_unit=True, mamba_num_groups=4, mamba_state_dim=12),
}


class _NoParams(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()


def _layernorm_column():
    from megatron.core.tensor_parallel import ColumnParallelLinear

    class LayerNormColumn(ColumnParallelLinear):
        """TELayerNormColumnParallelLinear's parameters: the column-parallel weight (and bias) plus the fused
        norm's weight (and bias for LayerNorm) over the whole input."""

        def __init__(self, input_size, output_size, *, config, init_method, gather_output, bias, skip_bias_add,
                     is_expert, tp_comm_buffer_name=None, tp_group=None, **kwargs):
            super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                             gather_output=gather_output, skip_bias_add=skip_bias_add, is_expert=is_expert,
                             tp_group=tp_group)
            self.layer_norm_weight = torch.nn.Parameter(torch.ones(input_size))
            if config.normalization == "LayerNorm":
                self.layer_norm_bias = torch.nn.Parameter(torch.zeros(input_size))

    return LayerNormColumn


def _row():
    from megatron.core.tensor_parallel import RowParallelLinear

    class Row(RowParallelLinear):
        def __init__(self, input_size, output_size, *, config, init_method, bias, input_is_parallel,
                     skip_bias_add, is_expert, tp_comm_buffer_name=None, tp_group=None, **kwargs):
            super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                             input_is_parallel=input_is_parallel, skip_bias_add=skip_bias_add, is_expert=is_expert,
                             tp_group=tp_group)

    return Row


class _NoRNGFork:
    """The CUDA RNG tracker the mixer forks around its conv1d initialisation (no CUDA here; values do not count)."""

    @staticmethod
    def fork(*args):
        return contextlib.nullcontext()


class _GatedRMSNorm(torch.nn.Module):
    """mamba_ssm's gated RMSNorm: one weight over its (TP-local) width, no bias."""

    def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=False, device=None, dtype=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))


def _spec(shape: ModelShape):
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.ssm.mamba_block import MambaStack, MambaStackSubmodules
    from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
    from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
    from megatron.core.ssm.mlp_layer import MLPLayer
    from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.torch_norm import WrappedTorchNorm
    from megatron.core.transformer.transformer_layer import (MoETransformerLayer, TransformerLayer,
                                                             TransformerLayerSubmodules)

    ln_column, row = _layernorm_column(), _row()
    # The shape of megatron-core's mamba_stack_spec (models/mamba/mamba_layer_specs.py), with the stand-ins above.
    return ModuleSpec(module=MambaStack, submodules=MambaStackSubmodules(
        mamba_layer=ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
            mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(in_proj=ln_column, out_proj=row)),
            mamba_bda=get_bias_dropout_add)),
        attention_layer=ModuleSpec(module=TransformerLayer, submodules=TransformerLayerSubmodules(
            self_attention=ModuleSpec(module=SelfAttention, params={"attn_mask_type": AttnMaskType.causal},
                                      submodules=SelfAttentionSubmodules(linear_qkv=ln_column,
                                                                         core_attention=_NoParams,
                                                                         linear_proj=row)),
            self_attn_bda=get_bias_dropout_add)),
        mlp_layer=ModuleSpec(module=MLPLayer, submodules=TransformerLayerSubmodules(
            mlp=ModuleSpec(module=MLP, submodules=MLPSubmodules(linear_fc1=ln_column, linear_fc2=row)),
            mlp_bda=get_bias_dropout_add)),
        moe_layer=ModuleSpec(module=MoETransformerLayer, submodules=TransformerLayerSubmodules(
            pre_mlp_layernorm=WrappedTorchNorm,
            mlp=get_moe_module_spec(use_te=False, num_experts=shape.num_moe_experts or 8, moe_grouped_gemm=False),
            mlp_bda=get_bias_dropout_add)),
    ))


@contextlib.contextmanager
def _cpu_stand_ins():
    import megatron.core.ssm.mamba_block as block
    import megatron.core.ssm.mamba_context_parallel as context_parallel
    from megatron.core.transformer.torch_norm import WrappedTorchNorm
    import megatron.core.ssm.mamba_mixer as mixer

    names = ("HAVE_MAMBA_SSM", "HAVE_EINOPS", "ExtendedRMSNorm", "get_cuda_rng_tracker")
    saved = torch.cuda.current_device, {name: getattr(mixer, name) for name in names}
    torch.cuda.current_device = lambda: "cpu"
    for name, value in zip(names, (True, True, _GatedRMSNorm, _NoRNGFork)):
        setattr(mixer, name, value)
    context_parallel.HAVE_EINOPS, had_einops = True, context_parallel.HAVE_EINOPS
    block.TENorm, te_norm = WrappedTorchNorm, block.TENorm
    try:
        yield
    finally:
        torch.cuda.current_device = saved[0]
        for name, value in saved[1].items():
            setattr(mixer, name, value)
        context_parallel.HAVE_EINOPS, block.TENorm = had_einops, te_norm


def _build(shape: ModelShape):
    import torch.nn.functional as F
    from megatron.core.models.mamba import MambaModel
    from megatron.core.transformer import TransformerConfig

    config = TransformerConfig(
        num_layers=shape.num_layers, hidden_size=shape.hidden_size, ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_attention_heads, num_query_groups=shape.num_query_groups,
        kv_channels=shape.kv_channels, gated_linear_unit=shape.gated_linear_unit,
        activation_func=F.silu if shape.gated_linear_unit else F.gelu, add_bias_linear=shape.add_bias_linear,
        qk_layernorm=shape.qk_layernorm, normalization="RMSNorm" if shape.rms_norm else "LayerNorm",
        use_cpu_initialization=True, mamba_num_heads=shape.mamba_num_heads, mamba_head_dim=shape.mamba_head_dim,
        mamba_num_groups=shape.mamba_num_groups, mamba_state_dim=shape.mamba_state_dim,
        num_moe_experts=shape.num_moe_experts, moe_ffn_hidden_size=shape.moe_ffn_hidden_size,
        moe_router_topk=shape.moe_router_topk,
        moe_shared_expert_intermediate_size=shape.moe_shared_expert_intermediate_size)
    with _cpu_stand_ins():
        return MambaModel(config=config, mamba_stack_spec=_spec(shape), vocab_size=shape.vocab_size,
                          max_sequence_length=shape.seq_length, hybrid_override_pattern=shape.hybrid_pattern,
                          share_embeddings_and_output_weights=shape.tied_embeddings, position_embedding_type="none")


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_equals_megatron_core(name, model_parallel):
    shape = ModelShape(**CASES[name])
    model = _build(shape)
    assert params.total(shape) == count_params(model)
    (stage,) = params.stages(shape, Parallelism())
    assert stage.params.total == count_params(model)
    for i in range(shape.num_layers):  # each layer kind on its own
        assert params.layer(shape, i).total == count_params(model, f"decoder.layers.{i}."), shape.layer_kind(i)


def test_mamba_layer_is_split_over_tensor_parallelism_but_its_fused_norm():
    shape = ModelShape(**CASES["nemotron-h-like"])
    mamba = params.mamba_layer(shape)
    assert mamba.replicated == shape.hidden_size
    dense, _ = mamba.per_rank(Parallelism(tp=2))
    assert dense == mamba.tp / 2 + shape.hidden_size


@pytest.mark.parametrize("pattern,parallel,expected", [
    ("M*-M", Parallelism(pp=2), [[2, 2]]),
    ("M*-|M", Parallelism(pp=2), [[3, 1]]),  # pipes: one segment per stage
    ("M*-M", Parallelism(pp=2, first_stage_layers=1), [[1, 3]]),
    ("M*-M-M", Parallelism(pp=4), None),  # 6 layers do not split evenly over 4 stages
    ("M*-M", Parallelism(pp=2, vpp=2), None),  # no virtual stages in a hybrid stack without pipes
    ("M*-M", Parallelism(pp=2, account_for_embedding=True), None),
])
def test_hybrid_pipeline_split_follows_megatron_core(pattern, parallel, expected):
    shape = ModelShape(**_BASE | dict(hybrid_pattern=pattern, num_layers=len(pattern.replace("|", ""))))
    ranges = params.layer_ranges(shape, parallel)
    assert (None if ranges is None else [[len(r) for r in chunk] for chunk in zip(*ranges)]) == expected


def test_pipeline_stages_hold_their_segments_layers(model_parallel):
    """Two stages of "M*|-M": the first holds a Mamba and an attention layer and the embedding, the second an MLP
    and a Mamba layer, the final norm and the output layer."""
    shape = ModelShape(**CASES["nemotron-h-like"] | dict(hybrid_pattern="M*|-M"))
    first, last = params.stages(shape, Parallelism(pp=2))
    assert first.params.total == params.embedding(shape).total + params.mamba_layer(shape).total + \
        params.hybrid_attention(shape).total
    assert last.params.total == params.hybrid_mlp(shape).total + params.mamba_layer(shape).total + \
        params.final_norm(shape).total + params.output_layer(shape).total
    assert first.params.total + last.params.total == params.total(replace(shape, hybrid_pattern="M*-M"))


_GEMMS = ("in_proj.weight", "out_proj.weight", "linear_qkv.weight", "linear_proj.weight", "linear_fc1.weight",
          "linear_fc2.weight")


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp8_gemm_weights_are_the_real_layers_linear_weights(name, model_parallel):
    """What FP8 quantizes per layer (precision.gemm_weights with the layer's symbol): the weights of the real
    layer's linears (the Mamba mixer's in_proj and out_proj; attention, MLP, expert and shared-expert linears;
    not the router, the conv1d or norms)."""
    shape = ModelShape(**CASES[name])
    model = _build(shape)
    for i in range(shape.num_layers):
        real = sum(p.numel() for n, p in model.named_parameters()
                   if n.startswith(f"decoder.layers.{i}.") and n.endswith(_GEMMS))
        assert sum(precision.gemm_weights(shape, shape.is_moe_layer(i), shape.layer_kind(i))) == real, i
