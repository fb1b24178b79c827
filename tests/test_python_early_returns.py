"""A helper's early return on a path offlint cannot decide: the statements after it run on the other paths only.

Bridge's performance overrides guard each group of settings (`if not use_megatron_fsdp: return`, then the FSDP
settings). Where the guard's value is unknown, the settings after it hold only on the path that goes on; on the
path that returned, the config is as it was at the return. offlint had applied them on every path: a fork whose
workload presets were missing got a plain OFL122 for the FSDP path's settings on every DeepSeek-V3 recipe
(denys-fridman/Megatron-Bridge b0b4232). The tree is written here in that shape (a fixture of our own).
"""

from __future__ import annotations

import textwrap

import pytest

from offlint.api import CheckOptions, check
from offlint.types import OneOf
from offlint.units import load_unit

RECIPE = '''\
import torch

from settings import FSDP


def _set_fsdp(recipe, use_megatron_fsdp=False):
    if not use_megatron_fsdp:
        return recipe
    recipe.ddp.use_megatron_fsdp = True
    if recipe.optimizer.use_precision_aware_optimizer:
        recipe.optimizer.use_precision_aware_optimizer = False
    return recipe


def _nested(recipe, fast, faster):
    if fast:
        if faster:
            return
        recipe.model.recompute_granularity = "selective"
    recipe.model.recompute_modules = ["core_attn"]


def _every_path_returns(recipe, fast):
    if fast:
        recipe.model.cuda_graph_impl = "local"
        return
    else:
        recipe.model.cuda_graph_impl = "transformer_engine"
        return


def _raises_or_returns(recipe, mode):
    if mode == "bad":
        raise ValueError(mode)
    elif mode == "skip":
        return
    recipe.model.fine_grained_activation_offloading = True


def deepseek_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.optimizer.use_distributed_optimizer = True
    cfg.optimizer.use_precision_aware_optimizer = True
    cfg.optimizer.main_grads_dtype = torch.bfloat16
    _set_fsdp(cfg, use_megatron_fsdp=FSDP.use_megatron_fsdp)
    _nested(cfg, FSDP.fast, FSDP.faster)
    _every_path_returns(cfg, FSDP.fast)
    _raises_or_returns(cfg, FSDP.mode)
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "settings.py").write_text("")  # FSDP is not defined there: unknown
    (tmp_path / "recipe.py").write_text(RECIPE)
    return tmp_path


def _get(key: str):
    return load_unit("recipe.py", "deepseek_pretrain_config", mcore_version="0.20.0").resolved.get(key)


def _values(value) -> list:
    """The values a OneOf holds, one per path."""
    assert isinstance(value.value, OneOf), value
    return [path[0] for path in value.value.paths]


def test_settings_after_an_undecided_guard_hold_on_the_path_that_goes_on_only(tree):
    assert sorted(_values(_get("optimizer.use_precision_aware_optimizer"))) == [False, True]
    assert True in _values(_get("ddp.use_megatron_fsdp"))


def test_the_finding_names_the_path_it_holds_on(tree):
    result = check(["recipe.py"], CheckOptions(select=["OFL122"], mcore_version="0.20.0", root=tree))
    (found,) = result.findings
    assert not found.possible
    assert found.message.endswith("(on the path where `if not use_megatron_fsdp` (recipe.py:7) is false)")


def test_a_nested_return_leaves_both_outer_writes_undone_on_its_path(tree):
    assert "selective" in _values(_get("model.recompute_granularity"))
    assert ["core_attn"] in _values(_get("model.recompute_modules"))
    assert len(set(map(repr, _values(_get("model.recompute_modules"))))) == 2  # and unset where `faster` returned


def test_every_path_returning_and_a_raise_keep_their_meaning(tree):
    assert sorted(_values(_get("model.cuda_graph_impl"))) == ["local", "transformer_engine"]
    # the raising path ends; the returning one leaves the switch as it was; the other turns it on
    assert True in _values(_get("model.fine_grained_activation_offloading"))
    assert len(set(map(repr, _values(_get("model.fine_grained_activation_offloading"))))) == 2


def test_a_decided_guard_is_not_a_split(tree):
    (tree / "settings.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass


        @dataclass
        class Workload:
            use_megatron_fsdp: bool | None = None
            fast: bool = False
            faster: bool = False
            mode: str = "on"


        FSDP = Workload()
    """))
    assert _get("optimizer.use_precision_aware_optimizer").value is True
    assert _get("ddp.use_megatron_fsdp").value is False
    assert _get("model.recompute_modules").value == ["core_attn"]


MACHINE = '''\
import dataclasses

import torch


def _apply_overrides(config_obj, overrides):
    if not dataclasses.is_dataclass(config_obj):
        return
    config_obj.cpu_offloading = overrides


def _dispatcher(model_config):
    if not torch.cuda.is_available():
        model_config.cpu_offloading_num_layers = 4
        return
    properties = torch.cuda.get_device_properties(0)
    if properties.major not in [8, 9, 10]:
        model_config.cpu_offloading_num_layers = 8  # a fallback for another GPU: no path a recipe's author takes
        return
    model_config.cpu_offloading_num_layers = 2


def gb200_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    _apply_overrides(cfg.model, True)
    _dispatcher(cfg.model)
    return cfg
'''


def test_a_split_on_the_machine_the_job_runs_on_gives_possible_findings_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text(MACHINE)
    # `dataclasses.is_dataclass` of a config object is decided: the override is applied on every path
    assert load_unit("recipe.py", "gb200_pretrain_config", mcore_version="0.20.0").resolved.get(
        "model.cpu_offloading").value is True
    # 8 of 8 layers offloaded holds only on the fallback for another GPU: possible, under --strict alone
    for strict in (False, True):
        found = check(["recipe.py"], CheckOptions(select=["OFL101"], strict=strict, mcore_version="0.20.0",
                                                  root=tmp_path)).findings
        assert [f.possible for f in found] == ([True] if strict else [])
