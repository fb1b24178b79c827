"""FP8 training and interleaved pipelines with a frozen language model (offlint/estimate/frozen_lm.py, docs/estimate.md "Frozen language
model", FP8): a frozen Transformer Engine linear saves no input in any FP8 recipe, its weights keep the quantized
copies a trained one keeps (both usages: the layer's input needs a gradient), and the vision tower and mergers stay
bf16. Fixtures of our own in the shapes of Bridge's Qwen3-VL perf recipes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint import model_sizes
from offlint.estimate import activations, frozen_lm, memory, precision
from offlint.estimate.inputs import FrozenLM, Inputs, LowPrecision, ModelShape, Parallelism, Training, read_inputs
from tests.estimate_helpers import lookup

TOWER = FrozenLM(6, 256, 512, 4, 3, 16, 2, 2, 576, 768, 2)
LM = ModelShape(num_layers=6, hidden_size=768, ffn_hidden_size=2048, num_attention_heads=6, num_query_groups=2,
                kv_channels=128, vocab_size=16000, seq_length=1024, gated_linear_unit=True, tied_embeddings=False,
                rms_norm=True, add_bias_linear=False, qk_layernorm=True)
LM_MOE = replace(LM, num_moe_experts=4, moe_ffn_hidden_size=384, moe_router_topk=2)
BASE = Training(micro_batch_size=2, global_batch_size=32, distributed_optimizer=True, grads_fp32=False)
CS = LowPrecision("tensorwise", params=True, transpose=False)
MX = LowPrecision("mxfp8", params=True)
DELAYED = LowPrecision("delayed", params=False, transpose=True, amax_history=16)
RECIPES = [CS, MX, DELAYED, LowPrecision("blockwise", params=False)]
PAR = Parallelism(tp=2, pp=2, world_size=8)


def _frozen(lp: LowPrecision | None) -> Training:
    return replace(BASE, frozen_lm=TOWER, low_precision=lp)


def _layer(m: ModelShape, t: Training, moe: bool) -> dict[str, float]:
    return activations.layer_terms(m, Parallelism(tp=2), t, moe, fp8=t.low_precision is not None).terms


@pytest.mark.parametrize("lp", RECIPES, ids=lambda lp: lp.recipe)
@pytest.mark.parametrize("moe", [False, True])
def test_a_frozen_fp8_layer_keeps_the_fp8_layers_tensors_but_no_linear_input(lp, moe):
    m = LM_MOE if moe else LM
    trained = _layer(m, replace(BASE, low_precision=lp), moe)
    frozen = _layer(m, _frozen(lp), moe)
    linears = {"qkv_input"} | ({"expert_fc1_input", "expert_act_output"} if moe else {"fc1_input", "act_output"})
    if lp.recipe == "delayed":  # the output projection's quantized copy of its input: a frozen Linear saves none
        linears.add("proj_input")
    assert set(trained) - set(frozen) == linears
    assert {k: v for k, v in trained.items() if k not in linears} == frozen
    # what stays is what the bf16 frozen layer keeps (norm inputs, attention, activation function, router)
    assert frozen == _layer(m, _frozen(None), moe)


def test_delayed_scaling_adds_nothing_to_a_frozen_layer():
    assert "proj_input" in _layer(LM, replace(BASE, low_precision=DELAYED), False)
    assert "proj_input" not in _layer(LM, _frozen(DELAYED), False)


def _estimate(t: Training, m: ModelShape = LM) -> memory.Estimate:
    return memory.estimate(Inputs(m, PAR, t))


def _part(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


@pytest.mark.parametrize("lp", [CS, MX], ids=lambda lp: lp.recipe)
def test_frozen_fp8_primary_weights_are_the_quantized_copies_in_place_of_bf16(lp):
    bf16, fp8 = _estimate(_frozen(None)).stages, _estimate(_frozen(lp)).stages
    for index, (plain, quantized) in enumerate(zip(bf16, fp8)):
        layers = range(index * 3, index * 3 + 3)
        gemm = sum(sum(precision.gemm_weights(LM, False)[:2]) for _ in layers) / PAR.tp  # none replicated here
        expected = _part(plain, "weights") - gemm * 2 + gemm * precision.weight_copy_bytes(lp)
        assert _part(quantized, "weights") == pytest.approx(expected)
        # the tower and the mergers stay bf16, on the first stage only
        assert _part(quantized, "vision") == _part(plain, "vision")
        assert (_part(quantized, "vision") > 0) == (index == 0)
        # gradients and optimizer states: the mergers' alone, as in bf16
        assert _part(quantized, "gradients") == _part(plain, "gradients")
        assert _part(quantized, "optimizer") == _part(plain, "optimizer")


def test_frozen_bf16_primary_weights_keep_transformer_engines_cached_copy():
    plain, cached = _estimate(_frozen(None)).stages[1], _estimate(_frozen(DELAYED)).stages[1]
    assert _part(cached, "weights (") == _part(plain, "weights (")
    assert _part(cached, "FP8 weight copies") > 0 and _part(cached, "FP8 scaling state") > 0


def test_a_frozen_fp8_moe_model_keeps_less_than_the_same_model_trained():
    frozen = _estimate(_frozen(MX), LM_MOE).stages[1]
    trained = _estimate(replace(BASE, low_precision=MX), LM_MOE).stages[1]
    assert _part(frozen, "activations: transformer layers") < _part(trained, "activations: transformer layers")


SIZES = {"model.num_layers": 6, "model.hidden_size": 768, "model.num_attention_heads": 6, "model.vocab_size": 16000,
         "model.seq_length": 1024}
VISION_CONFIG = {"model_type": "qwen3_vl", "depth": 6, "hidden_size": 256, "intermediate_size": 512, "num_heads": 4,
                 "in_channels": 3, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
                 "num_position_embeddings": 576, "out_hidden_size": 768, "deepstack_visual_indexes": [1, 3]}
FREEZE = {"model.freeze_language_model": True, "model.freeze_vision_model": True,
          "model.freeze_vision_projection": False, "model.vision_config": VISION_CONFIG}


@pytest.mark.parametrize("recipe", ["bf16_with_fp8_current_scaling_mixed", "bf16_with_mxfp8_mixed",
                                    "bf16_with_fp8_delayed_scaling_mixed"])
def test_fp8_recipes_with_a_frozen_language_model_are_read(recipe):
    inputs = read_inputs(lookup({**SIZES, **FREEZE, "mixed_precision": recipe}), "x_pretrain_config",
                         fp8_transpose=False)
    assert inputs.training.frozen_lm == TOWER and inputs.training.low_precision is not None
    assert not inputs.unsupported and inputs.complete


@pytest.mark.parametrize(("values", "why"), [
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "NVFP4"),
    ({"mixed_precision": "bf16_with_mxfp8_mixed", "model.fp8_output_proj": True,
      "model.share_embeddings_and_output_weights": False}, "FP8 output layer"),
    ({"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params"}, "Megatron-FSDP"),
])
def test_what_a_frozen_language_model_still_gets_no_verdict_for(values, why):
    inputs = read_inputs(lookup({**SIZES, **FREEZE, **values}), "x_pretrain_config", fp8_transpose=False)
    assert inputs.training.frozen_lm is None
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_the_qwen3_vl_moe_towers_in_the_size_table_are_modelled_under_fp8():
    entry = model_sizes.vision("Qwen/Qwen3-VL-30B-A3B-Instruct")
    assert entry is not None and entry["model_type"] in ("qwen3_vl", "qwen3_vl_moe")
    sizes = {**model_sizes.lookup("Qwen/Qwen3-VL-30B-A3B-Instruct"), "model.seq_length": 1024}
    inputs = read_inputs(lookup({**sizes, **FREEZE, "model.vision_config": dict(entry),
                                 "mixed_precision": "bf16_with_mxfp8_mixed"}), "x_pretrain_config",
                         fp8_transpose=False)
    assert inputs.training.frozen_lm is not None and inputs.training.low_precision.recipe == "mxfp8"
    assert not inputs.unsupported


# Interleaved pipelines: the first virtual stage (chunk 0 of pipeline rank 0) holds the tower and the mergers.

def test_the_first_virtual_stage_count_on_megatron_cores_documented_pp2_vp2_example():
    """PP2 VP2, 4 micro-batches (model_parallel_config.py's example order, rank 0: chunks 0 0 1 1 0 0 1 1): 4
    warm-up forwards (2 of chunk 0), then forward/backward pairs; backwards run chunk 1 for micro-batches 0 and 1
    first, so chunk 0 reaches 4 after the second steady forward."""
    assert frozen_lm.first_chunk_in_flight(2, 2, 4) == 4
    assert frozen_lm.first_chunk_in_flight(2, 2, 2) == 2  # only two micro-batches: both in flight, no more


@pytest.mark.parametrize(("pp", "vpp"), [(2, 12), (4, 2), (4, 3), (8, 4)])
def test_the_first_virtual_stage_holds_up_to_two_pp_micro_batches(pp, vpp):
    counts = [frozen_lm.first_chunk_in_flight(pp, vpp, n) for n in range(pp, 6 * pp)]
    assert counts == [min(n, 2 * pp) for n in range(pp, 6 * pp)]
    assert frozen_lm.first_chunk_in_flight(pp, vpp, None) == 2 * pp
    # more than the stage's average chunk count per micro-batch, which the layers use
    assert 2 * pp > memory.microbatches_in_flight(Parallelism(pp=pp, vpp=vpp), 0, None)


def test_the_mergers_on_an_interleaved_first_stage_take_the_first_chunks_count():
    parallel = Parallelism(tp=1, pp=2, vpp=3, world_size=4)
    result = memory.estimate(Inputs(LM, parallel, _frozen(None)))
    mergers = frozen_lm.projection_activations(LM, parallel, _frozen(None))
    assert result.num_microbatches == 8  # 32 / (2 x DP 2)
    assert _part(result.stages[0], "activations: vision patch mergers") == pytest.approx(4 * mergers)
    # the layers: warm-up 2(PP-1) + (VPP-1)PP = 6, plus one, over VPP chunks
    assert memory.microbatches_in_flight(parallel, 0, result.num_microbatches) == pytest.approx(7 / 3)


INTERLEAVED = {"model.pipeline_model_parallel_size": 2, "model.virtual_pipeline_model_parallel_size": 3,
               "model.num_layers": 12}


def test_an_interleaved_frozen_language_model_is_read():
    inputs = read_inputs(lookup({**SIZES, **FREEZE, **INTERLEAVED}), "x_pretrain_config")
    assert inputs.training.frozen_lm == TOWER and not inputs.unsupported and inputs.complete


@pytest.mark.parametrize(("values", "why"), [
    ({"comm_overlap.overlap_moe_expert_parallel_comm": True}, "build_schedule_plan"),
    ({"model.overlap_moe_expert_parallel_comm": True}, "build_schedule_plan"),
    ({"model.microbatch_group_size_per_vp_stage": 3}, "microbatch_group_size_per_vp_stage=3"),
])
def test_interleaved_schedules_offlint_does_not_count_get_no_verdict(values, why):
    inputs = read_inputs(lookup({**SIZES, **FREEZE, **INTERLEAVED, **values}), "x_pretrain_config")
    assert inputs.training.frozen_lm is None
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported
