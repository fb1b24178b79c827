"""`offlint replay --verify`: the offloaded run against its baseline, judged by the seed documents' criteria.

The criteria (Megatron Bridge's CPU-offloading skill, "Success criteria"):
1. configuration validation passes (megatron-core builds the configs and the model);
2. training completes without OOM or NCCL errors;
3. loss matches the non-offloaded baseline: max per-iteration delta < 0.001;
4. memory drops in proportion to the offload fraction: the peak falls by at least `MIN_DROP_SHARE` of what
   the offloaded optimizer state weighs (`expected_drop`).
Everything here works on result dicts, so recorded results can be judged (and tested) without a GPU.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass

from offlint.outcomes import Outcome
from offlint.replay.mapping import ReplaySpec
from offlint.replay.result import exit_code_for, outcome_of, peak_bytes

LOSS_TOLERANCE = 1e-3
# What HybridDeviceOptimizer keeps on the host instead of the GPU, per offloaded parameter: Adam's two moments in
# fp32 (its CPU side is torch's AdamW over fp32 copies). The fp32 master shards stay on the GPU, where the
# DistributedOptimizer (or the float16 optimizer) keeps them, unless the precision-aware optimizer hands HDO the
# 16-bit shards (then the master moves too). Measured on an H200 with megatron-core 0.19.2: at fraction 1 the
# peak fell by 8.00 (1.35B parameters) and 12.00 bytes (precision-aware) per parameter (docs/gpu-validation.md).
MOMENT_BYTES = 8
MASTER_BYTES = 4
# Of the expected drop; the rest is slack for the allocator's rounding.
MIN_DROP_SHARE = 0.9
# And a few allocator blocks whatever the fraction: the hybrid optimizer's small per-tensor state raised the peak
# by 50 KiB (about 512 bytes per parameter tensor) at fraction 0 on an H200, where nothing is expected to drop.
SMALL_STATE_SLACK_BYTES = 4 * 2**20
# A first HybridDeviceOptimizer that get_megatron_optimizer builds over the 16-bit parameters, before the
# DistributedOptimizer builds its own over the fp32 shards, holds fp32 copies of the parameters it keeps on the
# GPU; only a reference cycle keeps it, so it lingers until Python's cyclic garbage collector runs (Bridge and
# Megatron-LM run gc.collect() before training with train.manual_gc / --manual-gc). Shown above this size.
LINGERING_MIN_BYTES = 64 * 2**20
@dataclass(frozen=True)
class Criterion:
    name: str
    passed: bool
    detail: str
    failure: Outcome | None = None  # the outcome this criterion's failure stands for


class VerifyError(ValueError):
    """Nothing to verify (one line; exit code 2)."""


def baseline_spec(spec: ReplaySpec) -> ReplaySpec:
    """The same run with every offload switch off."""
    out = copy.deepcopy(spec)
    out.optimizer["optimizer_cpu_offload"] = False
    for key in ("cpu_offloading", "fine_grained_activation_offloading"):
        out.model.pop(key, None)
    for key in ("offload_modules", "min_offloaded_tensor_size", "activation_offload_fraction"):
        out.model.pop(key, None)
    return out


def fraction_spec(spec: ReplaySpec, fraction: float) -> ReplaySpec:
    """The run with optimizer offloading at `fraction` (the sweep's variable)."""
    out = copy.deepcopy(spec)
    out.optimizer.update(optimizer_cpu_offload=True, optimizer_offload_fraction=fraction)
    return out


def offloads_anything(spec: ReplaySpec) -> bool:
    return bool(spec.optimizer.get("optimizer_cpu_offload") or spec.model.get("cpu_offloading")
                or spec.model.get("fine_grained_activation_offloading"))


def check(baseline: dict, offloaded: dict) -> list[Criterion]:
    """The four criteria, in order, for one offloaded run against its baseline."""
    base_ok = outcome_of(baseline) is Outcome.PASS
    criteria = [
        _criterion("baseline runs", base_ok, f"baseline: {_describe(baseline)}", outcome_of(baseline)),
        _config_valid(offloaded),
        _completes(offloaded),
    ]
    if not base_ok or outcome_of(offloaded) is not Outcome.PASS:
        return criteria
    return criteria + [loss_criterion(baseline, offloaded), memory_criterion(baseline, offloaded)]


def verdict(criteria: list[Criterion]) -> tuple[Outcome, int]:
    """The first failing criterion's outcome (pass when all pass) and its exit code."""
    failed = next((c for c in criteria if not c.passed), None)
    outcome = Outcome.PASS if failed is None else (failed.failure or Outcome.CRASH)
    return outcome, exit_code_for(outcome)


def _criterion(name: str, passed: bool, detail: str, failure: Outcome) -> Criterion:
    return Criterion(name, passed, detail, None if passed else failure)


def _describe(result: dict) -> str:
    signature = f" ({result['signature']})" if result.get("signature") else ""
    return f"{result['outcome']}{signature}"


def _config_valid(result: dict) -> Criterion:
    rejected = outcome_of(result) is not Outcome.PASS and result.get("phase") in ("setup", "config")
    detail = (f"megatron-core rejected the configuration: {result.get('signature')}" if rejected
              else "megatron-core built the configuration")
    return _criterion("configuration validation passes", not rejected, detail, Outcome.CRASH)


def _completes(result: dict) -> Criterion:
    outcome = outcome_of(result)
    return _criterion("training completes without OOM or NCCL errors", outcome is Outcome.PASS,
                      f"offloaded run: {_describe(result)}", outcome)


def max_loss_delta(baseline: dict, offloaded: dict) -> float | None:
    a, b = baseline.get("loss") or [], offloaded.get("loss") or []
    if not a or len(a) != len(b):
        return None
    return max(abs(x - y) for x, y in zip(a, b))


def loss_criterion(baseline: dict, offloaded: dict, tolerance: float = LOSS_TOLERANCE) -> Criterion:
    delta = max_loss_delta(baseline, offloaded)
    if delta is None:
        detail = (f"cannot compare: {len(baseline.get('loss') or [])} baseline and "
                  f"{len(offloaded.get('loss') or [])} offloaded loss values")
        return _criterion("loss matches the baseline", False, detail, Outcome.LOSS_DIVERGENCE)
    return _criterion("loss matches the baseline", delta < tolerance,
                      f"max per-iteration delta {delta:.2e} (limit {tolerance:g})", Outcome.LOSS_DIVERGENCE)


def expected_drop(baseline: dict, offloaded: dict) -> int | None:
    """GPU bytes the offload should free: what HybridDeviceOptimizer's host side holds for the parameters it
    offloaded (`MOMENT_BYTES` each, plus `MASTER_BYTES` with the precision-aware optimizer)."""
    report = (offloaded.get("offload") or {}).get("optimizer") or {}
    if not report.get("hybrid_device_optimizer"):
        return None
    precision_aware = bool(((offloaded.get("config") or {}).get("optimizer") or {})
                           .get("use_precision_aware_optimizer"))
    per_parameter = MOMENT_BYTES + (MASTER_BYTES if precision_aware else 0)
    return int(per_parameter * report.get("offloaded_param_numel", 0))


def lingering_bytes(baseline: dict, offloaded: dict) -> int | None:
    """How much more the optimizer's construction left allocated than the baseline's did (largest rank): the
    first HybridDeviceOptimizer's fp32 copies while no garbage collection has run (`LINGERING_MIN_BYTES`)."""
    def built(result: dict) -> list[int]:
        return [m["optimizer_built"] - m["model_built"] for m in result.get("memory_marks_bytes") or []
                if m and "optimizer_built" in m and "model_built" in m]

    base, off = built(baseline), built(offloaded)
    if not base or len(base) != len(off):
        return None
    return max(o - b for o, b in zip(off, base))


def memory_criterion(baseline: dict, offloaded: dict, min_share: float = MIN_DROP_SHARE) -> Criterion:
    name = "peak memory drops in proportion to the offload fraction"
    report = (offloaded.get("offload") or {}).get("optimizer") or {}
    activation = (offloaded.get("offload") or {}).get("activation") or {}
    base_peak, off_peak = peak_bytes(baseline), peak_bytes(offloaded)
    if base_peak is None or off_peak is None:
        return _criterion(name, False, "no peak memory recorded", Outcome.MEMORY_REGRESSION)
    drop = base_peak - off_peak
    if not report.get("hybrid_device_optimizer"):
        replayed = activation.get("replayed")
        detail = (f"activation offloading only: peak {_gib(base_peak)} -> {_gib(off_peak)} GiB" if replayed else
                  "nothing went through an offload code path (HybridDeviceOptimizer not used"
                  + (f"; {activation['note']}" if activation.get("note") else "") + ")")
        return _criterion(name, bool(replayed) and drop > 0, detail, Outcome.MEMORY_REGRESSION)
    expected = expected_drop(baseline, offloaded) or 0
    detail = (f"peak {_gib(base_peak)} -> {_gib(off_peak)} GiB (drop {_gib(drop)} GiB); "
              f"{report.get('offloaded_share', 0):.0%} of parameters offloaded, expected drop {_gib(expected)} GiB "
              f"(needs at least {min_share:.0%} of it)")
    passed = drop >= min_share * expected - SMALL_STATE_SLACK_BYTES
    lingering = lingering_bytes(baseline, offloaded)
    if not passed and lingering is not None and lingering > LINGERING_MIN_BYTES:
        detail += (f"; building the optimizer left {_gib(lingering)} GiB more on the GPU than the baseline's: "
                   f"megatron-core's first HybridDeviceOptimizer keeps fp32 copies of the parameters it leaves on "
                   f"the GPU until Python's garbage collector runs (train.manual_gc=True / --manual-gc collects "
                   f"it before training)")
    return _criterion(name, passed, detail, Outcome.MEMORY_REGRESSION)


def median_step_s(result: dict) -> float | None:
    """The median iteration time after the first (which includes allocator and kernel warm-up)."""
    times = (result.get("iteration_time_s") or [])[1:]
    return statistics.median(times) if times else None


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.2f}"


def render_criteria(criteria: list[Criterion]) -> str:
    return "\n".join(f"[{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in criteria)
