"""Calls on a config: in-tree helpers are read, calls that only look never taint, an unknown call taints only
what it can reach and says so, megatron-core consumers leave a plain megatron-core script's defaults alone.

The trees are written here in the shapes Megatron Bridge uses (fixtures of our own, not Bridge code).
"""

from __future__ import annotations

import pytest

from offlint.units import load_unit

HELPER = '''\
import logging

import torch

logger = logging.getLogger(__name__)


def _fallback(model_config):
    model_config.moe_token_dispatcher_type = "alltoall"
    model_config.moe_flex_dispatcher_backend = None


def apply_dispatcher_backend(model_config, backend=None):
    """Flex dispatcher only for MoE models on supported GPUs (decided on the machine)."""
    num_experts = getattr(model_config, "num_moe_experts", None)
    if num_experts is None or num_experts == 0:
        logger.warning("not a MoE model: %s", model_config)
        return
    if not torch.cuda.is_available():
        model_config.moe_token_dispatcher_type = "flex"
        model_config.moe_flex_dispatcher_backend = backend
        return
    if torch.cuda.get_device_properties(0).major not in (9, 10):
        _fallback(model_config)
        return
    model_config.moe_token_dispatcher_type = "flex"
    model_config.moe_flex_dispatcher_backend = backend
'''

RECIPE = '''\
from megatron.bridge.training.dispatcher import apply_dispatcher_backend
from somewhere_else import tune_kernels


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=48, num_moe_experts=128),
                           optimizer=OptimizerConfig(use_distributed_optimizer=True),
                           ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))


def moe_30b_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.moe_flex_dispatcher_backend = "deepep"
    if hasattr(cfg.model, "recompute_granularity") and cfg.model.recompute_granularity == "full":
        cfg.model.recompute_num_layers = 4
    impl = getattr(cfg.model, "cuda_graph_impl", None)
    if impl == "none":
        cfg.model.cuda_graph_scope = []
    apply_dispatcher_backend(cfg.model, cfg.model.moe_flex_dispatcher_backend)
    return cfg


def tuned_config():
    cfg = _pretrain_common()
    cfg.model.pipeline_model_parallel_size = 4
    tune_kernels(cfg.model, fast=True)
    return cfg


def deferred_import_config():
    from megatron.bridge.recipes.optim import adam_with_cosine

    cfg = _pretrain_common()
    cfg.optimizer, scheduler = adam_with_cosine(lr=1e-4)
    cfg.ddp.use_distributed_optimizer = True
    return cfg
'''

OPTIM = '''\
def adam_with_cosine(lr=3e-4):
    opt = OptimizerConfig(optimizer="adam", lr=lr, use_distributed_optimizer=True)
    opt.optimizer_cpu_offload = False
    return opt, SchedulerConfig()
'''

MCORE_SCRIPT = '''\
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.models.gpt import GPTModel
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.transformer import TransformerConfig


def train():
    config = TransformerConfig(num_layers=4, hidden_size=256, num_attention_heads=4)
    model = GPTModel(config=config, vocab_size=1024, max_sequence_length=256)
    ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=True)
    model = DistributedDataParallel(config, ddp_config, model)
    opt_config = OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True)
    optimizer = get_megatron_optimizer(opt_config, [model])
    return optimizer
'''


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    bridge = tmp_path / "src" / "megatron" / "bridge"
    (bridge / "training").mkdir(parents=True)
    (bridge / "recipes").mkdir(parents=True)
    (bridge / "training" / "dispatcher.py").write_text(HELPER)
    (bridge / "recipes" / "moe.py").write_text(RECIPE)
    (bridge / "recipes" / "optim.py").write_text(OPTIM)
    (tmp_path / "train_mcore.py").write_text(MCORE_SCRIPT)
    return tmp_path


def resolved(recipe, path="src/megatron/bridge/recipes/moe.py"):
    return load_unit(path, recipe, mcore_version="0.20.0").resolved


def test_an_in_tree_helper_is_read_and_getattr_does_not_taint(tree):
    unit = resolved("moe_30b_pretrain_config")
    # The helper's own branches are decided on the machine: its keys depend on the path, the rest stay known.
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    assert unit.get("model.num_layers").value == 48
    for key in ("model.cpu_offloading", "model.recompute_granularity", "model.fine_grained_activation_offloading"):
        assert unit.get(key).state == "default", key
    assert unit.get("optimizer.optimizer_cpu_offload").state == "default"
    # getattr/hasattr on a default-built section read the dataclass default: both branches above are decided.
    assert unit.get("model.recompute_num_layers").state == "default"
    assert unit.get("model.cuda_graph_scope").value == []


def test_an_unknown_call_taints_only_what_it_reaches_and_says_which_call(tree):
    unit = resolved("tuned_config")
    why = unit.get("model.cpu_offloading")
    assert why.is_unknown
    assert "may be changed by `tune_kernels(...)` at src/megatron/bridge/recipes/moe.py:27" in why.value.reason
    assert unit.get("model.pipeline_model_parallel_size").value == 4  # set before the call: kept
    assert unit.get("optimizer.optimizer_cpu_offload").state == "default"  # the call never saw the optimizer
    assert unit.get("ddp.use_distributed_optimizer").value is True


def test_a_helper_imported_inside_the_function_is_followed(tree):
    unit = resolved("deferred_import_config")
    assert unit.get("optimizer.optimizer_cpu_offload").value is False
    assert unit.get("optimizer.lr").value == 1e-4


def test_megatron_core_consumers_do_not_change_the_config(tree):
    unit = resolved("train", "train_mcore.py")
    assert unit.get("optimizer.bf16").value is True
    # get_megatron_optimizer(opt_config, ...) and the model/DDP constructors only read their configs.
    assert unit.get("optimizer.optimizer_cpu_offload").state == "default"
    assert unit.get("model.cpu_offloading").state == "default"
    assert unit.get("ddp.use_distributed_optimizer").value is True


DETERMINISM = '''\
def apply_determinism_overrides(cfg):
    cfg.model.deterministic_mode = True
    cfg.env_vars.update({"NCCL_ALGO": "Tree", "NVTE_ALLOW_NONDETERMINISTIC_ALGO": 0})
'''

CUDA_GRAPH = '''\
try:
    from megatron.core.transformer.enums import CudaGraphModule
except ImportError:
    CudaGraphModule = None


def set_cuda_graph_modules(config, modules):
    if CudaGraphModule is not None and hasattr(config, "cuda_graph_modules"):
        config.cuda_graph_modules = [CudaGraphModule[name] for name in modules]
        config.cuda_graph_scope = None
    else:
        config.cuda_graph_scope = list(modules)
'''

GRAPH_RECIPES = '''\
from megatron.bridge.recipes.utils.determinism_utils import apply_determinism_overrides
from megatron.bridge.utils.cuda_graph import set_cuda_graph_modules


def dense_8b_deterministic_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    apply_determinism_overrides(cfg)
    cfg.model.cuda_graph_impl = "transformer_engine"
    set_cuda_graph_modules(cfg.model, ["attn", "mlp"])
    return cfg
'''

ALIASES = '''\
from megatron.bridge.recipes.moe import moe_30b_pretrain_config as moe_30b_config

__all__ = ["moe_30b_config"]
'''


@pytest.fixture()
def graph_tree(tree):
    utils = tree / "src" / "megatron" / "bridge" / "recipes" / "utils"
    utils.mkdir()
    (utils / "determinism_utils.py").write_text(DETERMINISM)
    (tree / "src" / "megatron" / "bridge" / "utils").mkdir()
    (tree / "src" / "megatron" / "bridge" / "utils" / "cuda_graph.py").write_text(CUDA_GRAPH)
    (tree / "src" / "megatron" / "bridge" / "recipes" / "dense.py").write_text(GRAPH_RECIPES)
    (tree / "src" / "megatron" / "bridge" / "recipes" / "aliases.py").write_text(ALIASES)
    return tree


def test_a_mutator_whose_source_is_in_the_tree_is_read_there(graph_tree):
    unit = resolved("dense_8b_deterministic_config", "src/megatron/bridge/recipes/dense.py")
    mode = unit.get("model.deterministic_mode")
    assert mode.value is True and mode.assignment.location.path == "src/megatron/bridge/recipes/utils/determinism_utils.py"
    assert unit.get("env.NCCL_ALGO").value == "Tree"  # the tree's value, not the built-in model's "Ring"
    assert unit.get("env.NVTE_ALLOW_NONDETERMINISTIC_ALGO").value == "0"
    assert unit.get("env.PYTORCH_CUDA_ALLOC_CONF").value == "expandable_segments:True"
    assert "env.CUBLAS_WORKSPACE_CONFIG" not in unit.values  # the built-in model would have added it


def test_a_mutator_branching_on_the_megatron_core_version_uses_the_version_aware_model(graph_tree):
    new = resolved("dense_8b_deterministic_config", "src/megatron/bridge/recipes/dense.py")
    assert new.get("model.cuda_graph_modules").value == ["attn", "mlp"]
    assert new.get("model.cuda_graph_scope").value is None
    old = load_unit("src/megatron/bridge/recipes/dense.py", "dense_8b_deterministic_config",
                    mcore_version="0.16.1").resolved
    assert old.get("model.cuda_graph_scope").value == ["attn", "mlp"]


def test_a_recipe_known_only_by_its_alias_is_loaded_from_its_definition(graph_tree):
    unit = resolved("moe_30b_config", "src/megatron/bridge/recipes/aliases.py")
    assert unit.unit.name == "moe_30b_pretrain_config"
    assert unit.get("model.pipeline_model_parallel_size").value == 2


WORKLOADS = '''\
from dataclasses import dataclass, replace


@dataclass
class WorkloadBaseConfig:
    pipeline_model_parallel_size: int = 1
    cpu_offloading_num_layers: int | None = None


BASE = WorkloadBaseConfig()
DENSE_8B_PRETRAIN_CONFIG_H100_BF16 = replace(BASE, pipeline_model_parallel_size=2)
'''

DYNAMIC = '''\
import importlib


def get_workload(family, recipe, gpu, dtype):
    module = importlib.import_module(f"configs.{family}")
    found = getattr(module, f"{recipe}_pretrain_config_{gpu}_{dtype}".upper(), None)
    if found is not None:
        return found
    raise ValueError(recipe)


def _dispatcher(model_config):
    experts = getattr(model_config, "num_moe_experts", None)
    if experts is None:
        return
    model_config.moe_token_dispatcher_type = "flex"


def dense_8b_config():
    settings = get_workload("dense", "dense_8b", "h100", "bf16")
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.pipeline_model_parallel_size = settings.pipeline_model_parallel_size
    if settings.cpu_offloading_num_layers is not None and settings.cpu_offloading_num_layers > 0:
        cfg.model.cpu_offloading = True
    cfg.model.context_parallel_size = getattr(cfg.model, "context_parallel_size", 1) or 1
    cfg.model.recompute_modules = [m.lower() for m in ["MLP", "CORE_ATTN"] if m != "X"]
    _dispatcher(cfg.model)
    return cfg
'''


def test_a_workload_looked_up_by_a_computed_name_and_early_returns_are_followed(tree):
    configs = tree / "scripts" / "configs" / "dense"
    configs.mkdir(parents=True)
    (configs / "__init__.py").write_text("from .workloads import DENSE_8B_PRETRAIN_CONFIG_H100_BF16\n")
    (configs / "workloads.py").write_text(WORKLOADS)
    (tree / "scripts" / "recipes.py").write_text(DYNAMIC)
    unit = resolved("dense_8b_config", "scripts/recipes.py")
    assert unit.get("model.pipeline_model_parallel_size").value == 2  # importlib + getattr(module, NAME)
    assert unit.get("model.cpu_offloading").state == "default"  # `settings is not None`: decided
    assert unit.get("model.context_parallel_size").value == 1  # `x or 1` is the operand, not True
    assert unit.get("model.recompute_modules").value == ["mlp", "core_attn"]
    assert unit.get("model.moe_token_dispatcher_type").state == "default"  # the bare `return` ended the helper


PROPERTY_WORKLOADS = '''\
from dataclasses import dataclass, replace


@dataclass
class Base:
    recompute_modules: list | None = None

    @property
    def recomputes(self) -> bool:
        return self.recompute_modules is not None


@dataclass
class WorkloadBaseConfig(Base):
    tensor_model_parallel_size: int = 1

    @property
    def sequence_parallel(self) -> bool:
        """Sequence parallelism with tensor parallelism."""
        return bool(self.tensor_model_parallel_size > 1)

    @property
    def broken(self):
        raise NotImplementedError


BASE = WorkloadBaseConfig()
TP2 = replace(BASE, tensor_model_parallel_size=2)
'''

PROPERTY_RECIPES = '''\
from configs.workloads import BASE, TP2


def tp1_config(settings=BASE):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.sequence_parallel = settings.sequence_parallel
    cfg.model.tensor_model_parallel_size = settings.tensor_model_parallel_size
    cfg.model.context_parallel_size = 2 if getattr(settings, "sequence_parallel", False) else 1
    cfg.model.pipeline_model_parallel_size = 2 if hasattr(settings, "sequence_parallel") else 1
    cfg.model.cpu_offloading = settings.broken
    cfg.model.recompute_granularity = "selective" if settings.recomputes else None
    return cfg


def tp2_config():
    cfg = tp1_config(TP2)
    cfg.model.num_layers = 16
    return cfg
'''


def test_a_property_of_a_workload_record_is_computed_from_its_fields(tree):
    """Bridge's performance scripts read `settings.sequence_parallel`, a @property of WorkloadBaseConfig computed
    from the tensor-parallel size (85ae70acf: the OOM estimate needed it). A property that raises, or one defined in
    a base class offlint does not search, stays unknown."""
    configs = tree / "scripts" / "configs"
    configs.mkdir(parents=True)
    (configs / "workloads.py").write_text(PROPERTY_WORKLOADS)
    (tree / "scripts" / "recipes.py").write_text(PROPERTY_RECIPES)
    tp1, tp2 = resolved("tp1_config", "scripts/recipes.py"), resolved("tp2_config", "scripts/recipes.py")
    assert tp1.get("model.sequence_parallel").value is False
    assert tp2.get("model.sequence_parallel").value is True  # on the record `replace` made
    assert (tp1.get("model.context_parallel_size").value, tp2.get("model.context_parallel_size").value) == (1, 2)
    assert tp1.get("model.pipeline_model_parallel_size").value == 2  # hasattr: the property exists
    assert tp1.get("model.cpu_offloading").state == "unknown"
    assert tp1.get("model.recompute_granularity").state == "unknown"  # Base's property: not searched


LIBRARY = '''\
def big_mock_config(**user_kwargs):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=94, hidden_size=4096, num_attention_heads=32),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    cfg.model.pipeline_model_parallel_size = user_kwargs.get("pipeline_model_parallel_size", 16)
    return cfg


def squared_relu(x):
    return x * x
'''

RECIPE_FN = '''\
from library import big_mock_config, squared_relu


def _perf_config(gpu, recipe_fn, pipeline=8):
    cfg = recipe_fn(pipeline_model_parallel_size=pipeline)
    cfg.model.activation_func = squared_relu
    cfg.model.init_method = _perf_config
    return cfg


def big_pretrain_config_b200() -> ConfigContainer:
    """B200, baseline config."""
    return _perf_config("b200", big_mock_config)
'''


def test_a_recipe_function_passed_as_an_argument_is_followed(tree):
    """Bridge's performance configs hand the library recipe to a private builder (`recipe_fn`, f69d4dd59: the
    94-layer Qwen3-VL at PP8 it built was not read). A function stored as a config value is unknown, not a value."""
    (tree / "library.py").write_text(LIBRARY)
    (tree / "perf.py").write_text(RECIPE_FN)
    unit = resolved("big_pretrain_config_b200", "perf.py")
    assert unit.get("model.num_layers").value == 94
    assert unit.get("model.pipeline_model_parallel_size").value == 8
    assert unit.get("model.activation_func").state == "unknown"
    assert unit.get("model.init_method").state == "unknown"


WAN_PROVIDER = '''\
from dataclasses import dataclass


@dataclass
class TransformerConfig:
    pass


@dataclass
class WanModelProvider(TransformerConfig):
    num_layers: int = 30
    hidden_size: int = 1536


@dataclass
class WanModelProvider14B(WanModelProvider):
    num_layers: int = 40
    hidden_size: int = 5120


@dataclass
class VisionTransformerConfig(TransformerConfig):
    patch_size: int = 14
'''

WAN_RECIPE = '''\
from providers import VisionTransformerConfig, WanModelProvider14B


def wan_14b_pretrain_config() -> ConfigContainer:
    model_cfg = WanModelProvider14B()
    model_cfg.cuda_graph_impl = "local"
    model_cfg.recompute_granularity = "full"
    return ConfigContainer(model=model_cfg, optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())


def vision_config(recompute):
    config = VisionTransformerConfig(num_layers=2)
    config.recompute_granularity = recompute
    return config
'''


def test_a_provider_class_named_with_a_size_is_a_model_section(tree):
    """Bridge's WanModelProvider14B(WanModelProvider): a provider by its bases, not its name (Bridge 05312d5f7's Wan
    recipes read as unknown: a CUDA-graph x full-recompute crash went unreported, and a validation branch became a
    possible finding). A class that is only a TransformerConfig subclass stays a record (model code's own config)."""
    from offlint.units import UnitSelectionError

    (tree / "providers.py").write_text(WAN_PROVIDER)
    (tree / "wan.py").write_text(WAN_RECIPE)
    unit = resolved("wan_14b_pretrain_config", "wan.py")
    assert (unit.get("model.num_layers").value, unit.get("model.hidden_size").value) == (40, 5120)
    assert unit.get("model.cuda_graph_impl").value == "local"
    with pytest.raises(UnitSelectionError):  # VisionTransformerConfig(...): a record, so no config is built
        resolved("vision_config", "wan.py")


UNEXPECTED_KEYWORD = '''\
def big_config() -> ConfigContainer:
    return ConfigContainer(model=GPTModelProvider(num_layers=96), optimizer=OptimizerConfig(),
                           ddp=DistributedDataParallelConfig())


def big_config_b200() -> ConfigContainer:
    cfg = big_config(mock=True, precision_config=None)
    cfg.model.pipeline_model_parallel_size = 2
    return cfg


def big_config_h100() -> ConfigContainer:
    cfg = big_config()
    cfg.model.pipeline_model_parallel_size = 4
    return cfg
'''


def test_a_call_with_a_keyword_the_function_does_not_take_raises(tree):
    """Bridge cc31be266's NemotronH performance configs call `nemotronh_56b_pretrain_config(mock=..., precision_config
    =...)`, which takes no parameters: Python raises TypeError, so the wrapper builds nothing (it was sized as an
    OOM instead). A correct call of the same function is followed as before."""
    from offlint.units import UnitSelectionError

    (tree / "big.py").write_text(UNEXPECTED_KEYWORD)
    assert resolved("big_config_h100", "big.py").get("model.pipeline_model_parallel_size").value == 4
    with pytest.raises(UnitSelectionError):
        resolved("big_config_b200", "big.py")


DATASET_PROVIDERS = '''\
from dataclasses import dataclass


@dataclass
class DataloaderConfig:
    num_workers: int = 2


@dataclass
class DatasetProvider(DataloaderConfig):
    pass


@dataclass
class MockVLMConversationProvider(DatasetProvider):
    seq_length: int = 1024


@dataclass
class WanMockDataModuleConfig(DatasetProvider):
    seq_length: int = 1024
'''

VLM_RECIPE = '''\
from data import MockVLMConversationProvider, WanMockDataModuleConfig


def vlm_pretrain_config() -> ConfigContainer:
    return ConfigContainer(model=GPTModelProvider(num_layers=8, seq_length=2048), optimizer=OptimizerConfig(),
                           ddp=DistributedDataParallelConfig(), dataset=MockVLMConversationProvider(seq_length=4096))


def wan_pretrain_config() -> ConfigContainer:
    return ConfigContainer(model=GPTModelProvider(num_layers=8, seq_length=2048), optimizer=OptimizerConfig(),
                           ddp=DistributedDataParallelConfig(), dataset=WanMockDataModuleConfig(seq_length=4096))
'''


def test_a_dataset_provider_builds_the_dataset_section_not_the_model(tree):
    """Bridge's MockVLMConversationProvider(DatasetProvider) is named like a model provider; read as one, its
    keywords became model keys and its class the model's (helper class E: an EP-overlap crash on Qwen3VLModel was
    only possible)."""
    (tree / "data.py").write_text(DATASET_PROVIDERS)
    (tree / "vlm.py").write_text(VLM_RECIPE)
    for recipe in ("vlm_pretrain_config", "wan_pretrain_config"):  # (the second not named like a provider)
        unit = resolved(recipe, "vlm.py")
        assert unit.get("model.seq_length").value == 2048, recipe
        assert unit.get("dataset.seq_length").value == 4096, recipe


OWN_SETTINGS = '''\
from dataclasses import dataclass


@dataclass
class PipelineDefaults:
    model_type: str = "flux"


@dataclass
class ModelConfig(PipelineDefaults):
    cpu_offloading: bool = False


@dataclass
class ExternalModelConfig(SomeoneElsesBase):
    cpu_offloading: bool = False


class ProviderMixin(Generic[T]):
    pass


@dataclass
class GenericBaseModelProvider(ProviderMixin[T]):
    cpu_offloading: bool = False
'''


def test_a_class_of_the_trees_own_named_like_a_model_config_is_no_megatron_config(tree):
    """Model-Optimizer's diffusers example builds `ModelConfig(model_type=..., cpu_offloading=True)`, a dataclass
    of its own with no Megatron base: read as a model config it drew OFL101 and OFL210 (a helper's sweep). A class
    with a base from outside the tree may still be Megatron's, and stays one."""
    from offlint.engine import check_unit
    from offlint.rules import load_rules
    from offlint.units import UnitSelectionError

    (tree / "settings.py").write_text(OWN_SETTINGS)
    (tree / "quantize.py").write_text(
        "from settings import ExternalModelConfig, GenericBaseModelProvider, ModelConfig\n\n"
        "def demo():\n    return ModelConfig(model_type='sdxl', cpu_offloading=True)\n\n"
        "def external():\n    return ExternalModelConfig(cpu_offloading=True)\n\n"
        "def generic():\n    return GenericBaseModelProvider(cpu_offloading=True)\n")
    with pytest.raises(UnitSelectionError, match=r"no unit named 'demo' \(found: external, generic\)"):
        resolved("demo", "quantize.py")  # (it builds a record of its own: no recipe)
    external = resolved("external", "quantize.py")
    assert external.get("model.cpu_offloading").value is True
    # (a generic base that is no dataclass of the tree: Bridge's MegatronMIMOProvider(ModelProviderMixin[MimoModel]))
    assert resolved("generic", "quantize.py").get("model.cpu_offloading").value is True
    assert "OFL210" in [f.code for f in check_unit(external, list(load_rules().values()), False)]


def test_the_distributed_optimizer_is_read_as_megatron_core_or_bridge_decides_it(tree):
    """megatron-core's get_megatron_optimizer reads only the OptimizerConfig; Bridge syncs it with the DDP
    config's flag (BR-4). The same two configs are an error in a plain megatron-core program only."""
    from offlint.engine import check_unit
    from offlint.rules import load_rules

    (tree / "mcore_offload.py").write_text(
        "from megatron.core.distributed import DistributedDataParallelConfig\n"
        "from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer\n\n"
        "def build(model):\n"
        "    ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=True)\n"
        "    opt_config = OptimizerConfig(optimizer='adam', bf16=True, optimizer_cpu_offload=True)\n"
        "    return get_megatron_optimizer(opt_config, [model])\n")
    (tree / "bridge_offload.py").write_text(
        "from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig\n\n"
        "def offload_config():\n"
        "    return ConfigContainer(model=GPTModelProvider(num_layers=8),\n"
        "                           ddp=DistributedDataParallelConfig(use_distributed_optimizer=True),\n"
        "                           optimizer=OptimizerConfig(optimizer='adam', bf16=True, optimizer_cpu_offload=True))\n")
    rules = [load_rules()["OFL206"]]
    mcore = resolved("build", "mcore_offload.py")
    assert mcore.unit.framework == "megatron-core"
    assert [f.code for f in check_unit(mcore, rules, strict=False)] == ["OFL206"]
    bridge = resolved("offload_config", "bridge_offload.py")
    assert bridge.unit.framework == "bridge"
    assert check_unit(bridge, rules, strict=False) == []


def test_values_the_reader_builds_stay_small(tmp_path):
    """Nested comprehensions, huge repetitions and replacements are not computed (hostile input stays linear)."""
    from offlint.resolve import resolve
    from offlint.sources.python import read_python
    from offlint.versions import parse_version

    text = ("L = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 1\n"
            "X = [[[a + b + c for a in L] for b in L] for c in L]\n"
            "S = 'ab' * 100000000\n"
            "T = 'b'.replace('b', 'c' * 10) + ''.join(['x'] * 3)\n"
            "W = 'x,' * 3\n"
            "def recipe():\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=len(X)))\n"
            "    cfg.model.pipeline_model_parallel_size = len(S)\n"
            "    cfg.model.recompute_modules = [m.upper() for m in 'a,b'.split(',')]\n"
            "    return cfg\n")
    unit = resolve(read_python("r.py", text)[0], parse_version("0.20.0"))
    assert unit.get("model.num_layers").is_unknown
    assert unit.get("model.pipeline_model_parallel_size").is_unknown
    assert unit.get("model.recompute_modules").value == ["A", "B"]


PRECISION = '''\
from dataclasses import dataclass


@dataclass
class PrecisionConfig:
    bf16: bool = False
    fp8: str | None = None
    fp8_recipe: str = "tensorwise"
    fp8_param_gather: bool = False


def bf16_base():
    return PrecisionConfig(bf16=True)


def bf16_with_fp8():
    cfg = bf16_base()
    cfg.fp8 = "hybrid"
    cfg.fp8_param_gather = True
    return cfg


def fp8_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.mixed_precision = bf16_with_fp8()
    return cfg
'''


def test_an_attribute_written_on_a_dataclass_instance_changes_it(tree):
    """Bridge's precision recipes build the bf16 config and then set `cfg.fp8 = ...` on it: the write must reach
    the record (dropping it left FP8 recipes known as bf16)."""
    (tree / "src" / "megatron" / "bridge" / "recipes" / "precision.py").write_text(PRECISION)
    fields = resolved("fp8_config", "src/megatron/bridge/recipes/precision.py").get("mixed_precision").value.fields
    assert (fields["bf16"], fields["fp8"], fields["fp8_recipe"], fields["fp8_param_gather"]) == (
        True, "hybrid", "tensorwise", True)


EARLY_RETURNS = '''\
import os
import sys

from elsewhere import layers_for


def _base():
    return ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                           ddp=DistributedDataParallelConfig())


def _bootstrap(config):
    """Re-exec once with a marker (Megatron Bridge's run_recipe.py bootstrap has this shape)."""
    config.model.cpu_offloading = True
    if os.environ.get("MARKER") == str(os.getpid()):
        return config
    os.execvpe(sys.executable, [sys.executable], dict(os.environ))
    raise RuntimeError("execvpe returned")


def _lookup(name):
    if name == os.environ.get("SMALL"):
        return _base()
    elif name == os.environ.get("OTHER"):
        return None
    raise ValueError(name)


def _either(flag):
    if flag == os.environ.get("A"):
        return 1
    else:
        return 2


def _layers(flag):
    if flag == os.environ.get("B"):
        return layers_for(size=1)
    else:
        return layers_for(size=2)


def bootstrapped_config():
    cfg = _bootstrap(_base())
    cfg.model.pipeline_model_parallel_size = 2
    return cfg


def looked_up_config():
    cfg = _base()
    cfg.model.num_layers = _lookup("x")
    cfg.model.pipeline_model_parallel_size = _either("y")
    cfg.model.hidden_size = _layers("z")
    return cfg
'''


def test_a_raise_after_a_path_returned_leaves_that_path_s_value(tree):
    """`if marker: return config` then `os.execvpe(...)`, `raise RuntimeError(...)` returns `config` on the only path
    that returns: the value, not "returns no value" (Megatron Bridge 067f987 scripts/training/recipe_runner.py:324,
    whose result is every run_recipe.py launch's recipe). Paths that return different values leave it unknown."""
    (tree / "early.py").write_text(EARLY_RETURNS)
    unit = resolved("bootstrapped_config", "early.py")
    assert unit.get("model.num_layers").value == 8
    assert unit.get("model.cpu_offloading").value is True
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    other = resolved("looked_up_config", "early.py")
    assert other.get("model.num_layers").is_unknown
    assert "returns a different value on each path" in other.get("model.num_layers").value.reason
    assert "returns a different value on each path" in other.get("model.pipeline_model_parallel_size").value.reason
    assert other.get("model.hidden_size").value.reason == "the result of `layers_for(...)`"  # (unknown alike)
