"""Inputs of FP8 and FP4 (NVFP4) training: the recipe, its scaling and what it quantizes, read from the model's
fields or Bridge's precision recipe (docs/estimate.md, "FP8 training", "NVFP4").
"""

from __future__ import annotations

import re

from offlint.types import Unknown
from offlint.estimate.reader import Reader, positive_int
from offlint.estimate.shapes import LowPrecision

# Bridge's precision recipes and recipe names that train in FP8 or FP4 (`bf16_with_fp8_current_scaling_mixed`,
# `bf16_with_mxfp8_mixed`, `..._8gpu_h100_fp8cs_config`, `..._b200_nvfp4_config`).
_LOW_PRECISION_NAME = re.compile(r"(?:^|_)(?:fp8\w*|mxfp8|nvfp4|fp4\w*)(?:_|$)", re.I)


_FP8_RECIPES = ("delayed", "tensorwise", "mxfp8", "blockwise")
_MCORE_FIELDS = ("fp8", "fp8_recipe", "fp8_param", "fp8_amax_history_len", "fp8_dot_product_attention",
                 "fp8_multi_head_attention", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
                 "num_layers_at_end_in_bf16", "fp4", "fp4_recipe", "fp4_param")


def _precision_settings(r: Reader) -> dict | None:
    """The FP8/FP4 settings in force: Bridge's `mixed_precision` (a MixedPrecisionConfig record: one a recipe
    built, or the one its recipe name builds, named_precision), which overwrites the model config's fields when
    set; else megatron-core's own `model.fp8...` keys (Megatron-LM's --fp8-format maps onto model.fp8). None: not
    readable (already recorded as unknown)."""
    mixed = r.lookup("mixed_precision")
    if mixed.is_unknown:
        return None  # recorded by _half_precision
    fields = getattr(mixed.value, "fields", None)
    if mixed.state == "known" and isinstance(fields, dict):
        settings = dict(fields)
        for kind in ("fp8", "fp4"):  # MixedPrecisionConfig.finalize: fp8_param from fp8_param_gather, fp4 alike
            if settings.get(f"{kind}_param") is None:
                settings[f"{kind}_param"] = settings.get(f"{kind}_param_gather")
        return settings
    settings = {}
    for name in _MCORE_FIELDS:
        value = r.lookup(f"model.{name}")
        if value.is_unknown:
            r.unknown[f"model.{name}"] = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            return None
        settings[name] = value.value
    settings["disable_parameter_transpose_cache"] = r.get("model.disable_parameter_transpose_cache", False)
    return settings


def read_low_precision(r: Reader, unit_name: str, fp8_transpose: bool | None) -> tuple[LowPrecision | None, str]:
    """(the FP8 settings, or None for 16/32-bit GEMMs; why there is no verdict, or "")."""
    settings = _precision_settings(r)
    if settings is None:
        return None, ""
    for name, value in settings.items():
        if isinstance(value, Unknown) and (name.startswith(("fp8", "fp4")) or "bf16" in name):
            r.unknown["mixed_precision"] = f"`{name}` of the mixed-precision config: {value.reason}"
            return None, ""
    named = bool(_LOW_PRECISION_NAME.search(unit_name.lower().removesuffix("_config")))
    if settings.get("fp4"):
        return _read_fp4(r, settings, fp8_transpose)
    if not settings.get("fp8"):
        if named:  # the name says FP8/FP4 and the configuration says neither: do not size it as bf16
            return None, "FP8/FP4 training that the recipe name announces but offlint does not see set"
        return None, ""
    recipe = settings.get("fp8_recipe") or "delayed"
    if recipe not in _FP8_RECIPES:
        return None, f"the FP8 recipe {recipe!r} (not modelled)"
    if settings.get("fp8_multi_head_attention"):
        return None, "FP8 multi-head attention (fp8_multi_head_attention: its FP8 QKV and output are not modelled)"
    if settings.get("fp8_dot_product_attention") and recipe == "blockwise":
        return None, "FP8 attention with blockwise scaling (its saved tensors are not modelled)"
    # megatron-core 0.20's is_mxfp8_output_proj_active: the LM head becomes TELMHeadColumnParallelLinear
    output_layer = recipe == "mxfp8" and r.get("model.fp8_output_proj", False) is True
    if output_layer and r.get("model.share_embeddings_and_output_weights", True) is not False:
        return None, "an MXFP8 output layer (fp8_output_proj) with tied embeddings (not modelled)"
    if not settings.get("fp8_param") and settings.get("disable_parameter_transpose_cache"):
        return None, ("FP8 with bf16 weights and disable_parameter_transpose_cache (the quantized weights are then "
                      "made again for every micro-batch; not modelled)")
    bf16_layers = bool(settings.get("first_last_layers_bf16"))
    history = settings.get("fp8_amax_history_len")
    return LowPrecision(
        recipe=recipe,
        params=bool(settings.get("fp8_param")),
        transpose=fp8_transpose if recipe in ("delayed", "tensorwise") else True,
        bf16_layers_start=int(settings.get("num_layers_at_start_in_bf16") or 0) if bf16_layers else 0,
        bf16_layers_end=int(settings.get("num_layers_at_end_in_bf16") or 0) if bf16_layers else 0,
        amax_history=int(history) if positive_int(history) else 1,
        attention=bool(settings.get("fp8_dot_product_attention")),
        output_layer=output_layer,
    ), ""


def _read_fp4(r: Reader, settings: dict, fp8_transpose: bool | None) -> tuple[LowPrecision | None, str]:
    """FP4 training: megatron-core's `fp4="e2m1"` with the `nvfp4` recipe (Transformer Engine's
    NVFP4BlockScaling); FP4 primary weights with `fp4_param`; bf16 layers as for FP8 (fp4_utils.get_fp4_context)."""
    recipe = settings.get("fp4_recipe") or "nvfp4"
    if recipe != "nvfp4":
        return None, f"the FP4 recipe {recipe!r} (a custom quantizer factory; not modelled)"
    if settings.get("fp8"):
        return None, "FP8 and FP4 together (megatron-core refuses the combination)"
    if settings.get("fp8_multi_head_attention"):
        return None, "FP8 multi-head attention under NVFP4 (fp8_multi_head_attention; not modelled)"
    if fp8_transpose:  # a Hopper GPU (the only kind with an FP8 transpose)
        return None, ("NVFP4 training on a Hopper GPU (Transformer Engine needs compute capability 10.0 or higher "
                      "for NVFP4)")
    attention = None
    if settings.get("fp8_dot_product_attention"):
        attention, why = _nvfp4_attention(r)
        if why or attention is None:
            return None, why
    bf16_layers = bool(settings.get("first_last_layers_bf16"))
    return LowPrecision(
        recipe="nvfp4",
        params=bool(settings.get("fp4_param")),
        bf16_layers_start=int(settings.get("num_layers_at_start_in_bf16") or 0) if bf16_layers else 0,
        bf16_layers_end=int(settings.get("num_layers_at_end_in_bf16") or 0) if bf16_layers else 0,
        attention=attention not in (None, "bf16"),
        attention_recipe=attention if attention != "bf16" else None,
    ), ""


# Transformer Engine (d0067d0, DotProductAttention.init_fp8_metadata) under an NVFP4 autocast: the recipe that
# NVTE_DPA_FP8_RECIPE makes attention run under ("F16": attention stays bf16).
_NVFP4_ATTENTION = {"Float8CurrentScaling": "tensorwise", "MXFP8BlockScaling": "mxfp8", "F16": "bf16"}


def _nvfp4_attention(r: Reader) -> tuple[str | None, str]:
    """(the recipe fp8_dot_product_attention runs under with NVFP4 linears, "bf16" when it is switched off, None
    when unknown; why there is no verdict, or ""). Transformer Engine keeps the NVFP4 recipe for attention unless
    NVTE_DPA_FP8_RECIPE names another, and with it disables every backend in training (fused attention for NVFP4,
    flash attention 2/4 for FP8, 3 for FP8 training, unfused attention for FP8 without emulation)."""
    value = r.lookup("env.NVTE_DPA_FP8_RECIPE")
    if value.is_unknown:
        r.unknown[value.key] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
            " (FP8 attention under NVFP4 runs under the recipe it names)"
        return None, ""
    name = str(value.value or "")
    if name in _NVFP4_ATTENTION:
        return _NVFP4_ATTENTION[name], ""
    if not name:
        return None, ("FP8 attention under NVFP4 without NVTE_DPA_FP8_RECIPE (Transformer Engine then has no "
                      "attention backend for training)")
    return None, f"FP8 attention under NVFP4 with NVTE_DPA_FP8_RECIPE={name!r} (not modelled)"
