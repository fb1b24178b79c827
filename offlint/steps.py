"""What a probe run is, and the interface of the engines that run it (a local subprocess, torchrun, Slurm).

Bisect and replay describe each run as a `Step` and hand a batch of them to a `StepRunner`; the runner starts
them (concurrently for a k-ary round), waits, and returns one `StepResult` per step. The runner knows how
to execute and cancel; it never decides what an outcome means (that is classification's job), so a Slurm
runner can replace the local one without touching the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Step:
    name: str  # unique within a bisect, e.g. "3f2a9c1-try1"; used for log and job names
    argv: tuple[str, ...]
    cwd: Path
    log: Path  # stdout and stderr together
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)  # added to (and overriding) the inherited environment
    gpus: int = 0  # GPUs the step needs (0: a CPU probe)


@dataclass(frozen=True)
class StepResult:
    step: Step
    exit_code: int | None  # None when the process was killed by a signal or never ran
    signal: int | None  # the signal that ended it (9 for SIGKILL), if any
    timed_out: bool
    duration_s: float
    job_id: str | None = None  # the scheduler's id (Slurm), for the journal and re-attaching
    scheduler_state: str | None = None  # e.g. Slurm's COMPLETED / OUT_OF_MEMORY / NODE_FAIL


class StepRunner(Protocol):
    def run(self, steps: Sequence[Step]) -> list[StepResult]:
        """Run every step (concurrently where the engine can), return results in the same order.

        On KeyboardInterrupt the runner cancels or kills everything it started before re-raising.
        """
        ...

    def cancel_all(self) -> None:
        """Stop every step this runner started and has not collected (idempotent)."""
        ...
