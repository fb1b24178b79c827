"""A `mixed_precision` name ("bf16_mixed") is applied as the linted tree's own training/mixed_precision.py builds
it (sources/bridge_precision.py: its get_mixed_precision_config run by offlint's reader, never imported), the
same record a call of the recipe function gives; offlint's table of Megatron Bridge 067f987's recipes
(named_precision.FALLBACK) only where the tree has no such module. Fixtures are written here: their precision
module deliberately gives the names other values than that release does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.api import CheckOptions, check
from offlint.cache_format import VALUE_CLASSES, Codec
from offlint.cli import main
from offlint.estimate.inputs import read_inputs
from offlint.named_precision import FALLBACK, configured
from offlint.units import load_unit

# Unlike Bridge 067f987: bf16_mixed reduces gradients in bf16, the current-scaling recipe keeps 3 + 2 layers in
# bf16 (not 1 + 1), and the delayed-scaling name builds MXFP8 (which Hopper cannot run).
PRECISION = '''
from dataclasses import dataclass
from typing import Optional

MIXED_PRECISION_RECIPES = {}


@dataclass(kw_only=True)
class MixedPrecisionConfig:
    fp16: bool = False
    bf16: bool = False
    grad_reduce_in_fp32: bool = True
    fp8: Optional[str] = None
    fp8_recipe: str = "tensorwise"
    fp8_param_gather: bool = False
    first_last_layers_bf16: bool = False
    num_layers_at_start_in_bf16: int = 0
    num_layers_at_end_in_bf16: int = 0


def register(func):
    MIXED_PRECISION_RECIPES[func.__name__] = func
    MIXED_PRECISION_RECIPES[func.__name__.replace("_", "-")] = func
    return func


@register
def bf16_mixed():
    return MixedPrecisionConfig(bf16=True, grad_reduce_in_fp32=False)


@register
def fp16_mixed():
    return MixedPrecisionConfig(fp16=True, grad_reduce_in_fp32=True)


@register
def bf16_with_fp8_current_scaling_mixed():
    cfg = bf16_mixed()
    cfg.fp8 = "hybrid"
    cfg.fp8_recipe = "tensorwise"
    cfg.fp8_param_gather = True
    cfg.first_last_layers_bf16 = True
    cfg.num_layers_at_start_in_bf16 = 3
    cfg.num_layers_at_end_in_bf16 = 2
    return cfg


@register
def bf16_with_fp8_delayed_scaling_mixed():
    cfg = bf16_mixed()
    cfg.fp8 = "e4m3"
    cfg.fp8_recipe = "mxfp8"
    return cfg


def get_mixed_precision_config(name):
    if isinstance(name, MixedPrecisionConfig):
        return name
    try:
        return MIXED_PRECISION_RECIPES[name.replace("-", "_")]()
    except KeyError as err:
        raise ValueError(f"no recipe {name}") from err
'''

RECIPES = '''
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, TrainingConfig
from megatron.bridge.training.mixed_precision import bf16_mixed, bf16_with_fp8_current_scaling_mixed


def _base():
    model = GPTModelProvider(num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                             num_query_groups=8, kv_channels=128, vocab_size=32000, seq_length=2048)
    return ConfigContainer(model=model, train=TrainingConfig(micro_batch_size=1, global_batch_size=8),
                           ddp=DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True))


def _precision(compute_dtype):
    if compute_dtype == "bf16":
        cfg = bf16_mixed()
    elif compute_dtype == "fp8_cs":
        cfg = bf16_with_fp8_current_scaling_mixed()
    else:
        raise ValueError(compute_dtype)
    return cfg


def named_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = "bf16_mixed"
    return cfg


def hyphen_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = "bf16-mixed"
    return cfg


def called_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = bf16_mixed()
    return cfg


def helper_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = _precision("bf16")
    return cfg


def fp8_named_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = "bf16_with_fp8_current_scaling_mixed"
    return cfg


def fp8_called_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = bf16_with_fp8_current_scaling_mixed()
    return cfg


def fp8_helper_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = _precision("fp8_cs")
    cfg.model.num_layers = 8  # (a function whose text names no key offlint reads is no unit: worth_parsing)
    return cfg


def unregistered_pretrain_config():
    cfg = _base()
    cfg.mixed_precision = "bf16_with_magic_mixed"
    return cfg


def delayed_pretrain_8gpu_h100_config():
    cfg = _base()
    cfg.mixed_precision = "bf16_with_fp8_delayed_scaling_mixed"
    return cfg
'''

MODULE = "src/megatron/bridge/training/mixed_precision.py"
RECIPE_FILE = "src/megatron/bridge/recipes/mine.py"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    for path, text in ((MODULE, PRECISION), (RECIPE_FILE, RECIPES)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def _resolved(unit: str, overrides=()):
    return load_unit(RECIPE_FILE, unit, overrides, mcore_version="0.20.0").resolved


def _training(unit: str, overrides=()):
    inputs = read_inputs(_resolved(unit, overrides).get, unit)
    assert inputs.complete, inputs.unknown
    return inputs.training


@pytest.mark.parametrize("unit", ["named_pretrain_config", "hyphen_pretrain_config", "called_pretrain_config",
                                  "helper_pretrain_config"])
def test_a_name_a_call_and_a_helper_give_the_tree_s_values(tree, unit):
    # the tree's bf16_mixed reduces in bf16; offlint's table (Bridge 067f987) says fp32: the tree's counts
    assert FALLBACK["bf16_mixed"]["grad_reduce_in_fp32"] is True
    training = _training(unit)
    assert training.params_bytes == 2 and training.grads_fp32 is False


@pytest.mark.parametrize("unit", ["fp8_named_pretrain_config", "fp8_called_pretrain_config",
                                  "fp8_helper_pretrain_config"])
def test_an_fp8_recipe_s_bf16_layers_are_the_tree_s(tree, unit):
    low = _training(unit).low_precision
    assert (low.recipe, low.params, low.bf16_layers_start, low.bf16_layers_end) == ("tensorwise", True, 3, 2)


def test_the_estimate_says_which_was_used(tree):
    _, where = configured(_resolved("named_pretrain_config").get)
    assert where == f"mixed_precision='bf16_mixed' as {MODULE}'s get_mixed_precision_config() builds it"
    assert configured(_resolved("called_pretrain_config").get)[1] == ""  # a record the recipe built: nothing to say
    shown = CliRunner().invoke(main, ["estimate", RECIPE_FILE, "--recipe", "named_pretrain_config",
                                      "--mcore-version", "0.20.0", "--gpus", "8"])
    assert shown.exit_code == 0, shown.output
    assert f"note: mixed_precision='bf16_mixed' as {MODULE}'s get_mixed_precision_config() builds it" in shown.output


def test_an_override_s_name_is_the_tree_s_too(tree):
    training = _training("called_pretrain_config", ["mixed_precision=fp16_mixed"])
    assert training.grads_fp32 is True  # the tree's fp16_mixed reduces in fp32; Bridge 067f987's does not
    assert FALLBACK["fp16_mixed"]["grad_reduce_in_fp32"] is False


def test_a_name_the_tree_does_not_register_is_unknown(tree):
    inputs = read_inputs(_resolved("unregistered_pretrain_config").get, "unregistered_pretrain_config")
    assert not inputs.complete
    assert "'bf16_with_magic_mixed'" in inputs.unknown["mixed_precision"]
    assert MODULE in inputs.unknown["mixed_precision"]


def test_without_the_module_offlint_s_table_applies_and_the_estimate_says_so(tree):
    (tree / MODULE).unlink()
    training = _training("named_pretrain_config")
    assert training.grads_fp32 is True  # Bridge 067f987's bf16_mixed
    low = _training("fp8_named_pretrain_config").low_precision
    assert (low.bf16_layers_start, low.bf16_layers_end) == (1, 1)
    where = configured(_resolved("named_pretrain_config").get)[1]
    assert "offlint's table of Megatron Bridge 067f987's precision recipes" in where
    assert "the tree has no training/mixed_precision.py" in where
    unknown = read_inputs(_resolved("unregistered_pretrain_config").get, "unregistered_pretrain_config")
    assert "bf16_with_magic_mixed" in unknown.unknown["mixed_precision"]


def _ofl117(root: Path, paths, cache: bool = False):
    result = check(paths, CheckOptions(select=["OFL117"], mcore_version="0.20.0", root=root, cache=cache,
                                       workers=1))
    assert not result.errors, result.errors
    return [f for f in result.findings if f.unit == "delayed_pretrain_8gpu_h100_config"]


def test_ofl117_reads_the_tree_s_recipe(tree):
    # the tree's delayed-scaling name builds MXFP8, which an H100 cannot run; Bridge 067f987's is delayed scaling
    found = _ofl117(tree, ["."])
    assert len(found) == 1 and "mixed_precision='bf16_with_fp8_delayed_scaling_mixed'" in found[0].message
    (tree / MODULE).unlink()
    assert _ofl117(tree, ["."]) == []


def test_an_edit_of_the_tree_s_recipe_reaches_a_cached_run(tree):
    assert len(_ofl117(tree, ["."], cache=True)) == 1
    assert len(_ofl117(tree, ["."], cache=True)) == 1  # from the cache
    (tree / MODULE).write_text(PRECISION.replace('cfg.fp8_recipe = "mxfp8"', 'cfg.fp8_recipe = "delayed"'))
    assert _ofl117(tree, [MODULE], cache=True) == _ofl117(tree, [MODULE]) == []  # a pre-commit run of the edit
    assert _ofl117(tree, ["."], cache=True) == []


def test_a_launch_command_s_name_and_the_recipe_it_runs(tree):
    # `run_recipe.py --recipe X mixed_precision=NAME`: the name the command gives, as the tree builds it
    (tree / "launch.sh").write_text("python scripts/training/run_recipe.py --recipe called_pretrain_config "
                                    "mixed_precision=bf16_with_fp8_delayed_scaling_mixed\n")
    loaded = load_unit("launch.sh", mcore_version="0.20.0")
    built = configured(loaded.resolved.get)[0]
    assert built.value.fields["fp8_recipe"] == "mxfp8"
    shutil.copy(tree / "launch.sh", tree / "again.sh")
    loaded = load_unit("again.sh", mcore_version="0.20.0", overrides=["mixed_precision=bf16_mixed"])
    assert configured(loaded.resolved.get)[0].value.fields["grad_reduce_in_fp32"] is False


def test_the_records_a_unit_holds_survive_the_cache_s_format(tree):
    unit = load_unit(RECIPE_FILE, "named_pretrain_config", mcore_version="0.20.0").resolved.unit
    codec = Codec(VALUE_CLASSES)
    again = codec.loads(codec.dumps(unit))
    assert again.precision_file == MODULE
    assert again.precision_recipes == unit.precision_recipes
    assert again.precision_recipes["bf16_mixed"].fields["grad_reduce_in_fp32"] is False
