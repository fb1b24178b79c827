"""Running a script of benchmarks/ as a user would, for the tests of those scripts."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A recipe with one finding (OFL202: more offloaded layers than the model has); {name}: its function's name
RECIPE = """
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def {name}():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, cpu_offloading=True, cpu_offloading_num_layers=9))
"""


def run_benchmark(script: str, *args: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """`python benchmarks/SCRIPT ARGS...` from `cwd`, with this checkout's offlint first on the path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
