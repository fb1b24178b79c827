"""A recipe name defined both as a library recipe (`recipes/`) and as a benchmark recipe (`perf_recipes/`): Megatron
Bridge's run_recipe.py loads the one its recipe_metadata.py settles (BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS: the
benchmark definition; LIBRARY_RECIPE_PRECEDENCE_COLLISIONS: the library one; Bridge 067f987 lists nine names under
the first, among them qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config). Round 4 of the recall study (G07): a launch
of such a name was linked to neither, and its layout went unjudged. Fixtures of our own in Bridge's layout."""

from __future__ import annotations

import pytest

from offlint.sources.bridge_recipe_lookup import LIBRARY, PERF, settled_package
from tests.check_helpers import check_json, write_tree

NAME = "moe_pretrain_config"
RECIPE = """from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import (ConfigContainer, DistributedDataParallelConfig, OptimizerConfig,
                                             TrainingConfig)


def {name}():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8),
                          optimizer=OptimizerConfig(bf16=True), ddp=DistributedDataParallelConfig(),
                          train=TrainingConfig(global_batch_size=64, micro_batch_size=1))
    cfg.model.tensor_model_parallel_size = {tp}
    return cfg
"""


def _tree(root, metadata: str | None) -> None:
    files = {"src/megatron/bridge/__init__.py": "", "src/megatron/bridge/recipes/__init__.py": "",
             "src/megatron/bridge/perf_recipes/__init__.py": "",
             "src/megatron/bridge/recipes/moe.py": RECIPE.format(name=NAME, tp=3),  # (needs 3 GPUs)
             "src/megatron/bridge/perf_recipes/moe.py": RECIPE.format(name=NAME, tp=4),  # (needs 4, of 2)
             "scripts/training/run_recipe.py": "from recipe_runner import load_recipe\n",
             "run.sh": f"torchrun --nproc-per-node 2 scripts/training/run_recipe.py --recipe {NAME}\n"}
    if metadata is not None:
        files["scripts/training/recipe_metadata.py"] = metadata
    write_tree(root, files)


def _ofl216(root) -> list[str]:
    """The files of the OFL216 findings: the layout of the recipe the launch runs, against its 2 GPUs."""
    return [f["filename"] for f in check_json(root, "--no-cache") if f["code"] == "OFL216"]


def test_the_benchmark_definition_the_tree_selects_is_the_one_judged(tmp_path):
    _tree(tmp_path, f'BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = frozenset(\n    {{\n        "{NAME}",\n    }}\n)\n'
                    "LIBRARY_RECIPE_PRECEDENCE_COLLISIONS: frozenset[str] = frozenset()\n")
    assert _ofl216(tmp_path) == ["src/megatron/bridge/perf_recipes/moe.py"]


def test_the_library_definition_the_tree_selects_is_the_one_judged(tmp_path):
    _tree(tmp_path, f'LIBRARY_RECIPE_PRECEDENCE_COLLISIONS: frozenset[str] = frozenset({{"{NAME}"}})\n')
    assert _ofl216(tmp_path) == ["src/megatron/bridge/recipes/moe.py"]


@pytest.mark.parametrize("metadata", [None, "BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = frozenset()\n"])
def test_a_name_the_tree_does_not_settle_links_neither(tmp_path, metadata):
    _tree(tmp_path, metadata)
    assert _ofl216(tmp_path) == []


@pytest.mark.parametrize("text, settled", [
    (f'BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = frozenset({{"{NAME}"}})\n', PERF),
    (f'LIBRARY_RECIPE_PRECEDENCE_COLLISIONS = frozenset(["{NAME}"])\n', LIBRARY),
    (f'LIBRARY_RECIPE_PRECEDENCE_COLLISIONS = {{"{NAME}"}}\n', LIBRARY),
    (f'BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = frozenset(n for n in ["{NAME}"])\n', None),  # (not a literal)
    (f'OTHER_RECIPE_PRECEDENCE_COLLISIONS = frozenset({{"{NAME}"}})\n', None),
    ("BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = frozenset(\n", None),  # (not Python)
    (f'LIBRARY_RECIPE_PRECEDENCE_COLLISIONS = {{"{NAME}"}}\nBENCHMARK_RECIPE_PRECEDENCE_COLLISIONS = {{"{NAME}"}}\n',
     LIBRARY),  # (in both: the tree's lookup asks the library's list first)
])
def test_the_lists_are_read_as_literals(text, settled):
    assert settled_package(NAME, "scripts/training/run_recipe.py",
                           {"scripts/training/recipe_metadata.py": text}.get) == settled
