"""The sizes and settings the memory model needs, read from one resolved configuration.

Every input is three-valued like the rest of offlint: a key that the configuration does not pin down is named in
`Inputs.unknown` with the reason, and never replaced by a guess. Model sizes whose megatron-core default is a
placeholder (`num_layers=0`, `hidden_size=0`) count as unknown when unset: a Bridge recipe that takes its model
from `AutoBridge.from_hf_pretrained(...)` has real sizes that are simply not visible in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

from offlint import named_precision, pipeline_layout
from offlint.types import Source, Unknown, Value

Lookup = Callable[[str], Value]

# A Bridge recipe name carries its GPU count (`llama3_8b_pretrain_16gpu_h100_bf16_config`).
_GPUS_IN_NAME = re.compile(r"_(\d+)gpus?_")


def gpus_in_name(unit_name: str) -> int | None:
    """The GPU count a Bridge recipe name gives (`..._64gpu_gb300_bf16_config`: 64), None when it gives none."""
    match = _GPUS_IN_NAME.search(unit_name + "_")
    return int(match.group(1)) if match else None


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


@dataclass(frozen=True)
class Peft:
    """LoRA adapters on a frozen base (offlint/estimate/lora.py)."""

    targets: tuple[str, ...]  # among lora.TARGETS
    dim: int


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
    recompute_granularity: str | None = None  # None | "full" | "selective"
    recompute_method: str | None = None  # "uniform" | "block"
    recompute_num_layers: int | None = None
    recompute_modules: tuple[str, ...] = ("core_attn",)
    moe_layer_recompute: bool = False
    # False: megatron-core keeps a hybrid MoE layer's pre-MLP norm output under selective 'layernorm' recompute
    # (CUDA graphs capturing the router where it cannot recompute it: inputs._pre_mlp_norm_recomputed)
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

    @property
    def complete(self) -> bool:
        return not self.unknown and not self.unsupported and None not in (self.model, self.parallel, self.training)

    def with_(self, model: ModelShape | None = None, parallel: Parallelism | None = None,
              training: Training | None = None) -> "Inputs":
        return Inputs(model or self.model, parallel or self.parallel, training or self.training,
                      dict(self.unknown), list(self.unsupported), self.world_size_source, dict(self.assumed),
                      self.other_seq_length)


_DTYPE_BYTES = {"torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2, "torch.uint8": 1,
                "torch.float8_e4m3fn": 1, "fp32": 4, "fp16": 2, "bf16": 2, "float32": 4, "float16": 2,
                "bfloat16": 2}


class _Reader:
    def __init__(self, lookup: Lookup):
        self.lookup = lookup
        self.unknown: dict[str, str] = {}
        self.assumed: dict[str, str] = {}
        self.other_seq_length: tuple[str, int] | None = None

    def get(self, key: str, fallback: object = None) -> object:
        """The effective value; an unknown one is recorded and replaced by `fallback` so reading can go on."""
        value = self.lookup(key)
        if value.is_unknown:
            self.unknown[key] = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            return fallback
        return value.value if value.value is not None else fallback

    def size(self, key: str, *alternatives: str) -> int:
        """A required size: unknown when unset or left at megatron-core's placeholder 0."""
        for name in (key, *alternatives):
            value = self.lookup(name)
            if not value.is_unknown and value.state == "known" and _positive_int(value.value):
                return int(value.value)
        value = self.lookup(key)
        if value.is_unknown and isinstance(value.value, Unknown):
            self.unknown[key] = value.value.reason
        else:
            self.unknown[key] = f"`{key}` is not set (model sizes are needed; set it or pass --override {key}=N)"
        return 0

    def soft_int(self, key: str, assumption: str) -> int | None:
        """A setting the estimate can go on without: unknown becomes None, with the assumption recorded."""
        value = self.lookup(key)
        if not value.is_unknown and _positive_int(value.value):
            return int(value.value)
        if value.is_unknown:
            self.assumed[key] = assumption
        return None

    def optional_int(self, key: str) -> int | None:
        value = self.get(key)
        return int(value) if _positive_int(value) else None

    def dtype_bytes(self, key: str, default: int = 4) -> int:
        value = self.get(key)
        return _DTYPE_BYTES.get(str(value).replace("'", ""), default) if value is not None else default


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def read_inputs(lookup: Lookup, unit_name: str = "", world_size: int | None = None,
                fp8_transpose: bool | None = None) -> Inputs:
    """Read everything the memory model uses from `lookup` (a ResolvedUnit's `get`). `fp8_transpose` is the
    device's (devices.Device.fp8_transpose): None leaves per-tensor FP8's transpose open (oom.architectures)."""
    r = _Reader(named_precision.resolving(lookup))  # a precision recipe's name as the record it builds
    model = _read_model(r)
    parallel, source = _read_parallel(r, unit_name, world_size)
    training = _read_training(r)
    unsupported = _unsupported(r, unit_name)
    low, why = _read_low_precision(r, unit_name, fp8_transpose)
    fsdp, fsdp_why = _read_fsdp(r, training, low)
    if fsdp_why:
        unsupported.append(fsdp_why)
    peft, peft_why = _read_peft(r, model, training, low, fsdp)
    if peft_why:
        unsupported.append(peft_why)
    training = replace(training, peft=peft)
    frozen, frozen_why = _read_frozen_lm(r, model, parallel, training, low, fsdp)
    if frozen_why:
        unsupported.append(frozen_why)
    training = replace(training, frozen_lm=frozen)
    vlm, vlm_why = _read_trained_vlm(r, model, parallel, training, low, fsdp)
    if vlm_why:
        unsupported.append(vlm_why)
    training = replace(training, vlm=vlm)
    model, wan_why = _read_wan(r, model, parallel, training, low, fsdp)
    if wan_why:
        unsupported.append(wan_why)
    hybrid_why = _hybrid_unsupported(r, model, parallel, training, low, fsdp) or _hybrid_unread(r, unit_name)
    if hybrid_why:
        unsupported.append(hybrid_why)
    elif model.hybrid_pattern is not None:
        training = replace(training, pre_mlp_norm_recompute=_pre_mlp_norm_recomputed(r, model, training))
    gdn_why = _gdn_unsupported(r, model, parallel, training, low, fsdp)
    if gdn_why:
        unsupported.append(gdn_why)
    if fsdp:
        training = replace(training, fsdp=fsdp, distributed_optimizer=True,  # Bridge forces it with FSDP
                           fsdp_unit_size=r.optional_int("ddp.suggested_communication_unit_size"),
                           fsdp_double_buffer=bool(r.get("ddp.fsdp_double_buffer", False)),
                           fsdp_outer_optim=r.get("ddp.outer_dp_sharding_strategy") == "optim")
    instances, instances_why = _read_optimizer_instances(r, parallel)
    training = replace(training, optimizer_instances=instances)
    if instances_why:
        unsupported.append(instances_why)
    if why and why not in unsupported:
        unsupported.append(why)
    budget, budget_why = _read_expert_budget(r, model, training, low, fp8_transpose)
    if budget is None and not budget_why:
        fused_mlp, budget_why = _read_op_fuser_moe_act(r, model, training, low, fp8_transpose)
        training = replace(training, fused_grouped_mlp=fused_mlp)
    if budget_why:
        unsupported.append(budget_why)
    training = replace(training, expert_budget=budget)
    if low is not None:
        training = replace(training, low_precision=low, compute_dtype="fp4" if low.recipe == "nvfp4" else "fp8")
    return Inputs(model, parallel, training, r.unknown, unsupported, source, r.assumed, r.other_seq_length)


def _read_model(r: _Reader) -> ModelShape:
    hidden = r.size("model.hidden_size")
    heads = r.size("model.num_attention_heads")
    ffn = r.optional_int("model.ffn_hidden_size") or 4 * hidden
    experts = r.optional_int("model.num_moe_experts")
    freq = r.get("model.moe_layer_freq", 1)
    freq = tuple(int(f) for f in freq) if isinstance(freq, (list, tuple)) else int(freq) if _positive_int(freq) else 1
    hybrid = _read_hybrid(r, hidden)
    get = _hybrid_provider_get(r) if hybrid else r.get
    return ModelShape(
        num_layers=_hybrid_num_layers(hybrid["hybrid_pattern"]) if hybrid else r.size("model.num_layers"),
        hidden_size=hidden,
        ffn_hidden_size=ffn,
        num_attention_heads=heads,
        num_query_groups=r.optional_int("model.num_query_groups") or heads,
        kv_channels=r.optional_int("model.kv_channels") or (hidden // heads if heads else 0),
        vocab_size=_read_vocab(r),
        seq_length=_read_seq_length(r),
        gated_linear_unit=bool(r.get("model.gated_linear_unit", False)),
        tied_embeddings=bool(get("model.share_embeddings_and_output_weights", True)),
        rms_norm=get("model.normalization", "LayerNorm") == "RMSNorm",
        add_bias_linear=bool(get("model.add_bias_linear", True)),
        add_qkv_bias=bool(r.get("model.add_qkv_bias", False)),
        qk_layernorm=bool(r.get("model.qk_layernorm", False)),
        learned_position_embeddings=get("model.position_embedding_type", "learned_absolute") == "learned_absolute",
        hidden_dropout=float(get("model.hidden_dropout", 0.1) or 0.0),
        num_moe_experts=experts,
        moe_ffn_hidden_size=(r.optional_int("model.moe_ffn_hidden_size") or ffn) if experts else None,
        moe_router_topk=int(r.get("model.moe_router_topk", 2) or 2) if experts else 2,
        moe_shared_expert_intermediate_size=r.optional_int("model.moe_shared_expert_intermediate_size") if experts
        else None,
        moe_shared_expert_gate=bool(r.get("model.moe_shared_expert_gate", False)) if experts else False,
        moe_layer_freq=freq,
        moe_latent_size=r.optional_int("model.moe_latent_size") if experts else None,
        **_read_mla(r),
        **({} if hybrid else _read_mtp(r)),  # a hybrid model's MTP depths come with its pattern (_hybrid_mtp)
        **hybrid,
        **_read_gdn(r),
        attention_output_gate=bool(r.get("model.attention_output_gate", False)),
    )


def _read_seq_length(r: _Reader) -> int:
    """The tokens of one sample: the model's and the dataset's seq_length, which Bridge's ConfigContainer.validate
    asserts are equal. Where a recipe sets them apart the run depends on how it is launched (Bridge's
    scripts/training sync the model to the dataset, scripts/performance rebuild the dataset from the model): the
    model's is returned and the dataset's kept in `r.other_seq_length`, for a verdict only where both agree."""
    model = r.lookup("model.seq_length")
    data = next((v for v in map(r.lookup, ("dataset.seq_length", "dataset.sequence_length"))
                 if v.state == "known" and _positive_int(v.value)), None)
    if data is not None and model.state == "known" and _positive_int(model.value) and model.value != data.value:
        r.other_seq_length = (data.key, int(data.value))
        return int(model.value)
    return r.size("model.seq_length", "dataset.seq_length", "dataset.sequence_length")


# megatron-core's NullTokenizer counted an end-of-document token on top of its vocab_size before 0.18 (Megatron-LM
# c9dfe3479 made vocab_size the configured one).
_NULL_TOKENIZER_EXTRA_TOKEN_BEFORE = (0, 18)
_PROVIDER_VOCAB_DIVISOR = 128  # make_vocab_size_divisible_by of Bridge's GPT and hybrid model providers


def _read_vocab(r: _Reader) -> int:
    """The model's vocabulary as Bridge sizes it at setup (training/setup.py, _validate_and_set_vocab_size): the
    model's own `vocab_size` as it is, unless it is unset or the tokenizer section sets `use_tokenizer_vocab_size`
    (Bridge's pretraining recipes do); then the tokenizer's, which the provider pads to a multiple of
    `make_vocab_size_divisible_by` x TP (should_pad_vocab). Only the NullTokenizer's size is in the configuration;
    a Hugging Face tokenizer's length is read at run time: offlint's table of public tokenizers
    (model_sizes.tokenizer_length) gives it where public sources state or bound it, else a preset `vocab_size` is
    assumed to be it (the estimate says which)."""
    model = r.lookup("model.vocab_size")
    preset = model.state == "known" and _positive_int(model.value)
    flag = r.lookup("tokenizer.use_tokenizer_vocab_size")
    if model.is_unknown or (preset and flag.value is not True) or flag.state == "unknown":
        return r.size("model.vocab_size", "tokenizer.vocab_size")  # as configured, or no tokenizer section read
    kind = r.lookup("tokenizer.tokenizer_type")
    size = r.lookup("tokenizer.vocab_size")
    if kind.state == "known" and kind.value == "NullTokenizer" and size.state == "known" and _positive_int(size.value):
        tokens = int(size.value) + (1 if _before(r.lookup, _NULL_TOKENIZER_EXTRA_TOKEN_BEFORE) else 0)
    elif kind.state == "known" and kind.value == "HuggingFaceTokenizer" and _tabled_tokenizer(r):
        return _tabled_tokenizer_vocab(r)
    elif preset and kind.state == "known" and kind.value == "HuggingFaceTokenizer":
        tokens = int(model.value)
        r.assumed["tokenizer.vocab_size"] = (
            f"the Hugging Face tokenizer {r.lookup('tokenizer.tokenizer_model').value} has the model's {tokens} "
            "tokens (use_tokenizer_vocab_size: Bridge sizes the model from the tokenizer's length)")
    else:
        what = kind.value if kind.state == "known" else "tokenizer"
        r.unknown["model.vocab_size"] = (
            f"the model's vocabulary is the {what}'s size at run time (Bridge takes it when model.vocab_size is "
            "unset or tokenizer.use_tokenizer_vocab_size is True), which the configuration does not state; "
            "pass --override model.vocab_size=N")
        return 0
    return _padded_vocab(r, tokens)


def _padded_vocab(r: _Reader, tokens: int) -> int:
    divisor = r.optional_int("model.make_vocab_size_divisible_by") or _PROVIDER_VOCAB_DIVISOR
    multiple = divisor * (r.optional_int("model.tensor_model_parallel_size") or 1)
    return -(-tokens // multiple) * multiple


def _tabled_tokenizer(r: _Reader) -> str | None:
    """The Hugging Face id of the unit's tokenizer when offlint's table of public tokenizers knows its length."""
    from offlint import model_sizes  # the table's reader, loaded when a unit names a Hugging Face tokenizer

    name = r.lookup("tokenizer.tokenizer_model")
    if name.state == "known" and isinstance(name.value, str) and model_sizes.tokenizer_length(name.value):
        return name.value
    return None


def _tabled_tokenizer_vocab(r: _Reader) -> int:
    """The padded vocabulary of a tokenizer in offlint's table, and where its length came from (`r.assumed`). A
    length the sources only bound gives a vocabulary only where both ends pad to the same size; a revision the
    recipe pins (`hf_tokenizer_kwargs`) other than the ones measured is said."""
    from offlint import model_sizes

    hf_id = _tabled_tokenizer(r)
    low, high = model_sizes.tokenizer_length(hf_id)
    sources = model_sizes.tokenizer_sources(hf_id)
    where = f"offlint's table of public tokenizers, from {sources[0].split(' (')[0]}" + (
        f" and {len(sources) - 1} more source{'s' if len(sources) > 2 else ''}" if len(sources) > 1 else "")
    counted = f"{low}" if low == high else f"between {low} and {high}"
    kwargs = r.get("tokenizer.hf_tokenizer_kwargs")
    pinned = kwargs.get("revision") if isinstance(kwargs, dict) else None
    measured = model_sizes.tokenizer_revisions(hf_id)
    revision = ""
    if isinstance(pinned, str) and measured and not any(m.startswith(pinned) or pinned.startswith(m)
                                                          for m in measured):
        revision = (f"; measured at revision {', '.join(m[:8] for m in measured)}, and the recipe pins {pinned[:8]}: "
                    "see the table's sources for what bounds it there")
    padded = {_padded_vocab(r, low), _padded_vocab(r, high)}
    if len(padded) > 1:
        r.unknown["model.vocab_size"] = (
            f"the Hugging Face tokenizer {hf_id} has {counted} tokens ({where}{revision}), which Bridge pads to "
            f"{' or '.join(map(str, sorted(padded)))} rows: pass --override model.vocab_size=N")
        return 0
    r.assumed["tokenizer.vocab_size"] = (
        f"the Hugging Face tokenizer {hf_id} has {counted} tokens, len(tokenizer) ({where}{revision}); "
        "Bridge sizes the model from the tokenizer's length and pads it")
    return padded.pop()


def _before(lookup: Lookup, release: tuple[int, int]) -> bool:
    """Whether the megatron-core version the lookup resolves against (a ResolvedUnit's `get` carries it, and
    named_precision.resolving's wrapper keeps it) is older than `release`; False for a lookup without one."""
    version = getattr(getattr(lookup, "__self__", None), "version", None) or getattr(lookup, "version", None)
    return version is not None and (version.major, version.minor) < release


_HYBRID_KEYS = ("model.hybrid_layer_pattern", "model.hybrid_override_pattern")


def _read_hybrid(r: _Reader, hidden: int) -> dict:
    """A hybrid model's layer pattern and Mamba sizes ({} for a GPT model). Bridge's HybridModelProvider takes
    `hybrid_layer_pattern`, or the deprecated `hybrid_override_pattern` in its place, and megatron-core's
    TransformerConfig the Mamba sizes (defaults: head dim 64, 8 groups, state 128; heads = 2 x hidden / head dim
    when mamba_num_heads is unset, MambaMixer's expand=2). The pattern is kept as written; `_hybrid_unsupported`
    refuses what offlint does not model."""
    pattern = None
    for key in _HYBRID_KEYS:
        value = r.lookup(key)
        if value.is_unknown:
            r.unknown[key] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
                " (the memory model would need the hybrid layer pattern)"
            return {}
        if value.state == "known" and isinstance(value.value, str) and value.value:
            pattern = value.value
            break
    if pattern is None:
        return {}
    head_dim = r.optional_int("model.mamba_head_dim") or 64
    return dict(hybrid_pattern=pattern.split(_MTP_SEPARATOR)[0], **_hybrid_mtp(r, pattern)[0],
                mamba_head_dim=head_dim,
                mamba_num_heads=r.optional_int("model.mamba_num_heads") or (2 * hidden // head_dim),
                mamba_num_groups=r.optional_int("model.mamba_num_groups") or 8,
                mamba_state_dim=r.optional_int("model.mamba_state_dim") or 128,
                mamba_chunk_size=r.optional_int("model.mamba_chunk_size") or 128,
                mamba_mem_eff_path=r.get("model.use_mamba_mem_eff_path", True) is not False)


# Bridge's HybridModelProvider (models/hybrid/hybrid_provider.py at 067f987) overrides these megatron-core
# TransformerConfig defaults; offlint's reader gives a provider's unset fields megatron-core's defaults.
HYBRID_PROVIDER_DEFAULTS = {"model.share_embeddings_and_output_weights": False, "model.normalization": "RMSNorm",
                            "model.add_bias_linear": False, "model.hidden_dropout": 0.0,
                            "model.position_embedding_type": "none"}


def _hybrid_provider_get(r: _Reader) -> Callable[[str, object], object]:
    """`r.get` for a hybrid model: a field left at its default takes HybridModelProvider's default where the
    pattern was set in Python (megatron-core's TransformerConfig has no pattern field, so that is Bridge's
    provider or a subclass); a Megatron-LM launch (--hybrid-layer-pattern) keeps argparse's defaults."""
    pattern = next((v for v in map(r.lookup, _HYBRID_KEYS) if v.state == "known"), None)
    bridge = pattern is not None and (pattern.assignment is None or pattern.assignment.source != Source.MLM)

    def get(key: str, fallback: object = None) -> object:
        if bridge and key in HYBRID_PROVIDER_DEFAULTS and r.lookup(key).state == "default":
            return HYBRID_PROVIDER_DEFAULTS[key]
        return r.get(key, fallback)

    return get


def _hybrid_num_layers(pattern: str) -> int:
    """Bridge's HybridModelProvider.finalize takes num_layers from the pattern (asserting an explicit one agrees)."""
    return len(pattern.split(_MTP_SEPARATOR)[0].replace("|", ""))


_MTP_SEPARATOR = "/"  # megatron-core's Symbols.MTP_SEPARATOR (models/hybrid/hybrid_layer_allocation.py)


def _hybrid_mtp(r: _Reader, written: str) -> tuple[dict, str]:
    """A hybrid model's MTP depths as Bridge 067f987 and its megatron-core 2a75ac12 build them (line numbers of
    megatron-core 0.19.2, the same code): the ModelShape fields ({} without depths) and why there is no verdict
    ("" when there is one). HybridModelProvider.finalize
    (models/hybrid/hybrid_provider.py:198-233) rewrites the pattern as "<main>/<mtp>/<mtp>..." with
    mtp_hybrid_override_pattern repeated mtp_num_layers times (at least once with mtp_use_repeated_layer; no
    copies, no depths), and sets mtp_num_layers to the copies unless the layer is repeated. A pattern written
    with "/" (and no override) keeps mtp_num_layers as set (the provider's default is 0). megatron-core's
    HybridModel (models/hybrid/hybrid_model.py:199-226) builds the MTP block only where the pattern has depths
    and mtp_num_layers is not None; MultiTokenPredictionBlock builds one layer with mtp_use_repeated_layer, else
    one per "/" part, and runs mtp_num_layers of them (transformer/multi_token_prediction.py:1699-1750, 1825-1826)."""
    _, *tails = written.split(_MTP_SEPARATOR)
    keys = ("model.mtp_hybrid_override_pattern", "model.mtp_num_layers", "model.mtp_use_repeated_layer")
    values = [r.lookup(k) for k in keys]
    for value in values:
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[value.key] = f"{reason} (the memory model would need the hybrid model's MTP depths)"
            return {}, ""
    override, depths, repeated = values
    bridge = next((v for v in map(r.lookup, _HYBRID_KEYS) if v.state == "known"), None)
    bridge = bridge is not None and (bridge.assignment is None or bridge.assignment.source != Source.MLM)
    n = depths.value if depths.state == "known" else (0 if bridge else None)  # HybridModelProvider: 0
    if not (n is None or isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        return {}, f"mtp_num_layers={n!r} in a hybrid model (not a number of depths)"
    repeated = repeated.state == "known" and bool(repeated.value)
    if override.state == "known" and isinstance(override.value, str) and override.value:
        copies = max(1, n or 0) if repeated else (n or 0)
        if not copies:
            return {}, ""  # "<main>/" with nothing after: no depths
        pattern, built = override.value, copies
        n = copies if not repeated or n is None else n
    elif any(tails):
        if len(set(tails)) > 1:
            return {}, (f"MTP depth patterns {sorted(set(tails))} differ (megatron-core's parse_hybrid_pattern "
                        "requires every depth's to be the same)")
        pattern, built = tails[0], len(tails)
        if n is None:
            return {}, ""  # mtp_on_this_rank(mtp_num_layers=None) is False: no MTP block is built
    else:
        return {}, ""  # no depths in the pattern: HybridModel builds none, whatever mtp_num_layers says
    if not n:
        return {}, (f"a hybrid pattern with MTP depths ({pattern!r}) and mtp_num_layers=0 (HybridModel builds the "
                    "MTP block but asserts mtp_num_layers > 0 in its forward)")
    if not repeated and n != built:
        return {}, (f"mtp_num_layers={n} with {built} MTP depths in the hybrid pattern (MultiTokenPredictionBlock "
                    "builds one layer per depth and runs mtp_num_layers of them; not modelled)")
    bad = set(pattern) - (_HYBRID_SYMBOLS - {"|"})
    if bad:
        return {}, (f"MTP layer symbols {''.join(sorted(bad))!r} (only Mamba 'M', attention '*', MLP '-' and MoE "
                    "'E' layers are modelled; megatron-core refuses '|' there)")
    return dict(mtp_num_layers=n, mtp_repeated_layer=repeated, hybrid_mtp_pattern=pattern), ""


_HYBRID_SYMBOLS = frozenset("M*-E|")


# Megatron-LM's entry scripts for hybrid models; offlint's flag table does not read their --hybrid-*/--mamba-*
# flags, so without this the model would be read as a GPT model.
_MLM_HYBRID_SCRIPTS = re.compile(r"^pretrain_(mamba|hybrid)\.py\b")
_MAMBA_KEYS = ("model.mamba_num_heads", "model.mamba_head_dim", "model.mamba_num_groups", "model.mamba_state_dim",
               "model.hybrid_attention_ratio", "model.hybrid_mlp_ratio")


def _hybrid_unread(r: _Reader, unit_name: str) -> str:
    """Why a hybrid model offlint cannot see as one has no verdict ("" when there is no sign of one): a Megatron-LM
    hybrid launch, or Mamba sizes or hybrid ratios set without a layer pattern (HybridModelProvider then builds
    its layers from the ratios, or Mamba layers only)."""
    if _MLM_HYBRID_SCRIPTS.match(unit_name):
        return (f"a Megatron-LM hybrid model launch ({unit_name.split()[0]}: its --hybrid-* and --mamba-* flags "
                "are not read)")
    if any(v.is_unknown or (v.state == "known" and v.value) for v in map(r.lookup, _HYBRID_KEYS)):
        return ""  # a pattern (or an unknown one, recorded by _read_hybrid)
    if any(r.lookup(k).state == "known" and r.lookup(k).value for k in _MAMBA_KEYS):
        return ("Mamba sizes or hybrid ratios without a hybrid layer pattern (layers from ratios, or Mamba "
                "layers only: not modelled)")
    return ""


def _hybrid_unsupported(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                        fsdp: str | None) -> str:
    """Why a hybrid model has no verdict ("" when it is modelled, or not hybrid)."""
    pattern = m.hybrid_pattern
    if pattern is None:
        return ""
    mtp_why = _hybrid_mtp_unsupported(r, m, t, low)
    if mtp_why:
        return mtp_why
    if set(pattern) - _HYBRID_SYMBOLS:
        return (f"hybrid layer symbols {''.join(sorted(set(pattern) - _HYBRID_SYMBOLS))!r} (only Mamba 'M', "
                "attention '*', MLP '-' and MoE 'E' layers are modelled)")
    explicit = r.lookup("model.num_layers")
    if explicit.state == "known" and _positive_int(explicit.value) and explicit.value != m.num_layers:
        return (f"num_layers={explicit.value} with a hybrid pattern of {m.num_layers} layers (Bridge's "
                "HybridModelProvider asserts they agree)")
    if m.mamba_num_heads % p.tp or m.mamba_num_groups % p.tp or m.mamba_num_heads % m.mamba_num_groups:
        return (f"{m.mamba_num_heads} Mamba heads in {m.mamba_num_groups} groups over TP{p.tp} (MambaMixer asserts "
                "that TP divides heads and groups, and groups divide heads)")
    if "E" in pattern and not m.num_moe_experts:
        return "a hybrid pattern with MoE layers ('E') but no num_moe_experts"
    if m.multi_latent_attention:  # latent MoE is modelled: an 'E' layer is megatron-core's MoELayer, as in GPT
        return "a hybrid Mamba model with multi-latent attention (not modelled)"
    width = 2 * m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads
    if low is not None and low.recipe == "nvfp4" and (
            width // p.tp % 16 or m.mamba_d_inner // p.tp % 16 or m.hidden_size % 16):
        return (f"NVFP4 with a Mamba in_proj {width // p.tp} and out_proj {m.mamba_d_inner // p.tp} wide per TP "
                f"rank and hidden {m.hidden_size}, not all multiples of 16 (Transformer Engine casts NVFP4 in "
                "16-element blocks along both dims, nvfp4_tensor.py is_quantizable; not modelled)")
    if low is not None and low.recipe != "nvfp4" and width % 16:
        return (f"FP8 with a Mamba in_proj {width} wide (MambaMixer asserts that FP8's in_proj width is a multiple "
                "of 16)")
    if t.peft:  # Megatron-FSDP is modelled (memory._fsdp_buffers: every hybrid layer is an FSDP unit)
        return "LoRA on a hybrid Mamba model (not modelled)"
    if t.cpu_offloading:
        return ("layer-level activation offloading (cpu_offloading) of a hybrid Mamba model (megatron-core's "
                "HybridStack, unlike TransformerBlock, opens no CPU-offload context: not modelled)")
    return _hybrid_offload_unsupported(r, m, t) or _hybrid_recompute_unsupported(r, m, t, low)


def _cuda_graphs(r: _Reader, needs: str) -> tuple[object, set[str]] | None:
    """The CUDA graph implementation and the module names its scope captures (the last dotted part of each
    `cuda_graph_modules` / `cuda_graph_scope` entry), or None when one of them is unknown: that is recorded as
    unknown with what the memory model would need to know (`needs`)."""
    looked = [r.lookup(k) for k in ("model.cuda_graph_impl", "model.cuda_graph_modules", "model.cuda_graph_scope")]
    for value in looked:
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[value.key] = f"{reason} (the memory model would need to know {needs})"
            return None
    impl = looked[0].value if looked[0].state in ("known", "default") else None
    names: set[str] = set()
    for value in looked[1:]:
        if value.state == "known" and value.value:
            items = value.value if isinstance(value.value, (list, tuple)) else str(value.value).split(",")
            names |= {str(item).rsplit(".", 1)[-1].strip() for item in items}
    return impl, names


def _hybrid_offload_unsupported(r: _Reader, m: ModelShape, t: Training) -> str:
    """Fine-grained activation offloading in a hybrid model, modelled for the MoE experts' `expert_fc1` and
    `moe_act` (megatron-core 0.19.2 transformer/moe/experts.py:253-261, 792-805: the experts offload from the
    config alone, whatever layer holds them; HybridModel sets up the offload manager,
    models/hybrid/hybrid_model.py:351-371, 439-440). A MambaLayer offloads nothing (ssm/ has no offload hooks).
    The experts' delayed offload (`delay_offload_until_cuda_graph`) waits only for a commit made inside a
    Transformer Engine graph replay (pipeline_parallel/fine_grained_activation_offload.py:1228), so it is refused
    where graphs capture the experts; megatron-core asserts the op-fuser MoE off with these offloads
    (experts.py:286-289, 349-350)."""
    if not t.fine_grained_offloading:
        return ""
    other = sorted(set(t.offload_modules) - {"expert_fc1", "moe_act"})
    if other:
        return (f"fine-grained activation offloading of {', '.join(map(repr, other))} in a hybrid Mamba model (only "
                "the MoE experts' 'expert_fc1' and 'moe_act' are modelled there)")
    if not t.offload_modules or "E" not in (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or ""):
        return ""
    if r.get("model.use_transformer_engine_op_fuser", False):
        return ("fine-grained expert_fc1/moe_act offloading with use_transformer_engine_op_fuser (megatron-core's "
                "experts assert 'Fused GroupedMLP is not supported for this configuration': these offloads are only "
                "supported unfused)")
    graphs = _cuda_graphs(r, "whether CUDA graphs capture the MoE experts, whose tensors fine-grained offloading "
                              "moves")
    if graphs is None:
        return ""
    impl, names = graphs
    if impl not in (None, "none", "") and (impl == "full_iteration" or not names or "moe" in names):
        return (f"fine-grained offloading of the MoE experts' tensors with the experts CUDA-graphed "
                f"(cuda_graph_impl={impl!r}; the offloads then run inside graph replays: not modelled)")
    return ""


def _hybrid_recompute_unsupported(r: _Reader, m: ModelShape, t: Training, low: LowPrecision | None) -> str:
    """Selective recompute in a hybrid model is modelled per layer kind (activations.HYBRID_RECOMPUTE_DROPS) where
    megatron-core 2a75ac12 decides it from the configuration alone. Refused: what its TransformerConfig raises
    for, a recomputed module inside a CUDA-graphed part (the graph's static buffers then hold what it saves), and
    with local graphs `moe`, which MoELayer leaves to MoETransformerLayer's partial graphs (moe_layer.py). With the
    MoE router captured TransformerLayer keeps or drops the pre-MLP norm's recompute by the configuration:
    modelled (_pre_mlp_norm_recomputed)."""
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.moe_layer_recompute:
        modules.add("moe")
    if low is not None and low.recipe == "delayed" and modules & {"layernorm", "moe_act"}:
        return ("selective recompute of 'layernorm' or 'moe_act' with FP8 delayed scaling (megatron-core's "
                "TransformerConfig raises: 'Delayed scaling does not support moe_act and layernorm recompute')")
    acting = modules - {"core_attn"}  # recomputing flash attention drops nothing
    if not acting:
        return ""
    graphs = _cuda_graphs(r, "which layer parts CUDA graphs capture, which decides what selective recompute drops "
                              "in a hybrid model")
    if graphs is None:
        return ""
    impl, names = graphs
    moe = "E" in (m.hybrid_pattern or "")
    if impl not in (None, "none", ""):
        # transformer_config.py: "full_cudagraph means either full_iteration impl or an empty per-layer scope
        # (which captures the whole layer)"
        whole = impl == "full_iteration" or not names
        graphed = {"mlp": {"mlp"}, "moe": {"moe"}, "moe_act": {"moe"}, "shared_experts": {"moe"}}
        inside = sorted(mod for mod in acting if whole or names & graphed.get(mod, set()))
        if inside:
            return (f"selective recompute of {', '.join(map(repr, inside))} inside CUDA-graphed layer parts of a "
                    f"hybrid model (cuda_graph_impl={impl!r}; not modelled)")
    if moe and "moe" in modules and impl == "transformer_engine" and "moe_router" in names:
        return ("selective recompute of 'moe' with the MoE router CUDA-graphed by Transformer Engine (megatron-core's "
                "TransformerConfig asserts: 'moe recompute is not supported with moe_router CUDA graph')")
    if moe and "moe" in modules and impl == "local":
        return ("selective recompute of 'moe' in a hybrid model with megatron-core's local CUDA graphs (MoELayer "
                "leaves it to MoETransformerLayer's partial graphs; not modelled)")
    # 'layernorm' with the MoE router captured: megatron-core decides from the configuration whether the pre-MLP
    # norm is recomputed (_pre_mlp_norm_recomputed, read_inputs)
    return ""


def _pre_mlp_norm_recomputed(r: _Reader, m: ModelShape, t: Training) -> bool:
    """Whether a hybrid model's MoE layer recomputes its pre-MLP norm under selective 'layernorm' recompute
    (megatron-core 0.20.0 transformer/transformer_layer.py:481-527, the same at Bridge's pin 2a75ac12 :456-500,
    can_recompute_pre_mlp_layernorm_for_cudagraph): always, unless CUDA graphs (not megatron-core's local ones)
    capture the MoE router (:482-488); then not with an overlapped shared expert (:489-503: its input, the norm's
    output, is outside the graph), and only where the graphs also capture `moe_preprocess` with the alltoall
    dispatcher or latent MoE (:504-513); otherwise the norm's output is a graph output in a static buffer (:510-512,
    :521) and the layer keeps it (activations.HYBRID_RECOMPUTE_DROPS 'E' then drops nothing for 'layernorm')."""
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if "layernorm" not in modules or "E" not in (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or ""):
        return True
    graphs = _cuda_graphs(r, "which layer parts CUDA graphs capture, which decides what selective recompute drops "
                              "in a hybrid model")
    if graphs is None:
        return True
    impl, names = graphs
    if impl in (None, "none", "", "local") or "moe_router" not in names:
        return True
    if m.moe_shared_expert_intermediate_size and r.get("model.moe_shared_expert_overlap", False) is True:
        return False
    return "moe_preprocess" in names and (
        r.get("model.moe_token_dispatcher_type", "allgather") == "alltoall" or bool(m.moe_latent_size))


def _hybrid_mtp_unsupported(r: _Reader, m: ModelShape, t: Training, low: LowPrecision | None) -> str:
    """Why a hybrid model's MTP depths have no verdict ("" when modelled, or there are none)."""
    written = next(v.value for v in map(r.lookup, _HYBRID_KEYS)
                   if v.state == "known" and isinstance(v.value, str) and v.value)
    why = _hybrid_mtp(r, written)[1]
    if why or not m.hybrid_mtp_pattern:
        return why
    if r.get("model.moe_paged_stash", False):
        return "moe_paged_stash with hybrid MTP depths (the MTP MoE layers' stashed tensors are not modelled)"
    if t.recompute_granularity == "full" and t.recompute_method != "block" and (t.recompute_num_layers or 1) != 1:
        return (f"full uniform recompute of {t.recompute_num_layers} layers with MTP depths (megatron-core's "
                "MultiTokenPredictionLayer asserts recompute_num_layers == 1)")
    return ""


_GDN_VARIANTS = ("gdn", "gated_delta_net")  # megatron-core normalizes the old name to "gdn"
_VARIANT_KEY = "model.experimental_attention_variant"


def _read_gdn(r: _Reader) -> dict:
    """A gated-delta-net model's layer mix and GDN sizes ({} without GDN; `_gdn_unsupported` says why one has no
    verdict). Bridge's Qwen3NextBridge sets the variant, `linear_attention_freq` (the Hugging Face config's
    full_attention_interval) and the linear_* sizes; unset sizes take megatron-core's TransformerConfig defaults
    (conv kernel 4, head dims 128, 16 key and 32 value heads)."""
    variant = r.lookup(_VARIANT_KEY)
    if variant.state != "known" or variant.value not in _GDN_VARIANTS:
        return {}
    freq = r.lookup("model.linear_attention_freq")
    value = freq.value
    if isinstance(value, str) and value.strip().isdigit():  # Megatron-LM's --linear-attention-freq (la_freq_type)
        value = int(value)
    if freq.state != "known" or not (_positive_int(value) or (
            isinstance(value, (list, tuple)) and all(v in (0, 1) for v in value))):
        return {}
    return dict(linear_attention_freq=value if isinstance(value, int) else tuple(value),
                gdn_key_heads=r.optional_int("model.linear_num_key_heads") or 16,
                gdn_value_heads=r.optional_int("model.linear_num_value_heads") or 32,
                gdn_key_head_dim=r.optional_int("model.linear_key_head_dim") or 128,
                gdn_value_head_dim=r.optional_int("model.linear_value_head_dim") or 128,
                gdn_conv_kernel=r.optional_int("model.linear_conv_kernel_dim") or 4)


def _gdn_unsupported(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                     fsdp: str | None) -> str:
    """Why a model with an experimental attention variant, or with the softmax attention's output gate (Qwen3-Next
    has both), has no verdict ("" when it is modelled, or has neither)."""
    variant = r.lookup(_VARIANT_KEY)
    if variant.is_unknown:
        reason = variant.value.reason if isinstance(variant.value, Unknown) else "unknown"
        r.unknown[_VARIANT_KEY] = f"{reason} (the memory model would need to know the attention variant)"
        return ""
    why = _variant_unsupported(r, m, p, t, low, fsdp, variant.value) if variant.state == "known" else ""
    if not why and m.attention_output_gate and (m.multi_latent_attention or (low is not None and low.attention)
                                                or t.fine_grained_offloading):
        return ("an attention output gate with multi-latent attention, FP8 attention or fine-grained activation "
                "offloading (not modelled)")
    return why


def _variant_unsupported(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                         fsdp: str | None, variant: object) -> str:
    """Only megatron-core's GatedDeltaNet in a GPT model is modelled, with what megatron-core 2a75ac12 (Bridge
    067f987's) accepts and offlint has read (docs/estimate.md, "Gated delta net")."""
    if variant in (None, "", False):
        return ""
    if variant not in _GDN_VARIANTS:
        return (f"the experimental attention variant {variant!r} (DSA and GatedDeltaNet2 are not modelled; "
                "gated delta net 'gdn' is)")
    freq = r.lookup("model.linear_attention_freq")
    if freq.is_unknown:
        reason = freq.value.reason if isinstance(freq.value, Unknown) else "unknown"
        r.unknown[freq.key] = f"{reason} (the memory model would need the gated-delta-net layer pattern)"
        return ""
    if m.linear_attention_freq is None:
        return (f"gated delta net with linear_attention_freq={freq.value!r} (offlint reads a positive int or a 0/1 "
                "list per layer; megatron-core asserts it is set)")
    if isinstance(m.linear_attention_freq, tuple) and len(m.linear_attention_freq) != m.num_layers:
        return (f"a linear_attention_freq list of {len(m.linear_attention_freq)} layers for {m.num_layers} layers "
                "(megatron-core asserts they agree)")
    if m.hybrid_pattern is not None or m.multi_latent_attention:
        return "gated delta net in a hybrid Mamba model or with multi-latent attention (not modelled)"
    if m.mtp_num_layers and m.is_gdn_layer(m.num_layers - 1):
        return ("multi-token prediction after a gated-delta-net last layer (megatron-core asserts that the MTP "
                "layer's attention has a causal mask type)")
    keys, values = m.gdn_key_heads, m.gdn_value_heads
    if values % keys or keys % (p.tp * p.cp) or values % (p.tp * p.cp):
        return (f"{keys} key and {values} value gated-delta-net heads over TP{p.tp} x CP{p.cp} (megatron-core "
                "asserts that TP x CP divides both and key heads divide value heads)")
    if r.get("model.deterministic_mode", False):
        return ("gated delta net in deterministic mode (megatron-core then runs its torch-native delta rule, whose "
                "saved tensors are not modelled)")
    if low is not None and low.recipe == "nvfp4":
        return "NVFP4 training of a gated-delta-net model (not modelled)"
    in_proj = 2 * keys * m.gdn_key_head_dim + 2 * values * m.gdn_value_head_dim + 2 * values
    align = 32 if low is not None and low.recipe == "mxfp8" else 16  # megatron-core's get_fp8_align_size
    if low is not None and in_proj % align:
        return (f"FP8 with a gated-delta-net in_proj {in_proj} wide (megatron-core asserts that FP8's in_proj width "
                f"is a multiple of {align})")
    if fsdp or t.peft:
        return "Megatron-FSDP or LoRA on a gated-delta-net model (not modelled)"
    if t.cpu_offloading or t.fine_grained_offloading:
        return "activation offloading of a gated-delta-net model (not modelled)"
    return ""


def _read_expert_budget(r: _Reader, m: ModelShape, t: Training, low: LowPrecision | None,
                        fp8_transpose: bool | None) -> tuple[ExpertBudget | None, str]:
    """moe_expert_rank_capacity_factor and moe_paged_stash (megatron-core 2a75ac12: TransformerConfig's checks,
    token_dispatcher.py, transformer/moe/paged_stash.py, experts.py `_fused_forward`; Transformer Engine e7c550c5,
    Bridge's pin: ops/fused/grouped_mlp.py). (None, "") when neither is set; a reason when megatron-core refuses the
    combination or offlint does not model it. The stash takes only the tensors the fused grouped MLP marks
    (`mark_grouped_tensor`); TE fuses only with MXFP8/NVFP4, NVTE_CUTEDSL_FUSED_GROUPED_MLP>0 and compute
    capability 10.x (`is_supported`): offlint's devices without a per-tensor FP8 transpose (fp8_transpose False)."""
    if not m.num_moe_experts:
        return None, ""
    factor = r.get("model.moe_expert_rank_capacity_factor")
    stash = r.get("model.moe_paged_stash", False)
    if factor is None:
        return None, ("moe_paged_stash without moe_expert_rank_capacity_factor (megatron-core refuses it)"
                      if stash is True else "")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
        return None, f"moe_expert_rank_capacity_factor={factor!r} (offlint reads a positive number)"
    backend = r.get("model.moe_flex_dispatcher_backend", "deepep")
    if backend not in ("hybridep", "ncclep"):
        return None, (f"moe_expert_rank_capacity_factor with the {backend!r} flex backend (megatron-core refuses it: "
                      f"only HybridEP and NCCL EP take a fixed receive budget)")
    if r.get("model.moe_token_dispatcher_type", "allgather") != "flex":
        return None, ("moe_expert_rank_capacity_factor without the flex token dispatcher (its budget and the paged "
                      "stash's sizing apply to the flex dispatcher's receive buffer; not modelled)")
    if r.get("model.use_transformer_engine_op_fuser", False) is not True:
        return None, ("moe_expert_rank_capacity_factor without use_transformer_engine_op_fuser (megatron-core "
                      "refuses it for both HybridEP and NCCL EP's fixed buffers)")
    fused = _grouped_mlp_fuses(r, m, low, fp8_transpose)
    moe_act = t.recompute_granularity == "selective" and "moe_act" in t.recompute_modules
    if fused is None and moe_act:
        return None, ("moe_act recompute with moe_expert_rank_capacity_factor on a GPU whose compute capability "
                      "offlint does not know (Transformer Engine's fused grouped MLP, outside which its scaled GLU "
                      "raises, runs only on 10.x; pass --gpu)")
    if moe_act and not fused:
        return None, ("moe_act recompute with use_transformer_engine_op_fuser outside Transformer Engine's fused "
                      "grouped MLP (TE's scaled GLU raises: activation_recompute_in_mlp needs the fused path)")
    budget = ExpertBudget(float(factor), str(backend), fused=fused)
    if stash is not True:
        return replace(budget, fused=fused is True), ""  # without the stash an open GPU changes nothing here
    if t.cpu_offloading:
        return None, "moe_paged_stash with cpu_offloading (megatron-core refuses it)"
    if fused is False:  # the hooks pass every unmarked tensor through: nothing is stashed, the padded tensors stay
        return budget, ""
    if low.recipe == "nvfp4":
        return None, "moe_paged_stash with NVFP4 training (the fused grouped MLP's NVFP4 saved state is not modelled)"
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.recompute_granularity == "full" or "moe" in modules or t.moe_layer_recompute:
        return None, ("moe_paged_stash with the MoE layer recomputed (the stash's schedule under recompute is not "
                      "modelled)")
    cuda = r.get("model.moe_paged_stash_buffer_size_factor_cuda", 1.10)
    host = r.get("model.moe_paged_stash_buffer_size_factor_cpu", 0.0)
    if not (_positive_number(cuda) and isinstance(host, (int, float)) and host >= 0):
        return None, (f"moe_paged_stash buffer factors cuda={cuda!r}, cpu={host!r} (offlint models positive, "
                      f"balanced-load sizing; a negative factor sizes from the first iteration's actual tokens)")
    return replace(budget, stash=float(cuda), host=float(host)), ""


def _grouped_mlp_fuses(r: _Reader, m: ModelShape, low: LowPrecision | None, fp8_transpose: bool | None) -> bool | None:
    """Whether Transformer Engine e7c550c5 fuses megatron-core's op-fuser grouped MLP into its CuTe DSL kernel
    (ops/fused/grouped_mlp.py `fuse_grouped_mlp_ops`, `is_supported`: MXFP8/NVFP4, a GLU activation,
    NVTE_CUTEDSL_FUSED_GROUPED_MLP>0, compute capability 10.x, i.e. offlint's GPUs without a per-tensor FP8
    transpose); None when only the GPU's compute capability is not known."""
    if not (low is not None and low.recipe in ("mxfp8", "nvfp4") and m.gated_linear_unit
            and _positive_number(r.get("env.NVTE_CUTEDSL_FUSED_GROUPED_MLP", 0))):
        return False
    return None if fp8_transpose is None else not fp8_transpose


def _read_op_fuser_moe_act(r: _Reader, m: ModelShape, t: Training, low: LowPrecision | None,
                           fp8_transpose: bool | None) -> tuple[bool, str]:
    """moe_act recompute under use_transformer_engine_op_fuser without the capacity factor: (whether the fused
    grouped MLP runs, so the recompute drops nothing, or a reason to refuse). megatron-core 2a75ac12 (experts.py
    `_make_fused_ops`) hands activation_recompute_in_mlp to TE's scaled GLU op; the fused grouped MLP saves the fc2
    input anyway (it recomputes it only for SReLU), and the unfused op raises. A non-GLU activation keeps the
    unfused accounting (the tensor is dropped), as before."""
    if not m.num_moe_experts or r.get("model.use_transformer_engine_op_fuser", False) is not True or \
            t.recompute_granularity != "selective" or "moe_act" not in t.recompute_modules or \
            not m.gated_linear_unit:
        return False, ""
    fused = _grouped_mlp_fuses(r, m, low, fp8_transpose)
    if fused is None:
        return False, ("moe_act recompute with use_transformer_engine_op_fuser on a GPU whose compute capability "
                       "offlint does not know (Transformer Engine's fused grouped MLP, outside which its scaled GLU "
                       "raises, runs only on 10.x; pass --gpu)")
    if not fused:
        return False, ("moe_act recompute with use_transformer_engine_op_fuser outside Transformer Engine's fused "
                       "grouped MLP (TE's scaled GLU raises: activation_recompute_in_mlp needs the fused path)")
    return True, ""


def _positive_number(value: object) -> bool:
    try:
        return not isinstance(value, bool) and float(value) > 0  # env values are strings
    except (TypeError, ValueError):
        return False


def _read_mla(r: _Reader) -> dict:
    """Multi-latent attention's sizes (megatron-core's MLATransformerConfig fields); `q_lora_rank` None means the
    query is projected directly (DeepSeek-V2-Lite)."""
    if not r.get("model.multi_latent_attention", False):
        return {}
    q_lora = r.get("model.q_lora_rank")
    return dict(multi_latent_attention=True, q_lora_rank=int(q_lora) if _positive_int(q_lora) else None,
                kv_lora_rank=r.size("model.kv_lora_rank"), qk_head_dim=r.size("model.qk_head_dim"),
                qk_pos_emb_head_dim=r.size("model.qk_pos_emb_head_dim"), v_head_dim=r.size("model.v_head_dim"))


def _read_mtp(r: _Reader) -> dict:
    depths = r.optional_int("model.mtp_num_layers")
    if not depths:
        return {}
    return dict(mtp_num_layers=depths, mtp_repeated_layer=bool(r.get("model.mtp_use_repeated_layer", False)))


def _read_parallel(r: _Reader, unit_name: str, world_size: int | None) -> tuple[Parallelism, str]:
    tp = r.optional_int("model.tensor_model_parallel_size") or 1
    source = "--gpus" if world_size else ""
    if world_size is None:
        world_size = gpus_in_name(unit_name)
        if world_size:
            source = f"the recipe name ({world_size}gpu)"
    pp = r.optional_int("model.pipeline_model_parallel_size") or 1
    layout = _layout(r)
    vpp = r.optional_int("model.virtual_pipeline_model_parallel_size")
    if layout is not None:  # megatron-core takes the virtual stages from the layout
        vpp = len(layout) // pp if len(layout) // pp > 1 else None
    ep = r.optional_int("model.expert_model_parallel_size") or 1
    etp = r.optional_int("model.expert_tensor_parallel_size")
    etp_open = etp is None and ep > 1 and tp > 1
    if etp_open and world_size and (world_size // pp) % (ep * tp):
        etp, etp_open = 1, False  # megatron-core's TP value cannot tile this world: only Bridge's 1 runs
    parallel = Parallelism(
        tp=tp,
        pp=pp,
        vpp=vpp,
        cp=r.optional_int("model.context_parallel_size") or 1,
        ep=ep,
        etp=etp or tp,
        etp_open=etp_open,
        sequence_parallel=bool(r.get("model.sequence_parallel", False)),
        world_size=world_size,
        layout=layout,
        first_stage_layers=r.optional_int("model.num_layers_in_first_pipeline_stage"),
        last_stage_layers=r.optional_int("model.num_layers_in_last_pipeline_stage"),
        account_for_embedding=bool(r.get("model.account_for_embedding_in_pipeline_split", False)),
        account_for_loss=bool(r.get("model.account_for_loss_in_pipeline_split", False)),
    )
    return parallel, source


def _layout(r: _Reader) -> tuple[tuple[str, ...], ...] | None:
    """`pipeline_model_parallel_layout` as a tuple of stages (megatron-core's flat order), each a tuple of
    layer names, read as megatron-core parses it (offlint/pipeline_layout.py: a list of lists of names, or its
    string such as "Et*3|(tt|)*29,m|L"). One offlint cannot read is unknown."""
    key = "model.pipeline_model_parallel_layout"
    value = r.get(key)
    if value is None:
        return None
    stages = pipeline_layout.stages_of(value)
    if stages is not None:
        return tuple(tuple(row) for row in stages)
    r.unknown[key] = f"`{key}` is {value!r}, which offlint cannot read as a pipeline layout"
    return None


def _half_precision(r: _Reader) -> str | None:
    """"bf16", "fp16" or None (fp32 parameters). Bridge's `mixed_precision` (a MixedPrecisionConfig the recipe
    built, or the one a recipe name such as "bf16_mixed" builds: named_precision) sets the model's dtype when the
    run starts, over model.bf16/fp16; a value offlint cannot read makes the estimate unknown."""
    mixed = r.lookup("mixed_precision")
    if mixed.is_unknown:
        r.unknown["mixed_precision"] = mixed.value.reason if isinstance(mixed.value, Unknown) else "unknown"
        return None
    fields = getattr(mixed.value, "fields", None)  # a MixedPrecisionConfig(...) record
    if isinstance(fields, dict):
        for name in ("bf16", "fp16"):
            if isinstance(fields.get(name), Unknown):
                r.unknown["mixed_precision"] = f"`{name}` of the mixed-precision config: {fields[name].reason}"
                return None
        return "bf16" if fields.get("bf16") is True else "fp16" if fields.get("fp16") is True else None
    return "bf16" if r.get("model.bf16", False) else "fp16" if r.get("model.fp16", False) else None


def _read_training(r: _Reader) -> Training:
    half = _half_precision(r)
    bf16, fp16 = half == "bf16", half == "fp16"
    distopt = bool(r.get("optimizer.use_distributed_optimizer", False)) or bool(
        r.get("ddp.use_distributed_optimizer", False))
    granularity = r.get("model.recompute_granularity")
    modules = r.get("model.recompute_modules")
    offload_modules = r.get("model.offload_modules")
    fraction = r.get("optimizer.optimizer_offload_fraction", 0.0)
    return Training(
        micro_batch_size=r.soft_int("train.micro_batch_size", "micro-batch size 1 (the smallest)") or 1,
        global_batch_size=r.soft_int("train.global_batch_size",
                                     "enough micro-batches to fill the pipeline (1F1B warm-up)"),
        params_bytes=2 if (bf16 or fp16) else 4,
        grads_fp32=_grads_fp32(r, bf16 or fp16),
        distributed_optimizer=distopt,
        optimizer=str(r.get("optimizer.optimizer", "adam")),
        precision_aware=bool(r.get("optimizer.use_precision_aware_optimizer", False)),
        main_params_bytes=r.dtype_bytes("optimizer.main_params_dtype"),
        exp_avg_bytes=r.dtype_bytes("optimizer.exp_avg_dtype"),
        exp_avg_sq_bytes=r.dtype_bytes("optimizer.exp_avg_sq_dtype"),
        store_param_remainders=bool(r.get("optimizer.store_param_remainders", True)),
        optimizer_cpu_offload=bool(r.get("optimizer.optimizer_cpu_offload", False)),
        optimizer_offload_fraction=min(1.0, max(0.0, float(fraction))) if isinstance(fraction, (int, float)) else 0.0,
        overlap_cpu_optimizer_d2h_h2d=bool(r.get("optimizer.overlap_cpu_optimizer_d2h_h2d", False)),
        recompute_granularity=granularity if granularity in ("full", "selective") else None,
        recompute_method=r.get("model.recompute_method"),
        recompute_num_layers=r.optional_int("model.recompute_num_layers"),
        recompute_modules=tuple(modules) if isinstance(modules, (list, tuple)) else ("core_attn",),
        moe_layer_recompute=bool(r.get("model.moe_layer_recompute", False)),
        cpu_offloading=bool(r.get("model.cpu_offloading", False)),
        cpu_offloading_num_layers=int(r.get("model.cpu_offloading_num_layers", 0) or 0),
        cpu_offloading_double_buffering=bool(r.get("model.cpu_offloading_double_buffering", False)),
        fine_grained_offloading=bool(r.get("model.fine_grained_activation_offloading", False)),
        offload_modules=tuple(offload_modules) if isinstance(offload_modules, (list, tuple)) else (),
        activation_offload_fraction=float(r.get("model.activation_offload_fraction", 1.0) or 0.0),
        moe_router_graphed=_router_graphed(r),
        te_graph_modules=_te_graph_modules(r),
    )


def _grads_fp32(r: _Reader, half: bool) -> bool:
    """Whether the DDP gradient buffer of 16-bit parameters is fp32 (`grad_reduce_in_fp32`). Bridge's
    `mixed_precision`, when the unit has one, decides it: MixedPrecisionConfig.setup copies every field the DDP
    config also has over it when the run starts (update_config_with_precision_overrides; a field left at its
    default, True, too), so `ddp.grad_reduce_in_fp32` counts only without one (megatron-core's default: False).
    fp32 parameters (`half` False) have fp32 gradients either way. A recipe name is the record it builds
    (named_precision); a value offlint cannot read is recorded as unknown (the returned True is then no verdict's
    input)."""
    mixed = r.lookup("mixed_precision")
    if mixed.is_unknown:
        return True  # recorded by _half_precision
    why = "the gradient buffer's dtype (fp32 main grads or 16-bit) depends on it"
    if not half:
        return True
    if mixed.state == "known" and mixed.value is not None:
        fields = getattr(mixed.value, "fields", None)  # a MixedPrecisionConfig(...) record, defaults included
        value = fields.get("grad_reduce_in_fp32") if isinstance(fields, dict) else None
        if isinstance(value, bool):
            return value
        # A record of a class that subclasses nothing holds all its fields: without this one, the class has no
        # such field and copies nothing over ddp's (a Bridge version without it). Any other record: unknown.
        absent = isinstance(fields, dict) and "grad_reduce_in_fp32" not in fields
        if not (absent and getattr(mixed.value, "plain", False) is True):
            reason = value.reason if isinstance(value, Unknown) else \
                f"{mixed.value!r} is not a mixed-precision config offlint reads" if not isinstance(fields, dict) else \
                "a field of a base class offlint did not read" if absent else f"{value!r}, not True or False"
            r.unknown["mixed_precision"] = f"`grad_reduce_in_fp32` of the mixed-precision config: {reason} ({why})"
            return True
    value = r.lookup("ddp.grad_reduce_in_fp32")
    if value.is_unknown:
        r.unknown[value.key] = f"{value.value.reason if isinstance(value.value, Unknown) else 'unknown'} ({why})"
        return True
    return bool(value.value)  # None (a version without the field's data) is megatron-core's default, False


def _te_graph_modules(r: _Reader) -> tuple[str, ...] | None:
    """The module names the language model's Transformer Engine CUDA graphs capture (() for whole layers:
    megatron-core's "full" and an empty list), None without them (another or no implementation; lm_graphs.py)."""
    impl = r.lookup("model.cuda_graph_impl")
    if impl.is_unknown:
        r.unknown[impl.key] = (f"{impl.value.reason if isinstance(impl.value, Unknown) else 'unknown'} (the memory "
                               "model would need to know whether Transformer Engine CUDA graphs keep static buffers)")
        return None
    if impl.state not in ("known", "default") or impl.value != "transformer_engine":
        return None
    graphs = _cuda_graphs(r, "which layers Transformer Engine CUDA graphs capture, whose static buffers they keep")
    if graphs is None:
        return None
    return tuple(sorted(name for name in graphs[1] if name != "full"))


def _router_graphed(r: _Reader) -> bool:
    """Whether CUDA graphs capture the MoE router (only the step-time model asks: an unknown value counts as
    no, and never makes the estimate unknown)."""
    impl, scope = r.lookup("model.cuda_graph_impl"), r.lookup("model.cuda_graph_scope")
    if impl.state != "known" or impl.value in (None, "none") or scope.state != "known":
        return False
    names = scope.value if isinstance(scope.value, (list, tuple)) else str(scope.value).split(",")
    return any("moe_router" in str(name) for name in names)


# Features whose memory the model does not describe: an estimate with them would be a guess. A known value turns
# the feature on (no verdict); an unknown one leaves the estimate unknown (rules.md: unknown is never default).
_UNSUPPORTED = {
    "model.teacher": "knowledge distillation (a frozen teacher model beside the trained student)",
}
# Bridge's precision recipes and recipe names that train in FP8 or FP4 (`bf16_with_fp8_current_scaling_mixed`,
# `bf16_with_mxfp8_mixed`, `..._8gpu_h100_fp8cs_config`, `..._b200_nvfp4_config`).
_LOW_PRECISION_NAME = re.compile(r"(?:^|_)(?:fp8\w*|mxfp8|nvfp4|fp4\w*)(?:_|$)", re.I)


def _unsupported(r: _Reader, unit_name: str = "") -> list[str]:
    out: list[str] = []
    for key, what in _UNSUPPORTED.items():
        value = r.lookup(key)
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[key] = f"{reason} (the memory model would need to know whether {what} is used)"
        elif value.state == "known" and value.value not in (None, False, 0, "", []):
            if what not in out:
                out.append(what)
    return out


_FP8_RECIPES = ("delayed", "tensorwise", "mxfp8", "blockwise")
_MCORE_FIELDS = ("fp8", "fp8_recipe", "fp8_param", "fp8_amax_history_len", "fp8_dot_product_attention",
                 "fp8_multi_head_attention", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
                 "num_layers_at_end_in_bf16", "fp4", "fp4_recipe", "fp4_param")


def _precision_settings(r: _Reader) -> dict | None:
    """The FP8/FP4 settings in force: Bridge's `mixed_precision` (a MixedPrecisionConfig record: one a recipe
    built, or the one its recipe name builds, named_precision), which overwrites the model config's fields when
    set; else megatron-core's own `model.fp8...` keys (Megatron-LM's --fp8-format maps onto model.fp8). None: not
    readable (already recorded as unknown)."""
    mixed = r.lookup("mixed_precision")
    if mixed.is_unknown:
        return None  # recorded by _half_precision
    fields = getattr(mixed.value, "fields", None)
    if mixed.state == "known" and isinstance(fields, dict):
        settings = dict(fields)
        for kind in ("fp8", "fp4"):  # MixedPrecisionConfig.finalize: fp8_param from fp8_param_gather, fp4 alike
            if settings.get(f"{kind}_param") is None:
                settings[f"{kind}_param"] = settings.get(f"{kind}_param_gather")
        return settings
    settings = {}
    for name in _MCORE_FIELDS:
        value = r.lookup(f"model.{name}")
        if value.is_unknown:
            r.unknown[f"model.{name}"] = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            return None
        settings[name] = value.value
    settings["disable_parameter_transpose_cache"] = r.get("model.disable_parameter_transpose_cache", False)
    return settings


def _read_low_precision(r: _Reader, unit_name: str, fp8_transpose: bool | None) -> tuple[LowPrecision | None, str]:
    """(the FP8 settings, or None for 16/32-bit GEMMs; why there is no verdict, or "")."""
    settings = _precision_settings(r)
    if settings is None:
        return None, ""
    for name, value in settings.items():
        if isinstance(value, Unknown) and (name.startswith(("fp8", "fp4")) or "bf16" in name):
            r.unknown["mixed_precision"] = f"`{name}` of the mixed-precision config: {value.reason}"
            return None, ""
    named = bool(_LOW_PRECISION_NAME.search(unit_name.lower().removesuffix("_config")))
    if settings.get("fp4"):
        return _read_fp4(r, settings, fp8_transpose)
    if not settings.get("fp8"):
        if named:  # the name says FP8/FP4 and the configuration says neither: do not size it as bf16
            return None, "FP8/FP4 training that the recipe name announces but offlint does not see set"
        return None, ""
    recipe = settings.get("fp8_recipe") or "delayed"
    if recipe not in _FP8_RECIPES:
        return None, f"the FP8 recipe {recipe!r} (not modelled)"
    if settings.get("fp8_multi_head_attention"):
        return None, "FP8 multi-head attention (fp8_multi_head_attention: its FP8 QKV and output are not modelled)"
    if settings.get("fp8_dot_product_attention") and recipe == "blockwise":
        return None, "FP8 attention with blockwise scaling (its saved tensors are not modelled)"
    # megatron-core 0.20's is_mxfp8_output_proj_active: the LM head becomes TELMHeadColumnParallelLinear
    output_layer = recipe == "mxfp8" and r.get("model.fp8_output_proj", False) is True
    if output_layer and r.get("model.share_embeddings_and_output_weights", True) is not False:
        return None, "an MXFP8 output layer (fp8_output_proj) with tied embeddings (not modelled)"
    if not settings.get("fp8_param") and settings.get("disable_parameter_transpose_cache"):
        return None, ("FP8 with bf16 weights and disable_parameter_transpose_cache (the quantized weights are then "
                      "made again for every micro-batch; not modelled)")
    bf16_layers = bool(settings.get("first_last_layers_bf16"))
    history = settings.get("fp8_amax_history_len")
    return LowPrecision(
        recipe=recipe,
        params=bool(settings.get("fp8_param")),
        transpose=fp8_transpose if recipe in ("delayed", "tensorwise") else True,
        bf16_layers_start=int(settings.get("num_layers_at_start_in_bf16") or 0) if bf16_layers else 0,
        bf16_layers_end=int(settings.get("num_layers_at_end_in_bf16") or 0) if bf16_layers else 0,
        amax_history=int(history) if _positive_int(history) else 1,
        attention=bool(settings.get("fp8_dot_product_attention")),
        output_layer=output_layer,
    ), ""


def _read_fp4(r: _Reader, settings: dict, fp8_transpose: bool | None) -> tuple[LowPrecision | None, str]:
    """FP4 training: megatron-core's `fp4="e2m1"` with the `nvfp4` recipe (Transformer Engine's
    NVFP4BlockScaling); FP4 primary weights with `fp4_param`; bf16 layers as for FP8 (fp4_utils.get_fp4_context)."""
    recipe = settings.get("fp4_recipe") or "nvfp4"
    if recipe != "nvfp4":
        return None, f"the FP4 recipe {recipe!r} (a custom quantizer factory; not modelled)"
    if settings.get("fp8"):
        return None, "FP8 and FP4 together (megatron-core refuses the combination)"
    if settings.get("fp8_multi_head_attention"):
        return None, "FP8 multi-head attention under NVFP4 (fp8_multi_head_attention; not modelled)"
    if fp8_transpose:  # a Hopper GPU (the only kind with an FP8 transpose)
        return None, ("NVFP4 training on a Hopper GPU (Transformer Engine needs compute capability 10.0 or higher "
                      "for NVFP4)")
    attention = None
    if settings.get("fp8_dot_product_attention"):
        attention, why = _nvfp4_attention(r)
        if why or attention is None:
            return None, why
    bf16_layers = bool(settings.get("first_last_layers_bf16"))
    return LowPrecision(
        recipe="nvfp4",
        params=bool(settings.get("fp4_param")),
        bf16_layers_start=int(settings.get("num_layers_at_start_in_bf16") or 0) if bf16_layers else 0,
        bf16_layers_end=int(settings.get("num_layers_at_end_in_bf16") or 0) if bf16_layers else 0,
        attention=attention not in (None, "bf16"),
        attention_recipe=attention if attention != "bf16" else None,
    ), ""


# Transformer Engine (d0067d0, DotProductAttention.init_fp8_metadata) under an NVFP4 autocast: the recipe that
# NVTE_DPA_FP8_RECIPE makes attention run under ("F16": attention stays bf16).
_NVFP4_ATTENTION = {"Float8CurrentScaling": "tensorwise", "MXFP8BlockScaling": "mxfp8", "F16": "bf16"}


def _nvfp4_attention(r: _Reader) -> tuple[str | None, str]:
    """(the recipe fp8_dot_product_attention runs under with NVFP4 linears, "bf16" when it is switched off, None
    when unknown; why there is no verdict, or ""). Transformer Engine keeps the NVFP4 recipe for attention unless
    NVTE_DPA_FP8_RECIPE names another, and with it disables every backend in training (fused attention for NVFP4,
    flash attention 2/4 for FP8, 3 for FP8 training, unfused attention for FP8 without emulation)."""
    value = r.lookup("env.NVTE_DPA_FP8_RECIPE")
    if value.is_unknown:
        r.unknown[value.key] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
            " (FP8 attention under NVFP4 runs under the recipe it names)"
        return None, ""
    name = str(value.value or "")
    if name in _NVFP4_ATTENTION:
        return _NVFP4_ATTENTION[name], ""
    if not name:
        return None, ("FP8 attention under NVFP4 without NVTE_DPA_FP8_RECIPE (Transformer Engine then has no "
                      "attention backend for training)")
    return None, f"FP8 attention under NVFP4 with NVTE_DPA_FP8_RECIPE={name!r} (not modelled)"


_FSDP_STRATEGIES = ("no_shard", "optim", "optim_grads_params")


def _read_fsdp(r: _Reader, t: Training, low: LowPrecision | None) -> tuple[str | None, str]:
    """(Megatron-FSDP's sharding strategy, or None without it; why there is no verdict, or ""). Bridge runs
    Megatron-FSDP with `ddp.use_megatron_fsdp` (or `dist.use_megatron_fsdp`), version 1 unless
    `ddp.megatron_fsdp_version` says 2 (a separate implementation, not modelled)."""
    on = r.lookup("ddp.use_megatron_fsdp")
    if on.is_unknown:
        r.unknown[on.key] = (on.value.reason if isinstance(on.value, Unknown) else "unknown") + \
            " (the memory model would need to know whether Megatron-FSDP is used)"
        return None, ""
    dist = r.lookup("dist.use_megatron_fsdp")  # Bridge's validation copies it onto ddp
    if not (on.state == "known" and on.value) and not (dist.state == "known" and dist.value is True):
        return None, ""
    strategy = r.get("ddp.data_parallel_sharding_strategy", "no_shard")
    if strategy is None and "ddp.data_parallel_sharding_strategy" in r.unknown:
        return None, ""
    if strategy == "optim_grads":
        return None, ("Megatron-FSDP's optim_grads strategy (its unsharded gradient buckets follow bucket_size; "
                      "not modelled)")
    if strategy not in _FSDP_STRATEGIES:
        return None, f"Megatron-FSDP with the sharding strategy {strategy!r} (not modelled)"
    others = {
        "ddp.megatron_fsdp_version": (1, "Megatron-FSDP version 2"),
        "ddp.preserve_fp32_weights": (True, "Megatron-FSDP without fp32 main weights (preserve_fp32_weights=False)"),
        "ddp.megatron_fsdp_main_params_dtype": ("torch.float32", "Megatron-FSDP with main weights other than fp32 "
                                                                 "(megatron_fsdp_main_params_dtype)"),
    }
    for key, (default, what) in others.items():
        value = r.get(key, default)
        if key in r.unknown:
            return None, ""
        if value is not None and value != default:
            return None, f"{what} (not modelled)"
    outer = r.get("ddp.outer_dp_sharding_strategy", "no_shard")
    if "ddp.outer_dp_sharding_strategy" in r.unknown:
        return None, ""
    if outer not in ("no_shard", "optim"):
        return None, f"hybrid-sharded Megatron-FSDP with outer_dp_sharding_strategy={outer!r} (not modelled)"
    if outer == "optim" and strategy != "optim_grads_params":
        return None, ("hybrid-sharded Megatron-FSDP sharding the optimizer across the outer groups without "
                      "optim_grads_params (megatron_fsdp raises NotImplementedError)")
    if low is not None and _fsdp_low_precision_unsupported(low):
        return None, _fsdp_low_precision_unsupported(low)
    if t.optimizer_cpu_offload:
        return None, "Megatron-FSDP with optimizer offload (not modelled)"
    return strategy, ""


def _read_optimizer_instances(r: _Reader, p: Parallelism) -> tuple[int, str]:
    """(ddp.num_distributed_optimizer_instances, why there is no verdict or ""): megatron-core's parallel_state
    asserts that it divides the data-parallel size with context parallelism and the expert data-parallel size."""
    value = r.get("ddp.num_distributed_optimizer_instances", 1)
    if value is None or "ddp.num_distributed_optimizer_instances" in r.unknown:
        return 1, ""
    if not _positive_int(value):
        return 1, f"num_distributed_optimizer_instances={value!r} (not modelled)"
    world = p.world_size
    if value > 1 and world and ((world // (p.tp * p.pp)) % value or (world // (p.etp * p.ep * p.pp)) % value):
        return 1, (f"num_distributed_optimizer_instances={value}, which does not divide the data-parallel sizes on "
                   f"{world} GPUs (megatron-core asserts)")
    return int(value), ""


_LORA_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


def _fsdp_low_precision_unsupported(lp: LowPrecision) -> str:
    """Why Megatron-FSDP with this FP8/FP4 setting has no verdict ("" when it is modelled: FP8 primary weights
    with per-tensor scaling off Hopper, or MXFP8; precision.fsdp_data_bytes). An MXFP8 output layer is a bf16 LM
    head in FSDP's bf16 buffers whose gathered weight Transformer Engine caches in MXFP8 as without FSDP
    (megatron-core 2a75ac12: the FSDP wrapper is a MegatronModule, so set_is_first_microbatch reaches it)."""
    if lp.recipe in ("blockwise", "nvfp4"):
        return f"Megatron-FSDP with {lp.recipe} parameters (their buffers are not modelled)"
    if not lp.params:
        return ("Megatron-FSDP with FP8 compute on bf16 weights (Transformer Engine's cached FP8 copies of the "
                "all-gathered weights are not modelled)")
    if lp.recipe in ("delayed", "tensorwise") and lp.transpose is not False:
        return ("Megatron-FSDP with per-tensor FP8 on Hopper or a GPU whose architecture offlint does not know "
                "(the FP8 transposes made after each all-gather are not modelled)")
    return ""


def _read_peft(r: _Reader, m: ModelShape, t: Training, low: LowPrecision | None,
               fsdp: str | None) -> tuple[Peft | None, str]:
    """(the LoRA adapters, or None for full training; why there is no verdict, or ""). Bridge's `cfg.peft` is a
    LoRA(...) dataclass (peft/lora.py: target_modules, dim); offlint models plain LoRA on the dense layers'
    four linears."""
    value = r.lookup("peft")
    if value.is_unknown:
        r.unknown["peft"] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
            " (the memory model would need to know the PEFT config)"
        return None, ""
    if value.state != "known" or value.value is None:
        return None, ""
    if isinstance(value.value, str):  # the text of a config offlint did not evaluate
        return None, f"PEFT with a config offlint does not evaluate (`{value.value}`)"
    fields = getattr(value.value, "fields", None)
    name = getattr(value.value, "name", "")
    if name != "LoRA" or not isinstance(fields, dict):
        return None, f"the PEFT scheme {name or value.value!r} (only LoRA is modelled)"
    targets, dim = fields.get("target_modules"), fields.get("dim")
    for key, field_value in (("target_modules", targets), ("dim", dim)):
        if isinstance(field_value, Unknown):
            r.unknown["peft"] = f"`{key}` of the LoRA config: {field_value.reason}"
            return None, ""
    if not isinstance(targets, (list, tuple)) or not targets or not set(targets) <= set(_LORA_TARGETS) \
            or not _positive_int(dim):
        return None, (f"LoRA on {targets!r} (only the dense layers' linear_qkv, linear_proj, linear_fc1 and "
                      f"linear_fc2 are modelled)")
    settings = {"exclude_modules": (None, []), "lora_dtype": (None,), "dropout": (0, 0.0),
                "sequence_parallel_input_regather": (False,)}
    for key, allowed in settings.items():  # a field the record lacks has the dataclass's default (allowed[0])
        if fields.get(key, allowed[0]) not in allowed:
            return None, f"LoRA with {key}={fields[key]!r} (not modelled)"
    if m.num_moe_experts or m.multi_latent_attention or m.mtp_num_layers:
        return None, "LoRA on a MoE, multi-latent-attention or MTP model (its adapter layouts are not modelled)"
    if low is not None or fsdp:
        return None, "LoRA with FP8 or Megatron-FSDP (frozen quantized or sharded base weights are not modelled)"
    recompute = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if recompute - {"core_attn"} or t.fine_grained_offloading:
        return None, ("LoRA with selective recompute beyond core_attn or fine-grained activation offloading (what "
                      "the adapters keep then is not modelled)")
    if t.optimizer_cpu_offload:
        return None, "LoRA with optimizer offload (not modelled)"
    overlap = r.lookup("comm_overlap.tp_comm_overlap")
    if r.get("model.sequence_parallel", False) and not (overlap.state in ("known", "default") and not overlap.value):
        return None, ("LoRA with sequence parallelism and TP communication overlap (or an overlap setting offlint "
                      "cannot read): the adapters' saved inputs are then not gathered by Transformer Engine")
    return Peft(tuple(dict.fromkeys(targets)), int(dim)), ""


# Bridge's Wan diffusion transformer (offlint/estimate/diffusion.py; docs/estimate.md "Wan"). WanModelProvider's
# own defaults (diffusion/models/wan/wan_provider.py:35-73 at Bridge 067f987) for the fields the model reads: the
# reader gives a provider's unset fields megatron-core's TransformerConfig defaults instead.
WAN_PROVIDER_DEFAULTS = {"model.in_channels": 16, "model.out_channels": 16, "model.patch_spatial": 2,
                         "model.patch_temporal": 1, "model.freq_dim": 256, "model.text_dim": 4096,
                         "model.layernorm_across_heads": True, "model.add_qkv_bias": True,
                         "model.add_bias_linear": True, "model.gated_linear_unit": False, "model.qkv_format": "thd"}
# WanDatasetConfig's defaults (diffusion/data/wan/wan_energon_datamodule.py:53-68): the mock batch's sizes.
WAN_DATASET_DEFAULTS = {"dataset.path": None, "dataset.F_latents": 24, "dataset.H_latents": 104,
                        "dataset.W_latents": 60, "dataset.patch_spatial": 2, "dataset.patch_temporal": 1,
                        "dataset.number_packed_samples": 1, "dataset.context_seq_len": 512,
                        "dataset.context_embeddings_dim": 4096}
_MOCK_LATENT_CHANNELS = 16  # wan_mock_datamodule.py:49: torch.randn(16, F, H, W)
_WAN_KEY = "model.crossattn_emb_size"


def _read_wan(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
              fsdp: str | None) -> tuple[ModelShape, str]:
    """(the model, with its Wan shape and the mock batch's token count as seq_length where it is Wan; why there is
    no verdict, or ""). A model is Wan where `crossattn_emb_size` is set (only WanModelProvider has it); inputs
    that cannot be read are recorded in `r.unknown`."""
    value = r.lookup(_WAN_KEY)
    if value.is_unknown:
        reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
        r.unknown[_WAN_KEY] = f"{reason} (the memory model would need to know whether the model is Wan)"
        return m, ""
    if not (value.state == "known" and _positive_int(value.value)):
        return m, ""
    # A Wan model has no vocabulary and its own sequence: the language-model readings do not apply.
    for key in ("model.vocab_size", "model.seq_length"):
        r.unknown.pop(key, None)
    r.other_seq_length = None

    def get(key: str) -> object:
        value = r.lookup(key)
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[key] = f"{reason} (the Wan memory model needs it)"
            return None
        if value.state == "known":
            return value.value
        return {**WAN_PROVIDER_DEFAULTS, **WAN_DATASET_DEFAULTS}.get(key, value.value)

    # Only Bridge's diffusion dataset configs have packing_buffer_size (WanDatasetConfig requires it set,
    # wan_energon_datamodule.py:70-72); offlint sees no class name, so that field tells the Wan dataset apart.
    packing = r.lookup("dataset.packing_buffer_size")
    if packing.is_unknown:
        get("dataset.packing_buffer_size")
        return m, ""
    if not (packing.state == "known" and _positive_int(packing.value)):
        return m, ("a Wan diffusion transformer whose dataset offlint does not read as WanDatasetConfig (no "
                   "packing_buffer_size set): the sequence is the mock batch's or the packed videos' tokens")
    path = get("dataset.path")
    if "dataset.path" in r.unknown:
        return m, ""
    if path not in (None, "", []):
        return m, ("Wan with a real dataset (dataset.path set): a packed micro-batch's tokens depend on the videos "
                   "(first-fit packing to seq_length, a longer video packed alone), which offlint cannot see")
    sizes = {k: get(k) for k in ("model.in_channels", "model.out_channels", "model.patch_spatial",
                                 "model.patch_temporal", "model.freq_dim", "model.text_dim", "dataset.F_latents",
                                 "dataset.H_latents", "dataset.W_latents", "dataset.patch_spatial",
                                 "dataset.patch_temporal", "dataset.number_packed_samples",
                                 "dataset.context_seq_len", "dataset.context_embeddings_dim")}
    flags = {k: get(k) for k in ("model.layernorm_across_heads", "model.add_qkv_bias", "model.add_bias_linear",
                                 "model.gated_linear_unit", "model.qkv_format")}
    if any(k in r.unknown for k in (*sizes, *flags)):
        return m, ""
    bad = [k for k, v in sizes.items() if not _positive_int(v)]
    if bad:
        return m, f"Wan with {bad[0]}={sizes[bad[0]]!r} (offlint reads a positive int)"
    pt, ps = sizes["model.patch_temporal"], sizes["model.patch_spatial"]
    frames, height, width = sizes["dataset.F_latents"], sizes["dataset.H_latents"], sizes["dataset.W_latents"]
    packs, context = sizes["dataset.number_packed_samples"], sizes["dataset.context_seq_len"]
    wan = WanShape(crossattn_emb_size=int(r.lookup(_WAN_KEY).value), text_dim=sizes["model.text_dim"],
                   in_channels=sizes["model.in_channels"], out_channels=sizes["model.out_channels"],
                   patch_temporal=pt, patch_spatial=ps, freq_dim=sizes["model.freq_dim"],
                   sample_tokens=(frames // pt) * (height // ps) * (width // ps), context_tokens=context,
                   packed_samples=packs, layernorm_across_heads=bool(flags["model.layernorm_across_heads"]))
    m = replace(m, wan=wan, seq_length=packs * wan.sample_tokens, add_qkv_bias=bool(flags["model.add_qkv_bias"]),
                add_bias_linear=bool(flags["model.add_bias_linear"]),
                gated_linear_unit=bool(flags["model.gated_linear_unit"]), hidden_dropout=0.0)
    return m, _wan_refused(m, p, t, low, fsdp, sizes, flags)


def _wan_refused(m: ModelShape, p: Parallelism, t: Training, low, fsdp, sizes: dict, flags: dict) -> str:
    w = m.wan
    if (sizes["dataset.patch_temporal"], sizes["dataset.patch_spatial"]) != (w.patch_temporal, w.patch_spatial) \
            or w.in_channels != _MOCK_LATENT_CHANNELS or w.out_channels != _MOCK_LATENT_CHANNELS \
            or sizes["dataset.context_embeddings_dim"] != w.text_dim:
        return ("Wan whose mock batch does not fit the model (the dataset's patch sizes, its 16 latent channels and "
                "text embedding width must be the model's patch sizes, in/out_channels and text_dim)")
    if any(size % patch for size, patch in ((sizes["dataset.F_latents"], w.patch_temporal),
                                            (sizes["dataset.H_latents"], w.patch_spatial),
                                            (sizes["dataset.W_latents"], w.patch_spatial))):
        return "Wan latents that the patch sizes do not divide (patchify asserts)"
    if flags["model.qkv_format"] != "thd":
        return f"Wan with qkv_format={flags['model.qkv_format']!r} (its packed batches run in 'thd'; not modelled)"
    if m.num_query_groups != m.num_attention_heads:
        return "Wan with grouped-query attention (megatron-core's CrossAttention raises)"
    if p.pp > 1 or (p.vpp or 1) > 1:
        return ("Wan with pipeline parallelism (the P2P buffers take seq_length while the mock batch's tokens come "
                "from the latent sizes; not modelled)")
    if p.cp > 1 and (w.sample_tokens % (2 * p.cp) or w.context_tokens % (2 * p.cp)):
        return (f"Wan with CP{p.cp} and {w.sample_tokens} video or {w.context_tokens} text tokens per sample, not a "
                f"multiple of 2 x CP (Transformer Engine's context parallelism asserts it; the mock batch is not "
                f"padded)")
    if p.sequence_parallel and (m.seq_length // p.cp) % p.tp:
        return f"Wan with sequence parallelism and {m.seq_length // p.cp} tokens per CP rank, not a multiple of TP"
    if m.num_moe_experts or m.multi_latent_attention or m.mtp_num_layers or m.hybrid_pattern is not None \
            or m.linear_attention_freq is not None:
        return "Wan with MoE, multi-latent attention, MTP, Mamba or gated-delta-net settings (not modelled)"
    if low is not None or fsdp or t.peft or t.cpu_offloading or t.fine_grained_offloading:
        return "Wan with FP8/FP4, Megatron-FSDP, LoRA or activation offloading (not modelled)"
    if t.recompute_granularity == "selective" and set(t.recompute_modules) - {"core_attn"}:
        return "Wan with selective recompute beyond core_attn (not modelled)"
    return ""


# A vision tower offlint models under a frozen language model: Bridge's Qwen3VLVisionModel (models/qwen_vl/
# modelling_qwen3_vl/vision_model.py at 067f987), which Qwen3VLModelProvider and Qwen3VLMoEModelProvider build.
_FROZEN_LM_TOWERS = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")  # Qwen3.5's: gated delta net, below
_VISION_SIZES = ("depth", "hidden_size", "intermediate_size", "num_heads", "in_channels", "patch_size",
                 "temporal_patch_size", "spatial_merge_size", "num_position_embeddings", "out_hidden_size")


def _read_frozen_lm(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                    fsdp: str | None) -> tuple[FrozenLM | None, str]:
    """(the vision tower of a recipe that trains only a VLM's vision projection, or None; why there is no verdict,
    or ""). Bridge's `freeze_language_model` with `freeze_vision_model` and without `freeze_vision_projection`
    (Qwen3VLModel.freeze): the language model and the tower keep their weights only, the patch mergers train."""
    value = r.lookup("model.freeze_language_model")
    what = "a frozen language model (a VLM recipe training its vision projection)"
    if value.is_unknown:
        reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
        r.unknown[value.key] = f"{reason} (the memory model would need to know whether {what} is used)"
        return None, ""
    tower = r.lookup("model.vision_config")
    config = tower.value if tower.state == "known" else None
    if value.state != "known" or value.value in (None, False, 0):
        return None, ""  # a VLM from offlint's table whose language model trains: _read_trained_vlm
    flags = {key: r.lookup(f"model.{key}") for key in ("freeze_vision_model", "freeze_vision_projection")}
    for key, flag in flags.items():
        if flag.is_unknown:
            reason = flag.value.reason if isinstance(flag.value, Unknown) else "unknown"
            r.unknown[flag.key] = f"{reason} (what a frozen language model's recipe trains depends on it)"
            return None, ""
    if flags["freeze_vision_model"].value is not True or flags["freeze_vision_projection"].value is not False:
        return None, ("a frozen language model without exactly the vision projection trained (only "
                      "freeze_vision_model=True with freeze_vision_projection=False is modelled)")
    if not isinstance(config, dict) and (not m.hidden_size or not m.num_layers):
        return None, ""  # a model offlint cannot size at all: "unknown model size" says enough
    if not isinstance(config, dict) or config.get("model_type") not in _FROZEN_LM_TOWERS or not all(
            _positive_int(config.get(k)) for k in _VISION_SIZES) or not isinstance(
            config.get("deepstack_visual_indexes"), (list, tuple)):
        return None, ("a frozen language model whose vision tower offlint cannot size (only Qwen3-VL towers listed "
                      "in offlint/data/hf_models.json are modelled)")
    if fsdp or t.peft:
        return None, ("a frozen language model with Megatron-FSDP or LoRA (frozen sharded or adapted weights are "
                      "not modelled)")
    if low is not None and (low.recipe == "nvfp4" or low.output_layer):
        return None, ("a frozen language model with NVFP4 training or an FP8 output layer (what their frozen "
                      "Transformer Engine linears keep is not checked; FP8 layers are modelled, frozen_lm.py)")
    if m.hybrid_pattern is not None:
        return None, "a frozen language model with Mamba layers (what their frozen kernels keep is not established)"
    if m.multi_latent_attention or m.moe_latent_size:
        return None, ("a frozen language model with MLA or latent experts (their frozen layers' saved tensors are not "
                      "checked)")
    # Gated delta net layers are modelled as frozen (frozen_lm.layer_terms); MTP, shared experts and the attention
    # output gate between two bounds (FrozenLM.bound), in bf16 only
    bounded = bool(m.mtp_num_layers or m.moe_shared_expert_intermediate_size or m.attention_output_gate)
    if (bounded or m.linear_attention_freq is not None) and low is not None:
        return None, ("a frozen language model with FP8 and gated delta net, MTP, shared-expert or gated-attention "
                      "layers (their frozen quantized layers' saved tensors are not checked)")
    recompute = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.recompute_granularity == "full" or recompute - {"core_attn"} or t.moe_layer_recompute or \
            t.fine_grained_offloading or t.cpu_offloading or t.optimizer_cpu_offload:
        return None, ("a frozen language model with recompute beyond core_attn or activation or optimizer offloading "
                      "(not modelled)")
    # EP overlap selects megatron-core's combined 1F1B schedule for every layout (no pipeline: schedules.py:751;
    # interleaved, every forward from the first warm-up one: :1458, :1595; a pipeline without virtual stages is
    # refused by TransformerConfig, transformer_config.py:2674-2678), which asks the model for build_schedule_plan
    # (combined_1f1b.py:381-383). Bridge's Qwen3VLModel, the only model this reads (a Qwen3-VL tower), does not
    # define it (modelling_qwen3_vl/model.py:253), so get_attr_wrapped_model raises (utils.py:664-666), and Bridge's
    # Qwen3-VL step would build the plan from the tokens alone (qwen3_vl_step.py:352-354, no pixel_values): there
    # is no schedule of this model to size (megatron-core 0.19.2 and Megatron-LM d98e8a6 alike; Bridge 067f987).
    why = _vlm_schedule_refusal(r, p, "a frozen language model", {
        "model.vision_dp_when_cp": False, "model.vision_cuda_graph_impl": "none",
        "model.moe_expert_rank_capacity_factor": None, "model.use_transformer_engine_op_fuser": False})
    if why is None or why:
        return None, why or ""
    return FrozenLM(*(int(config[k]) for k in _VISION_SIZES), len(config["deepstack_visual_indexes"]),
                    bound=None if bounded else ""), ""


# Towers offlint models in a VLM whose language model trains: Bridge's Qwen3VLVisionModel, which Qwen3VLModel
# builds for the Qwen3-VL providers and for Qwen35VLModelProvider / Qwen35VLMoEModelProvider
# (qwen35_vl_provider.py:587-613: the same TE ViT layer spec, get_vision_model_config and patch mergers; Qwen3.5's
# towers have no deepstack mergers, get_vision_model_config's default []).
_TRAINED_VLM_TOWERS = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


def _read_trained_vlm(r: _Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                      fsdp: str | None) -> tuple[TrainedVLM | None, str]:
    """(the tower of a VLM recipe whose language model trains, or None; why there is no verdict, or ""). Bridge's
    Qwen3VLModel.freeze (model.py:513-546) with freeze_language_model False: the language model trains as a text
    model does; freeze_vision_model False trains the tower, True freezes it (as frozen_lm.py models it); the patch
    mergers train unless freeze_vision_projection."""
    value = r.lookup("model.freeze_language_model")
    if value.is_unknown or (value.state == "known" and value.value not in (None, False, 0)):
        return None, ""  # _read_frozen_lm
    tower = r.lookup("model.vision_config")
    config = tower.value if tower.state == "known" else None
    if not isinstance(config, dict) or (not m.hidden_size or not m.num_layers):
        return None, ""  # not a VLM from offlint's table, or a model offlint cannot size at all
    flags = {key: r.lookup(f"model.{key}") for key in ("freeze_vision_model", "freeze_vision_projection")}
    for key, flag in flags.items():
        if flag.is_unknown:
            reason = flag.value.reason if isinstance(flag.value, Unknown) else "unknown"
            r.unknown[flag.key] = f"{reason} (what a VLM recipe trains depends on it)"
            return None, ""
    what = "a VLM whose language model trains"
    pairs = (("freeze_language_model", value), ("freeze_vision_model", flags["freeze_vision_model"]))
    unset = [k for k, flag in pairs if flag.state != "known"]
    if unset:  # the providers differ: Qwen3VLMoEModelProvider freezes both (qwen3_vl_provider.py:272-274)
        return None, (f"a VLM recipe that leaves {' and '.join(unset)} at its provider's default (Bridge's Qwen3-VL "
                      f"MoE provider freezes the language model and the tower, the other Qwen-VL providers do not)")
    tower_frozen, projection_frozen = (flags[k].value is True for k in flags)
    if projection_frozen:
        return None, f"{what} with freeze_vision_projection=True (a frozen patch merger is not modelled)"
    deepstack = config.get("deepstack_visual_indexes", [])
    if config.get("model_type") not in _TRAINED_VLM_TOWERS or not all(
            _positive_int(config.get(k)) for k in _VISION_SIZES) or not isinstance(deepstack, (list, tuple)):
        return None, (f"{what} and a vision tower offlint cannot size (its offlint/data/hf_models.json entry sizes "
                      f"the tower only partly, or not a Qwen3-VL or Qwen3.5 tower)")
    if fsdp or t.peft:
        return None, f"{what} with Megatron-FSDP or LoRA (the tower's sharded or adapted weights are not modelled)"
    if t.cpu_offloading or t.fine_grained_offloading or t.optimizer_cpu_offload:
        return None, f"{what} with activation or optimizer offloading (the tower's share is not modelled)"
    if t.recompute_granularity == "full" and t.recompute_method not in ("uniform", "block"):
        return None, ""  # megatron-core refuses full recompute without a method; the rules say so
    why = _vlm_schedule_refusal(r, p, what, {"model.vision_dp_when_cp": False})
    if why is None or why:
        return None, why or ""
    sizes = FrozenLM(*(int(config[k]) for k in _VISION_SIZES), len(deepstack))
    graphs, why = _read_vision_graphs(r, p, t, sizes, tower_frozen, what)
    if graphs is None or why:
        return None, why
    if graphs:
        return TrainedVLM(sizes, tower_trained=True, graph_patches=graphs, graph_bound=None), ""
    return TrainedVLM(sizes, tower_trained=not tower_frozen), ""


# The vision CUDA graph scopes under which megatron-core graphs a whole ViT layer (attention and MLP): none set
# (every layer whole, cuda_graphs.py:2066-2068 at 2a75ac12; Bridge's get_vision_model_config clears the modules for
# an empty scope, modelling_qwen3_vl/transformer_config.py:146-149), or both "attn" and "mlp" (:2080-2096; the
# layer's submodules under graphs, transformer_layer.py:1117-1128).
_WHOLE_LAYER_SCOPES = (frozenset(), frozenset({"attn", "mlp"}))


def _read_vision_graphs(r: _Reader, p: Parallelism, t: Training, v: FrozenLM, tower_frozen: bool,
                        what: str) -> tuple[int | None, str]:
    """(the padded patch length of a tower under Transformer Engine vision CUDA graphs, 0 without them, None when
    it cannot be read or is refused; why there is no verdict, or ""). Bridge 067f987: train.py:283-303 builds
    megatron-core's VisionTECudaGraphHelper when vision_cuda_graph_impl is "transformer_engine" (the vision config
    takes it, transformer_config.py:141-151); the tower then pads each micro-batch's patches to
    max_vision_cuda_graph_seq_length, else num_position_embeddings // spatial_merge_size**2 (vision_model.py:290-295,
    :337-343; more raise, :57-61; megatron-core's helper captures at the same length, cuda_graphs.py:3020-3038)."""
    impl = r.get("model.vision_cuda_graph_impl", "none")
    if "model.vision_cuda_graph_impl" in r.unknown:
        return None, ""
    if impl in ("none", None):
        return 0, ""
    if impl != "transformer_engine":
        return None, f"{what} with vision_cuda_graph_impl={impl!r} (not modelled)"
    scope = r.get("model.vision_cuda_graph_scope", [])
    length = r.get("model.max_vision_cuda_graph_seq_length")
    if "model.vision_cuda_graph_scope" in r.unknown or "model.max_vision_cuda_graph_seq_length" in r.unknown:
        return None, ""
    names = scope if isinstance(scope, (list, tuple)) else str(scope).split(",") if scope else []
    if frozenset(str(n).strip().split(".")[-1] for n in names) not in _WHOLE_LAYER_SCOPES:
        return None, (f"{what} with vision_cuda_graph_scope={list(names)!r} (only a whole graphed ViT layer, "
                      f"['attn', 'mlp'] or none, is modelled)")
    if tower_frozen:
        return None, (f"{what}, a frozen tower and vision CUDA graphs (the graphs' static inputs require a "
                      f"gradient, cuda_graphs.py:3198-3204: what the captured frozen layers keep is not modelled)")
    if t.recompute_granularity is not None:
        return None, (f"{what} with recompute ({t.recompute_granularity}) and vision CUDA graphs (the tower takes "
                      f"the language model's recompute; checkpoints around captured layers are not modelled)")
    if p.pp > 1 and p.vpp and p.vpp > 1:
        return None, (f"{what} with an interleaved pipeline and vision CUDA graphs (megatron-core captures the "
                      f"tower's graphs for a one-chunk 1F1B order, cuda_graphs.py:3096-3097 and :2519-2543: not "
                      f"the interleaved schedule's)")
    if p.pp > 1 and not t.global_batch_size:
        return None, (f"{what}, vision CUDA graphs and an unknown global batch size (with a pipeline the capture "
                      f"allocates every micro-batch's sample inputs, cuda_graphs.py:2519-2526 and :3190-3213)")
    if length in (None, 0):
        fallback = v.num_position_embeddings // v.spatial_merge_size ** 2
        if not fallback:
            return None, f"{what} with vision CUDA graphs padded to 0 patches (num_position_embeddings too small)"
        return fallback, ""
    if not _positive_int(length):
        return None, f"{what} with max_vision_cuda_graph_seq_length={length!r} (offlint reads a positive int)"
    return int(length), ""


def _vlm_schedule_refusal(r: _Reader, p: Parallelism, what: str, unmodelled: dict[str, object]) -> str | None:
    """Why a Qwen3-VL/Qwen3.5-VL model (`what`: "a frozen language model", ...) has no schedule offlint sizes, ""
    when it has, None when a setting that decides it is unknown. EP overlap selects megatron-core's combined 1F1B
    schedule, which asks the model for build_schedule_plan (combined_1f1b.py:381-383), and Bridge's Qwen3VLModel
    does not define it, whatever is frozen (see _read_frozen_lm); frozen_lm.first_chunk_in_flight follows the
    interleaved schedule with its default group of PP micro-batches per virtual stage; `unmodelled` settings (key:
    default) are refused when set otherwise."""
    for key, default in {"comm_overlap.overlap_moe_expert_parallel_comm": None,
                         "model.overlap_moe_expert_parallel_comm": False}.items():
        setting = r.get(key, default)
        if key in r.unknown:
            return None
        if setting is True:
            return (f"{what} with overlap_moe_expert_parallel_comm (its combined 1F1B schedule asks the model for "
                    f"build_schedule_plan, megatron-core combined_1f1b.py:381-383, which Bridge's Qwen3VLModel does "
                    f"not define: there is no schedule of this model to size)")
    if p.pp > 1 and p.vpp and p.vpp > 1:
        setting = r.get("model.microbatch_group_size_per_vp_stage")
        if "model.microbatch_group_size_per_vp_stage" in r.unknown:
            return None
        if setting not in (None, p.pp):
            return (f"{what} with an interleaved pipeline and microbatch_group_size_per_vp_stage={setting!r} "
                    f"(offlint's pipeline model takes PP micro-batches per group)")
    for key, default in unmodelled.items():
        setting = r.get(key, default)
        if key in r.unknown:
            return None
        if setting not in (default, None):
            return f"{what} with {key.split('.', 1)[1]}={setting!r} (not modelled)"
    return ""


def with_training(inputs: Inputs, **changes) -> Inputs:
    return inputs.with_(training=replace(inputs.training, **changes))


def with_parallel(inputs: Inputs, **changes) -> Inputs:
    return inputs.with_(parallel=replace(inputs.parallel, **changes))
