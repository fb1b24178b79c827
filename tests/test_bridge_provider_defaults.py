"""`AutoBridge.from_hf_pretrained(id).to_megatron_provider()`: the fields the bridge neither maps nor sets keep the
provider class's own defaults (offlint/sources/bridge_provider_defaults.py). Bridge f5506771c's Qwen3-MoE
performance recipes turned expert-parallel overlap on over Qwen3MoEModelProvider's `moe_token_dispatcher_type =
"alltoall"`; offlint took megatron-core's "allgather" and reported OFL224's dispatcher assert as certain on six
units. Fixtures of our own, in the shapes Megatron Bridge writes its providers, bridges and recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.units import load_unit

BASE_BRIDGE = '''
class MegatronModelBridge:
    PROVIDER_CLASS = None
    CONFIG_MAPPING = [("num_hidden_layers", "num_layers"), ("rope_theta", "rotary_base")]

    @classmethod
    def register_bridge(cls, *, source, target, provider=None, model_type=None):
        return lambda bridge_class: bridge_class

    def provider_bridge(self, hf_pretrained):
        provider_kwargs = self.hf_config_to_provider_kwargs(hf_pretrained.config)
        return self.PROVIDER_CLASS(**provider_kwargs)
'''

PROVIDERS = '''
from dataclasses import dataclass, field


@dataclass
class GPTModelProvider:
    moe_token_dispatcher_type: str = "allgather"
    moe_grouped_gemm: bool = False


@dataclass
class Qwen3MoEModelProvider(GPTModelProvider):
    moe_token_dispatcher_type: str = "alltoall"
    rotary_base: int = 1000000
    moe_grouped_gemm: bool = field(default_factory=lambda: True)
    moe_router_load_balancing_type: str = "seq_aux_loss"
'''

BRIDGE = '''
from transformers import Qwen3MoeForCausalLM

from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
from megatron.bridge.models.qwen.qwen_provider import Qwen3MoEModelProvider


@MegatronModelBridge.register_bridge(source=Qwen3MoeForCausalLM, target=GPTModel, provider=Qwen3MoEModelProvider)
class Qwen3MoEBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.moe_router_load_balancing_type = "aux_loss"
        return provider
'''

RECIPE = '''
from megatron.bridge import AutoBridge
from megatron.bridge.training.comm_overlap import CommOverlapConfig
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig


def qwen3_30b_a3b_pretrain_config() -> ConfigContainer:
    model_cfg = AutoBridge.from_hf_pretrained("Qwen/Qwen3-30B-A3B").to_megatron_provider(load_weights=False)
    model_cfg.expert_model_parallel_size = 8
    cfg = ConfigContainer(model=model_cfg, optimizer=OptimizerConfig(bf16=True), ddp=DistributedDataParallelConfig(),
                          mixed_precision="bf16_mixed",
                          comm_overlap=CommOverlapConfig(tp_comm_overlap=False, overlap_moe_expert_parallel_comm=True))
    return cfg
'''

RECIPE_PATH = "src/megatron/bridge/recipes/qwen/qwen3_moe.py"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    for path, text in {"src/megatron/bridge/models/conversion/model_bridge.py": BASE_BRIDGE,
                       "src/megatron/bridge/models/qwen/qwen_provider.py": PROVIDERS,
                       "src/megatron/bridge/models/qwen/qwen3_moe_bridge.py": BRIDGE, RECIPE_PATH: RECIPE}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def test_a_field_the_bridge_does_not_touch_keeps_the_provider_class_default(tree):
    r = load_unit(RECIPE_PATH, "qwen3_30b_a3b_pretrain_config", mcore_version="0.20.0").resolved
    dispatcher = r.get("model.moe_token_dispatcher_type")
    assert dispatcher.value == "alltoall"
    assert dispatcher.assignment.via[-1].startswith(
        "the default of Qwen3MoEModelProvider.moe_token_dispatcher_type at src/megatron/bridge/models/qwen/")
    assert r.get("model.moe_router_load_balancing_type").value == "aux_loss"  # the bridge's setting wins


def test_a_field_the_bridge_may_map_or_a_default_offlint_cannot_read_keeps_what_it_had(tree):
    r = load_unit(RECIPE_PATH, "qwen3_30b_a3b_pretrain_config", mcore_version="0.20.0").resolved
    # rotary_base is named in CONFIG_MAPPING (from the Hugging Face config); moe_grouped_gemm's nearest declaration
    # is not a literal, so the base class's literal does not apply: both keep megatron-core's default, as before
    assert (r.get("model.rotary_base").state, r.get("model.rotary_base").value) == ("default", 10000)
    assert (r.get("model.moe_grouped_gemm").state, r.get("model.moe_grouped_gemm").value) == ("default", False)


def test_ep_overlap_over_the_providers_alltoall_default_is_not_refused(tree):
    result = check(["."], CheckOptions(select=["OFL224"], mcore_version="0.16.1", root=Path.cwd(), cache=False))
    assert not result.errors and not result.findings
    (tree / "src/megatron/bridge/models/qwen/qwen_provider.py").write_text(
        PROVIDERS.replace('moe_token_dispatcher_type: str = "alltoall"', 'moe_token_dispatcher_type: str = "allgather"'))
    result = check(["."], CheckOptions(select=["OFL224"], mcore_version="0.16.1", root=Path.cwd(), cache=False))
    assert [f.code for f in result.findings] == ["OFL224"]  # the class's own allgather: refused


def test_the_words_a_module_spells_are_ast_walks_names_attributes_keywords_and_strings():
    """`_words` walks the tree itself (faster than `ast.walk`); it must find what a walk with `ast.walk` finds, in
    every place a name can hide: decorators, defaults, comprehensions, f-strings, lambdas, match patterns."""
    import ast

    from offlint.sources.bridge_provider_defaults import _words

    text = BASE_BRIDGE + PROVIDERS + BRIDGE + '''
@decorate(key="moe_layer_freq")
def f(x=cfg.rotary_percent, *, y=[a.b for a in items if a.c]):
    g = lambda z: z.apply_rope_fusion
    print(f"{x.seq_length}", "mtp_num_layers", k=y)
    match x:
        case Point(kv_channels=3):
            return {"ffn_hidden_size": w.num_query_groups}
'''
    module = ast.parse(text)
    expected = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Name):
            expected.add(node.id)
        elif isinstance(node, ast.Attribute):
            expected.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            expected.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            expected.add(node.value)
    assert {"moe_layer_freq", "rotary_percent", "c", "apply_rope_fusion", "seq_length", "mtp_num_layers", "k",
            "ffn_hidden_size", "num_query_groups", "moe_token_dispatcher_type"} <= expected
    assert _words(module) == expected
