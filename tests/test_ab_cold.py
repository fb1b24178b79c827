"""benchmarks/ab_cold.py: two builds' cold checks in alternating pairs between floor runs; a folder without an
offlint package, or an offlint that fails, is one line and exit 2."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "ab_cold.py"
RECIPE = """
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def llama_pretrain_config():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, cpu_offloading=True, cpu_offloading_num_layers=9))
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "OFFLINT_CACHE_DIR"})


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "recipes").mkdir(parents=True)
    (tree / "recipes" / "llama.py").write_text(RECIPE)
    return tree


@pytest.mark.slow  # four cold checks and four floor runs
def test_each_pair_and_the_medians_are_printed(tmp_path):
    tree = _tree(tmp_path)
    done = _run(str(tree), str(ROOT), str(ROOT), "--pairs", "2", "--", "--mcore-version", "0.16.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["pair 1", "pair 2"]
    assert all(re.search(r"A [\d.]+ s \([\d.]+x floor, CPU [\d.]+ s\)", line) for line in lines[:2])
    assert lines[2].startswith(f"A {ROOT}: x floor median ") and lines[3].startswith(f"B {ROOT}: x floor median ")
    assert re.fullmatch(r"B/A: wall [\d.]+, CPU [\d.]+ \(medians of the pairs\)", lines[4])


def test_a_folder_without_offlint_is_one_line_and_exit_2(tmp_path):
    tree = _tree(tmp_path)
    done = _run(str(tree), str(tmp_path), str(ROOT), cwd=tmp_path)
    assert done.returncode == 2
    assert "no offlint package there" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""


def test_an_offlint_that_fails_stops_it_with_exit_2(tmp_path):
    tree = _tree(tmp_path)
    done = _run(str(tree), str(ROOT), str(ROOT), "--pairs", "1", "--", "--no-such-option", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("ab_cold: offlint (")


def test_each_build_is_compiled_before_it_is_measured(tmp_path):
    """Under PYTHONDONTWRITEBYTECODE a fresh `git archive` would be compiled again by every run and every worker."""
    import shutil

    tree = _tree(tmp_path)
    build = tmp_path / "build"
    shutil.copytree(ROOT / "offlint", build / "offlint", ignore=shutil.ignore_patterns("__pycache__"))
    _run(str(tree), str(build), str(build), "--pairs", "1", "--", "--no-such-option", cwd=tmp_path)
    compiled = {p.name.split(".")[0] for p in (build / "offlint" / "__pycache__").glob("*.pyc")}
    assert {"api", "pipeline", "cli"} <= compiled, sorted(compiled)
    assert list((build / "offlint" / "sources" / "__pycache__").glob("python_following.*.pyc"))
