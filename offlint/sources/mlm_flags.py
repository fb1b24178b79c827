"""Megatron-LM argparse flags (`pretrain_gpt.py --cpu-offloading-num-layers 4 ...`) as canonical assignments.

Applies the CLI's own rewrites (constraints.md): CLI-6 `--cpu-offloading-num-layers N>0` turns
`cpu_offloading` on; CLI-7 `--recompute-activations` means selective recompute; `--use-distributed-optimizer`
and `--bf16`/`--fp16` reach both the model and the optimizer config. Unset flags take argparse defaults,
which `resolve` supplies (CLI-3: the offload fraction defaults to 1.0 there).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from offlint.keys import KEYS, Key, mlm_flag_dests
from offlint.types import Unknown
from offlint.versions import Version

# Options only a Megatron-LM from before 2023-09 runs with: `--checkpoint-activations` makes validate_args exit since
# 3e71ad9c6 (2023-04-26), 3fb3e95ec6 (2023-09-05) removed `--DDP-impl` and 34ac1ad05 (2023-09-07) `--data-impl` from the
# parser. A launch passing one was
# written for a Megatron-LM older than 8af3dae (2024-08), whose validate_args clamps a layout larger than the world
# instead of asserting (conditions/layout.py; BigScience's 2021 launches, TP4 x PP8 on 16 GPUs).
BEFORE_2023_FLAGS = {"--checkpoint-activations": "validate_args exits on it since Megatron-LM 3e71ad9c6 (2023-04)",
                     "--data-impl": "Megatron-LM 34ac1ad05 (2023-09) removed it",
                     "--DDP-impl": "Megatron-LM 3fb3e95ec6 (2023-09) removed it"}

# flag -> canonical key, from the registry
FLAG_KEYS = {k.flag: k for k in KEYS.values() if k.flag}
# Flags read only to derive another key (virtual pipeline size = num_layers / PP / layers per stage).
FLAG_KEYS["--num-layers-per-virtual-pipeline-stage"] = Key("model.num_layers_per_virtual_pipeline_stage", "int", None)
# Model sizes and batch settings: not rule keys, but the memory model and replay need them from launch scripts.
for _flag, _key in (("--hidden-size", "model.hidden_size"), ("--ffn-hidden-size", "model.ffn_hidden_size"),
                    ("--num-attention-heads", "model.num_attention_heads"),
                    ("--num-query-groups", "model.num_query_groups"), ("--kv-channels", "model.kv_channels"),
                    ("--seq-length", "model.seq_length"), ("--vocab-size", "model.vocab_size"),
                    ("--num-experts", "model.num_moe_experts"), ("--moe-ffn-hidden-size", "model.moe_ffn_hidden_size"),
                    ("--moe-router-topk", "model.moe_router_topk"),
                    ("--expert-model-parallel-size", "model.expert_model_parallel_size"),
                    ("--micro-batch-size", "train.micro_batch_size"),
                    ("--global-batch-size", "train.global_batch_size")):
    FLAG_KEYS.setdefault(_flag, Key(_key, "int", None))
# How the decoder is split over pipeline stages (OFL218): flags whose dest differs from the TransformerConfig
# field they become (core_transformer_config_from_args, validate_args), and the layout and MTP depth.
for _flag, _key, _type in (("--decoder-first-pipeline-num-layers", "model.num_layers_in_first_pipeline_stage", "int"),
                           ("--decoder-last-pipeline-num-layers", "model.num_layers_in_last_pipeline_stage", "int"),
                           ("--num-virtual-stages-per-pipeline-rank", "model.virtual_pipeline_model_parallel_size",
                            "int"),
                           ("--pipeline-model-parallel-layout", "model.pipeline_model_parallel_layout", "str"),
                           ("--hybrid-layer-pattern", "model.hybrid_layer_pattern", "str"),
                           ("--hybrid-override-pattern", "model.hybrid_override_pattern", "str"),
                           ("--mtp-num-layers", "model.mtp_num_layers", "int")):
    FLAG_KEYS.setdefault(_flag, Key(_key, _type, None))
# The FP8/FP4 recipe (OFL117 and the memory model): argparse dests of the TransformerConfig fields.
for _flag, _key in (("--fp8-format", "model.fp8"), ("--fp8-recipe", "model.fp8_recipe"), ("--fp4-format", "model.fp4"),
                    ("--fp4-recipe", "model.fp4_recipe")):
    FLAG_KEYS.setdefault(_flag, Key(_key, "str", None))
# How the global batch splits into micro-batches (OFL217): the calculator the launch builds (a ramp-up or a step
# schedule is another one), whether it may round the batch down, and the evaluation batch sizes validate_args divides
# first from 0.18 (they default to the training ones).
for _flag, _key, _type in (("--rampup-batch-size", "train.rampup_batch_size", "list"),
                           ("--step-batch-size-schedule", "train.step_batch_size_schedule", "str"),
                           ("--eval-global-batch-size", "validation.eval_global_batch_size", "int"),
                           ("--eval-micro-batch-size", "validation.eval_micro_batch_size", "int")):
    FLAG_KEYS.setdefault(_flag, Key(_key, _type, None))
# MoE expert-parallel communication overlap and what megatron-core asserts beside it (OFL224, OFL219).
for _flag, _key in (("--moe-token-dispatcher-type", "model.moe_token_dispatcher_type"),
                    ("--moe-flex-dispatcher-backend", "model.moe_flex_dispatcher_backend")):
    FLAG_KEYS.setdefault(_flag, Key(_key, "str", None))
# What TransformerConfig's CUDA-graph block compares beside graphed recompute (OFL226).
for _flag, _key in (("--attention-dropout", "model.attention_dropout"), ("--hidden-dropout", "model.hidden_dropout"),
                    ("--moe-input-jitter-eps", "model.moe_input_jitter_eps")):
    FLAG_KEYS.setdefault(_flag, Key(_key, "float", None))
# store_true flags that set more than their own key, or whose name differs from the key
SWITCHES: dict[str, list[tuple[str, object]]] = {
    "--overlap-moe-expert-parallel-comm": [("model.overlap_moe_expert_parallel_comm", True)],
    "--delay-wgrad-compute": [("model.delay_wgrad_compute", True)],
    "--moe-shared-expert-overlap": [("model.moe_shared_expert_overlap", True)],
    "--enable-mhc-connections": [("model.enable_mhc_connections", True)],  # OFL120
    "--recompute-activations": [("model.recompute_granularity", "selective")],
    "--use-distributed-optimizer": [("optimizer.use_distributed_optimizer", True),
                                    ("ddp.use_distributed_optimizer", True)],
    "--bf16": [("model.bf16", True), ("optimizer.bf16", True)],
    "--fp16": [("model.fp16", True), ("optimizer.fp16", True)],
    "--decrease-batch-size-if-needed": [("train.decrease_batch_size_if_needed", True)],
    "--no-pin-cpu-grads": [("optimizer.pin_cpu_grads", False)],
    "--no-pin-cpu-params": [("optimizer.pin_cpu_params", False)],
    # core_transformer_config_from_args: fp8_param / fp4_param are the param-gather flags
    "--fp8-param-gather": [("model.fp8_param", True)],
    "--fp4-param-gather": [("model.fp4_param", True)],
    "--account-for-embedding-in-pipeline-split": [("model.account_for_embedding_in_pipeline_split", True)],
    "--account-for-loss-in-pipeline-split": [("model.account_for_loss_in_pipeline_split", True)],
    # the memory model and replay: an output layer of its own (Megatron-LM ties it to the embedding otherwise)
    "--untie-embeddings-and-output-weights": [("model.share_embeddings_and_output_weights", False)],
}
# Which attention runs (the memory model: unfused attention keeps its s x s probabilities).
FLAG_KEYS.setdefault("--attention-backend", Key("model.attention_backend", "str", None))
# The model's shape and its parallel layout, as the memory model reads them (argparse dests of TransformerConfig's
# fields; `--sequence-parallel`, which validate_args turns off where TP is 1, is a switch: launch.mlm_unit applies that)
for _flag, _key, _type in (("--context-parallel-size", "model.context_parallel_size", "int"),
                           ("--position-embedding-type", "model.position_embedding_type", "str"),
                           ("--normalization", "model.normalization", "str"),
                           ("--fp8-amax-history-len", "model.fp8_amax_history_len", "int")):
    FLAG_KEYS.setdefault(_flag, Key(_key, _type, None))
SWITCHES.update({
    "--disable-bias-linear": [("model.add_bias_linear", False)],
    # core_transformer_config_from_args: `--swiglu` is a gated MLP with SiLU (and validate_args sizes it: _swiglu_ffn)
    "--swiglu": [("model.gated_linear_unit", True)],
    "--sequence-parallel": [("model.sequence_parallel", True)],
})
LIST_TYPES = ("list", "str|list")
# key -> the flag that gives it a value (a message names a Megatron-LM launch's setting as its script writes it)
FLAG_OF_KEY = {key.name: flag for flag, key in FLAG_KEYS.items()}


@dataclass(frozen=True)
class FlagValue:
    key: str
    value: object
    flag_index: int  # index of the flag token in the argument list (for positions)
    text: str


def is_mlm_flag(token: str) -> bool:
    name = token.split("=", 1)[0]
    return name in FLAG_KEYS or name in SWITCHES


_OFFLOADED_COUNT_UNKNOWN = ("on where --cpu-offloading-num-layers is above 0 (Megatron-LM's validate_args), and the "
                            "count the command gives is not known")


def read_flags(tokens: list[str | None], opaque: list[int] | None = None) -> tuple[list[FlagValue], list[str]]:
    """Read flags from argument tokens (None = unresolvable word). Returns values and problems. `opaque` gets the
    index of each unresolvable word that is no flag's value: it may hold any flags (`${EXTRA_ARGS}`)."""
    out: list[FlagValue] = []
    problems: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token is None or not token.startswith("--"):
            if token is None and opaque is not None:
                opaque.append(i)
            i += 1
            continue
        name, eq, inline = token.partition("=")
        if name in SWITCHES:
            out.extend(FlagValue(k, v, i, name) for k, v in SWITCHES[name])
            i += 1
            continue
        info = FLAG_KEYS.get(name)
        if info is None:
            i += 1 if eq or i + 1 >= len(tokens) or _is_flag(tokens[i + 1]) else 2
            continue
        if info.type == "bool":
            out.append(FlagValue(info.name, True, i, name))
            i += 1
            continue
        if info.type in LIST_TYPES:
            values = [inline] if eq else []
            j = i + 1
            while not eq and j < len(tokens) and not _is_flag(tokens[j]):
                values.append(tokens[j])
                j += 1
            value = None if any(v is None for v in values) else values
            out.append(FlagValue(info.name, value, i, " ".join(str(v) for v in values)))
            i = j if not eq else i + 1
            continue
        raw = inline if eq else (tokens[i + 1] if i + 1 < len(tokens) else None)
        at = i
        i += 1 if eq else 2
        if raw is None:  # an unresolvable value, or none: the last word (after a variable that expanded to nothing)
            out.append(FlagValue(info.name, None, at, ""))
            if name == "--cpu-offloading-num-layers":  # (validate_args turns the switch on for a count above 0)
                out.append(FlagValue("model.cpu_offloading", Unknown(_OFFLOADED_COUNT_UNKNOWN), at, name))
            continue
        try:
            value = _convert(raw, info.type)
        except ValueError:
            problems.append(f"{name} expects {info.type}, got {raw!r} (argparse will refuse it)")
            continue
        out.append(FlagValue(info.name, value, at, raw))
        if name == "--cpu-offloading-num-layers" and isinstance(value, int) and value > 0:
            out.append(FlagValue("model.cpu_offloading", True, at, f"{name} {raw}"))
    return _with_legacy_rope(tokens, _after_parsing(out + _swiglu_ffn(out))), problems


# Switches validate_args applies after argparse, whatever their place on the command line: the value each sets
# wins over the flag it rewrites (`--recompute-activations --recompute-granularity full` runs selective recompute),
# with why (OFL004 names it)
AFTER_PARSING = {"--recompute-activations": "validate_args sets recompute_granularity='selective' whenever "
                                            "--recompute-activations is given, wherever it is"}


def _after_parsing(found: list[FlagValue]) -> list[FlagValue]:
    """`found` with the values of AFTER_PARSING's switches last, where validate_args applies them."""
    late = [f for f in found if f.text in AFTER_PARSING]
    return [f for f in found if f.text not in AFTER_PARSING] + late if late else found


def _with_legacy_rope(tokens: list[str | None], found: list[FlagValue]) -> list[FlagValue]:
    """validate_args sets the position embedding type to rope for the legacy `--use-rotary-position-embeddings`,
    whatever `--position-embedding-type` says (Pai-Megatron-Patch's Qwen3-VL launches pass both, and `mrope`): the
    switch's rope, not the values it replaces."""
    at = next((i for i, token in enumerate(tokens) if token == _LEGACY_ROPE), None)
    if at is None:
        return found
    return [f for f in found if f.key != "model.position_embedding_type"] + \
        [FlagValue("model.position_embedding_type", "rope", at, _LEGACY_ROPE)]


_LEGACY_ROPE = "--use-rotary-position-embeddings"


def _swiglu_ffn(found: list[FlagValue]) -> list[FlagValue]:
    """validate_args sizes the MLP of a `--swiglu` model given no `--ffn-hidden-size` at 2/3 of 4h, a multiple of 64
    (`int((4 * hidden_size * 2 / 3) / 64) * 64`), where megatron-core's TransformerConfig would take 4h."""
    swiglu = next((f for f in found if f.key == "model.gated_linear_unit" and f.text == "--swiglu"), None)
    if swiglu is None or any(f.key == "model.ffn_hidden_size" for f in found):
        return []
    hidden = next((f.value for f in reversed(found) if f.key == "model.hidden_size"), None)
    value = int((4 * hidden * 2 / 3) / 64) * 64 if type(hidden) is int and hidden > 0 else \
        Unknown("validate_args sizes the MLP of --swiglu from --hidden-size, which is not known")
    return [FlagValue("model.ffn_hidden_size", value, swiglu.flag_index, "--swiglu")]


def takes_value(flag: str) -> bool:
    """Whether a Megatron-LM flag is followed by its value: not a switch offlint knows (`--bf16`); a flag it does
    not know is taken to have one (most of Megatron-LM's do)."""
    if flag in SWITCHES:
        return False
    info = FLAG_KEYS.get(flag)
    return info is None or info.type != "bool"


def keys_of(flag: str) -> list[str]:
    """The keys offlint maps `flag` to (none for a flag it does not read)."""
    if flag in SWITCHES:
        return [key for key, _ in SWITCHES[flag]]
    info = FLAG_KEYS.get(flag)
    return [info.name] if info is not None else []


def unread_flags(tokens: list[str | None]) -> tuple[str, ...]:
    """The flags given that read_flags does not map to a key: their settings are unknown to offlint, so the
    keys they set must not take argparse defaults (resolve: ResolvedUnit, by the flag's dest)."""
    return tuple(dict.fromkeys(
        name for token in tokens if token is not None and token.startswith("--")
        for name in (token.partition("=")[0],) if name not in FLAG_KEYS and name not in SWITCHES))


def _is_flag(token: str | None) -> bool:
    return token is not None and token.startswith("-") and len(token) > 1 and not is_number(token)


def is_number(text: str) -> bool:
    """Whether a word is a number (`-1`, `1e-4`): a value, not a flag, though it starts with "-"."""
    try:
        float(text)
        return True
    except ValueError:
        return False


def _convert(raw: str, type_: str):
    if type_ == "int":
        return int(raw)
    if type_ == "float":
        return float(raw)
    if type_ == "dtype":
        return normalize_dtype(raw)
    return raw


# Megatron-LM's dtype flags take short names that validate_args maps to torch dtypes.
_DTYPES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16", "fp8": "torch.uint8",
           "float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16"}


def normalize_dtype(raw: str) -> str:
    name = raw[len("torch."):] if raw.startswith("torch.") else raw
    return _DTYPES.get(name, f"torch.{name}")


@lru_cache(maxsize=None)
def _settable(version: Version) -> tuple[frozenset[str], frozenset[str]]:
    """(the keys offlint maps a flag to, the dests of the release's flags); no dests where its data is missing."""
    mapped = {info.name for info in FLAG_KEYS.values()} | {key for pairs in SWITCHES.values() for key, _ in pairs}
    return frozenset(mapped), frozenset(dest for dest in mlm_flag_dests(version).values() if dest)


def flag_may_set(key: str, version: Version) -> bool:
    """Whether a flag of Megatron-LM's parser may set `key`: one offlint maps to it, or one whose dest is the key's
    field name (Megatron-LM builds each config from the parsed arguments of that name). A word offlint cannot read
    may give any flag, but none sets OptimizerConfig's decoupled_weight_decay, say (slime's launches, with
    --strict, had been told OFL113 may fire). True where the release's flags are not known."""
    mapped, dests = _settable(version)
    return not dests or key in mapped or key.split(".", 1)[-1] in dests
