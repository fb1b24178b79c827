"""One GPU's peak memory, as named parts, for every pipeline stage; and the host memory offloading needs.

Weights, gradients and optimizer states follow what megatron-core allocates: bf16/fp16 (or fp32) parameters,
the DDP gradient buffer (fp32 main grads with `grad_reduce_in_fp32`), and Adam's fp32 master copy and two
moments, sharded over the data-parallel group (expert parameters over the expert data-parallel group) by the
distributed optimizer. `optimizer_cpu_offload` moves `optimizer_offload_fraction` of the optimizer's shard to
the host; without the precision-aware optimizer the fp32 master stays on the GPU (constraints.md F-9).
Activations come from `activations.py`, times the micro-batches each stage holds at its peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from offlint.estimate import activations as act
from offlint.estimate import frozen_lm, lm_graphs, lora, params, precision
from offlint.estimate.inputs import Inputs, LowPrecision, ModelShape, Parallelism, Training

GIB = 1024**3
# The named allowance: cuBLAS/cuDNN/Transformer Engine workspaces and NCCL communicator buffers, plus caching-
# allocator fragmentation as a share of everything else (Megatron-LM's own theoretical model adds the same 5% for
# temporaries). The fixed part is measured, as a floor: ten one-GPU replays on an H200 (torch 2.11, CUDA 13, no
# Transformer Engine; 167M and 1.28B parameters) each had 2.80 GiB of the device in use outside PyTorch's pool,
# of which devices.RESERVED_GIB counts 1 (docs/gpu-validation.md); several GPUs add NCCL's buffers to it.
WORKSPACE_AND_NCCL_BYTES = 1.8 * GIB
FRAGMENTATION = 0.05


@dataclass
class Part:
    name: str
    bytes: float
    kind: str  # "weights" | "grads" | "optimizer" | "activations" | "transient" (not in the floor) | "allowance"


@dataclass
class StageMemory:
    stage: int
    parts: list[Part]
    microbatches_in_flight: float
    host_optimizer_bytes: float = 0.0
    host_pinned_bytes: float = 0.0
    host_activation_bytes: float = 0.0

    @property
    def total(self) -> float:
        return sum(p.bytes for p in self.parts)

    def of(self, kind: str) -> float:
        return sum(p.bytes for p in self.parts if p.kind == kind)

    @property
    def host_total(self) -> float:
        return self.host_optimizer_bytes + self.host_activation_bytes


@dataclass
class Estimate:
    inputs: Inputs
    world_size: int
    data_parallel: int
    expert_data_parallel: int
    num_microbatches: int | None
    stages: list[StageMemory] = field(default_factory=list)

    @property
    def peak(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.total)


def estimate(inputs: Inputs, world_size: int | None = None) -> Estimate:
    """The per-stage breakdown. `inputs` must be complete (`inputs.complete`); the world size defaults to the
    configuration's, else the fewest GPUs its layout needs."""
    m, p, t = inputs.model, inputs.parallel, inputs.training
    world = world_size or p.world_size or p.min_world_size()
    dp, edp = p.data_parallel(world), p.expert_data_parallel(world)
    nmb = None
    if t.global_batch_size:
        nmb = max(1, t.global_batch_size // (t.micro_batch_size * dp))
    return Estimate(inputs, world, dp, edp, nmb, list(_stages(m, p, t, dp, edp, nmb)))


def model_state(inputs: Inputs, world_size: int | None = None) -> float:
    """The weights, gradients and optimizer states of estimate(inputs, world_size)'s peak stage (StageMemory.of
    each, summed). For inputs on one pipeline stage (that stage is the peak) without working out its activations:
    OFL304's figure of a model folded into PP=1 (oom.model_state_at_pp1), which every judgement of an estimate whose
    verdict may depend on the GPU asks for again. Any other layout: from the whole estimate."""
    m, p, t = inputs.model, inputs.parallel, inputs.training
    if p.pp != 1 or m.wan is not None:
        peak = estimate(inputs, world_size).peak
    else:
        world = world_size or p.world_size or p.min_world_size()
        (stage,) = params.stages(m, p)
        parts, _, _ = _model_state(m, p, t, stage, p.data_parallel(world), p.expert_data_parallel(world),
                                   _stage_kinds(m, p, t.low_precision, stage.index))
        peak = StageMemory(stage.index, parts, 1.0)
    return peak.of("weights") + peak.of("grads") + peak.of("optimizer")


def _stages(m: ModelShape, p: Parallelism, t: Training, dp: int, edp: int, nmb: int | None) -> tuple[StageMemory, ...]:
    """Every stage's memory, once per distinct configuration in a process: a tree sets up the same model, layout
    and training settings in many recipes, and the rules, the either-way variants and the what-if table ask for
    the same estimate again (on Megatron Bridge 519 distinct of 739). The stages are not changed after."""
    if m.wan is not None:  # Bridge's Wan diffusion transformer: its own parameters and activations
        return _wan_stages(m, p, t, dp, edp, nmb)
    try:
        return _stages_of(m, p, t, dp, edp, nmb)
    except TypeError:  # an input that cannot be hashed (a list where a tuple is expected): not memoised
        layers: dict = {}
        return tuple(_stage_memory(m, p, t, stage, dp, edp, nmb, layers) for stage in params.stages(m, p))


@lru_cache(maxsize=1024)
def _stages_of(m: ModelShape, p: Parallelism, t: Training, dp: int, edp: int,
               nmb: int | None) -> tuple[StageMemory, ...]:
    layers: dict = {}  # each layer kind's activations, shared by the stages (_layer_activations)
    stages = params.stages(m, p)
    kinds = _layer_kinds(m, p, t.low_precision)  # (asked for once, not once a stage: its memo hashes the shapes)
    return tuple(_stage_memory(m, p, t, stage, dp, edp, nmb, layers, kinds[stage.index]) for stage in stages)


def _per_shape(fn):
    """`fn` memoised on its arguments, computed afresh for one that cannot be hashed (a list where a tuple is
    expected): what a stage's layers are depends only on the model and the layout, of which a tree's recipes share
    a few hundred (Megatron Bridge: 266 for 775 distinct estimates), while every stage of every estimate walks them."""
    cached = lru_cache(maxsize=1024)(fn)

    def call(*args):
        try:
            return cached(*args)
        except TypeError:
            return fn(*args)

    return call


@_per_shape
def _layer_indices(m: ModelShape, p: Parallelism) -> tuple[tuple[int, ...], ...]:
    """Each stage's decoder layer indices (params.layer_ranges, its virtual chunks in order)."""
    return tuple(tuple(i for r in ranges for i in r) for ranges in params.layer_ranges(m, p))


@_per_shape
def _layer_kinds(m: ModelShape, p: Parallelism,
                 lp: LowPrecision | None) -> tuple[tuple[tuple[bool, bool, str | None, bool], ...], ...]:
    """Each stage's (MoE, FP8, hybrid symbol, gated delta net) per layer: all a layer's activations and quantized
    weights depend on (ModelShape.is_moe_layer, precision.is_fp8_layer, layer_kind, is_gdn_layer)."""
    return tuple(tuple((m.is_moe_layer(i), precision.is_fp8_layer(m, lp, i), m.layer_kind(i), m.is_gdn_layer(i))
                       for i in indices) for indices in _layer_indices(m, p))


def _stage_kinds(m: ModelShape, p: Parallelism, lp: LowPrecision | None,
                 index: int) -> tuple[tuple[bool, bool, str | None, bool], ...]:
    return _layer_kinds(m, p, lp)[index]


@_per_shape
def _has_moe_layer(m: ModelShape) -> bool:
    return any(m.is_moe_layer(i) for i in range(m.num_layers))


def _wan_stages(m: ModelShape, p: Parallelism, t: Training, dp: int, edp: int,
                nmb: int | None) -> tuple[StageMemory, ...]:
    """Bridge's Wan diffusion transformer (diffusion.py): the one stage's memory (its pipeline parallelism is
    refused), the parts named as for a GPT model."""
    from offlint.estimate import diffusion

    count = diffusion.layer_params(m) * m.num_layers + diffusion.outside_params(m)
    dense, _ = count.per_rank(p)
    weights, grads, optim = _shards(p, t, dp, edp)
    parts = _weights(m, p, t, params.Stage(0, m.num_layers, count, True, True), dense / weights[0], weights)
    parts.append(Part(f"gradients ({'fp32 main grads' if t.grads_fp32 else _dtype(t.params_bytes)})",
                      dense / grads[0] * _grad_bytes(t), "grads"))
    optimizer = optimizer_bytes(t, dense / optim[0], dense)
    for name, gpu in optimizer.gpu:
        parts.append(Part(f"optimizer: {name}", gpu, "optimizer"))
    layer = sum(diffusion.layer_terms(m, p).values())
    working = 0.0
    if t.recompute_granularity == "full":
        k, layers = max(1, t.recompute_num_layers or 1), m.num_layers
        if t.recompute_method == "block":  # the first k layers keep their inputs, the others everything
            recomputed = min(k, layers)
            stored = diffusion.checkpoint_input(m, p) * recomputed + layer * (layers - recomputed)
            working = layer
        else:  # uniform: one input per chunk of k layers; backward rebuilds one chunk at a time
            stored = diffusion.checkpoint_input(m, p) * math.ceil(layers / k)
            working = layer * min(k, layers)
    else:
        stored = layer * m.num_layers
    parts.append(Part("activations: Wan blocks", stored, "activations"))
    outside = diffusion.outside_terms(m, p)
    parts.append(Part("activations: patch and text embeddings, rotary frequencies, head", sum(outside.values()),
                      "activations"))
    if working:
        parts.append(Part("activations: recompute working set", working, "activations"))
    subtotal = sum(x.bytes for x in parts)
    parts.append(Part("allowance: workspaces, NCCL, fragmentation",
                      WORKSPACE_AND_NCCL_BYTES + FRAGMENTATION * subtotal, "allowance"))
    return (StageMemory(0, parts, 1.0, optimizer.host, optimizer.pinned, 0.0),)


def _stage_memory(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage, dp: int, edp: int,
                  nmb: int | None, layers: dict, kinds: tuple | None = None) -> StageMemory:
    """`kinds`: the stage's _stage_kinds when the caller has them."""
    if kinds is None:
        kinds = _stage_kinds(m, p, t.low_precision, stage.index)
    parts, optimizer, expert_optimizer = _model_state(m, p, t, stage, dp, edp, kinds)
    vision = t.frozen_lm if stage.index == 0 else None  # the tower and its mergers: first stage only
    vlm = t.vlm if stage.index == 0 else None  # a VLM whose language model trains: its tower on the first stage
    if t.fsdp == "optim_grads_params":
        parts.append(Part("Megatron-FSDP unsharded buffers (upper bound)", _fsdp_buffers(m, p, t, stage),
                          "transient"))
    in_flight = microbatches_in_flight(p, stage.index, nmb)
    layer_bytes, host_activations, extra = _stage_activations(m, p, t, stage, in_flight, layers, kinds)
    stash = _paged_stash(m, p, t, stage, in_flight, layers, kinds)
    if stash:
        layer_bytes -= stash[0]
        host_activations += stash[3]
    parts.append(Part("activations: transformer layers", layer_bytes, "activations"))
    if stash:
        parts.append(Part("activations: MoE paged stash buffer (expert tensors at the balanced load)", stash[1],
                          "activations"))
        parts.append(Part("activations: MoE paged stash, padded expert tensors of the two layers being computed",
                          stash[2], "activations"))
    if vision:  # an interleaved pipeline: the first virtual stage's own count (frozen_lm.first_chunk_in_flight)
        held = frozen_lm.first_chunk_in_flight(p.pp, p.vpp, nmb) if p.pp > 1 and p.vpp and p.vpp > 1 else in_flight
        parts.append(Part("activations: vision patch mergers (every token a vision token, at most)",
                          frozen_lm.projection_activations(m, p, t) * held, "activations"))
        parts.append(Part("activations: frozen vision tower working set (one layer, at most)",
                          frozen_lm.tower_working_set(m, p, t), "activations"))
    # Vision CUDA graphs (frozen_lm.py): the tower runs padded to `graphs` patches, and the graphs stay captured
    # (their pool and sample inputs reserved) in a micro-batch without images too.
    graphs = vlm.graph_patches if vlm else None
    if vlm and (vlm.patches != "none" or graphs):
        v, images = vlm.tower, vlm.patches != "none"
        held = frozen_lm.first_chunk_in_flight(p.pp, p.vpp, nmb) if p.pp > 1 and p.vpp and p.vpp > 1 else in_flight
        if images:
            how = f"at most {graphs} patches' tokens" if graphs else "every token a vision token, at most"
            parts.append(Part(f"activations: vision patch mergers ({how})",
                              frozen_lm.projection_activations(m, p, t, v, graphs) * held, "activations"))
        if vlm.tower_trained:
            kept, rebuilt = act.trained_tower_activations(v, m, p, t, graphs, pixels=images)
            how = f"{graphs} patches, padded for its CUDA graphs" if graphs else \
                "every token a vision token, at most"
            parts.append(Part(f"activations: vision tower, trained ({how})", kept * held, "activations"))
            extra = max(extra, rebuilt)  # its full recompute rebuilds one chunk in backward, as the LM's
            if graphs:
                layer = act.trained_tower_layer(v, m, p, t, graphs)
                parts.extend(Part(name, nbytes, "activations")
                             for name, nbytes in frozen_lm.graph_parts(v, p, graphs, held, layer, vlm.graph_bound))
        else:
            parts.append(Part("activations: frozen vision tower working set (one layer, at most)",
                              frozen_lm.tower_working_set(m, p, t, v), "activations"))
    if t.te_graph_modules is not None:  # the language model's Transformer Engine CUDA graphs (lm_graphs.py)
        parts.extend(Part(name, nbytes, "activations") for name, nbytes in lm_graphs.parts(
            m, p, t, params.layer_ranges(m, p)[stage.index], stage.mtp_layers, in_flight) if nbytes)
    if stage.has_embedding:
        parts.append(Part("activations: embedding inputs", act.embedding_terms(m, p, t) * in_flight, "activations"))
    if stage.has_output:
        parts.append(Part("activations: output layer and logits", act.output_terms(m, p, t), "activations"))
    if m.mtp_num_layers and (stage.mtp_layers or stage.has_output):
        # The MTP depths run on the last stage (or their own), one micro-batch at a time like the output
        # layer, which computes their logits on the last stage.
        depth = act.mtp_depth(m, p, t)
        logits = depth.terms["mtp_output"] * m.mtp_num_layers
        layers = depth.total * m.mtp_num_layers - logits
        here = (layers if stage.mtp_layers else 0.0) + (logits if stage.has_output else 0.0)
        parts.append(Part(f"activations: multi-token prediction ({m.mtp_num_layers} depths)", here, "activations"))
        if stage.mtp_layers and t.recompute_granularity == "full" and (t.recompute_method != "block" or
                                                                       m.hybrid_mtp_pattern):
            extra = max(extra, act.mtp_rebuilt(m, p, t))  # before the decoder layers' backward, not beside it
    if extra:
        parts.append(Part("activations: recompute working set", extra, "activations"))
    if any(kind[2] == "M" for kind in kinds) or \
            stage.mtp_layers and "M" in (m.hybrid_mtp_pattern or ""):
        parts.append(Part("Mamba chunked-scan states (one layer)", act.mamba_scan_states(m, p, t), "activations"))
    if m.num_moe_experts and (_has_moe_layer(m) or "E" in (m.hybrid_mtp_pattern or "")):
        parts.append(Part("MoE dispatch buffers", act.dispatch_buffers(m, p, t), "activations"))
    if graphs and vlm.tower_trained and stage.index == 0:
        # The capture, between two steps (activations freed), first allocates every captured micro-batch's sample
        # inputs (frozen_lm.capture_inputs); what exceeds the activations the steps hold raises the peak.
        captured = (nmb or in_flight) if p.pp > 1 else 1
        held_bytes = sum(x.bytes for x in parts if x.kind == "activations")
        capture = frozen_lm.capture_inputs(vlm.tower, graphs, captured)
        if capture > held_bytes:
            parts.append(Part("vision CUDA graph capture: every micro-batch's sample inputs at once, beyond the "
                              "activations (freed then)", capture - held_bytes, "transient"))
    subtotal = sum(x.bytes for x in parts)
    parts.append(Part("allowance: workspaces, NCCL, fragmentation",
                      WORKSPACE_AND_NCCL_BYTES + FRAGMENTATION * subtotal, "allowance"))
    return StageMemory(stage.index, parts, in_flight, optimizer.host + expert_optimizer.host,
                       optimizer.pinned + expert_optimizer.pinned, host_activations)


def _model_state(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage, dp: int, edp: int,
                 kinds: tuple) -> tuple[list[Part], OptimizerBytes, OptimizerBytes]:
    """A stage's weights, gradients and optimizer states, as the first of its parts (_stage_memory), and the
    optimizer's bytes of its dense and its expert parameters. `kinds`: the stage's _stage_kinds."""
    dense, expert = stage.params.per_rank(p)
    weights, grads, optim = _shards(p, t, dp, edp)
    parts = _weights(m, p, t, stage, dense / weights[0] + expert / weights[1], weights, kinds)
    if t.peft:  # a frozen base: gradients and optimizer states only for the adapters (lora.py)
        adapters = sum(lora.adapter_params(m, t.peft) for _ in _stage_layers(m, p, stage)) / p.tp
        parts.append(Part(f"LoRA adapters ({_dtype(t.params_bytes)})", adapters * t.params_bytes, "weights"))
        dense, expert = adapters, 0.0
    vision = t.frozen_lm if stage.index == 0 else None  # the tower and its mergers: first stage only
    if t.frozen_lm:  # a frozen language model and tower: gradients and optimizer states for the mergers only
        tower, mergers = frozen_lm.tower_params(t.frozen_lm), frozen_lm.projection_params(t.frozen_lm)
        dense, expert = (sum(mergers.per_rank(p)), 0.0) if vision else (0.0, 0.0)
        if vision:
            parts.append(Part(f"vision tower, frozen ({_dtype(t.params_bytes)})",
                              sum(tower.per_rank(p)) * t.params_bytes, "weights"))
            parts.append(Part(f"vision patch mergers, trained ({_dtype(t.params_bytes)})", dense * t.params_bytes,
                              "weights"))
    vlm = t.vlm if stage.index == 0 else None  # a VLM whose language model trains: its tower on the first stage
    if vlm:  # the tower's weights stay bf16 whatever the language model's precision (frozen_lm.py, FP8)
        tower, mergers = (sum(frozen_lm.tower_params(vlm.tower).per_rank(p)),
                          sum(frozen_lm.projection_params(vlm.tower).per_rank(p)))
        parts.append(Part(f"vision tower, {'trained' if vlm.tower_trained else 'frozen'} ({_dtype(t.params_bytes)})",
                          tower * t.params_bytes, "weights"))
        parts.append(Part(f"vision patch mergers, trained ({_dtype(t.params_bytes)})", mergers * t.params_bytes,
                          "weights"))
        dense += mergers + (tower if vlm.tower_trained else 0.0)  # gradients and optimizer states as the LM's
    parts.append(Part(f"gradients ({'fp32 main grads' if t.grads_fp32 else _dtype(t.params_bytes)})",
                      (dense / grads[0] + expert / grads[1]) * _grad_bytes(t), "grads"))
    optimizer = optimizer_bytes(t, dense / optim[0], dense)
    if t.optimizer_cpu_offload and not t.precision_aware and optim[0] == 1 and not (t.peft or t.frozen_lm or vlm):
        # The hybrid optimizer pins an fp32 copy of each offloaded parameter and of its gradient; whole tensors
        # when the optimizer is not sharded (a shard's pieces have other sizes: not modelled).
        rounding = 2 * t.optimizer_offload_fraction * params.pinned_rounding(
            m, p, _stage_layers(m, p, stage), stage.has_embedding, stage.has_output)
        optimizer = OptimizerBytes(optimizer.gpu, optimizer.host + rounding, optimizer.pinned + rounding)
    expert_optimizer = optimizer_bytes(t, expert / optim[1], expert)
    for (name, gpu), (_, expert_gpu) in zip(optimizer.gpu, expert_optimizer.gpu):
        parts.append(Part(f"optimizer: {name}", gpu + expert_gpu, "optimizer"))
    return parts, optimizer, expert_optimizer


def _grad_bytes(t: Training) -> int:
    return 4 if t.grads_fp32 else t.params_bytes


def _shards(p: Parallelism, t: Training, dp: int, edp: int) -> tuple[tuple[int, int], ...]:
    """How many ranks share the (dense, expert) weights, gradients and optimizer states one rank holds.
    megatron-core DDP keeps whole weights and gradient buffers; its distributed optimizer shards the optimizer
    over the data-parallel group with context parallelism (experts: the expert data-parallel group).
    Megatron-FSDP shards over the same groups by `data_parallel_sharding_strategy` (its buffers are
    `is_data_distributed` per strategy: param_and_grad_buffer.py, megatron-core 0.16.1). With
    num_distributed_optimizer_instances R both shard within groups R times smaller (parallel_state's partial
    data-parallel groups) and replicate across them; Megatron-FSDP's outer "optim" strategy shards the main
    weights and optimizer state over the whole group again, weights and gradients staying in the inner shards
    (megatron-core 2a75ac12, the HFSDP helper buffers)."""
    whole, data = (1, 1), (dp * p.cp, edp)
    r = t.optimizer_instances
    inner = (max(1, dp * p.cp // r), max(1, edp // r))
    if t.fsdp is None:
        return whole, whole, inner if t.distributed_optimizer else whole
    optim = data if t.fsdp_outer_optim else inner
    return {"no_shard": (whole, whole, whole), "optim": (whole, whole, inner),
            "optim_grads_params": (inner, inner, optim)}[t.fsdp]


# Megatron-FSDP's default communication unit (elements) when `suggested_communication_unit_size` is unset:
# twice the average FSDP unit, at least 1e9 (megatron_fsdp.py); the all-gather prefetch is half of it.
FSDP_MIN_UNIT = 1_000_000_000


def _fsdp_buffers(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage) -> float:
    """optim_grads_params keeps each FSDP unit (a transformer layer) sharded and all-gathers it around its
    forward and backward: unsharded parameters of the unit being computed plus those prefetched (all-gather
    pipeline: prefetch while less than half the communication unit is prefetched; with fsdp_double_buffer a
    fixed pool of two units), and unsharded gradients of the units waiting for their reduce-scatter (at most
    the communication unit before the newest, plus the newest and the one being computed). Parameters outside
    the units (embedding, output layer, final norm) are counted unsharded. An upper bound: the queues need not
    be full when activations peak."""
    indices = _stage_layers(m, p, stage)
    per_layer = [sum(params.layer(m, i).per_rank(p)) for i in indices]
    lp = t.low_precision
    quantized = [_gemm_elements(m, p, lp, i) for i in indices]
    if stage.mtp_layers and m.hybrid_mtp_pattern:
        # A hybrid MTP depth's HybridStack holds TransformerLayer, MoETransformerLayer and MambaLayer modules,
        # units as the decoder's (megatron-core 0.19.2 distributed/fsdp/mcore_fsdp_adapter.py:158-164); its norms
        # and eh_proj stay outside. One set of layers per depth, one for all with mtp_use_repeated_layer.
        depths = 1 if m.mtp_repeated_layer else m.mtp_num_layers
        for kind, fp in zip(m.hybrid_mtp_pattern * depths, precision.hybrid_mtp_quantized(m, lp) * depths):
            per_layer.append(sum(params.HYBRID_LAYERS[kind](m).per_rank(p)))
            dense, replicated, expert = precision.gemm_weights(m, kind == "E", kind) if fp else (0, 0, 0)
            quantized.append(dense / p.tp + replicated + expert / (p.ep * p.etp))
    if not per_layer:
        return 0.0
    unit = max(per_layer)
    outside = sum(stage.params.per_rank(p)) - sum(per_layer)
    size = t.fsdp_unit_size or max(FSDP_MIN_UNIT, 2 * sum(per_layer) // len(per_layer))
    gathered = 2 if t.fsdp_double_buffer else 1 + math.ceil(size // 2 / unit)
    reducing = size // unit + 2
    n = len(per_layer)
    # A unit's gathered bytes: FP8 GEMM weights at the uint8 buffers' bytes (precision.fsdp_data_bytes), the
    # rest in the parameter dtype.
    unit_bytes = max(count * t.params_bytes - (elements * (t.params_bytes - precision.fsdp_data_bytes(lp))
                                               if lp else 0.0) for elements, count in zip(quantized, per_layer))
    return min(n, gathered) * unit_bytes + outside * t.params_bytes + (min(n, reducing) * unit + outside) * \
        _grad_bytes(t)


def _gemm_elements(m: ModelShape, p: Parallelism, lp, index: int) -> float:
    """Quantized GEMM weight elements of layer `index` on one rank (0 for a layer kept in bf16)."""
    if not precision.is_fp8_layer(m, lp, index):
        return 0.0
    dense, replicated, expert = precision.gemm_weights(m, m.is_moe_layer(index), m.layer_kind(index),
                                                       m.is_gdn_layer(index))
    return dense / p.tp + replicated + expert / (p.ep * p.etp)


def _weights(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage, count: float,
             shards: tuple[int, int] = (1, 1), kinds: tuple | None = None) -> list[Part]:
    """The parameters, and in FP8/NVFP4 training the quantized GEMM weights (precision.py): in place of the
    bf16 ones with FP8/FP4 primary weights, else beside them (Transformer Engine's cache); delayed scaling's
    state. Megatron-FSDP (`shards`: how many ranks share the dense and the expert weights) keeps FP8 primary
    weights in sharded uint8 buffers and MXFP8's scales whole (precision.fsdp_data_bytes, fsdp_scale_bytes).
    `kinds`: the stage's _stage_kinds when the caller has them."""
    lp = t.low_precision
    plain = Part(f"weights ({_dtype(t.params_bytes)})", count * t.params_bytes, "weights")
    if lp is None:
        return [plain]
    gemm, gemms, sharded = 0.0, 0.0, 0.0
    kinds = _stage_kinds(m, p, lp, stage.index) if kinds is None else kinds
    by_kind = {}  # (GEMM weights, their sharded share, GEMM count) of a quantized layer of each kind
    for moe, fp8, symbol, gdn in set(kinds):
        if fp8:
            dense, replicated, expert = precision.gemm_weights(m, moe, symbol, gdn)
            by_kind[moe, fp8, symbol, gdn] = (
                dense / p.tp + replicated + expert / (p.ep * p.etp),
                (dense / p.tp + replicated) / shards[0] + expert / (p.ep * p.etp) / shards[1],
                precision.gemms(m, moe, (m.num_moe_experts or 0) / p.ep, symbol))
    for kind in kinds:
        if kind[1]:
            layer_gemm, layer_sharded, layer_gemms = by_kind[kind]
            gemm += layer_gemm
            sharded += layer_sharded
            gemms += layer_gemms
    if stage.mtp_layers and (precision.quantized_mtp(lp) or any(precision.hybrid_mtp_quantized(m, lp))):
        # NVFP4: a hybrid depth's FP4 layers only (precision.hybrid_mtp_quantized), not eh_proj
        dense, replicated, expert = precision.mtp_gemm_weights(m, lp)
        gemm += dense / p.tp + replicated + expert / (p.ep * p.etp)
        sharded += (dense / p.tp + replicated) / shards[0] + expert / (p.ep * p.etp) / shards[1]
        depths, local = 1 if m.mtp_repeated_layer else m.mtp_num_layers, (m.num_moe_experts or 0) / p.ep
        layers = [precision.gemms(m, kind == "E", local, kind) for kind, quantized in
                  zip(m.hybrid_mtp_pattern, precision.hybrid_mtp_quantized(m, lp)) if quantized] \
            if m.hybrid_mtp_pattern else [precision.gemms(m, m.is_moe_layer(m.num_layers - 1), local)]
        gemms += depths * (precision.quantized_mtp(lp) + sum(layers))  # eh_proj and the depth's layers
    copies = gemm * precision.weight_copy_bytes(lp)
    history = precision.scaling_state_bytes(lp, gemms)  # delayed scaling only
    state = [Part("FP8 scaling state (amax history)", history, "weights")] if history else []
    if lp.output_layer and stage.has_output:  # a bf16 LM head: Transformer Engine caches its MXFP8 copy
        state.append(Part("MXFP8 output layer weight copy (Transformer Engine cache)",
                          m.vocab_size * m.hidden_size / p.tp * precision.weight_copy_bytes(lp), "weights"))
    kind = "NVFP4" if lp.recipe == "nvfp4" else "FP8"
    if t.fsdp:  # FP8 primary weights (inputs_fsdp._fsdp_low_precision_unsupported refuses the rest)
        fsdp = sharded * precision.fsdp_data_bytes(lp) + gemm * precision.fsdp_scale_bytes(lp)
        return [Part(f"weights ({_dtype(t.params_bytes)}; FP8 GEMM weights, {lp.recipe}, Megatron-FSDP)",
                     (count - sharded) * t.params_bytes + fsdp, "weights"), *state]
    if lp.params:
        return [Part(f"weights ({_dtype(t.params_bytes)}; {kind} GEMM weights, {lp.recipe})",
                     (count - gemm) * t.params_bytes + copies, "weights"), *state]
    return [plain, Part(f"{kind} weight copies ({lp.recipe}, Transformer Engine cache)", copies, "weights"), *state]


def _stage_layers(m: ModelShape, p: Parallelism, stage: params.Stage) -> tuple[int, ...]:
    return _layer_indices(m, p)[stage.index]


def _dtype(nbytes: int) -> str:
    return {2: "bf16/fp16", 4: "fp32"}.get(nbytes, f"{nbytes} bytes")


@dataclass
class OptimizerBytes:
    gpu: list[tuple[str, float]]  # (what, bytes) that stay on the GPU
    host: float = 0.0
    pinned: float = 0.0


def optimizer_bytes(t: Training, shard: float, rank_params: float) -> OptimizerBytes:
    """Optimizer state for `shard` parameters (this rank's share of its `rank_params`): GPU parts by name, and
    host bytes; with what the first HybridDeviceOptimizer leaves where no garbage collection frees it."""
    state = _optimizer_state(t, shard)
    # measured with megatron-core's DistributedOptimizer (not Megatron-FSDP, whose optimizer is built otherwise)
    if t.optimizer_cpu_offload and t.distributed_optimizer and not t.fsdp and t.params_bytes < 4 \
            and not t.manual_gc:
        left = _first_hybrid_optimizer(t, rank_params)
        return OptimizerBytes(state.gpu + left.gpu, state.host + left.host, state.pinned + left.pinned)
    return state


def _optimizer_state(t: Training, shard: float) -> OptimizerBytes:
    """The optimizer's own state for `shard` parameters: GPU parts by name, and host bytes."""
    moments = 2 if t.optimizer == "adam" else 1  # SGD keeps one momentum buffer
    needs_master = t.params_bytes < 4
    if t.optimizer_cpu_offload:
        f = t.optimizer_offload_fraction
        if t.precision_aware:
            # The hybrid optimizer gets 16-bit shard views; it keeps fp32 copies and moments wherever each
            # parameter lives (precision-aware dtypes are ignored, F-10). Offloaded: the parameter's fp32 copy
            # (made from a pinned 16-bit clone, which is then dropped) and moments, and a pinned fp32 gradient
            # copy on the host (hybrid_optimizer.py _get_sub_optimizer_param_groups; the H200 run's host memory
            # agrees, docs/gpu-validation.md).
            return OptimizerBytes([("fp32 master copy", (1 - f) * shard * 4),
                                   ("moments (fp32)", (1 - f) * shard * 4 * moments)],
                                  host=f * shard * (4 + 4 * moments + 4), pinned=f * shard * 4)
        # F-9: the distributed optimizer's fp32 master shard stays on the GPU; only the moments move (plus a
        # pinned copy of the master and of the gradient on the host).
        return OptimizerBytes([("fp32 master copy (stays on GPU, F-9)", shard * 4 if needs_master else 0.0),
                               ("moments (fp32)", (1 - f) * shard * 4 * moments)],
                              host=f * shard * (4 + 4 * moments + 4), pinned=f * shard * 8)
    if t.precision_aware:
        master = t.main_params_bytes
        if t.fsdp:  # Megatron-FSDP's fp32 main weights; get_megatron_optimizer turns FusedAdam's master off
            master = 4
        elif t.store_param_remainders and t.main_params_bytes == 4 and t.params_bytes == 2:
            master = 2  # the bf16 parameter plus 16-bit remainders reconstruct the fp32 master
        return OptimizerBytes([(f"master copy ({master} bytes)", shard * master if needs_master else 0.0),
                               ("moments", shard * (t.exp_avg_bytes + (t.exp_avg_sq_bytes if moments == 2 else 0)))])
    return OptimizerBytes([("fp32 master copy", shard * 4 if needs_master else 0.0),
                           ("moments (fp32)", shard * 4 * moments)])


def _first_hybrid_optimizer(t: Training, rank_params: float) -> OptimizerBytes:
    """What megatron-core's first HybridDeviceOptimizer leaves until Python's cyclic garbage collector runs.

    get_megatron_optimizer builds one over all of this rank's 16-bit parameters (not the data-parallel shard):
    fp32 copies of those it keeps on the GPU and, on the host, of those it offloads (each made from a pinned
    16-bit clone that is then dropped).
    The DistributedOptimizer then builds its own over the fp32 shards; the first is held only by a reference
    cycle. train.manual_gc (gc.collect() before the first step in Bridge's and Megatron-LM's loops) frees it.
    Measured on an H200 with megatron-core 0.19.2 (docs/gpu-validation.md): 5.03 GiB at fraction 0 and 2.50 GiB
    at 0.5 for 1.35B parameters, to 0.01 GiB."""
    f = t.optimizer_offload_fraction
    return OptimizerBytes([("leftover fp32 copies until gc (train.manual_gc)",
                            (1 - f) * rank_params * 4)],
                          host=f * rank_params * 4)


def microbatches_in_flight(p: Parallelism, stage: int, nmb: int | None) -> float:
    """Micro-batches whose activations a stage holds at its peak, counted in whole-stage units.

    1F1B: stage i warms up with PP-i micro-batches. Interleaved (VPP chunks): rank i holds
    2(PP-i-1) + (VPP-1)PP + 1 model chunks, each 1/VPP of the stage. Fewer micro-batches than that cap it."""
    if p.pp == 1:
        return 1.0
    if not p.vpp or p.vpp == 1:
        warm = p.pp - stage
        return float(min(warm, nmb) if nmb else warm)
    chunks = 2 * (p.pp - stage - 1) + (p.vpp - 1) * p.pp + 1
    if nmb:
        chunks = min(chunks, nmb * p.vpp)
    return chunks / p.vpp


def _layer_activations(m: ModelShape, p: Parallelism, t: Training, kind: tuple,
                       layers: dict) -> act.LayerActivations:
    """The saved tensors of a layer of `kind` (_layer_kinds) after selective recompute: they depend only on its kind,
    so `layers` keeps them for the estimate's other stages."""
    found = layers.get(kind)
    if found is None:
        found = layers[kind] = act.after_selective_recompute(act.layer_terms(m, p, t, *kind), t, kind[2],
                                                             fp8=kind[1])
    return found


def _stage_activations(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage,
                       in_flight: float, layers: dict | None = None,
                       kinds: tuple | None = None) -> tuple[float, float, float]:
    """(GPU bytes of the stage's layers at peak, host bytes offloaded, recompute working set). `layers`: the
    estimate's layer activations by kind (_layer_activations), None for a stage on its own; `kinds`: the stage's
    _stage_kinds when the caller has them."""
    layers = {} if layers is None else layers
    kinds = _stage_kinds(m, p, t.low_precision, stage.index) if kinds is None else kinds
    by_kind = {k: _layer_activations(m, p, t, k, layers) for k in set(kinds)}
    if not kinds:
        return 0.0, 0.0, 0.0
    totals = {k: layer.total for k, layer in by_kind.items()}
    full = [totals[k] for k in kinds]
    if t.recompute_granularity == "full":
        # megatron-core recomputes per TransformerBlock, i.e. per virtual pipeline chunk of the stage.
        per_layer = iter(full)  # the stage's layers, chunk by chunk
        chunks = [[next(per_layer) for _ in r] for r in params.layer_ranges(m, p)[stage.index]]
        return _full_recompute(m, p, t, [c for c in chunks if c], in_flight)
    stored = sum(full) * in_flight
    host = 0.0
    if t.cpu_offloading and t.cpu_offloading_num_layers > 0:
        # Layer-level offloading (PP=1 only): N layers go to the host; one (two with double buffering) is
        # being copied at any time and still occupies the GPU.
        n = min(t.cpu_offloading_num_layers, len(full))
        staging = min(n, 2 if t.cpu_offloading_double_buffering else 1)
        host = sum(full[:n])
        stored -= (host - sum(full[:staging])) * in_flight
    elif t.fine_grained_offloading:
        moved = [act.offloaded_share(by_kind[k], t) for k in kinds]
        # The layer being computed keeps its tensors until they are copied out.
        host = (sum(moved) - max(moved)) * in_flight
        stored -= host
    return stored, host, 0.0


def _paged_stash(m: ModelShape, p: Parallelism, t: Training, stage: params.Stage,
                 in_flight: float, layers: dict | None = None,
                 kinds: tuple | None = None) -> tuple[float, float, float, float] | None:
    """moe_paged_stash (megatron-core 2a75ac12 transformer/moe/paged_stash.py): after each MoE layer's forward the
    saved expert tensors the fused grouped MLP marked are copied into one fixed CUDA buffer and the padded ones
    freed; backward reloads a layer's into padded tensors just before it. So the GPU keeps the buffer (sized for
    the peak of what is in flight, at the average rows: activations.stash_share) and the padded tensors of the
    layer being computed and of the one stashed or reloaded beside it (two: an upper bound, which also covers the
    EP-overlap schedule running one micro-batch's forward beside another's backward). Only FP8 layers' experts are
    fused (bf16 first/last layers keep theirs padded). (moved, buffer, working set, pinned host buffer) or None.
    `kinds`: the stage's _stage_kinds when the caller has them."""
    share = act.stash_share(m, p, t)
    if not share:
        return None
    layers = {} if layers is None else layers
    per_layer = []
    for kind in _stage_kinds(m, p, t.low_precision, stage.index) if kinds is None else kinds:
        moe, fp8 = kind[:2]
        if not (moe and fp8):
            continue
        layer = _layer_activations(m, p, t, kind, layers)
        per_layer.append(sum(v for k, v in layer.terms.items() if k in act.STASHED_TERMS))
    if not per_layer:
        return None
    moved = sum(per_layer) * in_flight
    b = t.expert_budget
    return moved, moved * share, sum(sorted(per_layer)[-2:]), moved * share * b.host / b.stash


def _full_recompute(m: ModelShape, p: Parallelism, t: Training, blocks: list[list[float]],
                    in_flight: float) -> tuple[float, float, float]:
    """Full recompute over the stage's transformer blocks (one per virtual pipeline chunk: megatron-core's
    TransformerBlock._checkpointed_forward counts `recompute_num_layers` within its own layers)."""
    k = max(1, t.recompute_num_layers or 1)
    keep = act.checkpoint_input(m, p, t)
    stored, working = 0.0, 0.0
    for full in blocks:
        if t.recompute_method == "block":
            # The first k layers of each block keep only their inputs; the others keep everything.
            recomputed = min(k, len(full))
            stored += keep * recomputed + sum(full[recomputed:])
            working = max(working, max(full[:recomputed]))
        else:
            # uniform: chunks of k layers keep one input each; backward rebuilds one chunk at a time.
            stored += keep * math.ceil(len(full) / k)
            working = max(working, sum(sorted(full, reverse=True)[:k]))
    return stored * in_flight, 0.0, working
