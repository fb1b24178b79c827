"""CUDA graphs beside recompute: full recompute with per-layer graphs (OFL225), selective recompute with graphed
modules (OFL226), and the local graphs the tree's Megatron Bridge refuses (OFL223)."""

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
    CG-3); "none", or UNKNOWN."""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN or impl not in (None, "none"):
        return impl
    legacy = [scope.key("model.enable_cuda_graph"), scope.key("model.external_cuda_graph")]
    if True not in legacy and UNKNOWN in legacy:
        return UNKNOWN
    return "local" if legacy[0] is True else "transformer_engine" if legacy[1] is True else "none"


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
    if modern and impl in ("none", "local") and "full_iteration" in names:
        impl, names = "full_iteration", [n for n in names if n != "full_iteration"]  # (the migration, TC-CG-migrate)
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


def _selective_refusal(what: str, where: str, message: str) -> str:
    return (f"selective recompute of {what} beside CUDA graphs ({where}): megatron-core's TransformerConfig "
            f"asserts \"{message}\" when it builds the config")


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
