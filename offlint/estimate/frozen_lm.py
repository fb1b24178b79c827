"""A VLM that trains only its vision projection: frozen language model, frozen vision tower, trained patch mergers
(Megatron Bridge 067f987's Qwen3-VL recipes: `freeze_language_model=True`, `freeze_vision_model=True`,
`freeze_vision_projection=False`). Sources in docs/estimate.md, "Frozen language model (Qwen3-VL recipes)".

- Parameters: Qwen3VLModel.freeze (models/qwen_vl/modelling_qwen3_vl/model.py:513-546) sets requires_grad=False
  on the language model and the tower, then True again on the final patch merger and the deepstack mergers.
  megatron-core's DDP and optimizer allocate gradients and optimizer states for the trained parameters only (as
  for LoRA's frozen base, lora.py). The tower and its mergers exist on the first pipeline stage only
  (`pre_process and add_encoder`, model.py:346), built with the language model's tensor parallelism and without
  sequence parallelism (transformer_config.py get_vision_model_config: :83, :126).
- The tower: 27 (`depth`) pre-norm ViT layers from megatron-core's TE ViT spec (LayerNorm fused into QKV and fc1,
  biases everywhere, GELU MLP), a Conv3d patch embedding with bias (utils.py Qwen3VLVisionPatchEmbed) and learned
  position embeddings (vision_model.py:145); no final norm. Its inputs need no gradient and its weights are
  frozen, so autograd records nothing there and it keeps no activations; while it runs it holds one layer's
  tensors (`tower_working_set`).
- The mergers (utils.py Qwen3VLVisionPatchMerger): a LayerNorm over the patch width (the final merger) or over
  the merged width (deepstack mergers, `use_postshuffle_norm`), TE column-parallel fc1 (merged -> merged),
  GELU, TE row-parallel fc2 (merged -> out_hidden_size), with biases. Trained, they keep the norm's input and
  statistics (Transformer Engine ops/basic/layer_norm.py: `save_for_backward(x, means, rstdevs)`), fc1's input
  (the normed tensor, whole on every TP rank), GELU's input and fc2's input (split over TP).
- The frozen language model: its input (the embeddings with the mergers' output scattered in) needs a gradient,
  so backward runs through every layer, but a frozen Transformer Engine linear keeps no input: `Linear` and
  `LayerNormLinear` save their input only when `weight.requires_grad` (linear.py `backward_needs_input`;
  layernorm_linear.py:427-429 frees the norm's output), `GroupedLinear` likewise (grouped_linear.py:901-916 at
  d0067d0: `inputmats = [None] * num_gemms`). Norms, attention, the activation functions and the router
  (megatron-core RouterGatingLinearFunction saves its input unconditionally) keep theirs.
- FP8 (Transformer Engine d0067d0; docs/estimate.md "Frozen language model", FP8): the frozen linears save no
  input in any recipe (linear.py:303 and :620, `backward_needs_input`, also for delayed scaling's quantized copy
  of the output projection's input, `proj_input`; layernorm_linear.py:427-429; grouped_linear.py:902-916), and
  their weights keep the same quantized copies as trained ones, both usages: backward needs the column-wise one
  for dgrad because the layer's input needs a gradient (linear.py:467-475 sets the usage from
  `inp.requires_grad`, not the weight's). FP8 primary weights are quantized with both usages when built
  (base.py:1848) and quantize_weight (base.py:836-845) discards neither; bf16 primary weights keep their cached
  copy (`_fp8_workspaces`, linear.py:1958 and :2068-2071) whatever requires_grad is. So the weights follow
  memory._weights and a layer's saved tensors the FP8 ones (activations._quantized) less the linears' inputs.
  The tower and mergers stay bf16: get_vision_model_config builds a fresh config without `fp8`, and megatron-
  core quantizes only layers built and run under a config with it (transformer_block.py build_layer).
- Vision tokens: each merged vision token is one token of the language model's sequence, so a micro-batch holds
  at most micro_batch_size x seq_length of them, spatial_merge_size**2 patches each; with context parallelism
  every CP rank runs the tower on the whole micro-batch's images (vision_dp_when_cp=False). The estimate takes
  that bound (Bridge's mock VLM dataset puts one 256x256 image in each sample; how many tokens the Hugging Face
  processor makes of it is not read).
- Vision CUDA graphs (a trained tower with `vision_cuda_graph_impl="transformer_engine"`, inputs_vlm._read_vision_graphs;
  Bridge 067f987, megatron-core 2a75ac12, Transformer Engine e7c550c5, the commit Bridge's uv.lock pins; docs/
  estimate.md "Vision CUDA graphs"). The tower pads every training micro-batch's patches (all its images as one
  sequence, batch 1) to the graphs' length P (vision_model.py:337-343; more raise, :57-61); patch embedding and the
  final merger run unpadded (:327-330, :362-369), so they take at most P patches, P / merge**2 tokens. The padded
  layers run flash/fused attention without a mask as before: the ViT spec's no_mask (vit_layer_specs.py:47) lets
  every Transformer Engine backend run and ignores the mask Bridge passes (TE attention/dot_product_attention/
  utils.py:1197). megatron-core's VisionTECudaGraphHelper captures one graph per (micro-batch, ViT layer):
  get_num_microbatches() of them with a pipeline, 1 without (cuda_graphs.py:2519-2526), each with fresh sample
  inputs: hidden states [P, 1, h] bf16 and, under the attn scope, a bool mask [1, 1, P, P] (cuda_graphs.py:3190-3213,
  module.py:257-262, transformer_layer.py:1097-1107). Transformer Engine's make_graphed_callables
  (`_reuse_graph_input_output_buffers`, cuda_graphs.py:2609) then reuses a micro-batch's inputs once its backward
  is captured (graph.py:255-322): they are kept for the micro-batches in flight on the first stage (1F1B order,
  schedules.py:939). The hidden-state buffer is what the layer's first norm saves (eager counts it); the mask is
  more. All graphs share one private pool (graph.py:413) captured in the schedule's order (:558-745): it stays
  reserved at its capture peak, which holds each in-flight micro-batch's saved tensors (as eager), plus each
  layer's static output, held from the layer's forward graph to its backward (:591, weak-referenced only then,
  :719-723; eager has one tensor where the graph has the output and the next layer's input copy: one more [P, h]
  per layer and micro-batch), plus what one layer's backward allocates: its static grad inputs, the input's
  gradient and every trained weight's gradient (the input surface holds the parameters, :395-407, :686-697; the
  tower's config keeps megatron-core's gradient_accumulation_fusion=False, so these are bf16 tensors), kept until
  the next layer's backward is captured (:725-733), so two layers' at once. The backward's other transients
  (activation gradients, kernel workspaces) are not read: `graph_parts` takes none at the lower bound and a
  gradient of every tensor the layer saves, in fp32, at the upper. One static grad output [P, h] serves every
  graph (:664-679). With no image in a micro-batch the graphs stay captured: the pool and the inputs stay reserved.
"""

from __future__ import annotations

from offlint.estimate.inputs import FrozenLM, ModelShape, Parallelism, Training
from offlint.estimate.params import Split

# What a frozen Transformer Engine linear (or grouped linear) would have kept: its input (activations.py names;
# `proj_input`: the output projection's quantized copy under delayed scaling, activations._quantized).
FROZEN_LINEAR_INPUTS = ("qkv_input", "fc1_input", "act_output", "expert_fc1_input", "expert_act_output",
                        "proj_input")


# A gated delta net's frozen Transformer Engine linears: in_proj (LayerNormColumnParallelLinear, its norm fused)
# and out_proj (RowParallelLinear) (megatron-core 0.20.0 experimental_attention_variant_module_specs.py:88-90). The
# rest of the layer is kept as trained: flash-linear-attention 0.5.1's autograd functions save their tensors
# whatever requires_grad says (fla/modules/conv/triton/ops.py:389 CausalConv1dFunction: x, the in_proj output view;
# fla/ops/gated_delta_rule/chunk.py:296 ChunkGatedDeltaRuleFunction; fla/modules/l2norm.py:255 L2NormFunction),
# the output norm is Transformer Engine's (saves its input and rstd, as above) and the output gate multiplies two
# activations (ssm/gated_delta_net/common.py:371-380), each needed for the other's gradient.
FROZEN_GDN_INPUTS = ("gdn_in_proj_input", "gdn_out_proj_input")

# What the lower bound also drops where the layer kinds' frozen saved tensors are not checked one by one
# (FrozenLM.bound): the shared expert's fc2 input (a Transformer Engine RowParallelLinear, as the routed experts'),
# the gated output that is linear_proj's input beside the attention output gate (one of attn_output_gate's two
# tensors), and in an MTP depth (activations.mtp_depth) eh_proj's input, the normed embedding of the shifted tokens
# (a frozen embedding's output needs no gradient) and that embedding. The upper bound keeps them: a frozen layer keeps
# at most what a trained one keeps (requires_grad=False only removes a reason to save: Transformer Engine's
# backward_needs_input, PyTorch's derivative formulas; the custom functions above save unconditionally).
LOWER_BOUND_DROPS = ("shared_act_output", "mtp_eh_proj_input", "mtp_embedding")


def layer_terms(terms: dict[str, float], bound: str | None = "") -> dict[str, float]:
    """A frozen language-model layer's saved tensors: those of a trained layer (bf16 or FP8) less the frozen
    linears' inputs; at the lower `bound` (FrozenLM.bound) less LOWER_BOUND_DROPS too."""
    out = {k: v for k, v in terms.items() if k not in FROZEN_LINEAR_INPUTS + FROZEN_GDN_INPUTS}
    if bound == "lower":
        out = {k: v for k, v in out.items() if k not in LOWER_BOUND_DROPS}
        if "attn_output_gate" in out:
            out["attn_output_gate"] /= 2
        if "mtp_norm_inputs" in out:
            out["mtp_norm_inputs"] /= 2
    return out


def _merged(v: FrozenLM) -> int:
    return v.hidden_size * v.spatial_merge_size ** 2


def _layer_params(v: FrozenLM) -> Split:
    """One ViT layer: QKV, fc1 and their biases column-parallel; the output projection and fc2 row-parallel, their
    biases and the two LayerNorms whole."""
    h, f = v.hidden_size, v.intermediate_size
    return Split(tp=3 * h * h + 3 * h + h * h + f * h + f + f * h, replicated=2 * h + h + 2 * h + h)


def tower_params(v: FrozenLM) -> Split:
    """The frozen tower: patch embedding, position embeddings and `depth` ViT layers (_layer_params)."""
    h = v.hidden_size
    patch = v.in_channels * v.temporal_patch_size * v.patch_size ** 2 * h + h
    return _layer_params(v) * v.depth + Split(replicated=patch + v.num_position_embeddings * h)


def projection_params(v: FrozenLM) -> Split:
    """The trained mergers: the final one (LayerNorm over the patch width) and one per deepstack index (LayerNorm
    over the merged width); fc1 column-parallel with its bias, fc2 row-parallel with its bias whole."""
    merged, out = _merged(v), v.out_hidden_size
    linears = Split(tp=merged * merged + merged + merged * out, replicated=out)
    return linears * (1 + v.deepstack_mergers) + Split(replicated=2 * v.hidden_size +
                                                       v.deepstack_mergers * 2 * merged)


def vision_tokens(m: ModelShape, t: Training, v: FrozenLM | None = None, patches: int | None = None) -> float:
    """Merged vision tokens of one micro-batch, at most (see the module docstring); under vision CUDA graphs
    (`patches`: the padded length, `v` the tower) the padded patches' tokens."""
    if patches:
        return patches / v.spatial_merge_size ** 2
    return float(t.micro_batch_size * m.seq_length)


def projection_activations(m: ModelShape, p: Parallelism, t: Training, v: FrozenLM | None = None,
                           patches: int | None = None) -> float:
    """Bytes the trained mergers keep per micro-batch on one rank of the first stage (`v`: the tower, by default
    t.frozen_lm's; `patches`: the vision CUDA graphs' padded length, None without them)."""
    v = v or t.frozen_lm
    tokens, merged = vision_tokens(m, t, v, patches), _merged(v)
    patches = tokens * v.spatial_merge_size ** 2
    per_merger = 2 * tokens * merged * 2 + 2 * tokens * merged / p.tp * 2  # norm and fc1 inputs; GELU and fc2's
    stats = 8 * patches + v.deepstack_mergers * 8 * tokens  # fp32 mean and rstd per normalised row
    return per_merger * (1 + v.deepstack_mergers) + stats


def first_chunk_in_flight(pp: int, vpp: int, nmb: int | None) -> int:
    """Micro-batches whose activations the first virtual pipeline stage (model chunk 0 of pipeline rank 0, which
    holds the tower and the mergers) keeps at most under megatron-core's interleaved 1F1B (0.19.2
    pipeline_parallel/schedules.py): forwards in get_schedule_table's order (:962-991, groups of
    microbatch_group_size_per_vp_stage micro-batches, PP by default (model_parallel_config.py:567-568), chunk by
    chunk), backwards in the same order with the chunks reversed (get_model_chunk_id, :1217-1222); rank 0 warms up
    with 2(PP-1) + (VPP-1) x PP forwards (get_pp_rank_microbatches, :937-938), then runs one forward and one
    backward per step. The count is chunk 0's forwards less its backwards after each forward, at its largest:
    min(nmb, 2 PP), while the whole stage averages (warm-up + 1) / VPP (memory.microbatches_in_flight).
    `nmb` None: enough micro-batches (4 PP)."""
    n = nmb or 4 * pp
    order = [chunk for first in range(0, n, pp) for chunk in range(vpp) for _ in range(first, min(first + pp, n))]
    warm = min(2 * (pp - 1) + (vpp - 1) * pp, len(order))
    held = most = order[:warm].count(0)
    for step in range(len(order) - warm):
        held += order[warm + step] == 0  # the step's forward
        most = max(most, held)
        held -= order[step] == vpp - 1  # its backward runs chunk VPP-1-order[step]
    return most


def tower_working_set(m: ModelShape, p: Parallelism, t: Training, v: FrozenLM | None = None) -> float:
    """What the frozen tower holds while it runs one micro-batch (nothing is kept after): at most every tensor one
    ViT layer makes and its input (the input, the two normed inputs, QKV, the attention and projection outputs,
    fc1 and GELU outputs, fc2's output and the two residual sums), the deepstack inputs taken so far (kept by their
    mergers, counted there) aside, and the input pixels in fp32. `v`: the tower, by default t.frozen_lm's."""
    v = v or t.frozen_lm
    patches = vision_tokens(m, t) * v.spatial_merge_size ** 2
    h, f = v.hidden_size, v.intermediate_size
    layer = 2 * patches * (7 * h + (3 * h + h + 2 * f) / p.tp)
    pixels = 4 * patches * v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    return layer + pixels


# A trained tower (a VLM whose language model trains too: inputs.TrainedVLM). Bridge's get_vision_model_config
# (modelling_qwen3_vl/transformer_config.py:64-127 at 067f987) builds a fresh TransformerConfig for it: the language
# model's TP, recompute_granularity, recompute_method and recompute_num_layers (:80-83), but megatron-core's default
# recompute_modules (["core_attn"]), no sequence parallelism, CP 1, no dropout, no FP8 (no `fp8` copied), LayerNorm,
# GELU (tanh) without bias fusion, full multi-head attention (num_query_groups = heads). Its layers are megatron-core's
# TE ViT layers (vit_layer_specs.get_vit_layer_with_transformer_engine_spec: LayerNorm fused into QKV and fc1) run
# through Bridge's Qwen3VLVisionTransformerBlock, whose full recompute checkpoints chunks of recompute_num_layers
# layers (uniform) or the first recompute_num_layers layers one by one (block) (transformer_block.py:184-227).


def vision_shape(v: FrozenLM, m: ModelShape, t: Training, padded: int | None = None) -> ModelShape:
    """The tower as a GPT-like layer stack: its patches of one micro-batch (every token of the micro-batch a
    vision token, at most: vision_tokens; `padded`: the vision CUDA graphs' length, exactly) as one sequence (the
    tower runs all images of a micro-batch as one packed sequence, batch 1: vision_model.py forward)."""
    patches = padded or int(vision_tokens(m, t)) * v.spatial_merge_size ** 2
    return ModelShape(num_layers=v.depth, hidden_size=v.hidden_size, ffn_hidden_size=v.intermediate_size,
                      num_attention_heads=v.num_heads, num_query_groups=v.num_heads,
                      kv_channels=v.hidden_size // v.num_heads, vocab_size=1, seq_length=patches,
                      add_bias_linear=True, add_qkv_bias=True, hidden_dropout=0.0)




def graph_parts(v: FrozenLM, p: Parallelism, padded: int, held: float, layer_saved: float,
                bound: str | None) -> list[tuple[str, float]]:
    """What a trained tower's vision CUDA graphs keep on one rank of the first stage beyond what eager execution
    keeps (the module docstring, "Vision CUDA graphs"): (name, bytes) parts. `padded`: the graphs' patch length P;
    `held`: micro-batches in flight on the stage (the distinct sample inputs kept per layer); `layer_saved`: one
    layer's saved tensors at P (activations.trained_tower_activations); `bound`: "lower" or "upper" for the
    backward's unread transients (TrainedVLM.graph_bound)."""
    h, depth = v.hidden_size, v.depth
    row = 2.0 * padded * h  # one [P, 1, h] bf16 tensor
    weight_grads = 2.0 * sum(_layer_params(v).per_rank(p))
    backward = 2 * (weight_grads + row)  # two layers' static grad inputs: the input's and the weights' gradients
    if bound == "upper":
        backward += 2 * layer_saved  # a gradient of every saved tensor at once, in fp32
    return [
        ("vision CUDA graphs: static outputs (one [P, h] per layer and micro-batch in flight)", depth * held * row),
        ("vision CUDA graphs: static attention masks and grad output", depth * held * padded ** 2 + row),
        (f"vision CUDA graphs: pool reserve for one layer's backward ({'at most' if bound == 'upper' else 'at least'})",
         backward),
    ]


def capture_inputs(v: FrozenLM, padded: int, captured: float) -> float:
    """Bytes of the sample inputs megatron-core's VisionTECudaGraphHelper allocates before the capture for each of
    `captured` micro-batches (get_num_microbatches() with a pipeline, 1 without: cuda_graphs.py:2519-2526) and each
    ViT layer: hidden states [P, 1, h] bf16 and the bool mask [1, 1, P, P] (cuda_graphs.py:3190-3213); Transformer
    Engine frees those it reuses only inside make_graphed_callables (graph.py:255-322)."""
    return captured * v.depth * (2.0 * padded * v.hidden_size + padded ** 2)
