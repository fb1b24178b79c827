"""A VLM whose language model trains (inputs.TrainedVLM, activations.trained_tower_activations): Bridge's Qwen3-VL
and Qwen3.5-VL recipes with freeze_language_model=False, the tower trained or frozen. The expected figures are
worked out here from the tower's sizes (fixtures of our own, in Bridge's shapes)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from offlint.estimate import activations, frozen_lm, memory, oom
from offlint.estimate.inputs import FrozenLM, Inputs, Parallelism, TrainedVLM, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import TOWER, TRAINS, VLM_SIZES, lookup, vlm_dense, vlm_train

SMALL = FrozenLM(3, 64, 96, 4, 3, 4, 2, 2, 16, 128, 0)
SIZES = VLM_SIZES
DENSE = vlm_dense()
TRAIN = vlm_train()


def _read(**values):
    return read_inputs(lookup({**SIZES, **TRAINS, **values}), "x_pretrain_config")


def test_the_flags_and_the_tower_are_read():
    inputs = _read()
    assert inputs.training.vlm == TrainedVLM(SMALL, tower_trained=True) and inputs.training.frozen_lm is None
    assert not inputs.unsupported and inputs.complete
    frozen_tower = _read(**{"model.freeze_vision_model": True}).training.vlm
    assert frozen_tower == TrainedVLM(SMALL, tower_trained=False)


@pytest.mark.parametrize(("values", "why"), [
    ({"model.freeze_vision_projection": True}, "freeze_vision_projection=True"),
    ({"model.vision_config": {"model_type": "qwen3_5", "depth": 27, "hidden_size": 1152}}, "cannot size"),
    ({"model.vision_config": {**TOWER, "model_type": "qwen2_5_vl"}}, "cannot size"),
    ({"model.cpu_offloading": True, "model.cpu_offloading_num_layers": 1}, "offloading"),
    ({"comm_overlap.overlap_moe_expert_parallel_comm": True}, "build_schedule_plan"),
    # vision CUDA graphs are modelled for a trained tower (tests/test_estimate_vision_graphs.py), not a frozen one
    ({"model.vision_cuda_graph_impl": "transformer_engine", "model.freeze_vision_model": True},
     "a frozen tower and vision CUDA graphs"),
])
def test_what_gets_no_verdict(values, why):
    inputs = _read(**values)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported
    assert inputs.training.vlm is None


def test_an_unset_freeze_flag_gets_no_verdict():
    """Bridge's Qwen3-VL MoE provider freezes the language model and the tower by default, the others do not."""
    values = {k: v for k, v in TRAINS.items() if k != "model.freeze_vision_model"}
    inputs = read_inputs(lookup({**SIZES, **values}), "x_pretrain_config")
    assert any("freeze_vision_model at its provider's default" in why for why in inputs.unsupported)
    assert inputs.training.vlm is None and inputs.training.frozen_lm is None


def test_an_unknown_freeze_flag_leaves_the_estimate_unknown():
    inputs = _read(**{"model.freeze_vision_model": Unknown("computed")})
    assert "model.freeze_vision_model" in inputs.unknown and not inputs.complete and not inputs.unsupported


def _estimate(vlm: TrainedVLM | None, parallel=Parallelism(pp=2, world_size=8), training=TRAIN) -> memory.Estimate:
    return memory.estimate(Inputs(DENSE, parallel, replace(training, vlm=vlm)))


def _named(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


@pytest.mark.parametrize("tower_trained", [True, False])
def test_the_first_stage_holds_the_tower_and_trains_what_is_not_frozen(tower_trained):
    parallel = Parallelism(tp=2, pp=2, world_size=8)
    base = _estimate(None, parallel).stages
    first, last = _estimate(TrainedVLM(SMALL, tower_trained, "bound"), parallel).stages
    tower = sum(frozen_lm.tower_params(SMALL).per_rank(parallel))
    mergers = sum(frozen_lm.projection_params(SMALL).per_rank(parallel))
    trained = mergers + (tower if tower_trained else 0)
    dp = parallel.data_parallel(8)
    assert _named(first, "vision tower") == pytest.approx(2 * tower)
    assert _named(first, "vision patch mergers, trained (") == pytest.approx(2 * mergers)
    assert first.of("grads") - base[0].of("grads") == pytest.approx(4 * trained)  # fp32 main grads
    assert first.of("optimizer") - base[0].of("optimizer") == pytest.approx(12 * trained / dp)
    assert last.of("grads") == pytest.approx(base[1].of("grads")) and _named(last, "vision") == 0
    # the language model trains as without the tower
    assert _named(first, "activations: transformer layers") == _named(base[0], "activations: transformer layers")


def test_a_trained_vit_layer_keeps_its_norms_linears_attention_and_gelu_inputs():
    """Per patch and layer at TP t, bf16: both LayerNorms' inputs and the normed QKV and fc1 inputs (4h, whole:
    no sequence parallelism), flash attention's q, k, v and output (4h / t), GELU's input and output (2f / t);
    and the Conv3d patch embedding's input, the pixels."""
    m, t = DENSE, TRAIN
    for tp in (1, 2):
        patches = t.micro_batch_size * m.seq_length * 4
        h, f = SMALL.hidden_size, SMALL.intermediate_size
        layer = 2 * patches * (4 * h + 4 * h / tp + 2 * f / tp)
        pixels = 2 * patches * 3 * 2 * 4 * 4
        kept, rebuilt = activations.trained_tower_activations(SMALL, m, Parallelism(tp=tp), t)
        assert kept == pytest.approx(SMALL.depth * layer + pixels) and rebuilt == 0


@pytest.mark.parametrize(("method", "k"), [("uniform", 1), ("uniform", 2), ("block", 2)])
def test_full_recompute_reaches_the_tower(method, k):
    """get_vision_model_config copies the language model's recompute_granularity, method and layer count."""
    t = replace(TRAIN, recompute_granularity="full", recompute_method=method, recompute_num_layers=k)
    patches = t.micro_batch_size * DENSE.seq_length * 4
    h = SMALL.hidden_size
    layer = activations.trained_tower_activations(SMALL, DENSE, Parallelism(), TRAIN)[0] / SMALL.depth
    pixels = 2 * patches * 96
    layer -= pixels / SMALL.depth
    kept, rebuilt = activations.trained_tower_activations(SMALL, DENSE, Parallelism(), t)
    checkpoint = 2 * patches * h
    if method == "uniform":
        assert kept == pytest.approx(checkpoint * math.ceil(SMALL.depth / k) + pixels)
        assert rebuilt == pytest.approx(layer * k)
    else:
        assert kept == pytest.approx(checkpoint * k + layer * (SMALL.depth - k) + pixels)
        assert rebuilt == pytest.approx(layer)


def test_the_image_patches_are_open_and_a_verdict_needs_both_ends_to_agree():
    inputs = Inputs(DENSE, Parallelism(world_size=8), replace(TRAIN, vlm=TrainedVLM(SMALL, True)))
    variants = oom.architectures(inputs)
    assert [v.training.vlm.patches for v in variants] == ["bound", "none"]
    bound, none = (memory.estimate(v) for v in variants)
    assert _named(bound.peak, "activations: vision") > 0 and _named(none.peak, "activations: vision") == 0
    assert none.peak.of("weights") == bound.peak.of("weights")  # the tower is there either way
    between = (bound.peak.total + none.peak.total) / 2
    _, _, why, _ = oom.either_way(inputs, lambda _, r: r.peak.total <= between)
    assert "image patches" in why
    _, _, agreed, note = oom.either_way(inputs, lambda _, r: r.peak.total <= 2 * bound.peak.total)
    assert not agreed and "image patches" in note


def test_a_gated_delta_net_models_floor_counts_its_activations_as_any_models():
    """Bridge's measured 8-GPU GB200 runs of Qwen3.5-35B-A3B agree with the estimate (docs/estimate.md), so a
    gated-delta-net model's floor is the model state plus ACTIVATION_FLOOR of its activations, as for any model."""
    gdn = replace(DENSE, linear_attention_freq=4, gdn_key_heads=2, gdn_value_heads=4, gdn_key_head_dim=32,
                  gdn_value_head_dim=32, gdn_conv_kernel=4)
    result = memory.estimate(Inputs(gdn, Parallelism(world_size=8), TRAIN))
    assert oom.activation_floor(result) == oom.ACTIVATION_FLOOR
    assert oom.floor_bytes(result) == pytest.approx(max(
        oom.state_bytes(s) + oom.ACTIVATION_FLOOR * s.of("activations") for s in result.stages))
    assert oom.floor_bytes(result) > max(oom.state_bytes(s) for s in result.stages)


@pytest.mark.parametrize("hf_id", ["Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B",
                                   "Qwen/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-397B-A17B"])
def test_the_qwen35_entries_carry_one_tower_whose_output_is_the_language_models_width(hf_id):
    """The family's one large ViT (hf_models.json sources), no deepstack; the mergers' output is scattered into
    the language model's embeddings, so out_hidden_size is the language model's hidden size."""
    from offlint import model_sizes

    tower, sizes = model_sizes.vision(hf_id), model_sizes.lookup(hf_id)
    assert tower["out_hidden_size"] == sizes["model.hidden_size"]
    assert {k: v for k, v in tower.items() if k not in ("out_hidden_size", "model_type")} == {
        "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
        "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 2304,
        "deepstack_visual_indexes": []}


def test_the_image_patches_get_one_verdict_each_where_they_differ(monkeypatch):
    """Between the two ends `offlint estimate` gives a verdict for no image and one for every token a vision token,
    naming the fact (report.depends), in text and JSON; estimate_coverage counts it as a conditional verdict."""
    import sys
    from pathlib import Path

    from offlint.estimate import report
    from offlint.estimate.devices import GIB, parse_device

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import estimate_coverage

    inputs = _read(**{"model.num_layers": 4})
    what, alts = oom.alternatives(inputs, 8)
    assert what == oom.IMAGE_PATCHES and [a.inputs.training.vlm.patches for a in alts] == ["bound", "none"]
    bound, none = (a.result.peak.total / GIB for a in alts)
    assert bound > none
    between = parse_device(f"{(bound + none) / 2 + 1.0:.4f}")
    depending = report.depends(what, alts, between)
    assert depending is not None and depending[0] == oom.IMAGE_PATCHES
    cases = [(c, state) for c, state, _ in depending[1]]
    assert [c for c, _ in cases] == ["with every token a vision token (the most image patches)",
                                     "with no image patches"]
    assert cases[0][1] == "does not fit" and cases[1][1] in ("fits", "at risk"), cases
    from offlint.estimate.whatif import what_if

    options = what_if(alts[0].inputs, between, 8)
    text = report.render_text("x", alts[0].result, between, options, [], depending=depending)
    assert "verdict: depends on the image patches a micro-batch holds" in text
    assert f"  with no image patches: {cases[1][1]}: " in text
    out = report.render_json("x", alts[0].result, between, options, [], depending=depending)
    assert out["verdict_state"] == "depends" and [c["verdict_state"] for c in out["cases"]] == [s for _, s in cases]
    assert report.depends(what, alts, parse_device(f"{2 * bound:.4f}")) is None  # both ends agree: one verdict

    class Resolved:
        get = staticmethod(lookup({**SIZES, **TRAINS, "model.num_layers": 4, "train.global_batch_size": 16}))

    for capacity, why in ((between, "conditional verdict: on the image patches a micro-batch holds"),
                          (parse_device(f"{2 * bound:.4f}"), "")):
        monkeypatch.setattr(estimate_coverage, "device_for", lambda *_, c=capacity: c)
        assert estimate_coverage.reason(Resolved, "x_pretrain_config") == why
