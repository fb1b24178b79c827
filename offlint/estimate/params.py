"""Parameter counts of a megatron-core GPTModel, per layer kind and per pipeline stage and rank.

Counted from the modules megatron-core builds (embedding, per layer: input norm, QKV and output projections
with their biases, optional Q/K norms, pre-MLP norm, dense MLP or router + experts + shared experts; final
norm; output layer when untied). `tests/test_estimate_params.py` checks these totals against real GPTModels.
Each count is split by how ranks hold it: `tp` (sharded over tensor parallelism), `replicated` (norms, router),
`expert` (sharded over expert x expert-tensor parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from offlint.estimate.inputs import ModelShape, Parallelism
from offlint.estimate.shapes import filled


@filled
@dataclass(frozen=True)
class Split:
    """A parameter count by how it is held across ranks."""

    tp: int = 0
    replicated: int = 0
    expert: int = 0

    def __add__(self, other: "Split") -> "Split":
        return Split(self.tp + other.tp, self.replicated + other.replicated, self.expert + other.expert)

    def __mul__(self, n: int) -> "Split":
        return Split(self.tp * n, self.replicated * n, self.expert * n)

    @property
    def total(self) -> int:
        return self.tp + self.replicated + self.expert

    def per_rank(self, parallel: Parallelism) -> tuple[float, float]:
        """(dense, expert) parameters one rank holds of this count."""
        return self.tp / parallel.tp + self.replicated, self.expert / (parallel.ep * parallel.etp)


def _norm(m: ModelShape, width: int) -> int:
    return width if m.rms_norm else 2 * width


def attention(m: ModelShape) -> Split:
    if m.multi_latent_attention:
        return latent_attention(m)
    q = m.num_attention_heads * m.kv_channels
    out = _qkv_out(m)
    qkv = m.hidden_size * out + (out if (m.add_bias_linear or m.add_qkv_bias) else 0)
    proj = q * m.hidden_size + (m.hidden_size if m.add_bias_linear else 0)
    qk_norms = 2 * _norm(m, m.kv_channels) if m.qk_layernorm else 0
    return Split(tp=qkv + proj, replicated=_norm(m, m.hidden_size) + qk_norms)


def _qkv_out(m: ModelShape) -> int:
    """The fused QKV projection's output width (SelfAttention.linear_qkv_out_dim)."""
    q = m.num_attention_heads * m.kv_channels
    return q + 2 * m.num_query_groups * m.kv_channels + (q if m.attention_output_gate else 0)


def _fc1_out(m: ModelShape, ffn: int) -> int:
    """fc1's output width: twice the hidden width with a gated linear unit."""
    return ffn * (2 if m.gated_linear_unit else 1)


def latent_attention(m: ModelShape) -> Split:
    """Multi-latent attention as megatron-core's MLASelfAttention builds it with Transformer Engine (Bridge's
    spec): the down projections (hidden -> q_lora_rank, hidden -> kv_lora_rank + rotary dim) are `TELinear`
    with parallel_mode="duplicated", so every TP rank holds them whole; the up projections and the output
    projection are split over TP; the q/kv norms (fused into the up projections) exist with `qk_layernorm`.
    Without q_lora_rank the query is one column-parallel projection. No bias except the output projection's."""
    n, h = m.num_attention_heads, m.hidden_size
    q_out = n * (m.qk_head_dim + m.qk_pos_emb_head_dim)
    tp = n * m.v_head_dim * h + (h if m.add_bias_linear else 0)  # linear_proj
    replicated = _norm(m, h)  # input_layernorm
    if m.q_lora_rank is None:
        tp += h * q_out  # linear_q_proj
    else:
        replicated += h * m.q_lora_rank + (_norm(m, m.q_lora_rank) if m.qk_layernorm else 0)
        tp += m.q_lora_rank * q_out  # linear_q_up_proj
    replicated += h * (m.kv_lora_rank + m.qk_pos_emb_head_dim) + (_norm(m, m.kv_lora_rank) if m.qk_layernorm else 0)
    tp += m.kv_lora_rank * n * (m.qk_head_dim + m.v_head_dim)  # linear_kv_up_proj
    return Split(tp=tp, replicated=replicated)


def mlp(m: ModelShape, ffn: int, width: int | None = None) -> int:
    """One MLP (dense, expert or shared expert) of width `ffn` on inputs of `width` (the hidden size, or the
    latent size for a latent MoE's routed experts)."""
    width = width or m.hidden_size
    fc1_out = _fc1_out(m, ffn)
    return width * fc1_out + ffn * width + ((fc1_out + width) if m.add_bias_linear else 0)


def routed_expert(m: ModelShape) -> int:
    """One routed expert's parameters."""
    return mlp(m, m.moe_ffn_hidden_size or m.ffn_hidden_size, m.moe_latent_size)


def dense_layer(m: ModelShape, gdn: bool = False) -> Split:
    return (gdn_attention(m) if gdn else attention(m)) + Split(tp=mlp(m, m.ffn_hidden_size),
                                                               replicated=_norm(m, m.hidden_size))


def moe_layer(m: ModelShape, gdn: bool = False) -> Split:
    return (gdn_attention(m) if gdn else attention(m)) + moe_block(m)


def gdn_attention(m: ModelShape) -> Split:
    """A gated delta net in place of self-attention (megatron-core's GatedDeltaNet with the experimental-variant
    spec: ssm/gated_delta_net, models/gpt/experimental_attention_variant_module_specs.py). in_proj is a
    column-parallel linear with the layer's input norm fused in (hidden -> q, k, v, the output gate z, beta and
    alpha: 2 key dims + 2 value dims + 2 value heads), no bias; the depthwise conv1d over q, k, v (no bias),
    dt_bias and A_log per value head, all split over TP; the output norm over one value head's width (the
    same weights for every head, so every TP rank holds it whole); out_proj (value dims -> hidden, no bias)."""
    h = m.hidden_size
    qk, v = m.gdn_key_heads * m.gdn_key_head_dim, m.gdn_value_heads * m.gdn_value_head_dim
    in_proj = h * (2 * qk + 2 * v + 2 * m.gdn_value_heads)
    conv = (2 * qk + v) * m.gdn_conv_kernel
    return Split(tp=in_proj + conv + 2 * m.gdn_value_heads + v * h,
                 replicated=_norm(m, h) + _norm(m, m.gdn_value_head_dim))


def moe_block(m: ModelShape) -> Split:
    """A MoE layer without its attention: the pre-MLP norm, router, routed and shared experts."""
    experts = m.num_moe_experts or 0
    router = experts * m.hidden_size + (experts if m.add_bias_linear else 0)
    shared = m.moe_shared_expert_intermediate_size or 0
    shared_params = mlp(m, shared) if shared else 0
    gate = m.hidden_size if shared and m.moe_shared_expert_gate else 0
    # Latent MoE: fc1_latent_proj (hidden -> latent) and fc2_latent_proj (latent -> hidden), `TELinear`s
    # duplicated over TP, with biases when add_bias_linear.
    latent = m.moe_latent_size or 0
    latent_proj = 2 * m.hidden_size * latent + ((latent + m.hidden_size) if m.add_bias_linear else 0) if latent else 0
    return Split(tp=shared_params, replicated=_norm(m, m.hidden_size) + router + gate + latent_proj,
                 expert=experts * routed_expert(m))


def layer(m: ModelShape, index: int) -> Split:
    kind = m.layer_kind(index)
    if kind is None:
        gdn = m.is_gdn_layer(index)
        return moe_layer(m, gdn) if m.is_moe_layer(index) else dense_layer(m, gdn)
    return HYBRID_LAYERS[kind](m)


def mamba_layer(m: ModelShape) -> Split:
    """A hybrid model's Mamba layer (megatron-core's MambaLayer with MambaMixer, Transformer Engine spec): the
    layer's norm fused into in_proj (hidden -> z, x, B, C, dt: 2 d_inner + 2 groups x state + heads), the
    depthwise conv1d over x, B, C (kernel 4, with bias), per-head dt_bias, A_log and D, the gated RMSNorm over
    d_inner, and out_proj (d_inner -> hidden). No linear biases (the mixer's `bias=False`). Every tensor but the
    fused norm is split over tensor parallelism (the mixer asserts heads and groups divide by TP)."""
    h, d_inner, heads = m.hidden_size, m.mamba_d_inner, m.mamba_num_heads
    bc = 2 * m.mamba_num_groups * m.mamba_state_dim
    conv = d_inner + bc
    tp = h * (2 * d_inner + bc + heads) + conv * MAMBA_CONV_KERNEL + conv + 3 * heads + d_inner + d_inner * h
    return Split(tp=tp, replicated=_norm(m, h))


MAMBA_CONV_KERNEL = 4  # MambaMixer's d_conv default; the layer specs do not set it


def hybrid_attention(m: ModelShape) -> Split:
    """A hybrid model's attention layer: self-attention only, its norm fused into linear_qkv; the hybrid spec
    builds no q/k layernorm."""
    return attention(replace(m, qk_layernorm=False))


def hybrid_mlp(m: ModelShape) -> Split:
    """A hybrid model's MLP layer (MLPLayer): the dense MLP with its norm fused into fc1."""
    return Split(tp=mlp(m, m.ffn_hidden_size), replicated=_norm(m, m.hidden_size))


HYBRID_LAYERS = {"M": mamba_layer, "*": hybrid_attention, "-": hybrid_mlp, "E": moe_block}


def mtp_block(m: ModelShape) -> Split:
    """The multi-token prediction block (megatron-core's MultiTokenPredictionLayer, once per depth, or once for
    all depths with `mtp_use_repeated_layer`): norms of the embedding and of the hidden states (enorm, hnorm),
    the column-parallel projection of their concatenation back to hidden (eh_proj, 2h x h, no bias), one
    transformer layer built from the decoder's last layer spec (MoE if the last layer is), and a final norm.
    The embedding and output layer are the model's own, shared (see `stages`)."""
    if not m.mtp_num_layers:
        return Split()
    h = m.hidden_size
    one = Split(tp=2 * h * h, replicated=3 * _norm(m, h))
    if m.hybrid_mtp_pattern:
        # A hybrid model's depth: the same norms and eh_proj around a HybridStack of the depth's pattern, built
        # from the decoder's layer specs, without the stack's own final norm (post_layer_norm=False; megatron-core
        # 0.19.2 transformer/multi_token_prediction.py:983-1053, models/hybrid/hybrid_layer_specs.py:71-87).
        for kind in m.hybrid_mtp_pattern:
            one = one + HYBRID_LAYERS[kind](m)
    else:
        one = one + layer(m, m.num_layers - 1)
    return one * (1 if m.mtp_repeated_layer else m.mtp_num_layers)


def embedding(m: ModelShape) -> Split:
    positions = m.seq_length * m.hidden_size if m.learned_position_embeddings else 0
    return Split(tp=m.vocab_size * m.hidden_size, replicated=positions)


def output_layer(m: ModelShape) -> Split:
    return Split(tp=m.vocab_size * m.hidden_size)


def final_norm(m: ModelShape) -> Split:
    return Split(replicated=_norm(m, m.hidden_size))


def pinned_rounding(m: ModelShape, parallel: Parallelism, layers: tuple[int, ...], has_embedding: bool,
                    has_output: bool, nbytes: int = 4) -> int:
    """Bytes PyTorch's pinned-memory allocator adds to one `nbytes`-per-element copy of a stage's weight
    matrices, each held whole on one rank: CachingHostAllocator rounds every pinned block up to a power of two
    (ATen/core/CachingHostAllocator.h, under the default pinned_max_round_threshold), so the fp32 copy of a
    2048x6144 fused QKV weight (48 MiB) takes 64 MiB. Counted: the embedding, an untied output layer, and the
    attention (not multi-latent) and dense MLP matrices of standard layers; other shapes are not modelled."""
    def rounded(numel: float) -> int:
        size = int(numel) * nbytes
        return (1 << (size - 1).bit_length()) - size if size > 0 else 0

    tp = parallel.tp
    extra = 0
    if has_embedding:
        extra += rounded(m.vocab_size * m.hidden_size / tp)
        if m.learned_position_embeddings:
            extra += rounded(m.seq_length * m.hidden_size)
    if has_output and not m.tied_embeddings:
        extra += rounded(m.vocab_size * m.hidden_size / tp)
    q, qkv_out, fc1_out = m.num_attention_heads * m.kv_channels, _qkv_out(m), _fc1_out(m, m.ffn_hidden_size)
    for index in layers:
        if m.layer_kind(index) is not None or m.is_gdn_layer(index):
            continue
        if not m.multi_latent_attention:
            extra += rounded(m.hidden_size * qkv_out / tp) + rounded(q * m.hidden_size / tp)
        if not m.is_moe_layer(index):
            extra += rounded(m.hidden_size * fc1_out / tp) + rounded(m.ffn_hidden_size * m.hidden_size / tp)
    return extra


def total(m: ModelShape) -> int:
    """All parameters of the model (tied output weights counted once), as `sum(p.numel())` on one rank."""
    count = embedding(m) + final_norm(m) + mtp_block(m)
    for i in range(m.num_layers):
        count = count + layer(m, i)
    if not m.tied_embeddings:
        count = count + output_layer(m)
    return count.total


def active(m: ModelShape) -> int:
    """Parameters one token passes through (MoE: top-k of the routed experts; MTP layers included)."""
    if not m.num_moe_experts:
        return total(m)
    unused = (m.num_moe_experts - m.moe_router_topk) * routed_expert(m)
    moe_layers = sum(1 for i in range(m.num_layers) if m.is_moe_layer(i))
    depths = 1 if m.mtp_repeated_layer else m.mtp_num_layers
    if m.hybrid_mtp_pattern:
        moe_layers += m.hybrid_mtp_pattern.count("E") * depths
    elif m.mtp_num_layers and m.is_moe_layer(m.num_layers - 1):
        moe_layers += depths
    return total(m) - unused * moe_layers


@filled
@dataclass(frozen=True)
class Stage:
    """The parameters one pipeline stage holds (all its virtual chunks), before TP/EP sharding."""

    index: int
    layers: int
    params: Split
    has_embedding: bool
    has_output: bool
    mtp_layers: int = 0  # MTP depths built on this stage


def stage_layer_ranges(num_layers: int, pp: int, vpp: int | None) -> list[list[range]]:
    """Layer index ranges per pipeline stage (one per virtual chunk), as megatron-core assigns them evenly."""
    chunks = vpp or 1
    per_chunk = num_layers // (pp * chunks)
    out: list[list[range]] = [[] for _ in range(pp)]
    for chunk in range(chunks):
        for stage in range(pp):
            start = (chunk * pp + stage) * per_chunk
            out[stage].append(range(start, start + per_chunk))
    return out


def layer_ranges(m: ModelShape, p: Parallelism) -> list[list[range]] | None:
    """Decoder layer index ranges per pipeline stage (one per virtual chunk) as megatron-core builds them: from a
    custom `pipeline_model_parallel_layout`, from `num_layers_in_first/last_pipeline_stage` (the other stages
    share the rest evenly), with the embedding or loss counted as a layer (`account_for_*_in_pipeline_split`),
    or evenly. Layers are numbered chunk by chunk, stage by stage (megatron-core's layer offsets). None where
    megatron-core would refuse the split (it does not divide, or a layout's counts do not match the model)."""
    counts = _layer_counts(m, p)
    if counts is None:
        return None
    out: list[list[range]] = [[] for _ in range(p.pp)]
    start = 0
    for row in counts:
        for stage, n in enumerate(row):
            out[stage].append(range(start, start + n))
            start += n
    return out


def _layer_counts(m: ModelShape, p: Parallelism) -> list[list[int]] | None:
    """Decoder layers per [virtual chunk][stage]."""
    pp, chunks = p.pp, p.vpp or 1
    if m.hybrid_pattern is not None:
        return _hybrid_layer_counts(m, p)
    if p.layout is not None:
        if len(p.layout) != pp * chunks or sum(row.count("mtp") for row in p.layout) != m.mtp_num_layers:
            return None
        counts = [[p.layout[c * pp + s].count("decoder") for s in range(pp)] for c in range(chunks)]
        return counts if sum(map(sum, counts)) == m.num_layers else None
    if p.first_stage_layers is not None or p.last_stage_layers is not None:
        if p.account_for_embedding or p.account_for_loss:
            return None  # megatron-core asserts: no standalone embedding/loss stage with uneven PP
        fixed = [(0, p.first_stage_layers), (pp - 1, p.last_stage_layers)]
        fixed = {stage: n for stage, n in fixed if n is not None}
        rest, left = m.num_layers - sum(fixed.values()), pp - len(fixed)
        if rest < 0 or (left and rest % left) or (not left and rest):
            return None
        per_stage = [fixed.get(s, rest // left if left else 0) for s in range(pp)]
        if any(n % chunks for n in per_stage):
            return None
        return [[n // chunks for n in per_stage] for _ in range(chunks)]
    total = m.num_layers + int(p.account_for_embedding) + int(p.account_for_loss)
    if total % (pp * chunks):
        return None
    counts = [[total // (pp * chunks)] * pp for _ in range(chunks)]
    counts[0][0] -= int(p.account_for_embedding)
    counts[-1][-1] -= int(p.account_for_loss)
    return counts if min(counts[0][0], counts[-1][-1]) >= 0 else None


def _hybrid_layer_counts(m: ModelShape, p: Parallelism) -> list[list[int]] | None:
    """A hybrid model's layers per stage (megatron-core's select_pipeline_segment): one pattern segment per stage
    where `|` splits the pattern, else evenly or with num_layers_in_first/last_pipeline_stage (the middle stages
    share the rest). Hybrid stacks have no custom layout, no embedding/loss accounting and, without pipes, no
    virtual stages; one segment per stage is what offlint models (Bridge's HybridModelProvider refuses VPP)."""
    segments = m.hybrid_pattern.split("|")
    if p.layout is not None or p.account_for_embedding or p.account_for_loss or (p.vpp or 1) > 1:
        return None
    if len(segments) > 1:
        if len(segments) != p.pp or p.first_stage_layers is not None or p.last_stage_layers is not None:
            return None
        return [[len(s) for s in segments]]
    if p.first_stage_layers is None and p.last_stage_layers is None:
        return None if m.num_layers % p.pp else [[m.num_layers // p.pp] * p.pp]
    fixed = {s: n for s, n in ((0, p.first_stage_layers), (p.pp - 1, p.last_stage_layers)) if n is not None}
    rest, left = m.num_layers - sum(fixed.values()), p.pp - len(fixed)
    if rest < 0 or (left and rest % left) or (not left and rest):
        return None
    return [[fixed.get(s, rest // left if left else 0) for s in range(p.pp)]]


def mtp_stage(p: Parallelism) -> int:
    """The pipeline stage that builds the MTP depths: the last, or the one a custom layout places them on."""
    if p.layout is not None:
        for i, row in enumerate(p.layout):
            if "mtp" in row:
                return i % p.pp
    return p.pp - 1


def _layers_sum(kinds: list[tuple], by_kind: dict[tuple, Split]) -> Split:
    """Split() + the count of each of a stage's layers in turn (`kinds`: each layer's kind, `by_kind`: a layer's count
    of each kind): each kind's count times its layers where every count is an int (the same sum: integers add
    exactly in any order), else layer by layer."""
    per_kind = dict.fromkeys(kinds, 0)
    for kind in kinds:
        per_kind[kind] += 1
    splits = [by_kind[kind] for kind in per_kind]
    count = Split()
    if all(type(n) is int for split in splits for n in (split.tp, split.replicated, split.expert)):
        for split, n in zip(splits, per_kind.values()):
            count = count + split * n
        return count
    for kind in kinds:
        count = count + by_kind[kind]
    return count


@lru_cache(maxsize=512)
def stages(m: ModelShape, parallel: Parallelism) -> tuple[Stage, ...]:
    """Every pipeline stage's parameters (`layer_ranges` must not be None). With PP>1 and tied embeddings the
    last stage holds its own copy of the word embeddings for the output layer (megatron-core keeps the two in
    sync). The MTP block lives on the last stage (or where a custom layout puts it); with PP>1 a stage with MTP
    but no embedding builds one for it (GPTModel: `pre_process or mtp_process`), beside the output layer on
    the last stage, whose own weight is still allocated when tied (megatron-core skips it only where
    `pre_process`; 0.16.1 and 0.19.2 alike). With MTP the final norm sits with the last decoder layer
    (TransformerBlock.has_final_layernorm_in_this_stage), else, and in a hybrid model (HybridStack builds it where
    post_process), on the last stage. Kept per (model, layout): a
    tree's recipes share a handful of models, and the what-if options repeat them."""
    out = []
    ranges_by_stage = layer_ranges(m, parallel)
    with_mtp = mtp_stage(parallel) if m.mtp_num_layers else None
    by_kind: dict[tuple, Split] = {}  # a layer's count depends only on its kind (`layer`): counted once per kind
    for index, ranges in enumerate(ranges_by_stage):
        kinds = []
        for r in ranges:
            for i in r:
                kind = (m.layer_kind(i), m.is_gdn_layer(i), m.is_moe_layer(i))
                if kind not in by_kind:
                    by_kind[kind] = layer(m, i)
                kinds.append(kind)
        layers = len(kinds)
        count = _layers_sum(kinds, by_kind)
        first, last = index == 0, index == parallel.pp - 1
        if first:
            count = count + embedding(m)
        if (m.num_layers - 1 in [i for r in ranges for i in r]) if m.mtp_num_layers and m.hybrid_pattern is None \
                else last:
            count = count + final_norm(m)
        if last and (not m.tied_embeddings or parallel.pp > 1):
            count = count + output_layer(m)
        if index == with_mtp:
            count = count + mtp_block(m) + (embedding(m) if not first else Split())
        out.append(Stage(index, layers, count, first, last, m.mtp_num_layers if index == with_mtp else 0))
    return tuple(out)
