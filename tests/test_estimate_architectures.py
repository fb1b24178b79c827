"""Multi-latent attention, multi-token prediction and latent MoE in the memory model: how the configuration is read
(three-valued: an unknown setting leaves the estimate unknown) and the activations and stage parts each adds.

Parameter counts are checked against real megatron-core models in tests/test_estimate_params_mla_mtp.py.
Megatron-LM's theoretical memory model has no activation terms for MLA, MTP or latent MoE (only weights: see
tests/test_estimate_theoretical.py), so the activation terms here are checked against the tensors megatron-core's
modules save, term by term, as docs/estimate.md lists them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations as act
from offlint.estimate import params
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training, read_inputs
from offlint.estimate.memory import estimate
from offlint.types import Unknown
from tests.estimate_helpers import lookup

# DeepSeek-V3's attention and MoE widths (offlint/data/hf_models.json), fewer layers.
V3 = ModelShape(num_layers=4, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, num_query_groups=128,
                kv_channels=128, vocab_size=129280, seq_length=4096, gated_linear_unit=True, tied_embeddings=False,
                rms_norm=True, add_bias_linear=False, qk_layernorm=True, hidden_dropout=0.0, num_moe_experts=256,
                moe_ffn_hidden_size=2048, moe_router_topk=8, moe_shared_expert_intermediate_size=2048,
                moe_layer_freq=(0, 1, 1, 1), multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512,
                qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128)


_SIZES = {"model.num_layers": 4, "model.hidden_size": 256, "model.num_attention_heads": 8, "model.vocab_size": 1000,
          "model.seq_length": 128}


def test_mla_and_mtp_are_read_and_no_longer_refused():
    inputs = read_inputs(lookup(_SIZES | {"model.multi_latent_attention": True, "model.q_lora_rank": None,
                                           "model.kv_lora_rank": 64, "model.qk_head_dim": 32,
                                           "model.qk_pos_emb_head_dim": 16, "model.v_head_dim": 32,
                                           "model.mtp_num_layers": 2, "model.mtp_use_repeated_layer": True}))
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert m.multi_latent_attention and m.q_lora_rank is None and m.kv_lora_rank == 64
    assert (m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim) == (32, 16, 32)
    assert m.mtp_num_layers == 2 and m.mtp_repeated_layer


@pytest.mark.parametrize("key", ["model.mtp_num_layers", "model.multi_latent_attention", "model.kv_lora_rank",
                                 "model.mtp_use_repeated_layer"])
def test_an_unknown_mla_or_mtp_setting_leaves_the_estimate_unknown(key):
    values = _SIZES | {"model.multi_latent_attention": True, "model.kv_lora_rank": 64, "model.qk_head_dim": 32,
                       "model.qk_pos_emb_head_dim": 16, "model.v_head_dim": 32, "model.mtp_num_layers": 1}
    values[key] = Unknown("set by a helper offlint cannot read")
    inputs = read_inputs(lookup(values))
    assert key in inputs.unknown and not inputs.complete


def test_an_unknown_latent_size_leaves_a_moe_estimate_unknown():
    inputs = read_inputs(lookup(_SIZES | {"model.num_moe_experts": 8, "model.moe_latent_size": Unknown("helper")}))
    assert "model.moe_latent_size" in inputs.unknown


def test_mla_saves_the_compressed_latents_and_wider_query_keys():
    """Per layer and micro-batch (n tokens, TP t, sequence parallel): the compressed q (1536) and kv (512) and the
    up projections' normed inputs, 2 bytes each and split like the hidden state; q and k of 128 + 64 per head
    and v of 128, split over TP by heads; no num_query_groups x kv_channels terms."""
    p = Parallelism(tp=2, sequence_parallel=True)
    t = Training()
    n = V3.seq_length
    terms = act.layer_terms(V3, p, t, moe=False).terms
    assert terms["mla_q_compressed"] == terms["mla_q_up_input"] == 2 * n * 1536 / 2
    assert terms["mla_kv_compressed"] == terms["mla_kv_up_input"] == 2 * n * 512 / 2
    assert terms["core_attn_qkv"] == 2 * n * 128 * (2 * 192 + 128) / 2
    assert terms["core_attn_out"] == 2 * n * 128 * 128 / 2
    no_q_lora = act.layer_terms(replace(V3, q_lora_rank=None, qk_layernorm=False), p, t, moe=False).terms
    assert "mla_q_compressed" not in no_q_lora and "mla_q_up_input" not in no_q_lora
    assert "mla_kv_up_input" not in no_q_lora  # without the fused norm the compressed kv is the up input


def test_mla_up_proj_recompute_drops_q_k_v_and_keeps_the_compressed_latents():
    t = Training(recompute_granularity="selective", recompute_modules=("mla_up_proj",))
    full = act.layer_terms(V3, Parallelism(), Training(), moe=False)
    kept = act.after_selective_recompute(full, t)
    assert set(full.terms) - set(kept.terms) == {"core_attn_qkv", "mla_q_up_input", "mla_kv_up_input"}
    assert "mla_q_compressed" in kept.terms and "mla_kv_compressed" in kept.terms


def _inputs(m: ModelShape, p: Parallelism, t: Training) -> Inputs:
    return Inputs(m, p, replace(t, global_batch_size=8 * t.micro_batch_size * (p.world_size or 1)))


def test_mtp_depths_are_held_on_the_last_stage_only():
    m = replace(V3, mtp_num_layers=2, num_moe_experts=None, moe_layer_freq=1)
    p = Parallelism(pp=2, world_size=2)
    result = estimate(_inputs(m, p, Training(distributed_optimizer=True)))
    first, last = result.stages

    def part(stage, prefix):
        return sum(x.bytes for x in stage.parts if x.name.startswith(prefix))

    assert part(first, "activations: multi-token") == 0
    depth = act.mtp_depth(m, p, Training())
    assert part(last, "activations: multi-token prediction (2 depths)") == 2 * depth.total
    # One depth: the decoder layer's terms, plus its embedding, norm and eh_proj inputs, plus an output layer.
    layer = act.layer_terms(m, p, Training(), moe=False)
    n, h = m.seq_length, m.hidden_size
    assert depth.total == pytest.approx(layer.total + act.embedding_terms(m, p, Training()) + 8 * n * h
                                        + act.output_terms(m, p, Training()))
    # The last stage's weights: its layers, the MTP block, a final norm, an output layer and the MTP's embedding.
    assert result.stages[1].parts[0].bytes == pytest.approx(params.stages(m, p)[1].params.total * 2)


def test_full_recompute_keeps_two_inputs_per_mtp_depth_and_rebuilds_one():
    m = replace(V3, mtp_num_layers=1)
    p = Parallelism()
    full = Training(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    kept = act.mtp_depth(m, p, full)
    assert kept.terms["mtp_checkpoint_inputs"] == 2 * 2 * m.seq_length * m.hidden_size
    # Backward rebuilds what the depth's checkpoint covers (norms, eh_proj, the layer, the final norm), not the
    # embedding taken before it nor the output layer and fp32 logits after it, which `kept` still holds.
    whole = act.mtp_depth(m, p, Training())
    inside = whole.total - whole.terms["mtp_embedding"] - whole.terms["mtp_output"]
    assert act.mtp_rebuilt(m, p, full) == pytest.approx(inside + 2 * m.seq_length * m.hidden_size)
    assert act.mtp_rebuilt(m, p, full) + kept.total == pytest.approx(whole.total + kept.terms["mtp_checkpoint_inputs"])
    # `block` does not recompute MTP layers (megatron-core warns and runs them plainly).
    block = replace(full, recompute_method="block")
    assert act.mtp_depth(m, p, block).total == act.mtp_depth(m, p, Training()).total


def test_latent_moe_dispatches_and_computes_in_the_latent_width():
    m = replace(V3, multi_latent_attention=False, moe_latent_size=1024)
    plain = replace(m, moe_latent_size=None)
    p, t = Parallelism(ep=8), Training()
    assert act.dispatch_buffers(m, p, t) == act.dispatch_buffers(plain, p, t) * 1024 / 7168
    latent, dense = act.layer_terms(m, p, t, moe=True).terms, act.layer_terms(plain, p, t, moe=True).terms
    assert latent["expert_fc1_input"] == dense["expert_fc1_input"] * 1024 / 7168
    assert latent["expert_fc1_output"] == dense["expert_fc1_output"]  # the experts' ffn width is unchanged
    assert latent["latent_fc2_input"] == 2 * m.seq_length * 1024
    moe = act.after_selective_recompute(act.layer_terms(m, p, t, moe=True),
                                        Training(recompute_granularity="selective", recompute_modules=("moe",)))
    assert "latent_fc2_input" not in moe.terms


@pytest.mark.parametrize(("hf_id", "total", "active"), [
    # DeepSeek-V3 technical report: 671B total, 37B activated per token, besides the MTP module (HF: 685B with
    # the MTP module's own embedding and head, which megatron-core shares with the main model).
    ("deepseek-ai/DeepSeek-V3", 671.0, 37.0),
    ("deepseek-ai/DeepSeek-V2", 236.0, 21.0),  # DeepSeek-V2 paper: 236B total, 21B activated
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7, 2.4),  # 15.7B total, 2.4B activated (no q_lora_rank)
    ("moonshotai/Kimi-K2-Instruct", 1000.0, 32.0),  # model card: "1T" total (rounded), 32B activated
])
def test_mla_models_of_the_size_table_have_their_published_sizes(hf_id, total, active):
    from offlint import model_sizes

    values = model_sizes.lookup(hf_id) | {"model.seq_length": 4096}
    m = read_inputs(lookup(values)).model
    assert m.multi_latent_attention and (m.q_lora_rank is None) == ("Lite" in hf_id)
    main = replace(m, mtp_num_layers=0)
    assert params.total(main) / 1e9 == pytest.approx(total, rel=0.01 if total < 1000 else 0.03)
    assert params.active(main) / 1e9 == pytest.approx(active, rel=0.12)
    if m.mtp_num_layers:  # one MTP depth: one MoE layer, eh_proj and norms (about 11.6B for DeepSeek-V3)
        assert params.total(m) - params.total(main) == params.mtp_block(m).total


def test_moonlight_parameter_count_reconciles_with_its_measured_checkpoint_size():
    """Bridge's Moonlight-16B-A3B verification card (067f987, examples/model_verification_cards/
    moonlight-16b-a3b/card.yaml) measured its exported Hugging Face checkpoint: 31,920,240,256 bytes of BF16
    tensors, which includes two kinds of buffers megatron-core does not count as parameters: the router's expert
    bias (e_score_correction_bias, 64 per MoE layer, 26 layers, 2 bytes) and rotary inv_freq (32 fp32 values per
    layer, 27 layers; Bridge exports them since 4b2b069b)."""
    from offlint import model_sizes

    m = read_inputs(lookup(model_sizes.lookup("moonshotai/Moonlight-16B-A3B"))).model
    buffers = 26 * 64 * 2 + 27 * 32 * 4
    assert params.total(m) * 2 + buffers == 31_920_240_256
    assert params.active(m) / 1e9 == pytest.approx(3.0, rel=0.05)  # "A3B"


def test_a_custom_layout_is_read_and_sets_the_virtual_stages():
    values = _SIZES | {"model.pipeline_model_parallel_size": 2, "model.mtp_num_layers": 1,
                       "model.pipeline_model_parallel_layout": "Et|t|t|tmL"}
    inputs = read_inputs(lookup(values))
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    assert inputs.parallel.vpp == 2 and inputs.parallel.layout[-1] == ("decoder", "mtp", "loss")
    listed = read_inputs(lookup(values | {"model.pipeline_model_parallel_layout": [["embedding", "decoder"],
                                                                                      ["decoder", "decoder"],
                                                                                      ["decoder", "mtp", "loss"],
                                                                                      []]}))
    assert listed.parallel.layout[1] == ("decoder", "decoder") and listed.parallel.vpp == 2


@pytest.mark.parametrize("layout", ["Et|tx|L", "(t)*99999999999|L", Unknown("set by a helper"), 42])
def test_a_layout_offlint_cannot_read_leaves_the_estimate_unknown(layout):
    values = _SIZES | {"model.pipeline_model_parallel_size": 2, "model.pipeline_model_parallel_layout": layout}
    inputs = read_inputs(lookup(values))
    assert "model.pipeline_model_parallel_layout" in inputs.unknown and not inputs.complete


def test_uneven_first_and_last_stages_are_read():
    values = _SIZES | {"model.num_layers": 10, "model.pipeline_model_parallel_size": 4,
                       "model.num_layers_in_first_pipeline_stage": 1, "model.num_layers_in_last_pipeline_stage": 3}
    inputs = read_inputs(lookup(values))
    assert inputs.complete and not inputs.unsupported
    assert [sum(len(r) for r in s) for s in params.layer_ranges(inputs.model, inputs.parallel)] == [1, 3, 3, 3]


def test_a_standalone_mtp_stage_holds_the_mtp_layers_and_the_last_stage_their_logits():
    m = replace(V3, num_layers=4, num_moe_experts=None, moe_layer_freq=1, mtp_num_layers=1)
    layout = (("embedding", "decoder", "decoder"), ("decoder", "decoder"), ("mtp",), ("loss",))
    p = Parallelism(pp=4, world_size=4, layout=layout)
    result = estimate(_inputs(m, p, Training(distributed_optimizer=True)))

    def part(stage):
        return sum(x.bytes for x in stage.parts if x.name.startswith("activations: multi-token"))

    depth = act.mtp_depth(m, p, Training())
    logits = depth.terms["mtp_output"]
    assert [part(s) for s in result.stages] == [0, 0, pytest.approx(depth.total - logits), pytest.approx(logits)]
    stages = params.stages(m, p)
    assert [s.layers for s in stages] == [2, 2, 0, 0] and stages[2].mtp_layers == 1
    # The MTP stage builds its own embedding; the last stage holds only the output layer (no decoder layers;
    # with MTP the final norm sits with the last decoder layer, on stage 1).
    assert stages[2].params.total == params.mtp_block(m).total + params.embedding(m).total
    assert stages[3].params.total == params.output_layer(m).total
    assert stages[1].params.total == 2 * params.layer(m, 0).total + params.final_norm(m).total


def test_step_time_prices_mla_projections_and_their_recompute():
    from offlint.estimate import cost, devices

    dev = devices.parse_device("h100-80gb")
    p, t = Parallelism(tp=2, sequence_parallel=True), Training()
    layer = cost.layer_time(V3, p, t, dev, moe=False)
    assert {"qkv", "mla_up_proj", "proj", "core_attn"} <= set(layer.parts)
    recompute = Training(recompute_granularity="selective", recompute_modules=("mla_up_proj",))
    assert cost.recomputed_seconds(layer, recompute) == layer.parts["mla_up_proj"] > 0
    # Latent MoE: the routed experts' GEMMs shrink with the latent width, the latent projections are added.
    latent, plain, ep = replace(V3, moe_latent_size=1024), V3, Parallelism(ep=8, world_size=8)
    assert 0 < cost.layer_time(latent, ep, t, dev, moe=True).comm["alltoall"] < \
        cost.layer_time(plain, ep, t, dev, moe=True).comm["alltoall"]


def test_fp8_training_with_mla_and_mtp_gets_a_verdict_and_counts_their_quantized_copies():
    from offlint.estimate import precision
    from offlint.estimate.inputs import LowPrecision

    m = replace(V3, mtp_num_layers=1)
    p = Parallelism(pp=2, ep=8, world_size=16)
    lp = LowPrecision(recipe="tensorwise", transpose=True)
    t = Training(distributed_optimizer=True, low_precision=lp)
    result = estimate(_inputs(m, p, t))
    last = result.stages[1]
    copies = sum(x.bytes for x in last.parts if x.name.startswith("FP8 weight copies"))
    layers = [i for r in params.layer_ranges(m, p)[1] for i in r]
    per_rank = [precision.gemm_weights(m, m.is_moe_layer(i)) for i in layers] + [precision.mtp_gemm_weights(m)]
    expected = sum(tp / p.tp + rep + ex / (p.ep * p.etp) for tp, rep, ex in per_rank) * 2  # 1 byte + transpose
    assert copies == pytest.approx(expected)
    values = _SIZES | {"model.multi_latent_attention": True, "model.kv_lora_rank": 64, "model.qk_head_dim": 32,
                       "model.qk_pos_emb_head_dim": 16, "model.v_head_dim": 32, "model.mtp_num_layers": 1,
                       "mixed_precision": "bf16_with_mxfp8_mixed"}
    inputs = read_inputs(lookup(values))
    assert inputs.complete and inputs.training.low_precision is not None, inputs.unsupported


def test_a_gated_shared_expert_keeps_its_output_for_the_gates_gradient():
    """SharedExpertMLP.forward multiplies fc2's output by sigmoid(gate) (megatron-core 0.20.0
    moe/shared_experts.py:200-207): the product keeps that output, hidden wide and sequence-parallel; recomputing
    the shared experts or the whole MoE part drops it."""
    m = replace(V3, multi_latent_attention=False)
    gated = replace(m, moe_shared_expert_gate=True)
    p = Parallelism(tp=2, ep=8, sequence_parallel=True)
    t = Training()
    plain, extra = act.layer_terms(m, p, t, moe=True), act.layer_terms(gated, p, t, moe=True)
    assert "shared_gate_input" not in plain.terms
    assert extra.terms["shared_gate_input"] == 2 * m.seq_length * m.hidden_size / 2
    assert extra.total == pytest.approx(plain.total + extra.terms["shared_gate_input"])
    for module in ("shared_experts", "moe"):
        recomputed = replace(t, recompute_granularity="selective", recompute_modules=(module,))
        assert "shared_gate_input" not in act.after_selective_recompute(extra, recomputed).terms
    no_shared = replace(gated, moe_shared_expert_intermediate_size=None)
    assert "shared_gate_input" not in act.layer_terms(no_shared, p, t, moe=True).terms
