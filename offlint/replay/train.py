"""The program every rank of a replay runs: a short megatron-core training job on synthetic tokens.

`python -m offlint.replay.train --spec RUN/spec.json --out-dir RUN` (under torchrun for several GPUs). Each
rank writes RUN/rank-NNNNN.json, whatever happens: an exception becomes the part's outcome and signature
(CUDA OOM, NCCL, anything else), so the launcher can merge and classify without reading logs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import time
import traceback
from pathlib import Path

import torch

from offlint.outcomes import Outcome
from offlint.replay import build
from offlint.replay.result import classify_exception, rank_part_path, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    part = {"rank": rank, "outcome": Outcome.PASS.value, "signature": None, "phase": "setup", "loss": [],
            "iteration_time_s": [], "versions": versions(), "config": spec, "offload": {}}
    try:
        run(spec, part)
    except BaseException as exc:  # every failure is the result, classified; KeyboardInterrupt included
        traceback.print_exc()
        outcome, signature = classify_exception(exc)
        if isinstance(exc, KeyboardInterrupt):
            outcome, signature = Outcome.ABORTED, "interrupted"
        part["outcome"], part["signature"] = outcome.value, signature
    finally:
        record_memory(part)
        write_json(rank_part_path(Path(args.out_dir), rank), part)
    raise SystemExit(0 if part["outcome"] == Outcome.PASS.value else 1)


def versions() -> dict:
    out = {"torch": torch.__version__, "megatron_core": None, "transformer_engine": build.transformer_engine_version(),
           "cuda": torch.version.cuda, "gpu_name": None}
    try:
        from megatron.core import package_info

        out["megatron_core"] = package_info.__version__
    except Exception:
        pass
    if torch.cuda.is_available():
        out["gpu_name"] = torch.cuda.get_device_name()
    return out


def run(spec: dict, part: dict) -> None:
    from megatron.core import parallel_state
    from megatron.core.distributed import finalize_model_grads
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to this rank (torch.cuda.is_available() is False)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    limit_memory(spec["train"].get("gpu_memory_gb"), part)
    torch.distributed.init_process_group("nccl")
    p = spec["parallel"]
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=p["tensor_model_parallel_size"],
        pipeline_model_parallel_size=p["pipeline_model_parallel_size"],
        context_parallel_size=p["context_parallel_size"],
        expert_model_parallel_size=p["expert_model_parallel_size"],
        expert_tensor_parallel_size=p["expert_tensor_parallel_size"])
    seed = spec["train"]["seed"]
    torch.manual_seed(seed)
    model_parallel_cuda_manual_seed(seed)

    te_version = build.transformer_engine_version()
    model_kwargs, activation_report = build.activation_offload(spec["model"], te_version is not None)
    part["offload"]["activation"] = activation_report
    part["phase"] = "config"
    config, optimizer_config, ddp_config, dropped = build.build_configs({**spec, "model": model_kwargs})
    part["dropped_keys"] = dropped
    part["phase"] = "build"
    layer_spec, part["offload"]["layer_spec"] = build.layer_spec(config, te_version is not None)
    model = build.wrap_model(build.build_model(config, spec, layer_spec), config, ddp_config)
    before_optimizer = torch.cuda.memory_allocated()
    marks = part["memory_marks_bytes"] = {"model_built": before_optimizer}
    optimizer = build.build_optimizer(optimizer_config, [model])
    marks["optimizer_built"] = torch.cuda.memory_allocated()
    part["offload"]["optimizer"] = build.optimizer_offload_report(optimizer)
    config.finalize_model_grads_func = finalize_model_grads
    config.grad_scale_func = optimizer.scale_loss
    config.no_sync_func = model.no_sync

    part["phase"] = "train"
    if spec["train"].get("manual_gc"):
        # what Bridge's and Megatron-LM's training loops do with train.manual_gc / --manual-gc before the first
        # step; it also frees what only reference cycles hold, such as the first HybridDeviceOptimizer that
        # get_megatron_optimizer builds and the DistributedOptimizer replaces (docs/gpu-validation.md)
        gc.disable()
        gc.collect()
    forward_backward = get_forward_backward_func()
    data = synthetic_batches(spec, parallel_state.get_data_parallel_rank())
    train = spec["train"]
    for iteration in range(train["iters"]):
        torch.cuda.synchronize()
        started = time.perf_counter()
        model.zero_grad_buffer()
        optimizer.zero_grad()
        losses = forward_backward(forward_step_func=forward_step, data_iterator=data, model=[model],
                                  num_microbatches=train["num_microbatches"], seq_length=train["seq_length"],
                                  micro_batch_size=train["micro_batch_size"], forward_only=False)
        torch.cuda.synchronize()
        stepping = time.perf_counter()
        if iteration == 0:  # what forward and backward alone reach, before the optimizer's state exists
            marks["forward_backward_peak"] = torch.cuda.max_memory_allocated()
        optimizer.step()
        torch.cuda.synchronize()
        part["iteration_time_s"].append(time.perf_counter() - started)
        part.setdefault("optimizer_step_time_s", []).append(time.perf_counter() - stepping)
        # what the whole device has in use after the step: PyTorch's reserved pool (which keeps its peak) plus what
        # lies outside it (CUDA context, NCCL, library workspaces): the figure an OOM is decided against
        free, total = torch.cuda.mem_get_info()
        part["device_used_bytes"] = max(part.get("device_used_bytes", 0), total - free)
        if iteration == 0:
            part["optimizer_gpu_bytes"] = torch.cuda.memory_allocated() - before_optimizer
            marks["after_first_step"] = torch.cuda.memory_allocated()
            marks["first_step_peak"] = torch.cuda.max_memory_allocated()
        if parallel_state.is_pipeline_last_stage(ignore_virtual=True):
            part["loss"].append(mean_loss(losses, parallel_state.get_data_parallel_group()))
    part["phase"] = "done"
    torch.distributed.barrier()
    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()


def limit_memory(gpu_memory_gb: float | None, part: dict) -> None:
    """`--gpu-memory GB`: cap this process's share of the device through the caching allocator."""
    if not gpu_memory_gb:
        return
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    limit = int(gpu_memory_gb * 2**30)
    if limit > total:
        raise ValueError(f"--gpu-memory {gpu_memory_gb} GiB is more than this GPU's {total / 2**30:.1f} GiB")
    torch.cuda.set_per_process_memory_fraction(limit / total)
    part["gpu_memory_limit_bytes"] = limit


def synthetic_batches(spec: dict, data_parallel_rank: int):
    """Fixed-seed random tokens: identical on every tensor/pipeline rank of a data-parallel replica."""
    train = spec["train"]
    generator = torch.Generator().manual_seed(train["seed"] * 1000 + data_parallel_rank)
    batch, length = train["micro_batch_size"], train["seq_length"]
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None].cuda()
    positions = torch.arange(length).unsqueeze(0).expand(batch, length).cuda()
    while True:
        tokens = torch.randint(0, train["vocab_size"], (batch, length + 1), generator=generator).cuda()
        yield {"tokens": tokens[:, :-1].contiguous(), "labels": tokens[:, 1:].contiguous(),
               "position_ids": positions, "attention_mask": mask}


def forward_step(data_iterator, model):
    batch = next(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], batch["attention_mask"], labels=batch["labels"])

    def loss_func(output_tensor):
        loss = output_tensor.float().mean()
        return loss, {"lm loss": loss.detach().clone()}

    return output, loss_func


def mean_loss(losses: list[dict], data_parallel_group) -> float:
    """The iteration's loss: the mean over micro-batches, averaged across data-parallel replicas."""
    value = torch.stack([item["lm loss"] for item in losses]).mean()
    torch.distributed.all_reduce(value, group=data_parallel_group)
    return (value / torch.distributed.get_world_size(data_parallel_group)).item()


def record_memory(part: dict) -> None:
    part["host_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        part["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        part["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()


if __name__ == "__main__":
    main()
