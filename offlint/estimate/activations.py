"""Activation memory per transformer layer and per micro-batch, as named saved tensors.

The terms follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (Table 2),
which Megatron-LM's theoretical memory model also uses, generalised to grouped-query attention, gated MLPs,
dropout-free models and MoE. Attention is fused/flash attention (q, k, v and the output are saved; the s x s
score matrix is never stored), unless the unit asks for unfused attention (`core_attn_scores`, which recomputing
`core_attn` drops). A term marked `sp` is
sharded over tensor parallelism only with sequence parallelism; the others always are (or are per token).
Each term has a name so recompute modules and fine-grained offload modules can drop or move exactly it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from offlint.estimate import frozen_lm, lora, precision
from offlint.estimate.inputs import FrozenLM, ModelShape, Parallelism, Training
from offlint.estimate.shapes import filled

# Fine-grained activation offloading: which saved tensors each `offload_modules` name moves to the host.
OFFLOAD_TERMS = {
    "attn_norm": ("attn_norm_input",),
    "qkv_linear": ("qkv_input",),
    "core_attn": ("core_attn_qkv",),
    "attn_proj": ("core_attn_out", "proj_input"),
    "mlp_norm": ("mlp_norm_input",),
    "expert_fc1": ("expert_fc1_input",),
    "moe_act": ("expert_fc1_output",),
    "fused_group_mlp": ("expert_fc1_input", "expert_fc1_output"),
}

# Selective recompute in a GPT layer of megatron-core's Transformer Engine spec (megatron-core 2a75ac12, Bridge
# 067f987's pin; 0.16.1 and 0.19.2 alike): which saved tensors each `recompute_modules` name no longer keeps.
# `layernorm` checkpoints a norm only where it is a module of its own (transformer_layer.py:450-505: not
# IdentityOp, the submodules' default, :270, 278; CheckpointWithoutOutput discards its output after its consumers
# ran, :617-672, 750-757, 963-968). The TE spec fuses the input norm into linear_qkv (gpt_layer_specs.py:319-336:
# no input_layernorm, linear_qkv a LayerNorm linear) and a dense layer's pre-MLP norm into fc1 (:336 IdentityOp,
# get_mlp_module_spec_for_backend:542-546), so there it does nothing; a MoE layer's pre-MLP norm is a TENorm
# (gpt_layer_specs.py:313, 336) whose output the router, the shared expert's fc1 and the latent projection read:
# `moe_input` goes (with FP8/FP4 MoELayer.set_for_recompute_pre_mlp_layernorm makes the shared expert's fc1 save
# that original input; fc1_latent_proj's own quantized copy stays). MLA's input norm: MLA_LAYERNORM_DROPS.
# `mlp` checkpoints a dense layer's whole MLP (transformer_layer.py:512-514, not MoE; 868-888:
# tensor_parallel.checkpoint / te_checkpoint of self.mlp): the checkpoint keeps its input, the pre-MLP norm's
# input in the TE spec (kept anyway as `mlp_norm_input`, which fc1's fused norm saved), and fc1's normed input,
# its output and the activation's go. megatron-core's local (non-TE) spec is not modelled.
RECOMPUTE_DROPS = {
    "core_attn": ("core_attn_scores",),  # flash attention keeps no s x s matrix; the checkpoint keeps q, k, v
    "layernorm": ("moe_input",),
    "mlp": ("fc1_input", "fc1_output", "act_output"),
    "moe_act": ("expert_act_output",),
    "shared_experts": ("shared_fc1_input", "shared_fc1_output", "shared_act_output", "shared_gate_input"),
    "moe": ("router_logits", "expert_fc1_input", "expert_fc1_output", "expert_act_output", "shared_fc1_input",
            "shared_fc1_output", "shared_act_output", "shared_gate_input", "latent_fc2_input"),
    # MLA: the up projections and rope run again in backward; their outputs (q, k, v) and the normed compressed
    # inputs they saved are dropped, the compressed q/kv (the checkpoint's inputs) are kept.
    "mla_up_proj": ("core_attn_qkv", "mla_q_up_input", "mla_kv_up_input"),
    # GDN: the gated output norm runs again in backward from the delta rule's output and the gate (the
    # checkpoint's inputs); its own saved tensors and out_proj's input (the checkpoint's discarded output) go.
    "gdn_norm_out": ("gdn_gated_norm", "gdn_out_proj_input"),
}

# `layernorm` in an MLA layer: the TE spec's MLASelfAttention has a separate input TENorm (gpt_layer_specs.py:
# 295-296; fused only with mla_down_proj_fusion, 257-263, which Bridge's recipes leave False): its output, the
# down projections' saved input (`qkv_input`), goes. With FP8/FP4 MLASelfAttention.set_for_recompute_input_layernorm
# (multi_latent_attention.py:1104-1108) makes linear_q_down_proj and linear_kv_down_proj save that original input,
# but without q_lora_rank linear_q_proj reads it too and keeps its own quantized copy (the FP8 `qkv_input`).
MLA_LAYERNORM_DROPS = ("qkv_input",)

# Inputs of FP8 linears that only the linear saves (LayerNorm-fused linears quantize their normalised output;
# fc2 inputs are the activation outputs): in FP8 training they are saved quantized instead of in bf16.
FP8_SAVED_INPUTS = ("qkv_input", "fc1_input", "act_output", "expert_fc1_input", "expert_act_output",
                    "shared_act_output", "mla_q_up_input", "mla_kv_up_input", "latent_fc2_input")


@filled
@dataclass(frozen=True)
class LayerActivations:
    terms: dict[str, float]  # bytes per micro-batch on one GPU

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    def without(self, names) -> "LayerActivations":
        dropped = set(names)
        return LayerActivations({k: v for k, v in self.terms.items() if k not in dropped})


def tokens(m: ModelShape, p: Parallelism, t: Training) -> float:
    """Tokens of one micro-batch that one context-parallel rank holds."""
    return m.seq_length / p.cp * t.micro_batch_size


def layer_terms(m: ModelShape, p: Parallelism, t: Training, moe: bool, fp8: bool = False,
                hybrid: str | None = None, gdn: bool = False) -> LayerActivations:
    """A layer's saved tensors; `fp8`: the layer runs its GEMMs in FP8 (t.low_precision); `hybrid`: a hybrid
    model's layer symbol (ModelShape.layer_kind); `gdn`: a gated delta net in place of self-attention."""
    if hybrid is not None:
        terms = _hybrid_terms(m, p, t, hybrid)
        return LayerActivations(_hybrid_quantized(terms, m, p, t, hybrid) if fp8 and t.low_precision else terms)
    terms = _bf16_terms(m, p, t, moe)
    if gdn:  # inputs_hybrid._variant_unsupported refuses NVFP4 and LoRA here
        rest = {k: v for k, v in terms.items() if k not in _ATTENTION_PART}
        if not (fp8 and t.low_precision):
            if t.frozen_lm:  # inputs_vlm.read_frozen_lm refuses FP8 here
                return LayerActivations(frozen_lm.layer_terms({**gdn_terms(m, p, t), **rest}, t.frozen_lm.bound))
            return LayerActivations({**gdn_terms(m, p, t), **rest})
        per = precision.saved_input_bytes(t.low_precision)
        # in_proj and out_proj save their inputs quantized (out_proj's is nothing else's to keep: megatron-core
        # calls set_save_original_input on softmax attention's linear_proj only)
        gdn_part = {k: v * per / 2 if k in ("gdn_in_proj_input", "gdn_out_proj_input") else v
                    for k, v in gdn_terms(m, p, t).items()}
        return LayerActivations({**gdn_part, **_quantized(rest, m, p, t, moe, attention=False)})
    if t.peft and not moe:
        terms = lora.frozen_terms(terms, m, p, t.peft, tokens(m, p, t))
    terms = _quantized(terms, m, p, t, moe) if fp8 and t.low_precision else terms
    if t.frozen_lm:  # inputs_vlm.read_frozen_lm refuses NVFP4 and hybrid layers here
        terms = frozen_lm.layer_terms(terms, t.frozen_lm.bound)
    return LayerActivations(terms)


def _quantized(terms: dict[str, float], m: ModelShape, p: Parallelism, t: Training, moe: bool,
               attention: bool = True) -> dict[str, float]:
    """FP8/NVFP4 saved inputs: the linears' own inputs at the recipe's bytes per element. With delayed scaling
    the output projection's quantized input is a copy beside the bf16 attention output flash attention keeps
    (with the attention output gate, in place of the gated output, which nothing else keeps), and the shared
    expert's fc1 keeps its own copy of the MoE input (which the router keeps in bf16); the other recipes save
    the original input there (precision.keeps_quantized_copies). `attention`: the layer has softmax attention
    (not a gated delta net)."""
    per = precision.saved_input_bytes(t.low_precision)
    out = {k: (v * per / 2 if k in FP8_SAVED_INPUTS else v) for k, v in terms.items()}
    n, sp = tokens(m, p, t), (p.tp if p.sequence_parallel else 1)
    head = m.v_head_dim if m.multi_latent_attention else m.kv_channels
    if attention and precision.keeps_quantized_copies(t.low_precision):
        out["proj_input"] = per * n * m.num_attention_heads * head / p.tp
        if "attn_output_gate" in out:
            out["attn_output_gate"] /= 2  # the gate alone
    if moe and m.moe_shared_expert_intermediate_size and precision.keeps_quantized_copies(t.low_precision):
        out["shared_fc1_input"] = per * n * m.hidden_size / sp
    if moe and m.moe_latent_size:  # fc1_latent_proj's own quantized copy of the MoE input
        out["latent_fc1_input"] = per * n * m.hidden_size / sp
    lp = t.low_precision
    if attention and lp.attention and not (t.recompute_granularity == "selective" and
                                           "core_attn" in t.recompute_modules):
        # FP8 fused attention saves FP8 q, k, v instead of the bf16 ones (which nothing else keeps); a
        # recomputed core_attn keeps its bf16 inputs in the checkpoint instead.
        if m.multi_latent_attention:
            qk, v = m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim
            heads_qk, heads_v = 2 * m.num_attention_heads, m.num_attention_heads
        else:
            qk = v = m.kv_channels
            heads_qk, heads_v = m.num_attention_heads + m.num_query_groups, m.num_query_groups
        out["core_attn_qkv"] = n * (heads_qk * qk * precision.attention_input_bytes(lp, qk) +
                                    heads_v * v * precision.attention_input_bytes(lp, v)) / p.tp
        out["core_attn_out"] = out["core_attn_out"] * precision.attention_output_bytes(lp) / 2
    return out


def _bf16_terms(m: ModelShape, p: Parallelism, t: Training, moe: bool) -> dict[str, float]:
    n = tokens(m, p, t)
    h = m.hidden_size
    sp = p.tp if p.sequence_parallel else 1
    mask = n * h / sp if m.hidden_dropout > 0 else 0.0  # 1-byte dropout masks
    terms = {
        "attn_norm_input": 2 * n * h / sp,
        "qkv_input": 2 * n * h / sp,
        **(_latent_attention_terms(m, p, n) if m.multi_latent_attention else _attention_terms(m, p, n)),
        "attn_dropout_mask": mask,
        "mlp_norm_input": 2 * n * h / sp,
        "mlp_dropout_mask": mask,
    }
    gate = 2 if m.gated_linear_unit else 1
    if not moe:
        terms.update({
            "fc1_input": 2 * n * h / sp,
            "fc1_output": 2 * n * m.ffn_hidden_size * gate / p.tp,
            "act_output": 2 * n * m.ffn_hidden_size / p.tp,
        })
        return terms
    routed = expert_rows(m, p, t)
    ffn = m.moe_ffn_hidden_size or m.ffn_hidden_size
    shared = m.moe_shared_expert_intermediate_size or 0
    width = m.moe_latent_size or h  # latent MoE dispatches and computes in the latent width
    terms.update({
        "moe_input": 2 * n * h / sp,
        "router_logits": 4 * n * (m.num_moe_experts or 0) / sp,
        "expert_fc1_input": 2 * routed * width,
        "expert_fc1_output": 2 * routed * ffn * gate / p.etp,
        "expert_act_output": 2 * routed * ffn / p.etp,
        "shared_fc1_output": 2 * n * shared * gate / p.tp,
        "shared_act_output": 2 * n * shared / p.tp,
    })
    if shared and m.moe_shared_expert_gate:
        # SharedExpertMLP.forward (megatron-core 0.20.0 moe/shared_experts.py:200-207): `output * gate_score`
        # keeps fc2's output (hidden wide, sequence-parallel after fc2's reduce-scatter) for the gate's gradient
        terms["shared_gate_input"] = 2 * n * h / sp
    if m.moe_latent_size:
        # fc2_latent_proj keeps its input, the combined tokens in the latent width (fc1_latent_proj's input is
        # the normed hidden state, `moe_input`).
        terms["latent_fc2_input"] = 2 * n * m.moe_latent_size / sp
    return terms


# A hybrid model's attention, MLP and MoE layers save what the same parts of a transformer layer save.
_ATTENTION_PART = ("attn_norm_input", "qkv_input", "core_attn_qkv", "core_attn_scores", "core_attn_out",
                   "attn_output_gate", "attn_dropout_mask")


def _hybrid_terms(m: ModelShape, p: Parallelism, t: Training, kind: str) -> dict[str, float]:
    if kind == "M":
        return mamba_terms(m, p, t)
    terms = _bf16_terms(m, p, t, moe=kind == "E")
    keep = (lambda k: k in _ATTENTION_PART) if kind == "*" else (lambda k: k not in _ATTENTION_PART)
    return {k: v for k, v in terms.items() if keep(k)}


def _hybrid_quantized(terms: dict[str, float], m: ModelShape, p: Parallelism, t: Training,
                      kind: str) -> dict[str, float]:
    """FP8 saved inputs of a hybrid layer: a Mamba layer's in_proj (its fused norm's output) and out_proj inputs
    are quantized, the scan's and the gated norm's stay bf16; the other kinds as those parts of a transformer
    layer (the output projection's quantized copy only where there is attention)."""
    if kind == "M":
        per = precision.saved_input_bytes(t.low_precision)
        return {k: v * per / 2 if k in ("in_proj_input", "out_proj_input") else v for k, v in terms.items()}
    # FP8 attention (fp8_dot_product_attention) only in the attention layers: the MLP and MoE layers have no
    # core attention, and no output projection whose quantized copy delayed scaling would add.
    return _quantized(terms, m, p, t, moe=kind == "E", attention=kind == "*")


def mamba_terms(m: ModelShape, p: Parallelism, t: Training) -> dict[str, float]:
    """A Mamba layer's saved tensors in training (megatron-core MambaMixer with use_mamba_mem_eff_path, its
    default: mamba_ssm's mamba_split_conv1d_scan_combined). in_proj (the layer's norm fused in, as for qkv) keeps
    the norm's input and output; the scan kernel keeps its input, the in_proj output (z, x, B, C, dt: 2 d_inner
    + 2 groups x state + heads, split over TP, over the full sequence), and its ungated output `out_x` (d_inner),
    and recomputes the convolution in backward; the gated RMSNorm keeps its input (d_inner) and an fp32 rstd per
    group; out_proj keeps its input (d_inner). With context parallelism the mixer trades sequence for heads
    (all-to-all), so the bytes per rank are the same. Without the memory-efficient path see `_mamba_split_terms`."""
    n = tokens(m, p, t)
    h, sp = m.hidden_size, (p.tp if p.sequence_parallel else 1)
    d_inner = m.mamba_d_inner
    width = 2 * d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads
    terms = {
        "mamba_norm_input": 2 * n * h / sp,
        "in_proj_input": 2 * n * h / sp,
        **({
            "mamba_scan_input": 2 * n * width / p.tp,
            "mamba_scan_output": 2 * n * d_inner / p.tp,
            "mamba_gated_norm_input": 2 * n * d_inner / p.tp + 4 * n * m.mamba_num_groups / p.tp,
        } if m.mamba_mem_eff_path else _mamba_split_terms(m, p, t, n)),
        "out_proj_input": 2 * n * d_inner / p.tp,
        "mamba_dropout_mask": n * h / sp if m.hidden_dropout > 0 else 0.0,
    }
    return {k: v for k, v in terms.items() if v}


def _mamba_split_terms(m: ModelShape, p: Parallelism, t: Training, n: float) -> dict[str, float]:
    """The mixer's own saved tensors with use_mamba_mem_eff_path=False (MambaMixer._static_prefill, separate
    kernels; causal_conv1d assumed installed, as the fused path needs it too): causal_conv1d_fn keeps its input,
    the x|B|C slice of the in_proj output made contiguous (d_inner + 2 groups x state), and recomputes the
    activation; mamba_chunk_scan_combined keeps its inputs x, B, C and dt (contiguous copies made after the
    convolution), its output (z is not passed when the mixer's gated RMSNorm is on) and dA_cumsum (fp32, one per
    head and token of the sequence padded to whole chunks); the gated RMSNorm keeps its input, the gate z
    (d_inner) and an fp32 rstd per group. The norm's input is the scan's output itself when the rearrange to
    (sequence, batch) needs no copy (micro-batch 1 and no context-parallel all-to-all in between), a copy
    otherwise."""
    d_inner, heads = m.mamba_d_inner, m.mamba_num_heads
    conv_dim = d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim
    norm_copy = t.micro_batch_size > 1 or p.cp > 1
    # dA_cumsum is (batch, heads, chunks, chunk_size): the full sequence padded to whole chunks, heads over TP x CP
    padded = math.ceil(m.seq_length / m.mamba_chunk_size) * m.mamba_chunk_size * t.micro_batch_size / p.cp
    return {
        "mamba_conv_input": 2 * n * conv_dim / p.tp,
        "mamba_scan_input": 2 * n * (conv_dim + heads) / p.tp,
        "mamba_scan_dA_cumsum": 4 * padded * heads / p.tp,
        "mamba_scan_output": 2 * n * d_inner / p.tp,
        "mamba_gated_norm_input": (2 * n * d_inner * (2 if norm_copy else 1) + 4 * n * m.mamba_num_groups) / p.tp,
    }


def mamba_scan_states(m: ModelShape, p: Parallelism, t: Training) -> float:
    """The chunked scan's working set while one Mamba layer runs (not kept between layers): the fp32 state at
    every chunk boundary, (tokens / mamba_chunk_size) x heads / TP x head_dim x state, which the backward
    rebuilds beside its fp32 gradient (mamba_ssm ssd_combined: _chunk_state_fwd / _state_passing and their
    backward)."""
    chunks = math.ceil(m.seq_length / p.cp / m.mamba_chunk_size) * t.micro_batch_size
    return 2 * 4 * chunks * m.mamba_num_heads / p.tp * m.mamba_head_dim * m.mamba_state_dim


def _attention_terms(m: ModelShape, p: Parallelism, n: float) -> dict[str, float]:
    """Flash attention keeps q, k, v and its output. With `attention_output_gate` (megatron-core
    Attention._apply_output_gate, torch.compile'd) the gating keeps the gate and the attention output, and the
    gated output, a new tensor, is linear_proj's saved input."""
    q = m.num_attention_heads * m.kv_channels
    kv = m.num_query_groups * m.kv_channels
    terms = {"core_attn_qkv": 2 * n * (q + 2 * kv) / p.tp, "core_attn_out": 2 * n * q / p.tp}
    if m.unfused_score_bytes:  # every query of this rank against every key of the sequence, per head
        terms["core_attn_scores"] = m.unfused_score_bytes * n * m.seq_length * m.num_attention_heads / p.tp
    if m.attention_output_gate:
        terms["attn_output_gate"] = 2 * 2 * n * q / p.tp
    return terms


# The delta rule's chunk size: FLA's chunk_gated_delta_rule_fwd fixes it (chunk_size=64) and keeps the WY
# representation A, one row of a chunk per token and value head.
GDN_CHUNK = 64


def gdn_terms(m: ModelShape, p: Parallelism, t: Training) -> dict[str, float]:
    """A gated delta net layer's saved tensors in training (megatron-core GatedDeltaNet.forward at Bridge
    067f987's megatron-core 2a75ac12, flash-linear-attention 0.5.1 kernels). in_proj (the layer's norm fused in,
    as for qkv) keeps the norm's input and output. FLA's causal_conv1d keeps its input x, a view into the in_proj
    output (q, k, v, z, beta, alpha over the full sequence, split over TP), so that whole output stays. The L2
    norm of q and k keeps its output and an fp32 rstd per head; chunk_gated_delta_rule keeps q and k (repeated
    to the value heads), v, the fp32 cumulated decay g, beta and the WY matrix A (64 wide per token and value
    head, bf16). The output norm keeps its input (the rule's output) and an fp32 rstd per head, the output gate
    keeps the norm's output and the gate z (a compiled multiply: its 16-bit inputs), and out_proj its input.
    With context parallelism GDN trades sequence for heads (all-to-all), so the bytes per rank are the same."""
    n = tokens(m, p, t)
    h, sp = m.hidden_size, (p.tp if p.sequence_parallel else 1)
    hk, hv = m.gdn_key_heads / p.tp, m.gdn_value_heads / p.tp
    qk, v = hk * m.gdn_key_head_dim, hv * m.gdn_value_head_dim
    terms = {
        "gdn_norm_input": 2 * n * h / sp,
        "gdn_in_proj_input": 2 * n * h / sp,
        "gdn_in_proj_output": 2 * n * (2 * qk + 2 * v + 2 * hv),
        "gdn_qk_l2norm": 2 * n * 2 * qk + 4 * n * 2 * hk,
        "gdn_rule_qkv": 2 * n * (2 * hv * m.gdn_key_head_dim + v),
        "gdn_rule_gates": n * hv * (4 + 2 + 2 * GDN_CHUNK),  # g (fp32), beta, A
        "gdn_rule_output": 2 * n * v,
        "gdn_gate": 2 * n * v,
        "gdn_gated_norm": 4 * n * hv + 2 * n * v,  # rstd, the norm's output
        "gdn_out_proj_input": 2 * n * v,
        "gdn_dropout_mask": n * h / sp if m.hidden_dropout > 0 else 0.0,
    }
    return {k: val for k, val in terms.items() if val}


def _latent_attention_terms(m: ModelShape, p: Parallelism, n: float) -> dict[str, float]:
    """Multi-latent attention (megatron-core MLASelfAttention, Transformer Engine spec). The down projections
    read the normed hidden state (`qkv_input`); the compressed q and kv (sequence-parallel like the hidden
    state, the down projections being duplicated over TP) are saved by the norms fused into the up projections,
    whose normed outputs are the up projections' saved inputs (without `qk_layernorm` the compressed tensor is
    that input). Flash attention keeps q and k (no-position + rotary head dims), v and its output, split over
    TP by heads."""
    sp = p.tp if p.sequence_parallel else 1
    heads = m.num_attention_heads
    qk = m.qk_head_dim + m.qk_pos_emb_head_dim
    norm = 1 if m.qk_layernorm else 0
    terms = {
        "mla_q_compressed": 2 * n * (m.q_lora_rank or 0) / sp,
        "mla_q_up_input": 2 * n * (m.q_lora_rank or 0) / sp * norm,
        "mla_kv_compressed": 2 * n * m.kv_lora_rank / sp,
        "mla_kv_up_input": 2 * n * m.kv_lora_rank / sp * norm,
        "core_attn_qkv": 2 * n * heads * (2 * qk + m.v_head_dim) / p.tp,
        "core_attn_out": 2 * n * heads * m.v_head_dim / p.tp,
    }
    return {k: v for k, v in terms.items() if v}


def mtp_depth(m: ModelShape, p: Parallelism, t: Training) -> LayerActivations:
    """One multi-token prediction depth on the last stage, per micro-batch (megatron-core
    MultiTokenPredictionLayer): the embedding of the shifted tokens, the inputs of enorm and hnorm, eh_proj's
    input (the two normed tensors concatenated, 2h wide), one transformer layer of the decoder's last layer's
    kind, then the final norm, the shared output layer and this depth's fp32 logits (`output_terms`). Under
    full recompute (megatron-core checkpoints an MTP layer with `uniform`; `block` leaves it alone) a depth keeps
    only its two inputs, besides the embedding and the output layer's input and logits. A hybrid model's depth
    holds the layers of its pattern in place of the one transformer layer (`_hybrid_mtp_layers`)."""
    n = tokens(m, p, t)
    h = m.hidden_size / (p.tp if p.sequence_parallel else 1)
    if t.recompute_granularity == "full" and t.recompute_method != "block":
        return LayerActivations({"mtp_embedding": embedding_terms(m, p, t), "mtp_checkpoint_inputs": 4 * n * h,
                                 "mtp_output": output_terms(m, p, t) - 2 * n * h})
    # MTP runs in the global FP8 context: its layer's and eh_proj's saved inputs are quantized too (not in
    # NVFP4 training, which leaves MTP in bf16).
    fp8 = precision.quantized_mtp(t.low_precision)
    if m.hybrid_mtp_pattern:
        layers = _hybrid_mtp_layers(m, p, t, precision.hybrid_mtp_quantized(m, t.low_precision))
    else:
        last = m.num_layers - 1
        layers = after_selective_recompute(layer_terms(m, p, t, m.is_moe_layer(last), fp8=fp8,
                                                       gdn=m.is_gdn_layer(last)), t, fp8=fp8).terms
    eh_proj = 4 * n * h * (precision.saved_input_bytes(t.low_precision) / 2 if fp8 else 1)
    depth = {"mtp_embedding": embedding_terms(m, p, t), "mtp_norm_inputs": 4 * n * h, "mtp_eh_proj_input": eh_proj}
    if t.frozen_lm:  # frozen: between two bounds (frozen_lm.LOWER_BOUND_DROPS)
        depth = frozen_lm.layer_terms(depth, t.frozen_lm.bound)
    return LayerActivations({**depth, **layers, "mtp_output": output_terms(m, p, t)})


def _hybrid_mtp_layers(m: ModelShape, p: Parallelism, t: Training, quantized: list[bool]) -> dict[str, float]:
    """The saved tensors of a hybrid MTP depth's layers (named `mtp_<i><symbol>_<term>`): each as the decoder's
    layer of its kind, FP8 wherever MTP is (the depth's global FP8 context encloses HybridStack's per-layer ones:
    megatron-core 0.19.2 multi_token_prediction.py:1180-1189, hybrid_block.py:332-368), FP4 by its index within
    the depth under NVFP4 (`quantized`, precision.hybrid_mtp_quantized). The depth's HybridStack
    checkpoints its own layers under full recompute (hybrid_block.py:348-360, recompute.py:170-195): with `block`
    (which the depth itself ignores, multi_token_prediction.py:1426-1431) its first recompute_num_layers layers keep
    only their inputs."""
    checkpointed = (t.recompute_num_layers or 0) if t.recompute_granularity == "full" else 0
    out: dict[str, float] = {}
    for i, kind in enumerate(m.hybrid_mtp_pattern):
        if i < checkpointed:
            out[f"mtp_{i}{kind}_checkpoint_input"] = checkpoint_input(m, p, t)
            continue
        terms = after_selective_recompute(layer_terms(m, p, t, kind == "E", fp8=quantized[i], hybrid=kind), t,
                                          kind, fp8=quantized[i]).terms
        out.update({f"mtp_{i}{kind}_{name}": v for name, v in terms.items()})
    return out


def mtp_rebuilt(m: ModelShape, p: Parallelism, t: Training) -> float:
    """What backward rebuilds of one MTP depth under full recompute, one depth at a time: what its checkpoint
    covers (megatron-core 0.20.0 multi_token_prediction.py:1705-1719 checkpoints `_proj_and_transformer_layer`:
    enorm, hnorm and eh_proj, :1331, the layer, and the final norm, :1439), not the shifted tokens' embedding
    (taken before it, :1696) nor the output layer and its fp32 logits (process_mtp_loss, :1013-1027, after it),
    which `mtp_depth` keeps counted beside (a first version counted them here a second time). A hybrid depth,
    recomputed (uniform, one layer: megatron-core asserts it), saves its norms' and eh_proj's inputs, one input
    per layer of its HybridStack (which checkpoints again) and its final norm's input, and rebuilds one layer at
    a time; with `block` only its HybridStack's checkpointed layers are rebuilt, one at a time."""
    if not m.hybrid_mtp_pattern:
        depth = mtp_depth(m, p, replace(t, recompute_granularity=None)).terms
        inside = sum(v for k, v in depth.items() if k not in ("mtp_embedding", "mtp_output"))
        return inside + checkpoint_input(m, p, t)  # and the final norm's input
    plain = replace(t, recompute_granularity=None)
    quantized = precision.hybrid_mtp_quantized(m, t.low_precision)
    layers = [after_selective_recompute(layer_terms(m, p, plain, kind == "E", fp8=q, hybrid=kind), plain,
                                        kind, fp8=q).total for kind, q in zip(m.hybrid_mtp_pattern, quantized)]
    if t.recompute_method == "block":
        return max(layers[:t.recompute_num_layers or 0], default=0.0)
    depth = mtp_depth(m, p, plain).terms
    kept = depth["mtp_norm_inputs"] + depth["mtp_eh_proj_input"] + checkpoint_input(m, p, t) * len(layers)
    return kept + checkpoint_input(m, p, t) + max(layers)  # the final norm's input, the layer being rebuilt


def expert_tokens(m: ModelShape, p: Parallelism, t: Training) -> float:
    """Routed token copies one expert-parallel rank processes per MoE layer, with balanced routing:
    each rank's (sequence-parallel) tokens times top-k, gathered over the expert-tensor-parallel group."""
    sp = p.tp if p.sequence_parallel else 1
    return tokens(m, p, t) / sp * m.moe_router_topk * p.etp


def expert_rows(m: ModelShape, p: Parallelism, t: Training) -> float:
    """Rows the experts of one expert-parallel rank compute on, and save, per MoE layer: the balanced load, or
    with moe_expert_rank_capacity_factor the dispatcher's fixed receive budget, whatever the routing (megatron-core
    2a75ac12 token_dispatcher.py: HybridEP's `setup_metadata` int(tokens x top-k x factor); NCCL EP's
    `_ensure_bootstrap` the same with the tokens rounded up to 64 and the TP-folded top-k; both rounded up to the
    op fuser's 256-row alignment)."""
    b = t.expert_budget
    if b is None:
        return expert_tokens(m, p, t)
    sp = p.tp if p.sequence_parallel else 1
    local = tokens(m, p, t) / sp
    topk = m.moe_router_topk
    if b.backend == "ncclep":
        local, topk = math.ceil(local / 64) * 64, topk * p.etp
    budget = int(local * topk * b.factor)
    return float(math.ceil(budget / b.align) * b.align)


# The saved tensors moe_paged_stash moves into its buffer: what Transformer Engine's fused grouped MLP marks
# (mark_grouped_tensor: the fc1 input, the activation's input and the fc2 input; the per-row scales are small).
STASHED_TERMS = ("expert_fc1_input", "expert_fc1_output", "expert_act_output")


def stash_share(m: ModelShape, p: Parallelism, t: Training) -> float:
    """The paged stash's buffer for one stashed byte of padded saved tensors (0 without the stash). paged_stash.py
    sizes the CUDA buffer at `moe_paged_stash_buffer_size_factor_cuda` times the peak over the schedule of the
    stashed tensors at their average size, `rows // factor` rows each (experts.py `avg_num_tokens`)."""
    b = t.expert_budget
    if b is None or b.stash is None or b.fused is False:
        return 0.0
    if b.fused is None:  # oom.architectures resolves it before any estimate
        raise ValueError("whether the fused grouped MLP runs (and the stash takes anything) is not known")
    rows = expert_rows(m, p, t)
    return b.stash * (rows // b.factor) / rows


def dispatch_buffers(m: ModelShape, p: Parallelism, t: Training) -> float:
    """The all-to-all send and receive buffers of one MoE layer (live only while that layer runs); with
    moe_expert_rank_capacity_factor the receive buffer holds the whole budget."""
    if not m.num_moe_experts:
        return 0.0
    return 2 * (expert_tokens(m, p, t) + expert_rows(m, p, t)) * (m.moe_latent_size or m.hidden_size)


def embedding_terms(m: ModelShape, p: Parallelism, t: Training) -> float:
    """The first stage's per-micro-batch inputs: token ids (int64) and the embedding dropout mask."""
    n = tokens(m, p, t)
    sp = p.tp if p.sequence_parallel else 1
    return 8 * n + (n * m.hidden_size / sp if m.hidden_dropout > 0 else 0.0)


def output_terms(m: ModelShape, p: Parallelism, t: Training) -> float:
    """The last stage's final-norm and output-layer inputs and the fp32 logits the cross-entropy keeps. An MXFP8
    output layer (fp8_output_proj) saves its input quantized, like any Transformer Engine linear."""
    n = tokens(m, p, t)
    sp = p.tp if p.sequence_parallel else 1
    lp = t.low_precision
    head = precision.saved_input_bytes(lp) if lp is not None and lp.output_layer else 2
    return (2 + head) * n * m.hidden_size / sp + 4 * n * m.vocab_size / p.tp


# Selective recompute in a hybrid model (megatron-core 2a75ac12, Bridge 067f987's pin), per layer symbol: the
# modules each layer kind honours and what they drop. A MambaLayer recomputes nothing (ssm/mamba_layer.py has no
# recompute path; its norm is fused into in_proj). The attention layer's input norm is fused into linear_qkv
# (IdentityOp input_layernorm, so `layernorm` does nothing) and its MLP is IdentityOp. The MLP layer's norm is
# fused into fc1 (`layernorm` does nothing); `mlp` checkpoints the whole MLP (TransformerLayer._forward_mlp),
# which keeps its input, the layer's input (kept anyway as `mlp_norm_input`), and drops fc1's normed input, its
# output and the activation's. The MoE layer has a separate pre-MLP TENorm, so `layernorm` discards its output
# (`moe_input`, which the router, the shared expert's fc1 and the MoE checkpoint hold; with FP8 other than delayed
# scaling, which megatron-core refuses here, and with FP4 the shared expert's fc1 saves that original input
# anyway); `moe`, `moe_act` and `shared_experts` as in a GPT MoE layer. inputs_hybrid.hybrid_unsupported refuses the
# CUDA-graph cases where megatron-core switches these off.
HYBRID_RECOMPUTE_DROPS = {
    "M": {},
    "*": {"core_attn": ()},
    "-": {"mlp": ("fc1_input", "fc1_output", "act_output")},
    "E": {"layernorm": ("moe_input",),
          **{k: RECOMPUTE_DROPS[k] for k in ("moe", "moe_act", "shared_experts")}},
}


def after_selective_recompute(layer: LayerActivations, t: Training, kind: str | None = None,
                              fp8: bool = False) -> LayerActivations:
    """The layer's saved tensors left after selective recompute; `kind`: a hybrid model's layer symbol (its own
    table, HYBRID_RECOMPUTE_DROPS); `fp8`: the layer runs its GEMMs in FP8/FP4 (as for layer_terms)."""
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.moe_layer_recompute:
        modules.add("moe")
    if t.fused_grouped_mlp or t.expert_budget is not None and t.expert_budget.fused is True:
        # The fused grouped MLP saves the fc2 input whatever moe_act says (TE recomputes it only for SReLU, which
        # inputs_moe._grouped_mlp_fuses does not count as fused), with or without the capacity factor.
        modules.discard("moe_act")
    if kind == "E" and not t.pre_mlp_norm_recompute:  # CUDA graphs keep the norm's output (inputs.py)
        modules.discard("layernorm")
    drops = RECOMPUTE_DROPS if kind is None else HYBRID_RECOMPUTE_DROPS[kind]
    dropped = [name for module in modules for name in drops.get(module, ())]
    # an MLA layer (the compressed kv is among its terms); without q_lora_rank (no compressed q) an FP8 layer's
    # linear_q_proj keeps its quantized copy of the normed input
    if kind is None and "layernorm" in modules and "mla_kv_compressed" in layer.terms and \
            not (fp8 and t.low_precision and "mla_q_compressed" not in layer.terms):
        dropped += MLA_LAYERNORM_DROPS
    return layer.without(dropped)


def checkpoint_input(m: ModelShape, p: Parallelism, t: Training) -> float:
    """What full recompute keeps of a layer (or a chunk of layers): its input hidden states."""
    sp = p.tp if p.sequence_parallel else 1
    return 2 * tokens(m, p, t) * m.hidden_size / sp


def offloaded_share(layer: LayerActivations, t: Training) -> float:
    """Bytes of one layer that fine-grained activation offloading moves to the host."""
    if not t.fine_grained_offloading:
        return 0.0
    names = {n for module in t.offload_modules for n in OFFLOAD_TERMS.get(module, ())}
    return sum(v for k, v in layer.terms.items() if k in names) * max(0.0, min(1.0, t.activation_offload_fraction))


# ---- a trained vision tower (frozen_lm.py holds its shape and the frozen cases) ----------------------------------


def _vision_parallel(p: Parallelism) -> Parallelism:
    return Parallelism(tp=p.tp)  # TP as the language model's, no SP, CP 1, no pipeline


def _vision_training(t: Training, padded: int | None = None) -> Training:
    if padded:  # vision CUDA graphs: the pool holds what the capture kept (trained_tower_activations)
        return Training(micro_batch_size=1)
    return Training(micro_batch_size=1, recompute_granularity=t.recompute_granularity,
                    recompute_method=t.recompute_method, recompute_num_layers=t.recompute_num_layers)


def trained_tower_layer(v: FrozenLM, m: ModelShape, p: Parallelism, t: Training,
                        padded: int | None = None) -> float:
    """Bytes one trained ViT layer saves per micro-batch (trained_tower_activations; `padded`: the vision CUDA
    graphs' patch length, None without them)."""
    vm, vp, vt = frozen_lm.vision_shape(v, m, t, padded), _vision_parallel(p), _vision_training(t, padded)
    return after_selective_recompute(layer_terms(vm, vp, vt, moe=False), vt).total


def trained_tower_activations(v: FrozenLM, m: ModelShape, p: Parallelism, t: Training, padded: int | None = None,
                              pixels: bool = True) -> tuple[float, float]:
    """(bytes a trained tower keeps per micro-batch on one rank of the first stage, the working set its full
    recompute adds while one chunk is rebuilt). Each layer keeps what a bf16 GPT layer with biases and GELU keeps
    (layer_terms: both norms' inputs, the normed inputs of QKV and fc1, flash attention's q, k, v and
    output, GELU's input and output, which fc2 keeps); selective recompute drops core_attn's; full recompute keeps
    one input per checkpointed chunk. The Conv3d patch embedding keeps its input, the pixels in bf16 (left out with
    `pixels` False: a micro-batch without images). Not counted: fp32 norm statistics and the rotary tables (as for
    the language model's layers). Under vision CUDA graphs (`padded`, frozen_lm.py) the layers run at the padded
    length and keep what the capture kept: recompute is not modelled there (inputs_vlm._read_vision_graphs refuses it;
    the what-if table's recompute rows show the tower as captured without recompute)."""
    vm, vp, vt = frozen_lm.vision_shape(v, m, t, padded), _vision_parallel(p), _vision_training(t, padded)
    layer = trained_tower_layer(v, m, p, t, padded)
    pixels = 2 * vm.seq_length * v.in_channels * v.temporal_patch_size * v.patch_size ** 2 if pixels else 0.0
    if vt.recompute_granularity != "full":
        return layer * v.depth + pixels, 0.0
    k, layers, checkpoint = max(1, vt.recompute_num_layers or 1), v.depth, checkpoint_input(vm, vp, vt)
    if vt.recompute_method == "block":  # the first k layers keep their inputs, the others everything
        recomputed = min(k, layers)
        return checkpoint * recomputed + layer * (layers - recomputed) + pixels, layer
    return checkpoint * math.ceil(layers / k) + pixels, layer * min(k, layers)
