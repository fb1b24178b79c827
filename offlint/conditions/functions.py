"""The helper functions a rule's condition and message may call, by name: the only calls the language allows."""

from __future__ import annotations

from typing import Callable

from offlint.conditions.ep_overlap import (ep_overlap_open, ep_overlap_refusal, ep_overlap_schedule_open,
                                           ep_overlap_schedule_refusal)
from offlint.conditions.graphs import (bridge_local_graph_refusal, fine_grained_graph_refusal,
                                       graph_full_recompute_refusal, graph_selective_recompute_refusal)
from offlint.conditions.layout import (batch_division, layout_division, pipeline_layout_refusal, pipeline_split_refusal,
                                       uneven_split_refusal, virtual_stages_without_pipeline)
from offlint.conditions.memory import (at_risk_fix, at_risk_margin_gib, estimated_peak_gib, gpu_count, gpu_name,
                                       largest_memory_parts, memory_savings, model_state_pp1_gib, oom_at_risk,
                                       oom_floor_gib, oom_message, predicted_oom, usable_gib)
from offlint.conditions.module_names import (allowed_offload_modules, graph_module_refusal, graph_modules,
                                             graph_modules_written, graph_scope_names, invalid_offload_modules,
                                             paged_stash_conflicts, recompute_module_refusal)
from offlint.conditions.precision import low_precision_refusal, low_precision_refused, optimizer_dtype_refusal
from offlint.conditions.settings import (allocator_without_expandable_segments, checkout_checks, checkout_lacks,
                                         distributed_optimizer, graphs_refuse_expandable, is_default, is_known_key,
                                         is_written, malformed_expandable_segments, other_accelerator, overrides,
                                         suggestion, version_at_least, written_after, written_known)
from offlint.conditions.values import (as_list, contains, fmt, is_fp32, is_list, is_number, is_str, known, listing,
                                       lower, overlap, startswith)
from offlint.estimate.oom import expandable_segments_on
from offlint.sources.hydra import is_sweep


FUNCTIONS: dict[str, Callable] = {
    "distributed_optimizer": distributed_optimizer,
    "other_accelerator": other_accelerator,
    "graphs_refuse_expandable": graphs_refuse_expandable,
    "allocator_without_expandable_segments": allocator_without_expandable_segments,
    "malformed_expandable_segments": malformed_expandable_segments,
    "expandable_segments_on": expandable_segments_on,
    "is_sweep": is_sweep,
    "ep_overlap_schedule_refusal": ep_overlap_schedule_refusal,
    "bridge_local_graph_refusal": bridge_local_graph_refusal,
    "ep_overlap_schedule_open": ep_overlap_schedule_open,
    "ep_overlap_refusal": ep_overlap_refusal,
    "graph_full_recompute_refusal": graph_full_recompute_refusal,
    "graph_selective_recompute_refusal": graph_selective_recompute_refusal,
    "fine_grained_graph_refusal": fine_grained_graph_refusal,
    "optimizer_dtype_refusal": optimizer_dtype_refusal,
    "ep_overlap_open": ep_overlap_open,
    "version_at_least": version_at_least,
    "checkout_checks": checkout_checks,
    "checkout_lacks": checkout_lacks,
    "allowed_offload_modules": allowed_offload_modules,
    "invalid_offload_modules": invalid_offload_modules,
    "paged_stash_conflicts": paged_stash_conflicts,
    "as_list": as_list,
    "contains": contains,
    "overlap": overlap,
    "is_str": is_str,
    "is_list": is_list,
    "is_number": is_number,
    "lower": lower,
    "startswith": startswith,
    "fmt": fmt,
    "known": known,
    "is_known_key": is_known_key,
    "suggestion": suggestion,
    "graph_modules": graph_modules,
    "graph_modules_written": graph_modules_written,
    "written_known": written_known,
    "overrides": overrides,
    "graph_scope_names": graph_scope_names,
    "is_fp32": is_fp32,
    "is_default": is_default,
    "is_written": is_written,
    "written_after": written_after,
    "listing": listing,
    "len": len,
    "str": str,
    "sorted": sorted,
    "bool": bool,
    "round": round,
    "estimated_peak_gib": estimated_peak_gib,
    "model_state_pp1_gib": model_state_pp1_gib,
    "usable_gib": usable_gib,
    "gpu_name": gpu_name,
    "gpu_count": gpu_count,
    "largest_memory_parts": largest_memory_parts,
    "memory_savings": memory_savings,
    "predicted_oom": predicted_oom,
    "pipeline_split_refusal": pipeline_split_refusal,
    "uneven_split_refusal": uneven_split_refusal,
    "graph_module_refusal": graph_module_refusal,
    "pipeline_layout_refusal": pipeline_layout_refusal,
    "virtual_stages_without_pipeline": virtual_stages_without_pipeline,
    "recompute_module_refusal": recompute_module_refusal,
    "layout_division": layout_division,
    "batch_division": batch_division,
    "oom_floor_gib": oom_floor_gib,
    "oom_message": oom_message,
    "oom_at_risk": oom_at_risk,
    "at_risk_margin_gib": at_risk_margin_gib,
    "at_risk_fix": at_risk_fix,
    "low_precision_refused": low_precision_refused,
    "low_precision_refusal": low_precision_refusal,
}
