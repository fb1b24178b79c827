"""`raise` in the Python reader: a path that raises goes no further. A branch that raises leaves its `if` on the other
paths only; a followed call that always raises ends its caller's path; a `try` around it, or a path that returned
earlier, keeps the old reading (the raise is not followed). Before, a raise was read as a statement that does
nothing: Bridge's performance overrides at 0de165ffc looked a workload up for a variant that has none, raised, and
offlint carried on with the workload unknown, taking both paths of every test on it (OFL103 and OFL104 as errors on
a path that never runs). Lists are written too: `matches.append(...)` in a loop no longer leaves `matches == []`
known, so `if not matches: raise ...` is not taken as certain. Fixtures of our own."""

from __future__ import annotations

import pytest

from offlint.units import UnitSelectionError, load_unit

RECIPES = '''
import importlib

from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider

ALLOWED = ("bf16", "fp8")
TABLE = {"bf16": 2}


def get_base(gpu, variant="v1"):
    module = importlib.import_module("workloads")
    found = getattr(module, f"{gpu}_bf16_{variant}".upper(), None)
    if found is not None:
        return found
    raise ValueError("no such workload")


def apply(cfg, s):
    if s.cpu_offloading_num_layers is not None:
        cfg.model.cpu_offloading = True
    if s.recompute_modules is not None:
        cfg.model.recompute_granularity = "selective"
    return cfg


def vr_pretrain_config(variant: str = "v1"):
    s = get_base("vr", variant)
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    return apply(cfg, s)


def gb_pretrain_config(variant: str = "v1"):
    s = get_base("gb", variant)
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    return apply(cfg, s)


def guarded_pretrain_config(precision):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    if precision == "fp4":
        cfg.model.recompute_granularity = "full"
        raise NotImplementedError("fp4")
    elif precision == "fp8":
        cfg.model.recompute_granularity = "selective"
    else:
        cfg.model.recompute_granularity = "selective"
    return cfg


def lookup(name):
    if name in TABLE:
        return TABLE[name]
    raise ValueError(name)


def early_return_pretrain_config(name):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.model.tensor_model_parallel_size = lookup(name)
    cfg.model.recompute_granularity = "full"
    return cfg


def tried_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    try:
        get_base("vr")
    except ValueError:
        pass
    cfg.model.recompute_granularity = "full"
    return cfg


def find(name):
    for candidate in ("llama3_8b", "qwen3_8b"):
        if candidate == name:
            return candidate
    return None


def found_pretrain_config(name):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    recipe = find(name)
    if recipe is None:
        raise ValueError(name)
    cfg.model.recompute_granularity = "full"
    return cfg


def matching(names):
    matches = []
    for name in names:
        if name.startswith("llama"):
            matches.append(name)
    if not matches:
        raise ValueError("no match")
    return matches[0]


def listed_pretrain_config(names=None):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.model.recompute_method = matching(names)
    cfg.model.recompute_granularity = "full"
    return cfg
'''

WORKLOADS = '''
from dataclasses import dataclass
from typing import List, Optional


@dataclass
class Workload:
    cpu_offloading_num_layers: Optional[int] = None
    recompute_modules: Optional[List[str]] = None


GB_BF16_V1 = Workload(recompute_modules=["core_attn"])
VR_BF16_V2 = Workload(cpu_offloading_num_layers=2)
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("raise")
    (root / "pyproject.toml").write_text("")
    (root / "recipes.py").write_text(RECIPES)
    (root / "workloads.py").write_text(WORKLOADS)
    return root


def _value(tree, monkeypatch, recipe: str, key: str):
    monkeypatch.chdir(tree)
    found = load_unit("recipes.py", recipe, mcore_version="0.20.0").resolved.get(key)
    return found.value if found.state in ("known", "default") else None


def test_a_recipe_whose_workload_lookup_raises_builds_no_unit(tree, monkeypatch):
    monkeypatch.chdir(tree)
    with pytest.raises(UnitSelectionError, match="no unit named 'vr_pretrain_config'"):
        load_unit("recipes.py", "vr_pretrain_config", mcore_version="0.20.0")
    assert _value(tree, monkeypatch, "gb_pretrain_config", "model.recompute_granularity") == "selective"
    assert _value(tree, monkeypatch, "gb_pretrain_config", "model.cpu_offloading") is False  # the default, known


def test_a_branch_that_raises_leaves_the_if_on_the_other_paths(tree, monkeypatch):
    assert _value(tree, monkeypatch, "guarded_pretrain_config", "model.recompute_granularity") == "selective"


def test_a_raise_after_a_path_returned_is_not_followed(tree, monkeypatch):
    # `lookup` returns on one path (its `name` is the caller's parameter, not known): the caller goes on
    assert _value(tree, monkeypatch, "early_return_pretrain_config", "model.recompute_granularity") == "full"
    assert _value(tree, monkeypatch, "early_return_pretrain_config", "model.tensor_model_parallel_size") is None


def test_a_raise_a_try_may_catch_is_not_followed(tree, monkeypatch):
    assert _value(tree, monkeypatch, "tried_pretrain_config", "model.recompute_granularity") == "full"


def test_a_list_filled_by_a_loop_is_not_known_empty(tree, monkeypatch):
    assert _value(tree, monkeypatch, "listed_pretrain_config", "model.recompute_granularity") == "full"


def test_none_a_function_returns_after_another_path_returned_is_not_decided_on(tree, monkeypatch):
    """`find` returns a match from its loop on one path and None after it: the None is one result of two, and
    `if recipe is None: raise` is not taken as certain (Bridge's performance scripts' `find_perf_recipe`)."""
    assert _value(tree, monkeypatch, "found_pretrain_config", "model.recompute_granularity") == "full"


GUARDED_HELPER = '''
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def _apply_performance(model_cfg, config):
    offload = config.get("offload")
    if offload is False:
        model_cfg.fine_grained_activation_offloading = False
    elif offload:
        if not config.get("offload_modules"):
            raise ValueError("offload_modules are needed")
        model_cfg.fine_grained_activation_offloading = True


def perf_pretrain_config(config: dict):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    _apply_performance(cfg.model, config)
    return cfg
'''


def test_a_guard_that_raises_inside_a_branch_keeps_what_the_branch_sets_after_it(tmp_path, monkeypatch):
    """NeMo RL's _apply_performance_config: `elif on:` guards with `if not ...: raise` and then turns fine-grained
    offloading on. The guard's one going-on path stood in for both of its paths, so the helper's argument was bound
    to that path's copy of the config: the write after the guard was lost ("False or unset")."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(GUARDED_HELPER)
    monkeypatch.chdir(tmp_path)
    found = load_unit("recipes.py", "perf_pretrain_config", mcore_version="0.20.0").resolved.get(
        "model.fine_grained_activation_offloading")
    assert found.is_unknown and sorted(map(repr, {p[0] for p in found.value.paths})) == ["<default>", "False", "True"]
