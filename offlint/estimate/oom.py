"""What OFL303 (predicted OOM) and OFL304 (activation offloading on a model too large for PP=1) ask of the memory
model, for the rule conditions in `offlint.conditions`. Pure arithmetic: `offlint check` never imports torch.

A configuration rarely states its GPU count, so the rules use a lower bound when it is unknown: the peak at
any data-parallel size (the distributed optimizer's shard shrinks towards nothing, one micro-batch in flight).
A finding then means the configuration cannot fit however many GPUs it runs on. The device is the one a Bridge
recipe names (`..._8gpu_b200_bf16_config` is sized against a B200; a GPU offlint has no capacity for, such as
GB300, leaves the verdict unknown), else `[tool.offlint] gpu`, else h100-80gb.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from offlint.estimate.devices import DEFAULT_DEVICE, GIB, Device, DeviceError, parse_device
from offlint.estimate.inputs import Inputs, Lookup, read_inputs
from offlint.estimate.memory import Estimate, estimate

# Keys a finding lists as related locations (the ones that decide the size), besides any unknown input.
DRIVERS = ("model.num_layers", "model.hidden_size", "model.seq_length", "model.tensor_model_parallel_size",
           "model.pipeline_model_parallel_size", "model.recompute_granularity", "optimizer.optimizer_cpu_offload",
           "model.cpu_offloading")
_ANY_DP = 1 << 20  # a data-parallel size large enough that the optimizer shard is negligible


@lru_cache(maxsize=8)
def configured_device(cwd: str) -> Device:
    from offlint.config import ConfigError, load_config

    try:
        name = load_config(Path(cwd)).gpu
        return parse_device(name or DEFAULT_DEVICE)
    except (ConfigError, DeviceError):
        return parse_device(DEFAULT_DEVICE)  # `offlint estimate` reports a bad setting; the lint goes on


def device() -> Device:
    return configured_device(str(Path.cwd()))


# GPU names in Bridge recipe names; the second set has no capacity in offlint's device table.
_NAMED_GPUS = {"h100": "h100-80gb", "h200": "h200", "b200": "b200", "gb200": "gb200", "a100": "a100-80gb"}
_UNSIZED_GPUS = frozenset({"b300", "gb300", "r100", "vr200"})


def device_for(unit_name: str) -> Device | None:
    """The device a unit is sized against: the GPU its name names, else the configured one; None when it names
    a GPU offlint has no capacity for."""
    for token in unit_name.lower().replace(".", "_").split("_"):
        if token in _NAMED_GPUS:
            return parse_device(_NAMED_GPUS[token])
        if token in _UNSIZED_GPUS:
            return None
    return device()


# The inputs a "possible" finding names when they are unknown (the model sizes first; at most a few others).
SIZE_KEYS = ("model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.vocab_size",
             "model.seq_length")


def inputs_for(lookup: Lookup, unit_name: str) -> tuple[Inputs | None, list[str]]:
    """The unit's inputs when every size is known and the model covers it (else None: an unknown verdict),
    and the unknown keys worth naming."""
    inputs = read_inputs(lookup, unit_name)
    if not inputs.complete:
        named = [k for k in SIZE_KEYS if k in inputs.unknown] or sorted(inputs.unknown)[:5]
        return None, named
    p, m = inputs.parallel, inputs.model
    if m.num_layers % (p.pp * (p.vpp or 1)) or m.num_attention_heads % p.tp:
        return None, []
    return inputs, []


def bound(inputs: Inputs) -> Estimate:
    """The estimate at the configuration's GPU count, or the lower bound over every data-parallel size."""
    if inputs.parallel.world_size:
        return estimate(inputs)
    t = inputs.training
    floor = inputs.with_(training=replace(t, global_batch_size=t.global_batch_size or t.micro_batch_size))
    return estimate(floor, inputs.parallel.min_world_size() * _ANY_DP)


def model_state_at_pp1(inputs: Inputs) -> float:
    """Weights, gradients and optimizer states of one GPU with the pipeline folded into PP=1 (what activation
    offloading forces), on the same number of GPUs when it is known."""
    p = inputs.parallel
    world = p.world_size
    one_stage = inputs.with_(parallel=replace(p, pp=1, vpp=None, world_size=world))
    result = bound(one_stage)
    peak = result.peak
    return peak.of("weights") + peak.of("grads") + peak.of("optimizer")


def largest_parts(result: Estimate, n: int = 3) -> str:
    parts = sorted(result.peak.parts, key=lambda p: p.bytes, reverse=True)[:n]
    return ", ".join(f"{p.name} {p.bytes / GIB:.1f} GiB" for p in parts)


def offload_savings(inputs: Inputs, dev: Device) -> str:
    """The memory knobs that save the most, best first: "optimizer offload fraction 1 saves 22.4 GiB; ..."."""
    from offlint.estimate.whatif import what_if

    result = bound(inputs)
    world = result.world_size
    options = what_if(inputs, dev, world, layouts=False)  # a finding names knobs, not other layouts
    base = options[0].peak_bytes
    best: dict[str, tuple[float, str]] = {}
    for option in options[1:]:
        saving = base - option.peak_bytes
        if saving >= 0.05 * GIB and saving > best.get(option.group, (0.0, ""))[0]:
            best[option.group] = (saving, f"{option.group} {option.label} saves {saving / GIB:.1f} GiB")
    ranked = sorted(best.values(), reverse=True)
    return "; ".join(text for _, text in ranked) or "no offload or recompute setting saves memory here"
