"""Inputs of Megatron-FSDP: its sharding strategy, and the low-precision settings it is not modelled with
(docs/estimate.md, "Megatron-FSDP").
"""

from __future__ import annotations

from offlint.types import Unknown
from offlint.estimate.reader import Reader
from offlint.estimate.shapes import LowPrecision, Training

_FSDP_STRATEGIES = ("no_shard", "optim", "optim_grads_params")


def read_fsdp(r: Reader, t: Training, low: LowPrecision | None) -> tuple[str | None, str]:
    """(Megatron-FSDP's sharding strategy, or None without it; why there is no verdict, or ""). Bridge runs
    Megatron-FSDP with `ddp.use_megatron_fsdp` (or `dist.use_megatron_fsdp`), version 1 unless
    `ddp.megatron_fsdp_version` says 2 (a separate implementation, not modelled)."""
    on = r.lookup("ddp.use_megatron_fsdp")
    if on.is_unknown:
        r.unknown[on.key] = (on.value.reason if isinstance(on.value, Unknown) else "unknown") + \
            " (the memory model would need to know whether Megatron-FSDP is used)"
        return None, ""
    dist = r.lookup("dist.use_megatron_fsdp")  # Bridge's validation copies it onto ddp
    if not (on.state == "known" and on.value) and not (dist.state == "known" and dist.value is True):
        return None, ""
    strategy = r.get("ddp.data_parallel_sharding_strategy", "no_shard")
    if strategy is None and "ddp.data_parallel_sharding_strategy" in r.unknown:
        return None, ""
    if strategy == "optim_grads":
        return None, ("Megatron-FSDP's optim_grads strategy (its unsharded gradient buckets follow bucket_size; "
                      "not modelled)")
    if strategy not in _FSDP_STRATEGIES:
        return None, f"Megatron-FSDP with the sharding strategy {strategy!r} (not modelled)"
    others = {
        "ddp.megatron_fsdp_version": (1, "Megatron-FSDP version 2"),
        "ddp.preserve_fp32_weights": (True, "Megatron-FSDP without fp32 main weights (preserve_fp32_weights=False)"),
        "ddp.megatron_fsdp_main_params_dtype": ("torch.float32", "Megatron-FSDP with main weights other than fp32 "
                                                                 "(megatron_fsdp_main_params_dtype)"),
    }
    for key, (default, what) in others.items():
        value = r.get(key, default)
        if key in r.unknown:
            return None, ""
        if value is not None and value != default:
            return None, f"{what} (not modelled)"
    outer = r.get("ddp.outer_dp_sharding_strategy", "no_shard")
    if "ddp.outer_dp_sharding_strategy" in r.unknown:
        return None, ""
    if outer not in ("no_shard", "optim"):
        return None, f"hybrid-sharded Megatron-FSDP with outer_dp_sharding_strategy={outer!r} (not modelled)"
    if outer == "optim" and strategy != "optim_grads_params":
        return None, ("hybrid-sharded Megatron-FSDP sharding the optimizer across the outer groups without "
                      "optim_grads_params (megatron_fsdp raises NotImplementedError)")
    if low is not None and _fsdp_low_precision_unsupported(low):
        return None, _fsdp_low_precision_unsupported(low)
    if t.optimizer_cpu_offload:
        return None, "Megatron-FSDP with optimizer offload (not modelled)"
    return strategy, ""


def _fsdp_low_precision_unsupported(lp: LowPrecision) -> str:
    """Why Megatron-FSDP with this FP8/FP4 setting has no verdict ("" when it is modelled: FP8 primary weights
    with per-tensor scaling off Hopper, or MXFP8; precision.fsdp_data_bytes). An MXFP8 output layer is a bf16 LM
    head in FSDP's bf16 buffers whose gathered weight Transformer Engine caches in MXFP8 as without FSDP
    (megatron-core 2a75ac12: the FSDP wrapper is a MegatronModule, so set_is_first_microbatch reaches it)."""
    if lp.recipe in ("blockwise", "nvfp4"):
        return f"Megatron-FSDP with {lp.recipe} parameters (their buffers are not modelled)"
    if not lp.params:
        return ("Megatron-FSDP with FP8 compute on bf16 weights (Transformer Engine's cached FP8 copies of the "
                "all-gathered weights are not modelled)")
    if lp.recipe in ("delayed", "tensorwise") and lp.transpose is not False:
        return ("Megatron-FSDP with per-tensor FP8 on Hopper or a GPU whose architecture offlint does not know "
                "(the FP8 transposes made after each all-gather are not modelled)")
    return ""
