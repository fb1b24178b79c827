"""The outcome classes of a probe run, shared by replay (its result file and exit code), bisect and Slurm.

One vocabulary everywhere: a replay writes `"outcome": "cuda-oom"`, its exit code says the same, bisect's
`--bad-on cuda-oom` selects it, and a Slurm job state maps onto it.
"""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    PASS = "pass"
    CUDA_OOM = "cuda-oom"  # torch.OutOfMemoryError / "CUDA out of memory"
    HOST_OOM_KILL = "host-oom-kill"  # exit 137 / SIGKILL / Slurm OUT_OF_MEMORY
    CRASH = "crash"  # an exception, with its signature (type and message)
    NCCL_ERROR = "nccl-error"
    TIMEOUT = "timeout"
    SEGFAULT = "segfault"  # SIGSEGV / SIGBUS / SIGABRT
    BUILD_FAILURE = "build-failure"  # cannot build or import at this commit: a skip, never a verdict
    LOSS_DIVERGENCE = "loss-divergence"  # from a replay result file, against the good end
    MEMORY_REGRESSION = "memory-regression"  # peak above the good end by a threshold, or above a budget
    INFRA_FAILURE = "infra-failure"  # NODE_FAIL, BOOT_FAIL, PREEMPTED: retried, never a verdict
    ABORTED = "aborted"  # cancelled by offlint (Ctrl-C, abort)

    @property
    def is_failure(self) -> bool:
        return self not in (Outcome.PASS, Outcome.BUILD_FAILURE, Outcome.INFRA_FAILURE, Outcome.ABORTED)


FAILURE_CLASSES = tuple(o for o in Outcome if o.is_failure)

# `offlint replay` exit codes, one per outcome, so a launcher that sees only the exit status still classifies.
# 2 stays the usage-error code of every offlint command (bad input, no CUDA).
REPLAY_EXIT_CODES = {
    Outcome.PASS: 0,
    Outcome.CUDA_OOM: 3,
    Outcome.CRASH: 4,
    Outcome.NCCL_ERROR: 5,
    Outcome.LOSS_DIVERGENCE: 6,
    Outcome.MEMORY_REGRESSION: 7,
}
