"""`SlurmRunner`: each step one sbatch job; a batch of steps submitted together, then polled to the end.

Polls with one `squeue` per round for all live jobs and reads a finished job's exit code with `scontrol`
(no accounting database needed; `sacct` only for jobs slurmctld has forgotten). Ctrl-C or any error while
waiting cancels every job the runner started and waits until they have left the queue. Job ids reach the
caller through `on_submit` as soon as they exist (for the journal), and `attach` hands them back after a
restart so that `--resume` re-attaches to a queued or running job instead of submitting it again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from offlint.slurm import commands
from offlint.slurm.options import SlurmOptions
from offlint.slurm.script import job_name, render_script, script_path
from offlint.slurm.states import LOST, is_active, normalize
from offlint.steps import Step, StepResult

_CANCEL_WAIT_S = 120  # scancel, then SIGTERM, KillWait (often 30 s on real clusters), SIGKILL
_MAX_POLL_FAILURES = 10  # consecutive failed squeue calls tolerated (a busy slurmctld times out now and then)


def ensure_workdir(workdir: Path) -> Path:
    """Create the workdir; a `.offlint/` directory on its path gets a `*` .gitignore (as .pytest_cache
    does), so the default workdir inside the user's repository never shows up in `git status`."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    for directory in (workdir, *workdir.parents):
        if directory.name == ".offlint" and not (directory / ".gitignore").exists():
            (directory / ".gitignore").write_text("*\n", encoding="utf-8")
    return workdir


class SlurmRunner:
    def __init__(self, options: SlurmOptions, workdir: Path, *,
                 on_submit: Callable[[Step, str], None] | None = None,
                 poll_s: float = 1.0, log: Callable[[str], None] | None = None):
        self.options = options
        self.workdir = ensure_workdir(Path(workdir))
        self.on_submit = on_submit
        self.poll_s = poll_s
        self._log = log or (lambda message: None)
        self._attached: dict[str, str] = {}  # step name -> job id, from a journal
        self._live: dict[str, Step] = {}  # job id -> step, submitted and not collected

    def attach(self, job_ids: Mapping[str, str]) -> None:
        """Job ids of earlier submissions (step name -> id); `run` re-attaches to them where it can."""
        self._attached.update(job_ids)

    def run(self, steps: Sequence[Step]) -> list[StepResult]:
        try:
            job_ids = self.submit(steps)
            return self.wait(steps, job_ids)
        except BaseException:
            self.cancel_all()
            raise

    def submit(self, steps: Sequence[Step]) -> list[str]:
        """Submit every step (or re-attach to its earlier job); the job ids, in order."""
        job_ids = []
        for step in steps:
            job_id = self._reattach(step)
            if job_id is None:
                job_id = self._submit(step)
                self._live[job_id] = step  # before the callback: cancel_all must see it if that raises
                if self.on_submit:
                    self.on_submit(step, job_id)
            self._live[job_id] = step
            job_ids.append(job_id)
        return job_ids

    def wait(self, steps: Sequence[Step], job_ids: Sequence[str]) -> list[StepResult]:
        """Poll until every job has left the active states; one result per step, in order."""
        pending = set(job_ids)
        failures = 0
        waiting: dict[str, str] = {}  # job id -> the pending reason last reported
        while True:
            try:
                states = commands.queue_states(pending)
                failures = 0
            except commands.SlurmError:
                failures += 1
                if failures >= _MAX_POLL_FAILURES:
                    raise
                states = None
            if states is not None:
                # a job missing from squeue has been forgotten by slurmctld: finished long ago
                pending = {j for j in pending if j in states and is_active(states[j][0])}
                self._report_waiting(states, pending, waiting)
            if not pending:
                break
            time.sleep(self.poll_s)
        results = [self._result(step, job_id) for step, job_id in zip(steps, job_ids)]
        for job_id in job_ids:
            self._live.pop(job_id, None)
        return results

    def _report_waiting(self, states, pending, waiting: dict[str, str]) -> None:
        """Say why a job is still queued (Resources, Priority, a QOS limit) when that reason changes."""
        for job_id in sorted(pending):
            state, reason = states[job_id]
            if state == "PENDING" and reason not in ("None", "", waiting.get(job_id)):
                self._log(f"Slurm job {job_id} ({self._live[job_id].name}) is pending: {reason}")
                waiting[job_id] = reason

    def cancel_all(self) -> None:
        """scancel every job this runner started and has not collected; wait until none is active."""
        live = list(self._live)
        if not live:
            return
        self._log(f"cancelling Slurm job(s) {', '.join(live)}")
        try:
            commands.cancel(live)
            deadline = time.monotonic() + _CANCEL_WAIT_S
            while time.monotonic() < deadline:
                states = commands.queue_states(live)
                if not any(is_active(state) for state, _ in states.values()):
                    break
                time.sleep(min(self.poll_s, 0.5))
            else:
                self._log(f"Slurm job(s) {', '.join(live)} still active {_CANCEL_WAIT_S} s after scancel")
        finally:
            self._live.clear()

    def _submit(self, step: Step) -> str:
        self._check_shared(step)
        path = script_path(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_script(step, self.options), encoding="utf-8")
        job_id = commands.submit(path)
        self._log(f"submitted {step.name} as Slurm job {job_id} ({path})")
        return job_id

    def _reattach(self, step: Step) -> str | None:
        """The earlier job of this step if it is still queued or running, or finished on its own.

        A cancelled or forgotten job is submitted again, and so is an id that now names another job (job
        ids start again at 1 on a fresh slurmctld state).
        """
        job_id = self._attached.pop(step.name, None)
        if job_id is None:
            return None
        info = commands.show_job(job_id)
        if info is None or info.name != job_name(step) or Path(info.stdout).resolve() != step.log.resolve():
            self._log(f"{step.name}: Slurm no longer knows job {job_id}; submitting it again")
            return None
        if normalize(info.state) == "CANCELLED":
            self._log(f"{step.name}: job {job_id} was cancelled; submitting it again")
            return None
        self._log(f"{step.name}: re-attached to Slurm job {job_id} ({info.state})")
        return job_id

    def _result(self, step: Step, job_id: str) -> StepResult:
        info = commands.show_job(job_id) or commands.accounting_job(job_id)
        if info is None:
            return StepResult(step=step, exit_code=None, signal=None, timed_out=False, duration_s=0.0,
                              job_id=job_id, scheduler_state=LOST)
        state = normalize(info.state)
        if info.signal:
            exit_code, signal = None, info.signal
        elif state in ("COMPLETED", "FAILED") or info.exit_code:
            exit_code, signal = info.exit_code, None
        else:  # never ran, or ended by the scheduler without an exit status (NODE_FAIL, pending CANCELLED)
            exit_code, signal = None, None
        return StepResult(step=step, exit_code=exit_code, signal=signal,
                          timed_out=state in ("TIMEOUT", "DEADLINE"), duration_s=info.run_time_s,
                          job_id=job_id, scheduler_state=state)

    def _check_shared(self, step: Step) -> None:
        """Compute nodes write the log and read the script: both must lie under the shared workdir."""
        if not (step.log.is_absolute() and step.cwd.is_absolute()):
            raise ValueError(f"step {step.name}: log and cwd must be absolute paths ({step.log}, {step.cwd})")
        if not step.log.resolve().is_relative_to(self.workdir):
            raise ValueError(f"step {step.name}: log {step.log} is not under the Slurm workdir {self.workdir}")
