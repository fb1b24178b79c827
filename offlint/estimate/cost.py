"""A step-time model: seconds per training step on the busiest pipeline stage, to rank memory knobs by cost.

Per layer and micro-batch, time is the sum of named parts: GEMMs at an efficiency that grows with the rows a GEMM
has (the batch shape: tokens per micro-batch, or tokens per expert for routed experts), flash attention at its own
efficiency, memory-bound element-wise work at HBM bandwidth, a fixed per-layer launch cost, the tensor-parallel
and expert-parallel collectives, and for MoE layers a host overhead that CUDA graphs of the router shrink. A
step is the pipeline's micro-batches plus its bubble, then what is not hidden of the data-parallel gradient
reduce-scatter and parameter all-gather, the optimizer step, and with optimizer offloading the PCIe copies and
the host's Adam step. Recompute adds the named parts it replays. Every constant, its public source and the
measured ratios this model reproduces are in docs/estimate.md ("Step time"); tests/test_estimate_calibration.py
recomputes that table. The result ranks options of one configuration; absolute seconds are approximate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offlint.estimate import activations, params
from offlint.estimate.devices import Device
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training
from offlint.estimate.memory import Estimate

# Compute (docs/estimate.md, "Step time: constants").
GEMM_EFFICIENCY = 0.65  # share of the dense peak a large GEMM reaches in training (fit: Qwen3-8B card)
GEMM_HALF_ROWS = 128  # rows (tokens) at which a GEMM reaches half of GEMM_EFFICIENCY
ATTENTION_EFFICIENCY = 0.45  # flash attention, forward and backward together
# Unfused attention (megatron-core's DotProductAttention, torch path: bf16, softmax in fp32, dropout): bytes each
# forward step moves per s x s score element: baddbmm writes the 16-bit scores (2), the fp32 cast (2 + 4), the
# in-place mask (4 + 4 + 1), softmax (4 + 4), the cast back (4 + 2), dropout (2 + 2 + 1), the product with v (2).
# Backward counts twice the forward (LayerTime), 114 in all; the H200 replay of a 1.35B GPT implies 119.
UNFUSED_SCORE_TRAFFIC_BYTES = 38
ELEMENTWISE_BYTES = 12  # bytes moved per token per hidden unit per layer and pass by norms, residuals, rope
LAYER_LAUNCH_SECONDS = 0.1e-3  # per layer and pass: ~20 kernel launches at ~5 us
MOE_HOST_SECONDS = {True: 0.5e-3, False: 2.6e-3}  # per MoE layer and pass: router/preprocess graphed or eager
STEP_SECONDS = 0.02  # per step: loss and grad-norm reductions, logging, scheduler
# Communication.
COLLECTIVE_EFFICIENCY = 0.75  # NCCL ring collectives inside a node, of the per-direction NVLink bandwidth
ALLTOALL_EFFICIENCY = 0.77  # expert dispatch/combine inside a node, of the per-direction NVLink bandwidth (DeepEP)
NETWORK_BYTES_PER_S = 45e9  # per GPU between nodes (400 Gb/s NDR; DeepEP internode: 43-58 GB/s)
PCIE_BYTES_PER_S = 50e9  # host <-> device per GPU and direction (PCIe Gen5 x16: 64 GB/s)
# Optimizer.
CPU_ADAM_PARAMS_PER_S = 0.66e9  # host Adam, parameters per second per GPU's process (fit: Qwen3-30B-A3B card)
# That rate is one host thread's: torchrun sets OMP_NUM_THREADS=1 when it starts several processes on a node
# (torch/distributed/run.py). A job of one process (one GPU) keeps every core (fit: the H200 replay of a 1.35B
# GPT, 16 host cores, docs/gpu-validation.md: 3.8e9 parameters per second).
ONE_PROCESS_HOST_SPEEDUP = 5.8
# With the precision-aware optimizer HybridDeviceOptimizer gets 16-bit shards: the gradient copy down and the
# parameter copy back change dtype on the host, two conversions per offloaded parameter, per host thread
# (fit: the same H200 run, precision-aware, 1.183 s against 0.569 s per optimizer step).
HOST_CONVERSIONS_PER_S = 0.645e9
ADAM_BYTES_PER_PARAM = 30  # GPU Adam: read param, grad, two moments; write param, moments, 16-bit copy
HBM_EFFICIENCY = 0.8
ASSUMED_MICROBATCHES = 8  # per step and pipeline, when the global batch size is unknown


@dataclass
class LayerTime:
    """Seconds of one layer for one micro-batch on one GPU, by named part (forward pass)."""

    parts: dict[str, float] = field(default_factory=dict)
    comm: dict[str, float] = field(default_factory=dict)
    host: float = 0.0

    @property
    def forward(self) -> float:
        return sum(self.parts.values()) + sum(self.comm.values()) + self.host

    @property
    def backward(self) -> float:
        """Twice the forward's arithmetic (input and weight gradients), the same communication, and half again
        the launches."""
        return 2 * sum(self.parts.values()) + sum(self.comm.values()) + 1.5 * self.host


def gemm_seconds(flops: float, rows: float, rate: float) -> float:
    return flops / (rate * GEMM_EFFICIENCY * rows / (rows + GEMM_HALF_ROWS))


def _tokens(m: ModelShape, p: Parallelism, t: Training) -> float:
    return m.seq_length / p.cp * t.micro_batch_size


def layer_time(m: ModelShape, p: Parallelism, t: Training, device: Device, moe: bool,
               kind: str | None = None, gdn: bool = False) -> LayerTime:
    """`kind`: a hybrid model's layer symbol (ModelShape.layer_kind): that part of a transformer layer only, or
    a Mamba layer (`_mamba_time`); `gdn`: a gated delta net in place of self-attention (`_gdn_time`)."""
    if kind is not None:
        return _hybrid_time(m, p, t, device, kind)
    n = _tokens(m, p, t)
    h = m.hidden_size
    sp = p.tp if p.sequence_parallel else 1
    q, kv = m.num_attention_heads * m.kv_channels, m.num_query_groups * m.kv_channels
    rate = device.peak_flops(t.compute_dtype)
    hbm = device.hbm_bytes_per_s * HBM_EFFICIENCY
    gate = 3 if m.gated_linear_unit else 2
    out = LayerTime()
    if gdn:
        _gdn_time(m, p, n, rate, device, out)
    elif m.multi_latent_attention:
        _latent_attention_time(m, p, n, rate, device, out)
    else:
        gate_out = q if m.attention_output_gate else 0  # the output gate's projection
        out.parts["qkv"] = gemm_seconds(2 * n * h * (q + 2 * kv + gate_out) / p.tp, n, rate)
        out.parts["proj"] = gemm_seconds(2 * n * q * h / p.tp, n, rate)
        if m.unfused_score_bytes:  # both products over the whole sequence, then the scores' element-wise steps
            scores = n * m.seq_length * m.num_attention_heads / p.tp
            out.parts["core_attn"] = gemm_seconds(4 * n * m.seq_length * q / p.tp, n, device.peak_flops("bf16")) \
                + UNFUSED_SCORE_TRAFFIC_BYTES * scores / hbm
        else:  # causal attention: QK^T and AV over half the sequence; flash attention runs in 16 bits
            out.parts["core_attn"] = 2 * n * m.seq_length * q / p.tp / (device.peak_flops("bf16")
                                                                         * ATTENTION_EFFICIENCY)
    out.parts["layernorm"] = 2 * 2 * 2 * n / sp * h / hbm  # two norms, read and write 16-bit
    out.parts["elementwise"] = ELEMENTWISE_BYTES * n / sp * h / hbm
    if moe:
        experts, k = m.num_moe_experts or 1, m.moe_router_topk
        ffn = m.moe_ffn_hidden_size or m.ffn_hidden_size
        pairs = n / sp * k * p.etp  # token copies this rank computes (balanced routing)
        rows = pairs * p.ep / experts  # tokens per local expert: the grouped GEMM's batch shape
        width = m.moe_latent_size or h  # latent MoE: experts and dispatch in the latent width
        out.parts["experts"] = gemm_seconds(2 * pairs * width * ffn * gate / p.etp, rows, rate)
        if m.moe_latent_size:  # fc1/fc2 latent projections, duplicated over TP: each rank projects its tokens
            out.parts["experts"] += gemm_seconds(2 * 2 * n / sp * h * width, n / sp, rate)
        out.parts["moe_act"] = 2 * pairs * ffn * (gate - 1) * 2 / p.etp / hbm
        shared = m.moe_shared_expert_intermediate_size or 0
        if shared:
            out.parts["shared_experts"] = gemm_seconds(2 * n * h * shared * gate / p.tp, n, rate)
        out.parts["router"] = 2 * n * h * experts / rate
        out.comm["alltoall"] = _alltoall_seconds(n / sp * width * 2, k, p, device)
        out.host = LAYER_LAUNCH_SECONDS + MOE_HOST_SECONDS[t.moe_router_graphed]
    else:
        out.parts["mlp"] = gemm_seconds(2 * n * h * m.ffn_hidden_size * gate / p.tp, n, rate)
        out.parts["mlp"] += 2 * n * m.ffn_hidden_size * (gate - 1) * 2 / p.tp / hbm  # the activation function
        out.host = LAYER_LAUNCH_SECONDS
    if p.tp > 1:
        # sequence parallelism: all-gather before and reduce-scatter after attention and MLP (without it, two
        # all-reduces of twice the volume); 16-bit activations
        volume = 2 * 2 * n * h * (p.tp - 1) / p.tp
        out.comm["tp"] = volume / _bandwidth(p.tp, device)
    return out


# The parts of a transformer layer's time each hybrid layer symbol keeps (norm, element-wise and TP traffic:
# half, one of the layer's two blocks).
_HYBRID_PARTS = {"*": ("qkv", "proj", "core_attn"), "-": ("mlp",),
                 "E": ("experts", "moe_act", "shared_experts", "router")}


def _hybrid_time(m: ModelShape, p: Parallelism, t: Training, device: Device, kind: str) -> LayerTime:
    if kind == "M":
        return _mamba_time(m, p, t, device)
    full = layer_time(m, p, t, device, kind == "E")
    out = LayerTime({k: v for k, v in full.parts.items() if k in _HYBRID_PARTS[kind]},
                    {k: v / 2 if k == "tp" else v for k, v in full.comm.items() if kind == "E" or k == "tp"},
                    full.host)
    for name in ("layernorm", "elementwise"):
        out.parts[name] = full.parts[name] / 2
    return out


def _mamba_time(m: ModelShape, p: Parallelism, t: Training, device: Device) -> LayerTime:
    """A Mamba layer: in_proj and out_proj GEMMs, and the chunked scan (SSD) as its matrix products: within each
    chunk C.B^T and its product with x, the chunk states and their contribution to the output, at flash
    attention's efficiency in 16 bits. Not calibrated against a measured Mamba step."""
    n = _tokens(m, p, t)
    h, d_inner, state = m.hidden_size, m.mamba_d_inner, m.mamba_state_dim
    sp = p.tp if p.sequence_parallel else 1
    rate = device.peak_flops(t.compute_dtype)
    hbm = device.hbm_bytes_per_s * HBM_EFFICIENCY
    width = 2 * d_inner + 2 * m.mamba_num_groups * state + m.mamba_num_heads
    out = LayerTime()
    out.parts["in_proj"] = gemm_seconds(2 * n * h * width / p.tp, n, rate)
    out.parts["out_proj"] = gemm_seconds(2 * n * d_inner * h / p.tp, n, rate)
    scan = 2 * n * (m.mamba_chunk_size * (m.mamba_num_groups * state + d_inner) + 2 * d_inner * state) / p.tp
    out.parts["scan"] = scan / (device.peak_flops("bf16") * ATTENTION_EFFICIENCY)
    out.parts["layernorm"] = 2 * 2 * n / sp * h / hbm
    out.parts["elementwise"] = ELEMENTWISE_BYTES / 2 * n / sp * h / hbm
    out.host = LAYER_LAUNCH_SECONDS
    if p.tp > 1:
        out.comm["tp"] = 2 * n * h * (p.tp - 1) / p.tp / _bandwidth(p.tp, device)
    return out


def _latent_attention_time(m: ModelShape, p: Parallelism, n: float, rate: float, device: Device,
                           out: LayerTime) -> None:
    """Multi-latent attention: the down projections are duplicated over TP (each rank projects its sequence-
    parallel tokens whole), the up projections (`mla_up_proj`, which recompute can repeat) and the output
    projection are split; flash attention over q/k of qk + rope dims and v of v_head_dim per head."""
    h, heads = m.hidden_size, m.num_attention_heads
    sp = p.tp if p.sequence_parallel else 1
    qk = m.qk_head_dim + m.qk_pos_emb_head_dim
    down = h * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_pos_emb_head_dim)
    q_up = (m.q_lora_rank or h) * heads * qk  # linear_q_up_proj, or linear_q_proj without q_lora_rank
    up = q_up + m.kv_lora_rank * heads * (m.qk_head_dim + m.v_head_dim)
    out.parts["qkv"] = gemm_seconds(2 * n / sp * down, n / sp, rate)
    out.parts["mla_up_proj"] = gemm_seconds(2 * n * up / p.tp, n, rate)
    out.parts["proj"] = gemm_seconds(2 * n * heads * m.v_head_dim * h / p.tp, n, rate)
    out.parts["core_attn"] = n * m.seq_length * heads * (qk + m.v_head_dim) / p.tp / (
        device.peak_flops("bf16") * ATTENTION_EFFICIENCY)


def _gdn_time(m: ModelShape, p: Parallelism, n: float, rate: float, device: Device, out: LayerTime) -> None:
    """A gated delta net: the in_proj and out_proj GEMMs, and the chunked delta rule as its matrix products per
    token and value head (within a 64-token chunk q.k^T, A.v and the WY representation; across chunks the state
    update and the state's products with q and w), at flash attention's efficiency in 16 bits. Not calibrated
    against a measured GDN step."""
    h, hv = m.hidden_size, m.gdn_value_heads
    qk, v = m.gdn_key_heads * m.gdn_key_head_dim, hv * m.gdn_value_head_dim
    dk, dv = m.gdn_key_head_dim, m.gdn_value_head_dim
    out.parts["qkv"] = gemm_seconds(2 * n * h * (2 * qk + 2 * v + 2 * hv) / p.tp, n, rate)
    out.parts["proj"] = gemm_seconds(2 * n * v * h / p.tp, n, rate)
    rule = 2 * n * hv * (2 * activations.GDN_CHUNK * (dk + dv) + 3 * dk * dv) / p.tp
    out.parts["core_attn"] = rule / (device.peak_flops("bf16") * ATTENTION_EFFICIENCY)


def _bandwidth(group: int, device: Device) -> float:
    return device.nvlink_bytes_per_s * COLLECTIVE_EFFICIENCY if group <= device.gpus_per_node else \
        NETWORK_BYTES_PER_S


def _alltoall_seconds(tokens_bytes: float, k: int, p: Parallelism, device: Device) -> float:
    """Dispatch and combine of one MoE layer; `tokens_bytes` is this rank's tokens once. Copies for ranks in
    this node cross NVLink; a remote node gets at most one copy of a token however many of its experts it
    hosts (DeepEP and HybridEP forward inside the node)."""
    local = max(1, min(p.ep, device.gpus_per_node // max(1, p.tp * p.cp)))  # EP ranks sharing this node
    nodes = max(1, p.ep // local)
    intra = tokens_bytes * k * (local - 1) / p.ep
    inter = min(tokens_bytes * k * (p.ep - local) / p.ep, tokens_bytes * (nodes - 1))
    return 2 * (intra / (device.nvlink_bytes_per_s * ALLTOALL_EFFICIENCY) + inter / NETWORK_BYTES_PER_S)


def recomputed_seconds(layer: LayerTime, t: Training) -> float:
    """The forward work recompute repeats in the backward pass of one layer."""
    if t.recompute_granularity == "full":
        return layer.forward
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.moe_layer_recompute:
        modules.add("moe")
    parts = layer.parts
    extra = sum(parts.get(name, 0.0) for name in ("core_attn", "layernorm", "mlp", "moe_act", "shared_experts",
                                                  "mla_up_proj") if name in modules)
    if "moe" in modules:
        extra += parts.get("experts", 0.0) + parts.get("router", 0.0) + parts.get("moe_act", 0.0) + \
            parts.get("shared_experts", 0.0) + layer.comm.get("alltoall", 0.0) + layer.host
    return extra


@dataclass
class StepTime:
    """Seconds of one step, by part (all on the busiest stage's GPU)."""

    pipeline: float
    data_parallel: float
    optimizer: float
    offload: float
    activation_offload: float
    fixed: float = STEP_SECONDS
    microbatches: int = 0

    @property
    def total(self) -> float:
        return self.pipeline + self.data_parallel + self.optimizer + self.offload + self.activation_offload + \
            self.fixed


def step_time(inputs: Inputs, result: Estimate, device: Device) -> StepTime:
    m, p, t = inputs.model, inputs.parallel, inputs.training
    world = result.world_size
    dp = p.data_parallel(world)
    nmb = result.num_microbatches or max(ASSUMED_MICROBATCHES, p.pp)
    kinds = {(m.is_moe_layer(i), m.layer_kind(i), m.is_gdn_layer(i)) for i in range(m.num_layers)}
    # (forward, backward, recomputed) seconds of a layer of each kind, worked out once, not once per layer
    by_kind = {}
    for k in kinds:
        layer = layer_time(m, p, t, device, *k)
        by_kind[k] = (layer.forward, layer.backward, recomputed_seconds(layer, t))
    block = t.recompute_granularity == "full" and t.recompute_method == "block"
    stage_seconds, backward_seconds = [], []
    for stage, chunk_ranges in enumerate(params.layer_ranges(m, p)):
        seconds = backward = 0.0
        for r in chunk_ranges:
            for i in r:
                forward, backward_pass, recompute = by_kind[m.is_moe_layer(i), m.layer_kind(i), m.is_gdn_layer(i)]
                if block:
                    recompute = forward if (i - r.start) < (t.recompute_num_layers or 0) else 0.0
                seconds += forward + backward_pass + recompute
                backward += backward_pass + recompute
        if stage == p.pp - 1:
            n = _tokens(m, p, t)
            seconds += gemm_seconds(3 * 2 * n * m.hidden_size * m.vocab_size / p.tp, n,
                                    device.peak_flops(t.compute_dtype))
        stage_seconds.append(seconds)
        backward_seconds.append(backward)
    busiest = max(range(p.pp), key=lambda s: stage_seconds[s])
    micro = stage_seconds[busiest]
    pipeline = (nmb + (p.pp - 1) / (p.vpp or 1)) * micro
    dense, expert = params.stages(m, p)[busiest].params.per_rank(p)
    shard = dense / (dp * p.cp) + expert / p.expert_data_parallel(world)
    grads = 4 if t.grads_fp32 else t.params_bytes
    reduce_scatter = _collective(dense * grads, dp * p.cp, p.tp * p.cp * dp, device) + \
        _collective(expert * grads, p.expert_data_parallel(world), world // p.pp, device)
    all_gather = _collective(dense * t.params_bytes, dp * p.cp, p.tp * p.cp * dp, device) + \
        _collective(expert * t.params_bytes, p.expert_data_parallel(world), world // p.pp, device)
    if not t.distributed_optimizer:
        reduce_scatter, all_gather = 2 * reduce_scatter, 0.0  # an all-reduce
    # the gradient reduction overlaps the last micro-batch's backward pass, the gather the first forward
    window = backward_seconds[busiest] / (p.vpp or 1)
    data_parallel = max(0.0, reduce_scatter - window) + 0.5 * all_gather
    hbm = device.hbm_bytes_per_s * HBM_EFFICIENCY
    on_gpu = 1.0 - (t.optimizer_offload_fraction if t.optimizer_cpu_offload else 0.0)
    optimizer = ADAM_BYTES_PER_PARAM * shard * on_gpu / hbm
    return StepTime(pipeline, data_parallel, optimizer, _optimizer_offload(t, shard, p.world_size == 1),
                    _activation_offload(result, micro, nmb), microbatches=nmb)


def _collective(nbytes: float, group: int, span: int, device: Device) -> float:
    """A ring reduce-scatter or all-gather of `nbytes` over `group` ranks spread over `span` consecutive ranks."""
    if group <= 1:
        return 0.0
    return nbytes * (group - 1) / group / _bandwidth(span, device)


def _optimizer_offload(t: Training, shard: float, one_process: bool = False) -> float:
    """The offloaded share's copies over PCIe and its host Adam step (and, precision-aware, the host's dtype
    conversions); a lone process's host work runs on every core (ONE_PROCESS_HOST_SPEEDUP)."""
    if not t.optimizer_cpu_offload or t.optimizer_offload_fraction <= 0:
        return 0.0
    offloaded = t.optimizer_offload_fraction * shard
    # gradients down and updated parameters back: fp32 main copies, or 16-bit views with precision-aware (F-10)
    copy_bytes = 2 * t.params_bytes if t.precision_aware else 8
    transfer = offloaded * copy_bytes / PCIE_BYTES_PER_S
    threads = ONE_PROCESS_HOST_SPEEDUP if one_process else 1.0
    cpu = offloaded / CPU_ADAM_PARAMS_PER_S / threads
    if t.precision_aware and t.params_bytes < 4:
        cpu += 2 * offloaded / HOST_CONVERSIONS_PER_S / threads
    return max(transfer, cpu) if t.overlap_cpu_optimizer_d2h_h2d else transfer + cpu


def _activation_offload(result: Estimate, micro_seconds: float, nmb: int) -> float:
    moved = result.peak.host_activation_bytes / max(1.0, result.peak.microbatches_in_flight)  # per micro-batch
    if not moved:
        return 0.0
    transfer = 2 * moved / PCIE_BYTES_PER_S  # out in the forward pass, back in the backward pass
    return max(0.0, transfer - micro_seconds) * nmb


def step_seconds(inputs: Inputs, result: Estimate, device: Device) -> float:
    """Modelled seconds per training step."""
    return step_time(inputs, result, device).total
