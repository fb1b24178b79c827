"""A resolved configuration -> the exact kwargs a replay passes to megatron-core, plus its parallel layout.

The output (`ReplaySpec`) is plain JSON, written next to the run and read by every rank, so the effective
configuration in the result file is exactly what megatron-core was given. Values the run needs but the unit
does not know are a one-line error naming the `--override` to add; nothing unknown is guessed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from offlint import keys
from offlint.conditions.values import is_positive_count
from offlint.resolve import ResolvedUnit
from offlint.types import Unknown

# Keys without which no model can be built; each with the shrink option that can supply it.
REQUIRED_MODEL = {"num_layers": "--num-layers", "hidden_size": "--hidden-size",
                  "num_attention_heads": None, "seq_length": "--seq-length"}
PARALLEL_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                 "expert_model_parallel_size", "expert_tensor_parallel_size",
                 "virtual_pipeline_model_parallel_size")
# GPTModel constructor arguments that Bridge keeps on its model provider (not TransformerConfig fields).
GPT_MODEL_KEYS = ("share_embeddings_and_output_weights", "position_embedding_type", "rotary_base",
                  "rotary_percent", "fp16_lm_cross_entropy", "parallel_output")
SYNTHETIC_VOCAB = 32768
DEFAULT_LR = 1e-4
SEED = 1234


class MappingError(ValueError):
    """One line: what the replay cannot map, and the option that fixes it."""


@dataclass
class Shrink:
    """Command-line replacements for size settings (to run a big recipe on one GPU)."""

    num_layers: int | None = None
    hidden_size: int | None = None
    seq_length: int | None = None
    micro_batch_size: int | None = None
    global_batch_size: int | None = None
    data_parallel_size: int | None = None


@dataclass
class ReplaySpec:
    """Everything a rank needs: megatron-core kwargs per dataclass, the layout, the training settings."""

    model: dict  # TransformerConfig kwargs
    optimizer: dict  # OptimizerConfig kwargs
    ddp: dict  # DistributedDataParallelConfig kwargs
    gpt: dict  # GPTModel kwargs beyond config/spec
    parallel: dict  # tp, pp, cp, ep, etp, vpp, dp
    train: dict  # seq_length, micro_batch_size, global_batch_size, vocab_size, iters, seed, gpu_memory_gb
    env: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unit: str = ""

    @property
    def world_size(self) -> int:
        p = self.parallel
        return (p["tensor_model_parallel_size"] * p["pipeline_model_parallel_size"] * p["context_parallel_size"]
                * p["data_parallel_size"])

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ReplaySpec":
        return cls(**data)


def map_unit(resolved: ResolvedUnit, shrink: Shrink | None = None, iters: int = 20,
             gpu_memory_gb: float | None = None, label: str = "") -> ReplaySpec:
    """Build the replay spec of one resolved unit; MappingError when a needed value is unknown."""
    shrink = shrink or Shrink()
    label = label or resolved.unit.name
    notes: list[str] = []
    sections = {name: _section(resolved, name) for name in ("model", "optimizer", "ddp")}
    unknown = [key for section in sections.values() for key, value in section.items() if isinstance(value, Unknown)]
    model, optimizer, ddp = ({k: v for k, v in s.items() if not isinstance(v, Unknown)} for s in sections.values())

    sizes = {"num_layers": shrink.num_layers, "hidden_size": shrink.hidden_size, "seq_length": shrink.seq_length}
    for name in REQUIRED_MODEL:
        if sizes.get(name) and f"model.{name}" in unknown:
            unknown.remove(f"model.{name}")
        value = sizes.get(name) or _known(resolved, f"model.{name}")
        if value is None:
            if f"model.{name}" not in unknown:
                unknown.append(f"model.{name}")
            continue
        model[name] = value
    if unknown:
        raise MappingError(_unknown_message(label, unknown))
    seq_length = model.pop("seq_length")
    vocab = _known(resolved, "model.vocab_size")
    if vocab is None:
        vocab = SYNTHETIC_VOCAB
        notes.append(f"model.vocab_size is not set (Bridge takes it from the tokenizer): synthetic tokens use {vocab}")
    gpt = {name: model.pop(name) for name in GPT_MODEL_KEYS if name in model}
    if "share_embeddings_and_output_weights" not in gpt:
        tied = _known(resolved, "model.share_embeddings_and_output_weights")
        if tied is None:  # GPTModel's own default is False; the sources' is True, as the memory model assumes
            tied = keys.TIED_EMBEDDINGS_DEFAULT
            notes.append("model.share_embeddings_and_output_weights is not set: the output layer shares the "
                         "embedding, as Bridge's GPTModelProvider and Megatron-LM do by default")
        gpt["share_embeddings_and_output_weights"] = bool(tied)
    model = {k: v for k, v in model.items() if k in _fields(resolved, "model")}

    parallel = {name: model.get(name, 1) for name in PARALLEL_KEYS}
    parallel["expert_tensor_parallel_size"] = model.get("expert_tensor_parallel_size")
    parallel["virtual_pipeline_model_parallel_size"] = model.get("virtual_pipeline_model_parallel_size")
    if parallel["virtual_pipeline_model_parallel_size"]:
        raise MappingError(f"{label}: replay runs one model chunk per pipeline stage; add --override "
                           f"model.virtual_pipeline_model_parallel_size=null")
    for name, size in parallel.items():  # (a size of 0 had ended the dry run in a division by zero)
        if name != "virtual_pipeline_model_parallel_size" and size is not None and not is_positive_count(size):
            raise MappingError(f"{label}: model.{name} is {size!r}; a parallel size is a whole number of at least 1 "
                               f"(add --override model.{name}=N)")
    parallel["data_parallel_size"] = shrink.data_parallel_size or minimal_data_parallel(parallel)

    _apply_precision(resolved, model, optimizer, notes)
    if parallel["pipeline_model_parallel_size"] > 1:
        model.setdefault("pipeline_dtype", model.get("params_dtype", "torch.float32"))
    _match_distributed_optimizer(label, resolved, optimizer, ddp, notes)
    optimizer.setdefault("lr", DEFAULT_LR)
    _offload_notes(resolved, optimizer, model, notes)
    if not resolved.unit.default_sections:
        notes.append("this unit builds no section itself (an override file): keys it does not set take "
                     "megatron-core defaults")

    train = _batch(label, resolved, shrink, parallel["data_parallel_size"])
    train.update(seq_length=seq_length, vocab_size=vocab, iters=iters, seed=SEED, gpu_memory_gb=gpu_memory_gb,
                 manual_gc=bool(_known(resolved, "train.manual_gc")))
    env = {k.split(".", 1)[1]: str(v) for k, v in _env(resolved).items()}
    return ReplaySpec(model, optimizer, ddp, gpt, parallel, train, env, notes, label)


def minimal_data_parallel(parallel: dict) -> int:
    """The smallest data-parallel size megatron-core accepts: TP*CP*DP must be divisible by EP*ETP."""
    dense = parallel["tensor_model_parallel_size"] * parallel["context_parallel_size"]
    expert = parallel["expert_model_parallel_size"] * (parallel["expert_tensor_parallel_size"]
                                                       or parallel["tensor_model_parallel_size"])
    return math.lcm(dense, expert) // dense


def _section(resolved: ResolvedUnit, section: str) -> dict:
    """Every dataclass field of `section` the unit sets, plus defaults where the unit's source differs from
    the dataclass (Megatron-LM's argparse defaults, e.g. an offload fraction of 1.0)."""
    fields = _fields(resolved, section) | set(keys.BRIDGE_PROVIDER_FIELDS.get(section, ()))
    out: dict = {}
    for key, assignment in resolved.values.items():
        head, _, name = key.partition(".")
        if head == section and "." not in name and name in fields:
            out[key if isinstance(assignment.value, Unknown) else name] = assignment.value
    for key in keys.KEYS:
        head, _, name = key.partition(".")
        if head != section or name in out or key in out:
            continue
        value = resolved.get(key)
        if value.state == "default" and value.value != keys.default_for(key, resolved.version):
            out[name] = value.value
    return out


def _fields(resolved: ResolvedUnit, section: str) -> set[str]:
    return set((keys.version_data(resolved.version) or {}).get("sections", {}).get(section, {}))


def _known(resolved: ResolvedUnit, key: str):
    value = resolved.get(key)
    return value.value if value.state in ("known", "default") and value.value is not None else None


def _unknown_message(label: str, unknown: list[str]) -> str:
    fixes = []
    for key in unknown:
        option = REQUIRED_MODEL.get(key.split(".", 1)[1]) if key.startswith("model.") else None
        fixes.append(f"--override {key}=VALUE" + (f" (or {option} N)" if option else ""))
    return f"{label}: replay needs values for {', '.join(unknown)}; add {', '.join(fixes)}"


def _apply_precision(resolved: ResolvedUnit, model: dict, optimizer: dict, notes: list[str]) -> None:
    """One precision for model and optimizer, as Megatron-LM's --bf16 and Bridge's mixed_precision set both."""
    recipe = str(_known(resolved, "mixed_precision") or "")
    for dtype in ("bf16", "fp16"):
        if model.get(dtype) or optimizer.get(dtype) or recipe.startswith(dtype):
            model[dtype] = optimizer[dtype] = True
            params_dtype = "torch.bfloat16" if dtype == "bf16" else "torch.float16"
            model.setdefault("params_dtype", params_dtype)
            optimizer.setdefault("params_dtype", params_dtype)
            notes.append(f"{dtype} on model and optimizer, params_dtype {model['params_dtype']}")
            return


def _match_distributed_optimizer(label: str, resolved: ResolvedUnit, optimizer: dict, ddp: dict,
                                 notes: list[str]) -> None:
    """DDP and optimizer must agree on use_distributed_optimizer (OB-12); one side known sets both."""
    opt_value, ddp_value = (resolved.get(k) for k in ("optimizer.use_distributed_optimizer",
                                                       "ddp.use_distributed_optimizer"))
    if opt_value.state == ddp_value.state == "known" and opt_value.value != ddp_value.value:
        raise MappingError(f"{label}: optimizer.use_distributed_optimizer={opt_value.value} but "
                           f"ddp.use_distributed_optimizer={ddp_value.value}; megatron-core needs both equal, "
                           f"add --override ddp.use_distributed_optimizer={str(opt_value.value).lower()}")
    chosen = next((v.value for v in (opt_value, ddp_value) if v.state == "known"), None)
    if chosen is None:
        chosen = bool(opt_value.value) if opt_value.state == "default" else False
    if optimizer.get("use_distributed_optimizer") != chosen or ddp.get("use_distributed_optimizer") != chosen:
        notes.append(f"use_distributed_optimizer={chosen} on both the optimizer and DDP (megatron-core needs "
                     f"them equal)")
    optimizer["use_distributed_optimizer"] = ddp["use_distributed_optimizer"] = chosen


def _offload_notes(resolved: ResolvedUnit, optimizer: dict, model: dict, notes: list[str]) -> None:
    if optimizer.get("optimizer_cpu_offload") and not optimizer.get("optimizer_offload_fraction"):
        notes.append("optimizer_cpu_offload with optimizer_offload_fraction 0.0 (the dataclass default): "
                     "HybridDeviceOptimizer is built but offloads nothing")
    if model.get("fine_grained_activation_offloading"):
        notes.append("fine-grained activation offloading: the replay loop uses megatron-core's schedules, "
                     "which reset the offload manager every iteration (warm-up on the first)")


def _batch(label: str, resolved: ResolvedUnit, shrink: Shrink, data_parallel: int) -> dict:
    micro = shrink.micro_batch_size or _set_value(label, resolved, "train.micro_batch_size") or 1
    global_ = (shrink.global_batch_size or _set_value(label, resolved, "train.global_batch_size")
               or micro * data_parallel)
    if global_ % (micro * data_parallel):
        raise MappingError(f"{label}: global batch size {global_} is not a multiple of micro batch size {micro} "
                           f"x data-parallel size {data_parallel}; pass --global-batch-size "
                           f"{micro * data_parallel}")
    return {"micro_batch_size": micro, "global_batch_size": global_,
            "num_microbatches": global_ // (micro * data_parallel)}


def _set_value(label: str, resolved: ResolvedUnit, key: str):
    """A value the unit sets; unset is None (the replay picks), set-but-unknown is an error."""
    assignment = resolved.values.get(key)
    if assignment is None:
        return None
    if isinstance(assignment.value, Unknown):
        option = "--" + key.split(".", 1)[1].replace("_", "-")
        raise MappingError(f"{label}: replay needs a value for {key} ({assignment.value}); add {option} N")
    return assignment.value


def _env(resolved: ResolvedUnit) -> dict:
    return {k: a.value for k, a in resolved.values.items()
            if k.startswith("env.") and not isinstance(a.value, Unknown) and a.value is not None}
