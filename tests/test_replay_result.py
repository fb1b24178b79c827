"""Replay result files: classification of real exceptions, the rank merge, reading and checking a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from offlint.outcomes import Outcome, REPLAY_EXIT_CODES
from offlint.replay.result import (REQUIRED, ResultError, classify_exception, exit_code_for, merge_ranks,
                                   read_result)

DATA = Path(__file__).resolve().parent / "data" / "replay"


@pytest.mark.parametrize("exc, outcome", [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), Outcome.CUDA_OOM),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"), Outcome.CUDA_OOM),
    (torch.distributed.DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"),
     Outcome.NCCL_ERROR),
    (KeyError("param"), Outcome.CRASH),
    (AssertionError(), Outcome.CRASH),
])
def test_exceptions_are_classified_with_their_signature(exc, outcome):
    got, signature = classify_exception(exc)
    assert got is outcome
    assert signature.startswith(type(exc).__name__) and "\n" not in signature


def _part(rank, outcome="pass", signature=None, loss=(), peak=100, times=(0.1, 0.2)):
    return {"rank": rank, "outcome": outcome, "signature": signature, "phase": "train", "loss": list(loss),
            "iteration_time_s": list(times), "peak_allocated_bytes": peak, "peak_reserved_bytes": peak + 10,
            "host_peak_rss_bytes": 1000 + rank, "versions": {"torch": "x"}, "config": {"unit": "u"},
            "offload": {}}


def test_merge_keeps_per_rank_memory_and_the_last_stage_loss():
    parts = [_part(0, peak=300), _part(1, peak=200, loss=[2.0, 1.5], times=(0.3, 0.1))]
    merged = merge_ranks(parts, 2)
    assert merged["outcome"] == "pass" and merged["signature"] is None
    assert merged["peak_allocated_bytes"] == [300, 200] and merged["peak_reserved_bytes"] == [310, 210]
    assert merged["loss"] == [2.0, 1.5]
    assert merged["iteration_time_s"] == [0.3, 0.2]
    assert merged["host_peak_rss_bytes"] == 1001
    assert set(REQUIRED) <= set(merged)


def test_merge_keeps_the_memory_marks_device_use_and_the_slowest_optimizer_step():
    first, second = _part(0), _part(1)
    first |= {"memory_marks_bytes": {"model_built": 5, "optimizer_built": 9}, "device_used_bytes": 120,
              "optimizer_step_time_s": [0.05, 0.30]}
    second |= {"memory_marks_bytes": {"model_built": 6, "optimizer_built": 8}, "device_used_bytes": 130,
               "optimizer_step_time_s": [0.07, 0.20]}
    merged = merge_ranks([second, first], 2)
    assert merged["memory_marks_bytes"] == [first["memory_marks_bytes"], second["memory_marks_bytes"]]
    assert merged["device_used_bytes"] == [120, 130]
    assert merged["optimizer_step_time_s"] == [0.07, 0.30]
    assert merge_ranks([_part(0)], 1)["optimizer_step_time_s"] == []  # results from before these fields


def test_an_oom_on_one_rank_outranks_the_nccl_errors_it_causes_on_others():
    parts = [_part(0, "nccl-error", "DistBackendError: NCCL communicator was aborted"),
             _part(1, "cuda-oom", "OutOfMemoryError: CUDA out of memory")]
    merged = merge_ranks(parts, 2)
    assert merged["outcome"] == "cuda-oom" and merged["failed_rank"] == 1
    assert exit_code_for(Outcome.CUDA_OOM) == REPLAY_EXIT_CODES[Outcome.CUDA_OOM]


def test_exit_codes_are_distinct_per_outcome():
    codes = [exit_code_for(o) for o in (Outcome.PASS, Outcome.CUDA_OOM, Outcome.CRASH, Outcome.NCCL_ERROR)]
    assert len(set(codes)) == 4 and 2 not in codes
    assert exit_code_for(Outcome.SEGFAULT) == exit_code_for(Outcome.CRASH)


def test_recorded_results_read_back():
    result = read_result(DATA / "baseline.json")
    assert result["outcome"] == "pass" and len(result["loss"]) == 20


@pytest.mark.parametrize("content, message", [
    (None, "no such result file"),
    ("{not json", "not a replay result file"),
    ('{"outcome": "pass"}', "missing signature"),
])
def test_bad_result_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ResultError) as info:
        read_result(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_outcome_is_rejected(tmp_path):
    data = json.loads((DATA / "baseline.json").read_text()) | {"outcome": "exploded"}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match="unknown outcome 'exploded'"):
        read_result(path)
