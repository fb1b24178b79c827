"""`AutoBridge.from_hf_pretrained(id)`: what the tree's own bridge class for the model's architecture sets with
literal values is applied over the size table (offlint/sources/bridge_models.py). Fixtures of our own, in the shapes
Megatron Bridge writes its bridges (models/<family>/<name>_bridge.py) and recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.estimate.inputs import read_inputs
from offlint.sources.python import read_python
from offlint.sources.python_project import PythonProject
from offlint.units import load_unit

BASE_BRIDGE = '''
class MegatronModelBridge:
    PROVIDER_CLASS = None

    @classmethod
    def register_bridge(cls, *, source, target, provider=None, model_type=None):
        return lambda bridge_class: bridge_class

    def provider_bridge(self, hf_pretrained):
        provider_kwargs = self.hf_config_to_provider_kwargs(hf_pretrained.config)
        provider = self.PROVIDER_CLASS(**provider_kwargs)
        if getattr(hf_pretrained.config, "rope_scaling", None):
            provider.position_embedding_type = "yarn"
        else:
            provider.position_embedding_type = "rope"
        provider.rotary_percent = 0.5
        for key, value in provider_kwargs.pop("_rope_params", {}).items():
            setattr(provider, key, value)
        provider.make_vocab_size_divisible_by = 128
        return provider

    def hf_config_to_model_config_kwargs(self, hf_config):
        config_kwargs = self._hf_config_to_megatron_kwargs(hf_config)
        config_kwargs.update(cross_entropy_loss_fusion=True, gradient_accumulation_fusion=can_fuse())
        return config_kwargs
'''

MOE_BRIDGE = '''
import torch
from transformers import Qwen3MoeForCausalLM

from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge


@MegatronModelBridge.register_bridge(source=Qwen3MoeForCausalLM, target=GPTModel, model_type="qwen3_moe")
class Qwen3MoEBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.hidden_dropout = 0.0
        provider.qk_layernorm = True
        provider.autocast_dtype = torch.bfloat16
        provider.moe_router_pre_softmax = not hf_pretrained.config.norm_topk_prob
        provider.moe_grouped_gemm = True
        provider.moe_aux_loss_coeff = 1e-3
        provider.moe_aux_loss_coeff = hf_pretrained.config.router_aux_loss_coef
        provider.not_a_megatron_field = 1
        if hf_pretrained.config.decoder_sparse_step > 1:
            provider.moe_grouped_gemm = False
        return provider
'''

LLAMA_BRIDGE = '''
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge


@MegatronModelBridge.register_bridge(source="LlamaForCausalLM", target=GPTModel, model_type="llama")
class LlamaBridge(MegatronModelBridge):
    def hf_config_to_model_config_kwargs(self, hf_config):
        config_kwargs = super().hf_config_to_model_config_kwargs(hf_config)
        config_kwargs.update(normalization="RMSNorm", hidden_dropout=0.0, rope_scaling=False)
        if hf_config.rope_scaling:
            config_kwargs["rope_scaling"] = True
        return config_kwargs

    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.attention_dropout = 0.25
        return provider
'''

RECIPES = '''
from megatron.bridge import AutoBridge
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig


def qwen3_30b_a3b_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(
        model=AutoBridge.from_hf_pretrained("Qwen/Qwen3-30B-A3B").to_megatron_provider(load_weights=False),
        optimizer=OptimizerConfig(bf16=True),
    )
    cfg.model.tensor_model_parallel_size = 4
    return cfg


def qwen3_30b_a3b_dropout_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=None, optimizer=OptimizerConfig(bf16=True))
    cfg.model = AutoBridge.from_hf_pretrained("Qwen/Qwen3-30B-A3B").to_megatron_provider(load_weights=False)
    cfg.model.hidden_dropout = 0.1
    return cfg


def llama3_8b_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=None, optimizer=OptimizerConfig(bf16=True))
    cfg.model = AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3-8B").get_model_config()
    return cfg
'''

RECIPE_PATH = "src/megatron/bridge/recipes/models.py"
MOE_PATH = "src/megatron/bridge/models/qwen/qwen3_moe_bridge.py"


def _tree(root: Path, with_bridges: bool = True) -> None:
    (root / "pyproject.toml").write_text("")
    files = {RECIPE_PATH: RECIPES}
    if with_bridges:
        files.update({"src/megatron/bridge/models/conversion/model_bridge.py": BASE_BRIDGE, MOE_PATH: MOE_BRIDGE,
                      "src/megatron/bridge/models/llama/llama_bridge.py": LLAMA_BRIDGE})
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    return tmp_path


def _resolved(recipe: str):
    return load_unit(RECIPE_PATH, recipe, mcore_version="0.20.0").resolved


def test_the_bridges_literal_settings_apply_over_the_size_table(tree):
    r = _resolved("qwen3_30b_a3b_pretrain_config")
    dropout = r.get("model.hidden_dropout")
    assert dropout.state == "known" and dropout.value == 0.0
    assert any("Qwen3MoEBridge.provider_bridge" in via and "qwen3_moe_bridge.py:12" in via
               for via in dropout.assignment.via)
    assert r.get("model.qk_layernorm").value is True
    # inherited from the base class's provider_bridge, reached through super()
    assert r.get("model.make_vocab_size_divisible_by").value == 128
    # the sizes still come from the table, and the recipe's own settings stay
    assert r.get("model.num_moe_experts").value == 128 and r.get("model.num_layers").value == 48
    assert r.get("model.tensor_model_parallel_size").value == 4


def test_what_the_bridge_does_not_set_with_a_literal_is_left_to_the_table_or_the_default(tree):
    r = _resolved("qwen3_30b_a3b_pretrain_config")
    # set from the Hugging Face config, or a literal later replaced by such a value
    assert r.get("model.moe_router_pre_softmax").state == "default"
    assert r.get("model.moe_aux_loss_coeff").state == "default"
    # set in a branch offlint does not decide (literal before it or not)
    assert r.get("model.moe_grouped_gemm").state == "default"
    assert r.get("model.position_embedding_type").value == "rope"  # the table's, not a branch's
    assert r.get("model.rotary_percent").state == "default"  # set before a setattr(provider, ...) loop
    # not a megatron-core or Bridge model field; a non-literal (torch.bfloat16)
    assert r.get("model.not_a_megatron_field").state != "known"
    assert r.get("model.autocast_dtype").state != "known"


def test_the_recipes_own_setting_wins_over_the_bridges(tree):
    assert _resolved("qwen3_30b_a3b_dropout_pretrain_config").get("model.hidden_dropout").value == 0.1


def test_get_model_config_reads_the_model_config_kwargs_not_the_provider(tree):
    r = _resolved("llama3_8b_pretrain_config")
    assert r.get("model.hidden_dropout").value == 0.0 and r.get("model.normalization").value == "RMSNorm"
    assert r.get("model.cross_entropy_loss_fusion").value is True  # the base class's update(...)
    assert r.get("model.gradient_accumulation_fusion").state == "default"  # set from a call
    assert r.get("model.rope_scaling").state == "default"  # set again in a branch
    assert r.get("model.attention_dropout").state == "default"  # provider_bridge's, another path


def test_a_tree_without_the_bridge_keeps_the_size_table_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, with_bridges=False)
    r = _resolved("qwen3_30b_a3b_pretrain_config")
    assert r.get("model.hidden_dropout").state == "default" and r.get("model.num_layers").value == 48


def test_the_estimate_drops_the_dropout_masks_the_bridge_turns_off(tree):
    with_bridge = read_inputs(_resolved("qwen3_30b_a3b_pretrain_config").get, "qwen3_30b_a3b_pretrain_config")
    assert with_bridge.model.hidden_dropout == 0.0
    (tree / MOE_PATH).write_text(MOE_BRIDGE.replace("provider.hidden_dropout = 0.0\n", ""))
    without = read_inputs(_resolved("qwen3_30b_a3b_pretrain_config").get, "qwen3_30b_a3b_pretrain_config")
    assert without.model.hidden_dropout == 0.1


def test_the_reading_depends_on_the_bridge_files(tree):
    """The cache keys a reading on what it used: the bridge files searched and read are among them."""
    paths = [RECIPE_PATH, MOE_PATH, "src/megatron/bridge/models/conversion/model_bridge.py",
             "src/megatron/bridge/models/llama/llama_bridge.py"]
    project = PythonProject(paths, lambda p: (tree / p).read_text())
    with project.tracking() as touched:
        read_python(RECIPE_PATH, (tree / RECIPE_PATH).read_text(), project)
    assert set(paths[1:]) <= touched


def test_the_tables_architectures_agree_with_the_configs_in_bridges_unit_tests():
    import json

    from offlint import model_sizes

    configs = json.loads((Path(__file__).parent / "data" / "hf_configs.json").read_text())
    compared = 0
    for hf_id, entry in configs.items():
        named = model_sizes.architecture(hf_id)
        if named is not None:
            assert named == entry["config"]["architectures"][0], hf_id
            compared += 1
    assert compared >= 10


CONSTANT_BRIDGE = '''
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge

_LLAMA_HF_CLASS_NAME = "LlamaForCausalLM"
_UNUSED = "Qwen3MoeForCausalLM"
_REBOUND = "MistralForCausalLM"
_REBOUND = "MixtralForCausalLM"


@MegatronModelBridge.register_bridge(source=_LLAMA_HF_CLASS_NAME, target=GPTModel, model_type="llama")
class LlamaBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.attention_dropout = 0.25
        return provider


@MegatronModelBridge.register_bridge(source=_REBOUND, target=GPTModel)
class ReboundBridge(MegatronModelBridge):
    pass
'''


def test_a_bridge_registered_through_a_module_constant_is_found(tmp_path, monkeypatch):
    """Bridge's Qwen3.5 bridges register `source=_QWEN3_5_MOE_HF_CLASS_NAME`, a module constant holding the
    architecture's name; a name bound twice is not a constant."""
    from offlint.sources.bridge_models import _registrations

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, with_bridges=False)
    path = "src/megatron/bridge/models/llama/llama_bridge.py"
    for name, text in {"src/megatron/bridge/models/conversion/model_bridge.py": BASE_BRIDGE,
                       path: CONSTANT_BRIDGE}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = ["src/megatron/bridge/models/conversion/model_bridge.py", path, RECIPE_PATH]
    project = PythonProject(paths, lambda p: (tmp_path / p).read_text())
    assert _registrations(project, "LlamaForCausalLM") == [(path, "LlamaBridge")]
    assert _registrations(project, "Qwen3MoeForCausalLM") == []  # bound, but not the source of any registration
    assert _registrations(project, "MixtralForCausalLM") == []  # bound twice: not a constant


DOCSTRING_ONLY = '''
class MegatronModelBridge:
    """Subclass it, registered for an architecture:

    @MegatronModelBridge.register_bridge(source=LlamaForCausalLM, target=GPTModel)
    class LlamaBridge(MegatronModelBridge): ...
    """
'''

SPLIT_DECORATOR = '''
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge


@(
    MegatronModelBridge.register_bridge(source="LlamaForCausalLM", target=GPTModel)
)
class LlamaBridge(MegatronModelBridge):
    pass
'''


def test_a_module_naming_the_architecture_only_in_a_docstring_is_not_parsed(tmp_path, monkeypatch):
    """Only a module with a line that may start a registering decorator is parsed (Bridge's model_bridge.py, 118 KB,
    names LlamaForCausalLM in an indented docstring example); a decorator split over lines is still found."""
    from offlint.sources import bridge_models

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, with_bridges=False)
    base, split = "src/megatron/bridge/models/conversion/model_bridge.py", "src/megatron/bridge/models/llama/llama_bridge.py"
    for name, text in {base: DOCSTRING_ONLY, split: SPLIT_DECORATOR}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    project = PythonProject([base, split, RECIPE_PATH], lambda p: (tmp_path / p).read_text())
    parsed = []
    real = project.parsed
    monkeypatch.setattr(project, "parsed", lambda path: parsed.append(path) or real(path))
    assert bridge_models._registrations(project, "LlamaForCausalLM") == [(split, "LlamaBridge")]
    assert parsed == [split]
