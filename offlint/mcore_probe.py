"""Ask the real megatron-core whether it accepts a configuration. Runs in its own process.

Started as `python -m offlint.mcore_probe` in an environment where `megatron.core` imports (the installed
package, or a Megatron-LM source tree on PYTHONPATH), so several megatron-core versions can be asked from
one offlint process. Protocol: JSON lines. The first line out is `{"version": "..."}`; then for each request
line `{"id": .., "model": {kwargs} | null, "optimizer": {kwargs} | null}` one answer line
`{"id": .., "model": verdict, "optimizer": verdict, "optimizer_build": verdict}`, where a verdict is
`{"ok": true}`, `{"ok": false, "error": "ValueError: message"}`, `{"ok": null, "environment": "..."}` when this
environment cannot judge it (an ImportError: Transformer Engine or a module this release lacks; TE's missing version
compared), or null when not asked. Keys the release's config class has no field for are left out and listed in
the verdict's "ignored" (a field of a newer release, or a Bridge provider's own).

Only values offlint resolved are passed (plain JSON: numbers, strings, lists, booleans); dtype names such
as "torch.bfloat16" become torch dtypes. Nothing from the linted files is imported or executed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings

MODEL_BASE = {"num_layers": 4, "hidden_size": 64, "num_attention_heads": 4}
CUDA_MISSING = ("Torch not compiled with CUDA enabled", "torch.cuda.Stream requires CUDA support")


def _dtype(torch, value):
    if isinstance(value, str) and value.startswith("torch.") and hasattr(torch, value[len("torch."):]):
        return getattr(torch, value[len("torch."):])
    return value


# What the probe's own environment raises, not the configuration: a CPU machine without Transformer Engine (megatron-
# core imports TE's fused kernels, or compares TE's version, None here, when a setting needs them).
ENVIRONMENT_TEXTS = ("'>=' not supported between instances of 'NoneType' and 'Version'",
                     "requires FusedAdam from TransformerEngine, but not found", "Please install TE >=")


def _error(exc: BaseException) -> dict:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError) or any(part in text for part in ENVIRONMENT_TEXTS):
        return {"ok": None, "environment": text}
    return {"ok": False, "error": text}


def _known(cls, kwargs: dict) -> tuple[dict, list[str]]:
    """`kwargs` less the keys `cls` (a config dataclass) has no field for, and those keys."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in kwargs.items() if k in fields}, sorted(set(kwargs) - fields)


def _noting(verdict: dict, ignored: list[str]) -> dict:
    return {**verdict, "ignored": ignored} if ignored else verdict


class Probe:
    def __init__(self) -> None:
        warnings.filterwarnings("ignore")
        import torch
        from megatron.core import package_info
        from megatron.core.optimizer import OptimizerConfig
        from megatron.core.transformer.transformer_config import TransformerConfig

        self.torch = torch
        self.version = package_info.__version__
        self.transformer_config = TransformerConfig
        self.optimizer_config = OptimizerConfig

    def model(self, kwargs: dict) -> dict:
        kwargs, ignored = _known(self.transformer_config, kwargs)
        kwargs = {**MODEL_BASE, **{k: _dtype(self.torch, v) for k, v in kwargs.items()}}
        if kwargs.get("pipeline_model_parallel_size", 1) > 1 and kwargs.get("pipeline_dtype") is None:
            kwargs["pipeline_dtype"] = self.torch.bfloat16  # what Bridge's finalize() supplies
        try:
            self.transformer_config(**kwargs)
        except Exception as exc:  # megatron-core's own verdict, whatever its type
            return _noting(_error(exc), ignored)
        return _noting({"ok": True}, ignored)

    def optimizer(self, kwargs: dict) -> tuple[dict, dict | None]:
        kwargs, ignored = _known(self.optimizer_config, kwargs)
        kwargs = {"lr": 1e-4, **{k: _dtype(self.torch, v) for k, v in kwargs.items()}}
        try:
            config = self.optimizer_config(**kwargs)
        except Exception as exc:
            return _noting(_error(exc), ignored), None
        if not config.optimizer_cpu_offload:
            return _noting({"ok": True}, ignored), None
        return _noting({"ok": True}, ignored), self._optimizer_build(config)

    def _optimizer_build(self, config) -> dict:
        """The checks get_megatron_optimizer makes before it needs a GPU (OB-4), on a tiny CPU module."""
        from megatron.core import optimizer as optimizer_module

        build = getattr(optimizer_module, "_get_megatron_optimizer_based_on_param_groups", None)
        if build is None:
            return {"ok": True, "note": "no _get_megatron_optimizer_based_on_param_groups in this version"}
        module = self.torch.nn.Linear(4, 4)
        try:
            build(config, [module], [{"params": list(module.parameters())}])
        except Exception as exc:
            if any(text in str(exc) for text in CUDA_MISSING):
                return {"ok": True, "note": "stopped at the first step that needs CUDA"}
            return _error(exc)
        return {"ok": True}

    def answer(self, request: dict) -> dict:
        out: dict = {"id": request.get("id"), "model": None, "optimizer": None, "optimizer_build": None}
        if request.get("model") is not None:
            out["model"] = self.model(request["model"])
        if request.get("optimizer") is not None:
            out["optimizer"], out["optimizer_build"] = self.optimizer(request["optimizer"])
        return out


def main() -> None:
    try:
        probe = Probe()
    except Exception as exc:  # megatron-core not importable: say so on the first line and stop
        print(json.dumps({"error": f"cannot import megatron.core: {type(exc).__name__}: {exc}"}), flush=True)
        sys.exit(3)
    print(json.dumps({"version": probe.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(probe.answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
