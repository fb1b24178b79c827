"""Megatron-FSDP in the memory model: what each `data_parallel_sharding_strategy` shards, checked against the
buffer indices real megatron-core (0.16.1, megatron_fsdp) computes for a real GPTModel's parameters, and the
unsharded buffers of optim_grads_params derived from its all-gather and reduce-scatter pipeline rules.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import memory, params
from offlint.estimate.inputs import Inputs, LowPrecision, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown, Value

MODEL = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)
BF16 = Training(micro_batch_size=1, global_batch_size=64, distributed_optimizer=True, grads_fp32=True)
# Which buffers each strategy distributes over the data-parallel group (ParamAndGradBuffer's
# _init_each_parameter_group_buffers: model weight, main weight (fp32) and main grad buffers).
DISTRIBUTED = {"no_shard": (False, False, False), "optim": (False, True, False),
               "optim_grads_params": (True, True, True)}


@pytest.fixture(scope="module")
def model_parallel():
    """megatron-core's parallel state on CPU (gloo, world size 1), as tests/test_estimate_params.py sets it."""
    pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install '.[conformance]')")
    import socket

    import torch.distributed as dist
    from megatron.core import parallel_state

    started = not dist.is_initialized()
    if started:
        with socket.socket() as probe:  # a free port: other test sessions may hold a fixed one
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    yield
    parallel_state.destroy_model_parallel()
    if started:
        dist.destroy_process_group()


def _peak(training: Training, parallel=Parallelism(world_size=8), model=MODEL) -> memory.StageMemory:
    return memory.estimate(Inputs(model, parallel, training)).peak


def _named(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


@pytest.mark.parametrize("strategy", sorted(DISTRIBUTED))
def test_sharded_state_equals_megatron_fsdp_buffer_indices(strategy, model_parallel):
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.fsdp.src.megatron_fsdp.param_and_grad_buffer import (
        build_data_parallel_buffer_index)
    from test_estimate_params import CASES, _build, _shape

    shape = _shape(CASES["gqa-rmsnorm-swiglu-untied"])
    shapes = [p.shape for p in _build(shape).parameters()]
    world = 8
    config = DistributedDataParallelConfig(use_megatron_fsdp=True, data_parallel_sharding_strategy=strategy)

    def per_rank(distributed: bool) -> int:
        _, bucket, shard = build_data_parallel_buffer_index(shapes, 0, world, distributed, config)
        return shard.size if distributed else bucket.size

    weights, main, grads = (per_rank(d) for d in DISTRIBUTED[strategy])
    stage = _peak(replace(BF16, fsdp=strategy), Parallelism(world_size=world), shape)
    pad = world  # megatron-core pads each bucket to a multiple of the data-parallel size
    assert stage.of("weights") / 2 == pytest.approx(weights, abs=pad)
    assert stage.of("grads") / 4 == pytest.approx(grads, abs=pad)
    assert _named(stage, "optimizer: fp32 master") / 4 == pytest.approx(main, abs=pad)
    # Adam's two moments live on the main weights (the same shard).
    assert _named(stage, "optimizer: moments") / 8 == pytest.approx(main, abs=pad)


def test_only_optim_grads_params_all_gathers_units():
    for strategy in ("no_shard", "optim"):
        assert _named(_peak(replace(BF16, fsdp=strategy)), "Megatron-FSDP") == 0


@pytest.mark.parametrize(("unit_size", "double", "gathered", "reducing"), [
    (None, False, 4, 4),  # default unit 1e9: prefetch up to 5e8 elements, queue up to 1e9 (4 layers here)
    (None, True, 2, 4),  # the double buffer's fixed pool holds two units; the queue is unchanged
])
def test_unsharded_buffers_follow_the_pipelines(unit_size, double, gathered, reducing):
    """Units = transformer layers. Parameters all-gathered: the unit being computed plus those prefetched
    while less than half the communication unit is prefetched (two with the double buffer); gradients: the
    queue trimmed to the communication unit, plus the newest and the one being computed. Parameters outside
    the units (embedding, output layer, final norm) are counted unsharded. All capped at the stage's layers."""
    t = replace(BF16, fsdp="optim_grads_params", fsdp_unit_size=unit_size, fsdp_double_buffer=double)
    layer = params.layer(MODEL, 0).total
    outside = params.total(MODEL) - MODEL.num_layers * layer
    expected = (gathered * layer + outside) * 2 + (reducing * layer + outside) * 4
    assert _named(_peak(t), "Megatron-FSDP") == pytest.approx(expected)


def test_a_small_communication_unit_limits_prefetch_and_queue():
    layer = params.layer(MODEL, 0).total
    t = replace(BF16, fsdp="optim_grads_params", fsdp_unit_size=2 * layer)
    outside = params.total(MODEL) - MODEL.num_layers * layer
    # prefetch: 1 + ceil(layer / layer) = 2 units; queue: 2 * layer // layer + 2 = 4 units (all 4 layers)
    assert _named(_peak(t), "Megatron-FSDP") == pytest.approx((2 * layer + outside) * 2 + (4 * layer + outside) * 4)


def test_the_buffers_are_not_in_the_floor():
    from offlint.estimate import oom

    t = replace(BF16, fsdp="optim_grads_params")
    result = memory.estimate(Inputs(MODEL, Parallelism(world_size=8), t))
    stage = result.peak
    assert oom.floor_bytes(result) == pytest.approx(
        stage.of("weights") + stage.of("grads") + stage.of("optimizer") + 0.75 * stage.of("activations"))
    assert stage.of("transient") > 0


def _lookup(values: dict):
    def get(key: str) -> Value:
        if key not in values:
            return Value(key, "default", None)
        value = values[key]
        return Value(key, "unknown" if isinstance(value, Unknown) else "known", value)
    return get


def test_bridge_fsdp_settings_are_read():
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "ddp.fsdp_double_buffer": True, "ddp.suggested_communication_unit_size": 800_000_000}
    t = read_inputs(_lookup(values), "x_config").training
    assert (t.fsdp, t.fsdp_double_buffer, t.fsdp_unit_size, t.distributed_optimizer) == (
        "optim_grads_params", True, 800_000_000, True)
    assert read_inputs(_lookup({}), "x_config").training.fsdp is None


@pytest.mark.parametrize(("extra", "why"), [
    ({"ddp.data_parallel_sharding_strategy": "optim_grads"}, "optim_grads"),
    ({"ddp.num_distributed_optimizer_instances": 2}, "HSDP"),
    ({"ddp.megatron_fsdp_version": 2}, "version 2"),
    ({"mixed_precision": "bf16_with_mxfp8_mixed"}, "FP8"),
    ({"optimizer.use_precision_aware_optimizer": True}, "precision-aware"),
])
def test_what_fsdp_settings_get_no_verdict(extra, why):
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params", **extra}
    inputs = read_inputs(_lookup(values), "x_config", fp8_transpose=False)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_an_unknown_fsdp_switch_makes_the_estimate_unknown():
    inputs = read_inputs(_lookup({"ddp.use_megatron_fsdp": Unknown("computed")}), "x_config")
    assert "ddp.use_megatron_fsdp" in inputs.unknown


def test_fp8_is_still_read_without_fsdp():
    lp = read_inputs(_lookup({"mixed_precision": "bf16_with_mxfp8_mixed"}), "x_config").training.low_precision
    assert lp == LowPrecision("mxfp8", params=True)
