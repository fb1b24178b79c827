"""Bridge's communication-overlap section in the Python reader: `cfg.comm_overlap = CommOverlapConfig(...)` and later
writes through it (`cfg.comm_overlap.overlap_moe_expert_parallel_comm = True` in a finalising helper of another
module), the fields the call leaves out read from the linted tree's own class, and ConfigContainer's default of None
for the section. Fixtures of our own, in the shape Megatron Bridge's performance recipes write this (the class
re-exported by a recipe family's common module, the recipe importing it from there)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from offlint.sources.python import read_python
from offlint.units import load_unit

OVERLAP_CLASS = '''
    from dataclasses import dataclass
    from typing import Optional


    @dataclass(kw_only=True)
    class CommOverlapConfig:
        tp_comm_overlap: bool
        tp_comm_bootstrap_backend: Optional[str] = "ucc"
        overlap_p2p_comm: Optional[bool] = None
        overlap_moe_expert_parallel_comm: Optional[bool] = None
        delay_wgrad_compute: Optional[bool] = False
'''

COMMON = '''
    from megatron.bridge.training.comm_overlap import CommOverlapConfig
    from megatron.bridge.training.config import ConfigContainer


    def _finalize_with_ep_overlap(cfg):
        cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
        cfg.comm_overlap.delay_wgrad_compute = True


    def _overlap_param_gather(cfg):
        if cfg.comm_overlap is not None:
            cfg.comm_overlap.overlap_p2p_comm = True
'''

RECIPES = '''
    from megatron.bridge.perf_recipes.demo.common import (
        CommOverlapConfig,
        ConfigContainer,
        _finalize_with_ep_overlap,
        _overlap_param_gather,
    )
    from megatron.bridge.models import GPTModelProvider


    def ep_overlap_pretrain_config() -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=4))
        cfg.model.expert_model_parallel_size = 8
        cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
        _finalize_with_ep_overlap(cfg)
        _overlap_param_gather(cfg)
        return cfg


    def no_overlap_pretrain_config() -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=4))
        _overlap_param_gather(cfg)
        return cfg


    def overlap_dropped_pretrain_config() -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=4), comm_overlap=CommOverlapConfig(tp_comm_overlap=True))
        cfg.comm_overlap = None
        _overlap_param_gather(cfg)
        return cfg


    def none_given_pretrain_config() -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=4), comm_overlap=None)
        _overlap_param_gather(cfg)
        return cfg


    def required_field_left_out_pretrain_config() -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=4))
        cfg.comm_overlap = CommOverlapConfig()
        return cfg


    def overlap_alone_config():
        return CommOverlapConfig(tp_comm_overlap=True)
'''


def _tree(tmp_path: Path, with_class: bool = True) -> Path:
    files = {"src/megatron/bridge/perf_recipes/demo/common.py": COMMON,
             "src/megatron/bridge/perf_recipes/demo/h100.py": RECIPES}
    if with_class:
        files["src/megatron/bridge/training/comm_overlap.py"] = OVERLAP_CLASS
    (tmp_path / "pyproject.toml").write_text("")
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    return tmp_path / "src/megatron/bridge/perf_recipes/demo/h100.py"


def _resolved(tmp_path, monkeypatch, recipe: str, with_class: bool = True):
    monkeypatch.chdir(tmp_path)
    recipes = _tree(tmp_path, with_class)
    return load_unit(str(recipes.relative_to(tmp_path)), recipe, mcore_version="0.20.0").resolved


def test_the_section_and_the_helpers_later_writes_through_it_are_read(tmp_path, monkeypatch):
    r = _resolved(tmp_path, monkeypatch, "ep_overlap_pretrain_config")
    overlap = r.get("comm_overlap.overlap_moe_expert_parallel_comm")
    assert (overlap.state, overlap.value) == ("known", True)
    assert overlap.assignment.location.path.endswith("demo/common.py")  # where the helper wrote it
    assert (r.get("comm_overlap.delay_wgrad_compute").value, r.get("comm_overlap.tp_comm_overlap").value) == \
        (True, False)
    # `if cfg.comm_overlap is not None:` is decided: the section is an object here
    assert r.get("comm_overlap.overlap_p2p_comm").value is True
    assert r.get("model.expert_model_parallel_size").value == 8


def test_the_fields_the_call_leaves_out_have_the_trees_own_defaults(tmp_path, monkeypatch):
    r = _resolved(tmp_path, monkeypatch, "ep_overlap_pretrain_config")
    backend = r.get("comm_overlap.tp_comm_bootstrap_backend")
    assert (backend.state, backend.value) == ("known", "ucc")  # this tree's default, not Bridge's "nccl"
    assert any("the default of CommOverlapConfig.tp_comm_bootstrap_backend at "
               "src/megatron/bridge/training/comm_overlap.py:9" in step for step in backend.assignment.via)
    assert backend.assignment.location.path.endswith("demo/h100.py")  # the constructor call


def test_a_container_that_never_gets_the_section_holds_none(tmp_path, monkeypatch):
    for recipe in ("no_overlap_pretrain_config", "overlap_dropped_pretrain_config", "none_given_pretrain_config"):
        r = _resolved(tmp_path, monkeypatch, recipe)
        for key in ("comm_overlap.overlap_moe_expert_parallel_comm", "comm_overlap.tp_comm_overlap",
                    "comm_overlap.overlap_p2p_comm"):
            value = r.get(key)
            assert (value.state, value.value) == ("default", None), (recipe, key, value)


def test_a_required_field_left_out_is_unknown_not_a_default(tmp_path, monkeypatch):
    r = _resolved(tmp_path, monkeypatch, "required_field_left_out_pretrain_config")
    value = r.get("comm_overlap.tp_comm_overlap")
    assert value.state == "unknown" and "no default" in value.value.reason
    assert r.get("comm_overlap.overlap_moe_expert_parallel_comm").value is None


def test_without_the_class_in_the_tree_its_defaults_are_unknown(tmp_path, monkeypatch):
    r = _resolved(tmp_path, monkeypatch, "ep_overlap_pretrain_config", with_class=False)
    assert r.get("comm_overlap.overlap_moe_expert_parallel_comm").value is True  # written: known
    backend = r.get("comm_overlap.tp_comm_bootstrap_backend")
    assert backend.state == "unknown" and "not in the linted tree" in backend.value.reason


def test_an_overlap_config_on_its_own_is_not_a_training_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipes = _tree(tmp_path)
    units = read_python(str(recipes.relative_to(tmp_path)), recipes.read_text())
    names = {u.name for u in units}
    assert "ep_overlap_pretrain_config" in names and "overlap_alone_config" not in names


@pytest.mark.parametrize("taken", [True, False])
def test_a_section_given_on_one_path_only_is_not_known_on_both(tmp_path, monkeypatch, taken):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text(textwrap.dedent(f'''
        from megatron.bridge.training.config import ConfigContainer
        from megatron.bridge.training.comm_overlap import CommOverlapConfig


        def branchy_pretrain_config(overlap: bool = {taken}) -> ConfigContainer:
            cfg = ConfigContainer(model=None)
            if overlap:
                cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True)
            return cfg


        def undecided_pretrain_config(overlap) -> ConfigContainer:
            cfg = ConfigContainer(model=None)
            if overlap:
                cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True)
                cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
            return cfg
    '''))
    (tmp_path / "megatron/bridge/training").mkdir(parents=True)
    (tmp_path / "megatron/bridge/training/comm_overlap.py").write_text(textwrap.dedent(OVERLAP_CLASS))
    decided = load_unit("recipe.py", "branchy_pretrain_config", mcore_version="0.20.0").resolved
    assert decided.get("comm_overlap.tp_comm_overlap").value is (True if taken else None)
    undecided = load_unit("recipe.py", "undecided_pretrain_config", mcore_version="0.20.0").resolved
    key = "comm_overlap.overlap_moe_expert_parallel_comm"
    assert undecided.get(key).state == "unknown"  # True where the branch runs, the section's None where it does not
    assert [(value.state, value.value) for value, _ in undecided.paths(key)] == [("known", True), ("default", None)]
