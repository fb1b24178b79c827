"""The gradient buffer's dtype: Megatron Bridge's `mixed_precision` (a precision recipe's name or a
MixedPrecisionConfig) copies each of its fields over the DDP config's field of the same name when the run starts
(MixedPrecisionConfig.setup -> update_config_with_precision_overrides, a field left at its default too), so its
`grad_reduce_in_fp32` decides whether the gradients are fp32 main grads or 16-bit; `ddp.grad_reduce_in_fp32`
counts only without one (megatron-core's default False). Fixtures are written here in Bridge's shapes."""

from __future__ import annotations

import pytest

from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from offlint.sources.python_values import Record
from offlint.types import Unknown
from offlint.units import load_unit
from tests.estimate_helpers import lookup

DENSE = {"model.num_layers": 4, "model.hidden_size": 1024, "model.ffn_hidden_size": 4096,
         "model.num_attention_heads": 8, "model.num_query_groups": 8, "model.kv_channels": 128,
         "model.vocab_size": 32000, "model.seq_length": 2048, "model.bf16": True}


def _mixed(**fields) -> Record:
    """A MixedPrecisionConfig(...) as the reader holds it: every field, the class defaults included."""
    defaults = dict(fp32=False, fp16=False, bf16=False, params_dtype=None, grad_reduce_in_fp32=True, fp8=None,
                    fp8_recipe="tensorwise", fp8_param_gather=False, fp4=None, first_last_layers_bf16=False)
    return Record("MixedPrecisionConfig", {**defaults, **fields}, plain=True)


def _inputs(**values):
    return read_inputs(lookup({**DENSE, **values}), "dense_pretrain_config")


def _grads(**values) -> bool:
    inputs = _inputs(**values)
    assert inputs.complete, inputs.unknown
    return inputs.training.grads_fp32


@pytest.mark.parametrize("name, fp32", [
    ("bf16_mixed", True), ("bf16-mixed", True), ("fp16_mixed", False), ("fp16-mixed", False),
    ("bf16_with_fp8_current_scaling_mixed", True), ("fp16_with_fp8_delayed_scaling_mixed", False),
    ("bf16_with_mxfp8_mixed", True), ("fp16_with_mxfp8_mixed", False),
    ("nemotron_h_bf16_with_fp8_current_scaling_mixed", True), ("bf16_with_nvfp4_mixed", True),
])
def test_a_named_precision_recipe_overrides_the_ddp_field(name, fp32):
    for written in (True, False, Unknown("from the command line")):  # ddp's value never counts
        inputs = read_inputs(lookup({**DENSE, "mixed_precision": name, "ddp.grad_reduce_in_fp32": written}),
                             "dense_pretrain_config")
        assert inputs.training.grads_fp32 is fp32
        assert "ddp.grad_reduce_in_fp32" not in inputs.unknown


def test_bf16_mixed_over_a_ddp_written_false_counts_fp32_gradients():
    # Bridge recipes that keep `mixed_precision="bf16_mixed"` and write cfg.ddp.grad_reduce_in_fp32 = False
    named = _inputs(**{"mixed_precision": "bf16_mixed", "ddp.grad_reduce_in_fp32": False})
    plain = _inputs(**{"ddp.grad_reduce_in_fp32": False})
    assert named.training.grads_fp32 and not plain.training.grads_fp32
    assert estimate(named, 8).peak.of("gradients") == pytest.approx(2 * estimate(plain, 8).peak.of("gradients"))


def test_a_record_with_grad_reduce_false_gives_16_bit_gradients_whatever_ddp_says():
    # the Wan recipes: get_mixed_precision_config("bf16_mixed") then .grad_reduce_in_fp32 = False, ddp True
    record = _mixed(bf16=True, grad_reduce_in_fp32=False)
    assert _grads(**{"mixed_precision": record, "ddp.grad_reduce_in_fp32": True}) is False
    fp32 = _inputs(**{"ddp.grad_reduce_in_fp32": True})
    half = _inputs(**{"mixed_precision": record, "ddp.grad_reduce_in_fp32": True})
    assert estimate(half, 8).peak.of("gradients") == pytest.approx(estimate(fp32, 8).peak.of("gradients") / 2)


def test_a_record_left_at_its_default_overrides_too():
    # MixedPrecisionConfig(bf16=True): grad_reduce_in_fp32 keeps its default True and is copied over ddp's False
    assert _grads(**{"mixed_precision": _mixed(bf16=True), "ddp.grad_reduce_in_fp32": False}) is True


def test_an_unreadable_mixed_precision_field_or_name_is_unknown_never_a_default():
    unread = _inputs(**{"mixed_precision": _mixed(bf16=True, grad_reduce_in_fp32=Unknown("args.fp32_grads")),
                        "ddp.grad_reduce_in_fp32": False})
    assert not unread.complete and "args.fp32_grads" in unread.unknown["mixed_precision"]
    missing = _inputs(**{"mixed_precision": Record("MyPrecision", {"bf16": True}), "ddp.grad_reduce_in_fp32": False})
    assert not missing.complete and "grad_reduce_in_fp32" in missing.unknown["mixed_precision"]
    for name in ("bf16_custom_mixed", "my_fp32_recipe"):  # Bridge's get_mixed_precision_config raises on these
        unknown = _inputs(**{"mixed_precision": name})
        assert not unknown.complete and name in unknown.unknown["mixed_precision"]


def test_a_config_class_without_the_field_copies_nothing_over_ddps():
    # a dataclass that subclasses nothing holds all its fields; one without grad_reduce_in_fp32 leaves ddp's
    no_field = Record("MixedPrecisionConfig", {"bf16": True, "fp16": False, "fp8": None}, plain=True)
    assert _grads(**{"mixed_precision": no_field, "ddp.grad_reduce_in_fp32": False}) is False
    assert _grads(**{"mixed_precision": no_field, "ddp.grad_reduce_in_fp32": True}) is True
    odd = _inputs(**{"mixed_precision": _mixed(bf16=True, grad_reduce_in_fp32="yes")})
    assert not odd.complete and "'yes'" in odd.unknown["mixed_precision"]


def test_without_mixed_precision_the_ddp_field_counts_and_its_default_is_false():
    assert _grads(**{"ddp.grad_reduce_in_fp32": True}) is True
    assert _grads(**{"ddp.grad_reduce_in_fp32": False}) is False
    assert _grads() is False  # neither written: megatron-core's DistributedDataParallelConfig default
    assert _grads(mixed_precision=None, **{"ddp.grad_reduce_in_fp32": True}) is True
    unknown = _inputs(**{"ddp.grad_reduce_in_fp32": Unknown("set by the launcher")})
    assert not unknown.complete and "set by the launcher" in unknown.unknown["ddp.grad_reduce_in_fp32"]


def test_fp32_parameters_have_fp32_gradients_without_reading_the_field():
    values = {**DENSE, "model.bf16": False, "ddp.grad_reduce_in_fp32": Unknown("set by the launcher")}
    inputs = read_inputs(lookup(values), "dense_pretrain_config")
    assert inputs.complete and inputs.training.grads_fp32 and inputs.training.params_bytes == 4


PRECISION = '''
from dataclasses import dataclass
from typing import Callable, Optional

RECIPES: dict[str, Callable[[], "MixedPrecisionConfig"]] = {}


@dataclass(kw_only=True)
class MixedPrecisionConfig:
    fp16: bool = False
    bf16: bool = False
    params_dtype: Optional[str] = None
    grad_reduce_in_fp32: bool = True
    fp8: Optional[str] = None


def register(func):
    RECIPES[func.__name__] = func
    return func


@register
def bf16_mixed() -> MixedPrecisionConfig:
    return MixedPrecisionConfig(bf16=True, params_dtype="bf16", grad_reduce_in_fp32=True)


def get_mixed_precision_config(name):
    if isinstance(name, MixedPrecisionConfig):
        return name
    return RECIPES[name.replace("-", "_")]()
'''

RECIPE = '''
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, TrainingConfig
from megatron.bridge.training.mixed_precision import bf16_mixed, get_mixed_precision_config
from megatron.bridge.models import GPTModelProvider


def _model():
    return GPTModelProvider(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                            num_query_groups=8, kv_channels=128, vocab_size=32000, seq_length=2048)


def video_pretrain_config() -> ConfigContainer:
    precision = get_mixed_precision_config("bf16_mixed")
    precision.grad_reduce_in_fp32 = False
    return ConfigContainer(model=_model(), train=TrainingConfig(micro_batch_size=1, global_batch_size=8),
                           ddp=DistributedDataParallelConfig(grad_reduce_in_fp32=True, use_distributed_optimizer=True),
                           mixed_precision=precision)


def text_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=_model(), train=TrainingConfig(micro_batch_size=1, global_batch_size=8),
                          ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
    cfg.mixed_precision = "bf16_mixed"
    cfg.ddp.grad_reduce_in_fp32 = False
    return cfg


def record_pretrain_config() -> ConfigContainer:
    cfg = text_pretrain_config()
    cfg.mixed_precision = bf16_mixed()
    cfg.mixed_precision.grad_reduce_in_fp32 = False
    cfg.ddp.grad_reduce_in_fp32 = True
    return cfg
'''


@pytest.mark.parametrize("unit, fp32", [("video_pretrain_config", False), ("text_pretrain_config", True),
                                        ("record_pretrain_config", False)])
def test_recipes_in_bridges_shapes(tmp_path, monkeypatch, unit, fp32):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    training = tmp_path / "src" / "megatron" / "bridge" / "training"
    training.mkdir(parents=True)
    (training / "mixed_precision.py").write_text(PRECISION)
    recipes = tmp_path / "src" / "megatron" / "bridge" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / "video.py").write_text(RECIPE)
    resolved = load_unit("src/megatron/bridge/recipes/video.py", unit, mcore_version="0.20.0").resolved
    inputs = read_inputs(resolved.get, unit)
    assert inputs.training.params_bytes == 2
    assert inputs.training.grads_fp32 is fp32, inputs.unknown
    assert "mixed_precision" not in inputs.unknown and "ddp.grad_reduce_in_fp32" not in inputs.unknown
