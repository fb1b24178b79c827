"""The launch commands' rules, split with a forked child once linking is done (pipeline.forked_map): the answers are
those one process gives, in the same order; half of them really come from another process; a child that fails is
made up for in the parent; a small list, or a run of one worker, forks nothing."""

from __future__ import annotations

import os

import pytest

from offlint import api, pipeline
from offlint.api import CheckOptions, check
from tests.check_helpers import write_tree

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forked_map forks")


def _pid_and_square(item: int) -> tuple[int, int]:
    return os.getpid(), item * item


def test_answers_in_order_half_from_a_child():
    items = list(range(pipeline.MIN_FORKED_ITEMS + 9))
    answers = pipeline.forked_map(_pid_and_square, items, workers=2)
    assert [square for _, square in answers] == [i * i for i in items]
    half = len(items) // 2
    assert {pid for pid, _ in answers[:half]} == {os.getpid()}
    children = {pid for pid, _ in answers[half:]}
    assert len(children) == 1 and os.getpid() not in children


@pytest.mark.parametrize("count, workers", [(pipeline.MIN_FORKED_ITEMS - 1, 2), (pipeline.MIN_FORKED_ITEMS * 2, 1)])
def test_forks_nothing_for_few_items_or_one_worker(count, workers):
    answers = pipeline.forked_map(_pid_and_square, list(range(count)), workers=workers)
    assert {pid for pid, _ in answers} == {os.getpid()}
    assert [square for _, square in answers] == [i * i for i in range(count)]


def test_a_child_that_fails_is_made_up_for_here():
    parent = os.getpid()

    def only_here(item: int) -> int:
        if os.getpid() != parent:
            raise RuntimeError("the child stops")
        return item + 1

    items = list(range(pipeline.MIN_FORKED_ITEMS * 2))
    assert pipeline.forked_map(only_here, items, workers=2) == [i + 1 for i in items]


def test_a_child_that_exits_without_answering_is_made_up_for_here():
    parent = os.getpid()

    def leaves(item: int) -> int:
        if os.getpid() != parent:
            os._exit(0)  # (a child killed after an empty write: status 0, nothing to unpickle)
        return -item

    items = list(range(pipeline.MIN_FORKED_ITEMS * 2))
    assert pipeline.forked_map(leaves, items, workers=2) == [-i for i in items]


LAUNCH = """#!/bin/bash
torchrun --nproc_per_node=8 pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size {pp} \\
    --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 \\
    --seq-length 2048 --max-position-embeddings 2048 --bf16 --optimizer-cpu-offload
"""


def test_a_check_splits_its_launches_and_finds_what_one_process_finds(tmp_path, monkeypatch):
    count = pipeline.MIN_FORKED_ITEMS + 8
    write_tree(tmp_path, {f"launch{n:02d}.sh": LAUNCH.format(pp=1 + n % 3) for n in range(count)})
    monkeypatch.chdir(tmp_path)
    seen = tmp_path.parent / f"{tmp_path.name}-pids"
    checked = api._check_launch

    def noted(unit, *args):
        with open(seen, "a") as out:  # (one short write per launch, from whichever process checks it)
            out.write(f"{os.getpid()}\n")
        return checked(unit, *args)

    monkeypatch.setattr(api, "_check_launch", noted)

    def run(workers: int):
        seen.write_text("")
        result = check(["."], CheckOptions(cache=False, mcore_version="0.16.1", workers=workers))
        return [(f.location, f.code, f.message) for f in result.findings], seen.read_text().split()

    alone, alone_pids = run(1)
    split, split_pids = run(2)
    assert split == alone
    assert {f[1] for f in alone} >= {"OFL115", "OFL218"}
    assert len(alone_pids) == len(split_pids) == count
    assert set(alone_pids) == {str(os.getpid())}
    assert len(set(split_pids)) == 2 and str(os.getpid()) in split_pids
