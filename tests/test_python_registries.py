"""Registries filled by a decorator at import (`@register def bf16_mixed(): ...` storing each recipe under its own
name) and looked up by a known name (`RECIPES[name]()`): the reader follows the registered function without
running anything; a key it cannot derive stays unknown.

The trees are written here in the shapes Megatron Bridge uses (fixtures of our own, not Bridge code).
"""

from __future__ import annotations

import pytest

from offlint.units import load_unit

PRECISION = '''\
from dataclasses import dataclass
from typing import Callable


@dataclass
class PrecisionSettings:
    bf16: bool = False
    fp8: str | None = None
    fp8_recipe: str = "tensorwise"
    fp8_param_gather: bool = False
    bf16_tail_layers: int = 0
    grad_reduce_in_fp32: bool = True


@dataclass
class NamedPrecision(str):
    fp8: str | None = None


RECIPES: dict[str, Callable[[], "PrecisionSettings"]] = {}
SHOUTED: dict = {}


def register(func):
    """Store the factory under its own name, and a dashed alias."""
    key = func.__name__
    RECIPES[key] = func
    if "_" in key:
        RECIPES[key.replace("_", "-")] = func
    return func


def register_shouted(func):
    SHOUTED[func.__name__.upper()] = func
    return func


@register
def plain_bf16():
    return PrecisionSettings(bf16=True)


@register
@register_shouted
def bf16_fp8_tensorwise():
    settings = plain_bf16()
    settings.fp8 = "hybrid"
    settings.fp8_param_gather = True
    return settings


OVERRIDDEN: dict = {}


def register_overridden(func):
    OVERRIDDEN[func.__name__] = func
    return func


@register_overridden
def plain_fp16():
    return PrecisionSettings(bf16=False)


OVERRIDDEN["plain_fp16"] = plain_bf16


def settings_for(name):
    if isinstance(name, PrecisionSettings):
        return name
    name = name.replace("-", "_")
    try:
        return RECIPES[name]()
    except KeyError as err:
        raise ValueError(f"unknown precision {name}") from err
'''

RECIPE = '''\
from megatron.bridge.training.precision import OVERRIDDEN, SHOUTED, NamedPrecision, settings_for


def _low_precision(precision_name):
    settings = settings_for(precision_name)
    if precision_name == "bf16-fp8-tensorwise":
        settings.bf16_tail_layers = 2
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.mixed_precision = settings
    return cfg


def fp8_pretrain_config():
    return _low_precision("bf16-fp8-tensorwise")


def bf16_pretrain_config():
    return _low_precision("plain_bf16")


def missing_pretrain_config():
    return _low_precision("bf16_fp4")


def overridden_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.mixed_precision = OVERRIDDEN["plain_fp16"]()
    return cfg


def shouted_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    cfg.mixed_precision = SHOUTED["BF16_FP8_TENSORWISE"]()
    return cfg


def _common(precision="plain_bf16"):
    return ConfigContainer(model=GPTModelProvider(num_layers=8), mixed_precision=precision)


def held_name_pretrain_config():
    cfg = _common()
    cfg.mixed_precision = settings_for(cfg.mixed_precision)
    cfg.mixed_precision.bf16_tail_layers = 3
    return cfg


def held_dashed_name_pretrain_config():
    cfg = _common("bf16-fp8-tensorwise")
    if cfg.mixed_precision.fp8 is None:
        cfg.model.num_layers = 4
    cfg.mixed_precision = settings_for(cfg.mixed_precision)
    if cfg.mixed_precision.fp8 == "hybrid":
        cfg.model.num_layers = 6
    return cfg


def held_unknown_name_pretrain_config():
    cfg = _common("bf16_fp4")
    cfg.mixed_precision = settings_for(cfg.mixed_precision)
    return cfg


def _benchmark_common(cfg):
    if not isinstance(cfg.mixed_precision, str):
        cfg.mixed_precision.grad_reduce_in_fp32 = False
    return cfg


def benchmark_record_pretrain_config():
    cfg = _common()
    cfg.mixed_precision = settings_for("bf16-fp8-tensorwise")
    return _benchmark_common(cfg)


def benchmark_name_pretrain_config():
    cfg = _common()
    cfg.mixed_precision = "plain_bf16"
    _benchmark_common(cfg)
    return cfg


def benchmark_str_subclass_pretrain_config():
    cfg = _common()
    cfg.model.num_layers = 8
    cfg.mixed_precision = NamedPrecision(fp8="hybrid")
    _benchmark_common(cfg)
    return cfg


def held_record_pretrain_config():
    cfg = _common()
    cfg.mixed_precision = settings_for("bf16-fp8-tensorwise")
    held = cfg.mixed_precision
    held.fp8_recipe = "delayed"
    cfg.mixed_precision = settings_for(cfg.mixed_precision)
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    bridge = tmp_path / "src" / "megatron" / "bridge"
    (bridge / "training").mkdir(parents=True)
    (bridge / "recipes").mkdir(parents=True)
    (bridge / "training" / "precision.py").write_text(PRECISION)
    (bridge / "recipes" / "llm.py").write_text(RECIPE)
    return tmp_path


def _precision(recipe: str):
    return load_unit("src/megatron/bridge/recipes/llm.py", recipe, mcore_version="0.20.0").resolved.get(
        "mixed_precision")


def test_a_lookup_by_a_known_name_follows_the_registered_function(tree):
    fields = _precision("fp8_pretrain_config").value.fields
    assert (fields["bf16"], fields["fp8"], fields["fp8_param_gather"], fields["bf16_tail_layers"]) == (
        True, "hybrid", True, 2)
    assert _precision("bf16_pretrain_config").value.fields["fp8"] is None


@pytest.mark.parametrize("recipe", ["missing_pretrain_config", "_low_precision", "shouted_pretrain_config",
                                    "overridden_pretrain_config"])
def test_a_key_offlint_cannot_derive_stays_unknown(tree, recipe):
    """A name nothing registers, a name the helper is given (read on its own), a registry keyed by something
    other than the function's own name, and one the module also writes into: unknown, never absent or a guess."""
    assert _precision(recipe).is_unknown, recipe


def test_a_name_the_config_holds_is_followed_like_a_literal_one(tree):
    """`cfg.mixed_precision = get_mixed_precision_config(cfg.mixed_precision)` (Bridge's nemotron_3_nano) where a
    common builder set the name: the registered recipe is followed, and later writes change its record."""
    fields = _precision("held_name_pretrain_config").value.fields
    assert (fields["bf16"], fields["fp8"], fields["bf16_tail_layers"]) == (True, None, 3)
    fields = _precision("held_dashed_name_pretrain_config").value.fields
    assert (fields["fp8"], fields["fp8_param_gather"]) == ("hybrid", True)


def test_a_field_of_the_record_the_config_holds_is_read(tree):
    """Reading `cfg.mixed_precision.fp8` gives the record's field; a name string has no fields to read."""
    unit = load_unit("src/megatron/bridge/recipes/llm.py", "held_dashed_name_pretrain_config", mcore_version="0.20.0")
    assert unit.resolved.get("model.num_layers").value == 6


def test_a_record_the_config_holds_is_passed_through_with_its_writes(tree):
    """The helper returns a record it is given as is; a write through an alias of the held record is kept."""
    fields = _precision("held_record_pretrain_config").value.fields
    assert (fields["fp8"], fields["fp8_recipe"]) == ("hybrid", "delayed")


def test_a_name_the_config_holds_but_nothing_registers_stays_unknown(tree):
    assert _precision("held_unknown_name_pretrain_config").is_unknown


def test_a_record_of_a_dataclass_that_subclasses_nothing_is_not_a_builtin(tree):
    """`if not isinstance(cfg.mixed_precision, str)` (Bridge's perf `_benchmark_common`): a record of a tree
    dataclass with no base is not a str, a name string is; a dataclass subclassing str leaves it undecided."""
    assert _precision("benchmark_record_pretrain_config").value.fields["grad_reduce_in_fp32"] is False
    assert _precision("benchmark_name_pretrain_config").value == "plain_bf16"
    assert _precision("benchmark_str_subclass_pretrain_config").is_unknown
