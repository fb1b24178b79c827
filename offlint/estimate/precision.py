"""What FP8 training keeps in GPU memory beyond bf16 training, per scaling recipe (Transformer Engine 2.x as
megatron-core drives it). Sources: docs/estimate.md, "FP8 training"; every figure below names where it is read.

Only the GEMM weights of the transformer layers run in FP8 (megatron-core's Transformer Engine linears: QKV,
attention output, fc1, fc2, shared and routed experts). Embedding, output layer, norms, router and biases stay
16-bit. Per FP8 GEMM weight element a rank holds one quantized copy with both usages the forward and backward
GEMMs need (`quantize_weight`: row-wise for fprop, column-wise for dgrad):

- bf16 primary weights (`fp8_param` off): the bf16 parameter plus Transformer Engine's cached quantized copy
  (`_fp8_workspaces["weight"]`, kept because megatron-core passes `is_first_microbatch` unless
  `disable_parameter_transpose_cache`);
- FP8 primary weights (`fp8_param`/`fp8_param_gather`): the quantized parameter replaces the bf16 one (the DDP
  parameter buffer is uint8); the fp32 master copy stays in the optimizer.

The quantized copy's size: per-tensor scaling (delayed, tensorwise/current) stores 1 byte per element, and on
Hopper a separate 1-byte transpose for the column-wise usage (`nvte_is_non_tn_fp8_gemm_supported` is false
below compute capability 10.0); MXFP8 stores row-wise and column-wise data, each 1 byte plus a 1-byte E8M0
scale per 32 elements; blockwise (Hopper "subchannel") stores both, each 1 byte plus an fp32 scale per 128 x 128
block for weights and per 1 x 128 for activations.

The input each FP8 linear saves for its weight gradient is quantized (only the usage the backward needs is
kept): 1 byte per element, plus the scales. Attention itself stays bf16: flash attention keeps its bf16 output
for its backward, and with delayed scaling the output projection's FP8 input is an extra copy (the other
recipes and NVFP4 save the original input there, `set_save_original_input`, and the same for the shared
expert's fc1).

NVFP4 (`fp4="e2m1"`, Transformer Engine's NVFP4BlockScaling) quantizes the same GEMMs, layers
`first_last_layers_bf16` keeps aside, but not the MTP block (megatron-core runs it outside any FP4 context).
An NVFP4 tensor holds per usage 4-bit E2M1 data (two elements per byte), one E4M3 byte of block scale per 16
elements and an fp32 global amax: a GEMM weight keeps both usages (2 x (1/2 + 1/16) bytes per element), a saved
input the column-wise one (1/2 + 1/16).
"""

from __future__ import annotations

from offlint.estimate.inputs import LowPrecision, ModelShape

# Bytes per element of one quantized GEMM weight holding both usages, and of one saved (one-usage) input.
_SCALE_MXFP8 = 1 / 32  # one E8M0 byte per 32 elements
_SCALE_BLOCK_WEIGHT = 4 / (128 * 128)  # an fp32 scale per 128 x 128 block
_SCALE_BLOCK_INPUT = 4 / 128  # an fp32 scale per 1 x 128 block
_NVFP4_DATA = 1 / 2  # E2M1: two elements per byte
_NVFP4_SCALE = 1 / 16  # one E4M3 block scale per 16 elements


def weight_copy_bytes(lp: LowPrecision) -> float:
    """Bytes per GEMM weight element of its quantized copy (both usages)."""
    if lp.recipe == "nvfp4":
        return 2 * (_NVFP4_DATA + _NVFP4_SCALE)
    if lp.recipe == "mxfp8":
        return 2 * (1 + _SCALE_MXFP8)
    if lp.recipe == "blockwise":
        return 2 * (1 + _SCALE_BLOCK_WEIGHT)
    if lp.transpose is None:  # oom.architectures makes one estimate per architecture instead
        raise ValueError("per-tensor FP8 on a GPU of unknown architecture: estimate each of oom.architectures")
    return 2.0 if lp.transpose else 1.0  # delayed / tensorwise: data, and its transpose on Hopper


def saved_input_bytes(lp: LowPrecision) -> float:
    """Bytes per element of a quantized linear's saved input (the one usage its backward reads)."""
    if lp.recipe == "nvfp4":
        return _NVFP4_DATA + _NVFP4_SCALE
    if lp.recipe == "mxfp8":
        return 1 + _SCALE_MXFP8
    if lp.recipe == "blockwise":
        return 1 + _SCALE_BLOCK_INPUT
    return 1.0


def is_fp8_layer(m: ModelShape, lp: LowPrecision | None, index: int) -> bool:
    """Whether layer `index` (global) runs its GEMMs in FP8 (or NVFP4): Bridge's `first_last_layers_bf16` keeps
    the first and last few in bf16 (megatron-core's is_first_last_bf16_layer, fp4_utils.get_fp4_context)."""
    if lp is None:
        return False
    return lp.bf16_layers_start <= index < m.num_layers - lp.bf16_layers_end


def quantized_mtp(lp: LowPrecision | None) -> bool:
    """Whether the MTP block's GEMMs are quantized: FP8 yes (the global FP8 context), NVFP4 no (megatron-core
    builds and runs the MTP layers under FP8 contexts only: `get_fp8_context` in multi_token_prediction.py,
    "currently ignoring FP4 in MTP layers")."""
    return lp is not None and lp.recipe != "nvfp4"


def attention_input_bytes(lp: LowPrecision, head_dim: int) -> float:
    """Bytes per element of q, k or v that FP8 fused attention (`fp8_dot_product_attention`) saves for its
    backward (Transformer Engine d0067d0, attention/dot_product_attention/backends.py `FusedAttnFunc`, with the
    default NVTE_FP8_DPA_BWD=1): the row-wise FP8 copy only (`get_attention_quantizers` sets the QKV quantizer
    row-wise; `combine_and_quantize` keeps that usage in training), 1 byte; MXFP8 adds its E8M0 scales, one
    byte per 32 elements of a head, the scale tensor's rows padded to a multiple of 4 (MXFP8Quantizer). Under
    NVFP4 attention runs under its own FP8 recipe (LowPrecision.attention_recipe)."""
    if (lp.attention_recipe or lp.recipe) == "mxfp8":
        return 1 + -(-(-(-head_dim // 32)) // 4) * 4 / head_dim
    return 1.0


def attention_output_bytes(lp: LowPrecision) -> float:
    """Bytes per element of the attention output FP8 fused attention saves: FP8 with delayed scaling (and the
    output projection then saves its own quantized input), else the bf16 output (current scaling with the
    default NVTE_DPA_FP8CS_O_in_F16=1, MXFP8)."""
    return 1.0 if (lp.attention_recipe or lp.recipe) == "delayed" else 2.0


def keeps_quantized_copies(lp: LowPrecision) -> bool:
    """Whether the output projection and the shared expert's fc1 keep quantized copies of inputs that are saved
    anyway in bf16 (flash attention's output, the router's input). Only delayed scaling: for the other FP8
    recipes (Transformer Engine >= 2.6) and NVFP4 (>= 2.7) megatron-core calls `set_save_original_input` on
    them (attention.py, multi_latent_attention.py, moe/shared_experts.py)."""
    return lp.recipe == "delayed"


def fsdp_data_bytes(lp: LowPrecision) -> float:
    """Bytes per GEMM weight element in Megatron-FSDP's uint8 weight buffers (sharded, and all-gathered per
    unit): a Float8Tensor's data (1 byte), MXFP8's row-wise data and its column-wise "transpose" buffer
    (2 bytes). megatron_fsdp/param_and_grad_buffer.py: `model_weight_buffer` (torch.uint8 for "float8"
    groups) and `transpose_weight_buffer` (`fp8_need_transpose_data`: MXFP8 only)."""
    return 2.0 if lp.recipe == "mxfp8" else 1.0


def fsdp_scale_bytes(lp: LowPrecision) -> float:
    """Bytes per GEMM weight element that Megatron-FSDP leaves unsharded in the parameter: MXFP8's row-wise and
    column-wise E8M0 scales, full size on every rank (Transformer Engine's `_cast_master_weights_to_fp8_mxfp8_
    scaling` all-reduces the partial amaxes into each weight's whole `_rowwise/_columnwise_scale_inv`); a
    Float8Tensor's one scale per tensor is nothing."""
    return 2 * _SCALE_MXFP8 if lp.recipe == "mxfp8" else 0.0


def gemm_weights(m: ModelShape, moe: bool, kind: str | None = None, gdn: bool = False) -> tuple[int, int, int]:
    """(TP-sharded, replicated, expert) GEMM weight elements of one layer, biases and norms excluded. Replicated:
    multi-latent attention's down projections and latent MoE's projections, Transformer Engine linears
    duplicated over TP (params.latent_attention, params.moe_layer). `kind`: a hybrid model's layer symbol;
    `gdn`: a gated delta net in place of self-attention (its in_proj and out_proj; not the conv1d)."""
    if kind is not None:
        return _hybrid_gemm_weights(m, kind)
    h = m.hidden_size
    tp, replicated = _gdn_gemm_weights(m) if gdn else _attention_gemm_weights(m)
    gate = 2 if m.gated_linear_unit else 1
    if not moe:
        return tp + h * m.ffn_hidden_size * gate + m.ffn_hidden_size * h, replicated, 0
    shared = m.moe_shared_expert_intermediate_size or 0
    ffn = m.moe_ffn_hidden_size or m.ffn_hidden_size
    width = m.moe_latent_size or h  # latent MoE: routed experts in the latent width
    replicated += 2 * h * m.moe_latent_size if m.moe_latent_size else 0
    return tp + shared * h * (gate + 1), replicated, (m.num_moe_experts or 0) * ffn * width * (gate + 1)


def _hybrid_gemm_weights(m: ModelShape, kind: str) -> tuple[int, int, int]:
    """A hybrid layer's GEMM weights: a Mamba layer's in_proj and out_proj (its conv1d and scan are not GEMMs),
    or the attention, MLP or MoE part of a transformer layer."""
    if kind == "M":
        width = 2 * m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads
        return m.hidden_size * width + m.mamba_d_inner * m.hidden_size, 0, 0
    tp, replicated = _attention_gemm_weights(m)
    if kind == "*":
        return tp, replicated, 0
    dense, rest, expert = gemm_weights(m, kind == "E")
    return dense - tp, rest - replicated, expert


def _attention_gemm_weights(m: ModelShape) -> tuple[int, int]:
    """(TP-sharded, replicated) weights of the attention's linears (linear_qkv with the output gate's part)."""
    h = m.hidden_size
    if not m.multi_latent_attention:
        q = m.num_attention_heads * m.kv_channels
        kv = m.num_query_groups * m.kv_channels
        return h * (q + 2 * kv + (q if m.attention_output_gate else 0)) + q * h, 0
    heads, qk = m.num_attention_heads, m.qk_head_dim + m.qk_pos_emb_head_dim
    tp = (m.q_lora_rank or h) * heads * qk + m.kv_lora_rank * heads * (m.qk_head_dim + m.v_head_dim) \
        + heads * m.v_head_dim * h
    return tp, h * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_pos_emb_head_dim)


def _gdn_gemm_weights(m: ModelShape) -> tuple[int, int]:
    """(TP-sharded, replicated) weights of a gated delta net's linears: in_proj and out_proj (params.gdn_attention)."""
    qk, v = m.gdn_key_heads * m.gdn_key_head_dim, m.gdn_value_heads * m.gdn_value_head_dim
    return m.hidden_size * (2 * qk + 2 * v + 2 * m.gdn_value_heads) + v * m.hidden_size, 0


def mtp_gemm_weights(m: ModelShape, lp: LowPrecision | None = None) -> tuple[int, int, int]:
    """(TP-sharded, replicated, expert) GEMM weights of the MTP block: per depth (one set for all with
    `mtp_use_repeated_layer`) eh_proj and the layer's linears. MTP runs in the global FP8 context
    (megatron-core's MultiTokenPredictionLayer), whatever first_last_layers_bf16 says. Under NVFP4 (`lp`) a
    hybrid depth's quantized weights are those of its layers that `hybrid_mtp_quantized` says run in FP4, and
    not eh_proj."""
    last = m.num_layers - 1
    tp, replicated, expert = gemm_weights(m, m.is_moe_layer(last), gdn=m.is_gdn_layer(last))
    eh_proj = 2 * m.hidden_size * m.hidden_size if quantized_mtp(lp) or lp is None else 0
    if m.hybrid_mtp_pattern:  # a hybrid model's depth: the layers of its pattern
        layers = [_hybrid_gemm_weights(m, kind) for kind, quantized in
                  zip(m.hybrid_mtp_pattern, hybrid_mtp_quantized(m, lp) if lp else [True] * len(m.hybrid_mtp_pattern))
                  if quantized]
        tp, replicated, expert = (sum(layer[i] for layer in layers) for i in range(3))
    n = 1 if m.mtp_repeated_layer else m.mtp_num_layers
    return n * (tp + eh_proj), n * replicated, n * expert


def hybrid_mtp_quantized(m: ModelShape, lp: LowPrecision | None) -> list[bool]:
    """Per layer of a hybrid MTP depth, whether its GEMMs run quantized. FP8: all (the depth's global FP8
    context encloses its HybridStack's per-layer ones). NVFP4: MultiTokenPredictionLayer enters no FP4 context
    (megatron-core 0.19.2 multi_token_prediction.py:1180-1188, "currently ignoring FP4 in MTP layers": eh_proj
    stays bf16), but the depth's HybridStack builds and runs each layer under get_fp4_context(config, index)
    with the index counted within the depth from 0 (pp_layer_offset=0, :1022-1026; hybrid_block.py:124-130
    init, :337-341 forward with layer_number - 1), so first_last_layers_bf16 keeps the depth's first
    num_layers_at_start_in_bf16 layers (and any index at or beyond num_layers minus the end count) in bf16,
    as `is_fp8_layer` says for those indices."""
    if not m.hybrid_mtp_pattern or lp is None:
        return [False] * len(m.hybrid_mtp_pattern or "")
    if lp.recipe != "nvfp4":
        return [True] * len(m.hybrid_mtp_pattern)
    return [is_fp8_layer(m, lp, i) for i in range(len(m.hybrid_mtp_pattern))]


def gemms(m: ModelShape, moe: bool, local_experts: float, kind: str | None = None) -> float:
    """Quantized GEMMs of one layer on one rank (each keeps its own scaling state): QKV and output projection
    (MLA: the down and up projections and the output projection), fc1 and fc2, or fc1 and fc2 per local expert
    plus the shared expert's (and latent MoE's two projections). A hybrid Mamba layer has two (in_proj,
    out_proj); its attention, MLP and MoE layers their part of a transformer layer's. A gated delta net has two
    (in_proj, out_proj), as self-attention."""
    attention = (5 if m.q_lora_rank else 4) if m.multi_latent_attention else 2
    if kind in ("M", "*", "-"):
        return 2
    if kind == "E":
        return gemms(m, True, local_experts) - attention
    if not moe:
        return attention + 2
    return attention + 2 * local_experts + (2 if m.moe_shared_expert_intermediate_size else 0) + \
        (2 if m.moe_latent_size else 0)


def scaling_state_bytes(lp: LowPrecision, gemms: float) -> float:
    """Delayed scaling's per-GEMM state: three forward quantizers (input, weight, output) and two backward ones
    (output gradient, input gradient), each with an fp32 amax history of `fp8_amax_history_len` entries, a
    scale and its inverse (Transformer Engine's DelayedScaling `fp8_meta`). Current and block scaling keep no
    history (a few scalars)."""
    if lp.recipe != "delayed":
        return 0.0
    return gemms * 5 * (lp.amax_history + 2) * 4
