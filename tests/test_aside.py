"""Work the parent wants after every file is read, done by the forked workers, idle by then (workers.Aside): the
config fields of the tree's own classes, which OFL003 reads after the launches are linked and checked. A worker's
answer is the one the parent would work out (the same findings as one process), the parent does not work it out
again, a task that fails is worked out in the parent, and no worker outlives the check."""

from __future__ import annotations

import multiprocessing
from concurrent.futures.process import BrokenProcessPool

import pytest

from offlint import api, workers
from offlint.api import CheckOptions, check
from offlint.sources import tree_config_fields
from tests.check_helpers import write_tree

CONFIG = '''from dataclasses import dataclass, field


@dataclass
class CheckpointConfig:
    save: str | None = None
    save_interval: int | None = None
    async_save: bool = False


@dataclass
class ConfigContainer:
    model: object
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
'''
PROVIDER = '''from dataclasses import dataclass

from megatron.core.transformer import TransformerConfig


@dataclass
class FluxProvider(TransformerConfig):
    in_channels: int = 64
'''
LAUNCH = """#!/bin/bash
torchrun --nproc_per_node=8 scripts/training/run_recipe.py --recipe flux_config \\
    checkpoint.save_intervall=100 checkpoint.async_save=true model.in_channels=16 model.in_channel=16 \\
    model.kv_chanels=128
"""
FILLER = "import os\n\nVALUE_{n} = os.environ.get('X_{n}', '{n}')\n"  # enough files for two workers to fork

TREE = {
    "src/megatron/bridge/training/config.py": CONFIG,
    "src/megatron/bridge/models/flux.py": PROVIDER,
    "launch.sh": LAUNCH,
    **{f"src/megatron/bridge/utils/part{n}.py": FILLER.format(n=n) for n in range(24)},
}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    write_tree(tmp_path, TREE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def worked_out_here(monkeypatch) -> list[str]:
    """The readings of the tree's config classes made in this process (a forked worker's are its own)."""
    calls: list[str] = []
    for name in ("fields_by_section", "container_sections"):
        original = getattr(tree_config_fields, name)
        monkeypatch.setattr(tree_config_fields, name,
                            lambda texts, original=original, name=name: calls.append(name) or original(texts))
    return calls


def _unknown_keys(root, workers: int) -> list[tuple[str, int, str]]:
    result = check(["."], CheckOptions(root=root, mcore_version="0.20.0", cache=False, workers=workers))
    return sorted((f.location.path, f.location.line, f.message) for f in result.findings if f.code == "OFL003")


def test_the_workers_answer_is_the_one_process_answer(tree, worked_out_here):
    alone = _unknown_keys(tree, workers=1)
    assert sorted(worked_out_here) == ["container_sections", "fields_by_section"]
    worked_out_here.clear()
    assert _unknown_keys(tree, workers=2) == alone
    assert worked_out_here == []  # a worker read the tree's classes: the parent did not read them again
    # (what the answer says: the tree's checkpoint class lacks the key, its provider defines in_channels, and the
    # key one letter from it may be meant for it; kv_chanels is nearer megatron-core's kv_channels than any of the
    # tree's)
    assert [(path, message.split(":")[0].split(";")[0]) for path, _, message in alone] == [
        ("launch.sh", "checkpoint.save_intervall is not a field of checkpoint (CheckpointConfig, "
                      "src/megatron/bridge/training/config.py"),
        ("launch.sh", "model.kv_chanels is not a config field"),
    ]


def _failing(text, python_paths):
    raise RuntimeError("a task that fails")


def test_a_task_that_fails_is_worked_out_in_the_parent(tree, monkeypatch, worked_out_here):
    alone = _unknown_keys(tree, workers=1)
    worked_out_here.clear()
    monkeypatch.setattr(api, "tree_fields", _failing)  # (the workers, forked later, run it)
    assert _unknown_keys(tree, workers=2) == alone
    assert sorted(worked_out_here) == ["container_sections", "fields_by_section"]


def test_no_worker_outlives_the_check(tree):
    _unknown_keys(tree, workers=2)
    assert multiprocessing.active_children() == []


def test_without_workers_there_is_no_answer():
    with workers.Aside() as aside:
        aside.add("task", _failing, [])
        assert aside.result("task") is None
        assert aside.result("never added") is None


class _StoppedPool:
    """A pool one of whose workers stopped: it takes no task (concurrent.futures raises BrokenProcessPool)."""

    def __init__(self):
        self.shut = False

    def submit(self, *args):
        raise BrokenProcessPool("A child process terminated abruptly")

    def shutdown(self, wait=True, cancel_futures=False):
        self.shut = True


def test_a_pool_that_takes_no_task_leaves_the_caller_to_work_it_out():
    pool = _StoppedPool()
    with workers.Aside() as aside:
        aside.add("task", _failing, [])
        aside.start(pool)
        assert aside.result("task") is None
    assert pool.shut  # (and it is still shut down on leaving)
