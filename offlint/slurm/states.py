"""Slurm job states and what each one means as an outcome class.

Only states that decide the outcome by themselves map to one; COMPLETED and FAILED leave it to the probe's
own classification (its exit code, log signatures and result file), exactly as for a local run.
"""

from __future__ import annotations

from offlint.outcomes import Outcome
from offlint.steps import StepResult

# Still queued, running or being torn down: keep polling. COMPLETING in particular means processes may
# still be alive (a time-limit kill spends KillWait seconds there), so a job is only done when it leaves it.
ACTIVE = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
    "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
})

# The state a runner reports for a job Slurm no longer knows (expired from slurmctld's memory, no sacct).
LOST = "UNKNOWN"

_BY_STATE = {
    "COMPLETED": None,  # the probe's own result
    "FAILED": None,  # the probe's own result, from the exit code and the log
    "OUT_OF_MEMORY": Outcome.HOST_OOM_KILL,  # the cgroup's memory limit killed it
    "TIMEOUT": Outcome.TIMEOUT,
    "DEADLINE": Outcome.TIMEOUT,
    "NODE_FAIL": Outcome.INFRA_FAILURE,
    "BOOT_FAIL": Outcome.INFRA_FAILURE,
    "PREEMPTED": Outcome.INFRA_FAILURE,
    "REVOKED": Outcome.INFRA_FAILURE,  # a federation sibling ran it instead
    LOST: Outcome.INFRA_FAILURE,
    # A cancelled job was stopped by offlint (Ctrl-C, abort) or by a person; neither is a verdict, and a
    # job someone cancelled by hand is not resubmitted behind their back.
    "CANCELLED": Outcome.ABORTED,
}


def normalize(state: str) -> str:
    """`CANCELLED by 0` (sacct), `CANCELLED+` (fixed-width sacct) -> `CANCELLED`."""
    return state.split()[0].rstrip("+").upper() if state.strip() else LOST


def is_active(state: str) -> bool:
    return normalize(state) in ACTIVE


def outcome_for_state(state: str) -> Outcome | None:
    """The outcome a finished job's state decides, or None where the probe's own classification decides."""
    state = normalize(state)
    if state in ACTIVE:
        raise ValueError(f"job state {state} is not final")
    return _BY_STATE.get(state, Outcome.INFRA_FAILURE)


def scheduler_outcome(result: StepResult) -> Outcome | None:
    """What the scheduler says about a step, for a classifier to check before reading exit code and log.

    None for a step that was no scheduler job (no job id), or whose state leaves it to the probe."""
    if result.job_id is None or result.scheduler_state is None:
        return None
    return outcome_for_state(result.scheduler_state)
