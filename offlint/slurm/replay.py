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
from offlint.slurm.options import (DEFAULT_GPUS_PER_NODE, SlurmOptions, SlurmOptionsError, build_options,
                                   default_workdir)
from offlint.slurm.runner import SlurmRunner, ensure_workdir
from offlint.slurm.script import render_script, script_path
from offlint.slurm.states import scheduler_outcome
from offlint.steps import Step
from offlint.terminal import plural

# Set per rank by torchrun or srun; the local single-process plan's values must not leak into a job.
_RANK_KEYS = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}


def node_layout(world: int, nodes: int | None, per_node: int | None) -> tuple[int, int, str]:
    """Nodes x GPUs per node for a job of `world` GPUs, and how they were chosen (for the user to read).

    Without --nodes, the nodes are derived: as few nodes of at most `per_node` GPUs (default
    DEFAULT_GPUS_PER_NODE) as hold the job, the GPUs spread evenly over them (16 -> 2 x 8, 4 -> 1 x 4)."""
    if nodes is not None:
        return nodes, per_node if per_node is not None else -(-world // nodes), "as given"
    capacity = per_node if per_node is not None else DEFAULT_GPUS_PER_NODE
    if capacity < 1:
        raise SlurmOptionsError(f"--gpus-per-node {capacity}: a replay needs at least 1 GPU per node")
    derived = -(-world // capacity)
    if world % derived:
        raise SlurmOptionsError(
            f"{world} GPUs do not split evenly over {derived} nodes of at most {capacity} GPUs; give --nodes and "
            f"--gpus-per-node, or change --data-parallel-size")
    origin = (f"--gpus-per-node {capacity}" if per_node is not None
              else f"{capacity} GPUs per node by default; change it with --gpus-per-node or gpus-per-node in "
                   f"[tool.offlint.slurm]")
    return derived, world // derived, f"nodes derived from {origin}"


def replay_step(spec, run_dir: Path, options: SlurmOptions, timeout_s: float) -> tuple[Step, SlurmOptions, str]:
    """The job's step (per-rank argv, environment, log in the run directory), the options it needs, and a
    line saying how its nodes were chosen."""
    from offlint.replay import launch

    world = spec.world_size
    nodes, per_node, how = node_layout(world, options.nodes, options.gpus_per_node)
    if nodes * per_node != world:
        raise SlurmOptionsError(
            f"{spec.unit}: the configuration needs {plural(world, 'GPU')} ({launch.layout(spec)}), not --nodes "
            f"{nodes} x --gpus-per-node {per_node}; change them, or --data-parallel-size to fill "
            f"{nodes * per_node} GPUs")
    env = {k: v for k, v in launch.launch_plan(spec, run_dir, world).env.items() if k not in _RANK_KEYS}
    argv = (sys.executable, "-m", launch.TRAIN_MODULE, "--spec", str(run_dir / launch.SPEC_NAME),
            "--out-dir", str(run_dir))
    step = Step(name=f"replay-{run_dir.name}", argv=argv, cwd=Path.cwd().resolve(), log=run_dir / "log.txt",
                timeout_s=timeout_s, env=env, gpus=per_node)
    note = f"{plural(world, 'GPU')} ({launch.layout(spec)}): --nodes {nodes} x --gpus-per-node {per_node} ({how})"
    return step, replace(options, nodes=nodes, gpus_per_node=per_node), note


@dataclass(frozen=True)
class SlurmReplay:
    step: Step
    options: SlurmOptions
    workdir: Path  # the runner's shared workdir (holds run_dir)
    run_dir: Path
    note: str = ""  # how the nodes were chosen

    @property
    def script(self) -> str:
        return render_script(self.step, self.options)

    @property
    def script_path(self) -> Path:
        return script_path(self.step)


def plan(spec, run_dir: str | None, timeout_s: float, cli_values: Mapping[str, Any]) -> SlurmReplay:
    """Options from the command line over [tool.offlint.slurm]; the run directory under the shared workdir."""
    config = load_config(Path.cwd())
    options = build_options(cli_values, config.slurm, config.path)
    workdir = (options.workdir or default_workdir(config.root or Path.cwd())).resolve()
    folder = (Path(run_dir) if run_dir else workdir / "replay" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    step, options, note = replay_step(spec, folder, options, timeout_s)
    return SlurmReplay(step, options, workdir if folder.is_relative_to(workdir) else folder, folder, note)


def write_job(job: SlurmReplay, spec) -> Path:
    """A dry run's output: the spec and the sbatch script in the run directory, so that `sbatch SCRIPT`
    submits exactly the job `offlint replay --launcher slurm` would (its rank parts land in the run
    directory; only the merge into result.json is offlint's). Returns the script's path."""
    from offlint.replay import launch

    ensure_workdir(job.workdir)  # the default workdir lies in the repository: keep it out of `git status`
    job.run_dir.mkdir(parents=True, exist_ok=True)
    launch.write_spec(spec, job.run_dir)
    path = job.script_path
    path.write_text(job.script, encoding="utf-8")
    return path


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
