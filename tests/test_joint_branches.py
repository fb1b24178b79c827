"""A finding that holds only where two or more undecided branches go one way together is possible, not certain.

Megatron Bridge PR 1891's performance helper set offloading under `if settings.cpu_offloading_num_layers is not
None:` and selective recompute under `if settings.recompute_modules is not None:`, on a preset offlint could not
read (an import the PR broke). OFL103 was an error on the path where both are taken, though no preset set both:
whether two tests on unknown data are ever true together is as unknown as the data. One branch, or a path the
user's own flags choose, stays a finding."""

from __future__ import annotations

import textwrap

from offlint.api import CheckOptions, check

HELPER = """
def set_workload_base_configs(cfg, settings):
    if settings.cpu_offloading_num_layers is not None:
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
    {second}
    return cfg


def llama3_70b_pretrain_config_b200():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    set_workload_base_configs(cfg, load_preset())
    return cfg
"""
TWO = """if settings.recompute_modules is not None:
        cfg.model.recompute_granularity = "selective\""""
ONE = """cfg.model.recompute_granularity = "selective\""""


def _found(tmp_path, monkeypatch, second: str, strict=False) -> list[tuple[str, bool]]:
    (tmp_path / "recipe.py").write_text(textwrap.dedent(HELPER).replace("{second}", second))
    monkeypatch.chdir(tmp_path)
    result = check(["recipe.py"], CheckOptions(select=["OFL103"], strict=strict, mcore_version="0.20.0",
                                               root=tmp_path))
    assert not result.errors, result.errors
    return [(f.unit, f.possible) for f in result.findings]


def test_two_undecided_branches_together_are_only_possible(tmp_path, monkeypatch):
    assert _found(tmp_path, monkeypatch, TWO) == []
    assert [possible for _, possible in _found(tmp_path, monkeypatch, TWO, strict=True)] == [True]


def test_one_undecided_branch_is_a_finding(tmp_path, monkeypatch):
    assert [possible for _, possible in _found(tmp_path, monkeypatch, ONE)] == [False]
