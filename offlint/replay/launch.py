"""How a replay is started: one process on one GPU, torchrun for several, and the merge of the rank parts.

`launch_plan` is the one place that turns a spec and a GPU count into argv + environment. The local runner
below uses it directly; the Slurm engine wraps the same argv in srun (see `node_argv` for several nodes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from offlint.outcomes import Outcome
from offlint.replay import result as results
from offlint.replay.mapping import ReplaySpec
from offlint.terminal import plural
from offlint.steps import Step

TRAIN_MODULE = "offlint.replay.train"
SPEC_NAME = "spec.json"


class LaunchError(ValueError):
    """The configuration cannot be started on this machine (one line; exit code 2)."""


@dataclass(frozen=True)
class LaunchPlan:
    nproc: int
    argv: tuple[str, ...]
    env: dict[str, str]

    def step(self, name: str, cwd: Path, log: Path, timeout_s: float) -> Step:
        return Step(name, self.argv, Path(cwd), Path(log), timeout_s, dict(self.env), self.nproc)


def layout(spec: ReplaySpec) -> str:
    p = spec.parallel
    parts = [f"TP={p['tensor_model_parallel_size']}", f"PP={p['pipeline_model_parallel_size']}",
             f"CP={p['context_parallel_size']}", f"DP={p['data_parallel_size']}"]
    if p["expert_model_parallel_size"] > 1:
        parts.append(f"EP={p['expert_model_parallel_size']}")
    return " x ".join(parts)


def launch_plan(spec: ReplaySpec, run_dir: Path, gpus_available: int, python: str = sys.executable,
                port: int = 29511) -> LaunchPlan:
    """argv and environment that run `spec` on this node; LaunchError when it needs more GPUs than there are."""
    needed = spec.world_size
    if needed > gpus_available:
        raise LaunchError(f"{spec.unit}: the configuration needs {plural(needed, 'GPU')} ({layout(spec)}) and "
                          f"{gpus_available} are available; shrink it, e.g. --override "
                          f"model.tensor_model_parallel_size=1 --override model.pipeline_model_parallel_size=1")
    run_dir = Path(run_dir)
    entry = ["-m", TRAIN_MODULE, "--spec", str(run_dir / SPEC_NAME), "--out-dir", str(run_dir)]
    env = {**spec.env, "CUDA_DEVICE_MAX_CONNECTIONS": spec.env.get("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
           "PYTHONUNBUFFERED": "1"}
    if needed == 1:
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        return LaunchPlan(1, (python, *entry), env)
    torchrun = (python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={needed}")
    return LaunchPlan(needed, (*torchrun, *entry), env)


def node_argv(spec: ReplaySpec, run_dir: Path, nnodes: int, gpus_per_node: int, rdzv_endpoint: str,
              python: str = sys.executable, job_id: str = "offlint-replay") -> LaunchPlan:
    """The per-node torchrun command of a multi-node run (the Slurm engine starts it once per node)."""
    if nnodes * gpus_per_node != spec.world_size:
        raise LaunchError(f"{spec.unit}: the configuration needs {plural(spec.world_size, 'GPU')} ({layout(spec)}), "
                          f"not {nnodes} nodes x {gpus_per_node} GPUs")
    run_dir = Path(run_dir)
    argv = (python, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={gpus_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}", f"--rdzv-id={job_id}",
            "-m", TRAIN_MODULE, "--spec", str(run_dir / SPEC_NAME), "--out-dir", str(run_dir))
    env = {**spec.env, "CUDA_DEVICE_MAX_CONNECTIONS": spec.env.get("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
           "PYTHONUNBUFFERED": "1"}
    return LaunchPlan(spec.world_size, argv, env)


def write_spec(spec: ReplaySpec, run_dir: Path) -> Path:
    path = Path(run_dir) / SPEC_NAME
    results.write_json(path, spec.to_json())
    return path


def run_local(spec: ReplaySpec, run_dir: Path, gpus_available: int, timeout_s: float,
              echo=print) -> dict:
    """Start the plan, wait, merge the rank parts into one result dict (the launcher's job, not the ranks')."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in run_dir.glob("rank-*.json"):
        stale.unlink()
    write_spec(spec, run_dir)
    plan = launch_plan(spec, run_dir, gpus_available, port=_free_port())
    log = run_dir / "log.txt"
    echo(f"offlint replay: {spec.unit}: {layout(spec)} on {plan.nproc} GPU(s), log {log}")
    started = time.monotonic()
    timed_out = False
    with open(log, "w", encoding="utf-8") as handle:
        process = subprocess.Popen(plan.argv, stdout=handle, stderr=subprocess.STDOUT,
                                   env={**os.environ, **plan.env}, start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process)
            returncode = process.wait()
        except KeyboardInterrupt:
            _kill_group(process)
            process.wait()
            raise
    return collect(run_dir, plan.nproc, returncode, timed_out, time.monotonic() - started)


def collect(run_dir: Path, world_size: int, returncode: int | None, timed_out: bool = False,
            duration_s: float | None = None) -> dict:
    """Merge whatever rank parts exist in `run_dir` with the launcher's exit status."""
    import json

    parts = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(run_dir).glob("rank-*.json"))]
    exit_outcome = results.outcome_from_exit(returncode, timed_out)
    merged = results.merge_ranks(parts, world_size, exit_outcome)
    if timed_out:
        merged["outcome"], merged["signature"] = Outcome.TIMEOUT.value, exit_outcome[1]
    merged["launcher_exit_code"] = returncode
    merged["wall_s"] = duration_s
    if not merged.get("config"):
        spec_path = Path(run_dir) / SPEC_NAME
        merged["config"] = json.loads(spec_path.read_text(encoding="utf-8")) if spec_path.exists() else {}
    return merged


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _kill_group(process: subprocess.Popen) -> None:
    """End the launcher and every rank it started (they share the session started above), nothing else."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
