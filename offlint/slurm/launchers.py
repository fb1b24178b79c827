"""`--launcher local|slurm` for `offlint bisect`: which runner executes the probe steps, and where their
worktrees and logs live (a compute node must see them, so with Slurm: the shared workdir, never /tmp).

Every submitted job id goes into the bisect's journal at once; with `--resume` they are handed back to the
runner, which re-attaches to a job still queued or running instead of submitting it again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from offlint.config import load_config
from offlint.slurm.options import SlurmOptionsError, build_options, default_workdir, given_options
from offlint.slurm.runner import SlurmRunner
from offlint.steps import StepRunner

LAUNCHERS = ("local", "slurm")
SLURM_PROBES = ("command", "replay")
JOB_RECORD = "slurm-job"


@dataclass(frozen=True)
class Launch:
    runner: StepRunner
    worktree_base: Path | None  # None: a temporary directory (local runs)
    log_dir: Path


def bisect_launch(launcher: str, cli_values: Mapping[str, Any], repo_root: Path, state_dir: Path, journal,
                  probe_kind: str, gpus: Sequence[str], progress: Callable[[str], None]) -> Launch:
    """The runner and directories of one bisect; SlurmOptionsError (one line) for options that do not fit."""
    given = given_options(cli_values)
    if launcher == "local":
        if given:
            raise SlurmOptionsError(f"{', '.join(given)}: Slurm options need --launcher slurm")
        from offlint.bisect.runner import LocalRunner

        return Launch(LocalRunner(gpus), None, state_dir / "logs")
    if probe_kind not in SLURM_PROBES:
        raise SlurmOptionsError(f"--launcher slurm: the {probe_kind} probe runs locally (it needs no GPU); "
                                f"Slurm runs the {' and '.join(SLURM_PROBES)} probes")
    if gpus:
        raise SlurmOptionsError("--gpus picks local GPUs; with --launcher slurm use --gpus-per-node")
    config = load_config(repo_root)
    options = build_options(cli_values, config.slurm, config.path)
    if probe_kind == "replay":
        if (options.nodes or 1) != 1:
            raise SlurmOptionsError("--launcher slurm: the replay probe runs on one node (offlint replay starts "
                                    "its own ranks there); use --nodes 1")
        options = replace(options, ranks="program")
    workdir = options.workdir or default_workdir(repo_root)
    runner = SlurmRunner(options, workdir, log=progress,
                         on_submit=lambda step, job: journal.append({"type": JOB_RECORD, "step": step.name,
                                                                     "job_id": job}))
    runner.attach({r["step"]: r["job_id"] for r in journal.records if r.get("type") == JOB_RECORD})
    (runner.workdir / "worktrees").mkdir(parents=True, exist_ok=True)
    return Launch(runner, runner.workdir / "worktrees", runner.workdir / "logs")
