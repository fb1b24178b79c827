"""Hybrid Mamba models: NVFP4 with MTP depths, Megatron-FSDP and fine-grained activation offloading (offlint issue
14). What megatron-core 0.19.2 (and Bridge 067f987's pin 2a75ac12) settles from the code is modelled; the rest is
refused with its reason. docs/estimate.md, "Hybrid Mamba models", has the sources.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations as act
from offlint.estimate import memory, params, precision
from offlint.estimate.inputs import LowPrecision, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import located_lookup

# A small hybrid model of this file's own: Mamba, attention, MLP and MoE layers, and one repeated MTP depth of an
# attention and a MoE layer (the shape of Bridge's Nemotron 3.5 Lightning recipes, scaled down).
_RECIPE = {"model.hidden_size": 512, "model.num_attention_heads": 8, "model.num_query_groups": 4,
           "model.kv_channels": 64, "model.ffn_hidden_size": 1024, "model.vocab_size": 2048,
           "model.seq_length": 1024, "model.hybrid_layer_pattern": "ME*M-EME", "model.mamba_num_heads": 16,
           "model.mamba_head_dim": 64, "model.mamba_num_groups": 4, "model.mamba_state_dim": 64,
           "model.num_moe_experts": 16, "model.moe_ffn_hidden_size": 256, "model.moe_router_topk": 4,
           "model.moe_shared_expert_intermediate_size": 512,
           "model.mtp_num_layers": 2, "model.mtp_hybrid_override_pattern": "*E", "model.mtp_use_repeated_layer": True,
           "train.micro_batch_size": 2, "train.global_batch_size": 64}
_UNSET = object()


_lookup = located_lookup


def _read(**changes):
    return read_inputs(_lookup({k: v for k, v in (_RECIPE | changes).items() if v is not _UNSET}))


_NVFP4 = {"mixed_precision": "bf16_with_nvfp4_mixed"}


# NVFP4 with MTP depths: the depth's layers run FP4 by their index within the depth, eh_proj stays bf16.

def test_nvfp4_with_hybrid_mtp_depths_has_a_verdict():
    inputs = _read(**_NVFP4)
    assert inputs.training.low_precision.recipe == "nvfp4"
    assert inputs.model.hybrid_mtp_pattern == "*E"
    assert inputs.unsupported == []


def test_fp4_layers_of_a_depth_are_counted_from_its_first_layer():
    m = _read().model
    nvfp4 = LowPrecision(recipe="nvfp4")
    assert precision.hybrid_mtp_quantized(m, nvfp4) == [True, True]
    # first_last_layers_bf16 with one layer at each end: the depth's index 0 is bf16, its index 1 FP4 (the
    # decoder's last index, 7, plays no part: the depth counts from 0 again)
    ends = replace(nvfp4, bf16_layers_start=1, bf16_layers_end=1)
    assert precision.hybrid_mtp_quantized(m, ends) == [False, True]
    assert [precision.is_fp8_layer(m, ends, i) for i in (0, 1, 7)] == [False, True, False]
    # FP8 runs the whole depth in its global context, whatever first_last_layers_bf16 says; bf16 runs none
    assert precision.hybrid_mtp_quantized(m, replace(ends, recipe="mxfp8")) == [True, True]
    assert precision.hybrid_mtp_quantized(m, None) == [False, False]


def test_a_depth_under_nvfp4_saves_fp4_layer_inputs_and_a_bf16_eh_proj_input():
    inputs = _read(**_NVFP4)
    m, p, t = inputs.model, inputs.parallel, inputs.training
    depth = act.mtp_depth(m, p, t).terms
    n = act.tokens(m, p, t)
    assert depth["mtp_eh_proj_input"] == 4 * n * m.hidden_size  # 2h wide, bf16
    for i, kind in enumerate("*E"):
        fp4 = act.after_selective_recompute(act.layer_terms(m, p, t, kind == "E", fp8=True, hybrid=kind), t, kind,
                                            fp8=True).terms
        bf16 = act.layer_terms(m, p, t, kind == "E", fp8=False, hybrid=kind).terms
        mine = {k[len(f"mtp_{i}{kind}_"):]: v for k, v in depth.items() if k.startswith(f"mtp_{i}{kind}_")}
        assert mine == fp4
        if kind == "E":  # the experts' fc1 input is saved as the FP4 copy, not bf16
            assert mine["expert_fc1_input"] < bf16["expert_fc1_input"]
    # with the depth's first layer kept in bf16 by first_last_layers_bf16, that layer saves bf16 tensors
    ends = replace(t, low_precision=replace(t.low_precision, bf16_layers_start=1))
    kept = act.mtp_depth(m, p, ends).terms
    assert {k: v for k, v in kept.items() if k.startswith("mtp_0*_")} == {
        f"mtp_0*_{k}": v for k, v in act.layer_terms(m, p, ends, False, fp8=False, hybrid="*").terms.items()}
    assert kept["mtp_0*_qkv_input"] > depth["mtp_0*_qkv_input"]


def test_nvfp4_quantizes_the_depth_layers_weights_but_not_eh_proj():
    m = _read().model
    nvfp4 = LowPrecision(recipe="nvfp4", params=True)
    layers = [precision.gemm_weights(m, kind == "E", kind) for kind in "*E"]
    expected = tuple(sum(layer[i] for layer in layers) for i in range(3))  # one depth: the layer is repeated
    assert precision.mtp_gemm_weights(m, nvfp4) == expected
    h = m.hidden_size
    assert precision.mtp_gemm_weights(m) == (expected[0] + 2 * h * h, expected[1], expected[2])
    assert precision.mtp_gemm_weights(m, replace(nvfp4, bf16_layers_start=1)) == layers[1]
    # in the estimate: the depth's FP4 GEMM weights are stored at FP4 bytes with fp4_param
    inputs = _read(**_NVFP4)
    p, t = inputs.parallel, replace(inputs.training, low_precision=nvfp4)
    stage = params.stages(m, p)[-1]
    count = sum(stage.params.per_rank(p))
    weights = memory._weights(m, p, t, stage, count)[0].bytes
    decoder = sum(memory._gemm_elements(m, p, nvfp4, i) for i in range(m.num_layers))
    depth = expected[0] / p.tp + expected[1] + expected[2] / (p.ep * p.etp)
    quantized = decoder + depth
    per_element = precision.weight_copy_bytes(nvfp4)
    assert weights == pytest.approx((count - quantized) * 2 + quantized * per_element)


# Megatron-FSDP: every hybrid layer is an FSDP unit, the MTP depth's layers too.

_FSDP = {"ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params"}


def test_megatron_fsdp_on_a_hybrid_model_has_a_verdict():
    inputs = _read(**_FSDP)
    assert inputs.training.fsdp == "optim_grads_params"
    assert inputs.unsupported == []


class _LoRA:  # what offlint's reader makes of Bridge's LoRA(...) dataclass: a name and its fields
    name = "LoRA"
    fields = {"target_modules": ["linear_qkv", "linear_proj"], "dim": 8, "alpha": 16, "dropout": 0.0}


def test_lora_on_a_hybrid_model_is_still_refused():
    dense = {"model.hybrid_layer_pattern": "M*M-", "model.num_moe_experts": _UNSET, "model.mtp_num_layers": _UNSET,
             "model.mtp_hybrid_override_pattern": _UNSET, "model.mtp_use_repeated_layer": _UNSET}
    assert _read(**dense).unsupported == []
    inputs = _read(**dense, peft=_LoRA())
    assert inputs.training.peft is not None
    assert any("LoRA on a hybrid Mamba model" in why for why in inputs.unsupported), inputs.unsupported


@pytest.mark.parametrize("repeated", [True, False])
def test_fsdp_units_are_the_decoder_and_depth_layers_and_the_rest_is_outside(repeated):
    inputs = _read(**_FSDP, **{"model.mtp_use_repeated_layer": repeated})
    m, p = inputs.model, inputs.parallel
    t = replace(inputs.training, fsdp_unit_size=10**12, fsdp_double_buffer=True)
    stage = params.stages(m, p)[-1]
    units = [sum(params.layer(m, i).per_rank(p)) for i in range(m.num_layers)]
    units += [sum(params.HYBRID_LAYERS[k](m).per_rank(p)) for k in "*E" * (1 if repeated else 2)]
    h = m.hidden_size
    outside = sum((params.embedding(m) + params.output_layer(m) + params.final_norm(m)).per_rank(p)) + \
        (2 * h * h + 3 * h) * (1 if repeated else 2)  # the depth's eh_proj and its three RMSNorms
    assert sum(stage.params.per_rank(p)) - sum(units) == outside
    unit, n = max(units), len(units)
    grads = memory._grad_bytes(t)
    expected = 2 * unit * t.params_bytes + outside * t.params_bytes + (
        min(n, 10**12 // unit + 2) * unit + outside) * grads
    assert memory._fsdp_buffers(m, p, t, stage) == pytest.approx(expected)


# Activation offloading: fine-grained offloading of the experts' tensors is modelled; the rest is refused.

_OFFLOAD = {"model.fine_grained_activation_offloading": True, "model.offload_modules": ["expert_fc1"]}


def test_fine_grained_expert_offloading_moves_every_decoder_moe_layer_but_the_one_computed():
    inputs = _read(**_OFFLOAD)
    assert inputs.unsupported == []
    m, p, t = inputs.model, inputs.parallel, inputs.training
    stage = params.stages(m, p)[-1]
    stored, host, _ = memory._stage_activations(m, p, t, stage, 1)
    plain, none, _ = memory._stage_activations(m, p, replace(t, fine_grained_offloading=False), stage, 1)
    fc1 = act.layer_terms(m, p, t, True, hybrid="E").terms["expert_fc1_input"]
    moe_layers = m.hybrid_pattern.count("E")
    assert none == 0 and host == pytest.approx((moe_layers - 1) * fc1)
    assert stored == pytest.approx(plain - host)


@pytest.mark.parametrize("changes,reason", [
    ({"model.cpu_offloading": True, "model.cpu_offloading_num_layers": 2, "model.fine_grained_activation_offloading":
      _UNSET, "model.offload_modules": _UNSET}, "opens no CPU-offload context"),
    ({"model.offload_modules": ["expert_fc1", "qkv_linear"]}, "offloading of 'qkv_linear' in a hybrid Mamba model"),
    ({"model.use_transformer_engine_op_fuser": True}, "Fused GroupedMLP is not supported"),
    ({"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": ["moe"]}, "experts CUDA-graphed"),
    ({"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": []}, "experts CUDA-graphed"),
])
def test_what_offloading_does_not_model_is_refused(changes, reason):
    inputs = _read(**(_OFFLOAD | changes))
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


def test_graphs_that_leave_the_experts_out_keep_the_verdict():
    inputs = _read(**_OFFLOAD, **{"model.cuda_graph_impl": "transformer_engine",
                                  "model.cuda_graph_scope": ["attn", "mamba"]})
    assert inputs.unsupported == []


def test_an_unknown_graph_scope_leaves_the_offloading_estimate_unknown():
    inputs = _read(**_OFFLOAD, **{"model.cuda_graph_impl": "transformer_engine",
                                  "model.cuda_graph_scope": Unknown("helper")})
    assert "model.cuda_graph_scope" in inputs.unknown
