"""What the language model's Transformer Engine CUDA graphs (`cuda_graph_impl="transformer_engine"`) keep on one
rank beyond what eager execution keeps. Sources: megatron-core 2a75ac12 (Megatron Bridge 067f987's pin; the same
code in 0.20.0) `transformer/cuda_graphs.py`, `transformer_layer.py`, `module.py`; Transformer Engine e7c550c5
(Bridge's uv.lock) `pytorch/graph.py`; docs/estimate.md "Language-model CUDA graphs".

- Which layers: TECudaGraphHelper graphs every decoder (and MTP) layer of a model chunk that `_layer_is_graphable`
  accepts (cuda_graphs.py:2057-2097): every layer with an empty scope (megatron-core's "full" becomes one,
  transformer_config.py:1054-1070); a Mamba layer under "mamba"; a TransformerLayer with attention under "attn",
  with a MoE under "moe"/"moe_router"/"moe_preprocess", with a dense MLP under "mlp".
- One graph per (layer, micro-batch): get_num_microbatches() with a pipeline or EP overlap, else 1 (cuda_graphs.py:
  2519-2526), captured in the schedule's order (`_order`) into one shared pool (graph.py:413).
- Sample inputs (cuda_graphs.py:2310-2365, module.py:237-263, transformer_layer.py:1087-1108): hidden states
  [s/CP (/TP with sequence parallelism), b, h] bf16 and, for a layer whose graph holds its attention (empty scope
  or "attn"), a bool mask [b, 1, s/CP, s]; megatron-core reuses a set once the micro-batch's backward comes in the
  order (cuda_graphs.py:2389-2486, TE's `_reuse_graph_input_output_buffers` again, graph.py:255-322), so a layer
  keeps one set per micro-batch in flight on the stage. The hidden-state buffer is what the layer's first norm
  saves (eager keeps that tensor too); the masks are more: Transformer Engine keeps every sample input as the
  graph's static input surface for the graphs' life (graph.py:395-407), and megatron-core's causal attention does
  not read it.
- Static outputs: each forward graph's outputs stay in the pool from its capture to its backward's (graph.py:
  589-591, weak-referenced only at :719-723). Where the graph ends the layer (empty scope, a dense MLP under "mlp",
  a MoE under "moe", a Mamba layer, an attention-only hybrid layer under "attn") the output is the layer's output:
  the next graphed layer copies it into its own static input at replay (eager keeps one tensor where the graphs
  have two) where that layer's graph starts at its input: one [s/CP(/TP), b, h] bf16 more per such layer and
  micro-batch in flight. A graph that stops inside the layer hands its outputs to eager code that saves them (the
  pre-MLP norm after "attn"; the dispatcher after "moe_router"), a GPT layer graphed from its MLP on runs its
  attention eagerly first (whose norm saves the previous output), and a chunk's last output is sent on (the
  schedule keeps it: megatron-core's deallocate_pipeline_outputs defaults to False, model_parallel_config.py:405,
  and Bridge's providers keep that) or goes to the final norm, which saves it: nothing more there.
- Static grad outputs: one set per output signature, shared by every graph (graph.py:664-679): one hidden-state
  tensor counted.
- Not counted (in the estimate's allowance): what one graph's backward allocates in the pool beyond its grad
  inputs (activation gradients, workspaces), the cached dummy weight gradients of gradient-accumulation fusion
  (one per weight shape, made by eager backward too), and under EP overlap one sample set more (its order runs a
  layer's next forward before the previous micro-batch's backward: cuda_graphs.py:2840-2948).
- The capture's sample inputs exist one set per in-flight micro-batch already (megatron-core reuses them before
  Transformer Engine sees them), so the capture adds no peak of its own.
"""

from __future__ import annotations

from offlint.estimate.inputs import ModelShape, Parallelism, Training

MOE_SCOPES = frozenset({"moe", "moe_router", "moe_preprocess"})


def _has_attention(m: ModelShape, index: int) -> bool:
    kind = m.layer_kind(index)
    return kind is None or kind == "*"


def graphed(m: ModelShape, names: frozenset[str], index: int) -> bool:
    """Whether megatron-core's _layer_is_graphable takes decoder layer `index` (cuda_graphs.py:2057-2097)."""
    if not names:
        return True
    kind = m.layer_kind(index)
    if kind == "M":
        return "mamba" in names
    if _has_attention(m, index) and "attn" in names:
        return True
    if m.is_moe_layer(index):
        return bool(names & MOE_SCOPES)
    return kind in (None, "-") and "mlp" in names


def _has_mask(m: ModelShape, names: frozenset[str], index: int) -> bool:
    return graphed(m, names, index) and _has_attention(m, index) and (not names or "attn" in names)


def _ends_layer(m: ModelShape, names: frozenset[str], index: int) -> bool:
    """Whether the layer's graph runs to the layer's output (transformer_layer.py:1138-1193, :1241-1249)."""
    if not graphed(m, names, index):
        return False
    if not names:
        return True
    kind = m.layer_kind(index)
    if kind == "M":
        return True
    if kind == "*":  # a hybrid attention layer: no MLP after its attention
        return "attn" in names
    if m.is_moe_layer(index):
        return "moe" in names
    return "mlp" in names


def _starts_at_input(m: ModelShape, names: frozenset[str], index: int) -> bool:
    """Whether the layer's graph takes the layer's input as its static input (transformer_layer.py:1158-1168,
    :1203-1209): whole layers, Mamba layers, a layer whose attention the graph holds, and a hybrid MLP or MoE layer
    (no attention before its graph). A GPT layer graphed from its MLP on runs its attention eagerly first, and
    that attention's norm saves the previous layer's output."""
    if not graphed(m, names, index):
        return False
    kind = m.layer_kind(index)
    return not names or kind in ("M", "-", "E") or "attn" in names


def parts(m: ModelShape, p: Parallelism, t: Training, chunks: list[range], mtp_depths: int,
          in_flight: float) -> list[tuple[str, float]]:
    """(name, bytes) of what the language model's Transformer Engine graphs keep on one rank of a stage beyond
    eager execution (the module docstring): `chunks` the stage's decoder layer ranges (one per virtual chunk),
    `mtp_depths` the MTP layers it builds, `in_flight` its micro-batches in flight (memory.microbatches_in_flight:
    one sample set per layer and micro-batch)."""
    names = frozenset(t.te_graph_modules or ())
    if t.te_graph_modules is None:
        return []
    s, b, h = m.seq_length, t.micro_batch_size, m.hidden_size
    rows = s / p.cp / (p.tp if p.sequence_parallel else 1)
    hidden = 2.0 * rows * b * h  # one [s/CP(/TP), b, h] bf16 tensor
    mask = float(b) * (s // p.cp) * s  # one bool [b, 1, s/CP, s]
    layers = [i for r in chunks for i in r]
    masks = sum(_has_mask(m, names, i) for i in layers)
    # a GPT MTP depth's TransformerLayer (mtp_model_layer) is graphed with its attention; a hybrid depth's
    # HybridStack (hybrid_block.py:55) is not a GraphableMegatronModule (cuda_graphs.py:2188-2192, :2063-2064)
    mtp = mtp_depths if m.hybrid_pattern is None and (not names or "attn" in names) else 0
    # a layer's output copied into the next layer's static input (within a chunk: a chunk's last output is sent
    # on or goes to the final norm, kept as eager keeps it)
    outputs = sum(_ends_layer(m, names, i) and _starts_at_input(m, names, i + 1) for r in chunks for i in r[:-1])
    if not (any(graphed(m, names, i) for i in layers) or mtp):
        return []
    return [
        ("LM CUDA graphs: static attention masks (one bool [b, 1, s/CP, s] per layer and micro-batch in flight)",
         (masks + mtp) * in_flight * mask),
        ("LM CUDA graphs: static layer outputs copied into the next graph's input, and the grad output",
         outputs * in_flight * hidden + hidden),
    ]
