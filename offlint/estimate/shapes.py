"""The memory model's inputs: the sizes and settings `read_inputs` (inputs.py) reads from one resolved
configuration, as plain frozen dataclasses every part of the estimate shares.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Callable

from offlint.types import Value

Lookup = Callable[[str], Value]


def filled(cls: type) -> type:
    """A frozen dataclass whose __init__ puts each field straight into the instance's __dict__, where the one
    dataclass generates calls object.__setattr__ for each (its own __setattr__ refuses): the same object in a
    third of the time or less. For the estimate's input and count dataclasses, which every unit's memory inputs and
    every estimate build anew (ModelShape has 47 fields, and dataclasses.replace builds through __init__ too). Only for
    a class whose fields are all plain __init__ parameters, without __post_init__ or __slots__ (else TypeError)."""
    own = fields(cls)
    names = [f.name for f in own]
    if (hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__ or {"self", "made"} & set(names)
            or any(not f.init or f.kw_only or f.default_factory is not MISSING for f in own)):
        raise TypeError(f"{cls.__name__}: not a dataclass whose __init__ filled can write")
    defaults = {f"_default_{f.name}": f.default for f in own if f.default is not MISSING}
    parameters = ", ".join(f.name if f.default is MISSING else f"{f.name}=_default_{f.name}" for f in own)
    stores = "".join(f"    made[{name!r}] = {name}\n" for name in names)
    exec(f"def __init__(self, {parameters}):\n    made = self.__dict__\n{stores}", defaults)  # (as dataclasses does)
    init = defaults["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls


def rebuilt(instance, changes: dict):
    """dataclasses.replace(instance, **changes) for an instance of a `filled` class, whose __dict__ holds its fields
    and nothing else: that dict copied and changed, not every field read and passed to __init__ again (a Training
    has 40): a fifth of replace's time."""
    made = object.__new__(type(instance))
    held = made.__dict__
    held.update(instance.__dict__)
    held.update(changes)
    return made


@filled
@dataclass(frozen=True)
class ModelShape:
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int
    vocab_size: int
    seq_length: int
    gated_linear_unit: bool = False
    tied_embeddings: bool = True
    rms_norm: bool = False
    add_bias_linear: bool = True
    add_qkv_bias: bool = False
    qk_layernorm: bool = False
    learned_position_embeddings: bool = False
    hidden_dropout: float = 0.0
    # Softmax attention that keeps its s x s probabilities (megatron-core's local spec, attention_backend "local"
    # or "unfused"): bytes saved per score element (`unfused_score_bytes`); 0 for flash and fused attention.
    unfused_score_bytes: int = 0
    num_moe_experts: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_router_topk: int = 2
    moe_shared_expert_intermediate_size: int | None = None
    moe_shared_expert_gate: bool = False
    moe_layer_freq: int | tuple[int, ...] = 1
    moe_latent_size: int | None = None  # latent MoE: routed experts work in this width, projected from/to hidden
    # Multi-latent attention (DeepSeek-V2/V3): compressed KV (and Q, unless q_lora_rank is None) with per-head
    # no-position (qk_head_dim), rotary (qk_pos_emb_head_dim) and value (v_head_dim) sizes.
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_head_dim: int = 0
    qk_pos_emb_head_dim: int = 0
    v_head_dim: int = 0
    # Multi-token prediction: this many extra depths on the last pipeline stage; with `mtp_repeated_layer` one
    # MTP layer's weights serve every depth.
    mtp_num_layers: int = 0
    mtp_repeated_layer: bool = False
    # Hybrid models (megatron-core's MambaModel/HybridModel): the layer pattern, one symbol per layer ("M" Mamba,
    # "*" attention, "-" MLP, "E" MoE; "|" between pipeline stages), and the Mamba mixer's sizes.
    hybrid_pattern: str | None = None
    # A hybrid model's multi-token prediction: the layer pattern of one MTP depth (megatron-core's unified pattern
    # "<main>/<depth>/<depth>...", which Bridge's HybridModelProvider writes from mtp_hybrid_override_pattern);
    # `mtp_num_layers` depths run, each its own weights unless `mtp_repeated_layer`. None: no hybrid MTP.
    hybrid_mtp_pattern: str | None = None
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    mamba_num_groups: int = 0
    mamba_state_dim: int = 0
    mamba_chunk_size: int = 128
    mamba_mem_eff_path: bool = True  # use_mamba_mem_eff_path: the fused conv1d+scan kernel (False: separate ones)
    # Gated delta net (megatron-core's GatedDeltaNet, experimental_attention_variant "gdn" or its old name
    # "gated_delta_net"): linear attention in place of softmax attention, which stays in every
    # `linear_attention_freq`-th layer (an int) or where the per-layer list says 0; None: no GDN layers.
    linear_attention_freq: int | tuple[int, ...] | None = None
    gdn_key_heads: int = 0
    gdn_value_heads: int = 0
    gdn_key_head_dim: int = 0
    gdn_value_head_dim: int = 0
    gdn_conv_kernel: int = 0
    attention_output_gate: bool = False  # softmax attention's linear_qkv also projects a per-query output gate
    wan: "WanShape | None" = None  # Bridge's Wan diffusion transformer (offlint/estimate/diffusion.py); None: not Wan

    @property
    def mamba_d_inner(self) -> int:
        return self.mamba_num_heads * self.mamba_head_dim

    def is_gdn_layer(self, index: int) -> bool:
        """Whether layer `index` is a gated delta net layer (megatron-core's get_linear_attention_pattern)."""
        freq = self.linear_attention_freq
        if freq is None:
            return False
        return (index + 1) % freq != 0 if isinstance(freq, int) else bool(freq[index])

    def layer_kind(self, index: int) -> str | None:
        """A hybrid model's layer symbol; None for a GPT model's transformer layers."""
        return self.hybrid_pattern.replace("|", "")[index] if self.hybrid_pattern is not None else None

    def is_moe_layer(self, index: int) -> bool:
        if self.hybrid_pattern is not None:
            return self.layer_kind(index) == "E"
        if not self.num_moe_experts:
            return False
        if isinstance(self.moe_layer_freq, int):
            return index % self.moe_layer_freq == 0
        return bool(self.moe_layer_freq[index])


@filled
@dataclass(frozen=True)
class WanShape:
    """What Bridge's Wan model adds to a transformer's sizes (diffusion.py), and its mock batch: per packed sample
    `sample_tokens` video tokens and `context_tokens` text tokens, `packed_samples` samples per micro-batch."""

    crossattn_emb_size: int
    text_dim: int
    in_channels: int
    out_channels: int
    patch_temporal: int
    patch_spatial: int
    freq_dim: int
    sample_tokens: int
    context_tokens: int
    packed_samples: int
    layernorm_across_heads: bool = True


@filled
@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    pp: int = 1
    vpp: int | None = None
    cp: int = 1
    ep: int = 1
    etp: int = 1
    # An unset expert_tensor_parallel_size with EP > 1 and TP > 1: megatron-core takes TP's value
    # (ModelParallelConfig.__post_init__), Megatron Bridge since 6f2f546ef (July 2026) 1
    # (transformer_config._set_moe_expert_tensor_parallel_default); `etp` holds TP's, and oom.architectures
    # estimates both, for a verdict only where they agree.
    etp_open: bool = False
    sequence_parallel: bool = False
    world_size: int | None = None  # None: not known; the estimate then states what it assumed
    # How the decoder layers are split over pipeline stages when not evenly (params.layer_ranges): a custom
    # layout (megatron-core's flat list, chunk-major, of "embedding"/"decoder"/"mtp"/"loss" per stage), the
    # first/last stage's layer counts, or the embedding/loss counted as a layer.
    layout: tuple[tuple[str, ...], ...] | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    def min_world_size(self) -> int:
        """The fewest GPUs this layout runs on (dense and expert layouts both have to tile the world)."""
        from math import lcm

        return lcm(self.tp * self.cp, self.etp * self.ep) * self.pp

    def tiles(self, world: int, experts: bool) -> bool:
        """Whether `world` GPUs take this layout: megatron-core's initialize_model_parallel raises unless TP x PP x CP
        and, for a MoE model, ETP x EP x PP divide the world size."""
        return world % (self.tp * self.pp * self.cp) == 0 and not (experts and (world // self.pp) % (self.ep * self.etp))

    def data_parallel(self, world: int) -> int:
        return max(1, world // (self.tp * self.pp * self.cp))

    def expert_data_parallel(self, world: int) -> int:
        return max(1, world // (self.etp * self.ep * self.pp))


@filled
@dataclass(frozen=True)
class LowPrecision:
    """FP8 training as megatron-core and Transformer Engine run it (offlint/estimate/precision.py)."""

    recipe: str  # "delayed" | "tensorwise" | "mxfp8" | "blockwise" | "nvfp4" (FP4: `fp4="e2m1"`)
    params: bool = False  # fp8_param(_gather) / fp4_param(_gather): primary weights quantized, no bf16 copy
    # Per-tensor scaling keeps a separate FP8 transpose (Hopper; not Blackwell). None: the GPU's architecture is
    # not known, and the estimate is made both ways (oom.architectures).
    transpose: bool | None = True
    bf16_layers_start: int = 0  # first_last_layers_bf16: layers that stay bf16
    bf16_layers_end: int = 0
    amax_history: int = 1  # delayed scaling's amax history length
    attention: bool = False  # fp8_dot_product_attention: the fused attention saves FP8 q, k, v
    # The recipe FP8 attention runs under when it is not the linears' own: under NVFP4, Transformer Engine's
    # NVTE_DPA_FP8_RECIPE ("tensorwise" for Float8CurrentScaling, "mxfp8" for MXFP8BlockScaling).
    attention_recipe: str | None = None
    output_layer: bool = False  # fp8_output_proj with MXFP8: the LM head is a Transformer Engine MXFP8 linear


@filled
@dataclass(frozen=True)
class ExpertBudget:
    """moe_expert_rank_capacity_factor: the flex dispatcher's fixed receive budget per expert rank and MoE layer
    (HybridEP, NCCL EP), `factor` times the balanced load and rounded up to `align` rows; the experts compute on
    the whole buffer and save it padded (activations.expert_rows). `fused`: Transformer Engine's fused grouped MLP
    (CuTe DSL) runs the experts; None: it would, but the GPU's compute capability is not known (the estimate is
    made both ways, oom.architectures). `stash`: moe_paged_stash's CUDA buffer factor where the stash can take the
    experts' saved tensors (only the fused grouped MLP marks them), else None; `host`: its pinned host buffer
    factor."""

    factor: float
    backend: str  # "hybridep" | "ncclep"
    align: int = 256  # get_align_size_for_quantization with the op fuser (both backends require it)
    fused: bool | None = False
    stash: float | None = None
    host: float = 0.0


@filled
@dataclass(frozen=True)
class Peft:
    """LoRA adapters on a frozen base (offlint/estimate/lora.py)."""

    targets: tuple[str, ...]  # among lora.TARGETS
    dim: int


@filled
@dataclass(frozen=True)
class FrozenLM:
    """A frozen language model and vision tower with a trained vision projection (Bridge's Qwen3-VL providers with
    freeze_language_model and freeze_vision_model, not freeze_vision_projection; offlint/estimate/frozen_lm.py).
    The tower's sizes, in its Hugging Face vision_config names."""

    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    in_channels: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    num_position_embeddings: int
    out_hidden_size: int
    deepstack_mergers: int  # len(deepstack_visual_indexes): a patch merger per index
    # What the frozen MTP, shared-expert and gated-attention layers keep (frozen_lm.layer_terms): "" nothing open
    # (no such layers), None open (oom.architectures: both bounds), "upper" or "lower" the bound estimated.
    bound: str | None = ""


@filled
@dataclass(frozen=True)
class TrainedVLM:
    """A VLM whose language model trains (Bridge's Qwen3-VL and Qwen3.5-VL providers with freeze_language_model
    False; offlint/estimate/frozen_lm.py): its tower's sizes, whether the tower trains (freeze_vision_model False)
    or only its patch mergers do, and the image patches of a micro-batch, which offlint does not read (what the
    Hugging Face processor makes of the dataset's images): "bound", every token of the micro-batch a vision token;
    "none", no image; None: open, estimated both ways (oom.architectures), a verdict only where they agree."""

    tower: FrozenLM
    tower_trained: bool
    patches: str | None = None
    # Vision CUDA graphs (vision_cuda_graph_impl="transformer_engine", frozen_lm.py "Vision CUDA graphs"): the
    # patch length every micro-batch's tower runs padded to, or None without them; and what one graphed layer's
    # backward keeps reserved in the graphs' pool (frozen_lm.graph_parts): "" nothing open (no graphs), None open
    # (oom.architectures: both bounds), "upper" or "lower" the bound estimated.
    graph_patches: int | None = None
    graph_bound: str | None = ""


@filled
@dataclass(frozen=True)
class Training:
    micro_batch_size: int = 1
    global_batch_size: int | None = None
    params_bytes: int = 2  # bf16/fp16 = 2, fp32 = 4
    grads_fp32: bool = True
    distributed_optimizer: bool = False
    optimizer: str = "adam"
    precision_aware: bool = False
    main_params_bytes: int = 4
    exp_avg_bytes: int = 4
    exp_avg_sq_bytes: int = 4
    store_param_remainders: bool = True
    optimizer_cpu_offload: bool = False
    optimizer_offload_fraction: float = 0.0
    overlap_cpu_optimizer_d2h_h2d: bool = False
    manual_gc: bool = False  # train.manual_gc: the training loop runs gc.collect() before the first step
    recompute_granularity: str | None = None  # None | "full" | "selective"
    recompute_method: str | None = None  # "uniform" | "block"
    recompute_num_layers: int | None = None
    recompute_modules: tuple[str, ...] = ("core_attn",)
    moe_layer_recompute: bool = False
    # False: megatron-core keeps a hybrid MoE layer's pre-MLP norm output under selective 'layernorm' recompute
    # (CUDA graphs capturing the router where it cannot recompute it: inputs.pre_mlp_norm_recomputed)
    pre_mlp_norm_recompute: bool = True
    cpu_offloading: bool = False
    cpu_offloading_num_layers: int = 0
    cpu_offloading_double_buffering: bool = False
    fine_grained_offloading: bool = False
    offload_modules: tuple[str, ...] = ()
    activation_offload_fraction: float = 1.0
    compute_dtype: str = "bf16"  # the GEMMs' precision, for the step-time model only ("fp8" in calibration)
    moe_router_graphed: bool = False  # CUDA graphs capture the MoE router and preprocessing (host overhead)
    # The language model's Transformer Engine CUDA graphs (cuda_graph_impl="transformer_engine"): the module names
    # their scope captures, () for whole layers; None without them (lm_graphs.py: their static buffers).
    te_graph_modules: tuple[str, ...] | None = None
    low_precision: LowPrecision | None = None  # FP8 or NVFP4 training; None: bf16/fp16/fp32 GEMMs
    fsdp: str | None = None  # Megatron-FSDP's data_parallel_sharding_strategy; None: megatron-core DDP
    fsdp_unit_size: int | None = None  # ddp.suggested_communication_unit_size (elements); None: its default
    fsdp_double_buffer: bool = False
    # ddp.num_distributed_optimizer_instances: the distributed optimizer (and Megatron-FSDP: HSDP) shards within
    # data-parallel groups this many times smaller and replicates across them; `fsdp_outer_optim`
    # (outer_dp_sharding_strategy "optim") shards Megatron-FSDP's main weights and optimizer state across them too.
    optimizer_instances: int = 1
    fsdp_outer_optim: bool = False
    peft: Peft | None = None  # LoRA on a frozen base; None: every parameter is trained
    frozen_lm: FrozenLM | None = None  # a VLM training only its vision projection; None: not such a recipe
    vlm: TrainedVLM | None = None  # a VLM whose language model trains; None: not such a recipe
    expert_budget: ExpertBudget | None = None  # moe_expert_rank_capacity_factor (and moe_paged_stash); None: unset
    fused_grouped_mlp: bool = False  # no factor: TE's fused grouped MLP runs the experts under moe_act recompute


@dataclass
class Inputs:
    model: ModelShape | None
    parallel: Parallelism | None
    training: Training | None
    unknown: dict[str, str] = field(default_factory=dict)  # key -> why it is not known
    unsupported: list[str] = field(default_factory=list)  # features the model does not cover
    world_size_source: str = ""
    assumed: dict[str, str] = field(default_factory=dict)  # key -> the assumption made because it is unknown
    # The dataset's seq_length (key, value) where it differs from the model's, which ModelShape holds: the run
    # uses one or the other depending on how it is launched, so the estimate is made at both (oom.architectures).
    other_seq_length: tuple[str, int] | None = None
    # A VLM micro-batch whose tokens depend on the data (the tree's training step pads to seq_length only under a
    # condition this layout misses; inputs_vlm.read_micro_batch_tokens): the fewest tokens the step gives, at
    # which the estimate is also made, for a verdict only where both agree (oom.architectures); None: padded.
    short_tokens: int | None = None

    @property
    def complete(self) -> bool:
        return not self.unknown and not self.unsupported and None not in (self.model, self.parallel, self.training)

    def with_(self, model: ModelShape | None = None, parallel: Parallelism | None = None,
              training: Training | None = None) -> "Inputs":
        return Inputs(model or self.model, parallel or self.parallel, training or self.training,
                      dict(self.unknown), list(self.unsupported), self.world_size_source, dict(self.assumed),
                      self.other_seq_length, self.short_tokens)


def with_training(inputs: Inputs, **changes) -> Inputs:
    return inputs.with_(training=replace(inputs.training, **changes))


def with_parallel(inputs: Inputs, **changes) -> Inputs:
    return inputs.with_(parallel=replace(inputs.parallel, **changes))
