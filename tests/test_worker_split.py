"""The workers' shares of a cold run's files (workers.shares) and how workers take files (workers.WorkQueue): every
file read exactly once, the same files giving the same shares, takes that shrink with what is left, and the same
findings with one worker and two."""

from __future__ import annotations

import copy
import multiprocessing
from pathlib import Path

import pytest

from offlint import workers
from offlint.api import CheckOptions, check
from offlint.discover import SourceFile
from offlint.job import Job, Texts

BASE = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider
from shared.sizes import LAYERS


def _pretrain_common(pp):
    return ConfigContainer(model=GPTModelProvider(num_layers=LAYERS, pipeline_model_parallel_size=pp),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
RECIPE = '''
from {package}.common import _pretrain_common


def {name}_offload_config():
    cfg = _pretrain_common({pp})
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''


def _tree(root: Path) -> None:
    (root / "shared").mkdir(parents=True)
    (root / "shared" / "__init__.py").write_text("")
    (root / "shared" / "sizes.py").write_text("LAYERS = 8\n")
    for family in range(12):
        package = root / f"family{family}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "common.py").write_text(BASE)
        for index in range(6):
            (package / f"r{index}.py").write_text(
                RECIPE.format(package=f"family{family}", name=f"m{index}", pp=4 if (family + index) % 3 == 0 else 1))
        (package / "notes.yaml").write_text(f"name: family{family}\n")


def _job(root: Path) -> tuple[Job, list[SourceFile]]:
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            files.append(SourceFile(rel, "python" if rel.endswith(".py") else "yaml", explicit=False))

    def read(rel: str):
        return (root / rel).read_text(), ""

    python = [f.path for f in files if f.kind == "python"]
    return Job(files, Texts(read), python, [], None, False), files


@pytest.mark.parametrize("count", [1, 2, 3])
def test_every_file_is_in_exactly_one_share_and_the_shares_are_the_same_each_time(tmp_path, count):
    _tree(tmp_path)
    job, files = _job(tmp_path)
    first = workers.shares(job, files, count)
    assert len(first) == count
    assert sorted(f.path for share in first for f, _ in share) == sorted(f.path for f in files)
    again = workers.shares(_job(tmp_path)[0], list(reversed(files)), count)
    assert [[f.path for f, _ in share] for share in again] == [[f.path for f, _ in share] for share in first]
    if count == 2:
        assert all(share for share in first)  # both workers have work


def _queue(job, files, count=2) -> workers.WorkQueue:
    return workers.WorkQueue(workers.shares(job, files, count), multiprocessing.get_context("fork"))


def test_a_worker_takes_its_own_share_then_the_others_each_file_once(tmp_path):
    _tree(tmp_path)
    job, files = _job(tmp_path)
    queue = _queue(job, files)
    own = [f.path for f, _ in workers.shares(job, files, 2)[0]]
    taken: list[str] = []
    while batch := queue.take():  # one process plays the first worker until nothing is left
        taken.extend(f.path for f in batch)
    assert queue.share == 0
    assert taken[:len(own)] == own  # its own share first, in order
    assert sorted(taken) == sorted(f.path for f in files)


def test_two_workers_taking_in_turn_take_each_file_once(tmp_path):
    _tree(tmp_path)
    job, files = _job(tmp_path)
    first = _queue(job, files)
    second = copy.copy(first)  # a forked worker: the same cursors, its own share
    taken: list[str] = []
    turn = 0
    while True:
        batch = (second if turn % 3 == 0 else first).take()  # the first worker takes twice as often
        taken.extend(f.path for f in batch)
        if not batch:
            break  # nothing left for anyone: the other finds nothing either
        turn += 1
    assert not first.take() and not second.take()
    assert {first.share, second.share} == {0, 1}
    assert sorted(taken) == sorted(f.path for f in files)


def test_each_take_stops_at_the_file_reaching_a_part_of_what_is_left(tmp_path):
    _tree(tmp_path)
    job, files = _job(tmp_path)
    weight = {f.path: workers._weight(job, f) for f in files}
    queue = _queue(job, files)
    left = sum(weight.values())
    takes = []
    while batch := queue.take():
        most = min(queue.largest, left / (2 * workers.GUIDED))
        # not a file more than it needs: counted from the front of its own share, from the end of another's
        assert min(sum(weight[f.path] for f in batch[:-1]), sum(weight[f.path] for f in batch[1:])) < most
        left -= sum(weight[f.path] for f in batch)
        takes.append(len(batch))
    assert left == 0
    assert max(takes) > 1 and takes[-1] == 1  # several files at first, single files at the end


def test_one_worker_and_two_give_the_same_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    serial = check(["."], CheckOptions(root=tmp_path, cache=False, workers=1))
    parallel = check(["."], CheckOptions(root=tmp_path, cache=False, workers=2))
    assert [(str(f.location), f.code, f.message) for f in serial.findings] == \
           [(str(f.location), f.code, f.message) for f in parallel.findings]
    assert len([f for f in serial.findings if f.code == "OFL102"]) == 24
