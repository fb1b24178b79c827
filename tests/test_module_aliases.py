"""A module of the tree imported under a name (`from . import workloads as base_cfgs`, `import pkg.workloads as
wl`) is read through that name: `base_cfgs.LORA_BF16` is the module's value, as Bridge's performance scripts write it
(scripts/performance/utils/overrides.py at b54cc3625). Unread, the workload was unknown, both paths of every test on
it were taken, and OFL103 was reported as an error on a path no shipped workload takes. A name the module cannot bind
is missing: `getattr(module, name, default)` is the default. Fixtures of our own, in the shape Bridge writes."""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json

WORKLOADS = '''
from dataclasses import dataclass, replace
from typing import List, Optional


@dataclass
class Workload:
    cpu_offloading_num_layers: Optional[int] = None
    recompute_modules: Optional[List[str]] = None


BASE = Workload()
LORA_BF16 = replace(BASE)
OFFLOADED_BF16 = replace(BASE, cpu_offloading_num_layers=2, recompute_modules=["core_attn"])

# Listed, never bound (Bridge PR 3019's workload package): the name is spelled in a string and a comment only
__all__ = ["LORA_BF16", "STALE_BF16_V1"]  # STALE_BF16_V1 was removed
'''

RECIPES = '''
import importlib

from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider

from . import workloads as base_cfgs
import pkg.workloads as wl


def apply(cfg, s):
    if s.cpu_offloading_num_layers is not None:
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = s.cpu_offloading_num_layers
    if s.recompute_modules is not None:
        cfg.model.recompute_modules = s.recompute_modules
        cfg.model.recompute_granularity = "selective"
    return cfg


def lora_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    return apply(cfg, base_cfgs.LORA_BF16)


def dotted_lora_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    return apply(cfg, wl.LORA_BF16)


def offloaded_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    return apply(cfg, base_cfgs.OFFLOADED_BF16)


def prefix_config():
    module = importlib.import_module("pkg.workloads")
    found = getattr(module, "OFFLOADED", None)  # only OFFLOADED_BF16 is there
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    if found is None:
        cfg.model.recompute_granularity = "full"
    return cfg


def listed_config(variant: str = "v1"):
    module = importlib.import_module("pkg.workloads")
    found = getattr(module, f"stale_bf16_{variant}".upper(), None)
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    if found is None:
        cfg.model.recompute_granularity = "full"
    return cfg


def looked_up_config(variant: str = "v1"):
    module = importlib.import_module("pkg.workloads")
    found = getattr(module, f"lora_bf16_{variant}".upper(), None)
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    if found is None:
        cfg.model.recompute_granularity = "full"
    return cfg
'''


def _units(finding: dict) -> list[str]:
    """The units a finding is reported for (one line shared by several recipes names them all)."""
    return [finding["unit"], *finding.get("shared_with", [])]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "workloads.py").write_text(WORKLOADS)
    (tmp_path / "pkg" / "recipes.py").write_text(RECIPES)
    return tmp_path


def test_a_workload_read_through_a_module_alias_gives_only_the_findings_it_has(tree):
    found = check_json(tree, "--no-cache")
    assert [_units(f) for f in found if f["code"] == "OFL103"] == [["offloaded_config"]]
    message = next(f["message"] for f in found if f["code"] == "OFL103")
    assert "on the path where" not in message  # both settings known: no path condition


def test_a_name_the_module_cannot_bind_is_missing(tree, monkeypatch):
    from offlint.units import load_unit

    monkeypatch.chdir(tree)
    value = load_unit("pkg/recipes.py", "looked_up_config", mcore_version="0.20.0").resolved.get(
        "model.recompute_granularity")
    assert (value.state, value.value) == ("known", "full")  # LORA_BF16_V1 is nowhere in workloads.py
    value = load_unit("pkg/recipes.py", "prefix_config", mcore_version="0.20.0").resolved.get(
        "model.recompute_granularity")
    assert (value.state, value.value) == ("known", "full")  # a longer name holding it (OFFLOADED_BF16) binds nothing
    value = load_unit("pkg/recipes.py", "listed_config", mcore_version="0.20.0").resolved.get(
        "model.recompute_granularity")
    assert (value.state, value.value) == ("known", "full")  # named in `__all__` and a comment: still not bound


def test_a_change_to_the_aliased_module_is_seen_through_the_cache(tree):
    assert not [f for f in check_json(tree) if "lora_config" in _units(f)]
    workloads = tree / "pkg" / "workloads.py"
    workloads.write_text(WORKLOADS.replace("LORA_BF16 = replace(BASE)",
                                           "LORA_BF16 = replace(BASE, cpu_offloading_num_layers=1, "
                                           "recompute_modules=['mlp'])"))
    assert [f["code"] for f in check_json(tree) if "lora_config" in _units(f)] == ["OFL103"]
