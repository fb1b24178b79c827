"""A trained vision tower under Transformer Engine vision CUDA graphs (inputs_vlm._read_vision_graphs,
frozen_lm.graph_parts, docs/estimate.md "Vision CUDA graphs"): every micro-batch's patches padded to the graphs'
length, the graphs' static buffers and pool reserve, and the refusals kept where the graphs are not modelled. The
recipes and sizes are fixtures of our own, written the way Bridge writes its Qwen3.5-VL recipes."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from offlint.estimate import activations, frozen_lm, memory, oom
from offlint.estimate.devices import GIB, parse_device
from offlint.estimate.inputs import FrozenLM, Inputs, Parallelism, TrainedVLM, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import VLM_SIZES, lookup, recipe_inputs, vlm_dense, vlm_train, write_qwen3_vl_step

TOWER = {"model_type": "qwen3_5_moe", "depth": 3, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4,
         "in_channels": 3, "patch_size": 4, "temporal_patch_size": 2, "spatial_merge_size": 2,
         "num_position_embeddings": 64, "out_hidden_size": 128, "deepstack_visual_indexes": []}
SMALL = FrozenLM(3, 64, 96, 4, 3, 4, 2, 2, 64, 128, 0)
SIZES = VLM_SIZES
GRAPHED = {"model.freeze_language_model": False, "model.freeze_vision_model": False,
           "model.freeze_vision_projection": False, "model.vision_config": TOWER,
           "model.vision_cuda_graph_impl": "transformer_engine", "model.vision_cuda_graph_scope": ["attn", "mlp"],
           "model.max_vision_cuda_graph_seq_length": 48, "train.global_batch_size": 16}
DENSE = vlm_dense()
TRAIN = vlm_train()


def _read(**values):
    return read_inputs(lookup({**SIZES, **GRAPHED, **values}), "x_pretrain_config")


def test_the_padded_length_is_read_and_the_backward_reserve_is_left_open():
    inputs = _read()
    assert not inputs.unsupported and inputs.complete, inputs.unsupported
    assert inputs.training.vlm == TrainedVLM(SMALL, True, graph_patches=48, graph_bound=None)
    # no max length: Bridge's tower pads to num_position_embeddings // spatial_merge_size**2 (vision_model.py:294)
    assert _read(**{"model.max_vision_cuda_graph_seq_length": None}).training.vlm.graph_patches == 16
    # no scope: every ViT layer is graphed whole, as with ["attn", "mlp"]
    assert _read(**{"model.vision_cuda_graph_scope": []}).training.vlm.graph_patches == 48
    # without vision graphs nothing changes
    plain = _read(**{"model.vision_cuda_graph_impl": "none"}).training.vlm
    assert plain == TrainedVLM(SMALL, True) and plain.graph_patches is None and plain.graph_bound == ""


@pytest.mark.parametrize(("values", "why"), [
    ({"model.freeze_vision_model": True}, "a frozen tower and vision CUDA graphs"),
    ({"model.vision_cuda_graph_impl": "local"}, "vision_cuda_graph_impl='local'"),
    ({"model.vision_cuda_graph_scope": ["attn"]}, "vision_cuda_graph_scope=['attn']"),
    ({"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": 1},
     "recompute (full) and vision CUDA graphs"),
    ({"model.recompute_granularity": "selective"}, "recompute (selective) and vision CUDA graphs"),
    ({"model.pipeline_model_parallel_size": 2, "model.virtual_pipeline_model_parallel_size": 2},
     "an interleaved pipeline and vision CUDA graphs"),
    ({"model.pipeline_model_parallel_size": 2, "train.global_batch_size": None}, "unknown global batch size"),
    ({"model.max_vision_cuda_graph_seq_length": "784"}, "max_vision_cuda_graph_seq_length='784'"),
    ({"model.vision_dp_when_cp": True}, "vision_dp_when_cp=True"),
])
def test_what_the_graphs_do_not_model_gets_no_verdict(values, why):
    inputs = _read(**values)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported
    assert inputs.training.vlm is None


@pytest.mark.parametrize("key", ["model.max_vision_cuda_graph_seq_length", "model.vision_cuda_graph_scope",
                                 "model.vision_cuda_graph_impl"])
def test_an_unknown_graph_setting_leaves_the_estimate_unknown(key):
    inputs = _read(**{key: Unknown("computed")})
    assert key in inputs.unknown and not inputs.complete and not inputs.unsupported
    assert inputs.training.vlm is None


def test_a_frozen_language_model_with_vision_graphs_stays_refused():
    inputs = _read(**{"model.freeze_language_model": True, "model.freeze_vision_model": True})
    assert any("vision_cuda_graph_impl='transformer_engine' (not modelled)" in why for why in inputs.unsupported)
    assert inputs.training.frozen_lm is None and inputs.training.vlm is None


def _graphed(patches="bound", bound="lower", padded=48) -> TrainedVLM:
    return TrainedVLM(SMALL, True, patches=patches, graph_patches=padded, graph_bound=bound)


def _estimate(vlm, parallel=Parallelism(pp=2, world_size=8), training=TRAIN, model=DENSE) -> memory.Estimate:
    return memory.estimate(Inputs(model, parallel, replace(training, vlm=vlm)))


def _named(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


def test_the_tower_runs_at_the_padded_length_whatever_the_sequence():
    """Per micro-batch the tower holds its P padded patches (one sequence, batch 1), not micro-batch x
    seq_length x merge**2 patches; the mergers at most P / merge**2 tokens."""
    p = Parallelism(pp=2, world_size=8)
    h, f, P = SMALL.hidden_size, SMALL.intermediate_size, 48
    layer = 2 * P * (4 * h + 4 * h + 2 * f)  # bf16: norms' and normed inputs, q/k/v/out, GELU in and out (TP1)
    pixels = 2 * P * 3 * 2 * 4 * 4
    assert activations.trained_tower_layer(SMALL, DENSE, p, TRAIN, P) == pytest.approx(layer)
    assert activations.trained_tower_activations(SMALL, DENSE, p, TRAIN, P) == pytest.approx(
        (SMALL.depth * layer + pixels, 0.0))
    longer = replace(DENSE, seq_length=4096)
    first = _estimate(_graphed(), p).stages[0]
    assert _named(first, "activations: vision tower") == pytest.approx(2 * (SMALL.depth * layer + pixels))
    assert _named(_estimate(_graphed(), p, model=longer).stages[0], "activations: vision tower") == \
        _named(first, "activations: vision tower")
    tokens = P / 4
    merged = h * 4
    mergers = 2 * tokens * merged * 2 + 2 * tokens * merged * 2 + 8 * P  # norm, fc1, GELU and fc2 inputs; stats
    assert _named(first, "activations: vision patch mergers") == pytest.approx(2 * mergers)
    ungraphed = _estimate(TrainedVLM(SMALL, True, "bound"), p).stages[0]
    assert _named(ungraphed, "activations: vision tower") > 10 * _named(first, "activations: vision tower")


def test_the_graphs_keep_their_static_buffers_and_a_backward_reserve():
    """Beyond eager: each layer's static output per micro-batch in flight, the bool masks of the kept sample
    inputs and one static grad output, and the pool's room for one layer's backward: two layers' static grad
    inputs (input and weight gradients, bf16) at least, plus a fp32 gradient of every saved tensor at most."""
    p = Parallelism(pp=2, world_size=8)
    h, P, held, depth = SMALL.hidden_size, 48, 2, SMALL.depth
    layer_weights = sum(frozen_lm._layer_params(SMALL).per_rank(p))
    saved = activations.trained_tower_layer(SMALL, DENSE, p, TRAIN, P)
    lower, upper = (_estimate(_graphed(bound=b), p).stages[0] for b in ("lower", "upper"))
    assert _named(lower, "vision CUDA graphs: static outputs") == pytest.approx(depth * held * 2 * P * h)
    assert _named(lower, "vision CUDA graphs: static attention masks") == pytest.approx(
        depth * held * P * P + 2 * P * h)
    assert _named(lower, "vision CUDA graphs: pool reserve") == pytest.approx(2 * (2 * layer_weights + 2 * P * h))
    assert _named(upper, "vision CUDA graphs: pool reserve") - _named(lower, "vision CUDA graphs: pool reserve") \
        == pytest.approx(2 * saved)
    # no pipeline: one graph per layer, one micro-batch in flight
    alone = _estimate(_graphed(), Parallelism(world_size=8)).stages[0]
    assert _named(alone, "vision CUDA graphs: static outputs") == pytest.approx(depth * 2 * P * h)
    # the last stage holds no tower and no graphs
    assert _named(_estimate(_graphed(), p).stages[1], "vision") == 0


def test_without_images_the_graphs_stay_reserved():
    """A micro-batch without images skips the tower, but the graphs were captured with their own sample inputs:
    their pool (the layers' saved tensors and static outputs) and inputs stay; only the mergers and the pixels go."""
    p = Parallelism(pp=2, world_size=8)
    images, none = (_estimate(_graphed(patches=n), p).stages[0] for n in ("bound", "none"))
    pixels = 2 * 2 * 48 * 3 * 2 * 4 * 4  # held x bf16 pixels of P patches
    assert _named(none, "activations: vision patch mergers") == 0
    assert _named(images, "activations: vision tower") - _named(none, "activations: vision tower") == \
        pytest.approx(pixels)
    assert _named(none, "vision CUDA graphs") == _named(images, "vision CUDA graphs") > 0
    assert none.total < images.total


def test_the_capture_counts_where_every_micro_batchs_sample_inputs_outweigh_the_activations():
    """VisionTECudaGraphHelper allocates one sample input per micro-batch and layer before Transformer Engine reuses
    them: with a pipeline and many micro-batches that moment can exceed the steps' activations."""
    p = Parallelism(pp=2, world_size=8)
    few = _estimate(_graphed(), p).stages[0]
    assert _named(few, "vision CUDA graph capture") == 0
    many = replace(TRAIN, micro_batch_size=1, global_batch_size=4 * 2 ** 16)
    nmb = many.global_batch_size // (1 * p.data_parallel(8))
    big = _estimate(_graphed(), p, training=many).stages[0]
    capture = nmb * SMALL.depth * (2 * 48 * 64 + 48 * 48)
    assert capture == frozen_lm.capture_inputs(SMALL, 48, nmb)
    assert _named(big, "vision CUDA graph capture") == pytest.approx(capture - big.of("activations"))


def test_the_open_facts_give_a_verdict_where_they_agree_and_one_per_case_where_not():
    inputs = Inputs(DENSE, Parallelism(pp=2, world_size=8), replace(TRAIN, vlm=TrainedVLM(
        SMALL, True, graph_patches=48, graph_bound=None)))
    variants = oom.architectures(inputs)
    assert [(v.training.vlm.patches, v.training.vlm.graph_bound) for v in variants] == [
        ("bound", "upper"), ("bound", "lower"), ("none", "upper"), ("none", "lower")]
    what, labels = oom._open_labels(inputs)
    assert oom.IMAGE_PATCHES in what and oom.GRAPH_BACKWARD in what
    assert labels[0].startswith("with images (the tower padded to 48 patches for its CUDA graphs)")
    totals = [memory.estimate(v).peak.total for v in variants]
    assert totals[0] > totals[1] and totals[0] == max(totals)
    _, _, why, note = oom.either_way(inputs, lambda _, r: r.peak.total <= 2 * totals[0])
    assert not why and oom.GRAPH_BACKWARD in note
    split = (totals[0] + totals[1]) / 2  # between the two bounds of the padded tower
    _, _, why, _ = oom.either_way(inputs, lambda _, r: r.peak.total <= split)
    assert oom.GRAPH_BACKWARD in why


RECIPES = textwrap.dedent('''
    import torch
    from megatron.bridge import AutoBridge
    from megatron.bridge.training.config import ConfigContainer


    def _vl_base(hf_path):
        cfg = ConfigContainer()
        cfg.model = AutoBridge.from_hf_pretrained(hf_path).to_megatron_provider(load_weights=False)
        cfg.model.freeze_language_model = False
        cfg.model.freeze_vision_model = False
        cfg.model.freeze_vision_projection = False
        cfg.model.seq_length = 2048
        cfg.train.micro_batch_size = 1
        cfg.train.global_batch_size = 128
        cfg.mixed_precision = "bf16_mixed"
        cfg.ddp.use_distributed_optimizer = True
        cfg.optimizer.use_distributed_optimizer = True
        return cfg


    def _graph_the_tower(cfg, length):
        cfg.model.tensor_model_parallel_size = 1
        cfg.model.pipeline_model_parallel_size = 2
        cfg.model.pipeline_dtype = torch.bfloat16
        cfg.model.expert_model_parallel_size = 8
        cfg.model.recompute_granularity = None
        cfg.model.vision_cuda_graph_impl = "transformer_engine"
        cfg.model.vision_cuda_graph_scope = ["attn", "mlp"]
        cfg.model.max_vision_cuda_graph_seq_length = length


    def tower_graphs_pretrain_16gpu_h100_bf16_config() -> ConfigContainer:
        cfg = _vl_base("Qwen/Qwen3.5-35B-A3B")
        _graph_the_tower(cfg, 1024)
        return cfg


    def tower_graphs_unknown_length_16gpu_h100_bf16_config() -> ConfigContainer:
        cfg = _vl_base("Qwen/Qwen3.5-35B-A3B")
        _graph_the_tower(cfg, padded_length())
        return cfg


    def frozen_tower_graphs_16gpu_h100_bf16_config() -> ConfigContainer:
        cfg = _vl_base("Qwen/Qwen3.5-35B-A3B")
        _graph_the_tower(cfg, 1024)
        cfg.model.freeze_vision_model = True
        return cfg
''')


@pytest.fixture
def units(tmp_path, monkeypatch):
    write_qwen3_vl_step(tmp_path)  # (Bridge's step pads these PP2 EP8 micro-batches to seq_length)
    return recipe_inputs(tmp_path, monkeypatch, RECIPES)


def test_a_recipe_that_graphs_its_tower_gets_a_verdict(units):
    """A Qwen3.5-VL 35B-A3B recipe in Bridge's shape (PP2 EP8 on 16 H100s, the tower graphed at 1024 patches):
    every open case fits an H100 here, so the verdict holds either way."""
    inputs = units("tower_graphs_pretrain_16gpu_h100_bf16_config")
    assert not inputs.unsupported and not inputs.unknown, (inputs.unsupported, inputs.unknown)
    vlm = inputs.training.vlm
    assert (vlm.graph_patches, vlm.graph_bound, vlm.tower_trained, vlm.tower.depth) == (1024, None, True, 27)
    what, alts = oom.alternatives(inputs, 16)
    assert len(alts) == 4 and oom.GRAPH_BACKWARD in what
    h100 = parse_device("h100-80gb")
    first = alts[0].result.stages[0]
    assert _named(first, "activations: vision tower, trained (1024 patches") > 0
    assert 1.0 * GIB < _named(first, "activations: vision tower") < 3.0 * GIB  # 27 layers at 1024 patches, 2 held
    assert all(a.result.peak.total <= h100.usable_bytes for a in alts)
    _, _, why, note = oom.judged(inputs, what, alts, lambda _, r: oom.oom_verdict(r, h100))
    assert not why and "the verdict holds either way" in note


def test_a_recipe_whose_length_or_tower_is_not_modelled_gets_none(units):
    unknown = units("tower_graphs_unknown_length_16gpu_h100_bf16_config")
    assert "model.max_vision_cuda_graph_seq_length" in unknown.unknown and unknown.training.vlm is None
    frozen = units("frozen_tower_graphs_16gpu_h100_bf16_config")
    assert any("a frozen tower and vision CUDA graphs" in why for why in frozen.unsupported)
