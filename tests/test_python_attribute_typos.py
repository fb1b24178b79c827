"""A misspelt field written in a Python recipe (`cfg.model.cpu_offloading_num_layer = 2`) raises nothing:
megatron-core's and Megatron Bridge's config dataclasses have no __slots__, so the object takes the name as its own,
which nothing reads, and the run goes on without the setting. OFL003 reports it where the object is a config offlint
knows to be one (built by a config class, or a section of a ConfigContainer), and leaves alone an object it takes for a
section by its name alone (an argparse or SimpleNamespace object), a private name, and a name the tree's own code reads
(an attribute the tree adds for itself). Fixtures of our own, in the shapes Bridge recipes and Megatron-LM tools write.
"""

from __future__ import annotations

from pathlib import Path

from offlint.tree_keys import PYTHON_WRITE
from tests.check_helpers import check_json, write_tree

USER_RECIPE = '''
from megatron.bridge.recipes.llama.llama3 import llama3_8b_pretrain_config


def my_llama():
    cfg = llama3_8b_pretrain_config()
    cfg.model.cpu_offloading_num_layer = 2
    cfg.optimizer.optimizer_cpu_offlaod = True
    cfg.ddp.overlap_grad_reduce = True
    return cfg
'''

BUILT = '''
from megatron.core.optimizer import OptimizerConfig
from megatron.core.transformer import TransformerConfig


def optimizer():
    config = OptimizerConfig(optimizer="adam")
    config.optimizer_offload_fracton = 0.5
    return config


def language_model():
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4)
    config.recompute_granularty = "full"
    config._recompute_granularity = "full"  # private: the tree's own bookkeeping
    return config
'''

BASE_AND_DERIVED = {
    "recipes/common.py": '''
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer
from megatron.core.optimizer import OptimizerConfig


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig())
''',
    "recipes/mine.py": '''
from recipes.common import _pretrain_common


def mine_config():
    cfg = _pretrain_common()
    model = cfg.model
    model.fine_grained_activation_offloadin = True
    return cfg
''',
}

# The shape of Megatron Bridge's scripts/performance/run_recipe.py before cce495373: the flag's write under an `if`
PERF_OVERRIDES = '''
def set_user_overrides(config, args):
    if args.expert_model_parallel_size:
        config.model.expert_model_parallel_size = args.expert_model_parallel_size
    if args.expert_tensor_parallel_size:
        config.model.expert_tensor_model_parallel_size = args.expert_tensor_parallel_size
    return config
'''

NOT_CONFIGS = '''
import types


def metadata(margs):
    md = types.SimpleNamespace()
    md.num_layers = margs.num_layers
    md.recompute_granularty = margs.recompute_granularity
    return md


def tool(args):
    args.cpu_offloading_num_layer = 2
    model_cfg = load()
    model_cfg.num_layers = 2
    model_cfg.recompute_granularty = "full"
    return args, model_cfg
'''

READ_BY_THE_TREE = {
    "models/vision.py": '''
from megatron.core.transformer import TransformerConfig


def vision_config():
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4)
    config.rotary_percents = [0.5, 1.0]
    return config
''',
    "models/rope.py": '''
def percent(config, layer):
    percents = getattr(config, "rotary_percents", None) or []
    return percents[layer]
''',
}


def _typos(root: Path, files: dict[str, str]) -> list[tuple[str, int, str]]:
    root.mkdir(parents=True, exist_ok=True)
    write_tree(root, files)
    return sorted((f["filename"], f["location"]["row"], f["message"].split(" is not", 1)[0])
                  for f in check_json(root) if f["code"] == "OFL003")


def test_a_user_recipe_built_on_a_bridge_recipe(tmp_path: Path) -> None:
    found = _typos(tmp_path, {"recipes/my_llama.py": USER_RECIPE})
    assert found == [("recipes/my_llama.py", 7, "model.cpu_offloading_num_layer"),
                     ("recipes/my_llama.py", 8, "optimizer.optimizer_cpu_offlaod")]


def test_the_message_says_why_nothing_happens(tmp_path: Path) -> None:
    write_tree(tmp_path, {"recipes/my_llama.py": USER_RECIPE})
    finding = next(f for f in check_json(tmp_path) if f["code"] == "OFL003")
    assert finding["severity"] == "warning"
    assert "did you mean model.cpu_offloading_num_layers?" in finding["message"]
    assert PYTHON_WRITE in finding["message"]


def test_config_objects_built_by_their_classes(tmp_path: Path) -> None:
    found = _typos(tmp_path, {"configs.py": BUILT})
    assert found == [("configs.py", 8, "optimizer.optimizer_offload_fracton"),
                     ("configs.py", 14, "model.recompute_granularty")]


def test_a_section_of_a_container_the_base_builder_made(tmp_path: Path) -> None:
    found = _typos(tmp_path, BASE_AND_DERIVED)
    assert found == [("recipes/mine.py", 8, "model.fine_grained_activation_offloadin")]


def test_a_write_on_some_paths_only(tmp_path: Path) -> None:
    found = _typos(tmp_path, {"scripts/performance/run_recipe.py": PERF_OVERRIDES})
    assert found == [("scripts/performance/run_recipe.py", 6, "model.expert_tensor_model_parallel_size")]


def test_objects_taken_for_sections_by_their_names_are_not_judged(tmp_path: Path) -> None:
    assert _typos(tmp_path, {"tools/convert.py": NOT_CONFIGS}) == []


def test_an_attribute_the_tree_reads_is_its_own(tmp_path: Path) -> None:
    assert _typos(tmp_path, READ_BY_THE_TREE) == []
    # the same write, with no code reading it: a near miss of rotary_percent
    found = _typos(tmp_path / "alone", {"models/vision.py": READ_BY_THE_TREE["models/vision.py"]})
    assert found == [("models/vision.py", 7, "model.rotary_percents")]


# A recipe repository that imports Megatron Bridge: the providers' own fields are not megatron-core's, and their
# classes are not in the tree (offlint/data/bridge-provider-fields.json lists them)
PROVIDER_FIELDS = '''
from megatron.bridge.recipes.qwen.qwen3_moe import qwen3_30b_a3b_pretrain_config


def long_context():
    cfg = qwen3_30b_a3b_pretrain_config()
    cfg.model.yarn_rotary_scaling_factor = 4.0
    cfg.model.yarn_original_max_position_embeddings = 32768
    cfg.model.vision_cuda_graph_impl = "none"
    return cfg
'''

PROVIDER_FIELDS_YAML = '''
model:
  yarn_rotary_scaling_factor: 4.0
  yarn_original_max_position_embeddings: 32768
'''


def test_fields_of_bridge_providers_outside_the_tree_are_known(tmp_path: Path) -> None:
    assert _typos(tmp_path, {"recipes/long_context.py": PROVIDER_FIELDS,
                             "conf/long_context.yaml": PROVIDER_FIELDS_YAML}) == []
