"""CUDA graphs beside recompute and offloading: full recompute with per-layer graphs (OFL225), selective recompute
with graphed modules (OFL226), fine-grained activation offloading under graphs (OFL121), and the local graphs the
tree's Megatron Bridge refuses (OFL223)."""

from __future__ import annotations

from offlint.conditions.module_names import graph_modules, graph_names
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope
from offlint.conditions.values import as_list, is_whole
from offlint.sources.bridge_checks import LOCAL_GRAPH_CHECK
from offlint.types import Defaults
from offlint.versions import parse_version


_FULL_RECOMPUTE_GRAPHS = "full recompute is only supported with full iteration CUDA graph."


@needs_scope
def graph_full_recompute_refusal(scope: Scope) -> object:
    """OFL225: why megatron-core refuses a recompute granularity other than selective beside CUDA graphs that are
    not one full-iteration graph ("" when it does not, UNKNOWN when offlint cannot tell). TransformerConfig's
    graph block (`if self.cuda_graph_impl != "none":`) asserts it after the deprecated switches became an
    implementation (enable_cuda_graph: local, external_cuda_graph: transformer_engine): before 0.18 unless
    `cuda_graph_scope == [full_iteration]`; from 0.18 unless the implementation is "full_iteration", which a
    "full_iteration" module name (the deprecated spelling) turns it into (cuda_graph_config.py)."""
    granularity = scope.key("model.recompute_granularity")
    if granularity is not UNKNOWN and granularity != "full":
        return ""  # (selective has checks of its own, OFL226; another string is refused first, as RC-1: OFL001's)
    impl = _graph_impl(scope)
    if impl == "none":  # (no graphs, whatever the granularity; from 0.18 a full_iteration module name makes the
        return ""       # full-iteration implementation, which allows it)
    if UNKNOWN in (impl, granularity):
        return UNKNOWN
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules")
                          if scope.version >= parse_version("0.18") else None)
    if scope.version < parse_version("0.18"):
        if names is UNKNOWN:
            return UNKNOWN
        if names == ["full_iteration"]:
            return ""
        where = f"cuda_graph_scope={names!r}" if names else "no full_iteration cuda_graph_scope"
    else:
        if names is UNKNOWN:
            if impl != "transformer_engine":
                return UNKNOWN
            # Transformer Engine graphs are refused whatever the modules are: a full_iteration name, the one that
            # would allow full recompute, is refused beside them first (cuda_graph_config.py; a recall study's YAML)
            where = "cuda_graph_impl='transformer_engine', whatever the graphed modules are"
        elif impl == "full_iteration" or (impl == "local" and "full_iteration" in names):
            return ""
        elif "full_iteration" in names:
            return UNKNOWN  # (Transformer Engine graphs named full_iteration: refused, in other words, first)
        else:
            where = f"cuda_graph_impl={impl!r}"
    return (f"recompute_granularity={granularity!r} with per-layer CUDA graphs ({where}): megatron-core's "
            f"TransformerConfig asserts \"{_FULL_RECOMPUTE_GRAPHS}\" when it builds the config")


def _graph_impl(scope: Scope) -> object:
    """The CUDA-graph implementation TransformerConfig's graph block checks under: `cuda_graph_impl`, or the
    deprecated switch that becomes one (enable_cuda_graph: "local", external_cuda_graph: "transformer_engine",
    CG-3); "none", or UNKNOWN. A switch that is on decides an implementation offlint cannot read: beside any
    implementation but "none" TransformerConfig refuses the switch first (CG-1), so the graph block only ever
    checks the switch's (a recall seed: an override file turning external_cuda_graph on over an unseen recipe)."""
    impl = scope.key("model.cuda_graph_impl")
    if impl is not UNKNOWN and impl not in (None, "none"):
        return impl
    legacy = [scope.key("model.enable_cuda_graph"), scope.key("model.external_cuda_graph")]
    if True in legacy:
        return "local" if legacy[0] is True else "transformer_engine"
    if impl is UNKNOWN or UNKNOWN in legacy:
        return UNKNOWN
    return "none"


# TransformerConfig's messages, in the order it checks them (every release from 0.16.1; the MoE router one ends
# where its author's string does: the text after it is a separate statement, not part of the message).
_GRAPHED_MOE_ROUTER = "moe recompute is not supported with moe_router CUDA graph with: "


_GRAPHED_ATTENTION = "attention dropout is not supported with graphed attention recomputation."


_GRAPHED_MLP = "hidden dropout is not supported with graphed MLP/MoE recomputation."


_GRAPHED_JITTER = "moe_input_jitter_eps is not supported with graphed moe recomputation."


def _set_dropout(scope: Scope, key: str) -> object:
    """A dropout TransformerConfig's graph block compares with 0: its value where the unit sets it, or where the
    model config is megatron-core's own (a Megatron-LM launch, whose flag defaults to 0.1, or a plain
    TransformerConfig: its default, 0.1); None
    for a Bridge model the unit leaves it unset on, whose provider class's default offlint does not read (most
    providers set 0.0; megatron-core's 0.1 would be a guess)."""
    own = scope.names.get("framework") == "megatron-core" or scope.names.get("defaults") == Defaults.MLM_CLI.value
    if scope.lookup(key).assignment is None and not own:
        return None
    return scope.key(key)


@needs_scope
def graph_selective_recompute_refusal(scope: Scope) -> object:
    """OFL226: why megatron-core refuses selective recompute beside CUDA graphs ("" when it does not, UNKNOWN when
    offlint cannot tell). Inside its graph block TransformerConfig asserts that a recomputed module is not covered
    by a graph it cannot replay: Transformer Engine graphs of the MoE router with "moe" recomputed; and, where the
    graph covers the module (the whole layer: a full-iteration graph, or per-layer graphs naming no module; else
    the module's own graph), recomputed attention with attention dropout, a recomputed MLP or MoE with hidden
    dropout, and a recomputed MoE with input jitter. Before 0.18 the whole layer is an empty `cuda_graph_scope` or
    one holding full_iteration; from 0.18 the "full_iteration" implementation or empty `cuda_graph_modules` (the
    deprecated module name "full_iteration" selects that implementation)."""
    granularity = scope.key("model.recompute_granularity")
    if granularity is not UNKNOWN and granularity != "selective":
        return ""
    impl = _graph_impl(scope)
    if impl == "none" and scope.version < parse_version("0.18"):
        return ""
    modern = scope.version >= parse_version("0.18")
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules")
                          if modern else None)
    recomputed = scope.key("model.recompute_modules")
    if UNKNOWN in (granularity, impl, names, recomputed):
        return UNKNOWN
    if modern:
        impl, names = _migrated(impl, names)
    if impl == "none":
        return ""
    # (unset, TransformerConfig.__post_init__ makes it ["core_attn"] before its graph block, in every release)
    recomputed = as_list(recomputed) if recomputed is not None else ["core_attn"]
    whole = impl == "full_iteration" or not names if modern else not names or "full_iteration" in names
    field = "cuda_graph_modules" if modern else "cuda_graph_scope"
    where = f"cuda_graph_impl={impl!r}, " + (f"{field}={names!r}" if names else "graphing whole layers")
    open_check = False
    experts = scope.key("model.num_moe_experts")
    if "moe_router" in names and not (is_whole(experts) and experts > 1):
        return ""  # (a dense model, or one offlint cannot size: "moe cuda graph is only supported for MoE." first)
    if impl == "transformer_engine" and "moe" in recomputed and "moe_router" in names:
        return _selective_refusal("'moe' recomputed", where, _GRAPHED_MOE_ROUTER + "--cuda-graph-impl "
                                  "transformer_engine.")  # (as the assert prints it, its second string dropped)
    for dropout, module, graph, message in (("model.attention_dropout", "core_attn", "attn", _GRAPHED_ATTENTION),
                                            ("model.hidden_dropout", "mlp", "mlp", _GRAPHED_MLP),
                                            ("model.hidden_dropout", "moe", "moe", _GRAPHED_MLP),
                                            ("model.moe_input_jitter_eps", "moe", "moe", _GRAPHED_JITTER)):
        if module not in recomputed or not (whole or graph in names):
            continue
        value = _set_dropout(scope, dropout) if dropout != "model.moe_input_jitter_eps" else scope.key(dropout)
        if value is UNKNOWN:
            open_check = True
        elif value is not None and (dropout == "model.moe_input_jitter_eps" or value != 0):
            return _selective_refusal(f"{module!r} recomputed with {dropout.split('.')[1]}={value!r}", where,
                                      message)
    return UNKNOWN if open_check else ""


def _migrated(impl: str, names: list[str]) -> tuple[str, list[str]]:
    """From 0.18, the implementation and graphed modules after the deprecated module name "full_iteration" selected
    the full-iteration implementation (cuda_graph_config.py; TC-CG-migrate)."""
    if impl in ("none", "local") and "full_iteration" in names:
        return "full_iteration", [n for n in names if n != "full_iteration"]
    return impl, names


def _selective_refusal(what: str, where: str, message: str) -> str:
    return (f"selective recompute of {what} beside CUDA graphs ({where}): megatron-core's TransformerConfig "
            f"asserts \"{message}\" when it builds the config")


# TransformerConfig's fine-grained offloading checks under CUDA graphs (graph block, 0.18 on), in its order.
_LOCAL_OFFLOADABLE = ("expert_fc1", "moe_act", "fused_group_mlp")
_LOCAL_MODULES = ("fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules "
                  "'expert_fc1', 'moe_act', and 'fused_group_mlp'. Unsupported offload_modules: {}.")
_LOCAL_WHOLE_LAYER = ("fine-grained activation offloading with cuda_graph_impl='local' is not supported with "
                      "whole-layer CUDA graph capture.")
_OFFLOAD_GRAPH_IMPL = {  # (0.18 allows no local graphs at all; 0.19 allows local graphs of part of the MoE)
    "0.18": "fine-grained activation offloading is only supported with transformer_engine CUDA graph "
            "implementation or local CUDA graph implementation with full_iteration scope.",
    "0.19": "fine-grained activation offloading is only supported with transformer_engine CUDA graph "
            "implementation or local CUDA graph implementation with partial MoE offload. Local partial CUDA graphs "
            "are supported only for expert_fc1, moe_act, or fused_group_mlp offload when the full MoE module is not "
            "captured.",
}
_OFFLOAD_GRAPHED_MOE = "Token-drop MoE is temporarily not supported with activation offloading."
# What the per-layer graphs' own checks (before the fine-grained ones) say of a graphed MoE on a dense model, and
# on a MoE that does not drop and pad tokens to a capacity
_GRAPHED_MOE_DENSE = "moe cuda graph is only supported for MoE."
_GRAPHED_MOE_DROPLESS = "moe cuda graph is only supported with drop-padding MoE."
_OFFLOAD_WARMUP = "cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading."
_OFFLOAD_INFLIGHT = ("fine_grained_offloading_max_inflight_offloads must be a non-negative integer when using "
                     "fine-grained activation offloading with full-iteration CUDA graphs")


@needs_scope
def fine_grained_graph_refusal(scope: Scope) -> object:
    """OFL121: why megatron-core refuses fine-grained activation offloading beside CUDA graphs ("" when it does not,
    UNKNOWN when offlint cannot tell). From 0.18 TransformerConfig's graph block (`if self.cuda_graph_impl !=
    "none":`, after the deprecated switches and module name became an implementation) asserts, in this order:
    from 0.19, with local graphs, that only expert_fc1, moe_act and fused_group_mlp are offloaded and that the
    graphs name modules (not whole layers); that the implementation is transformer_engine or full_iteration, or
    (from 0.19) local graphs of part of the MoE (those modules offloaded, the MoE itself not graphed); that the MoE
    is not graphed; that cuda_graph_warmup_steps is above 0; and, with full-iteration graphs, that
    fine_grained_offloading_max_inflight_offloads is set to 0 or more (its default is None)."""
    on = scope.key("model.fine_grained_activation_offloading")
    if on is not UNKNOWN and not on:
        return ""
    impl = _graph_impl(scope)
    if impl == "none":
        return ""
    if impl is UNKNOWN:
        return UNKNOWN
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules"))
    if names is not UNKNOWN:
        impl, names = _migrated(impl, names)
    # (graphed modules offlint cannot read leave graphs on, and the checks that do not read them are still made;
    # a local implementation may then be a full-iteration one, named so by a module name: its own checks stay open)
    open_check = names is UNKNOWN
    partial_local = scope.version >= parse_version("0.19")
    modules = scope.key("model.offload_modules")
    offloaded = None if modules is UNKNOWN else set(as_list(modules))
    refusals = []
    if impl in ("local", "transformer_engine") and names is not UNKNOWN and "moe" in names:
        first = _graphed_moe_refusal(scope)  # (the per-layer graphs' checks come before the fine-grained ones)
        if first:
            refusals.append(first)
    if impl == "local" and partial_local and names is not UNKNOWN:
        if offloaded is None:
            open_check = True
        elif offloaded - set(_LOCAL_OFFLOADABLE):
            refusals.append(_LOCAL_MODULES.format(sorted(offloaded - set(_LOCAL_OFFLOADABLE))))
        if not names:
            refusals.append(_LOCAL_WHOLE_LAYER)
    if impl not in ("transformer_engine", "full_iteration") and names is not UNKNOWN:
        if not partial_local:
            refusals.append(_OFFLOAD_GRAPH_IMPL["0.18"])
        elif offloaded is None:
            open_check = True
        elif not (offloaded and offloaded <= set(_LOCAL_OFFLOADABLE) and "moe" not in names):
            refusals.append(_OFFLOAD_GRAPH_IMPL["0.19"])
    if names is not UNKNOWN and "moe" in names:
        refusals.append(_OFFLOAD_GRAPHED_MOE)
    warmup = scope.key("model.cuda_graph_warmup_steps")
    if warmup is UNKNOWN:
        open_check = True
    elif isinstance(warmup, (int, float)) and warmup <= 0:
        refusals.append(_OFFLOAD_WARMUP)
    if impl == "full_iteration":
        inflight = scope.key("model.fine_grained_offloading_max_inflight_offloads")
        if inflight is UNKNOWN:
            open_check = True
        elif inflight is None or (isinstance(inflight, (int, float)) and inflight < 0):
            refusals.append(_OFFLOAD_INFLIGHT)
    if not refusals:
        return UNKNOWN if open_check else ""
    if on is UNKNOWN:
        return UNKNOWN
    where = f"cuda_graph_impl={impl!r}" + ("" if names is UNKNOWN else f", cuda_graph_modules={names!r}" if names
                                           else ", graphing whole layers")
    return (f"fine-grained activation offloading beside CUDA graphs ({where}): megatron-core's TransformerConfig "
            f"asserts \"{refusals[0]}\" when it builds the config")


def _graphed_moe_refusal(scope: Scope) -> str:
    """Which assert of the per-layer graphs' checks a graphed MoE meets first, where offlint knows: on a dense model,
    and on a MoE that does not drop and pad tokens (no capacity factor, or no padding to it); "" otherwise (then
    the fine-grained check's own, CG-14, is the first)."""
    experts = scope.key("model.num_moe_experts")
    if experts is not UNKNOWN and not (is_whole(experts) and experts > 1):
        return _GRAPHED_MOE_DENSE
    capacity, pad = scope.key("model.moe_expert_capacity_factor"), scope.key("model.moe_pad_expert_input_to_capacity")
    return _GRAPHED_MOE_DROPLESS if capacity is None or pad is False else ""


@needs_scope
def bridge_local_graph_refusal(scope: Scope) -> object:
    """OFL223: why the tree's Megatron Bridge refuses a local CUDA graph in validate() ("" when it does not, or the
    tree's Bridge makes no such check: sources/bridge_checks.py): `cuda_graph_impl="local"` with neither a
    full-iteration scope (in cuda_graph_modules or cuda_graph_scope) nor, naming no module, a layer or block
    inference graph scope (utils/cuda_graph.py validate_cuda_graph_configuration, from Bridge 7e8662c66)."""
    check = scope.key(LOCAL_GRAPH_CHECK)
    if not isinstance(check, str) or not check:
        return ""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN:
        return UNKNOWN
    if impl != "local":
        return ""
    modules, graph_scope = scope.key("model.cuda_graph_modules"), scope.key("model.cuda_graph_scope")
    if UNKNOWN in (modules, graph_scope):
        return UNKNOWN
    names = graph_names(modules) + graph_names(graph_scope)
    if "full_iteration" in names:
        return ""
    layered = [n for n in dict.fromkeys(names) if n not in ("full_iteration_inference", "full")]
    if not layered:
        inference = scope.key("model.inference_cuda_graph_scope")
        if inference is UNKNOWN:
            return UNKNOWN
        if {"layer", "block"} & set(graph_names(inference)):
            return ""
    what = f"the per-layer modules {layered}" if layered else "no full-iteration scope"
    return (f"cuda_graph_impl='local' with {what}: Megatron Bridge's ConfigContainer.validate ({check}) raises "
            f"\"ValueError: Megatron Bridge supports model.cuda_graph_impl=\"local\" only for full-iteration CUDA "
            f"graphs\" before the model is built")
