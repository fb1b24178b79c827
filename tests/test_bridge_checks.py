"""OFL223: Megatron Bridge's ConfigContainer.validate refuses cuda_graph_impl="local" outside full-iteration graphs
(utils/cuda_graph.py validate_cuda_graph_configuration, from 7e8662c66), judged only where the linted tree's Bridge
makes that check (sources/bridge_checks.py). Fixtures of our own, in the shapes Bridge writes."""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json

CHECK = '''
def is_full_iteration_cuda_graph(config):
    return "full_iteration" in (config.cuda_graph_modules or [])


def validate_cuda_graph_configuration(config, *, config_name: str = "model") -> None:
    """Validate the implementation/scope combinations Bridge supports."""
    if config.cuda_graph_impl == "local" and not is_full_iteration_cuda_graph(config):
        raise ValueError(
            f'Megatron Bridge supports {config_name}.cuda_graph_impl="local" only for '
            "full-iteration CUDA graphs. Use transformer_engine for scoped capture."
        )


def set_cuda_graph_modules(config, modules):
    config.cuda_graph_modules = list(modules)
'''
RECIPES = '''
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer


def _base() -> ConfigContainer:
    return ConfigContainer(model=GPTModelProvider(num_layers=8))


def scoped_local_config() -> ConfigContainer:
    cfg = _base()
    cfg.model.cuda_graph_impl = "local"
    cfg.model.cuda_graph_modules = ["attn", "mlp"]
    return cfg


def full_word_local_config() -> ConfigContainer:
    cfg = _base()
    cfg.model.cuda_graph_impl = "local"
    cfg.model.cuda_graph_scope = "full"
    return cfg


def full_iteration_config() -> ConfigContainer:
    cfg = _base()
    cfg.model.cuda_graph_impl = "local"
    cfg.model.cuda_graph_modules = ["full_iteration"]
    return cfg


def inference_layers_config() -> ConfigContainer:
    cfg = _base()
    cfg.model.cuda_graph_impl = "local"
    cfg.model.inference_cuda_graph_scope = "layer"
    return cfg


def scoped_te_config() -> ConfigContainer:
    cfg = _base()
    cfg.model.cuda_graph_impl = "transformer_engine"
    cfg.model.cuda_graph_modules = ["attn"]
    return cfg
'''


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "src/megatron/bridge/utils").mkdir(parents=True)
    (tmp_path / "src/megatron/bridge/recipes").mkdir(parents=True)
    (tmp_path / "src/megatron/bridge/utils/cuda_graph.py").write_text(CHECK)
    (tmp_path / "src/megatron/bridge/recipes/graphs.py").write_text(RECIPES)
    return tmp_path


def _units(findings: list[dict], code: str) -> list[str]:
    return sorted(u for f in findings if f["code"] == code for u in [f["unit"], *f.get("shared_with", [])])


def test_local_graphs_outside_full_iteration_are_refused_where_the_tree_s_bridge_refuses_them(tree):
    found = check_json(tree, "--no-cache")
    assert _units(found, "OFL223") == ["full_word_local_config", "scoped_local_config"]
    message = next(f["message"] for f in found if f["unit"] == "scoped_local_config" and f["code"] == "OFL223")
    assert "src/megatron/bridge/utils/cuda_graph.py:9" in message and "['attn', 'mlp']" in message
    assert _units(found, "OFL215") == []  # the deprecated "full" is refused here: OFL223 says it
    assert [f["severity"] for f in found if f["code"] == "OFL223"] == ["error", "error"]


def test_a_tree_without_the_check_runs_per_layer_local_graphs(tree):
    (tree / "src/megatron/bridge/utils/cuda_graph.py").write_text(CHECK.split("\n\ndef validate")[0] + "\n")
    found = check_json(tree, "--no-cache")
    assert _units(found, "OFL223") == []
    assert _units(found, "OFL215") == ["full_word_local_config"]  # megatron-core's deprecated spelling: per layer


def test_the_check_is_a_dependency_of_the_reading(tree):
    assert _units(check_json(tree), "OFL223") == ["full_word_local_config", "scoped_local_config"]
    (tree / "src/megatron/bridge/utils/cuda_graph.py").write_text(CHECK.replace("raise ValueError(", "print("))
    assert _units(check_json(tree), "OFL223") == []  # the cache saw the check go
