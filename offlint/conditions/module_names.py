"""Module names a setting lists: the offload modules (OFL107, and OFL106's paged-stash conflicts), CUDA graph modules
and scopes (OFL214, OFL220) and recompute modules (OFL222), against the names each megatron-core release accepts."""

from __future__ import annotations

from functools import lru_cache

from offlint import keys
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope, takes_unknown
from offlint.conditions.settings import written_known
from offlint.conditions.values import as_list
from offlint.versions import Version


@needs_scope
def allowed_offload_modules(scope: Scope) -> list[str]:
    return sorted(_offload_modules(scope.version))


@needs_scope
def invalid_offload_modules(scope: Scope, modules) -> list:
    if scope.version.lists_unknown:  # (a fork of Megatron-LM the tree pins and has not checked out)
        return []
    allowed = _offload_modules(scope.version)
    # (a name that is no string, a list in a list, is no module either: megatron-core's set() of them raises)
    return sorted({str(m) for m in as_list(modules) if not isinstance(m, str) or m not in allowed})


# The expert activations MoE paged stashing keeps itself: megatron-core (0.18 on) refuses them in offload_modules while
# moe_paged_stash is on, whether fine-grained activation offloading is on or not (FG-14)
PAGED_STASH_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")


@takes_unknown
def paged_stash_conflicts(paged_stash, modules) -> object:
    """The names in `modules` that paged stashing refuses, when `paged_stash` is on (megatron-core's own set() of
    the list: a string's characters name none): [] for a list naming none of them whatever the switch, unknown
    where the answer depends on an unknown."""
    if modules is UNKNOWN:
        return UNKNOWN
    named = sorted({m for m in as_list(modules) if isinstance(m, str) and m in PAGED_STASH_MODULES})
    if not named:
        return []
    if paged_stash is UNKNOWN:
        return UNKNOWN
    return named if paged_stash else []


def graph_names(value) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else as_list(value)
    names = [str(item).rsplit(".", 1)[-1] for item in items if str(item) != ""]  # CudaGraphModule.attn -> attn
    return [] if names == ["full"] else names


@takes_unknown
def graph_modules(scope, modules) -> object:
    """The CUDA graph module names megatron-core ends up with, before it migrates "full_iteration": the
    deprecated `cuda_graph_scope` (the only field before 0.18) replaces `cuda_graph_modules` when it names
    something; a string is split on commas; "full" alone means none (the whole layer). Modules that name
    something are the answer whatever an unknown scope is: any scope but None beside them is rejected (CG-5)."""
    named = [] if modules is UNKNOWN else graph_names(modules)
    if scope is UNKNOWN:
        return named or UNKNOWN
    return graph_names(scope) or (UNKNOWN if modules is UNKNOWN else named)


@needs_scope
def graph_modules_written(scope: Scope) -> object:
    """graph_modules() of the cuda_graph_scope and cuda_graph_modules the unit writes readably (written_known),
    a field it does not write, or writes with a value offlint cannot read, counting as unset (None)."""
    values = []
    for key in ("model.cuda_graph_scope", "model.cuda_graph_modules"):
        values.append(scope.key(key) if written_known(scope, key) is not False else None)
    return graph_modules(*values)


def _names_known(version: Version, field: str) -> frozenset[str] | None:
    """The names of a list the version allows: as the checkout's own megatron-core source allows them where offlint
    read them there (sources/mcore_source.py), else offlint's shipped data."""
    if version.lists_unknown:  # (a fork of Megatron-LM the tree pins and has not checked out)
        return None
    own = version.names_from_source(field)
    if own is not None:
        return own
    return _names_in_data_from(version, field) if version.guessed else _names_in_data(version, field)


@lru_cache(maxsize=64)
def _names_in_data_from(version: Version, field: str) -> frozenset[str] | None:
    """The names of a list any release from `version` on allows (a version only guessed: the tree may run a newer
    one); None where one of them has no such list."""
    known = keys.names_known_from(version, field)
    return None if known is None else frozenset(known)


@lru_cache(maxsize=64)
def _names_in_data(version: Version, field: str) -> frozenset[str] | None:
    """keys.names_known, once per version and list in a process: a union of the lists of the releases that bracket
    the version, in offlint's shipped data, which the graph and recompute module checks ask for on every unit."""
    known = keys.names_known(version, field)
    return None if known is None else frozenset(known)


def _offload_modules(version: Version) -> set[str]:
    own = version.names_from_source("offload_module_names")
    if own is not None:
        return set(own)
    return keys.allowed(keys.OFFLOAD_MODULES, keys.newest_known() if version.guessed else version)


@needs_scope
def graph_module_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the CUDA-graph module names the unit writes (readably, written_known) in
    cuda_graph_scope or cuda_graph_modules, in its words; "" when it knows every one. Each string becomes an enum
    member by name, and any other raises KeyError: TransformerConfig.__post_init__ (0.16.1 transformer_config.py
    :1698-1711, `CudaGraphScope[scope]`; from 0.18 `normalize_cuda_graph_modules`, `CudaGraphModule[scope]`), and
    Megatron-LM's --cuda-graph-scope / --cuda-graph-modules argparse types before that. The names a version knows
    are the generated data's (offlint/data, "cuda_graph_names": the members, "full", the migrated spellings); for
    a version between two releases with data, the names either knows (keys.bracketing_data)."""
    known = _names_known(scope.version, "cuda_graph_names")
    if known is None:
        return ""
    unknown = [(key.split(".", 1)[1], name) for key in ("model.cuda_graph_scope", "model.cuda_graph_modules")
               if written_known(scope, key) is True for name in graph_names(scope.key(key)) if name not in known]
    if not unknown:
        return ""
    field, name = unknown[0]
    spaced = (f" (one name with spaces: a command line that quotes a list passes it as one argument)"
              if " " in name.strip() else "")
    who = ("Megatron-LM's argument parser raises" if str(scope.names.get("defaults", "")) == "mlm-cli" else
           "TransformerConfig raises")
    return (f"{field} names {name!r}, which megatron-core does not know{spaced}: {who} KeyError: {name!r} at "
            f"start; the names are {', '.join(sorted(known - {'full'}))} (or 'full' alone)")


@needs_scope
def recompute_module_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the recompute_modules of a selective recompute, in its words; "" when it knows
    every one, or does not check them (another granularity: OFL213). TransformerConfig.__post_init__ asserts
    "Invalid choices for recompute_modules: {...}" for a name outside the set it allows (0.16.1
    transformer_config.py:1196-1211); it takes the set of the value, so a string gives its characters. The names
    a version allows are the generated data's (offlint/data, "recompute_module_names", asked of megatron-core);
    for a version between two releases with data, a name either allows is not claimed (keys.bracketing_data). A
    string written in a Hydra override or YAML file is OFL002's."""
    if scope.key("model.recompute_granularity") != "selective":
        return ""
    modules = scope.key("model.recompute_modules")
    found = scope.lookup("model.recompute_modules")
    if modules is UNKNOWN or not modules or found.assignment is None:
        return ""
    if isinstance(modules, str) and found.assignment.source.value in ("hydra", "yaml"):
        return ""
    known = _names_known(scope.version, "recompute_module_names")
    if known is None:
        return ""
    invalid = sorted({str(name) for name in as_list(modules)} - known)
    if not invalid:
        return ""
    spaced = ("; a comma-joined or spaced word is one name (a command line that quotes a list passes it as one "
              "argument)" if any("," in name or " " in name for name in invalid) else "")
    return (f"recompute_modules names {', '.join(repr(n) for n in invalid)}, which megatron-core does not allow under "
            f"selective recompute{spaced}: its TransformerConfig asserts \"Invalid choices for recompute_modules: "
            f"{set(invalid)}\" when it builds the config; the modules are {', '.join(sorted(known))}")


def graph_scope_names(scope) -> list[str]:
    return [str(s) for s in as_list(scope)] if not isinstance(scope, str) else [scope]
