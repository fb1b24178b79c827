"""In a run with forked workers, a file whose units are all recipes comes back without them (pipeline.Held): the
worker that read it keeps them, and once every file is read sends only those the launch commands run (directly or
through an `X as Y` re-export). Sent, or, when a worker cannot send them, decoded from the stored payload (read
again without a cache), the answer is the one-process, uncached one."""

import threading

import pytest

from offlint import file_outcomes, workers
from offlint.api import CheckOptions, check
from offlint.cache import Cache

COMMON = '''from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=16, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
RECIPE = '''from recipes.common import _pretrain_common


def {name}():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = {offload}
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
LAUNCH = '''#!/bin/bash
python scripts/training/run_recipe.py --recipe {name} model.cpu_offloading=True model.cpu_offloading_num_layers=3
'''
RUN = {"f0_r1_config", "legacy_config"}  # what the launches run: a recipe, and a re-export of f1_r2_config


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "common.py").write_text(COMMON)
    for family in range(4):
        (recipes / f"family{family}").mkdir()
        (recipes / f"family{family}" / "__init__.py").write_text("")
        for index in range(5):
            (recipes / f"family{family}" / f"r{index}.py").write_text(
                RECIPE.format(name=f"f{family}_r{index}_config", offload=(family + index) % 2 == 0))
    (recipes / "legacy.py").write_text("from recipes.family1.r2 import f1_r2_config as legacy_config\n"
                                       + RECIPE.format(name="legacy_own_config", offload=False))
    (tmp_path / "launch").mkdir()
    for name in sorted(RUN):
        (tmp_path / "launch" / f"train_{name}.sh").write_text(LAUNCH.format(name=name))
    return tmp_path


def _answer(root, workers: int, cache: bool, strict: bool = False) -> tuple:
    result = check(["."], CheckOptions(root=root, mcore_version="0.20.0", cache=cache, workers=workers,
                                       strict=strict))
    return ([(str(f.location), f.code, f.message, [str(r.location) for r in f.related]) for f in result.findings],
            result.files_checked, result.units, [(e.path, e.message) for e in result.errors], result.notes)


@pytest.fixture
def asked(monkeypatch):
    """What the parent asked the workers for (_fetch_held): [(names, {path: unit names sent})]."""
    calls = []
    original = workers._fetch_held

    def recording(pool, count, names):
        fetched = original(pool, count, names)
        calls.append((names, {path: [unit.name for unit in units] for path, units in fetched.units.items()}))
        return fetched

    monkeypatch.setattr(workers, "_fetch_held", recording)
    return calls


@pytest.fixture
def decoded(monkeypatch):
    """The files whose stored payload was decoded in the parent (Cache.previous)."""
    paths = []
    original = Cache.previous

    def recording(self, path):
        paths.append(path)
        return original(self, path)

    monkeypatch.setattr(Cache, "previous", recording)
    return paths


def test_the_workers_send_only_the_recipes_the_launches_run(tree, asked, decoded):
    answer = _answer(tree, workers=2, cache=True)
    assert answer == _answer(tree, workers=1, cache=False)
    [(names, sent)] = asked
    assert names == RUN | {"f1_r2_config"}  # the re-exported name, and the one it stands for
    assert sent == {"recipes/family0/r1.py": ["f0_r1_config"], "recipes/family1/r2.py": ["f1_r2_config"]}
    assert decoded == []  # no payload decoded: every recipe linking looked up came from the workers
    launches = [finding for finding in answer[0] if finding[0].startswith("launch/")]
    assert {finding[0].split(":")[0] for finding in launches} == {f"launch/train_{name}.sh" for name in RUN}
    assert answer[2] == 22 + 2  # every unit counted, held or not: 21 recipes of files, 1 of legacy.py, 2 launches


def test_a_warm_run_after_it_gives_the_same_answer(tree):
    cold = _answer(tree, workers=2, cache=True)
    assert _answer(tree, workers=2, cache=True) == cold
    assert _answer(tree, workers=2, cache=False) == cold


def test_when_the_workers_cannot_send_them_the_stored_payloads_give_the_same_answer(tree, monkeypatch, decoded):
    monkeypatch.setattr(workers, "_fetch_held", lambda pool, count, names: None)
    assert _answer(tree, workers=2, cache=True) == _answer(tree, workers=1, cache=False)
    assert sorted(decoded) == ["recipes/family0/r1.py", "recipes/family1/r2.py"]


def test_with_strict_every_unit_comes_back(tree, asked):
    strict = _answer(tree, workers=2, cache=True, strict=True)
    assert asked == []  # nothing held: --strict's notes concern every unit
    assert strict == _answer(tree, workers=1, cache=False, strict=True)


def test_without_a_cache_the_workers_hold_them_too(tree, asked):
    assert _answer(tree, workers=2, cache=False) == _answer(tree, workers=1, cache=False)
    [(names, sent)] = asked  # --no-cache: the same ask; nothing stored, so a file not sent would be read again
    assert names == RUN | {"f1_r2_config"}
    assert sent == {"recipes/family0/r1.py": ["f0_r1_config"], "recipes/family1/r2.py": ["f1_r2_config"]}


def test_without_a_cache_when_the_workers_cannot_send_them_the_files_are_read_again(tree, monkeypatch):
    expected = _answer(tree, workers=1, cache=False)
    monkeypatch.setattr(workers, "_fetch_held", lambda pool, count, names: None)
    again = []  # (the fixture's, set up after the one-process answer above)
    original = file_outcomes.read_one
    monkeypatch.setattr(file_outcomes, "read_one", lambda file, *args: again.append(file.path) or original(file, *args))
    assert _answer(tree, workers=2, cache=False) == expected
    assert sorted(again) == ["recipes/family0/r1.py", "recipes/family1/r2.py"]


def test_a_worker_alone_at_the_barrier_gives_up_in_time(monkeypatch):
    monkeypatch.setattr(workers, "_BARRIER", threading.Barrier(2))
    monkeypatch.setattr(workers, "HELD_TIMEOUT", 0.05)
    assert workers._worker_held(frozenset({"x"})) is None


SCRIPT = '''import argparse

from megatron.bridge.training.pretrain import pretrain
from recipes.common import _pretrain_common


def own_config(pipeline_model_parallel_size: int = 1):
    cfg = _pretrain_common()
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    args = parser.parse_args()
    cfg = own_config(pipeline_model_parallel_size=args.pipeline_model_parallel_size)
    pretrain(config=cfg, forward_step_func=None)


if __name__ == "__main__":
    main()
'''
SCRIPT_LAUNCH = '''#!/bin/bash
torchrun --nproc_per_node=8 examples/train_own.py --pipeline-model-parallel-size 2
'''


def test_the_recipes_of_a_launched_entry_script_are_sent_not_read_again(tree, asked, monkeypatch):
    """A Megatron-LM style launch of the tree's own script: linking reads every unit of the script's file
    (script_flags), so the workers send them all, and the parent reads no file again (Megatron Bridge's MIMO
    launches: three scripts read again in the parent, once every worker was done)."""
    (tree / "examples").mkdir()
    (tree / "examples" / "train_own.py").write_text(SCRIPT)
    (tree / "launch" / "train_own.sh").write_text(SCRIPT_LAUNCH)
    expected = _answer(tree, workers=1, cache=False)
    again = []  # the files read in the parent (forked workers append to their own copies)
    original = file_outcomes.read_one
    monkeypatch.setattr(file_outcomes, "read_one", lambda file, *args: again.append(file.path) or original(file, *args))
    assert _answer(tree, workers=2, cache=False) == expected
    linked = [finding for finding in expected[0] if finding[3] == ["launch/train_own.sh:2:51"]]
    assert [finding[:2] for finding in linked] == [("examples/train_own.py:10:5", "OFL102")]  # the launch's PP 2
    [(names, sent)] = asked
    assert sent["examples/train_own.py"] == ["own_config", "main"]
    assert again == []
