"""Qwen3.5 in the size table and the text-only recipes that load its language model through
`AutoBridge.from_hf_config(AutoConfig.from_pretrained(id).text_config)` (Bridge 067f987
recipes/qwen/gb200/qwen35.py): hybrid gated delta net + gated attention, MoE with a gated shared expert, one MTP
depth. The fixtures are our own recipes."""

from __future__ import annotations

import textwrap

import pytest

from offlint import model_sizes
from offlint.estimate.inputs import read_inputs
from offlint.estimate.params import total as total_params
from tests.estimate_helpers import recipe_inputs

HEAD = textwrap.dedent('''
    from transformers import AutoConfig
    from megatron.bridge import AutoBridge
    from megatron.bridge.training.config import ConfigContainer
''')

TEXT = HEAD + textwrap.dedent('''

    def text_moe_pretrain_8gpu_gb200_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer()
        text_config = AutoConfig.from_pretrained("Qwen/Qwen3.5-35B-A3B-Base").text_config
        text_config.architectures = ["Qwen3_5MoeForCausalLM"]
        cfg.model = AutoBridge.from_hf_config(text_config).to_megatron_provider(load_weights=False)
        cfg.model.expert_model_parallel_size = 8
        cfg.model.seq_length = 4096
        return cfg


    def whole_config_8gpu_gb200_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer()
        cfg.model = AutoBridge.from_hf_config(AutoConfig.from_pretrained("Qwen/Qwen3.5-35B-A3B")) \\
            .to_megatron_provider(load_weights=False)
        cfg.model.seq_length = 4096
        return cfg


    def vl_pretrain_8gpu_gb200_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("Qwen/Qwen3.5-35B-A3B")
                              .to_megatron_provider(load_weights=False))
        cfg.model.freeze_language_model = False
        cfg.model.seq_length = 4096
        return cfg


    def unknown_config_8gpu_gb200_bf16_config() -> ConfigContainer:
        cfg = ConfigContainer()
        text_config = AutoConfig.from_pretrained(some_path()).text_config
        cfg.model = AutoBridge.from_hf_config(text_config).to_megatron_provider(load_weights=False)
        return cfg
''')


@pytest.fixture
def units(tmp_path, monkeypatch):
    return recipe_inputs(tmp_path, monkeypatch, TEXT)


def test_the_text_config_of_a_vlm_is_its_language_model_without_the_tower(units):
    inputs = units("text_moe_pretrain_8gpu_gb200_bf16_config")
    m = inputs.model
    assert not inputs.unsupported and not inputs.unknown, (inputs.unsupported, inputs.unknown)
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_query_groups, m.kv_channels) == \
        (40, 2048, 16, 2, 256)
    assert (m.num_moe_experts, m.moe_router_topk, m.moe_ffn_hidden_size, m.moe_shared_expert_intermediate_size) == \
        (256, 8, 512, 512)
    assert m.linear_attention_freq == 4 and m.attention_output_gate and m.mtp_num_layers == 1
    assert inputs.training.frozen_lm is None and inputs.parallel.ep == 8


def test_the_whole_config_keeps_the_tower_and_unset_freeze_flags_have_no_verdict(units):
    """Which of the tower and the language model train is the provider's default when the recipe leaves the flags
    unset, and Bridge's providers differ (inputs_vlm.read_trained_vlm)."""
    for name in ("whole_config_8gpu_gb200_bf16_config", "vl_pretrain_8gpu_gb200_bf16_config"):
        assert any("at its provider's default" in why for why in units(name).unsupported), name


def test_a_config_offlint_cannot_name_leaves_the_model_unknown(units):
    inputs = units("unknown_config_8gpu_gb200_bf16_config")
    assert "model.num_layers" in inputs.unknown and not inputs.complete


def test_the_architecture_the_recipe_writes_picks_the_bridge(tmp_path, monkeypatch):
    """`text_config.architectures = [...]` is the name AutoBridge dispatches on: the text bridge, whose
    provider_bridge sets position_embedding_type="rope" (the VL bridge sets "mrope", the table's value)."""
    from offlint.units import load_unit

    bridge = tmp_path / "src" / "megatron" / "bridge" / "models" / "qwen"
    bridge.mkdir(parents=True)
    (bridge / "qwen35_bridge.py").write_text(textwrap.dedent('''
        @MegatronModelBridge.register_bridge(source="Qwen3_5MoeForCausalLM", target=GPTModel)
        class TextBridge(MegatronModelBridge):
            def provider_bridge(self, hf_pretrained):
                provider = super().provider_bridge(hf_pretrained)
                provider.position_embedding_type = "rope"
                return provider
    '''))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(TEXT)
    unit = load_unit("recipes.py", "text_moe_pretrain_8gpu_gb200_bf16_config", mcore_version="0.20.0").resolved
    assert unit.get("model.position_embedding_type").value == "rope"
    whole = load_unit("recipes.py", "whole_config_8gpu_gb200_bf16_config", mcore_version="0.20.0").resolved
    assert whole.get("model.position_embedding_type").value == "mrope"


@pytest.mark.parametrize("hf_id, billions", [
    # the model names' totals (the table's language models: no tower; with one MTP depth where the config has it)
    ("Qwen/Qwen3.5-35B-A3B", 35), ("Qwen/Qwen3.5-122B-A10B", 122), ("Qwen/Qwen3.5-397B-A17B", 397),
    ("Qwen/Qwen3.5-27B", 27), ("Qwen/Qwen3.5-9B", 9)])
def test_the_table_entries_add_up_to_the_published_sizes(hf_id, billions):
    from tests.estimate_helpers import lookup

    inputs = read_inputs(lookup({**model_sizes.lookup(hf_id), "model.vision_config": None}), "x_pretrain_config")
    total = total_params(inputs.model) / 1e9
    assert billions * 0.97 <= total <= billions * 1.06, total


def test_every_qwen35_entry_is_a_gated_delta_net_model_with_its_sources():
    for hf_id in ("Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-9B-Base", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B",
                  "Qwen/Qwen3.5-35B-A3B-Base", "Qwen/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-397B-A17B"):
        sizes = model_sizes.lookup(hf_id)
        assert sizes["model.experimental_attention_variant"] == "gated_delta_net"
        assert sizes["model.attention_output_gate"] is True and sizes["model.vocab_size"] == 248320
        assert model_sizes.vision(hf_id) is not None  # a VLM: a recipe training its tower gets no verdict
        assert len(model_sizes.sources(hf_id)) >= 2


HELPERS = '''
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
from megatron.bridge.models.shared import apply_common


def apply_moe(provider, hf_config):
    apply_common(provider, hf_config)
    provider.moe_shared_expert_gate = True
    provider.num_moe_experts = getattr(hf_config, "num_experts", 8)


def early_return(provider, hf_config):
    if hf_config.skip:
        return
    provider.hidden_dropout = 0.0


def rebinds(provider):
    provider = provider.copy()
    provider.hidden_dropout = 0.0


@MegatronModelBridge.register_bridge(source="HelperMoeForCausalLM", target=GPTModel)
class HelperBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        apply_moe(provider, hf_pretrained.config)
        provider.position_embedding_type = "rope"
        return provider


@MegatronModelBridge.register_bridge(source="EarlyForCausalLM", target=GPTModel)
class EarlyBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        early_return(provider, hf_pretrained.config)
        provider.qk_layernorm = True
        return provider


@MegatronModelBridge.register_bridge(source="RebindForCausalLM", target=GPTModel)
class RebindBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        rebinds(provider)
        return provider
'''

SHARED = '''
def apply_common(config, hf_config):
    config.hidden_dropout = 0.0
    config.normalization = "RMSNorm"
    config.linear_num_value_heads = getattr(hf_config, "linear_num_value_heads", 32)
    if config.mtp_num_layers:
        config.attention_dropout = 0.0
'''

BASE = '''
class MegatronModelBridge:
    @classmethod
    def register_bridge(cls, *, source, target, provider=None, model_type=None):
        return lambda bridge_class: bridge_class

    def provider_bridge(self, hf_pretrained):
        provider = GPTModelProvider(**self.hf_config_to_provider_kwargs(hf_pretrained.config))
        provider.make_vocab_size_divisible_by = 128
        return provider
'''


@pytest.fixture
def bridge_settings(tmp_path):
    from offlint.sources import bridge_models
    from offlint.sources.python_project import PythonProject

    files = {"src/megatron/bridge/models/conversion/model_bridge.py": BASE,
             "src/megatron/bridge/models/helper/helper_bridge.py": HELPERS,
             "src/megatron/bridge/models/shared.py": SHARED}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    project = PythonProject(list(files), lambda p: (tmp_path / p).read_text())
    return lambda architecture: {k: s.value for k, s in bridge_models.settings(
        project, architecture, "to_megatron_provider", "src/megatron/bridge/recipes/r.py").items()}


def test_a_helper_handed_the_provider_is_read_as_its_own_statements(bridge_settings):
    """Bridge's Qwen3.5 bridges set hidden_dropout=0.0 and the gated-delta-net keys in module-level helpers
    (`_apply_qwen35_common_config(provider, text_config)`): their literal writes apply, through a helper of
    another module and under the helper's own parameter name; writes from the Hugging Face config or in a branch
    do not; what the base class set before stays."""
    got = bridge_settings("HelperMoeForCausalLM")
    assert got == {"make_vocab_size_divisible_by": 128, "hidden_dropout": 0.0, "normalization": "RMSNorm",
                   "moe_shared_expert_gate": True, "position_embedding_type": "rope"}


def test_a_helper_that_may_return_early_or_rebinds_its_parameter_drops_what_was_read(bridge_settings):
    assert bridge_settings("EarlyForCausalLM") == {"qk_layernorm": True}
    assert bridge_settings("RebindForCausalLM") == {}
