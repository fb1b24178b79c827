"""The replay result file: its schema, per-rank parts and their merge, outcome classification, exit codes.

Standard library only: `train.py` imports this on every rank of a GPU job, where offlint's own dependencies
may be absent. Bisect reads the merged file (`outcome`, `signature`) or, when none was written, classifies
from the exit status alone with `outcome_from_exit`.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from offlint.outcomes import REPLAY_EXIT_CODES, Outcome

SCHEMA_VERSION = 1
REQUIRED = ("outcome", "signature", "loss", "iteration_time_s", "peak_allocated_bytes", "peak_reserved_bytes",
            "host_peak_rss_bytes", "versions", "config", "offload")
VERSION_KEYS = ("torch", "megatron_core", "transformer_engine", "cuda", "gpu_name")
# When ranks disagree, the root cause is the most specific failure: a rank that ran out of memory makes its
# peers fail in NCCL next, so an NCCL error on one rank never hides an OOM or a crash on another.
RANK_PRIORITY = (Outcome.CUDA_OOM, Outcome.CRASH, Outcome.NCCL_ERROR, Outcome.PASS)
OOM_TEXTS = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED")
NCCL_TEXTS = ("NCCL", "DistBackendError", "ProcessGroupNCCL")


class ResultError(ValueError):
    """A result file that cannot be read (one line, for the CLI)."""


def classify_exception(exc: BaseException) -> tuple[Outcome, str]:
    """An exception raised on a rank -> its outcome and signature ("Type: first line of the message")."""
    name = type(exc).__name__
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return classify_signature(name, message), f"{name}: {message}" if message else name


def classify_signature(name: str, message: str) -> Outcome:
    text = f"{name}: {message}"
    if name == "OutOfMemoryError" or any(t in text for t in OOM_TEXTS):
        return Outcome.CUDA_OOM
    if any(t in text for t in NCCL_TEXTS):
        return Outcome.NCCL_ERROR
    return Outcome.CRASH


def outcome_from_exit(returncode: int | None, timed_out: bool = False) -> tuple[Outcome, str]:
    """A launcher exit status with no result written: a signal, the replay exit code, or a plain failure."""
    if timed_out:
        return Outcome.TIMEOUT, "timed out"
    if returncode is None:
        return Outcome.CRASH, "did not run"
    code = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if code == signal.SIGKILL:
        return Outcome.HOST_OOM_KILL, "killed by SIGKILL (host out of memory?)"
    if code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT):
        return Outcome.SEGFAULT, f"killed by {signal.Signals(code).name}"
    for outcome, exit_code in REPLAY_EXIT_CODES.items():
        if exit_code == returncode:
            return outcome, f"exit code {returncode}"
    return Outcome.CRASH, f"exit code {returncode}"


def exit_code_for(outcome: Outcome) -> int:
    """The `offlint replay` exit code: one per outcome; outcomes without their own code count as a crash."""
    return REPLAY_EXIT_CODES.get(outcome, REPLAY_EXIT_CODES[Outcome.CRASH])


def rank_part_path(folder: Path, rank: int) -> Path:
    return Path(folder) / f"rank-{rank:05d}.json"


def write_json(path: Path, data: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    temporary.replace(path)


def merge_ranks(parts: list[dict], world_size: int, launcher_exit: tuple[Outcome, str] | None = None) -> dict:
    """Per-rank parts -> one result: per-rank memory lists, the last pipeline stage's loss, the root-cause outcome.

    A rank that wrote nothing (killed, segfault) makes the merge fall back to the launcher's exit status.
    """
    parts = sorted(parts, key=lambda p: p["rank"])
    by_rank = {p["rank"]: p for p in parts}
    missing = [r for r in range(world_size) if r not in by_rank]
    outcome, signature, failed_rank = Outcome.PASS, None, None
    for candidate in RANK_PRIORITY:
        hits = [p for p in parts if p["outcome"] == candidate.value]
        if hits and candidate is not Outcome.PASS:
            outcome, signature, failed_rank = candidate, hits[0]["signature"], hits[0]["rank"]
            break
    if missing and outcome is Outcome.PASS:
        outcome, signature = launcher_exit or (Outcome.CRASH, "no result written")
        signature = f"{signature}; no result from rank(s) {', '.join(map(str, missing))}"
    loss_ranks = [p for p in parts if p.get("loss")]
    first = parts[0] if parts else {}
    result = {
        "schema": SCHEMA_VERSION,
        "outcome": outcome.value,
        "signature": signature,
        "failed_rank": failed_rank,
        "phase": next((p.get("phase") for p in parts if p["outcome"] != Outcome.PASS.value), None),
        "world_size": world_size,
        "loss": loss_ranks[-1]["loss"] if loss_ranks else [],
        "iteration_time_s": _slowest(parts, "iteration_time_s"),
        "peak_allocated_bytes": [by_rank.get(r, {}).get("peak_allocated_bytes") for r in range(world_size)],
        "peak_reserved_bytes": [by_rank.get(r, {}).get("peak_reserved_bytes") for r in range(world_size)],
        "optimizer_gpu_bytes": [by_rank.get(r, {}).get("optimizer_gpu_bytes") for r in range(world_size)],
        "memory_marks_bytes": [by_rank.get(r, {}).get("memory_marks_bytes") for r in range(world_size)],
        "device_used_bytes": [by_rank.get(r, {}).get("device_used_bytes") for r in range(world_size)],
        "optimizer_step_time_s": _slowest(parts, "optimizer_step_time_s"),
        "host_peak_rss_bytes": max((p.get("host_peak_rss_bytes") or 0 for p in parts), default=None),
        "versions": first.get("versions", {k: None for k in VERSION_KEYS}),
        "config": first.get("config", {}),
        "offload": first.get("offload", {}),
        "gpu_memory_limit_bytes": first.get("gpu_memory_limit_bytes"),
    }
    return result


def _slowest(parts: list[dict], key: str) -> list[float]:
    """Per iteration, the slowest rank's time: a step is done when every rank is."""
    times = [p.get(key) or [] for p in parts]
    length = max((len(t) for t in times), default=0)
    return [max(t[i] for t in times if len(t) > i) for i in range(length)]


def read_result(path: Path) -> dict:
    """Read and check a result file; ResultError (one line) when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultError(f"{path}: no such result file") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultError(f"{path}: not a replay result file ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a replay result file (expected a JSON object)")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ResultError(f"{path}: not a replay result file (missing {', '.join(missing)})")
    try:
        Outcome(data["outcome"])
    except ValueError:
        raise ResultError(f"{path}: unknown outcome {data['outcome']!r}") from None
    return data


def outcome_of(result: dict) -> Outcome:
    return Outcome(result["outcome"])


def peak_bytes(result: dict, kind: str = "allocated") -> int | None:
    """The largest per-rank peak (the rank that decides whether the job fits)."""
    values = [v for v in result.get(f"peak_{kind}_bytes") or [] if v is not None]
    return max(values) if values else None
