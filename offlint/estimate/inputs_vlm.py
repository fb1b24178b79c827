"""Inputs of Bridge's Qwen3-VL and Qwen3.5-VL models: a frozen language model, a VLM whose language model trains, the
tower's sizes and vision CUDA graphs, and the schedules offlint can size for them (docs/estimate.md, "Frozen
language model", "Vision CUDA graphs").
"""

from __future__ import annotations

from offlint.sources import bridge_vlm_step
from offlint.types import Unknown
from offlint.estimate.reader import Reader, positive_int
from offlint.estimate.shapes import FrozenLM, LowPrecision, ModelShape, Parallelism, TrainedVLM, Training

# A vision tower offlint models under a frozen language model: Bridge's Qwen3VLVisionModel (models/qwen_vl/
# modelling_qwen3_vl/vision_model.py at 067f987), which Qwen3VLModelProvider and Qwen3VLMoEModelProvider build.
_FROZEN_LM_TOWERS = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")  # Qwen3.5's: gated delta net, below
_VISION_SIZES = ("depth", "hidden_size", "intermediate_size", "num_heads", "in_channels", "patch_size",
                 "temporal_patch_size", "spatial_merge_size", "num_position_embeddings", "out_hidden_size")


def read_frozen_lm(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
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
        return None, ""  # a VLM from offlint's table whose language model trains: read_trained_vlm
    flags = _freeze_flags(r, "what a frozen language model's recipe trains depends on it")
    if flags is None:
        return None, ""
    if flags["freeze_vision_model"].value is not True or flags["freeze_vision_projection"].value is not False:
        return None, ("a frozen language model without exactly the vision projection trained (only "
                      "freeze_vision_model=True with freeze_vision_projection=False is modelled)")
    if not isinstance(config, dict) and (not m.hidden_size or not m.num_layers):
        return None, ""  # a model offlint cannot size at all: "unknown model size" says enough
    if not isinstance(config, dict) or config.get("model_type") not in _FROZEN_LM_TOWERS or not all(
            positive_int(config.get(k)) for k in _VISION_SIZES) or not isinstance(
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


def read_trained_vlm(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                      fsdp: str | None) -> tuple[TrainedVLM | None, str]:
    """(the tower of a VLM recipe whose language model trains, or None; why there is no verdict, or ""). Bridge's
    Qwen3VLModel.freeze (model.py:513-546) with freeze_language_model False: the language model trains as a text
    model does; freeze_vision_model False trains the tower, True freezes it (as frozen_lm.py models it); the patch
    mergers train unless freeze_vision_projection."""
    value = r.lookup("model.freeze_language_model")
    if value.is_unknown or (value.state == "known" and value.value not in (None, False, 0)):
        return None, ""  # read_frozen_lm
    tower = r.lookup("model.vision_config")
    config = tower.value if tower.state == "known" else None
    if not isinstance(config, dict) or (not m.hidden_size or not m.num_layers):
        return None, ""  # not a VLM from offlint's table, or a model offlint cannot size at all
    flags = _freeze_flags(r, "what a VLM recipe trains depends on it")
    if flags is None:
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
            positive_int(config.get(k)) for k in _VISION_SIZES) or not isinstance(deepstack, (list, tuple)):
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


def _read_vision_graphs(r: Reader, p: Parallelism, t: Training, v: FrozenLM, tower_frozen: bool,
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
    if not positive_int(length):
        return None, f"{what} with max_vision_cuda_graph_seq_length={length!r} (offlint reads a positive int)"
    return int(length), ""


def _freeze_flags(r: Reader, needed_for: str) -> dict | None:
    """freeze_vision_model and freeze_vision_projection as the recipe leaves them (Values), or None when one is
    unknown: then recorded as unknown, saying what it is `needed_for`."""
    flags = {key: r.lookup(f"model.{key}") for key in ("freeze_vision_model", "freeze_vision_projection")}
    for flag in flags.values():
        if flag.is_unknown:
            reason = flag.value.reason if isinstance(flag.value, Unknown) else "unknown"
            r.unknown[flag.key] = f"{reason} ({needed_for})"
            return None
    return flags


def _vlm_schedule_refusal(r: Reader, p: Parallelism, what: str, unmodelled: dict[str, object]) -> str | None:
    """Why a Qwen3-VL/Qwen3.5-VL model (`what`: "a frozen language model", ...) has no schedule offlint sizes, ""
    when it has, None when a setting that decides it is unknown. EP overlap selects megatron-core's combined 1F1B
    schedule, which asks the model for build_schedule_plan (combined_1f1b.py:381-383), and Bridge's Qwen3VLModel
    does not define it, whatever is frozen (see read_frozen_lm); frozen_lm.first_chunk_in_flight follows the
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


def read_micro_batch_tokens(r: Reader, m: ModelShape, p: Parallelism, t: Training) -> int | None:
    """The fewest tokens a Qwen3-VL or Qwen3.5-VL micro-batch may hold where the data decides (None: every
    micro-batch holds seq_length). Bridge's Qwen3-VL step pads to seq_length only where the condition the tree's
    own step passes holds (sources/bridge_vlm_step.py; Bridge 067f987: PP or EP above 1), or the dataset pads
    (`pad_to_max_length=True`); else to the batch's longest sample, rounded up to a multiple of TP (x 2 CP with
    CP), and of 16 where the step passes use_fp8_padding (`_pad_and_pack_qwen3_vl_step`): TP (x 2 CP) tokens is the
    least it gives. A condition offlint cannot read leaves it open as well; inputs without the reading (no such
    key) keep seq_length."""
    if t.vlm is None and t.frozen_lm is None:
        return None
    padded = r.lookup("dataset.pad_to_max_length")
    if padded.state == "known" and padded.value is True:
        return None
    condition = r.lookup(bridge_vlm_step.KEY)
    if condition.state == "known":
        sizes = {"tp": p.tp, "pp": p.pp, "ep": p.ep, "cp": p.cp}
        if bridge_vlm_step.ALWAYS in condition.value or any(sizes.get(g, 1) > 1 for g in condition.value):
            return None
    elif not condition.is_unknown:
        return None  # (not read: inputs made without a reader of the tree's step)
    fewest = p.tp * 2 * p.cp if p.cp > 1 else p.tp
    return min(fewest, m.seq_length) if m.seq_length else None
