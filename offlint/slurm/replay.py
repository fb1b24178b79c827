"""`offlint replay --launcher slurm`: the replay as one Slurm job, its rank parts merged like a local run's.

The job runs the per-rank entry (offlint.replay.train) under srun + torchrun on `--nodes` x `--gpus-per-node`
GPUs (or one srun task per GPU with --task-per-gpu); the run directory lies on shared storage, so the rank
parts the nodes write are merged here with the job's exit status, into the same result file and exit code
as `offlint replay` on one machine. A Slurm state that decides by itself (TIMEOUT, NODE_FAIL, ...) wins.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from offlint.config import ConfigError, load_config
from offlint.slurm.commands import SlurmError
from offlint.slurm.options import SlurmOptions, SlurmOptionsError, build_options, default_workdir
from offlint.slurm.runner import SlurmRunner
from offlint.slurm.script import render_script
from offlint.slurm.states import scheduler_outcome
from offlint.steps import Step

# Set per rank by torchrun or srun; the local single-process plan's values must not leak into a job.
_RANK_KEYS = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}


def replay_step(spec, run_dir: Path, options: SlurmOptions, timeout_s: float) -> tuple[Step, SlurmOptions]:
    """The job's step (per-rank argv, environment, log in the run directory) and the options it needs."""
    from offlint.replay import launch

    world, nodes = spec.world_size, options.nodes
    per_node = options.gpus_per_node if options.gpus_per_node is not None else -(-world // nodes)
    if nodes * per_node != world:
        raise SlurmOptionsError(
            f"{spec.unit}: the configuration needs {world} GPUs ({launch.layout(spec)}), not --nodes {nodes} x "
            f"--gpus-per-node {per_node}; change them, or --data-parallel-size to fill {nodes * per_node} GPUs")
    env = {k: v for k, v in launch.launch_plan(spec, run_dir, world).env.items() if k not in _RANK_KEYS}
    argv = (sys.executable, "-m", launch.TRAIN_MODULE, "--spec", str(run_dir / launch.SPEC_NAME),
            "--out-dir", str(run_dir))
    step = Step(name=f"replay-{run_dir.name}", argv=argv, cwd=Path.cwd().resolve(), log=run_dir / "log.txt",
                timeout_s=timeout_s, env=env, gpus=per_node)
    return step, replace(options, gpus_per_node=per_node)


@dataclass(frozen=True)
class SlurmReplay:
    step: Step
    options: SlurmOptions
    workdir: Path  # the runner's shared workdir (holds run_dir)
    run_dir: Path

    @property
    def script(self) -> str:
        return render_script(self.step, self.options)


def plan(spec, run_dir: str | None, timeout_s: float, cli_values: Mapping[str, Any]) -> SlurmReplay:
    """Options from the command line over [tool.offlint.slurm]; the run directory under the shared workdir."""
    config = load_config(Path.cwd())
    options = build_options(cli_values, config.slurm, config.path)
    workdir = (options.workdir or default_workdir(config.root or Path.cwd())).resolve()
    folder = (Path(run_dir) if run_dir else workdir / "replay" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    step, options = replay_step(spec, folder, options, timeout_s)
    return SlurmReplay(step, options, workdir if folder.is_relative_to(workdir) else folder, folder)


def run(job: SlurmReplay, spec, log: Callable[[str], None]) -> dict:
    """Submit, wait, merge the rank parts with the job's exit status; Ctrl-C cancels the job."""
    from offlint.replay import launch

    job.run_dir.mkdir(parents=True, exist_ok=True)
    for stale in job.run_dir.glob("rank-*.json"):
        stale.unlink()
    launch.write_spec(spec, job.run_dir)
    (result,) = SlurmRunner(job.options, job.workdir, log=log).run([job.step])
    returncode = result.exit_code if result.signal is None else -result.signal
    merged = launch.collect(job.run_dir, spec.world_size, returncode, result.timed_out, result.duration_s)
    decided = scheduler_outcome(result)
    if decided is not None:
        merged["outcome"], merged["signature"] = decided.value, f"Slurm job {result.job_id} {result.scheduler_state}"
    merged["slurm"] = {"job_id": result.job_id, "state": result.scheduler_state,
                       "script": str(job.step.log.with_suffix(".sbatch")), "log": str(job.step.log)}
    return merged


def errors() -> tuple[type[Exception], ...]:
    """What plan() and run() raise for a user to read (one line each): catch these, print, exit 2."""
    from offlint.replay.launch import LaunchError

    return SlurmOptionsError, ConfigError, LaunchError, SlurmError
