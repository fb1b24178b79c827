"""A Megatron Bridge provider's finalize(), read from the linted tree and run over the resolved unit after every
override (sources/bridge_finalize.py, resolve._finalize): Bridge runs cfg.model.finalize() when the run starts, and
Qwen3VLMoEModelProvider turns sequence parallelism on whenever TP > 1, over a recipe that set it False (Bridge
067f987 qwen_vl/qwen3_vl_provider.py:302-307). Unread, the memory estimate of qwen3_vl_235b_a22b_finetune_config at
b97eb72f5 was 98.05 GiB where it is 74.31 GiB with sequence parallelism: a false OFL303. Fixtures of our own, in
the shapes Bridge writes."""

from __future__ import annotations

import pytest

from offlint.sources import bridge_finalize
from offlint.types import Unknown
from offlint.units import load_unit
from tests.check_helpers import check_json

BASE = '''
from dataclasses import dataclass

from megatron.core.transformer.transformer_config import TransformerConfig as MCoreTransformerConfig


def _resolve_string_fields(config):
    config.anything = 1  # a helper offlint does not follow


@dataclass
class TransformerConfig(MCoreTransformerConfig):
    def finalize(self) -> None:
        _resolve_string_fields(self)
        if self.pipeline_model_parallel_size > 1 and self.pipeline_dtype is None:
            self.pipeline_dtype = self.params_dtype
        if self.sequence_parallel and self.tensor_model_parallel_size <= 1:
            self.sequence_parallel = False
        MCoreTransformerConfig.__post_init__(self)
        if getattr(self, "_enable_in_batch_packing", False) and self.pipeline_model_parallel_size > 1:
            self.variable_seq_lengths = True
'''
PROVIDERS = '''
import os
from dataclasses import dataclass

from pkg.base import TransformerConfig


@dataclass
class VLProvider(TransformerConfig):
    vision_layers: int = 2

    def finalize(self) -> None:
        if (self.context_parallel_size or 1) > 1:
            self.calculate_per_token_loss = True
        if self.tensor_model_parallel_size > 1:
            self.sequence_parallel = True
        super().finalize()


@dataclass
class EarlyProvider(TransformerConfig):
    def finalize(self) -> None:
        pp = self.pipeline_model_parallel_size or 1
        if pp > 1 and self.num_layers % pp != 0:
            self.account_for_embedding_in_pipeline_split = True
            return
        self.moe_router_topk = int(os.environ["TOPK"])
        self.kv_channels = self.hidden_size
        super().finalize()


@dataclass
class QuietProvider(TransformerConfig):
    pass
'''
RECIPES = '''
import os

from megatron.bridge.training.config import ConfigContainer

from pkg.providers import EarlyProvider, QuietProvider, VLProvider


def vl_config():
    cfg = ConfigContainer(model=VLProvider(tensor_model_parallel_size=4, sequence_parallel=False))
    return cfg


def vl_one_gpu_config():
    cfg = ConfigContainer(model=VLProvider(tensor_model_parallel_size=1, sequence_parallel=True,
                                           context_parallel_size=2))
    return cfg


def vl_unknown_tp_config():
    cfg = ConfigContainer(model=VLProvider(tensor_model_parallel_size=int(os.environ["TP"])))
    return cfg


def pipelined_config():
    cfg = ConfigContainer(model=QuietProvider(pipeline_model_parallel_size=2, num_layers=8),
                          mixed_precision="bf16_mixed")
    return cfg


def unknown_precision_config():
    cfg = ConfigContainer(model=VLProvider(tensor_model_parallel_size=4, sequence_parallel=False,
                                           pipeline_model_parallel_size=2), mixed_precision=os.environ["PRECISION"])
    return cfg


def uneven_config():
    cfg = ConfigContainer(model=EarlyProvider(pipeline_model_parallel_size=3, num_layers=8))
    return cfg


def even_config():
    cfg = ConfigContainer(model=EarlyProvider(pipeline_model_parallel_size=2, num_layers=8,
                                              hidden_size=int(os.environ["HIDDEN"])))
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    for name, text in (("__init__", ""), ("base", BASE), ("providers", PROVIDERS), ("recipes", RECIPES)):
        (tmp_path / "pkg" / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _value(recipe: str, key: str, overrides: tuple = ()):
    return load_unit("pkg/recipes.py", recipe, overrides, mcore_version="0.20.0").resolved.get(key)


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_providers_finalize_turns_sequence_parallelism_on_over_the_recipe(tree):
    value = _value("vl_config", "model.sequence_parallel")
    assert (value.state, value.value) == ("known", True)
    where = value.assignment.location  # the recipe's own assignment: a finding stays in the files of the run
    assert (where.path.endswith("pkg/recipes.py"), where.line) == (True, _line(RECIPES, "sequence_parallel=False"))
    line = _line(PROVIDERS, "sequence_parallel = True")
    assert value.assignment.via[-1] == f"by VLProvider.finalize() at pkg/providers.py:{line} when the run starts"


def test_super_finalize_runs_the_base_after_the_provider(tree):
    value = _value("vl_one_gpu_config", "model.sequence_parallel")  # the base turns it off at TP 1
    assert (value.state, value.value) == ("known", False)
    assert "TransformerConfig.finalize() at pkg/base.py:" in value.assignment.via[-1]
    assert _value("vl_one_gpu_config", "model.calculate_per_token_loss").value is True  # CP 2
    # an override on the command line is layered first, then finalize runs
    value = _value("vl_one_gpu_config", "model.sequence_parallel", ("model.tensor_model_parallel_size=2",))
    assert (value.state, value.value) == ("known", True)


def test_a_branch_on_an_unknown_value_leaves_what_it_writes_unknown(tree):
    value = _value("vl_unknown_tp_config", "model.sequence_parallel")
    assert value.state == "unknown" and "finalize) may change it: offlint cannot tell whether" in value.value.reason


def test_the_precision_recipe_is_applied_before_finalize(tree):
    value = _value("pipelined_config", "model.pipeline_dtype")  # bf16_mixed's params_dtype, copied at PP 2
    assert (value.state, value.value) == ("known", "torch.bfloat16")
    # a private attribute ConfigContainer.validate may set is not known: what it decides is unknown
    assert _value("pipelined_config", "model.variable_seq_lengths").state == "unknown"


def test_a_precision_recipe_offlint_cannot_read_leaves_only_precision_fields_unknown(tree):
    assert _value("unknown_precision_config", "model.sequence_parallel").value is True  # TP alone decides it
    assert _value("unknown_precision_config", "model.pipeline_dtype").state == "unknown"  # params_dtype: the recipe's


def test_an_early_return_ends_the_method_on_its_path(tree):
    assert _value("uneven_config", "model.account_for_embedding_in_pipeline_split").value is True
    assert _value("uneven_config", "model.moe_router_topk").state != "unknown"  # not reached
    assert _value("even_config", "model.account_for_embedding_in_pipeline_split").value is not True
    # a value of code the program does not read (a helper's result) is left out: the field keeps the unit's value
    assert _value("even_config", "model.moe_router_topk").state == "default"
    # a value it reads from a field offlint does not know is unknown
    kv = _value("even_config", "model.kv_channels")
    assert kv.state == "unknown" and "`self.hidden_size`, which depends on values offlint does not know" in kv.value.reason


def test_the_program_is_plain_data(tree):
    from offlint.sources.python_project import PythonProject

    paths = ["pkg/__init__.py", "pkg/base.py", "pkg/providers.py", "pkg/recipes.py"]
    project = PythonProject(paths, lambda path: (tree / path).read_text())
    program = bridge_finalize.program(project, "pkg/providers.py", "VLProvider")
    assert isinstance(program, tuple) and [step[0] for step in program] == ["defaults", "if", "if", "if", "if", "if"]
    assert program[0] == ("defaults", ())  # it reads no field of the provider's own with a literal default
    assert bridge_finalize.program(project, "pkg/providers.py", "Nowhere").__class__ is Unknown

    def plain(value) -> bool:
        return value is None or isinstance(value, (bool, int, float, str)) or (
            isinstance(value, tuple) and all(plain(v) for v in value))

    assert plain(program)


def test_a_field_the_unit_does_not_set_reads_as_the_providers_literal_default():
    # HybridModelProvider built from a Hugging Face config: hybrid_override_pattern is the provider's, default None
    steps = (("defaults", (("override", None),)),
             ("if", ("cmp", "is not", ("self", "override"), ("lit", None)),
              (("set", "pattern", ("self", "override"), "p.py:3 (C.finalize)", "self.override"),), (),
              "p.py:2 (C.finalize)", "self.override is not None"))
    values = {"pattern": "M*M*", "override": bridge_finalize.NOT_SET}
    assert bridge_finalize.run(steps, values.__getitem__) == {}
    values["override"] = "MM**"  # set by the unit
    assert bridge_finalize.run(steps, values.__getitem__) == {"pattern": ("MM**", "p.py:3 (C.finalize)",
                                                                           "self.override")}
    no_default = (("defaults", ()), *steps[1:])
    values["override"] = bridge_finalize.NOT_SET
    assert isinstance(bridge_finalize.run(no_default, values.__getitem__)["pattern"][0], Unknown)


def test_run_decides_and_or_as_python_does():
    steps = (("if", ("and", ("self", "a"), ("self", "b")), (("set", "x", ("lit", 1), "p.py:1 (C.finalize)", "1"),),
              (), "p.py:1 (C.finalize)", "self.a and self.b"),
             ("if", ("or", ("self", "a"), ("self", "c")), (("set", "y", ("lit", 2), "p.py:2 (C.finalize)", "2"),),
              (), "p.py:2 (C.finalize)", "self.a or self.c"))
    values = {"a": Unknown("?"), "b": 0, "c": 3, "x": 0, "y": 0}
    written = bridge_finalize.run(steps, values.__getitem__)
    assert "x" not in written  # `unknown and 0` is falsy whatever the unknown is
    assert written["y"][0] == 2  # `unknown or 3` is truthy


def test_an_edit_of_the_providers_finalize_is_seen_through_the_cache(tree):
    (tree / "pkg" / "recipes.py").write_text(RECIPES + '''

def big_config():
    cfg = ConfigContainer(model=VLProvider(tensor_model_parallel_size=8, sequence_parallel=False, num_layers=32,
                                           hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                                           seq_length=16384, vocab_size=32000, make_vocab_size_divisible_by=128),
                          mixed_precision="bf16_mixed")
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 64
    return cfg
''')
    # 73.6 GiB with sequence parallelism, 110.9 GiB without, on 78.6 GiB usable
    assert "big_config" not in {f["unit"] for f in check_json(tree) if f["code"] == "OFL303"}
    providers = tree / "pkg" / "providers.py"
    providers.write_text(PROVIDERS.replace("            self.sequence_parallel = True\n", "            pass\n"))
    assert "big_config" in {f["unit"] for f in check_json(tree) if f["code"] == "OFL303"}
