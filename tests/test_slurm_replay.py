"""`offlint replay --launcher slurm`: the sbatch script it would submit (--dry-run, no cluster needed), and a
real replay job on the single-node cluster whose rank result is collected into the result file."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import slurm, slurm_cluster  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
RECIPES = str(ROOT / "fixtures/replay/tiny_gpt_recipes.py")
YAML = str(ROOT / "fixtures/replay/tiny_optimizer_offload.yaml")
IMAGE = "--container-image=nvcr.io/nvidia/pytorch:25.01-py3"
MOUNTS = "--container-mounts=/lustre:/lustre"


def replay(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", "replay", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def dry_run(tmp_path: Path, *extra: str, nodes: tuple[str, ...] = ("--nodes", "2", "--gpus-per-node", "8"),
            ) -> tuple[dict, str, subprocess.CompletedProcess]:
    """The spec and the script a dry run wrote; stdout is the script's path and nothing else."""
    done = replay(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--data-parallel-size", "4", "--launcher",
                  "slurm", *nodes, f"--slurm-arg={IMAGE}", f"--slurm-arg={MOUNTS}",
                  "--run-dir", str(tmp_path / "run"), "--dry-run", *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path}/run/log.sbatch\n"
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    return spec, Path(done.stdout.strip()).read_text(), done


def command_words(script: str) -> list[str]:
    (line,) = [line for line in script.replace("\\\n", " ").splitlines() if line.startswith("srun ")]
    return shlex.split(line)


def test_dry_run_writes_srun_torchrun_over_two_nodes_of_eight(tmp_path):
    spec, script, _ = dry_run(tmp_path)
    assert spec["parallel"]["data_parallel_size"] == 4  # 2 x 2 x 4 = 16 GPUs = 2 nodes x 8
    assert script.startswith("#!/bin/bash\n")
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --gpus-per-node=8\n" in script
    assert "#SBATCH --ntasks-per-node=1\n" in script and f"#SBATCH --output={tmp_path}/run/log.txt\n" in script
    words = command_words(script)
    assert words[3:5] == [IMAGE, MOUNTS]
    launcher = words[5:words.index("--no-python")]
    assert launcher[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert {"--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d"} <= set(launcher)
    assert words[words.index("--no-python") + 1:] == [
        sys.executable, "-m", "offlint.replay.train", "--spec", f"{tmp_path}/run/spec.json", "--out-dir",
        f"{tmp_path}/run"]
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1\n" in script
    assert "export RANK=" not in script  # torchrun sets the ranks
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["log.sbatch", "spec.json"]  # nothing run


def test_dry_run_derives_nodes_from_eight_gpus_per_node_and_says_so(tmp_path):
    _, script, done = dry_run(tmp_path, nodes=())  # 16 GPUs, no --nodes
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --gpus-per-node=8\n" in script
    assert "--nnodes=2" in command_words(script) and "--nproc-per-node=8" in command_words(script)
    assert ("offlint: note: 16 GPUs (TP=2 x PP=2 x CP=1 x DP=4): --nodes 2 x --gpus-per-node 8 (nodes derived "
            "from 8 GPUs per node by default") in done.stderr
    assert f"submit it with: sbatch {tmp_path}/run/log.sbatch" in done.stderr


def test_dry_run_derives_nodes_from_the_configured_gpus_per_node(tmp_path):
    _, script, done = dry_run(tmp_path, nodes=("--gpus-per-node", "4"))
    assert "#SBATCH --nodes=4\n" in script and "#SBATCH --gpus-per-node=4\n" in script
    assert "--nodes 4 x --gpus-per-node 4 (nodes derived from --gpus-per-node 4)" in done.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.offlint.slurm]\ngpus-per-node = 4\n")
    _, script, _ = dry_run(tmp_path, nodes=())
    assert "#SBATCH --nodes=4\n" in script


def test_a_small_replay_stays_on_one_node(tmp_path):
    done = replay(YAML, "--launcher", "slurm", "--run-dir", str(tmp_path / "run"), "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "run" / "log.sbatch").read_text()
    assert "#SBATCH --nodes=1\n" in script and "#SBATCH --gpus-per-node=1\n" in script


def test_gpus_spread_evenly_over_derived_nodes_or_one_line(tmp_path):
    done = replay(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--data-parallel-size", "3", "--launcher",
                  "slurm", "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # 12 GPUs: 2 nodes of 6
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=6\n" in \
        (tmp_path / "run" / "log.sbatch").read_text()
    done = replay(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--data-parallel-size", "5", "--launcher",
                  "slurm", "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "offlint: error: 20 GPUs do not split evenly over 3 nodes of at most 8 GPUs" in done.stderr


def test_dry_run_with_one_task_per_gpu(tmp_path):
    _, script, _ = dry_run(tmp_path, "--task-per-gpu")
    assert "#SBATCH --ntasks-per-node=8\n" in script and "torch.distributed.run" not in script
    words = command_words(script)
    assert words[:3] == ["srun", "--nodes=2", "--ntasks-per-node=8"] and "RANK=$SLURM_PROCID" in words[7]


def test_gpus_that_do_not_fit_the_layout_are_one_line(tmp_path):
    done = replay(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--launcher", "slurm", "--nodes", "2",
                  "--gpus-per-node", "8", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "needs 4 GPUs (TP=2 x PP=2 x CP=1 x DP=1), not --nodes 2 x --gpus-per-node 8" in done.stderr


def test_slurm_options_without_the_slurm_launcher_are_refused(tmp_path):
    done = replay(YAML, "--nodes", "2", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "offlint: error: --nodes: Slurm options need --launcher slurm"


@pytest.mark.slow
def test_a_replay_job_on_the_cluster_writes_its_collected_result(slurm, tmp_path):
    """No GPU here: the rank starts under srun + torchrun, finds no CUDA and says so in its result part;
    the part is merged from the shared run directory into the result file, as on a real cluster."""
    run_dir = slurm / "replay-run"
    done = replay(YAML, "--iters", "2", "--launcher", "slurm", "--run-dir", str(run_dir), "--timeout", "240",
                  cwd=tmp_path)
    result = json.loads((run_dir / "result.json").read_text())
    assert done.returncode == 4, done.stderr  # crash: the replay exit code of the merged outcome
    assert result["outcome"] == "crash" and "CUDA is not available to this rank" in result["signature"]
    assert result["slurm"]["state"] == "FAILED" and result["slurm"]["job_id"].isdigit()
    assert Path(result["slurm"]["script"]) == run_dir / "log.sbatch"  # next to the log
    assert f"as Slurm job {result['slurm']['job_id']}" in done.stderr


@pytest.mark.slow
def test_the_dry_run_script_submits_with_plain_sbatch(slurm, tmp_path):
    """`sbatch <printed file>` runs the job a dry run describes: its rank reads the written spec (no GPU here,
    so the part says CUDA is missing) and writes its part into the run directory."""
    from slurm_cluster import wait_for

    run_dir = slurm / "dry"
    done = replay(YAML, "--iters", "2", "--launcher", "slurm", "--run-dir", str(run_dir), "--timeout", "240",
                  "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = Path(done.stdout.strip())
    submitted = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]

    def ended() -> bool:
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        return any(f"JobState={s}" in shown for s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"))

    wait_for(ended, 240, f"Slurm job {job_id} to end", poll_s=0.5)
    (part,) = run_dir.glob("rank-*.json")
    assert "CUDA is not available to this rank" in json.loads(part.read_text())["signature"]
    assert (run_dir / "log.txt").exists()
