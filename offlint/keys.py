"""The canonical key registry: the one place that knows what a key is.

A key is a dotted name in Megatron Bridge's layout (`model.cpu_offloading`, `optimizer.optimizer_offload_fraction`,
`ddp.use_distributed_optimizer`, `env.NVTE_CPU_OFFLOAD_V1`). For each key the rules use, this module knows its
type, its megatron-core dataclass default per version, the version that introduced it, and its Megatron-LM flag.
The complete field lists of each megatron-core version (for unknown-key detection) come from
`offlint/data/mcore-*.json`, which `scripts/dump_mcore_fields.py` generates from the real package.
"""

from __future__ import annotations

import bisect
import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from offlint.versions import NEWEST_KNOWN, Version, parse_version

SECTIONS = ("model", "optimizer", "ddp", "env")
# Bridge ConfigContainer sections offlint does not model; keys in them are accepted as they are.
OTHER_BRIDGE_SECTIONS = (
    "train", "checkpoint", "logger", "dataset", "tokenizer", "scheduler", "rng", "mixed_precision",
    "comm_overlap", "profiling", "ft", "straggler", "nvrx_straggler", "peft", "dist", "rerun_state_machine",
    "inprocess_restart", "validation", "mtp", "distill", "env_vars", "tensor_inspect",
)

CONTAINER_SECTIONS = frozenset(("model", "optimizer", "ddp", *OTHER_BRIDGE_SECTIONS))
# ConfigContainer's names no other program's config is known to use: one of them set makes a set of keys Bridge's
_ONLY_BRIDGES = ("comm_overlap", "env_vars", "mixed_precision")


def bridge_shaped(top_levels: list[list[str]], assigned: list[str]) -> bool:
    """Whether keys set together (an override file's, a command's `key=value` words) are Megatron Bridge's
    ConfigContainer rather than another program's config with a `model` section of its own. `top_levels`: the
    top-level names of each document (a YAML file may hold several); `assigned`: the dotted keys set.

    Bridge's when, in every document, at least as many top-level names are ConfigContainer's sections as are not,
    and at least as many of the `model`, `optimizer` and `ddp` keys are fields of Bridge's configs (of any
    megatron-core release offlint knows, or Bridge's providers) or near-misses of them (typos, OFL003's to report) as
    are neither (a Bridge fork's own provider fields among them); where a document has exactly as many top-level
    names of its own as sections, field names must be at least as many as anything else (near-misses are no
    evidence then). A key of a name only Bridge has (an environment variable, comm_overlap, mixed_precision), or a
    top-level setting, makes them Bridge's."""
    tie = False  # as many top-level names of another program's as of ConfigContainer's sections
    for names in top_levels:
        ours = sum(name in CONTAINER_SECTIONS for name in names)
        if ours < len(names) - ours:
            return False
        tie = tie or ours == len(names) - ours
    known = other = typos = 0
    for key in assigned:
        section, _, name = key.partition(".")
        if section in CONTAINER_SECTIONS and section not in _ONLY_BRIDGES and section not in FIELD_SECTIONS:
            continue  # (their names are no evidence either way: the top level's count was)
        if not name or section not in FIELD_SECTIONS:
            return True
        if name in known_fields(section):
            known += 1
        elif closest_field(key):
            typos += 1
        else:
            other += 1
    # (at a tie near-misses are no evidence: NeMo Framework Launcher's conversion configs, `run` beside a `model`
    # of their own whose `model_parallel_size` and `vocab_file` are near-misses, gave 7 false OFL003)
    return known >= other + typos if tie else known + typos >= other


# The sections whose fields offlint's data lists: bridge_shaped counts their keys, OFL003 judges them (unknown_field,
# closest_field). comm_overlap's fields are in no data offlint ships: any counts.
FIELD_SECTIONS = ("model", "optimizer", "ddp")


@dataclass(frozen=True)
class Key:
    name: str  # canonical dotted name
    type: str  # "bool" | "int" | "float" | "str" | "list" | "dtype" | "str|list"
    default: object  # the dataclass default (Python and Bridge) when the version data does not say otherwise
    since: str = "0.0"  # first megatron-core release with the field
    flag: str = ""  # Megatron-LM argparse flag, when one maps onto this key directly


def _k(name, type_, default, since="0.0", flag=""):
    return Key(name, type_, default, since, flag)


# The keys rules.md uses. Defaults are megatron-core dataclass defaults (checked against the real package by
# the conformance tests); `since` gates fields that older releases lack.
KEYS: dict[str, Key] = {k.name: k for k in [
    # layer-level activation offloading
    _k("model.cpu_offloading", "bool", False),
    _k("model.cpu_offloading_num_layers", "int", 0, flag="--cpu-offloading-num-layers"),
    _k("model.cpu_offloading_activations", "bool", True),
    _k("model.cpu_offloading_weights", "bool", False),
    _k("model.cpu_offloading_double_buffering", "bool", False, "0.14"),
    _k("model.cpu_offloading_retain_pinned_cpu_buffers", "bool", False, "0.17", "--cpu-offloading-retain-pinned-cpu-buffers"),
    # fine-grained activation offloading
    _k("model.fine_grained_activation_offloading", "bool", False, "0.16", "--fine-grained-activation-offloading"),
    _k("model.offload_modules", "list", [], "0.16", "--offload-modules"),
    _k("model.min_offloaded_tensor_size", "int", 1048576, "0.16", "--min-offloaded-tensor-size"),
    _k("model.activation_offload_fraction", "float", 1.0, "0.19", "--activation-offload-fraction"),
    _k("model.delta_offload_bytes_across_pp_ranks", "int", 0, "0.19", "--delta-offload-bytes-across-pp-ranks"),
    _k("model.delay_offload_until_cuda_graph", "bool", False, "0.19", "--delay-offload-until-cuda-graph"),
    _k("model.fine_grained_offloading_max_inflight_offloads", "int", None, "0.18",
       "--fine-grained-offloading-max-inflight-offloads"),
    _k("model.moe_paged_stash", "bool", False, "0.18", "--moe-paged-stash"),
    _k("model.use_transformer_engine_op_fuser", "bool", False, "0.19", "--use-transformer-engine-op-fuser"),
    _k("model.transformer_impl", "str", "transformer_engine", flag="--transformer-impl"),
    # model size and parallelism
    _k("model.num_layers", "int", 0, flag="--num-layers"),
    _k("model.pipeline_model_parallel_size", "int", 1, flag="--pipeline-model-parallel-size"),
    _k("model.virtual_pipeline_model_parallel_size", "int", None),  # MLM: --num-layers-per-virtual-pipeline-stage
    _k("model.tensor_model_parallel_size", "int", 1, flag="--tensor-model-parallel-size"),
    # recompute
    _k("model.recompute_granularity", "str", None, flag="--recompute-granularity"),
    _k("model.recompute_method", "str", None, flag="--recompute-method"),
    _k("model.recompute_num_layers", "int", None, flag="--recompute-num-layers"),
    _k("model.recompute_modules", "list", None, "0.12", "--recompute-modules"),
    _k("model.moe_layer_recompute", "bool", False, "0.12", "--moe-layer-recompute"),
    # CUDA graphs
    _k("model.cuda_graph_impl", "str", "none", "0.15", "--cuda-graph-impl"),
    _k("model.enable_cuda_graph", "bool", False, flag="--enable-cuda-graph"),
    _k("model.external_cuda_graph", "bool", False, flag="--external-cuda-graph"),
    _k("model.cuda_graph_scope", "str|list", None, flag="--cuda-graph-scope"),
    _k("model.cuda_graph_modules", "str|list", None, "0.18", "--cuda-graph-modules"),
    _k("model.cuda_graph_warmup_steps", "int", 3, flag="--cuda-graph-warmup-steps"),
    # precision
    _k("model.bf16", "bool", False, flag="--bf16"),
    _k("model.fp16", "bool", False, flag="--fp16"),
    # optimizer offloading
    _k("optimizer.optimizer", "str", "adam", flag="--optimizer"),
    _k("optimizer.optimizer_cpu_offload", "bool", False, "0.12", "--optimizer-cpu-offload"),
    _k("optimizer.optimizer_offload_fraction", "float", 0.0, "0.12", "--optimizer-offload-fraction"),
    _k("optimizer.overlap_cpu_optimizer_d2h_h2d", "bool", False, "0.12", "--overlap-cpu-optimizer-d2h-h2d"),
    _k("optimizer.use_torch_optimizer_for_cpu_offload", "bool", False, "0.12",
       "--use-torch-optimizer-for-cpu-offload"),
    _k("optimizer.pin_cpu_grads", "bool", True, "0.12"),
    _k("optimizer.pin_cpu_params", "bool", True, "0.12"),
    _k("optimizer.optimizer_cuda_graph", "bool", False, "0.17", "--optimizer-cuda-graph"),
    _k("optimizer.decoupled_weight_decay", "bool", True, "0.15"),
    _k("optimizer.use_precision_aware_optimizer", "bool", False, "0.11", "--use-precision-aware-optimizer"),
    _k("optimizer.use_distributed_optimizer", "bool", False, flag="--use-distributed-optimizer"),
    _k("optimizer.exp_avg_dtype", "dtype", "torch.float32", "0.11", "--exp-avg-dtype"),
    _k("optimizer.exp_avg_sq_dtype", "dtype", "torch.float32", "0.11", "--exp-avg-sq-dtype"),
    _k("optimizer.main_params_dtype", "dtype", "torch.float32", "0.11", "--main-params-dtype"),
    _k("optimizer.main_grads_dtype", "dtype", "torch.float32", "0.11", "--main-grads-dtype"),
    _k("optimizer.store_param_remainders", "bool", True, "0.12"),
    _k("optimizer.bf16", "bool", False),
    _k("optimizer.fp16", "bool", False),
    # distributed data parallel
    _k("ddp.use_distributed_optimizer", "bool", False),
    _k("ddp.use_megatron_fsdp", "bool", False, flag="--use-megatron-fsdp"),
    _k("ddp.megatron_fsdp_version", "int", None, "0.20", "--megatron-fsdp-version"),
    _k("ddp.nccl_ub", "bool", False, flag="--use-nccl-ub"),
    # launch environment
    _k("env.NVTE_CPU_OFFLOAD_V1", "str", None),
    _k("env.PYTORCH_CUDA_ALLOC_CONF", "str", None),
    _k("env.PYTORCH_ALLOC_CONF", "str", None),  # the newer spelling torch also reads
    _k("env.PYTORCH_HIP_ALLOC_CONF", "str", None),  # what torch's ROCm builds read where the CUDA name is unset
    _k("env.NCCL_GRAPH_REGISTER", "str", None),  # "0" is expandable_segments' partner under CUDA graphs
    # Bridge's top-level mixed precision recipe name ("bf16_mixed", ...)
    _k("mixed_precision", "str", None),
    # gc.collect() before the first step (Bridge's TrainingConfig, Megatron-LM's --manual-gc): not a megatron-core
    # field, so no dataclass default; Megatron-LM's argparse default (off) applies to its launches
    _k("train.manual_gc", "bool", None, flag="--manual-gc"),
    # Bridge builds its process groups itself (HyperCommGrid), not with megatron-core's initialize_model_parallel
    # (DistributedInitConfig; conditions/layout.virtual_stages_without_pipeline)
    _k("dist.use_decentralized_pg", "bool", False),
]}

# Allowed-value sets that megatron-core checks in __post_init__, by the release that introduced each value.
OFFLOAD_MODULES = {
    "core_attn": "0.16", "attn_proj": "0.16", "expert_fc1": "0.16", "moe_act": "0.16", "attn_norm": "0.16",
    "mlp_norm": "0.16", "qkv_linear": "0.16", "fused_group_mlp": "0.19",
    # Unreleased on main, which already calls itself 0.20.0: allowed from 0.20 so that no valid config is flagged.
    "gdp_qkv": "0.20",
}


def allowed(table: dict[str, str], version: Version) -> set[str]:
    return {name for name, since in table.items() if version >= parse_version(since)}


def key_info(name: str) -> Key | None:
    return KEYS.get(name)


@lru_cache(maxsize=1 << 16)  # asked once per assignment and rule
def key_type(name: str, version: Version) -> str:
    """A key's value type: the registry's, else derived from the real dataclass annotation ('' if unknown)."""
    info = KEYS.get(name)
    if info is not None:
        return info.type
    section, _, field_name = name.partition(".")
    data = version_data(version)
    entry = (data or {}).get("sections", {}).get(section, {}).get(field_name)
    if not entry:
        return ""
    annotation = str(entry.get("type", "")).lower()
    if "list" in annotation and "str" in annotation.replace("list[str]", "").replace("list[typing.str]", ""):
        return "str|list"  # Union[str, List[...]]: a string is accepted as it is
    for marker, kind in (("list", "list"), ("bool", "bool"), ("float", "float"), ("int", "int"), ("str", "str")):
        if marker in annotation:
            return kind
    return ""


def key_exists(name: str, version: Version) -> bool:
    """Whether megatron-core `version` has this field (keys outside the registry count as existing)."""
    info = KEYS.get(name)
    return info is None or version >= parse_version(info.since)


def default_for(name: str, version: Version) -> object:
    """The dataclass default of a key at `version`, preferring the generated data of the real package."""
    section, _, field = name.partition(".")
    data = version_data(version)
    if data is not None and section in data["sections"] and field in data["sections"][section]:
        entry = data["sections"][section][field]
        default = entry.get("default")
        if not isinstance(default, dict):
            return default
    info = KEYS.get(name)
    return info.default if info else None


NO_COMMON_DEFAULT = object()


@lru_cache(maxsize=None)
def default_in_every_version(name: str) -> object:
    """The dataclass default of a key when every known megatron-core release that has the field agrees on it,
    else NO_COMMON_DEFAULT: what code reading the field of a default-built config sees whatever the version
    (the Python reader decides `if cfg.model.x:` with it, before the version is known)."""
    section, _, field = name.partition(".")
    found = []
    for data in _data_files().values():
        entry = data["sections"].get(section, {}).get(field)
        if entry is not None:
            found.append(entry.get("default"))
    if not found and name in KEYS:
        found.append(KEYS[name].default)
    if not found or isinstance(found[0], dict) or any(d != found[0] or type(d) is not type(found[0]) for d in found):
        return NO_COMMON_DEFAULT
    return found[0]


@lru_cache(maxsize=None)
def field_in_every_version(name: str) -> bool | None:
    """Whether every known megatron-core release has the field (True), none has it (False), or some (None)."""
    section, _, field = name.partition(".")
    has = [field in data["sections"].get(section, {}) for data in _data_files().values()]
    return None if not has or len(set(has)) > 1 else has[0]


@lru_cache(maxsize=None)
def _data_files() -> dict[Version, dict]:
    out: dict[Version, dict] = {}
    try:
        folder = resources.files("offlint") / "data"
        entries = list(folder.iterdir())
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        return out
    for entry in entries:
        if entry.name.startswith("mcore-") and entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            out[parse_version(str(data["version"]))] = data
    return out


def bracketing_data(version: Version) -> list[dict]:
    """The generated data a claim about `version` must hold for: its own release's, or for a version between two
    releases with data (0.18 between 0.16.1 and 0.19.1) both of theirs, since either may be what it does; none for
    a version newer than every release with data (what it added is not known), the oldest's for an older one (as
    version_data)."""
    files = _data_files()
    older, newer = [v for v in files if v <= version], [v for v in files if v > version]
    if not newer and (not older or max(older) != version):
        return []
    exact = bool(older) and max(older) == version
    picked = ([max(older)] if older else []) + ([min(newer)] if not exact else [])
    return [files[v] for v in picked]


def names_known_from(version: Version, field: str) -> set[str] | None:
    """The names a generated list holds for `version` or any release after it (names_known, widened): None when one
    of them has no such list."""
    lists = [names_known(version, field)] + [data.get(field) for v, data in _data_files().items() if v > version]
    return set().union(*lists) if all(lists) else None


def newest_known() -> Version:
    """The newest release offlint has rules for."""
    return parse_version(NEWEST_KNOWN)


def names_known(version: Version, field: str) -> set[str] | None:
    """The names a generated list (`field` of offlint/data, e.g. "cuda_graph_names") holds for any release
    `version` may behave as (bracketing_data); None when one of them has no such list or none applies, so that no
    name is claimed unknown."""
    lists = [data.get(field) for data in bracketing_data(version)]
    return set().union(*lists) if lists and all(lists) else None


@lru_cache(maxsize=None)
def version_data(version: Version) -> dict | None:
    """The generated field data of the newest known release not newer than `version` (or the oldest)."""
    files = _data_files()
    if not files:
        return None
    older = [v for v in files if v <= version]
    return files[max(older)] if older else files[min(files)]


@lru_cache(maxsize=None)
def mlm_flag_dests(version: Version) -> dict[str, str]:
    """flag -> dest of the real Megatron-LM parser of the release `version_data` gives (`--no-x` flags included)."""
    return {option: flag.get("dest") for flag in (version_data(version) or {}).get("mlm_flags") or ()
            for option in flag.get("option_strings") or ()}


@lru_cache(maxsize=None)
def known_mlm_flags() -> frozenset[str]:
    """Every option string of Megatron-LM's parser in any release offlint has data for."""
    return frozenset(option for data in _data_files().values() for flag in data.get("mlm_flags") or ()
                     for option in flag.get("option_strings") or ())


@lru_cache(maxsize=None)
def release_fields(section: str) -> frozenset[str]:
    """Every field name of a section across all known megatron-core versions, plus the registry's and the Bridge
    provider fields listed here: the fields a misspelt key is said to be meant for (closest_field)."""
    names = {k.split(".", 1)[1] for k in KEYS if k.startswith(section + ".")}
    for data in _data_files().values():
        names.update(data["sections"].get(section, {}))
    names.update(BRIDGE_PROVIDER_FIELDS.get(section, ()))
    return frozenset(names)


@lru_cache(maxsize=None)
def known_fields(section: str) -> frozenset[str]:
    """release_fields, plus every field Megatron Bridge's own config dataclasses add (_bridge_fields): the names
    that are no typo. Not suggested for one: 376 provider fields, many of them short and alike (`kd_config`), would
    turn another program's keys (`fsdp_config`) into near misses."""
    return release_fields(section) | frozenset(_bridge_fields().get(section, ()))


@lru_cache(maxsize=None)
def _bridge_fields() -> dict[str, list[str]]:
    """The fields Megatron Bridge's own config dataclasses add, by section (data/bridge-provider-fields.json,
    scripts/dump_bridge_provider_fields.py): a recipe repository that imports Bridge writes them without the tree
    holding their classes. {} where the file is missing."""
    try:
        entry = resources.files("offlint") / "data" / "bridge-provider-fields.json"
        return json.loads(entry.read_text(encoding="utf-8"))["sections"]
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        return {}


def unknown_field(key: str) -> bool:
    """Whether `key` names a field of model, optimizer or ddp (one level down) that no section of any known
    megatron-core release or Bridge provider has: what OFL003 judges (conditions/settings.is_known_key)."""
    section, _, field_name = key.partition(".")
    return section in FIELD_SECTIONS and bool(field_name) and "." not in field_name \
        and field_name not in known_fields(section)


# Fields Megatron Bridge adds on top of megatron-core's dataclasses (GPTModelProvider, ConfigContainer's
# OptimizerConfig and DDP config). Not exhaustive: unknown-key detection only reports near-misses of known keys.
# Where a unit does not say: Bridge's GPTModelProvider (share_embeddings_and_output_weights=True) and Megatron-LM
# (without --untie-embeddings-and-output-weights) tie the output layer to the embedding; megatron-core's GPTModel
# constructor does not. The memory model and the replay both read this.
TIED_EMBEDDINGS_DEFAULT = True

BRIDGE_PROVIDER_FIELDS = {
    "model": (
        "seq_length", "vocab_size", "make_vocab_size_divisible_by", "share_embeddings_and_output_weights",
        "position_embedding_type", "rotary_base", "rotary_percent", "fp16_lm_cross_entropy",
        "parallel_output", "hf_model_id", "generation_config", "transformer_layer_spec", "use_te_rng_tracker",
        "should_pad_vocab", "seq_len_interpolation_factor", "scatter_embedding_sequence_parallel",
        "pipeline_model_parallel_layout", "hybrid_layer_pattern", "restore_modelopt_state",
    ),
}


@lru_cache(maxsize=4096)
def closest_field(key: str) -> str:
    """The known field closest to a key no section has (a typo's), as `section.field`; "" when none is close
    (difflib, cutoff 0.8). Once per key in a process: a tree writes the same unknown key in many places (Megatron
    Bridge's `model.hf_id` 23 times), each a different assignment to OFL003, and difflib takes 0.5 ms a key."""
    section, _, field_name = key.partition(".")
    if section not in FIELD_SECTIONS:
        return ""
    close = difflib.get_close_matches(field_name, could_be_close(section, field_name), n=1, cutoff=0.8)
    return f"{section}.{close[0]}" if close else ""


def could_be_close(section: str, name: str) -> list[str]:
    """The fields of `section` whose similarity ratio to `name` (difflib's 2*M/T, M the matching characters) can
    reach 0.8: the shorter is at least 2/3 of the longer, and M is at most the shorter length and at most the
    number of the field's characters that occur in `name` (one `translate` deletes those from all fields at
    once). The same answer as trying every field, in a tenth of the time: a 2 MiB file of 100,000 misspelt keys
    asks 100,000 times."""
    fields, lengths, starts, joined = _fields_by_length(section)
    size = len(name)
    first = bisect.bisect_left(lengths, -(-2 * size // 3))
    last = bisect.bisect_right(lengths, size * 3 // 2)
    if first >= last:
        return []
    rests = joined[starts[first]:starts[last] - 1].translate(str.maketrans(dict.fromkeys(name))).split("\n")
    return [field for field, length, rest in zip(fields[first:last], lengths[first:last], rests)
            if min(size, length - len(rest)) >= 0.4 * (size + length)]


@lru_cache(maxsize=None)
def _fields_by_length(section: str) -> tuple[list[str], list[int], list[int], str]:
    """The section's fields ordered by length, their lengths, where each starts in the newline-joined text, and
    that text."""
    fields = sorted(release_fields(section), key=lambda name: (len(name), name))
    starts = [0]
    for name in fields:
        starts.append(starts[-1] + len(name) + 1)
    return fields, [len(name) for name in fields], starts, "\n".join(fields)
