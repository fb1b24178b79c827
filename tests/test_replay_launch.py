"""Replay launcher: argv for 1/2/8 GPUs, the not-enough-GPUs error, and the merge of what ranks wrote.

The rank entry (`python -m offlint.replay.train`) is run for real here: on a machine without CUDA it fails
at its first CUDA call, and must still write its part, classified, for the launcher to merge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.outcomes import Outcome, REPLAY_EXIT_CODES
from offlint.replay import launch
from offlint.replay.mapping import map_unit
from offlint.replay.result import exit_code_for, rank_part_path
from offlint.units import load_unit

ROOT = Path(__file__).resolve().parent.parent
RECIPES = "fixtures/replay/tiny_gpt_recipes.py"


def spec_of(recipe, overrides=()):
    return map_unit(load_unit(RECIPES, recipe, overrides).resolved)


def test_one_gpu_runs_the_rank_entry_directly(tmp_path):
    plan = launch.launch_plan(spec_of("tiny_gpt_optimizer_offload_config"), tmp_path, 8, python="python3", port=1234)
    assert plan.nproc == 1
    assert plan.argv == ("python3", "-m", "offlint.replay.train", "--spec", str(tmp_path / "spec.json"),
                         "--out-dir", str(tmp_path))
    assert plan.env["WORLD_SIZE"] == "1" and plan.env["MASTER_PORT"] == "1234"


@pytest.mark.parametrize("overrides, nproc", [
    (["model.tensor_model_parallel_size=2"], 2),
    (["model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=4"], 8),
])
def test_several_gpus_go_through_torchrun(tmp_path, overrides, nproc):
    spec = spec_of("tiny_gpt_optimizer_offload_config", overrides)
    plan = launch.launch_plan(spec, tmp_path, 8, python="python3")
    assert plan.nproc == nproc
    assert plan.argv[:5] == ("python3", "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}")
    assert plan.argv[5:7] == ("-m", "offlint.replay.train")
    step = plan.step("replay", tmp_path, tmp_path / "log", 60)
    assert step.gpus == nproc and step.argv == plan.argv and step.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"


def test_a_configuration_needing_more_gpus_is_refused_with_its_layout(tmp_path):
    with pytest.raises(launch.LaunchError) as info:
        launch.launch_plan(spec_of("tiny_gpt_tp2_pp2_config"), tmp_path, 2)
    message = str(info.value)
    assert "needs 4 GPUs (TP=2 x PP=2 x CP=1 x DP=1) and 2 are available" in message and "\n" not in message


def test_expert_parallel_counts_towards_the_gpus_needed(tmp_path):
    with pytest.raises(launch.LaunchError, match="needs 4 GPUs .*DP=4 x EP=4"):
        launch.launch_plan(spec_of("tiny_moe_ep4_config"), tmp_path, 1)


def test_multi_node_argv_for_the_slurm_engine(tmp_path):
    spec = spec_of("tiny_gpt_tp2_pp2_config")
    plan = launch.node_argv(spec, tmp_path, nnodes=2, gpus_per_node=2, rdzv_endpoint="node1:29500",
                            python="python3")
    assert "--nnodes=2" in plan.argv and "--nproc-per-node=2" in plan.argv
    assert "--rdzv-endpoint=node1:29500" in plan.argv
    with pytest.raises(launch.LaunchError):
        launch.node_argv(spec, tmp_path, nnodes=1, gpus_per_node=2, rdzv_endpoint="x:1")


def _run_rank(spec, run_dir: Path, rank: int = 0) -> subprocess.CompletedProcess:
    launch.write_spec(spec, run_dir)
    env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": "1", "PYTHONWARNINGS": "ignore",
           "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "offlint.replay.train", "--spec", str(run_dir / "spec.json"),
                           "--out-dir", str(run_dir)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.slow
def test_a_rank_that_fails_still_writes_its_classified_part(tmp_path):
    spec = spec_of("tiny_gpt_optimizer_offload_config")
    completed = _run_rank(spec, tmp_path)
    assert completed.returncode == 1
    part = json.loads(rank_part_path(tmp_path, 0).read_text())
    assert part["outcome"] == "crash" and part["phase"] == "setup"
    assert part["signature"] == "RuntimeError: CUDA is not available to this rank (torch.cuda.is_available() is False)"
    assert part["versions"]["torch"] and part["versions"]["megatron_core"] == "0.16.1"
    assert part["config"]["unit"] == "tiny_gpt_optimizer_offload_config"
    merged = launch.collect(tmp_path, 1, completed.returncode)
    assert merged["outcome"] == "crash" and merged["signature"] == part["signature"]
    assert exit_code_for(Outcome(merged["outcome"])) == REPLAY_EXIT_CODES[Outcome.CRASH]


@pytest.mark.parametrize("code, outcome", [
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", Outcome.SEGFAULT),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", Outcome.HOST_OOM_KILL),
    ("raise SystemExit(3)", Outcome.CUDA_OOM),
    ("raise SystemExit(1)", Outcome.CRASH),
])
def test_no_part_written_falls_back_to_the_exit_status(tmp_path, code, outcome):
    returncode = subprocess.run([sys.executable, "-c", code]).returncode
    merged = launch.collect(tmp_path, 2, returncode)
    assert merged["outcome"] == outcome.value
    assert "no result from rank(s) 0, 1" in merged["signature"]
    assert merged["peak_allocated_bytes"] == [None, None]


def test_a_timeout_is_its_own_outcome(tmp_path):
    merged = launch.collect(tmp_path, 1, -9, timed_out=True)
    assert merged["outcome"] == Outcome.TIMEOUT.value


@pytest.mark.slow
def test_run_local_starts_the_plan_and_merges_what_the_rank_wrote(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    monkeypatch.chdir(ROOT)
    result = launch.run_local(spec_of("tiny_gpt_optimizer_offload_config"), tmp_path, 1, timeout_s=300,
                              echo=lambda _: None)
    assert result["outcome"] == "crash" and "CUDA is not available" in result["signature"]
    assert result["launcher_exit_code"] == 1 and result["world_size"] == 1
    assert "Traceback" in (tmp_path / "log.txt").read_text()


def test_run_local_kills_a_run_past_its_timeout(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = launch.run_local(spec_of("tiny_gpt_optimizer_offload_config"), tmp_path, 1, timeout_s=0.2,
                              echo=lambda _: None)
    assert result["outcome"] == Outcome.TIMEOUT.value and not list(tmp_path.glob("rank-*.json"))
