"""Inputs of MoE expert tensors: megatron-core's per-expert-rank capacity and paged stash, and whether Transformer
Engine fuses the grouped MLP (docs/estimate.md, "MoE expert-rank capacity and paged stash").
"""

from __future__ import annotations

from dataclasses import replace

from offlint.estimate.reader import Reader, positive_number
from offlint.estimate.shapes import ExpertBudget, LowPrecision, ModelShape, Training

def read_expert_budget(r: Reader, m: ModelShape, t: Training, low: LowPrecision | None,
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
    if not (positive_number(cuda) and isinstance(host, (int, float)) and host >= 0):
        return None, (f"moe_paged_stash buffer factors cuda={cuda!r}, cpu={host!r} (offlint models positive, "
                      f"balanced-load sizing; a negative factor sizes from the first iteration's actual tokens)")
    return replace(budget, stash=float(cuda), host=float(host)), ""


def _grouped_mlp_fuses(r: Reader, m: ModelShape, low: LowPrecision | None, fp8_transpose: bool | None) -> bool | None:
    """Whether Transformer Engine e7c550c5 fuses megatron-core's op-fuser grouped MLP into its CuTe DSL kernel
    (ops/fused/grouped_mlp.py `fuse_grouped_mlp_ops`, `is_supported`: MXFP8/NVFP4, a GLU activation,
    NVTE_CUTEDSL_FUSED_GROUPED_MLP>0, compute capability 10.x, i.e. offlint's GPUs without a per-tensor FP8
    transpose); None when only the GPU's compute capability is not known."""
    if not (low is not None and low.recipe in ("mxfp8", "nvfp4") and m.gated_linear_unit
            and positive_number(r.get("env.NVTE_CUTEDSL_FUSED_GROUPED_MLP", 0))):
        return False
    return None if fp8_transpose is None else not fp8_transpose


def read_op_fuser_moe_act(r: Reader, m: ModelShape, t: Training, low: LowPrecision | None,
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
