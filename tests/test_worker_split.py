"""The workers' shares of a cold run's files (pipeline.shares) and how a worker takes files (pipeline._take): every
file read exactly once, the same files giving the same shares, and the same findings with one worker and two."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from offlint import pipeline
from offlint.api import CheckOptions, check
from offlint.discover import SourceFile
from offlint.pipeline import Job, Texts

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
    first = pipeline.shares(job, files, count)
    assert len(first) == count
    assert sorted(f.path for share in first for f in share) == sorted(f.path for f in files)
    again = pipeline.shares(_job(tmp_path)[0], list(reversed(files)), count)
    assert [[f.path for f in share] for share in again] == [[f.path for f in share] for share in first]
    if count == 2:
        assert all(share for share in first)  # both workers have work


def test_workers_taking_files_take_each_once_also_from_another_share(tmp_path):
    _tree(tmp_path)
    job, files = _job(tmp_path)
    pipeline._SHARES = pipeline.shares(job, files, 2)
    pipeline._CURSORS = multiprocessing.get_context("fork").Array(
        "i", [n for share in pipeline._SHARES for n in (0, len(share))] + [0])
    taken: list[str] = []
    try:
        # one process plays worker 0 until its share is done, then keeps taking (from share 1's end), 5 at a time
        pipeline._SHARE = None
        while batch := pipeline._take(5):
            taken.extend(f.path for f in batch)
        assert pipeline._SHARE == 0
    finally:
        pipeline._SHARES = pipeline._CURSORS = pipeline._SHARE = None
    assert sorted(taken) == sorted(f.path for f in files)


def test_one_worker_and_two_give_the_same_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    serial = check(["."], CheckOptions(root=tmp_path, cache=False, workers=1))
    parallel = check(["."], CheckOptions(root=tmp_path, cache=False, workers=2))
    assert [(str(f.location), f.code, f.message) for f in serial.findings] == \
           [(str(f.location), f.code, f.message) for f in parallel.findings]
    assert len([f for f in serial.findings if f.code == "OFL102"]) == 24
