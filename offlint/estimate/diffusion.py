"""Bridge's Wan video diffusion transformer: its parameters and what it saves per micro-batch.

Bridge 067f987 builds Wan with `WanModelProvider` (diffusion/models/wan/wan_provider.py) into `WanModel`
(wan_model.py): a Conv3d patch embedding, a text-embedding MLP (text_dim -> crossattn_emb_size -> same), a timestep
MLP and its projection to six modulation vectors, `num_layers` `WanLayerWithAdaLN` blocks (wan_layer_spec.py:
adaLN-modulated self-attention with q/k RMSNorm across heads, cross-attention to the text embeddings, GELU MLP),
and a modulated output head. There is no vocabulary and no final norm. docs/estimate.md, "Wan", gives every count
with its file and line; this module is the arithmetic.

The transformer's sequence is not `seq_length`: with `dataset.path` unset (every Bridge Wan recipe) the
WanDatasetConfig builds mock batches of `number_packed_samples` latent videos of F x H x W latents, patchified to
F/pt x H/ps x W/ps tokens each, with `context_seq_len` text tokens each, whatever the micro-batch size
(wan_mock_datamodule.py:38-110). With a real dataset the packed length depends on the videos, which offlint
cannot see: that case is refused. inputs.py reads all that (`_read_wan`), memory.py adds it up (`_wan_stages`).
"""

from __future__ import annotations

from offlint.estimate import params
from offlint.estimate.inputs import ModelShape, Parallelism

# --- parameters ------------------------------------------------------------------------------------------------

def layer_params(m: ModelShape) -> params.Split:
    """One WanLayerWithAdaLN (wan_layer_spec.py:97-160). `tp`: split over tensor parallelism (column-parallel
    weights and biases, row-parallel weights); `replicated`: whole on every TP rank (row-parallel biases, the q/k
    norms, adaLN's modulation, norm3)."""
    h, f, c = m.hidden_size, m.ffn_hidden_size, m.wan.crossattn_emb_size
    q = m.num_attention_heads * m.kv_channels
    kv = m.num_query_groups * m.kv_channels
    b = 1 if m.add_bias_linear else 0
    fc1 = f * (2 if m.gated_linear_unit else 1)
    norms = (q + kv) if m.wan.layernorm_across_heads else 2 * m.kv_channels  # RMSNorm: weight only
    tp = (h * (q + 2 * kv) + (q + 2 * kv) * (1 if (m.add_bias_linear or m.add_qkv_bias) else 0)  # linear_qkv
          + q * h  # self-attention linear_proj
          + h * q + q * b + c * 2 * kv + 2 * kv * b + q * h  # cross-attention linear_q, linear_kv, linear_proj
          + h * fc1 + fc1 * b + f * h)  # linear_fc1, linear_fc2
    replicated = 3 * h * b + 2 * norms + 6 * h + 2 * h  # proj/proj/fc2 biases, q/k norms x2, modulation, norm3
    return params.Split(tp=tp, replicated=replicated)


def outside_params(m: ModelShape, first: bool = True, last: bool = True) -> params.Split:
    """WanModel's modules outside the blocks (wan_model.py:131-166), plain torch modules whole on every TP rank:
    patch_embedding (first stage), text_embedding, time_embedder and time_proj (every stage), head (last)."""
    w, h, c = m.wan, m.hidden_size, m.wan.crossattn_emb_size
    patch = w.in_channels * w.patch_temporal * w.patch_spatial ** 2
    count = (w.text_dim * c + c + c * c + c  # text_embedding: Linear, GELU, Linear
             + w.freq_dim * h + h + h * h + h  # time_embedder: diffusers TimestepEmbedding, linear_1 and linear_2
             + h * 6 * h + 6 * h)  # time_proj
    if first:
        count += patch * h + h  # Conv3d
    if last:
        count += h * w.out_channels * w.patch_temporal * w.patch_spatial ** 2 \
            + w.out_channels * w.patch_temporal * w.patch_spatial ** 2 + 2 * h  # head Linear, modulation
    return params.Split(replicated=count)


def total(m: ModelShape) -> int:
    """All parameters, as `sum(p.numel())` of the whole model on one rank without parallelism."""
    return (layer_params(m) * m.num_layers + outside_params(m)).total


# --- activations -----------------------------------------------------------------------------------------------

def _sizes(m: ModelShape, p: Parallelism) -> tuple[float, float, int]:
    """(video tokens and text tokens of one micro-batch on one CP rank, the SP divisor). The mock batch is the
    same whatever the micro-batch size (its collate function ignores the samples)."""
    return m.seq_length / p.cp, m.wan.context_tokens * m.wan.packed_samples / p.cp, \
        (p.tp if p.sequence_parallel else 1)


def layer_terms(m: ModelShape, p: Parallelism) -> dict[str, float]:
    """Bytes one block saves for backward per micro-batch on one GPU (bf16, fp32 norm statistics). docs/estimate.md
    "Wan" lists where each comes from; attention follows offlint's convention (q, k, v and the output)."""
    n, nc, sp = _sizes(m, p)
    h, tp = m.hidden_size, p.tp
    q, kv = m.num_attention_heads * m.kv_channels, m.num_query_groups * m.kv_channels
    f = m.ffn_hidden_size
    ctx = nc * sp  # linear_kv is a sequence-parallel column linear: it all-gathers the (whole) context over TP
    if m.wan.layernorm_across_heads:  # gathered over TP, one RMSNorm over all heads: full width, rstd per row
        norms, cross_norms = 2 * n * (q + kv) + 8 * n, 2 * n * q + 4 * n + 2 * ctx * kv + 4 * ctx
    else:  # per head: the local heads, rstd per head and row
        norms = (2 * n * (q + kv) + 4 * n * (m.num_attention_heads + m.num_query_groups)) / tp
        cross_norms = (2 * (n * q + ctx * kv) + 4 * (n + ctx) * m.num_attention_heads) / tp
    modulated_norm = 2 * n * h / sp + 8 * n / sp  # compiled normalize_modulate: its input, mean and rstd
    return {
        "norm1_input": modulated_norm,
        "qkv_input": 2 * n * h / sp,
        "qk_norm_inputs": norms,
        "core_attn_qkv": 2 * n * (q + 2 * kv) / tp,
        "core_attn_out": 2 * n * q / tp,
        "attn_gate_input": 2 * n * h / sp,  # compiled scale_add keeps the biased attention output
        "norm3_input": 2 * n * h / sp + 8 * n / sp,  # nn.LayerNorm: input, mean, rstd
        "cross_q_input": 2 * n * h / sp,
        "cross_qk_norm_inputs": cross_norms,
        "cross_attn_qkv": (2 * n * q + 2 * ctx * 2 * kv) / tp,
        "cross_attn_out": 2 * n * q / tp,
        "norm2_input": modulated_norm,
        "fc1_input": 2 * n * h / sp,
        "fc1_output": 2 * n * f * (2 if m.gated_linear_unit else 1) / tp,
        "act_output": 2 * n * f / tp,
        "mlp_gate_input": 2 * n * h / sp,
    }


def outside_terms(m: ModelShape, p: Parallelism) -> dict[str, float]:
    """Saved tensors outside the blocks, per micro-batch (one stage: PP is refused): the patch embedding's input,
    the text embedding's inputs and its output (which every block's linear_kv keeps: one tensor), the rotary
    frequencies (fp32, the whole packed sequence, kept by every block's fused RoPE: one tensor) and the head's
    norm input, modulation product and linear input."""
    n, nc, sp = _sizes(m, p)
    w, h = m.wan, m.hidden_size
    c = w.crossattn_emb_size
    return {
        "patch_embedding_input": 2 * n * w.in_channels * w.patch_temporal * w.patch_spatial ** 2,
        "text_embedding": 2 * nc * (w.text_dim + 3 * c),
        "rotary_frequencies": 4 * m.seq_length * (h // m.num_attention_heads),
        "head": 6 * n * h / sp + 8 * n / sp,
    }


def checkpoint_input(m: ModelShape, p: Parallelism) -> float:
    n, _, sp = _sizes(m, p)
    return 2 * n * m.hidden_size / sp
