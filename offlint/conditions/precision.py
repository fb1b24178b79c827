"""Precision settings the stack refuses: Transformer Engine's low-precision recipes on the unit's GPU (OFL117), and
the optimizer's lower-precision dtypes without the precision-aware optimizer (OFL122)."""

from __future__ import annotations

import os

from offlint import te_support
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope
from offlint.conditions.values import is_fp32


def _te_verdict(scope: Scope):
    """te_support's verdict, once per scope; the keys that decided it are recorded as read."""
    if not hasattr(scope, "_te_verdict"):
        # (the project's directory as verdict takes it, str(Path.cwd()), without building a Path for each unit)
        found = te_support.verdict(scope.lookup, os.getcwd(), gpu=str(scope.names.get("unit_gpu", "")),
                                   gpu_from=str(scope.names.get("unit_gpu_from", "")))
        for key in found.keys:
            scope.key(key)
        scope._te_verdict = found
    return scope._te_verdict


@needs_scope
def low_precision_refused(scope: Scope) -> object:
    """Whether Transformer Engine refuses the unit's FP8/FP4 recipe on the GPU the unit names (or
    [tool.offlint] gpu): unknown when the recipe is; False when the GPU is not known."""
    refused = _te_verdict(scope).refused
    return UNKNOWN if refused is None else refused


@needs_scope
def low_precision_refusal(scope: Scope) -> str:
    """What the recipe is, where it is set, what Transformer Engine raises and what runs instead."""
    return _te_verdict(scope).message or "?"


# OptimizerConfig.__post_init__'s order (OC-8), when the precision-aware optimizer is off
_OPTIMIZER_DTYPES = ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")


@needs_scope
def optimizer_dtype_refusal(scope: Scope) -> object:
    """OFL122: why megatron-core refuses the optimizer's dtypes ("" when it does not, UNKNOWN when offlint cannot
    tell): without `use_precision_aware_optimizer`, OptimizerConfig asserts that each of them is fp32, in
    _OPTIMIZER_DTYPES's order. The first one offlint knows is not fp32 is named; one it cannot read before it may be
    the one megatron-core names, but the config is refused either way."""
    aware = scope.key("optimizer.use_precision_aware_optimizer")
    if aware is not UNKNOWN and aware:
        return ""
    unread = False
    for field in _OPTIMIZER_DTYPES:
        dtype = scope.key(f"optimizer.{field}")
        if dtype is UNKNOWN:
            unread = True
        elif not is_fp32(dtype):
            if aware is UNKNOWN:
                return UNKNOWN
            return (f"{field}={dtype} without the precision-aware optimizer (use_precision_aware_optimizer="
                    f"{aware}): megatron-core's OptimizerConfig asserts \"{field} can only be fp32 when not using "
                    f"precision-aware optimizer\" when it builds the config")
    return UNKNOWN if unread else ""
