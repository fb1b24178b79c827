"""Megatron-FSDP in the memory model: what each `data_parallel_sharding_strategy` shards, checked against the
buffer indices real megatron-core (0.16.1, megatron_fsdp) computes for a real GPTModel's parameters, and the
unsharded buffers of optim_grads_params derived from its all-gather and reduce-scatter pipeline rules.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import memory, params
from offlint.estimate.inputs import Inputs, LowPrecision, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

MODEL = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)
BF16 = Training(micro_batch_size=1, global_batch_size=64, distributed_optimizer=True, grads_fp32=True)
# Which buffers each strategy distributes over the data-parallel group (ParamAndGradBuffer's
# _init_each_parameter_group_buffers: model weight, main weight (fp32) and main grad buffers).
DISTRIBUTED = {"no_shard": (False, False, False), "optim": (False, True, False),
               "optim_grads_params": (True, True, True)}


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


def test_bridge_fsdp_settings_are_read():
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "ddp.fsdp_double_buffer": True, "ddp.suggested_communication_unit_size": 800_000_000}
    t = read_inputs(lookup(values), "x_config").training
    assert (t.fsdp, t.fsdp_double_buffer, t.fsdp_unit_size, t.distributed_optimizer) == (
        "optim_grads_params", True, 800_000_000, True)
    assert read_inputs(lookup({}), "x_config").training.fsdp is None


@pytest.mark.parametrize(("extra", "why"), [
    ({"ddp.data_parallel_sharding_strategy": "optim_grads"}, "optim_grads"),
    ({"ddp.num_distributed_optimizer_instances": 2, "ddp.outer_dp_sharding_strategy": "optim_grads_params"},
     "outer_dp_sharding_strategy='optim_grads_params'"),
    ({"ddp.num_distributed_optimizer_instances": 2, "ddp.outer_dp_sharding_strategy": "optim",
      "ddp.data_parallel_sharding_strategy": "optim"}, "NotImplementedError"),
    ({"ddp.megatron_fsdp_version": 2}, "version 2"),
    ({"mixed_precision": "bf16_with_fp8_subchannel_scaling_mixed"}, "blockwise parameters"),
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "nvfp4 parameters"),
    ({"model.fp8": "hybrid", "model.fp8_recipe": "tensorwise"}, "FP8 compute on bf16 weights"),
    ({"mixed_precision": "bf16_with_fp8_current_scaling_mixed", "hopper": True}, "per-tensor FP8 on Hopper"),
    ({"optimizer.optimizer_cpu_offload": True}, "optimizer offload"),
    ({"ddp.megatron_fsdp_main_params_dtype": "torch.bfloat16"}, "main weights other than fp32"),
])
def test_what_fsdp_settings_get_no_verdict(extra, why):
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params", **extra}
    inputs = read_inputs(lookup(values), "x_config", fp8_transpose=values.pop("hopper", False))
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_an_unknown_fsdp_switch_makes_the_estimate_unknown():
    inputs = read_inputs(lookup({"ddp.use_megatron_fsdp": Unknown("computed")}), "x_config")
    assert "ddp.use_megatron_fsdp" in inputs.unknown


def test_fp8_is_still_read_without_fsdp():
    lp = read_inputs(lookup({"mixed_precision": "bf16_with_mxfp8_mixed"}), "x_config").training.low_precision
    assert lp == LowPrecision("mxfp8", params=True)


# Megatron-FSDP with FP8 primary weights (megatron_fsdp/param_and_grad_buffer.py): parameter groups of
# Float8Tensors get a uint8 model weight buffer, MXFP8 groups also a uint8 transpose buffer over the same
# parameters; MXFP8's E8M0 scales stay whole in each parameter (Transformer Engine all-reduces them).
FP8_DATA = {"tensorwise": 1, "delayed": 1, "mxfp8": 2}
FP8_WHOLE = {"tensorwise": 0.0, "delayed": 0.0, "mxfp8": 2 / 32}
GEMM_WEIGHTS = ("linear_qkv.weight", "linear_proj.weight", "linear_fc1.weight", "linear_fc2.weight")


@pytest.mark.parametrize("recipe", sorted(FP8_DATA))
def test_fsdp_fp8_weights_equal_megatron_fsdp_uint8_buffers(recipe, model_parallel):
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.fsdp.src.megatron_fsdp.param_and_grad_buffer import (
        build_data_parallel_buffer_index)
    from test_estimate_params import CASES, _build, _shape

    shape = _shape(CASES["gqa-rmsnorm-swiglu-untied"])
    named = list(_build(shape).named_parameters())
    gemm = [p.shape for n, p in named if n.endswith(GEMM_WEIGHTS)]
    rest = [p.shape for n, p in named if not n.endswith(GEMM_WEIGHTS)]
    world = 8
    config = DistributedDataParallelConfig(use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params")

    def shard(shapes) -> int:
        return build_data_parallel_buffer_index(shapes, 0, world, True, config)[2].size

    whole_gemm = sum(s.numel() for s in gemm)
    expected = shard(gemm) * FP8_DATA[recipe] + whole_gemm * FP8_WHOLE[recipe] + shard(rest) * 2
    if recipe == "delayed":  # the amax history (length 1) of 5 quantizers per GEMM, 4 GEMMs a layer, fp32
        expected += shape.num_layers * 4 * 5 * (1 + 2) * 4
    lp = LowPrecision(recipe, params=True, transpose=False)
    stage = _peak(replace(BF16, fsdp="optim_grads_params", low_precision=lp), Parallelism(world_size=world), shape)
    pad = 3 * world  # each buffer is padded to a multiple of the data-parallel size
    assert stage.of("weights") == pytest.approx(expected, abs=pad)
    # Gradients and optimizer states are those of the bf16 model (the grad buffer has the full element count).
    bf16 = _peak(replace(BF16, fsdp="optim_grads_params"), Parallelism(world_size=world), shape)
    assert (stage.of("grads"), stage.of("optimizer")) == (bf16.of("grads"), bf16.of("optimizer"))


@pytest.mark.parametrize("recipe", sorted(FP8_DATA))
def test_fsdp_fp8_units_are_gathered_at_the_buffers_bytes(recipe):
    """The all-gathered units hold the uint8 buffers' bytes for the GEMM weights, bf16 for the rest; the
    gradient queue is unchanged."""
    lp = LowPrecision(recipe, params=True, transpose=False)
    t = replace(BF16, fsdp="optim_grads_params", fsdp_double_buffer=True, low_precision=lp)
    layer = params.layer(MODEL, 0).total
    norms = 2 * MODEL.hidden_size
    outside = params.total(MODEL) - MODEL.num_layers * layer
    unit = (layer - norms) * FP8_DATA[recipe] + norms * 2
    expected = 2 * unit + outside * 2 + (4 * layer + outside) * 4
    assert _named(_peak(t), "Megatron-FSDP") == pytest.approx(expected)


def test_bridge_fsdp_fp8_recipes_are_read():
    """Bridge's Llama 3 70B FSDP perf recipes: current scaling with FP8 primary weights on Blackwell."""
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "mixed_precision": "bf16_with_fp8_current_scaling_mixed"}
    inputs = read_inputs(lookup(values), "x_config", fp8_transpose=False)
    assert not inputs.unsupported and inputs.training.fsdp == "optim_grads_params"
    assert inputs.training.low_precision.params and inputs.training.low_precision.recipe == "tensorwise"


def test_the_precision_aware_optimizer_keeps_its_moments_on_fsdp_main_weights():
    """megatron-core 2a75ac12 (get_megatron_optimizer) turns FusedAdam's master weights off under Megatron-FSDP:
    the fp32 main weight buffer is the master (no 16-bit remainder trick), and the moments have their own dtype
    on the same shard."""
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "mixed_precision": "bf16_mixed", "optimizer.use_precision_aware_optimizer": True,
              "optimizer.exp_avg_dtype": "torch.bfloat16", "optimizer.exp_avg_sq_dtype": "torch.bfloat16"}
    t = read_inputs(lookup(values), "x_config").training
    assert t.precision_aware and t.fsdp == "optim_grads_params" and t.store_param_remainders
    assert t.params_bytes == 2
    plain = _peak(replace(BF16, fsdp="optim_grads_params"))
    aware = _peak(replace(t, micro_batch_size=BF16.micro_batch_size, global_batch_size=BF16.global_batch_size))
    main = _named(plain, "optimizer: fp32 master") / 4
    assert _named(aware, "optimizer: master") == pytest.approx(4 * main)
    assert _named(aware, "optimizer: moments") == pytest.approx((2 + 2) * main)


def test_an_mxfp8_output_layer_under_fsdp_keeps_its_cached_copy():
    """fp8_output_proj: the LM head stays a bf16 parameter in FSDP's bf16 buffers (sharded like the rest), and
    Transformer Engine caches the MXFP8 copy of its gathered weight, both usages, as without FSDP."""
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "mixed_precision": "bf16_with_mxfp8_mixed", "model.fp8_output_proj": True,
              "model.share_embeddings_and_output_weights": False}
    inputs = read_inputs(lookup(values), "x_config", fp8_transpose=False)
    assert not inputs.unsupported and inputs.training.low_precision.output_layer
    t = replace(inputs.training, micro_batch_size=1, global_batch_size=64)
    with_head, without = _peak(t), _peak(replace(t, low_precision=replace(t.low_precision, output_layer=False)))
    h, v = MODEL.hidden_size, MODEL.vocab_size
    row = (h + -(-(-(-h // 32)) // 4) * 4) / h  # MXFP8: 1 byte and an E8M0 scale per 32, padded to 4
    copy = "MXFP8 output layer weight copy"
    assert _named(with_head, copy) == pytest.approx(2 * row * v * h) and _named(without, copy) == 0
    assert with_head.of("grads") == without.of("grads")


@pytest.mark.parametrize("outer", ["no_shard", "optim"])
def test_hsdp_shards_within_the_inner_group_and_replicates_across_the_outer(outer):
    """num_distributed_optimizer_instances R under Megatron-FSDP (megatron-core 2a75ac12): weights and gradients
    are sharded over the inner group (data-parallel size / R, parallel_state's partial data-parallel group), as
    plain Megatron-FSDP on DP / R ranks shards them; the main weights and the optimizer state too with the outer
    strategy "no_shard", over the whole data-parallel group with "optim" (the HFSDP helper buffers)."""
    values = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params",
              "ddp.num_distributed_optimizer_instances": 4, "ddp.outer_dp_sharding_strategy": outer}
    t = read_inputs(lookup(values), "x_config").training
    assert (t.optimizer_instances, t.fsdp_outer_optim) == (4, outer == "optim")
    fsdp = replace(BF16, fsdp="optim_grads_params")
    hsdp = _peak(replace(fsdp, optimizer_instances=4, fsdp_outer_optim=outer == "optim"), Parallelism(world_size=16))
    inner, whole = _peak(fsdp, Parallelism(world_size=4)), _peak(fsdp, Parallelism(world_size=16))
    assert hsdp.of("weights") == pytest.approx(inner.of("weights"))
    assert hsdp.of("grads") == pytest.approx(inner.of("grads"))
    assert hsdp.of("optimizer") == pytest.approx((whole if outer == "optim" else inner).of("optimizer"))


def test_the_distributed_optimizer_shards_within_its_instance():
    """Without Megatron-FSDP, num_distributed_optimizer_instances R shards the optimizer over DP / R ranks
    (get_megatron_optimizer's intra-instance group); weights and gradient buffers stay whole."""
    one = _peak(BF16, Parallelism(world_size=4))
    four = _peak(replace(BF16, optimizer_instances=4), Parallelism(world_size=16))
    assert four.of("optimizer") == pytest.approx(one.of("optimizer"))
    assert four.of("weights") == one.of("weights") and four.of("grads") == one.of("grads")


def test_instances_that_do_not_divide_the_data_parallel_size_get_no_verdict():
    values = {"ddp.num_distributed_optimizer_instances": 3}
    inputs = read_inputs(lookup(values), "x_8gpu_config")
    assert any("does not divide" in why for why in inputs.unsupported), inputs.unsupported
    assert not read_inputs(lookup({"ddp.num_distributed_optimizer_instances": 4}), "x_8gpu_config").unsupported

