"""The memory model as rule helpers (OFL303, OFL304, OFL305): pure arithmetic in offlint.estimate, never torch; each
estimate is made once per unit and verdict."""

from __future__ import annotations

from offlint.conditions.scope import UNKNOWN, Scope, needs_scope
from offlint.conditions.settings import other_accelerator
# The memory model, imported with the conditions (so with the engine, before a cold check forks its workers,
# which inherit it): every unit check calls into it, and a lazy import cost each process 0.04 s of CPU and each
# call an import lookup (on Megatron Bridge 0.04 s of the parent's serial launch-command checks, and as much in
# each worker).
from offlint.estimate import oom
from offlint.estimate.devices import ends


def _memory_inputs(scope: Scope, verdict: str = "oom"):
    """The unit's memory-model inputs (None when a size is unknown, or when the rule's `verdict`, one of
    oom.VERDICTS, depends on something open about the unit), computed once per scope. The keys that decide the
    verdict are recorded as read, so findings list them and --strict names the unknown ones."""
    if not hasattr(scope, "_memory_inputs") and _per_unit(scope, ("outside",), lambda: not_a_cuda_training_step(scope)):
        scope._memory_inputs = (None, ())
    if not hasattr(scope, "_memory_inputs"):
        unit_name, gpu = str(scope.names.get("unit_name", "")), str(scope.names.get("unit_gpu", ""))
        launch_gpus = int(scope.names.get("launch_gpus", 0))
        inputs, unknown, varying = _per_unit(scope, ("inputs", unit_name, launch_gpus),
                                             lambda: oom.inputs_for(scope.lookup, unit_name, gpu, launch_gpus))
        for key in unknown:
            scope.key(key)
        # (a Wan model's tokens are its mock batch's, not seq_length: inputs_wan.read_wan)
        wan = inputs is not None and inputs.model.wan is not None
        for key in oom.DRIVERS:
            if scope.lookup(key).assignment is not None and not (wan and key == "model.seq_length"):
                scope.key(key)
        scope._memory_inputs = (inputs, varying)
    inputs, varying = scope._memory_inputs
    return None if verdict in varying else inputs


def not_a_cuda_training_step(scope: Scope) -> str:
    """Why the unit is outside the memory model, which sizes a training step on a CUDA GPU ("" where it is not): a
    Megatron-LM style launch that builds no optimizer (engine.builds_no_optimizer: a text-generation or conversion
    script given a model's flags, whose memory is not weights + gradients + optimizer state + kept activations), or
    one decided to run on another accelerator (settings.other_accelerator: an Ascend NPU is not the device the
    estimate is told against). An accelerator that may be another is judged, as it was: where the package is
    missing the program runs on CUDA. Nothing it reads is noted as read by the rule (a copy of the scope)."""
    if scope.names.get("builds_no_optimizer"):
        return "the launch builds no optimizer: it does not train"
    accelerator = other_accelerator(Scope(scope.lookup, scope.version, names=scope.names))
    return accelerator if isinstance(accelerator, str) else ""


def _device(scope: Scope):
    """The GPU the unit is sized against (for a bracketed capacity, devices.stated_range, its low end)."""
    return oom.device_for(str(scope.names.get("unit_name", "")), str(scope.names.get("unit_gpu", "")))


def _claim_device(scope: Scope):
    """The device a finding's figures name: for a bracketed capacity its high end, where an overrun or a short
    headroom still holds (the verdicts themselves hold at both ends: oom.oom_verdict, oom.risk_verdict)."""
    return ends(_device(scope))[-1]


def _memory_bound(scope: Scope, verdict: str = "oom"):
    """oom.bound of the unit's inputs, once per unit; None as _memory_inputs gives None for `verdict`."""
    inputs = _memory_inputs(scope, verdict)
    if inputs is None:
        return None
    return _per_unit(scope, ("bound", str(scope.names.get("unit_name", ""))), lambda: oom.bound(inputs))


def _per_unit(scope: Scope, what: tuple, compute):
    """`compute()`, once per resolved unit the scope reads (each rule's check has a scope of its own, and the
    memory model cost a third of a check: three rules ask for it)."""
    owner = getattr(scope.lookup, "__self__", None)  # the ResolvedUnit of `resolved.get`
    memo = owner.__dict__.setdefault("_per_unit", {}) if hasattr(owner, "__dict__") else {}
    if what not in memo:
        memo[what] = compute()
    return memo[what]


@needs_scope
def estimated_peak_gib(scope: Scope) -> object:
    """One GPU's estimated peak (GiB): at the unit's GPU count, else the lower bound over data-parallel sizes."""
    result = _memory_bound(scope)
    return UNKNOWN if result is None else result.peak.total / 1024**3


@needs_scope
def model_state_pp1_gib(scope: Scope) -> object:
    """Weights + gradients + optimizer states of one GPU at PP=1 (GiB)."""
    inputs = _memory_inputs(scope, "pp1")
    return UNKNOWN if inputs is None else oom.model_state_at_pp1(inputs) / 1024**3


@needs_scope
def usable_gib(scope: Scope) -> float:
    return _claim_device(scope).usable_bytes / 1024**3


@needs_scope
def gpu_name(scope: Scope) -> str:
    return _claim_device(scope).name


@needs_scope
def gpu_count(scope: Scope) -> str:
    """How the estimate sized the job (oom.bound_size): "on 16 GPUs", "on up to 64 GPUs (...)", or "at any
    data-parallel size"."""
    inputs = _memory_inputs(scope)
    return "at any data-parallel size" if inputs is None else oom.bound_size(inputs)


@needs_scope
def largest_memory_parts(scope: Scope) -> str:
    result = _memory_bound(scope)
    return "?" if result is None else oom.largest_parts(result)


@needs_scope
def memory_savings(scope: Scope) -> str:
    inputs = _memory_inputs(scope)
    return "?" if inputs is None else oom.offload_savings(inputs, _device(scope))


@needs_scope
def predicted_oom(scope: Scope) -> object:
    """OFL303: True when even the calibrated floor exceeds the device, else False (oom.oom_verdict): an overrun of
    the full estimate alone rests on the uncalibrated activations and allowance, so it is no finding, not even a
    "possible" one under --strict (`offlint estimate` shows it). Without an estimate (a feature the model does not
    cover, an unknown size, a unit that is no training step on a CUDA GPU: not_a_cuda_training_step) there is no
    finding, not even a "possible" one: no OOM is claimed without a number, and a model offlint cannot size is
    said once per run (oom.unsized_notes), not once per recipe. A GPU whose capacity is stated, not measured
    (Rubin), is judged at both ends of its bracket (devices.stated_range)."""
    result = _memory_bound(scope)
    if result is None:
        return False
    return {"oom": True, "uncalibrated": False, "fits": False}[oom.oom_verdict(result, _device(scope))]


@needs_scope
def oom_message(scope: Scope) -> str:
    return oom.oom_message(_memory_bound(scope), _device(scope), scope.lookup,
                           str(scope.names.get("unit_name", "")), gpu_count(scope),
                           str(scope.names.get("unit_gpu", "")), int(scope.names.get("launch_gpus", 0)))


@needs_scope
def oom_floor_gib(scope: Scope) -> object:
    result = _memory_bound(scope)
    return UNKNOWN if result is None else oom.floor_bytes(result) / 1024**3


def _expandable(scope: Scope) -> bool | None:
    for key in oom.ALLOCATOR_ENV_KEYS:
        scope.key(key)
    return oom.expandable(scope.lookup)


@needs_scope
def oom_at_risk(scope: Scope) -> object:
    """OFL305: a peak that fits with less headroom than the allocator needs (oom.risk_verdict). Without an
    estimate (an unknown size, an unmodelled feature, a GPU of unknown capacity) it stays quiet: OFL303 names
    those unknowns under --strict, once per unit."""
    result = _memory_bound(scope, "risk")
    if result is None:
        return False
    verdict = oom.risk_verdict(result, _device(scope), _expandable(scope))
    return {"at risk": True, "possible": UNKNOWN, "uncalibrated": False, "no": False}[verdict]


@needs_scope
def at_risk_margin_gib(scope: Scope) -> object:
    return oom.margin_bytes(_claim_device(scope), _expandable(scope) is not False) / 1024**3


@needs_scope
def at_risk_fix(scope: Scope) -> str:
    inputs = _memory_inputs(scope, "risk")
    for key in ("ddp.nccl_ub", "ddp.use_megatron_fsdp", "model.cuda_graph_impl", "env.NCCL_GRAPH_REGISTER"):
        scope.key(key)
    if inputs is None:
        return "?"
    return oom.cheapest_fix(inputs, _device(scope), scope.lookup, _expandable(scope))
