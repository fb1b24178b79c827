"""What a followed helper returns: a None it returns (`return layout` with the table's None for PP1, a bare
`return`) is the value None, not an unknown; a helper that falls off its end without returning stays unknown.

The tree is written here in the shapes Megatron Bridge uses (a fixture of our own, not Bridge code).
"""

from __future__ import annotations

import pytest

from offlint.units import load_unit

RECIPE = '''\
def _pipeline_layout(pp_size, vp_size):
    layouts = {
        (1, 1): None,
        (2, 1): [["embedding"] + ["decoder"] * 4, ["decoder"] * 4 + ["loss"]],
    }
    vp_size = 1 if vp_size is None else vp_size
    if (pp_size, vp_size) not in layouts:
        raise ValueError(f"no layout for PP {pp_size} and VP {vp_size}")
    layout = layouts[(pp_size, vp_size)]
    if layout is not None:
        layout = [list(stage) for stage in layout]
    return layout


def _nothing(pp_size):
    if pp_size == 1:
        return
    return "unreachable here"


def _falls_off(pp_size):
    pp_size + 1


def one_stage_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_layout = _pipeline_layout(1, 1)
    cfg.model.virtual_pipeline_model_parallel_size = _nothing(1)
    cfg.model.num_layers_in_first_pipeline_stage = _falls_off(1)
    return cfg


def two_stage_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.model.pipeline_model_parallel_layout = _pipeline_layout(2, None)
    return cfg
'''


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "llm.py").write_text(RECIPE)


def _get(recipe: str, key: str):
    return load_unit("recipes/llm.py", recipe, mcore_version="0.20.0").resolved.get(key)


def test_a_returned_none_is_the_value_none(recipes):
    layout = _get("one_stage_pretrain_config", "model.pipeline_model_parallel_layout")
    assert layout.state == "known" and layout.value is None
    vpp = _get("one_stage_pretrain_config", "model.virtual_pipeline_model_parallel_size")
    assert vpp.state == "known" and vpp.value is None
    two = _get("two_stage_pretrain_config", "model.pipeline_model_parallel_layout").value
    assert two == [["embedding", "decoder", "decoder", "decoder", "decoder"],
                   ["decoder", "decoder", "decoder", "decoder", "loss"]]


def test_a_helper_without_a_return_stays_unknown(recipes):
    assert _get("one_stage_pretrain_config", "model.num_layers_in_first_pipeline_stage").is_unknown
