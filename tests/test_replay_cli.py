"""`offlint replay` as a user runs it (real subprocesses), and the GPU runs (marked `gpu`, skipped without CUDA).

GPU tests run with `scripts/gpu_replay_check.sh` on a machine with CUDA and megatron-core installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.outcomes import REPLAY_EXIT_CODES, Outcome

ROOT = Path(__file__).resolve().parent.parent
YAML = "fixtures/replay/tiny_optimizer_offload.yaml"
RECIPES = "fixtures/replay/tiny_gpt_recipes.py"


def offlint(*args, cuda: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the same answer on a GPU machine: torch sees no device
    return subprocess.run([sys.executable, "-m", "offlint", "replay", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


def one_line_error(completed: subprocess.CompletedProcess) -> str:
    assert completed.returncode == 2, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offlint: error: "), completed.stderr
    return lines[0]


@pytest.mark.slow
def test_without_cuda_replay_says_so_in_one_line_and_exits_2():
    line = one_line_error(offlint(YAML, "--iters", "2"))
    assert "needs a CUDA GPU" in line


def test_unknown_values_are_named_with_the_override_to_add():
    line = one_line_error(offlint("fixtures/good/conf/llama32_1b_override.yaml"))
    assert line.startswith("offlint: error: fixtures/good/conf/llama32_1b_override.yaml: ")
    assert "--override model.num_layers=VALUE (or --num-layers N)" in line


def test_verify_of_a_configuration_without_offloading_is_a_usage_error():
    line = one_line_error(offlint(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--verify"))
    assert "nothing to verify" in line


@pytest.mark.parametrize("args, message", [
    (("--fractions", "0,1"), "--fractions and --plot go with --verify"),
    (("--verify", "--plot", "x.png"), "--plot needs --fractions"),
    (("--verify", "--fractions", "0,1", "--plot", "x.txt"), "'x.txt': the plot is a PNG image"),
    (("--verify", "--fractions", "0,2"), "outside [0, 1]"),
    (("--recipe", "nope"), "no unit named 'nope'"),
])
def test_option_mistakes_are_one_line_errors(args, message):
    config = YAML if "--recipe" not in args else RECIPES
    assert message in one_line_error(offlint(config, *args))


def test_dry_run_prints_the_effective_configuration_and_the_command():
    completed = offlint(RECIPES, "--recipe", "tiny_gpt_tp2_pp2_config", "--num-layers", "4", "--dry-run",
                        "--run-dir", "/tmp/offlint-dry")
    assert completed.returncode == 0, completed.stderr
    text, command = completed.stdout.rsplit("\n}\n", 1)
    spec = json.loads(text + "\n}")
    assert spec["model"]["num_layers"] == 4 and spec["parallel"]["tensor_model_parallel_size"] == 2
    assert "torch.distributed.run --standalone --nproc-per-node=4 -m offlint.replay.train" in command
    assert "--spec /tmp/offlint-dry/spec.json" in command


# ---- on a GPU (scripts/gpu_replay_check.sh) ----

def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


gpu = pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU (run scripts/gpu_replay_check.sh there)")


@pytest.mark.gpu
@gpu
def test_gpu_replay_goes_through_hybrid_device_optimizer(tmp_path):
    out = tmp_path / "result.json"
    completed = offlint(YAML, "--iters", "4", "--result-json", str(out), "--run-dir", str(tmp_path / "run"),
                        cuda=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["outcome"] == "pass" and len(result["loss"]) == 4 and len(result["iteration_time_s"]) == 4
    assert result["offload"]["optimizer"]["hybrid_device_optimizer"] is True
    assert 0.4 <= result["offload"]["optimizer"]["offloaded_share"] <= 0.75  # fraction 0.5, whole parameters
    assert result["peak_allocated_bytes"][0] > 0 and result["host_peak_rss_bytes"] > 0
    assert result["versions"]["gpu_name"] and result["versions"]["megatron_core"]


@pytest.mark.gpu
@gpu
def test_gpu_memory_budget_reproduces_an_oom(tmp_path):
    out = tmp_path / "result.json"
    completed = offlint(RECIPES, "--recipe", "tiny_gpt_optimizer_offload_config", "--iters", "2", "--gpu-memory",
                        "0.05", "--result-json", str(out), "--run-dir", str(tmp_path / "run"), cuda=True,
                        timeout=600)
    result = json.loads(out.read_text())
    assert result["outcome"] == "cuda-oom", result["signature"]
    assert completed.returncode == REPLAY_EXIT_CODES[Outcome.CUDA_OOM]
    assert result["gpu_memory_limit_bytes"] == int(0.05 * 2**30)


@pytest.mark.gpu
@gpu
def test_gpu_activation_offload_is_reported_when_it_cannot_be_replayed(tmp_path):
    from offlint.replay.build import transformer_engine_version

    out = tmp_path / "result.json"
    offlint(RECIPES, "--recipe", "tiny_gpt_activation_offload_config", "--iters", "2", "--hidden-size", "256",
            "--result-json", str(out), "--run-dir", str(tmp_path / "run"), cuda=True, timeout=600)
    activation = json.loads(out.read_text())["offload"]["activation"]
    assert activation["requested"] == ["cpu_offloading"]
    assert activation["replayed"] is (transformer_engine_version() is not None)
    assert (activation["note"] is None) is activation["replayed"]


@pytest.mark.gpu
@gpu
def test_gpu_verify_optimizer_offload_meets_the_criteria(tmp_path):
    out = tmp_path / "verify.json"
    completed = offlint(RECIPES, "--recipe", "tiny_gpt_optimizer_offload_config", "--iters", "10", "--verify",
                        "--result-json", str(out), "--run-dir", str(tmp_path / "run"), cuda=True, timeout=900)
    report = json.loads(out.read_text())
    assert completed.returncode == 0, completed.stdout + completed.stderr[-3000:]
    assert report["verdict"] == "pass" and all(c["passed"] for c in report["criteria"])
