"""OFL219: EP overlap (combined 1F1B) on a model class that defines no build_schedule_plan, the class read from the
provider's provide() in the linted tree (sources/bridge_schedule.py). Fixtures are small trees written here."""

from __future__ import annotations

import json
import textwrap

from offlint.api import CheckOptions, check

MODELS = "src/megatron/bridge/models"
RECIPE = "src/megatron/bridge/recipes/tower.py"

TOWER_MODEL = '''
from megatron.core.transformer.module import MegatronModule


class TowerModel(MegatronModule):
    def forward(self, tokens):
        return tokens
'''
PLANNED_MODEL = '''
from megatron.core.models.gpt import GPTModel as CoreGPT


class PlannedBase(CoreGPT):
    pass


class TowerModel(PlannedBase):
    pass
'''
PROVIDER = '''
from dataclasses import dataclass
from typing import ClassVar

from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.models.tower.tower_model import TowerModel


@dataclass
class TowerModelProvider(GPTModelProvider):
    MODEL_CLASS: ClassVar[type | None] = None

    def provide(self, pre_process=None, post_process=None, vp_stage=None):
        model_class = self.MODEL_CLASS or TowerModel
        model = model_class(config=self)
        return model
'''
GPT_PROVIDER = '''
from dataclasses import dataclass

from megatron.core.models.gpt import GPTModel as MCoreGPTModel


@dataclass
class GPTModelProvider:
    num_layers: int = 1

    def provide(self, pre_process=None, post_process=None, vp_stage=None):
        model = MCoreGPTModel(self)
        return model
'''
BASE_BRIDGE = '''
class MegatronModelBridge:
    PROVIDER_CLASS = None

    def provider_bridge(self, hf_pretrained):
        from megatron.bridge.models.gpt_provider import GPTModelProvider

        provider_class = self.PROVIDER_CLASS if self.PROVIDER_CLASS is not None else GPTModelProvider
        provider = provider_class(num_layers=hf_pretrained.config.num_hidden_layers)
        return provider
'''
TOWER_BRIDGE = '''
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
from megatron.bridge.models.tower.tower_provider import TowerModelProvider


@MegatronModelBridge.register_bridge(source="TowerForCausalLM", target=object, provider={provider})
class TowerBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.normalization = "RMSNorm"
        return provider
'''


def _recipe(model: str, overlap: str, pp: int = 1, vpp: str = "None", ep: int = 8) -> str:
    return textwrap.dedent(f'''
        from megatron.bridge.models.tower.tower_provider import TowerModelProvider
        from megatron.bridge.models import AutoBridge


        def tower_pretrain_config():
            cfg = ConfigContainer(model={model}, optimizer=OptimizerConfig(bf16=True),
                                  ddp=DistributedDataParallelConfig())
            cfg.model.num_moe_experts = 8
            cfg.model.expert_model_parallel_size = {ep}
            cfg.model.pipeline_model_parallel_size = {pp}
            cfg.model.virtual_pipeline_model_parallel_size = {vpp}
            cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
            cfg.comm_overlap.overlap_moe_expert_parallel_comm = {overlap}
            return cfg
        ''')


def _tree(tmp_path, model_source=TOWER_MODEL, provider=PROVIDER, registered="None", recipe=None):
    files = {
        f"{MODELS}/gpt_provider.py": GPT_PROVIDER,
        f"{MODELS}/conversion/model_bridge.py": BASE_BRIDGE,
        f"{MODELS}/tower/tower_model.py": model_source,
        f"{MODELS}/tower/tower_provider.py": provider,
        f"{MODELS}/tower/tower_bridge.py": TOWER_BRIDGE.replace("{provider}", registered),
        RECIPE: recipe or _recipe("TowerModelProvider(num_layers=8)", "True"),
        "src/megatron/bridge/recipes/acme/Tower-8x1B/config.json": json.dumps({"architectures": ["TowerForCausalLM"]}),
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")


def _findings(tmp_path, monkeypatch, strict=False):
    monkeypatch.chdir(tmp_path)
    result = check(["src"], CheckOptions(select=["OFL219"], strict=strict, mcore_version="0.20.0", root=tmp_path))
    assert not result.errors, result.errors
    return result.findings


def test_provider_building_a_megatron_module_without_plan(tmp_path, monkeypatch):
    _tree(tmp_path)
    found = _findings(tmp_path, monkeypatch)
    assert len(found) == 1 and not found[0].possible
    message = found[0].message
    assert "couldn't find attribute build_schedule_plan" in message
    assert f"{MODELS}/tower/tower_model.py:5" in message and "TowerModelProvider.provide" in message
    assert f"{RECIPE}:14" in message  # where EP overlap was turned on


def test_a_base_chain_to_megatron_core_gpt_model_has_a_plan(tmp_path, monkeypatch):
    _tree(tmp_path, model_source=PLANNED_MODEL)
    assert _findings(tmp_path, monkeypatch, strict=True) == []


def test_class_attribute_model_class_is_read(tmp_path, monkeypatch):
    planned = PLANNED_MODEL.replace("class TowerModel(PlannedBase)", "class OtherModel(PlannedBase)") + TOWER_MODEL
    provider = PROVIDER.replace("MODEL_CLASS: ClassVar[type | None] = None", "MODEL_CLASS = OtherModel").replace(
        "import TowerModel", "import OtherModel, TowerModel")
    _tree(tmp_path, model_source=planned, provider=provider)
    assert _findings(tmp_path, monkeypatch, strict=True) == []


def test_overlap_off_or_a_refused_layout_gives_nothing(tmp_path, monkeypatch):
    for recipe in (_recipe("TowerModelProvider(num_layers=8)", "False"),
                   _recipe("TowerModelProvider(num_layers=8)", "True", pp=2),  # no VPP: TransformerConfig refuses
                   _recipe("TowerModelProvider(num_layers=8)", "True", ep=1)):
        _tree(tmp_path, recipe=recipe)
        assert _findings(tmp_path, monkeypatch, strict=True) == [], recipe


def test_interleaved_pipeline_is_reported(tmp_path, monkeypatch):
    _tree(tmp_path, recipe=_recipe("TowerModelProvider(num_layers=8)", "True", pp=2, vpp="2"))
    assert len(_findings(tmp_path, monkeypatch)) == 1


def test_autobridge_provider_through_the_registered_bridge(tmp_path, monkeypatch):
    recipe = _recipe('AutoBridge.from_hf_pretrained("acme/Tower-8x1B").to_megatron_provider()', "True")
    _tree(tmp_path, registered="TowerModelProvider", recipe=recipe)
    found = _findings(tmp_path, monkeypatch)
    assert len(found) == 1 and "TowerModelProvider.provide" in found[0].message


def test_autobridge_default_provider_is_gpt(tmp_path, monkeypatch):
    # No provider= in register_bridge: the base bridge falls back to GPTModelProvider, whose model has a plan.
    recipe = _recipe('AutoBridge.from_hf_pretrained("acme/Tower-8x1B").to_megatron_provider()', "True")
    _tree(tmp_path, registered="None", recipe=recipe)
    assert _findings(tmp_path, monkeypatch, strict=True) == []


def test_a_model_class_offlint_cannot_judge_is_unknown(tmp_path, monkeypatch):
    forwarding = TOWER_MODEL + "\n    def __getattr__(self, name):\n        return getattr(self.inner, name)\n"
    _tree(tmp_path, model_source=forwarding)
    assert _findings(tmp_path, monkeypatch) == []
    strict = _findings(tmp_path, monkeypatch, strict=True)
    assert len(strict) == 1 and strict[0].possible
    assert "whether the model class defines build_schedule_plan is not known" in strict[0].message  # not "?"


def test_unknown_overlap_is_possible_only_for_a_class_known_to_lack_the_method(tmp_path, monkeypatch):
    recipe = "import os\n" + _recipe("TowerModelProvider(num_layers=8)", 'os.environ.get("EP_OVERLAP") == "1"')
    _tree(tmp_path, recipe=recipe)
    assert _findings(tmp_path, monkeypatch) == []
    strict = _findings(tmp_path, monkeypatch, strict=True)
    assert len(strict) == 1 and strict[0].possible
    message = strict[0].message  # what is open, and what follows (was "possible: ?", Bridge PR 4978's head)
    assert "whether EP overlap (comm_overlap.overlap_moe_expert_parallel_comm) is on is not known" in message
    assert "TowerModelProvider.provide" in message and "couldn't find attribute build_schedule_plan" in message
    forwarding = TOWER_MODEL + "\n    def __getattr__(self, name):\n        return getattr(self.inner, name)\n"
    _tree(tmp_path, model_source=forwarding, recipe=recipe)  # neither fact established: quiet even with --strict
    assert _findings(tmp_path, monkeypatch, strict=True) == []


# get_model_config(): the bridge converts the Hugging Face config to a model config (`self.MODEL_CONFIG_CLASS(...)`),
# whose `builder` names the class whose build_model makes the model (Bridge's builder refactor, PR 4545)
CONFIG_BASE_BRIDGE = BASE_BRIDGE.replace("class MegatronModelBridge:\n    PROVIDER_CLASS = None\n", '''
from typing import ClassVar

from megatron.bridge.models.gpt.gpt_builder import GPTModelConfig


class MegatronModelBridge:
    PROVIDER_CLASS = None
    MODEL_CONFIG_CLASS: ClassVar[type | None] = GPTModelConfig

    def hf_config_to_model_config(self, hf_config):
        model_config_class = self.MODEL_CONFIG_CLASS
        if model_config_class is None:
            raise ValueError("not migrated")
        return model_config_class(num_layers=hf_config.num_hidden_layers)
''')
GPT_BUILDER = '''
from typing import ClassVar

from megatron.core.models.gpt import GPTModel
from megatron.training.models.gpt import GPTModelBuilder as CoreBuilder, GPTModelConfig as CoreConfig


class GPTModelConfig(CoreConfig):
    builder: ClassVar[str] = "megatron.bridge.models.gpt.gpt_builder.GPTModelBuilder"


class GPTModelBuilder(CoreBuilder):
    def build_model(self, pg_collection, pre_process=None, post_process=None, vp_stage=None) -> GPTModel:
        return super().build_model(pg_collection, pre_process, post_process, vp_stage)
'''
TOWER_CONFIG = '''
from typing import ClassVar

from megatron.bridge.models.gpt.gpt_builder import GPTModelBuilder, GPTModelConfig
from megatron.bridge.models.tower.tower_model import TowerModel


class TowerModelConfig(GPTModelConfig):
    builder: ClassVar[str] = "megatron.bridge.models.tower.tower_config.TowerModelBuilder"


class TowerModelBuilder(GPTModelBuilder):
    def build_model(self, pg_collection, pre_process=None, post_process=None, vp_stage=None) -> TowerModel:
        model = TowerModel(config=self._model_config)
        return model
'''


def _config_tree(tmp_path, bridge_body: str):
    _tree(tmp_path, recipe=_recipe('AutoBridge.from_hf_pretrained("acme/Tower-8x1B").get_model_config()', "True"))
    files = {f"{MODELS}/conversion/model_bridge.py": CONFIG_BASE_BRIDGE, f"{MODELS}/gpt/gpt_builder.py": GPT_BUILDER,
             f"{MODELS}/tower/tower_config.py": TOWER_CONFIG,
             f"{MODELS}/tower/tower_bridge.py": TOWER_BRIDGE.replace("{provider}", "None").replace(
                 "class TowerBridge(MegatronModelBridge):\n", "class TowerBridge(MegatronModelBridge):\n" + bridge_body)
             .replace("from megatron.bridge.models.tower.tower_provider import TowerModelProvider",
                      "from megatron.bridge.models.tower.tower_config import TowerModelConfig")}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")


def test_get_model_config_follows_the_bridge_s_model_config_to_its_builder(tmp_path, monkeypatch):
    _config_tree(tmp_path, "    MODEL_CONFIG_CLASS = TowerModelConfig\n")
    found = _findings(tmp_path, monkeypatch)
    assert len(found) == 1 and not found[0].possible
    message = found[0].message
    assert "TowerModelBuilder.build_model" in message and f"{MODELS}/tower/tower_model.py:5" in message


def test_get_model_config_of_the_default_gpt_config_has_a_plan(tmp_path, monkeypatch):
    # no MODEL_CONFIG_CLASS of its own: the base's GPT config, whose builder returns super()'s, annotated GPTModel
    _config_tree(tmp_path, "")
    assert _findings(tmp_path, monkeypatch, strict=True) == []


def test_get_model_config_of_a_bridge_that_converts_to_none_is_unknown(tmp_path, monkeypatch):
    _config_tree(tmp_path, "    MODEL_CONFIG_CLASS = None\n")
    assert _findings(tmp_path, monkeypatch) == []
    assert [f.possible for f in _findings(tmp_path, monkeypatch, strict=True)] in ([], [True])


def test_get_model_config_takes_the_bridge_s_own_model_config_bridge(tmp_path, monkeypatch):
    # a family that builds its config itself (multimodal ones in the refactor) overrides model_config_bridge
    _config_tree(tmp_path, "    def model_config_bridge(self, hf_pretrained):\n"
                           "        return TowerModelConfig(num_layers=2)\n\n")
    found = _findings(tmp_path, monkeypatch)
    assert len(found) == 1 and "TowerModelBuilder.build_model" in found[0].message


def test_a_model_without_experts_never_reaches_the_schedule(tmp_path, monkeypatch):
    """NVIDIA-NeMo/DFM's Flux and Wan recipes: no MoE, and EP overlap and EP left to the user's overrides.
    TransformerConfig raises "num_moe_experts must be non None to use expert-parallel" for EP > 1, which EP overlap
    needs, before any forward: nothing to report, not even with --strict (it had been a possible error)."""
    recipe = "import os\n" + _recipe("TowerModelProvider(num_layers=8)", 'os.environ.get("EP_OVERLAP") == "1"',
                                     ep='int(os.environ.get("EP", "1"))')
    _tree(tmp_path, recipe=recipe.replace("cfg.model.num_moe_experts = 8", "cfg.model.num_moe_experts = None"))
    assert _findings(tmp_path, monkeypatch, strict=True) == []
    _tree(tmp_path, recipe=recipe)  # with experts, what is open is said
    assert [f.possible for f in _findings(tmp_path, monkeypatch, strict=True)] == [True]
