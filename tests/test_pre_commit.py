"""The real pre-commit tool runs offlint as a hook from this repository, on a temporary git repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOOD = """\
def recipe():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""
BAD = GOOD.replace("cpu_offloading_num_layers = 2", "pipeline_model_parallel_size = 2")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture()
def hook_source(tmp_path: Path) -> tuple[Path, str]:
    """A committed snapshot of this working tree, so pre-commit can clone it at a revision."""
    source = tmp_path / "offlint-src"
    ignore = shutil.ignore_patterns(".git", ".ci-venv", "*.egg-info", "__pycache__", ".pytest_cache")
    shutil.copytree(REPO, source, ignore=ignore)
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "snapshot")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    return source, rev


@pytest.mark.slow
def test_pre_commit_hook_passes_clean_and_fails_bad(tmp_path, hook_source):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source, rev = hook_source
    work = tmp_path / "user-repo"
    work.mkdir()
    _git(work, "init", "-q")
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {source}\n    rev: {rev}\n    hooks:\n      - id: offlint\n"
        "        args: [--output-format, full]\n")
    (work / "recipe.py").write_text(GOOD)
    (work / "launch").write_text("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                                 "python run_recipe.py --recipe recipe model.pipeline_model_parallel_size=1\n")
    (work / "LICENSE").write_text("Apache-2.0\n")
    # an excluded directory stays out although pre-commit names its files (the hook's --force-exclude)
    (work / "pyproject.toml").write_text('[tool.offlint]\nextend-exclude = ["vendored"]\n')
    (work / "vendored").mkdir()
    (work / "vendored" / "recipe.py").write_text(BAD.replace("def recipe", "def vendored_recipe"))  # no 2nd `recipe`
    _git(work, "add", "-A")
    env_home = {"PRE_COMMIT_HOME": str(tmp_path / "pc-cache"), "PATH": __import__("os").environ["PATH"],
                "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    clean = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env_home, timeout=900)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "offlint" in clean.stdout and "Passed" in clean.stdout
    (work / "recipe.py").write_text(BAD)
    _git(work, "add", "-A")
    bad = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env_home, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "OFL102" in bad.stdout and "--> recipe.py:4:5" in bad.stdout
    # Only the extension-less launch script is wrong now: it is linted on top of the recipe it names.
    (work / "recipe.py").write_text(GOOD)
    (work / "launch").write_text("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                                 "python run_recipe.py --recipe recipe model.pipeline_model_parallel_size=2\n")
    _git(work, "add", "-A")
    bad = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env_home, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "OFL102" in bad.stdout and "on the command line (launch:3:" in bad.stdout
