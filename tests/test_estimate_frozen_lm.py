"""A VLM training only its vision projection (offlint/estimate/frozen_lm.py): Bridge's Qwen3-VL recipes with
freeze_language_model=True, freeze_vision_model=True, freeze_vision_projection=False. The tower's and mergers'
sizes are checked against a torch module of our own built in the layout docs/estimate.md cites and against the
published parameter count of Qwen3-VL-8B-Instruct's vision model; the reader against recipes in Bridge's shapes
(fixtures of our own)."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from offlint import model_sizes
from offlint.estimate import activations, frozen_lm, memory, oom
from offlint.estimate.inputs import FrozenLM, Inputs, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

TOWER_8B = model_sizes.vision("Qwen/Qwen3-VL-8B-Instruct")
VISION = FrozenLM(27, 1152, 4304, 16, 3, 16, 2, 2, 2304, 4096, 3)
DENSE = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3072, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False, qk_layernorm=True)
MOE = replace(DENSE, num_moe_experts=8, moe_ffn_hidden_size=512, moe_router_topk=2)
TRAIN = Training(micro_batch_size=1, global_batch_size=64, distributed_optimizer=True, grads_fp32=True)
FROZEN = replace(TRAIN, frozen_lm=VISION)


def _tower_module(v: FrozenLM):
    """The tower and mergers as plain torch modules (our own, not Bridge's code): a Conv3d patch embedding with
    bias, learned position embeddings, pre-norm ViT layers with biased linears and LayerNorms, a final merger
    normalising the patch width and a deepstack merger per index normalising the merged width."""
    import torch.nn as nn

    h, merged = v.hidden_size, v.hidden_size * v.spatial_merge_size ** 2

    def layer():
        return nn.ModuleList([nn.LayerNorm(h), nn.Linear(h, 3 * h), nn.Linear(h, h), nn.LayerNorm(h),
                              nn.Linear(h, v.intermediate_size), nn.Linear(v.intermediate_size, h)])

    def merger(width):
        return nn.ModuleList([nn.LayerNorm(width), nn.Linear(merged, merged), nn.Linear(merged, v.out_hidden_size)])

    tower = nn.ModuleList([nn.Conv3d(v.in_channels, h, (v.temporal_patch_size, v.patch_size, v.patch_size)),
                           nn.Embedding(v.num_position_embeddings, h), *[layer() for _ in range(v.depth)]])
    mergers = nn.ModuleList([merger(h), *[merger(merged) for _ in range(v.deepstack_mergers)]])
    return tower, mergers


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("v", [VISION, FrozenLM(2, 64, 96, 4, 3, 4, 2, 2, 16, 128, 1)])
def test_tower_and_mergers_count_what_the_modules_hold(v):
    tower, mergers = _tower_module(v)
    assert frozen_lm.tower_params(v).total == _count(tower)
    assert frozen_lm.projection_params(v).total == _count(mergers)


def test_the_8b_table_entry_matches_the_published_vision_parameter_count():
    """The model card of Qwen3-VL-8B-Instruct's vision model states 576.4M parameters (hf_models.json sources)."""
    assert TOWER_8B is not None and TOWER_8B["model_type"] == "qwen3_vl"
    total = frozen_lm.tower_params(VISION).total + frozen_lm.projection_params(VISION).total
    assert total == 576_388_336 and round(total / 1e5) == 5764
    assert VISION == FrozenLM(*(TOWER_8B[k] for k in ("depth", "hidden_size", "intermediate_size", "num_heads",
                                                      "in_channels", "patch_size", "temporal_patch_size",
                                                      "spatial_merge_size", "num_position_embeddings",
                                                      "out_hidden_size")), len(TOWER_8B["deepstack_visual_indexes"]))
    assert model_sizes.lookup("Qwen/Qwen3-VL-8B-Instruct")["model.hidden_size"] == TOWER_8B["out_hidden_size"]


@pytest.mark.parametrize("moe", [False, True])
def test_frozen_layers_drop_only_the_frozen_linears_inputs(moe):
    m = MOE if moe else DENSE
    trained = activations.layer_terms(m, Parallelism(tp=2), TRAIN, moe).terms
    frozen = activations.layer_terms(m, Parallelism(tp=2), FROZEN, moe).terms
    dropped = {"qkv_input"} | ({"expert_fc1_input", "expert_act_output"} if moe else {"fc1_input", "act_output"})
    assert set(trained) - set(frozen) == dropped
    # norms, attention, the activation function's input and the router's input and logits stay
    kept = {"attn_norm_input", "core_attn_qkv", "core_attn_out", "mlp_norm_input"} | (
        {"moe_input", "router_logits", "expert_fc1_output"} if moe else {"fc1_output"})
    assert kept <= set(frozen) and all(frozen[k] == trained[k] for k in kept)


def _estimate(training: Training, parallel=Parallelism(pp=2, world_size=8), model=DENSE) -> memory.Estimate:
    return memory.estimate(Inputs(model, parallel, training))


def _named(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


@pytest.mark.parametrize("tp", [1, 2])
def test_only_the_first_stages_mergers_get_gradients_and_optimizer_states(tp):
    parallel = Parallelism(tp=tp, pp=2, world_size=8)
    first, last = _estimate(FROZEN, parallel).stages
    mergers = sum(frozen_lm.projection_params(VISION).per_rank(parallel))
    dp = parallel.data_parallel(8)
    assert first.of("grads") == pytest.approx(4 * mergers)  # fp32 main grads
    assert first.of("optimizer") == pytest.approx(12 * mergers / dp)  # fp32 master and two moments, sharded
    assert last.of("grads") == last.of("optimizer") == 0
    assert _named(first, "vision tower, frozen") == pytest.approx(
        2 * sum(frozen_lm.tower_params(VISION).per_rank(parallel)))
    assert _named(last, "vision") == 0
    full = _estimate(TRAIN, parallel).stages
    assert _named(first, "weights") == _named(full[0], "weights")  # the language model keeps every weight


def test_the_mergers_keep_their_inputs_per_micro_batch_in_flight():
    first, last = _estimate(FROZEN).stages
    per_mb = frozen_lm.projection_activations(DENSE, Parallelism(pp=2), FROZEN)
    assert _named(first, "activations: vision patch mergers") == pytest.approx(per_mb * first.microbatches_in_flight)
    assert first.microbatches_in_flight == 2 and _named(last, "activations: vision") == 0
    # a merger at TP1: norm input, fc1 input, GELU input and fc2 input at the merged width, for every token
    tokens, merged = DENSE.seq_length, 4 * VISION.hidden_size
    stats = 8 * 4 * tokens + 3 * 8 * tokens
    assert frozen_lm.projection_activations(DENSE, Parallelism(), FROZEN) == 4 * (2 * tokens * merged * 4) + stats


def test_a_frozen_model_keeps_less_than_the_same_model_trained():
    frozen, trained = _estimate(FROZEN).stages[1], _estimate(TRAIN).stages[1]
    assert _named(frozen, "activations: transformer layers") < _named(trained, "activations: transformer layers")


SIZES = {"model.num_layers": 4, "model.hidden_size": 1024, "model.num_attention_heads": 8, "model.vocab_size": 32000,
         "model.seq_length": 2048}
FREEZE = {"model.freeze_language_model": True, "model.freeze_vision_model": True,
          "model.freeze_vision_projection": False, "model.vision_config": dict(TOWER_8B or {})}


def test_the_freeze_flags_and_the_tower_are_read():
    inputs = read_inputs(lookup({**SIZES, **FREEZE}), "x_pretrain_config")
    assert inputs.training.frozen_lm == VISION and not inputs.unsupported and inputs.complete


@pytest.mark.parametrize(("values", "why"), [
    ({"model.freeze_vision_model": False}, "exactly the vision projection"),
    ({"model.freeze_vision_projection": True}, "exactly the vision projection"),
    ({"model.vision_config": None}, "cannot size"),
    ({"model.vision_config": {**(TOWER_8B or {}), "model_type": "qwen2_5_vl"}}, "cannot size"),
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "NVFP4"),
    ({"model.experimental_attention_variant": "gated_delta_net", "model.linear_attention_freq": 4,
      "model.linear_num_key_heads": 4, "model.linear_num_value_heads": 8, "model.linear_key_head_dim": 64,
      "model.linear_value_head_dim": 64, "model.linear_conv_kernel_dim": 4,
      "mixed_precision": "bf16_with_fp8_current_scaling_mixed"}, "FP8 and gated delta net"),
    ({"model.multi_latent_attention": True, "model.kv_lora_rank": 64, "model.qk_head_dim": 64,
      "model.qk_pos_emb_head_dim": 32, "model.v_head_dim": 64}, "MLA or latent experts"),
    ({"model.recompute_granularity": "full"}, "recompute"),
    ({"model.vision_dp_when_cp": True}, "vision_dp_when_cp"),
])
def test_what_gets_no_verdict(values, why):
    inputs = read_inputs(lookup({**SIZES, **FREEZE, **values}), "x_pretrain_config", fp8_transpose=False)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported
    assert inputs.training.frozen_lm is None


def test_an_unknown_freeze_flag_makes_the_estimate_unknown():
    inputs = read_inputs(lookup({**SIZES, **FREEZE, "model.freeze_language_model": Unknown("computed")}), "x_config")
    assert "model.freeze_language_model" in inputs.unknown and not inputs.complete


def test_a_model_offlint_cannot_size_is_left_unknown_not_refused_for_its_tower():
    values = {**SIZES, **FREEZE, "model.vision_config": None,
              "model.hidden_size": Unknown("Qwen/Qwen3-VL-30B-A3B-Instruct is not in offlint's table")}
    inputs = read_inputs(lookup(values), "x_pretrain_config")
    assert "model.hidden_size" in inputs.unknown and not inputs.unsupported and not inputs.complete


RECIPES = textwrap.dedent('''
    from megatron.bridge.models import AutoBridge
    from megatron.bridge.training.config import ConfigContainer


    def vl_pretrain_4gpu_h100_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("Qwen/Qwen3-VL-8B-Instruct")
                              .to_megatron_provider(load_weights=False))
        cfg.model.tensor_model_parallel_size = 4
        cfg.model.freeze_language_model = True
        cfg.model.freeze_vision_model = True
        cfg.model.freeze_vision_projection = False
        cfg.model.seq_length = 4096
        return cfg


    def vl_sft_2gpu_h100_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("Qwen/Qwen3-VL-8B-Instruct")
                              .to_megatron_provider(load_weights=False))
        cfg.model.tensor_model_parallel_size = 2
        cfg.model.freeze_language_model = False
        cfg.model.seq_length = 4096
        return cfg
''')


def test_a_recipe_loading_the_model_by_id_gets_the_tower_from_the_table(tmp_path, monkeypatch):
    from offlint.units import load_unit

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPES)
    frozen = load_unit("recipes.py", "vl_pretrain_4gpu_h100_bf16_config", mcore_version="0.20.0").resolved
    inputs = read_inputs(frozen.get, "vl_pretrain_4gpu_h100_bf16_config")
    assert inputs.training.frozen_lm == VISION and not inputs.unsupported
    assert inputs.model.num_layers == 36 and inputs.parallel.tp == 4
    trained = load_unit("recipes.py", "vl_sft_2gpu_h100_bf16_config", mcore_version="0.20.0").resolved
    why = read_inputs(trained.get, "vl_sft_2gpu_h100_bf16_config").unsupported  # freeze_vision_model left unset
    assert any("freeze_vision_model at its provider's default" in reason for reason in why), why


def test_the_what_if_table_offers_only_what_has_a_verdict():
    """inputs_vlm.read_frozen_lm refuses optimizer offload, recompute beyond core_attn and activation offloading."""
    from offlint.estimate.devices import parse_device
    from offlint.estimate.whatif import what_if

    inputs = Inputs(DENSE, Parallelism(pp=2, world_size=8), FROZEN)
    groups = {(o.group, o.label) for o in what_if(inputs, parse_device("h100-80gb"), 8)}
    assert {g for g, _ in groups} == {"configured", "recompute", "layout"}
    assert {label for g, label in groups if g == "recompute"} == {"none", "selective core_attn"}


@pytest.mark.parametrize("hf_id", ["Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Instruct"])
def test_the_moe_entries_carry_a_tower_whose_output_is_the_language_models_width(hf_id):
    """The mergers' output is scattered into the language model's embeddings (model.py), so out_hidden_size must be
    the language model's hidden size; the tower is the 8B's (torchtitan's presets, hf_models.json sources)."""
    tower, sizes = model_sizes.vision(hf_id), model_sizes.lookup(hf_id)
    assert tower["out_hidden_size"] == sizes["model.hidden_size"] and tower["model_type"] == "qwen3_vl_moe"
    assert {k: v for k, v in tower.items() if k not in ("out_hidden_size", "model_type")} == \
        {k: v for k, v in TOWER_8B.items() if k not in ("out_hidden_size", "model_type")}


def test_frozen_experts_get_no_gradients_either():
    parallel = Parallelism(tp=1, pp=2, ep=4, world_size=8)
    first, last = _estimate(FROZEN, parallel, MOE).stages
    assert first.of("grads") == pytest.approx(4 * sum(frozen_lm.projection_params(VISION).per_rank(parallel)))
    assert last.of("grads") == 0 and _estimate(TRAIN, parallel, MOE).stages[1].of("grads") > 0


@pytest.mark.parametrize("layout", [{}, {"model.pipeline_model_parallel_size": 2,
                                          "model.virtual_pipeline_model_parallel_size": 2}])
@pytest.mark.parametrize("key", ["comm_overlap.overlap_moe_expert_parallel_comm", "model.overlap_moe_expert_parallel_comm"])
def test_the_ep_overlap_schedule_gets_no_verdict_with_or_without_a_pipeline(layout, key):
    """Its combined 1F1B schedule needs build_schedule_plan, which Bridge's Qwen3VLModel does not define."""
    inputs = read_inputs(lookup({**SIZES, **FREEZE, **layout, key: True}), "x_pretrain_config")
    assert inputs.training.frozen_lm is None
    assert any("build_schedule_plan" in why for why in inputs.unsupported), inputs.unsupported
    unset = read_inputs(lookup({**SIZES, **FREEZE, **layout, key: False}), "x_pretrain_config")
    assert unset.training.frozen_lm == VISION and not unset.unsupported


def test_an_unknown_ep_overlap_setting_leaves_the_estimate_unknown():
    values = {**SIZES, **FREEZE, "comm_overlap.overlap_moe_expert_parallel_comm": Unknown("computed")}
    inputs = read_inputs(lookup(values), "x_pretrain_config")
    assert "comm_overlap.overlap_moe_expert_parallel_comm" in inputs.unknown and not inputs.unsupported


GDN = {"model.experimental_attention_variant": "gated_delta_net", "model.linear_attention_freq": 2,
       "model.linear_num_key_heads": 4, "model.linear_num_value_heads": 8, "model.linear_key_head_dim": 64,
       "model.linear_value_head_dim": 64, "model.linear_conv_kernel_dim": 4}


def _frozen(**values):
    return read_inputs(lookup({**SIZES, **FREEZE, **values}), "x_pretrain_config", fp8_transpose=False)


def test_a_frozen_gated_delta_net_keeps_what_a_trained_one_keeps_less_in_proj_and_out_proj_inputs():
    """flash-linear-attention's functions save their tensors whatever requires_grad says; in_proj and out_proj are
    Transformer Engine linears (frozen_lm.FROZEN_GDN_INPUTS). Nothing else is open: one estimate, no bounds."""
    inputs = _frozen(**GDN)
    assert not inputs.unsupported and inputs.complete, (inputs.unsupported, inputs.unknown)
    assert inputs.training.frozen_lm.bound == "" and len(oom.architectures(inputs)) == 1
    m, p, t = inputs.model, inputs.parallel, inputs.training
    frozen = activations.layer_terms(m, p, t, False, gdn=True).terms
    trained = activations.layer_terms(m, p, replace(t, frozen_lm=None), False, gdn=True).terms
    assert set(trained) - set(frozen) == {"gdn_in_proj_input", "gdn_out_proj_input", "fc1_input", "act_output"}
    assert all(frozen[k] == trained[k] for k in frozen)


@pytest.mark.parametrize("values", [{"model.mtp_num_layers": 1}, {"model.attention_output_gate": True},
                                    {"model.num_moe_experts": 8, "model.moe_ffn_hidden_size": 512,
                                     "model.moe_router_topk": 2, "model.moe_shared_expert_intermediate_size": 1024}])
def test_mtp_shared_experts_and_the_output_gate_are_estimated_at_two_bounds(values):
    """At most what trained layers keep, at least that less the frozen linears' inputs and the MTP depth's
    embedding side (frozen_lm.LOWER_BOUND_DROPS): both estimated, the larger shown, a verdict where they agree."""
    inputs = _frozen(**GDN, **values)
    assert not inputs.unsupported and inputs.complete, (inputs.unsupported, inputs.unknown)
    assert inputs.training.frozen_lm.bound is None
    variants = oom.architectures(inputs)
    assert [v.training.frozen_lm.bound for v in variants] == ["upper", "lower"]
    upper, lower = (memory.estimate(v) for v in variants)
    assert upper.peak.total > lower.peak.total
    assert upper.peak.of("weights") == lower.peak.of("weights")
    trained = memory.estimate(variants[0].with_(training=replace(variants[0].training, frozen_lm=None)))

    def layers(result):
        return sum(part.bytes for part in result.peak.parts if part.name == "activations: transformer layers")
    assert layers(lower) <= layers(upper) < layers(trained)  # the upper bound drops the established linears' inputs
    what, labels = oom._open_labels(inputs)
    assert what == oom.FROZEN_KEEPS and "at most" in labels[0] and "at least" in labels[1]
    between = (upper.peak.total + lower.peak.total) / 2
    _, _, why, _ = oom.either_way(inputs, lambda _, r: r.peak.total <= between)
    assert oom.FROZEN_KEEPS in why
    _, _, agreed, note = oom.either_way(inputs, lambda _, r: r.peak.total <= 2 * upper.peak.total)
    assert not agreed and "holds either way" in note
