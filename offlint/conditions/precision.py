"""Transformer Engine's low-precision recipes on the unit's GPU (OFL117)."""

from __future__ import annotations

import os

from offlint import te_support
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope


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
