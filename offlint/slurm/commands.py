"""Thin wrappers over the Slurm client commands, each failure a one-line `SlurmError`.

Only what works without an accounting database is required (sbatch, squeue, scontrol, scancel); `sacct` is
asked only about jobs slurmctld has already forgotten, and its failure just means "not known".
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_TIMEOUT_S = 60  # a busy slurmctld can take seconds to answer; never hang forever on one


class SlurmError(RuntimeError):
    """A Slurm command is missing or failed; the message is one line, fit for `offlint: error: ...`."""


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str  # e.g. COMPLETED, FAILED, TIMEOUT (first word only)
    reason: str
    exit_code: int  # the batch script's exit status (ExitCode=<code>:<signal>)
    signal: int
    run_time_s: float
    name: str = ""
    stdout: str = ""


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except FileNotFoundError:
        raise SlurmError(f"`{argv[0]}` not found on PATH: --launcher slurm needs the Slurm client commands "
                         "(run offlint on a login node, or install slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{argv[0]}` did not answer within {_TIMEOUT_S} s (is slurmctld up?)") from None
    if check and proc.returncode != 0:
        raise SlurmError(f"`{' '.join(argv[:2])}` failed (exit {proc.returncode}): {_last_line(proc)}")
    return proc


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def submit(script: Path) -> str:
    """`sbatch --parsable SCRIPT` -> the job id (the `;cluster` suffix of a federation dropped)."""
    out = _run(["sbatch", "--parsable", str(script)]).stdout.strip()
    job_id = out.splitlines()[-1].split(";")[0] if out else ""
    if not job_id.isdigit():
        raise SlurmError(f"`sbatch --parsable {script}` printed no job id: {out!r}")
    return job_id


def queue_states(job_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """State and reason of each job slurmctld still knows (finished ones for MinJobAge seconds)."""
    ids = list(job_ids)
    if not ids:
        return {}
    proc = _run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%r"], check=False)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:  # every id has expired from slurmctld's memory
            return {}
        raise SlurmError(f"`squeue` failed (exit {proc.returncode}): {_last_line(proc)}")
    states = {}
    for line in proc.stdout.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if job_id:
            states[job_id] = (state, reason)
    return states


def show_job(job_id: str) -> JobInfo | None:
    """`scontrol show job -o ID`, or None when slurmctld no longer knows the job."""
    proc = _run(["scontrol", "show", "job", "-o", job_id], check=False)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return None
        raise SlurmError(f"`scontrol show job {job_id}` failed (exit {proc.returncode}): {_last_line(proc)}")
    fields = parse_fields(proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "")
    code, _, sig = fields.get("ExitCode", "0:0").partition(":")
    return JobInfo(job_id=job_id, state=fields.get("JobState", ""), reason=fields.get("Reason", ""),
                   exit_code=int(code or 0), signal=int(sig or 0),
                   run_time_s=parse_duration(fields.get("RunTime", "0")),
                   name=fields.get("JobName", ""), stdout=fields.get("StdOut", ""))


def accounting_job(job_id: str) -> JobInfo | None:
    """The job as `sacct` records it, or None when accounting is off or does not know the job."""
    try:
        proc = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode,ElapsedRaw,JobName"],
                    check=False)
    except SlurmError:
        return None
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) == 5 and parts[0] == job_id:
            code, _, sig = parts[2].partition(":")
            return JobInfo(job_id=job_id, state=parts[1].split()[0] if parts[1] else "", reason="",
                           exit_code=int(code or 0), signal=int(sig or 0),
                           run_time_s=float(parts[3] or 0), name=parts[4])
    return None


def cancel(job_ids: Iterable[str]) -> None:
    ids = list(job_ids)
    if ids:
        _run(["scancel", *ids])


def parse_fields(line: str) -> dict[str, str]:
    """`Key=value Key2=value with spaces` (scontrol -o) -> dict; a value runs until the next ` Key=`."""
    fields = {}
    for item in re.split(r" (?=[A-Za-z][\w:/]*=)", line.strip()):
        key, sep, value = item.partition("=")
        if sep:
            fields[key] = value.strip()
    return fields


def parse_duration(text: str) -> float:
    """Slurm's `[D-]HH:MM:SS` / `MM:SS` -> seconds."""
    days, _, clock = text.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part or 0) if part.isdigit() else seconds * 60
    return float(seconds + int(days or 0) * 86400) if (days or "0").isdigit() else float(seconds)
