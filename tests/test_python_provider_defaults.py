"""A model provider built from its own class (`cfg.model = OlMoEModelProvider(tensor_model_parallel_size=1)`, as
Megatron Bridge's OLMoE and Gemma 3 1B recipes write it): the fields the call leaves out take the defaults the class
and its @dataclass bases in the linted tree give them, the nearest class's default first, a keyword of the call over
both. Defaults offlint cannot hold as a setting (`F.silu`, `torch.float32`) and bases outside the tree keep what
offlint assumed before (megatron-core's default or unknown). Fixtures of our own; nothing is imported or run."""

from __future__ import annotations

import textwrap

import pytest

from offlint.estimate.inputs import read_inputs
from offlint.units import load_unit

BASE = '''
    from dataclasses import dataclass

    from megatron.core.transformer.transformer_config import TransformerConfig


    @dataclass
    class DemoBaseProvider(TransformerConfig):
        share_embeddings_and_output_weights: bool = True
        make_vocab_size_divisible_by: int = 128
        seq_length: int = 1024
        normalization: str = "LayerNorm"
        vocab_size: int = None
'''

MOE = '''
    from dataclasses import dataclass

    import torch
    import torch.nn.functional as F

    from megatron.bridge.models.demo_base import DemoBaseProvider


    @dataclass
    class DemoMoEProvider(DemoBaseProvider):
        normalization: str = "RMSNorm"
        activation_func: callable = F.silu
        params_dtype: torch.dtype = torch.float32
        gated_linear_unit: bool = True
        add_bias_linear: bool = False
        share_embeddings_and_output_weights: bool = False
        seq_length: int = 2048
        vocab_size: int = 1000
        num_layers: int = 4
        hidden_size: int = 256
        ffn_hidden_size: int = 128
        moe_ffn_hidden_size: int = 128
        kv_channels: int = 256 // 8
        num_query_groups: int = 8
        num_attention_heads: int = 8
        num_moe_experts: int = 8
        moe_router_topk: int = 2
'''

RECIPES = '''
    from megatron.bridge.models.demo_moe import DemoMoEProvider
    from megatron.bridge.models.elsewhere import ElsewhereProvider
    from megatron.bridge.training.config import ConfigContainer, GPTDatasetConfig, TrainingConfig


    def _container(model):
        return ConfigContainer(model=model, train=TrainingConfig(global_batch_size=8, micro_batch_size=1),
                               dataset=GPTDatasetConfig(seq_length=2048, split="9999,8,2"))


    def demo_moe_pretrain_8gpu_h100_bf16_config():
        cfg = _container(DemoMoEProvider(tensor_model_parallel_size=1, expert_model_parallel_size=8,
                                         num_layers=6))
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def spread_pretrain_config(extra):
        return _container(DemoMoEProvider(**extra))


    def elsewhere_pretrain_config():
        return _container(ElsewhereProvider(tensor_model_parallel_size=1))
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    files = {"src/megatron/bridge/models/demo_base.py": BASE, "src/megatron/bridge/models/demo_moe.py": MOE,
             "src/megatron/bridge/recipes/demo.py": RECIPES}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    return "src/megatron/bridge/recipes/demo.py"


def _resolved(path: str, name: str):
    return load_unit(path, name, mcore_version="0.20.0").resolved


def test_fields_left_out_take_the_classs_defaults_the_nearest_first_and_the_call_over_both(tree):
    r = _resolved(tree, "demo_moe_pretrain_8gpu_h100_bf16_config")
    expected = {"model.num_layers": 6,  # the call's keyword over the class's 4
                "model.hidden_size": 256, "model.kv_channels": 32, "model.num_moe_experts": 8,
                "model.normalization": "RMSNorm",  # the subclass's default over the base's "LayerNorm"
                "model.share_embeddings_and_output_weights": False, "model.seq_length": 2048,
                "model.make_vocab_size_divisible_by": 128,  # only the base gives it
                "model.expert_model_parallel_size": 8}
    for key, value in expected.items():
        got = r.get(key)
        assert (got.state, got.value) == ("known", value), (key, got)
    where = r.get("model.normalization").assignment.via
    assert any("the default of DemoMoEProvider.normalization at src/megatron/bridge/models/demo_moe.py:12" in step
               for step in where), where
    assert any("DemoBaseProvider.make_vocab_size_divisible_by" in step
               for step in r.get("model.make_vocab_size_divisible_by").assignment.via)


def test_defaults_that_are_not_plain_values_keep_the_earlier_assumption(tree):
    r = _resolved(tree, "demo_moe_pretrain_8gpu_h100_bf16_config")
    got = r.get("model.activation_func")  # `F.silu`: not a value offlint holds as a setting
    assert got.assignment is None or not any("DemoMoEProvider" in step for step in got.assignment.via), got
    # a dtype reads as it does when a call passes it (`params_dtype=torch.float32`)
    assert r.get("model.params_dtype").value == "torch.float32"


def test_a_spread_of_unknown_keywords_or_a_class_outside_the_tree_gives_no_defaults(tree):
    for name in ("spread_pretrain_config", "elsewhere_pretrain_config"):
        r = _resolved(tree, name)
        assert r.get("model.hidden_size").state != "known", name


def test_the_estimate_sizes_the_model_from_the_providers_defaults(tree):
    name = "demo_moe_pretrain_8gpu_h100_bf16_config"
    inputs = read_inputs(_resolved(tree, name).get, name)
    assert not any(k in inputs.unknown for k in ("model.num_layers", "model.hidden_size", "model.vocab_size")), \
        inputs.unknown
    m = inputs.model
    assert (m.num_layers, m.hidden_size, m.num_moe_experts, m.moe_router_topk, m.gated_linear_unit) == \
        (6, 256, 8, 2, True)


@pytest.mark.parametrize("module, before, after", [
    ("demo_moe", "    moe_ffn_hidden_size: int = 128\n", "    moe_ffn_hidden_size: int = 40000000\n"),  # the class
    ("demo_base", "    vocab_size: int = None\n",  # a base's field the class leaves alone
     "    vocab_size: int = None\n    moe_shared_expert_intermediate_size: int = 4000000\n"),
])
def test_a_cached_check_follows_an_edit_of_the_providers_defaults(tree, tmp_path, monkeypatch, module, before, after):
    from offlint.api import CheckOptions, check

    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))

    def codes(cache: bool) -> list[str]:
        result = check(["src"], CheckOptions(root=tmp_path, mcore_version="0.20.0", cache=cache, workers=1))
        return sorted(f.code for f in result.findings if f.code.startswith("OFL30"))

    assert codes(cache=True) == []
    path = tmp_path / "src/megatron/bridge/models" / f"{module}.py"
    text = path.read_text()
    assert text.count(before) == 1
    path.write_text(text.replace(before, after))  # 6 layers of experts or shared experts no GPU holds
    fresh = codes(cache=False)
    assert "OFL303" in fresh and codes(cache=True) == fresh
