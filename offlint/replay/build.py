"""Build megatron-core's own objects from a replay spec: configs, GPTModel, DDP, `get_megatron_optimizer`.

Imported only where torch and megatron-core are installed (the ranks of a replay, and the CPU tests that
construct the configs and the model for real). Nothing here is offlint-specific logic about offloading: the
point of a replay is that megatron-core's code decides.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import torch

ACTIVATION_OFFLOAD_KEYS = ("cpu_offloading", "fine_grained_activation_offloading")
FINE_GRAINED_EXTRAS = ("offload_modules", "min_offloaded_tensor_size", "activation_offload_fraction")


def to_dtype(value):
    if isinstance(value, str) and value.startswith("torch.") and isinstance(getattr(torch, value[6:], None),
                                                                           torch.dtype):
        return getattr(torch, value[6:])
    return value


def accepted(cls, kwargs: dict) -> tuple[dict, list[str]]:
    """The kwargs `cls` has fields for (dtype names converted), and the names it does not know."""
    names = {f.name for f in dataclasses.fields(cls)}
    return ({k: to_dtype(v) for k, v in kwargs.items() if k in names}, sorted(k for k in kwargs if k not in names))


def transformer_engine_version() -> str | None:
    if importlib.util.find_spec("transformer_engine") is None:
        return None
    try:
        import transformer_engine

        return getattr(transformer_engine, "__version__", "unknown")
    except Exception:  # an installed but broken TE counts as absent
        return None


def activation_offload(model_kwargs: dict, te_available: bool) -> tuple[dict, dict]:
    """Keep activation offloading when TE can run it; otherwise switch it off and say so in the report."""
    requested = [k for k in ACTIVATION_OFFLOAD_KEYS if model_kwargs.get(k)]
    report = {"requested": requested, "replayed": bool(requested) and te_available, "note": None}
    if requested and not te_available:
        model_kwargs = {k: v for k, v in model_kwargs.items()
                        if k not in ACTIVATION_OFFLOAD_KEYS + FINE_GRAINED_EXTRAS}
        report["note"] = (f"activation offloading ({', '.join(requested)}) could not be replayed: Transformer "
                          f"Engine is not installed, and megatron-core needs it for activation offloading; this "
                          f"run had activation offloading off")
    return model_kwargs, report


def build_configs(spec: dict, cpu: bool = False):
    """TransformerConfig, OptimizerConfig and DistributedDataParallelConfig, built and validated for real."""
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import TransformerConfig

    model_kwargs = dict(spec["model"])
    if cpu:
        model_kwargs["use_cpu_initialization"] = True
    model, dropped_model = accepted(TransformerConfig, model_kwargs)
    optimizer, dropped_optimizer = accepted(OptimizerConfig, spec["optimizer"])
    ddp, dropped_ddp = accepted(DistributedDataParallelConfig, spec["ddp"])
    dropped = [f"model.{k}" for k in dropped_model] + [f"optimizer.{k}" for k in dropped_optimizer] + \
        [f"ddp.{k}" for k in dropped_ddp]
    return TransformerConfig(**model), OptimizerConfig(**optimizer), DistributedDataParallelConfig(**ddp), dropped


def layer_spec(config, te_available: bool):
    """The Transformer Engine layer spec when TE imports, megatron-core's local spec otherwise."""
    from megatron.core.models.gpt import gpt_layer_specs

    kwargs = {"num_experts": config.num_moe_experts, "moe_grouped_gemm": config.moe_grouped_gemm,
              "qk_layernorm": config.qk_layernorm}
    if te_available:
        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(**kwargs), "transformer_engine"
    return gpt_layer_specs.get_gpt_layer_local_spec(**kwargs, normalization=config.normalization), "local"


def build_model(config, spec: dict, transformer_layer_spec):
    """One GPTModel chunk for this pipeline stage."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel

    return GPTModel(config=config, transformer_layer_spec=transformer_layer_spec,
                    vocab_size=spec["train"]["vocab_size"], max_sequence_length=spec["train"]["seq_length"],
                    pre_process=parallel_state.is_pipeline_first_stage(ignore_virtual=True),
                    post_process=parallel_state.is_pipeline_last_stage(ignore_virtual=True), **spec["gpt"])


def wrap_model(model, config, ddp_config):
    """What Megatron's get_model does: Float16Module for bf16/fp16, then megatron-core DDP (CUDA only)."""
    from megatron.core.distributed import DistributedDataParallel
    from megatron.core.transformer.module import Float16Module

    model = model.cuda(torch.cuda.current_device())
    if config.bf16 or config.fp16:
        model = Float16Module(config, model)
    return DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)


def build_optimizer(optimizer_config, model_chunks: list):
    from megatron.core.optimizer import get_megatron_optimizer

    return get_megatron_optimizer(optimizer_config, model_chunks)


def inner_optimizers(optimizer) -> list:
    """The torch-level optimizers under megatron-core's wrappers (ChainedOptimizer, DistributedOptimizer, ...)."""
    found, stack = [], [optimizer]
    while stack:
        item = stack.pop()
        if hasattr(item, "chained_optimizers"):
            stack.extend(item.chained_optimizers)
        elif isinstance(getattr(item, "optimizer", None), torch.optim.Optimizer):
            stack.append(item.optimizer)
        elif isinstance(item, torch.optim.Optimizer):
            found.append(item)
    return found


def optimizer_offload_report(optimizer) -> dict:
    """What went through HybridDeviceOptimizer: how many parameters its CPU side holds, which classes ran."""
    from megatron.core.optimizer.cpu_offloading.hybrid_optimizer import HybridDeviceOptimizer

    hybrids = [o for o in inner_optimizers(optimizer) if isinstance(o, HybridDeviceOptimizer)]
    total = sum(p.numel() for o in hybrids for g in o.param_groups for p in g["params"])
    offloaded = sum(p.numel() for o in hybrids for p in o.gpu_params_map_cpu_copy)
    inner = inner_optimizers(optimizer)
    return {
        "hybrid_device_optimizer": bool(hybrids),
        "inner_optimizers": sorted({type(o).__name__ for o in inner}),
        "offload_fraction": hybrids[0].offload_fraction if hybrids else None,
        "offloaded_param_numel": offloaded,
        "param_numel": total if hybrids else sum(p.numel() for o in inner for g in o.param_groups
                                                for p in g["params"]),
        "offloaded_share": offloaded / total if total else 0.0,
        "cpu_optimizers": sum(len(o.cpu_optimizers) for o in hybrids),
        "gpu_optimizer": next((type(o.gpu_optimizer).__name__ for o in hybrids if o.gpu_optimizer), None),
    }
