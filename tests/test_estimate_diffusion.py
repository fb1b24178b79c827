"""Bridge's Wan video diffusion transformer in the memory model (offlint/estimate/diffusion.py): how a Wan recipe is
read (WanModelProvider's and WanDatasetConfig's defaults, the mock batch's tokens, the refusals and their reasons),
its parameters (the attention and MLP linears checked against real megatron-core modules built on CPU) and what it
saves per micro-batch, as docs/estimate.md "Wan" lists it.
"""

from __future__ import annotations

import pytest

from offlint.estimate import diffusion, whatif
from offlint.estimate.devices import DEFAULT_DEVICE, parse_device
from offlint.estimate.inputs import ModelShape, Parallelism, WanShape, read_inputs
from offlint.estimate.memory import estimate
from offlint.types import Unknown
from tests.estimate_helpers import located_lookup

# A Wan recipe as Bridge writes it: the provider's sizes set, the dataset's mock sizes left at their defaults.
_RECIPE = {"model.crossattn_emb_size": 1536, "model.num_layers": 30, "model.hidden_size": 1536,
           "model.ffn_hidden_size": 8960, "model.num_attention_heads": 12, "model.seq_length": 1024,
           "model.context_parallel_size": 8, "dataset.path": None, "dataset.seq_length": 1024,
           "dataset.packing_buffer_size": 200,
           "train.micro_batch_size": 1, "train.global_batch_size": 2}


_lookup = located_lookup


def _read(**changes):
    return read_inputs(_lookup({**_RECIPE, **changes}))


def test_the_mock_batch_gives_the_tokens_not_seq_length():
    inputs = _read()
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    # WanDatasetConfig's mock video: 24 x 104 x 60 latents in (1, 2, 2) patches; 512 text tokens
    assert m.seq_length == 24 * 52 * 30 == 37440
    assert (m.wan.sample_tokens, m.wan.context_tokens, m.wan.packed_samples) == (37440, 512, 1)
    # WanModelProvider's defaults, not megatron-core's TransformerConfig's
    assert (m.wan.in_channels, m.wan.text_dim, m.wan.freq_dim, m.wan.layernorm_across_heads) == (16, 4096, 256, True)
    assert (m.add_qkv_bias, m.add_bias_linear, m.hidden_dropout) == (True, True, 0.0)


def test_packed_samples_and_frames_set_the_tokens():
    assert _read(**{"dataset.F_latents": 1, "model.context_parallel_size": 1}).model.seq_length == 52 * 30
    m = _read(**{"dataset.number_packed_samples": 2}).model
    assert m.seq_length == 2 * 37440
    assert diffusion._sizes(m, Parallelism(cp=8))[1] == 2 * 512 / 8


def test_the_micro_batch_size_does_not_change_the_mock_batch():
    one = estimate(_read(), 8).peak
    two = estimate(_read(**{"train.micro_batch_size": 2, "train.global_batch_size": 4}), 8).peak
    assert [p.bytes for p in one.parts if p.kind == "activations"] == \
        [p.bytes for p in two.parts if p.kind == "activations"]


@pytest.mark.parametrize("changes,reason", [
    ({"dataset.path": "/data/wds"}, "real dataset"),
    ({"model.pipeline_model_parallel_size": 2}, "pipeline parallelism"),
    ({"model.num_query_groups": 4}, "grouped-query attention"),
    ({"dataset.patch_spatial": 1}, "does not fit the model"),
    ({"model.text_dim": 2048}, "does not fit the model"),
    ({"dataset.H_latents": 105}, "do not divide"),
    ({"dataset.F_latents": 1, "dataset.H_latents": 6, "dataset.W_latents": 6}, "multiple of 2 x CP"),
    ({"model.context_parallel_size": 1, "model.tensor_model_parallel_size": 4, "model.sequence_parallel": True,
      "dataset.F_latents": 1, "dataset.H_latents": 6, "dataset.W_latents": 6}, "not a multiple of TP"),
    ({"model.qkv_format": "sbhd"}, "qkv_format"),
    ({"model.recompute_granularity": "selective", "model.recompute_modules": ["mlp"]}, "selective recompute"),
    ({"model.num_moe_experts": 8}, "MoE"),
])
def test_what_is_not_modelled_is_refused(changes, reason):
    inputs = _read(**changes)
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


def test_an_unknown_dataset_path_leaves_the_estimate_unknown():
    inputs = _read(**{"dataset.path": Unknown("set from ConfigContainer(...)")})
    assert "dataset.path" in inputs.unknown and not inputs.complete


def test_a_dataset_not_read_as_wans_is_refused():
    values = {k: v for k, v in _RECIPE.items() if k != "dataset.packing_buffer_size"}
    inputs = read_inputs(_lookup(values))
    assert any("does not read as WanDatasetConfig" in why for why in inputs.unsupported)
    inputs = _read(**{"dataset.packing_buffer_size": Unknown("set from ConfigContainer(...)")})
    assert "dataset.packing_buffer_size" in inputs.unknown and not inputs.unsupported


def test_an_unknown_crossattn_size_leaves_the_estimate_unknown():
    inputs = _read(**{"model.crossattn_emb_size": Unknown("from a call")})
    assert "model.crossattn_emb_size" in inputs.unknown


def test_a_language_model_is_not_read_as_wan():
    values = {k: v for k, v in _RECIPE.items() if k != "model.crossattn_emb_size"}
    values.update({"model.vocab_size": 32000, "model.context_parallel_size": 1})
    inputs = read_inputs(_lookup(values))
    assert inputs.model.wan is None and inputs.model.seq_length == 1024


# --- parameters --------------------------------------------------------------------------------------------------

_SMALL = ModelShape(num_layers=2, hidden_size=64, ffn_hidden_size=160, num_attention_heads=4, num_query_groups=4,
                    kv_channels=16, vocab_size=0, seq_length=6 * 8 * 10, add_qkv_bias=True, add_bias_linear=True,
                    wan=WanShape(crossattn_emb_size=48, text_dim=40, in_channels=16, out_channels=16,
                                 patch_temporal=1, patch_spatial=2, freq_dim=32, sample_tokens=240,
                                 context_tokens=12, packed_samples=2))


def _block(m: ModelShape):
    """One block from megatron-core's own attention and MLP modules (local linears), its cross-attention's key/value
    projection reading the text embedding width, and the block's norms and modulation as torch modules."""
    import torch
    import torch.nn.functional as F
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.attention import (CrossAttention, CrossAttentionSubmodules, SelfAttention,
                                                     SelfAttentionSubmodules)
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.mlp import MLP, MLPSubmodules

    config = TransformerConfig(num_layers=m.num_layers, hidden_size=m.hidden_size,
                               ffn_hidden_size=m.ffn_hidden_size, num_attention_heads=m.num_attention_heads,
                               add_bias_linear=m.add_bias_linear, add_qkv_bias=m.add_qkv_bias,
                               activation_func=F.gelu, use_cpu_initialization=True)
    mask = AttnMaskType.padding
    self_attention = SelfAttention(config, SelfAttentionSubmodules(
        linear_qkv=ColumnParallelLinear, core_attention=DotProductAttention, linear_proj=RowParallelLinear), 1, mask)
    cross = CrossAttention(config, CrossAttentionSubmodules(
        linear_q=ColumnParallelLinear, linear_kv=ColumnParallelLinear, core_attention=DotProductAttention,
        linear_proj=RowParallelLinear), 1, mask)
    q = m.num_attention_heads * m.kv_channels
    cross.linear_kv = ColumnParallelLinear(m.wan.crossattn_emb_size, 2 * q, config=config,
                                           init_method=config.init_method, bias=m.add_bias_linear)
    mlp = MLP(config, MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear))
    h = m.hidden_size
    norms = [torch.nn.RMSNorm(q) for _ in range(4)]  # q and k norms across heads, self and cross
    rest = [torch.nn.LayerNorm(h, elementwise_affine=False), torch.nn.LayerNorm(h),  # norm1, norm3
            torch.nn.LayerNorm(h, elementwise_affine=False), torch.nn.ParameterList([torch.nn.Parameter(
                torch.zeros(1, 6, h))])]  # norm2, adaLN modulation
    return torch.nn.ModuleList([self_attention, cross, mlp, *norms, *rest])


def _outside(m: ModelShape):
    import torch

    w, h, c = m.wan, m.hidden_size, m.wan.crossattn_emb_size
    patch = (w.patch_temporal, w.patch_spatial, w.patch_spatial)
    return torch.nn.ModuleList([
        torch.nn.Conv3d(w.in_channels, h, kernel_size=patch, stride=patch),
        torch.nn.Sequential(torch.nn.Linear(w.text_dim, c), torch.nn.GELU(approximate="tanh"),
                            torch.nn.Linear(c, c)),
        torch.nn.Linear(w.freq_dim, h), torch.nn.Linear(h, h),  # the timestep MLP
        torch.nn.Linear(h, 6 * h),  # its projection to the six modulation vectors
        torch.nn.Linear(h, w.out_channels * w.patch_temporal * w.patch_spatial ** 2),  # head
        torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(1, 2, h))]),  # head modulation
    ])


def test_block_parameters_equal_megatron_cores_modules(model_parallel):
    pytest.importorskip("torch")
    block = _block(_SMALL)
    assert diffusion.layer_params(_SMALL).total == sum(p.numel() for p in block.parameters())


def test_outside_parameters_and_total(model_parallel):
    outside = _outside(_SMALL)
    assert diffusion.outside_params(_SMALL).total == sum(p.numel() for p in outside.parameters())
    assert diffusion.total(_SMALL) == 2 * sum(p.numel() for p in _block(_SMALL).parameters()) + \
        sum(p.numel() for p in outside.parameters())


def test_tensor_parallelism_splits_the_linears_only():
    split = diffusion.layer_params(_SMALL)
    h, q = 64, 64
    # replicated: the three row-parallel biases, four q/k norms, the modulation and norm3
    assert split.replicated == 3 * h + 4 * q + 6 * h + 2 * h
    assert diffusion.outside_params(_SMALL).tp == 0


def test_wan_1_3b_as_bridge_configures_it():
    m = _read().model
    assert diffusion.total(m) == 1_418_996_800


# --- activations -------------------------------------------------------------------------------------------------

def test_block_terms_by_hand():
    m, p = _SMALL, Parallelism(cp=2)
    n, nc, h, q, f = 240.0, 12.0, 64, 64, 160  # 480 video and 24 text tokens over CP2
    hidden, norm = 2 * n * h, 2 * n * h + 8 * n  # a bf16 hidden state; a norm's input with fp32 mean and rstd
    expected = {
        "norm1_input": norm, "qkv_input": hidden, "qk_norm_inputs": 2 * n * 2 * q + 8 * n,
        "core_attn_qkv": 2 * n * 3 * q, "core_attn_out": 2 * n * q, "attn_gate_input": hidden,
        "norm3_input": norm, "cross_q_input": hidden, "cross_qk_norm_inputs": 2 * n * q + 4 * n + 2 * nc * q + 4 * nc,
        "cross_attn_qkv": 2 * n * q + 2 * nc * 2 * q, "cross_attn_out": 2 * n * q,
        "norm2_input": norm, "fc1_input": hidden, "fc1_output": 2 * n * f, "act_output": 2 * n * f,
        "mlp_gate_input": hidden,
    }
    assert diffusion.layer_terms(m, p) == expected


def test_sequence_parallelism_shards_the_hidden_states_and_gathers_the_context():
    m = _SMALL
    plain = diffusion.layer_terms(m, Parallelism(tp=2))
    sp = diffusion.layer_terms(m, Parallelism(tp=2, sequence_parallel=True))
    assert sp["fc1_input"] == plain["fc1_input"] / 2 and sp["core_attn_qkv"] == plain["core_attn_qkv"]
    # the q/k norms run on heads gathered over TP: not split
    assert sp["qk_norm_inputs"] == plain["qk_norm_inputs"] == 2 * 480 * 128 + 8 * 480
    # linear_kv all-gathers the replicated text embeddings over TP under sequence parallelism
    assert sp["cross_attn_qkv"] - plain["cross_attn_qkv"] == 2 * 24 * 2 * 64 / 2


def test_full_recompute_keeps_one_input_per_chunk():
    inputs = _read(**{"model.recompute_granularity": "full", "model.recompute_method": "uniform",
                      "model.recompute_num_layers": 1})
    m, p = inputs.model, inputs.parallel
    parts = {x.name: x.bytes for x in estimate(inputs, 8).peak.parts}
    assert parts["activations: Wan blocks"] == 30 * diffusion.checkpoint_input(m, p)
    assert parts["activations: recompute working set"] == sum(diffusion.layer_terms(m, p).values())
    blocks = _read(**{"model.recompute_granularity": "full", "model.recompute_method": "block",
                      "model.recompute_num_layers": 8})
    parts = {x.name: x.bytes for x in estimate(blocks, 8).peak.parts}
    layer = sum(diffusion.layer_terms(m, p).values())
    assert parts["activations: Wan blocks"] == 8 * diffusion.checkpoint_input(m, p) + 22 * layer


def test_the_estimate_has_no_vocabulary_and_no_what_if_knobs():
    inputs = _read()
    result = estimate(inputs, 8)
    names = [x.name for x in result.peak.parts]
    assert "activations: output layer and logits" not in names
    assert not any("embedding inputs" in name for name in names)
    outside = diffusion.outside_terms(inputs.model, inputs.parallel)
    assert outside["rotary_frequencies"] == 4 * 37440 * 128
    options = whatif.what_if(inputs, parse_device(DEFAULT_DEVICE), 8)
    assert [o.group for o in options] == ["configured"]


def test_distributed_optimizer_shards_over_data_and_context_parallel_ranks():
    inputs = _read(**{"ddp.use_distributed_optimizer": True})
    assert inputs.training.distributed_optimizer
    moments = lambda world: next(x.bytes for x in estimate(inputs, world).peak.parts  # noqa: E731
                                 if x.name.startswith("optimizer: moments"))
    weights = diffusion.total(inputs.model)  # TP1: every parameter on every rank
    assert moments(8) == 2 * 4 * weights / 8 and moments(16) == 2 * 4 * weights / 16


def test_a_wan_finding_names_what_drives_its_estimate_not_seq_length():
    """A Wan recipe's tokens are the mock batch's (37,440), not seq_length (4096 in Bridge's recipes): an OFL303 that
    listed `model.seq_length = 4096` among its settings read as if the estimate were wrong (sweep 37)."""
    from offlint.conditions.memory import estimated_peak_gib
    from offlint.conditions.scope import Scope
    from offlint.versions import parse_version

    scope = Scope(_lookup(_RECIPE), parse_version("0.16.1"), names={"unit_name": "wan_1_3b_pretrain_config"})
    assert estimated_peak_gib(scope) > 0
    read = [value.key for value in scope.read]
    assert "model.num_layers" in read and "model.seq_length" not in read
