"""A model config holding a nested TransformerConfig, as megatron's ModelConfig classes do (`GPTModelConfig`,
`HybridModelConfig`: a `transformer: TransformerConfig` field whose fields they read and write flat through
`__getattr__`/`__setattr__`), and as Bridge's builder refactor writes recipes (`cfg.model =
NemotronHModelConfig(transformer=TransformerConfig(num_layers=52, ...), hybrid_layer_pattern=...)`, PR 4545). Read as
one flat model section: unread, every size was the default, offloading with `num_layers=0` was an error (OFL101) and
the memory estimate had no verdict. Fixtures of our own in that shape."""

from __future__ import annotations

import pytest

from offlint.units import load_unit
from tests.check_helpers import check_json

RECIPE = '''
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models.nemotronh import NemotronHModelConfig
from megatron.core.transformer import TransformerConfig


def nested_config() -> ConfigContainer:
    cfg = ConfigContainer()
    cfg.model = NemotronHModelConfig(
        transformer=TransformerConfig(num_layers=6, hidden_size=1024, num_attention_heads=8, seq_length=2048,
                                      pipeline_model_parallel_size=4),
        seq_length=4096,
    )
    cfg.model.cpu_offloading = True
    return cfg


def spread_config(**kwargs) -> ConfigContainer:
    cfg = ConfigContainer()
    cfg.model = NemotronHModelConfig(transformer=TransformerConfig(num_layers=8, **kwargs))
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text(RECIPE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _value(name: str, key: str):
    value = load_unit("recipe.py", name, mcore_version="0.20.0").resolved.get(key)
    return value.state, value.value


def test_the_nested_transformer_s_fields_are_the_model_s(tree):
    assert _value("nested_config", "model.num_layers") == ("known", 6)
    assert _value("nested_config", "model.pipeline_model_parallel_size") == ("known", 4)
    assert _value("nested_config", "model.seq_length") == ("known", 4096)  # its own field is read first
    assert _value("nested_config", "model.transformer")[0] != "known"  # not a value of its own
    assert _value("spread_config", "model.num_layers") == ("known", 8)
    assert _value("spread_config", "model.hidden_size")[0] == "unknown"  # `**kwargs` may set any field


def test_checks_see_the_nested_sizes(tree):
    codes = {f["code"] for f in check_json(tree, "--no-cache")}
    assert "OFL101" not in codes  # num_layers is 6, not the default 0
    assert {"OFL102", "OFL218"} <= codes  # offloading with PP4; 6 layers over 4 stages
