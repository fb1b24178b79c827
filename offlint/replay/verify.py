"""`offlint replay --verify`: the offloaded run against its baseline, judged by the seed documents' criteria.

The criteria (Megatron Bridge's CPU-offloading skill, "Success criteria"):
1. configuration validation passes (megatron-core builds the configs and the model);
2. training completes without OOM or NCCL errors;
3. loss matches the non-offloaded baseline: max per-iteration delta < 0.001;
4. memory drops in proportion to the offload fraction: the peak falls by at least `MIN_DROP_SHARE` of the
   GPU bytes the baseline's optimizer held, times the share of parameters HybridDeviceOptimizer offloaded.
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
# Of the expected drop. The baseline's optimizer bytes include the fp32 master shards, which DistributedOptimizer
# keeps on the GPU even under HybridDeviceOptimizer (HDO works on CPU clones of them), so a full Adam offload
# frees about 8 of every 12 bytes (two thirds); HDO also offloads whole parameters, not exact fractions.
MIN_DROP_SHARE = 0.5


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
    """GPU bytes the offload should free: the baseline optimizer's GPU bytes x the share HDO offloaded."""
    optimizer_bytes = max((b for b in baseline.get("optimizer_gpu_bytes") or [] if b is not None), default=None)
    report = (offloaded.get("offload") or {}).get("optimizer") or {}
    if optimizer_bytes is None or not report.get("hybrid_device_optimizer"):
        return None
    return int(optimizer_bytes * report.get("offloaded_share", 0.0))


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
              f"{report.get('offloaded_share', 0):.0%} of parameters offloaded, expected drop {_gib(expected)} GiB")
    if expected == 0:
        return _criterion(name, True, detail + "; nothing offloaded, no drop expected", Outcome.MEMORY_REGRESSION)
    return _criterion(name, drop >= min_share * expected, detail + f" (needs at least {min_share:.0%} of it)",
                      Outcome.MEMORY_REGRESSION)


def median_step_s(result: dict) -> float | None:
    """The median iteration time after the first (which includes allocator and kernel warm-up)."""
    times = (result.get("iteration_time_s") or [])[1:]
    return statistics.median(times) if times else None


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.2f}"


def render_criteria(criteria: list[Criterion]) -> str:
    return "\n".join(f"[{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in criteria)
