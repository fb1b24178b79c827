"""Which low-precision recipes Transformer Engine runs on which GPU (OFL117; docs/megatron-core-checks.md, TE-3).

megatron-core accepts any FP8 or FP4 recipe when it builds its config; Transformer Engine decides by the device's
compute capability only when the recipe is first used, so a recipe the GPU cannot run crashes after the job has
waited in the queue. What TE does (transformer_engine/pytorch/quantization.py at e7c550c, TE 2.18.0, the pin of
Megatron Bridge 067f987's uv.lock; unchanged at main d0067d0): entering `autocast` (megatron-core's
`get_fp8_context` / `get_fp4_context`, through `fp8_autocast`) first runs `check_recipe_support`, which raises
RuntimeError for DelayedScaling and Float8CurrentScaling below 8.9, Float8BlockScaling below 9.0 and MXFP8BlockScaling
outside [10.0, 12.0); then `FP8GlobalStateManager.autocast_enter` asserts FP8 support (8.9) for every recipe and
NVFP4 support (10.0) for NVFP4BlockScaling. With NVFP4 primary weights (`fp4_param`), the model's construction
already quantizes each weight (`reset_parameters` under `quantized_model_init`, which checks nothing), and the
NVFP4 kernels built for older GPUs stop with a device-side assert ("sm_100 or higher is required.").

The GPU is the one the unit's name names (Bridge's `..._2gpu_h100_fp8mx_config`; a launch's name holds its
`--recipe`), else `[tool.offlint] gpu`; without either there is no verdict (offlint does not guess the device).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from offlint.config import ConfigError, load_config
from offlint.estimate.devices import CAPABILITY, DeviceError, parse_device
from offlint.named_precision import configured
from offlint.types import OneOf, Unknown, Value

# Transformer Engine's own messages (quantization.py, `_compute_*_support`).
FP8_MESSAGE = "Device compute capability 8.9 or higher required for FP8 execution."
BLOCK_MESSAGE = "FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9."
MXFP8_MESSAGE = "Device compute capability 10.0 or higher required for MXFP8 execution."
MXFP8_12_MESSAGE = "MXFP8 (for all gemm layouts) is not supported on 12.0+ architectures yet."
NVFP4_MESSAGE = "Device compute capability 10.0 or higher required for NVFP4 execution."
NVFP4_KERNEL_MESSAGE = "sm_100 or higher is required."

# megatron-core's recipe names (fp8_utils.get_fp8_recipe, fp4_utils.get_fp4_recipe) and TE's recipe classes.
RECIPES = {"delayed": "FP8 delayed scaling (DelayedScaling)", "tensorwise": "FP8 current scaling (Float8CurrentScaling)",
           "blockwise": "FP8 block scaling (Float8BlockScaling)", "mxfp8": "MXFP8 (MXFP8BlockScaling)",
           "nvfp4": "NVFP4 (NVFP4BlockScaling)", "custom": "a custom quantization recipe"}


def te_error(recipe: str, capability: tuple[int, int]) -> str:
    """What Transformer Engine raises when `recipe` is first used on a GPU of `capability` ("" when it runs)."""
    if recipe in ("delayed", "tensorwise") and capability < (8, 9):
        return f"RuntimeError: {FP8_MESSAGE}"
    if recipe == "blockwise" and capability < (9, 0):
        return f"RuntimeError: {BLOCK_MESSAGE}"
    if recipe == "mxfp8" and capability >= (12, 0):
        return f"RuntimeError: {MXFP8_12_MESSAGE}"
    if recipe == "mxfp8" and capability < (10, 0):
        return f"RuntimeError: {MXFP8_MESSAGE}"
    if capability < (8, 9):
        return f"AssertionError: {FP8_MESSAGE}"
    if recipe == "nvfp4" and capability < (10, 0):
        return f"AssertionError: {NVFP4_MESSAGE}"
    return ""


@dataclass(frozen=True)
class Verdict:
    refused: bool | None  # None: the precision is unknown
    message: str = ""
    keys: tuple[str, ...] = ()  # the keys that decided it (related locations; the unknown ones under --strict)


def verdict(lookup: Callable[[str], Value], cwd: str = "", gpu: str = "", gpu_from: str = "") -> Verdict:
    """Whether Transformer Engine refuses the unit's low-precision recipe on the unit's GPU, and what it says.
    `gpu`, `gpu_from`: the GPU token gpus.unit_gpu found for the unit and where it was named."""
    gpu, capability, origin = unit_gpu(cwd or str(Path.cwd()), gpu, gpu_from)
    if capability is None or (10, 0) <= capability < (12, 0):  # no device, or one that runs every recipe
        return Verdict(False)
    read: list[str] = []

    def recorded(key: str) -> Value:
        read.append(key)
        return lookup(key)

    precision = _precision(recorded)
    if precision is None:
        needs = "FP8 needs 8.9, MXFP8 and NVFP4 10.0" if capability < (8, 9) else "MXFP8 and NVFP4 need 10.0"
        return Verdict(None, f"the precision may be an FP8 or FP4 recipe that Transformer Engine refuses on {gpu} "
                             f"(compute capability {capability[0]}.{capability[1]}, {origin}; {needs})", tuple(read))
    recipe, fp4_param, written = precision
    error = te_error(recipe, capability) if recipe else ""
    if not error:
        return Verdict(False, keys=tuple(read))
    message = (f"{written} trains in {RECIPES.get(recipe, recipe)} on {gpu} (compute capability "
               f"{capability[0]}.{capability[1]}, {origin}): Transformer Engine raises \"{error}\" when the first "
               f"training step enters its autocast")
    if recipe == "nvfp4" and fp4_param:
        message += (f" (with NVFP4 primary weights, fp4_param, the model's construction stops before that, in TE's "
                    f"NVFP4 quantization kernel: device-side assert \"{NVFP4_KERNEL_MESSAGE}\")")
    message += f"\n{_remedy(recipe, capability)}"
    return Verdict(True, message, tuple(read))


def unit_gpu(cwd: str, gpu: str = "", gpu_from: str = "") -> tuple[str, tuple[int, int] | None, str]:
    """(the GPU, its compute capability or None when not known, where offlint took it from): `gpu`, the unit's own
    (gpus.unit_gpu: its name, card section or folder, named by `gpu_from`), else [tool.offlint] gpu."""
    if gpu:
        return gpu.upper(), CAPABILITY.get(gpu), f"named by {gpu_from}"
    name = _configured_gpu(cwd)
    if name is None:
        return "", None, ""
    try:
        device = parse_device(name)
    except DeviceError:
        return name, None, ""  # `offlint estimate` reports the bad setting
    return device.name, CAPABILITY.get(device.name), "from [tool.offlint] gpu"


@lru_cache(maxsize=8)
def _configured_gpu(cwd: str) -> str | None:
    try:
        return load_config(Path(cwd)).gpu
    except ConfigError:
        return None


_UNREAD = object()


def _settled(value: Value, default: object) -> object:
    """The value; `default` where it is unknown only because offlint did not see what built it (no code of the
    unit writes it: a recipe offlint could not find, a call it does not follow), as the engine keeps opt-in
    settings at their defaults under --strict (low precision is opted into); _UNREAD where the unit writes it
    unreadably or a branch decides it (the engine then judges each path)."""
    if not value.is_unknown:
        return value.value
    return default if value.assignment is None and not isinstance(value.value, OneOf) else _UNREAD


def _precision(lookup: Callable[[str], Value]) -> tuple[str, bool, str] | None:
    """(megatron-core's recipe name, "" for 16/32-bit GEMMs; FP4 primary weights; how the setting is written),
    or None when a value that decides it is unknown. Bridge's `mixed_precision` (a recipe name or a
    MixedPrecisionConfig) overwrites the model config's fields when set (update_config_with_precision_overrides);
    else the model's own `fp8` / `fp4` fields apply (megatron-core's defaults: off, "delayed", "nvfp4")."""
    mixed = _settled(lookup("mixed_precision"), None)
    if mixed is _UNREAD:
        return None
    if mixed is None:
        fp8, fp4 = _settled(lookup("model.fp8"), None), _settled(lookup("model.fp4"), None)
        if _UNREAD in (fp8, fp4):
            return None
        if not (fp8 or fp4) or (fp8 and fp4):  # both: TransformerConfig refuses it first
            return "", False, ""
        kind = "fp4" if fp4 else "fp8"
        recipe = _settled(lookup(f"model.{kind}_recipe"), "nvfp4" if fp4 else "delayed")
        fp4_param = _settled(lookup("model.fp4_param"), False) if fp4 else False
        if _UNREAD in (recipe, fp4_param):
            return None
        return str(recipe), bool(fp4_param), f"model.{kind}_recipe={recipe!r}"
    if isinstance(mixed, str):  # a recipe's name: the record it builds (the tree's, else offlint's table)
        built = configured(lookup)[0]
        if built.state != "known":
            name = mixed.replace("-", "_")
            return None if "fp8" in name or "fp4" in name else ("", False, "")
        found = _from_record(built.value)
        return found if not found or not found[0] else (found[0], found[1], f"mixed_precision={mixed!r}")
    return _from_record(mixed)


def _from_record(mixed: object) -> tuple[str, bool, str] | None:
    """_precision's answer for a MixedPrecisionConfig record."""
    fields = getattr(mixed, "fields", None)
    if not isinstance(fields, dict):
        return None
    fp8, fp4 = fields.get("fp8"), fields.get("fp4")
    if isinstance(fp8, Unknown) or isinstance(fp4, Unknown):
        return None
    if fp8 and fp4:
        return "", False, ""  # MixedPrecisionConfig.finalize raises first: fp4 and fp8 cannot be used together
    kind = "fp4" if fp4 else "fp8" if fp8 else ""
    if not kind:
        return "", False, ""
    recipe = fields.get(f"{kind}_recipe", "nvfp4" if kind == "fp4" else "tensorwise")  # the dataclass defaults
    fp4_param = fields.get("fp4_param")
    fp4_param = fields.get("fp4_param_gather") if fp4_param is None else fp4_param  # MixedPrecisionConfig.finalize
    if isinstance(recipe, Unknown) or (kind == "fp4" and isinstance(fp4_param, Unknown)):
        return None
    return str(recipe), bool(fp4_param), f"mixed_precision ({kind}_recipe={recipe!r})"


def _remedy(recipe: str, capability: tuple[int, int]) -> str:
    if capability < (8, 9):
        return ("Train in bf16 (bf16_mixed) on this GPU, or run on Hopper (FP8: H100, H200) or Blackwell (MXFP8, "
                "NVFP4: B200, GB200)")
    if recipe == "mxfp8" and capability >= (12, 0):
        return "Use FP8 current scaling (bf16_with_fp8_current_scaling_mixed) or NVFP4 on this GPU"
    return ("Run it on a Blackwell GPU (compute capability 10.x: B200, GB200, B300), or use a recipe this GPU runs: "
            "FP8 current scaling (bf16_with_fp8_current_scaling_mixed) or block scaling "
            "(bf16_with_fp8_subchannel_scaling_mixed)")
