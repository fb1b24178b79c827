"""Parameter counts of a megatron-core GPTModel, per layer kind and per pipeline stage and rank.

Counted from the modules megatron-core builds (embedding, per layer: input norm, QKV and output projections
with their biases, optional Q/K norms, pre-MLP norm, dense MLP or router + experts + shared experts; final
norm; output layer when untied). `tests/test_estimate_params.py` checks these totals against real GPTModels.
Each count is split by how ranks hold it: `tp` (sharded over tensor parallelism), `replicated` (norms, router),
`expert` (sharded over expert x expert-tensor parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from offlint.estimate.inputs import ModelShape, Parallelism


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
    q = m.num_attention_heads * m.kv_channels
    kv = m.num_query_groups * m.kv_channels
    qkv = m.hidden_size * (q + 2 * kv) + ((q + 2 * kv) if (m.add_bias_linear or m.add_qkv_bias) else 0)
    proj = q * m.hidden_size + (m.hidden_size if m.add_bias_linear else 0)
    qk_norms = 2 * _norm(m, m.kv_channels) if m.qk_layernorm else 0
    return Split(tp=qkv + proj, replicated=_norm(m, m.hidden_size) + qk_norms)


def mlp(m: ModelShape, ffn: int) -> int:
    """One MLP (dense, expert or shared expert) of width `ffn`."""
    fc1_out = ffn * (2 if m.gated_linear_unit else 1)
    return m.hidden_size * fc1_out + ffn * m.hidden_size + ((fc1_out + m.hidden_size) if m.add_bias_linear else 0)


def dense_layer(m: ModelShape) -> Split:
    return attention(m) + Split(tp=mlp(m, m.ffn_hidden_size), replicated=_norm(m, m.hidden_size))


def moe_layer(m: ModelShape) -> Split:
    experts = m.num_moe_experts or 0
    router = experts * m.hidden_size + (experts if m.add_bias_linear else 0)
    shared = m.moe_shared_expert_intermediate_size or 0
    shared_params = mlp(m, shared) if shared else 0
    gate = m.hidden_size if shared and m.moe_shared_expert_gate else 0
    return attention(m) + Split(tp=shared_params, replicated=_norm(m, m.hidden_size) + router + gate,
                                expert=experts * mlp(m, m.moe_ffn_hidden_size or m.ffn_hidden_size))


def layer(m: ModelShape, index: int) -> Split:
    return moe_layer(m) if m.is_moe_layer(index) else dense_layer(m)


def embedding(m: ModelShape) -> Split:
    positions = m.seq_length * m.hidden_size if m.learned_position_embeddings else 0
    return Split(tp=m.vocab_size * m.hidden_size, replicated=positions)


def output_layer(m: ModelShape) -> Split:
    return Split(tp=m.vocab_size * m.hidden_size)


def final_norm(m: ModelShape) -> Split:
    return Split(replicated=_norm(m, m.hidden_size))


def total(m: ModelShape) -> int:
    """All parameters of the model (tied output weights counted once), as `sum(p.numel())` on one rank."""
    count = embedding(m) + final_norm(m)
    for i in range(m.num_layers):
        count = count + layer(m, i)
    if not m.tied_embeddings:
        count = count + output_layer(m)
    return count.total


def active(m: ModelShape) -> int:
    """Parameters one token passes through (MoE: top-k of the routed experts)."""
    if not m.num_moe_experts:
        return total(m)
    per_expert = mlp(m, m.moe_ffn_hidden_size or m.ffn_hidden_size)
    unused = (m.num_moe_experts - m.moe_router_topk) * per_expert
    moe_layers = sum(1 for i in range(m.num_layers) if m.is_moe_layer(i))
    return total(m) - unused * moe_layers


@dataclass(frozen=True)
class Stage:
    """The parameters one pipeline stage holds (all its virtual chunks), before TP/EP sharding."""

    index: int
    layers: int
    params: Split
    has_embedding: bool
    has_output: bool


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


@lru_cache(maxsize=512)
def stages(m: ModelShape, parallel: Parallelism) -> tuple[Stage, ...]:
    """Every pipeline stage's parameters. With PP>1 and tied embeddings the last stage holds its own copy
    of the word embeddings for the output layer (megatron-core keeps the two in sync). Kept per (model,
    layout): a tree's recipes share a handful of models, and the what-if options repeat them."""
    out = []
    for index, ranges in enumerate(stage_layer_ranges(m.num_layers, parallel.pp, parallel.vpp)):
        count = Split()
        layers = 0
        for r in ranges:
            for i in r:
                count = count + layer(m, i)
                layers += 1
        first, last = index == 0, index == parallel.pp - 1
        if first:
            count = count + embedding(m)
        if last:
            count = count + final_norm(m)
            if not m.tied_embeddings or parallel.pp > 1:
                count = count + output_layer(m)
        out.append(Stage(index, layers, count, first, last))
    return tuple(out)
