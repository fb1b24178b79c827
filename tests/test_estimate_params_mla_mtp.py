"""Multi-latent attention, multi-token prediction and latent MoE: parameter counts from offlint.estimate.params
equal those of real megatron-core 0.16.1 GPTModels built on CPU.

Like tests/test_estimate_params.py, the models are tiny and each case differs in one structural feature. Three
stand-ins make megatron-core's CPU build possible; none of them holds parameters that are counted:
- MLASelfAttention's rotary embedding asks for `torch.cuda.current_device()` whatever `use_cpu_initialization`
  says, so that call returns "cpu" while a model is built;
- the local core attention (DotProductAttention) does not accept MLA's `k_channels` in 0.16.1, so MLA cases use
  a parameterless core attention (flash/TE attention have no parameters either);
- MLA checks `isinstance(linear_proj, TELinear)`, which fails when Transformer Engine is absent (TELinear None),
  and the latent MoE projections are TELinear (parallel_mode="duplicated"): a plain class stands in for
  TELinear there, holding TE Linear's parameters (weight [out, in], bias [out] when asked).
With the local spec, MLA's down projections are ColumnParallelLinear (TP-sharded) where the Transformer Engine
spec Bridge uses makes them `TELinear(parallel_mode="duplicated")`; at TP=1 the counts are the same, and
params.latent_attention follows the TE spec for TP>1 (replicated down projections).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from offlint.estimate import params
from offlint.estimate.inputs import ModelShape, Parallelism
from tests.estimate_helpers import count_params

torch = pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")

_BASE = dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=4,
             kv_channels=16, vocab_size=100, seq_length=16, gated_linear_unit=True, add_bias_linear=False,
             rms_norm=True, tied_embeddings=False, learned_position_embeddings=False)
_MLA = dict(multi_latent_attention=True, q_lora_rank=24, kv_lora_rank=16, qk_head_dim=8, qk_pos_emb_head_dim=4,
            v_head_dim=12, qk_layernorm=True)
_MOE = dict(num_moe_experts=4, moe_ffn_hidden_size=40, moe_router_topk=2, moe_shared_expert_intermediate_size=48)

CASES = {
    "mla-q-lora-qk-norm": _BASE | _MLA,
    "mla-no-q-lora": _BASE | _MLA | dict(q_lora_rank=None),
    "mla-no-qk-norm-layernorm-bias": _BASE | _MLA | dict(qk_layernorm=False, rms_norm=False, add_bias_linear=True,
                                                         gated_linear_unit=False),
    "mla-moe-dense-first": _BASE | _MLA | _MOE | dict(num_layers=3, moe_layer_freq=(0, 1, 1)),
    "mtp-gqa-tied": _BASE | dict(num_query_groups=2, tied_embeddings=True, mtp_num_layers=2),
    "mtp-mla-moe-last-layer": _BASE | _MLA | _MOE | dict(num_layers=3, moe_layer_freq=(0, 1, 1), mtp_num_layers=1),
    "mtp-dense-after-moe": _BASE | _MOE | dict(num_layers=3, moe_layer_freq=(1, 1, 0), mtp_num_layers=1),
    "latent-moe": _BASE | _MOE | dict(moe_latent_size=24),
    "latent-moe-bias": _BASE | _MOE | dict(moe_latent_size=24, add_bias_linear=True, gated_linear_unit=False,
                                           moe_shared_expert_intermediate_size=None),
}


class _NoParams(torch.nn.Module):
    """A core attention without parameters (as flash and TE attention are)."""

    def __init__(self, *args, **kwargs):
        super().__init__()


class _NotTE:
    """What `isinstance(x, TELinear)` is checked against when Transformer Engine is absent."""


class _DuplicatedLinear(torch.nn.Module):
    """TELinear(parallel_mode="duplicated")'s parameters: the whole weight on every rank, and a bias if asked."""

    def __init__(self, input_size, output_size, *, bias, **kwargs):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(output_size, input_size))
        self.bias = torch.nn.Parameter(torch.empty(output_size)) if bias else None


@contextlib.contextmanager
def _cpu_stand_ins():
    import megatron.core.transformer.moe.moe_layer as moe_layer
    import megatron.core.transformer.multi_latent_attention as mla

    saved = (torch.cuda.current_device, mla.TELinear, getattr(moe_layer, "TELinear", None), moe_layer.HAVE_TE)
    torch.cuda.current_device = lambda: "cpu"
    mla.TELinear, moe_layer.TELinear, moe_layer.HAVE_TE = _NotTE, _DuplicatedLinear, True
    try:
        yield
    finally:
        torch.cuda.current_device, mla.TELinear, moe_layer.TELinear, moe_layer.HAVE_TE = saved


def _build(shape: ModelShape, pre_process: bool = True):
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_decoder_block_spec, get_gpt_layer_local_spec,
                                                          get_gpt_mtp_block_spec)
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    norm = "RMSNorm" if shape.rms_norm else "LayerNorm"
    kwargs = dict(
        num_layers=shape.num_layers, hidden_size=shape.hidden_size, ffn_hidden_size=shape.ffn_hidden_size,
        num_attention_heads=shape.num_attention_heads, gated_linear_unit=shape.gated_linear_unit,
        activation_func=F.silu if shape.gated_linear_unit else F.gelu, add_bias_linear=shape.add_bias_linear,
        qk_layernorm=shape.qk_layernorm, normalization=norm, use_cpu_initialization=True,
        num_moe_experts=shape.num_moe_experts, moe_ffn_hidden_size=shape.moe_ffn_hidden_size,
        moe_router_topk=shape.moe_router_topk,
        moe_shared_expert_intermediate_size=shape.moe_shared_expert_intermediate_size,
        moe_layer_freq=list(shape.moe_layer_freq) if isinstance(shape.moe_layer_freq, tuple) else 1,
        moe_latent_size=shape.moe_latent_size, mtp_num_layers=shape.mtp_num_layers or None)
    if shape.multi_latent_attention:
        config = MLATransformerConfig(**kwargs, q_lora_rank=shape.q_lora_rank, kv_lora_rank=shape.kv_lora_rank,
                                      qk_head_dim=shape.qk_head_dim, qk_pos_emb_head_dim=shape.qk_pos_emb_head_dim,
                                      v_head_dim=shape.v_head_dim, rope_type="rope")
    else:
        config = TransformerConfig(**kwargs, num_query_groups=shape.num_query_groups, kv_channels=shape.kv_channels)
    layer_spec = get_gpt_layer_local_spec(num_experts=shape.num_moe_experts, qk_layernorm=shape.qk_layernorm,
                                          multi_latent_attention=shape.multi_latent_attention, normalization=norm)
    spec = layer_spec
    if isinstance(shape.moe_layer_freq, tuple):
        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False, normalization=norm)
    if shape.multi_latent_attention:
        for layer in getattr(spec, "layer_specs", [spec]):
            layer.submodules.self_attention.submodules.core_attention = _NoParams
    mtp = get_gpt_mtp_block_spec(config, spec, use_transformer_engine=False) if shape.mtp_num_layers else None
    with _cpu_stand_ins():
        return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=shape.vocab_size,
                        max_sequence_length=shape.seq_length, pre_process=pre_process,
                        position_embedding_type="learned_absolute" if shape.learned_position_embeddings else "rope",
                        share_embeddings_and_output_weights=shape.tied_embeddings, mtp_block_spec=mtp)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_equals_megatron_core(name, model_parallel):
    shape = ModelShape(**CASES[name])
    model = _build(shape)
    real = count_params(model)
    assert params.total(shape) == real
    (stage,) = params.stages(shape, Parallelism())
    assert stage.params.total == real
    if shape.mtp_num_layers:
        assert params.mtp_block(shape).total == count_params(model, "mtp.")
    if shape.multi_latent_attention:
        assert params.attention(shape).total == count_params(model, "decoder.layers.0.self_attention.") + \
            count_params(model, "decoder.layers.0.input_layernorm.")


@pytest.mark.parametrize("tied,learned", [(True, True), (False, False)])
def test_mtp_last_pipeline_stage_builds_its_own_embedding(tied, learned, model_parallel):
    """A last stage that is not the first (pre_process=False) with MTP: megatron-core builds an embedding for the
    MTP block (word and learned position embeddings) and still allocates the output layer's weight when tied.
    Compared: everything that stage holds besides its transformer layers."""
    shape = ModelShape(**CASES["mtp-gqa-tied"] | dict(tied_embeddings=tied, learned_position_embeddings=learned))
    model = _build(shape, pre_process=False)
    real = count_params(model) - count_params(model, "decoder.layers.")
    last = params.stages(shape, Parallelism(pp=2))[-1]
    layers = sum((params.layer(shape, i) for i in range(1, 2)), params.Split())
    assert last.params.total - layers.total == real


def test_repeated_mtp_layer_counts_one_layer_for_every_depth():
    """`mtp_use_repeated_layer` (megatron-core 0.19: MultiTokenPredictionBlock builds one layer and applies it at
    every depth; not in 0.16.1, so not built here)."""
    shape = ModelShape(**CASES["mtp-gqa-tied"])
    one = params.mtp_block(replace(shape, mtp_num_layers=1))
    assert params.mtp_block(shape).total == 2 * one.total
    assert params.mtp_block(replace(shape, mtp_repeated_layer=True)).total == one.total


def test_mla_down_projections_are_replicated_over_tensor_parallelism():
    """The Transformer Engine spec's MLA down projections are TELinear(parallel_mode="duplicated"): a TP rank holds
    them whole, with the q/kv norms; the up and output projections are split."""
    shape = ModelShape(**CASES["mla-q-lora-qk-norm"])
    split = params.latent_attention(shape)
    h = shape.hidden_size
    assert split.replicated == h + h * 24 + 24 + h * (16 + 4) + 16
    dense, _ = split.per_rank(Parallelism(tp=4))
    assert dense == split.tp / 4 + split.replicated


def test_latent_moe_experts_work_in_the_latent_width():
    shape = ModelShape(**CASES["latent-moe"])
    plain = replace(shape, moe_latent_size=None)
    # gated expert: fc1 latent x 2ffn, fc2 ffn x latent instead of hidden
    assert params.routed_expert(shape) == 3 * 40 * 24 and params.routed_expert(plain) == 3 * 40 * 64
    active_drop = (4 - 2) * params.routed_expert(shape) * 2
    assert params.total(shape) - params.active(shape) == active_drop


# Pipeline splits: which decoder layers (and MTP depths) each stage and virtual chunk builds, against megatron-core's
# own functions (get_transformer_layer_offset / get_num_layers_to_build, PipelineParallelLayerLayout).
SPLITS = [  # num_layers, pp, vpp, first, last, account_for_embedding, account_for_loss
    (14, 4, 2, 2, 4, False, False),
    (13, 4, None, 1, None, False, False),
    (30, 4, None, None, 6, False, False),
    (14, 4, None, None, None, True, True),
    (23, 4, 2, None, None, True, False),
]


@pytest.mark.parametrize("split", SPLITS, ids=[str(s) for s in SPLITS])
def test_uneven_pipeline_splits_match_megatron_core(split):
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    layers, pp, vpp, first, last, emb, loss = split
    config = TransformerConfig(num_layers=layers, hidden_size=64, num_attention_heads=4,
                               pipeline_model_parallel_size=pp, virtual_pipeline_model_parallel_size=vpp,
                               num_layers_in_first_pipeline_stage=first, num_layers_in_last_pipeline_stage=last,
                               account_for_embedding_in_pipeline_split=emb, account_for_loss_in_pipeline_split=loss,
                               pipeline_dtype=torch.bfloat16)
    shape = ModelShape(**_BASE | dict(num_layers=layers))
    ours = params.layer_ranges(shape, Parallelism(pp=pp, vpp=vpp, first_stage_layers=first, last_stage_layers=last,
                                                  account_for_embedding=emb, account_for_loss=loss))
    for stage in range(pp):
        for chunk in range(vpp or 1):
            vp = chunk if vpp else None
            start = get_transformer_layer_offset(config, vp, stage)
            count = get_num_layers_to_build(config, vp, stage)
            assert ours[stage][chunk] == range(start, start + count), (stage, chunk)


LAYOUTS = [  # layout, pp, decoder layers, MTP depths
    ("Et*3|(tt|)*2,m|L", 5, 7, 1),
    ("Ettt|tt|tt|ttmL", 4, 9, 1),
    ("Et|t|t|t|tt|tt|t|tL", 4, 10, 0),  # VPP 2
    ([["embedding", "decoder"], ["decoder", "decoder"], ["decoder", "mtp", "mtp", "loss"]], 3, 4, 2),
]


@pytest.mark.parametrize("layout,pp,layers,mtp", LAYOUTS, ids=[str(x[0])[:24] for x in LAYOUTS])
def test_custom_pipeline_layouts_match_megatron_core(layout, pp, layers, mtp):
    from megatron.core import parallel_state
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    from offlint import pipeline_layout

    theirs = PipelineParallelLayerLayout(layout, pp)
    theirs.validate_layer_layout(layers, mtp or None)
    flat = pipeline_layout.parse(layout) if isinstance(layout, str) else layout
    vpp = len(flat) // pp
    parallel = Parallelism(pp=pp, vpp=vpp if vpp > 1 else None, layout=tuple(tuple(row) for row in flat))
    shape = ModelShape(**_BASE | dict(num_layers=layers, mtp_num_layers=mtp))
    ours = params.layer_ranges(shape, parallel)
    parallel_state.set_virtual_pipeline_model_parallel_world_size(vpp if vpp > 1 else None)
    try:
        for stage in range(pp):
            for chunk in range(vpp):
                assert list(ours[stage][chunk]) == theirs.get_layer_id_list(vp_stage=chunk, pp_rank=stage)
                built_mtp = theirs.get_num_layers_to_build(LayerType.mtp, vp_stage=chunk, pp_rank=stage)
                stage_mtp = params.stages(shape, parallel)[stage].mtp_layers
                assert built_mtp == 0 or stage_mtp == built_mtp
    finally:
        parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
    if mtp:
        assert sum(s.mtp_layers for s in params.stages(shape, parallel)) == mtp


def test_a_split_megatron_core_would_refuse_has_no_ranges():
    shape = ModelShape(**_BASE | dict(num_layers=10))
    assert params.layer_ranges(shape, Parallelism(pp=4)) is None
    assert params.layer_ranges(shape, Parallelism(pp=4, first_stage_layers=3)) is None  # 7 over 3 stages
    assert params.layer_ranges(shape, Parallelism(pp=4, first_stage_layers=1)) is not None
    assert params.layer_ranges(shape, Parallelism(pp=2, layout=(("embedding", "decoder"), ("decoder", "loss")))) is None


_LINEARS = ("linear_qkv.weight", "linear_q_proj.weight", "linear_q_down_proj.weight", "linear_q_up_proj.weight",
            "linear_kv_down_proj.weight", "linear_kv_up_proj.weight", "linear_proj.weight", "linear_fc1.weight", "linear_fc2.weight",
            "fc1_latent_proj.weight", "fc2_latent_proj.weight", "eh_proj.weight")


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp8_gemm_weights_equal_the_linear_weights_of_megatron_core(name, model_parallel):
    """What FP8 training quantizes (offlint.estimate.precision) for MLA, latent MoE and MTP: the weight matrices
    of the layers' linears (MLA's down/up/output projections, the latent projections, eh_proj), not biases,
    norms or the router."""
    from offlint.estimate import precision

    shape = ModelShape(**CASES[name])
    model = _build(shape)

    def real(prefix: str) -> int:
        return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefix) and n.endswith(_LINEARS))

    layers = sum(sum(precision.gemm_weights(shape, shape.is_moe_layer(i))) for i in range(shape.num_layers))
    assert layers == real("decoder.layers.")
    if shape.mtp_num_layers:
        assert sum(precision.mtp_gemm_weights(shape)) == real("mtp.")
