"""benchmarks/scope_check.py: a check of one file reports what the whole tree reports about it, also right after
a commit adds the file (--added), on a tree of our own whose findings point from one file into another."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cache_file_set import COMMON, PLAIN

# The layer count comes from a helper in another module: the finding points into it (its related location)
DEEPENED = '''
from megatron.bridge.training.config import ConfigContainer
from recipes.common import _pretrain_common
from recipes.helpers import deepen


def deepened_config() -> ConfigContainer:
    return deepen(_pretrain_common())
'''
HELPERS = '''
def deepen(cfg):
    cfg.model.num_layers = 10
    return cfg
'''

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "scope_check.py"
pytestmark = pytest.mark.slow  # a whole-tree run per file


@pytest.fixture
def tree(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "common.py").write_text(COMMON)
    (tmp_path / "recipes" / "deepened.py").write_text(DEEPENED)
    (tmp_path / "recipes" / "plain.py").write_text(PLAIN)
    (tmp_path / "recipes" / "helpers.py").write_text(HELPERS)
    return tmp_path


def _files(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("added", [False, True])
def test_each_file_checked_alone_agrees_with_the_whole_tree(tree, added):
    before = _files(tree)
    done = subprocess.run([sys.executable, str(SCRIPT), str(tree), *(["--added"] if added else []), "--",
                           "--mcore-version", "0.20.0"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith("3 files the whole tree's 2 findings point into; 0 checked"), summary
    assert _files(tree) == before  # every file moved out is back, as it was
