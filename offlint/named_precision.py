"""A `mixed_precision` name applied as Megatron Bridge applies it when the run starts.

Bridge holds a name ("bf16_mixed") until runtime_config_update calls get_mixed_precision_config(name) and
MixedPrecisionConfig.setup copies the record it returns over the model, optimizer and DDP configs (a field left at
its default too). What a name builds is read from the linted tree's own training/mixed_precision.py when the tree
has it (sources/bridge_precision.py, kept on the unit); only a tree without it (a project that pip-installs Bridge)
gets the records of offlint's table below, which holds Megatron Bridge 067f987's recipes. The estimate and OFL117
read the record as they read a MixedPrecisionConfig(...) a recipe builds itself.
"""

from __future__ import annotations

from offlint.sources.bridge_precision import RESOLVER
from offlint.sources.python_values import Record
from offlint.types import Unknown, Value

FALLBACK_RELEASE = "Megatron Bridge 067f987"
# Not a configuration key: what ResolvedUnit.get answers with the tree's named precision recipes that the unit gives
# `mixed_precision` ((the tree's module, {name: record or Unknown}): Unit.precision_recipes), for what applies a
# name as Bridge does when the run starts (`configured`); a default None where the tree has none.
PRECISION_RECIPES = "<precision recipes>"

# MixedPrecisionConfig's defaults at 067f987 for the fields offlint reads (training/mixed_precision.py).
_DEFAULTS = dict(fp32=False, fp16=False, bf16=False, params_dtype=None, grad_reduce_in_fp32=True, fp8=None,
                 fp8_recipe="tensorwise", first_last_layers_bf16=False, fp8_amax_history_len=1,
                 fp8_dot_product_attention=False, fp8_multi_head_attention=False, fp8_param=None,
                 fp8_param_gather=False, fp4=None, fp4_recipe="nvfp4", fp4_param=None, fp4_param_gather=False,
                 num_layers_at_start_in_bf16=0, num_layers_at_end_in_bf16=0)
_BF16 = dict(bf16=True, params_dtype="torch.bfloat16", grad_reduce_in_fp32=True)
_FP16 = dict(fp16=True, params_dtype="torch.half", grad_reduce_in_fp32=False)
_DELAYED = dict(fp8="hybrid", fp8_recipe="delayed", fp8_amax_history_len=1024, fp8_param_gather=True)
_MXFP8 = dict(fp8="e4m3", fp8_recipe="mxfp8", fp8_param_gather=True)
_CURRENT = dict(fp8="hybrid", fp8_recipe="tensorwise", first_last_layers_bf16=True, num_layers_at_start_in_bf16=1,
                num_layers_at_end_in_bf16=1, fp8_param_gather=True)
_SUBCHANNEL = dict(fp8="hybrid", fp8_recipe="blockwise", fp8_param_gather=False)
_NVFP4 = dict(fp8=None, fp4="e2m1", fp4_recipe="nvfp4", fp8_param_gather=False, fp4_param_gather=True)
# Each named recipe of that release: bf16_mixed() or fp16_mixed() with the FP8/FP4 fields its function changes.
FALLBACK: dict[str, dict] = {
    "bf16_mixed": _BF16, "fp16_mixed": _FP16,
    "bf16_with_fp8_delayed_scaling_mixed": {**_BF16, **_DELAYED},
    "fp16_with_fp8_delayed_scaling_mixed": {**_FP16, **_DELAYED},
    "bf16_with_mxfp8_mixed": {**_BF16, **_MXFP8}, "fp16_with_mxfp8_mixed": {**_FP16, **_MXFP8},
    "bf16_with_fp8_current_scaling_mixed": {**_BF16, **_CURRENT},
    "fp16_with_fp8_current_scaling_mixed": {**_FP16, **_CURRENT},
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": {**_BF16, **_CURRENT, "num_layers_at_start_in_bf16": 2,
                                                       "num_layers_at_end_in_bf16": 2},
    "nanov2_bf16_with_fp8_current_scaling_mixed": {**_BF16, **_CURRENT, "fp8_recipe": "blockwise",
                                                   "num_layers_at_start_in_bf16": 2, "num_layers_at_end_in_bf16": 2},
    "bf16_with_fp8_subchannel_scaling_mixed": {**_BF16, **_SUBCHANNEL},
    "fp16_with_fp8_subchannel_scaling_mixed": {**_FP16, **_SUBCHANNEL},
    "bf16_with_nvfp4_mixed": {**_BF16, **_NVFP4},
    "nemotron_3_super_bf16_with_nvfp4_mixed": {**_BF16, **_NVFP4, "first_last_layers_bf16": True,
                                               "num_layers_at_end_in_bf16": 14},
}


def configured(lookup) -> tuple[Value, str]:
    """`mixed_precision` as MixedPrecisionConfig.setup gets it: a name becomes the record it builds (an unknown
    value where that is not known: Bridge raises on a name it does not register); and, for a name, where its
    record came from (the tree's module, or offlint's table), "" for any other value (returned as it is)."""
    mixed = lookup("mixed_precision")
    if mixed.state != "known" or not isinstance(mixed.value, str):
        return mixed, ""
    name = mixed.value
    tree = lookup(PRECISION_RECIPES)
    if tree.state == "known" and isinstance(tree.value, tuple):
        path, recipes = tree.value
        found = recipes.get(name, Unknown(f"the precision recipe {name!r} was not read from {path}"))
        where = f"mixed_precision={name!r} as {path}'s {RESOLVER}() builds it"
    else:
        fields = FALLBACK.get(name.replace("-", "_"))
        found = Record("MixedPrecisionConfig", {**_DEFAULTS, **fields}, plain=True) if fields is not None else \
            Unknown(f"the precision recipe {name!r}, which is not one of {FALLBACK_RELEASE}'s (offlint's table, "
                    f"for a tree without training/mixed_precision.py; Bridge raises on a name it does not register)")
        where = (f"mixed_precision={name!r} from offlint's table of {FALLBACK_RELEASE}'s precision recipes (the tree "
                 f"has no training/mixed_precision.py)")
    if isinstance(found, Unknown):
        return Value(mixed.key, "unknown", found, mixed.assignment), where
    return Value(mixed.key, "known", found, mixed.assignment), where


def resolving(lookup):
    """`lookup` with `mixed_precision` as `configured` gives it."""
    held: list = []

    def get(key: str) -> Value:
        if key != "mixed_precision":
            return lookup(key)
        if not held:
            held.append(configured(lookup)[0])
        return held[0]

    # the megatron-core version the wrapped lookup resolves against (a ResolvedUnit's `get` carries it: reader.before)
    get.version = getattr(getattr(lookup, "__self__", None), "version", None) or getattr(lookup, "version", None)
    return get
