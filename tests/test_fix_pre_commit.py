"""The real pre-commit tool runs offlint with `args: [--fix]` (README): the hook fixes the files and fails because
it changed them, as ruff's does; once the fix is staged it passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BAD = """\
def recipe():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.env_vars = {'CUDA_DEVICE_MAX_CONNECTIONS': '1',}  # the launch environment
    return cfg
"""
FIXED = BAD.replace("{'CUDA_DEVICE_MAX_CONNECTIONS': '1',}",
                    "{'CUDA_DEVICE_MAX_CONNECTIONS': '1', 'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True',}")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_pre_commit_hook_with_fix_changes_the_file_and_fails_then_passes(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source = tmp_path / "offlint-src"  # a committed snapshot of this tree, so pre-commit can clone it
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".ci-venv", "*.egg-info", "__pycache__",
                                                                ".pytest_cache", ".mcore"))
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "snapshot")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    work = tmp_path / "user-repo"
    work.mkdir()
    _git(work, "init", "-q")
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {source}\n    rev: {rev}\n    hooks:\n      - id: offlint\n        args: [--fix]\n")
    (work / "recipe.py").write_text(BAD)
    _git(work, "add", "-A")
    env = {"PRE_COMMIT_HOME": str(tmp_path / "pc-cache"), "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    first = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout, first.stdout
    assert (work / "recipe.py").read_text() == FIXED
    _git(work, "add", "-A")
    second = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env, timeout=900)
    assert second.returncode == 0 and "Passed" in second.stdout, second.stdout + second.stderr
