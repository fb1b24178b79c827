"""benchmarks/scope_check.py: a check of one file reports what the whole tree reports about it, also right after
a commit adds the file (--added), on a tree of our own whose findings point from one file into another."""

from __future__ import annotations

import importlib.util
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

# Two recipes set 10 layers and call a helper that splits them over three stages: the whole tree reports the
# helper line's finding once, for split_one_config (split_two_config in `shared_with`, related lines in
# split_one.py only). split_two.py has a finding of its own, so the check of it alone is compared: it reports the
# helper line's finding for its own recipe, pointing into split_two.py. The same finding, not an extra one.
SPLIT = """
def split(cfg):
    cfg.model.pipeline_model_parallel_size = 3
    return cfg
"""
SPLIT_ONE = """
from megatron.bridge.training.config import ConfigContainer
from recipes.common import _pretrain_common
from recipes.split import split


def split_one_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model.num_layers = 10
    return split(cfg)
"""
SPLIT_TWO = SPLIT_ONE.replace("split_one_config", "split_two_config") + """

def seven_layers_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model.num_layers = 7
    return cfg
"""

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


def test_a_finding_the_whole_tree_reports_once_for_two_recipes_agrees_with_either_file_alone(tree):
    for name, text in (("split", SPLIT), ("split_one", SPLIT_ONE), ("split_two", SPLIT_TWO)):
        (tree / "recipes" / f"{name}.py").write_text(text)
    done = subprocess.run([sys.executable, str(SCRIPT), str(tree), "--", "--mcore-version", "0.20.0"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "6 files the whole tree's 4 findings point into; 0 checked alone " \
        "report otherwise", done.stdout


def test_only_the_same_finding_for_one_of_its_shared_units_is_tolerated():
    spec = importlib.util.spec_from_file_location("scope_check", SCRIPT)
    scope_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scope_check)
    reported = {"code": "OFL218", "filename": "recipes/helpers.py", "location": {"row": 3, "column": 5},
                "message": "m", "unit": "deepened_config", "shared_with": ["deepened_too_config"]}
    alone = dict(reported, unit="deepened_too_config", shared_with=[])
    assert scope_check._shared(alone, [reported])
    assert not scope_check._shared(dict(alone, unit="other_config"), [reported])  # a unit it was not found for
    assert not scope_check._shared(dict(alone, message="n"), [reported])  # another finding at that line
    assert not scope_check._shared(alone, [dict(reported, shared_with=[])])
