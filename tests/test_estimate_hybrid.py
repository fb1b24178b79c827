"""Hybrid Mamba models in the memory model: how the configuration is read (Bridge's HybridModelProvider, refusals
with their reasons) and what each layer kind saves. Parameter counts are checked against real megatron-core
MambaModels in tests/test_estimate_params_hybrid.py; Megatron-LM's theoretical memory model has no hybrid terms,
so the activation terms are checked for their structure against the GPT layer's, as docs/estimate.md lists them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations as act
from offlint.estimate import params, precision
from offlint.estimate.inputs import ModelShape, Parallelism, Training, read_inputs
from offlint.estimate.inputs_hybrid import HYBRID_PROVIDER_DEFAULTS
from offlint.estimate.memory import estimate
from offlint.types import Source, Unknown
from tests.estimate_helpers import located_lookup

_SIZES = {"model.hidden_size": 256, "model.num_attention_heads": 8, "model.num_query_groups": 2,
          "model.ffn_hidden_size": 512, "model.vocab_size": 1000, "model.seq_length": 256,
          "model.hybrid_layer_pattern": "M-M*-M-", "model.mamba_num_heads": 8, "model.mamba_head_dim": 64,
          "model.mamba_num_groups": 2, "model.mamba_state_dim": 16}


_lookup = located_lookup


def test_pattern_gives_the_layers_and_the_providers_defaults():
    inputs = read_inputs(_lookup(_SIZES))
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert m.num_layers == 7 and m.hybrid_pattern == "M-M*-M-"
    # HybridModelProvider's own defaults, not megatron-core's TransformerConfig's
    assert (m.tied_embeddings, m.rms_norm, m.add_bias_linear, m.hidden_dropout, m.learned_position_embeddings) == \
        (False, True, False, 0.0, False)
    assert set(HYBRID_PROVIDER_DEFAULTS) == {"model.share_embeddings_and_output_weights", "model.normalization",
                                             "model.add_bias_linear", "model.hidden_dropout",
                                             "model.position_embedding_type"}


def test_a_megatron_lm_launch_keeps_argparse_defaults():
    m = read_inputs(_lookup(_SIZES, Source.MLM)).model
    assert (m.rms_norm, m.add_bias_linear) == (False, True)


def test_mamba_heads_default_to_twice_hidden_over_head_dim():
    values = {k: v for k, v in _SIZES.items() if k != "model.mamba_num_heads"}
    assert read_inputs(_lookup(values)).model.mamba_num_heads == 2 * 256 // 64


@pytest.mark.parametrize("extra,reason", [
    # MTP depths written into the pattern, mtp_num_layers left at HybridModelProvider's 0 (more in
    # tests/test_estimate_hybrid_mtp.py)
    ({"model.hybrid_layer_pattern": "M-M*-M-/*E"}, "asserts mtp_num_layers > 0"),
    ({"model.hybrid_layer_pattern": "M-MG-M-"}, "'G'"),
    ({"model.num_layers": 8}, "asserts they agree"),
    ({"model.tensor_model_parallel_size": 4}, "MambaMixer asserts"),
    ({"mixed_precision": "bf16_with_mxfp8_mixed"}, "multiple of 16"),  # in_proj 2*512 + 2*2*16 + 8 = 1096 wide
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "NVFP4 with a Mamba in_proj 1096"),  # not whole 16-blocks
    ({"model.fine_grained_activation_offloading": True, "model.offload_modules": ["attn_norm"]},
     "activation offloading of 'attn_norm'"),  # only the experts' expert_fc1/moe_act are modelled
])
def test_what_is_not_modelled_is_refused_with_its_reason(extra, reason):
    inputs = read_inputs(_lookup(_SIZES | extra))
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


def test_an_unknown_pattern_leaves_the_estimate_unknown():
    inputs = read_inputs(_lookup(_SIZES | {"model.hybrid_layer_pattern": Unknown("helper")}))
    assert "model.hybrid_layer_pattern" in inputs.unknown and not inputs.complete


def _shape(**kw) -> ModelShape:
    return read_inputs(_lookup(_SIZES)).model if not kw else replace(read_inputs(_lookup(_SIZES)).model, **kw)


def test_attention_and_mlp_layers_save_what_a_transformer_layer_saves():
    m, p, t = _shape(), Parallelism(tp=2, sequence_parallel=True), Training()
    gpt = replace(m, hybrid_pattern=None)
    dense = act.layer_terms(gpt, p, t, moe=False)
    attention = act.layer_terms(m, p, t, False, hybrid="*")
    mlp = act.layer_terms(m, p, t, False, hybrid="-")
    assert not set(attention.terms) & set(mlp.terms)
    assert attention.total + mlp.total == pytest.approx(dense.total)


def test_mamba_layer_terms_follow_the_mixer():
    m, t = _shape(), Training()
    n = m.seq_length
    one = act.mamba_terms(m, Parallelism(), t)
    d_inner = 8 * 64
    assert one["mamba_scan_input"] == 2 * n * (2 * d_inner + 2 * 2 * 16 + 8)
    assert one["out_proj_input"] == one["mamba_scan_output"] == 2 * n * d_inner
    # TP splits the mixer's tensors; sequence parallelism the norm's
    two = act.mamba_terms(m, Parallelism(tp=2, sequence_parallel=True), t)
    assert all(two[k] == pytest.approx(v / 2) for k, v in one.items())
    no_sp = act.mamba_terms(m, Parallelism(tp=2), t)
    assert no_sp["mamba_norm_input"] == one["mamba_norm_input"]


def test_stage_memory_has_the_scan_working_set_and_full_recompute_keeps_layer_inputs():
    inputs = read_inputs(_lookup(_SIZES))
    stage = estimate(inputs).stages[0]
    names = {part.name: part.bytes for part in stage.parts}
    assert names["Mamba chunked-scan states (one layer)"] == act.mamba_scan_states(inputs.model, inputs.parallel,
                                                                                  inputs.training)
    full = read_inputs(_lookup(_SIZES | {"model.recompute_granularity": "full", "model.recompute_method": "uniform",
                                         "model.recompute_num_layers": 1}))
    kept = {part.name: part.bytes for part in estimate(full).stages[0].parts}["activations: transformer layers"]
    assert kept == 7 * act.checkpoint_input(full.model, full.parallel, full.training)


def test_moe_layers_are_the_pattern_e_layers():
    m = _shape(hybrid_pattern="MEM*E", num_layers=5, num_moe_experts=4, moe_ffn_hidden_size=64)
    assert [m.is_moe_layer(i) for i in range(5)] == [False, True, False, False, True]
    assert params.layer(m, 1).expert == 4 * params.routed_expert(m)


def test_nemotron_3_nano_at_bridges_recipe_shape_has_its_public_size():
    """Bridge 067f987's nemotron_3_nano_pretrain_8gpu_h100_bf16_config shape (recipes/nemotronh/h100/
    nemotron_3_nano.py:80-100) with the Nemotron-H tokenizer's 131072 vocab: the released model is described as
    31.6B parameters in total, 3.6B active with embeddings (NVIDIA-Nemotron-3-Nano-30B-A3B)."""
    m = ModelShape(num_layers=52, hidden_size=2688, ffn_hidden_size=1856, num_attention_heads=32,
                   num_query_groups=2, kv_channels=128, vocab_size=131072, seq_length=8192, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False, num_moe_experts=128, moe_ffn_hidden_size=1856,
                   moe_router_topk=6, moe_shared_expert_intermediate_size=3712,
                   hybrid_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", mamba_num_heads=64,
                   mamba_head_dim=64, mamba_num_groups=8, mamba_state_dim=128)
    assert params.total(m) / 1e9 == pytest.approx(31.6, abs=0.05)
    assert params.active(m) / 1e9 == pytest.approx(3.6, abs=0.05)


@pytest.mark.parametrize("unit,values,reason", [
    ("pretrain_mamba.py at line 3", {}, "Megatron-LM hybrid model launch"),
    ("pretrain_hybrid.py at line 9", {}, "Megatron-LM hybrid model launch"),
    ("recipe", {"model.hybrid_attention_ratio": 0.1}, "without a hybrid layer pattern"),
    ("recipe", {"model.mamba_num_heads": 8}, "without a hybrid layer pattern"),
])
def test_a_hybrid_model_offlint_cannot_see_as_one_is_refused(unit, values, reason):
    """Not read as a GPT model: a Megatron-LM hybrid launch (its --hybrid-*/--mamba-* flags are not in offlint's
    flag table), or Mamba sizes / hybrid ratios without a pattern."""
    gpt = {k: v for k, v in _SIZES.items() if not k.startswith(("model.hybrid", "model.mamba"))} | \
        {"model.num_layers": 4}
    inputs = read_inputs(_lookup(gpt | values), unit)
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported
    assert not read_inputs(_lookup(gpt), "pretrain_gpt.py at line 3").unsupported


def test_what_if_offers_only_what_has_a_verdict_for_a_hybrid_model():
    """No selective recompute beyond core_attn and no activation offloading (not offered for hybrid models), and no
    layout whose TP does not divide the Mamba groups (2 here: TP4 and TP8 are left out)."""
    from offlint.estimate.devices import parse_device
    from offlint.estimate.whatif import what_if

    inputs = read_inputs(_lookup(_SIZES | {"model.num_attention_heads": 8, "model.num_query_groups": 8}))
    labels = [(o.group, o.label) for o in what_if(inputs, parse_device("h100-80gb"), 8)]
    assert ("recompute", "full uniform 1") in labels and ("layout", "TP2 PP1") in labels
    assert not any(group == "activation offload" for group, _ in labels)
    assert not any(label.startswith("selective") and label != "selective core_attn" for _, label in labels)
    assert not any(group == "layout" and label.startswith(("TP4", "TP8")) for group, label in labels)


def test_fp8_quantizes_the_mamba_mixers_gemm_weights_and_linear_inputs():
    """MXFP8 (a 16-aligned in_proj): each FP8 layer's GEMM weights get quantized copies (a Mamba layer's in_proj
    and out_proj, the attention and MLP layers' linears); a Mamba layer's in_proj and out_proj inputs are saved
    quantized, its scan and gated-norm inputs stay bf16."""
    values = _SIZES | {"model.mamba_num_heads": 16, "mixed_precision": "bf16_with_mxfp8_mixed"}
    inputs = read_inputs(_lookup(values), fp8_transpose=False)
    assert inputs.complete, inputs.unsupported
    m, p, t = inputs.model, inputs.parallel, inputs.training
    gemm = sum(sum(precision.gemm_weights(m, False, m.layer_kind(i))) for i in range(m.num_layers))
    width = 2 * 1024 + 2 * 2 * 16 + 16
    mamba, attention = 256 * width + 1024 * 256, 256 * (8 * 32 + 2 * 2 * 32) + 8 * 32 * 256
    assert gemm == 3 * mamba + attention + 3 * 2 * 256 * 512
    parts = {part.name: part.bytes for part in estimate(inputs).stages[0].parts}
    # Bridge's bf16_with_mxfp8_mixed gathers FP8 parameters: the GEMM weights are held quantized only
    weights = next(v for k, v in parts.items() if "FP8 GEMM weights" in k)
    assert weights == pytest.approx((params.total(m) - gemm) * 2 + gemm * precision.weight_copy_bytes(t.low_precision))
    bf16 = act.layer_terms(m, p, t, False, fp8=False, hybrid="M").terms
    fp8 = act.layer_terms(m, p, t, False, fp8=True, hybrid="M").terms
    per = precision.saved_input_bytes(t.low_precision)
    assert fp8["in_proj_input"] == bf16["in_proj_input"] * per / 2
    assert fp8["out_proj_input"] == bf16["out_proj_input"] * per / 2
    assert fp8["mamba_scan_input"] == bf16["mamba_scan_input"]
    mlp = act.layer_terms(m, p, t, False, fp8=True, hybrid="-").terms
    assert "proj_input" not in mlp and "core_attn_qkv" not in mlp


@pytest.mark.parametrize("name", ["nemotron_h_bf16_with_fp8_current_scaling_mixed",
                                  "nanov2_bf16_with_fp8_current_scaling_mixed", "bf16_with_mxfp8_mixed"])
def test_bridges_model_named_precision_recipes_train_bf16_parameters(name):
    """Bridge's Nemotron precision recipes put the model's name first: their parameters are still bf16 (read as
    fp32 before, which doubled the weights and dropped the fp32 master copy)."""
    values = _SIZES | {"model.mamba_num_heads": 16, "mixed_precision": name}
    assert read_inputs(_lookup(values), fp8_transpose=True).training.params_bytes == 2
