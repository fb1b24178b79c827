"""A relative step-time model: how much slower each memory knob makes a training step, not how fast it is.

Compute time is FLOPs at an assumed fraction of the device's BF16 peak; recompute adds the forward FLOPs it
repeats; pipeline parallelism adds its bubble; tensor parallelism adds its all-reduce/reduce-scatter traffic;
optimizer offloading adds the host round trip and the CPU Adam step; activation offloading adds whatever
host transfer the computation does not hide. The constants are assumptions (named here, not measured) and only
matter as ratios between options of the same configuration.
"""

from __future__ import annotations

from offlint.estimate import activations as act
from offlint.estimate import params
from offlint.estimate.devices import Device
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training
from offlint.estimate.memory import Estimate

MFU = 0.40  # achieved share of the BF16 peak
PCIE_BYTES_PER_S = 25e9  # host <-> device per GPU, each direction
CPU_ADAM_PARAMS_PER_S = 0.5e9  # parameters per second the host's Adam step manages for one GPU's share
NVLINK_BYTES_PER_S = 200e9  # intra-node collective bus bandwidth per GPU
NETWORK_BYTES_PER_S = 25e9  # inter-node bandwidth per GPU
ASSUMED_MICROBATCHES = 8  # per step and pipeline, when the global batch size is unknown


def layer_forward_flops(m: ModelShape, p: Parallelism, t: Training, moe: bool) -> dict[str, float]:
    """Forward FLOPs of one layer for one micro-batch on one GPU, by part (for recompute accounting)."""
    n = act.tokens(m, p, t)
    h, q, kv = m.hidden_size, m.num_attention_heads * m.kv_channels, m.num_query_groups * m.kv_channels
    gate = 3 if m.gated_linear_unit else 2
    out = {
        "linear_qkv_proj": 2 * n * h * (2 * q + 2 * kv) / p.tp,
        "core_attn": 2 * n * m.seq_length * q / p.tp,  # QK^T and AV, causal: half of 4*n*s*q
    }
    if moe:
        ffn = m.moe_ffn_hidden_size or m.ffn_hidden_size
        out["experts"] = 2 * act.expert_tokens(m, p, t) * h * ffn * gate / p.etp
        out["shared"] = 2 * n * h * (m.moe_shared_expert_intermediate_size or 0) * gate / p.tp
        out["router"] = 2 * n * h * (m.num_moe_experts or 0)
    else:
        out["mlp"] = 2 * n * h * m.ffn_hidden_size * gate / p.tp
    return out


def _recomputed_share(parts: dict[str, float], t: Training) -> float:
    if t.recompute_granularity == "full":
        return sum(parts.values())
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.moe_layer_recompute:
        modules.add("moe")
    extra = 0.0
    if "core_attn" in modules:
        extra += parts["core_attn"]
    if "mlp" in modules:
        extra += parts.get("mlp", 0.0)
    if "moe" in modules:
        extra += parts.get("experts", 0.0) + parts.get("shared", 0.0) + parts.get("router", 0.0)
    if "shared_experts" in modules:
        extra += parts.get("shared", 0.0)
    if "moe_act" in modules:
        extra += 0.0  # elementwise: negligible FLOPs
    return extra


def step_seconds(inputs: Inputs, result: Estimate, device: Device) -> float:
    """Modelled seconds per training step on the busiest pipeline stage."""
    m, p, t = inputs.model, inputs.parallel, inputs.training
    rate = device.bf16_tflops * 1e12 * MFU
    nmb = result.num_microbatches or max(ASSUMED_MICROBATCHES, p.pp)
    ranges = params.stage_layer_ranges(m.num_layers, p.pp, p.vpp)
    per_stage = []
    for stage, chunk_ranges in enumerate(ranges):
        flops = 0.0
        for r in chunk_ranges:
            for i in r:
                parts = layer_forward_flops(m, p, t, m.is_moe_layer(i))
                if t.recompute_granularity == "full" and t.recompute_method == "block":
                    recompute = sum(parts.values()) if (i - r.start) < (t.recompute_num_layers or 0) else 0.0
                else:
                    recompute = _recomputed_share(parts, t)
                flops += 3 * sum(parts.values()) + recompute
        if stage == p.pp - 1:
            flops += 3 * 2 * act.tokens(m, p, t) * m.hidden_size * m.vocab_size / p.tp
        per_stage.append(flops / rate)
    micro = max(per_stage)
    bubble = (p.pp - 1) / (p.vpp or 1) * micro
    compute = micro * nmb + bubble
    return compute + _tp_comm(m, p, t, device) * nmb + _optimizer_offload(result, inputs) + \
        _activation_offload(result, micro, nmb)


def _tp_comm(m: ModelShape, p: Parallelism, t: Training, device: Device) -> float:
    if p.tp == 1:
        return 0.0
    bandwidth = NVLINK_BYTES_PER_S if p.tp <= device.gpus_per_node else NETWORK_BYTES_PER_S
    volume = 2 * act.tokens(m, p, t) * m.hidden_size * 2 * (p.tp - 1) / p.tp  # ring, bf16
    layers = m.num_layers / p.pp
    return 4 * volume * layers / bandwidth  # two collectives forward, two backward, per layer


def _optimizer_offload(result: Estimate, inputs: Inputs) -> float:
    t = inputs.training
    if not t.optimizer_cpu_offload or t.optimizer_offload_fraction <= 0:
        return 0.0
    peak = result.peak
    offloaded = peak.host_optimizer_bytes / (16 if not t.precision_aware else 18)  # parameters offloaded
    transfer = offloaded * (4 + 2) / PCIE_BYTES_PER_S  # fp32 grads down, 16-bit params back
    cpu = offloaded / CPU_ADAM_PARAMS_PER_S
    return max(transfer, cpu) if t.overlap_cpu_optimizer_d2h_h2d else transfer + cpu


def _activation_offload(result: Estimate, micro_seconds: float, nmb: int) -> float:
    moved = result.peak.host_activation_bytes / max(1.0, result.peak.microbatches_in_flight)  # per micro-batch
    if not moved:
        return 0.0
    transfer = 2 * moved / PCIE_BYTES_PER_S  # out in the forward pass, back in the backward pass
    return max(0.0, transfer - micro_seconds) * nmb
