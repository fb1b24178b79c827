"""A key no megatron-core release has is real when the linted tree's own config dataclass defines it: Megatron
Bridge's FluxProvider has `in_channels` (f565adb82's Flux override YAML sets it), one letter from `kv_channels`, and
OFL003 called it a typo with a rename to `kv_channels`. The tree's provider and config classes are read for their
fields (sources/tree_config_fields.py) and OFL003 leaves alone the keys they define or may mean (tree_keys.py).
Fixtures of our own, in the shapes Bridge writes; their provider's field is `kw_channels`, a name Bridge does not
have, since Bridge's own provider fields are known to offlint whatever the tree holds (data/bridge-provider-fields.json:
a recipe repository that imports Bridge writes them too)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offlint.sources.tree_config_fields import fields_by_section
from tests.check_helpers import check_json

PROVIDERS = '''
import abc
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from megatron.core.distributed import DistributedDataParallelConfig as MCoreDistributedDataParallelConfig
from megatron.core.transformer.transformer_config import TransformerConfig

ModelT = TypeVar("ModelT")


class ModelProviderMixin(abc.ABC, Generic[ModelT]):
    mixin_note: str = ""  # not a dataclass: its annotations are no fields


@dataclass
class ImageProvider(TransformerConfig, ModelProviderMixin[object]):
    kw_channels: int = 64
    num_layer: ClassVar[int] = 0  # a ClassVar is no field
    "a docstring-like string"


@dataclass
class BigImageProvider(
    ImageProvider,
):
    latent_channels: int = 16


class NotADataclass(TransformerConfig):
    hidden_sizes: int = 4


@dataclass
class DistributedDataParallelConfig(MCoreDistributedDataParallelConfig):
    param_name_patterns_for_fp32_local_accumulation: tuple = ()


@dataclass
class Unrelated:
    kw_channelz: int = 0
'''

OVERRIDE = '''
model:
  kw_channels: 64
  kn_channels: 64
  latent_channels: 8
  kv_chanels: 128
  num_layer: 2
  hidden_sizes: 4
  tensor_model_paralel_size: 2
ddp:
  param_name_patterns_for_fp32_local_accumulation: ["all"]
'''


def test_the_fields_of_the_trees_config_dataclasses_by_section():
    tree = fields_by_section([("pkg/providers.py", PROVIDERS), ("pkg/broken.py", "@dataclass\nclass X(Y:\n"),
                              ("pkg/none.py", None)])
    assert tree["model"] == {"kw_channels", "latent_channels"}  # num_layer: a ClassVar; NotADataclass's: none
    assert tree["ddp"] == {"param_name_patterns_for_fp32_local_accumulation"}
    assert "optimizer" not in tree
    assert "kw_channelz" not in set().union(*tree.values())  # a dataclass of no config section


def test_a_base_followed_through_the_tree_by_name_gives_the_section():
    text = ("from dataclasses import dataclass\n@dataclass\nclass Base(MCoreOptimizerConfig):\n    a: int = 0\n"
            "@dataclass\nclass Derived(Base):\n    b: int = 0\n@dataclass\nclass Loop(Loop2):\n    c: int = 0\n"
            "@dataclass\nclass Loop2(Loop):\n    d: int = 0\n")
    assert fields_by_section([("opt.py", text)]) == {"optimizer": {"a", "b"}}  # a cycle of bases ends


def test_a_dataclass_base_in_another_file_gives_its_fields():
    mixin = "from dataclasses import dataclass\n@dataclass\nclass VisionFields(object):\n    image_size: int = 0\n"
    provider = ("from dataclasses import dataclass\nfrom .mixin import VisionFields\n@dataclass\n"
                "class VLProvider(GPTModelProvider, VisionFields):\n    vision_layers: int = 0\n")
    other = "from dataclasses import dataclass\n@dataclass\nclass Data(object):\n    image_sizes: int = 0\n"
    assert fields_by_section([("mixin.py", mixin), ("provider.py", provider), ("other.py", other)]) == {
        "model": {"image_size", "vision_layers"}}


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "providers.py").write_text(PROVIDERS)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "override.yaml").write_text(OVERRIDE)
    return tmp_path


def _unknown_keys(found: list[dict]) -> dict[int, str]:
    return {f["location"]["row"] if "row" in f["location"] else f["location"]["line"]: f["message"].split(";")[0]
            for f in found if f["code"] == "OFL003"}


EXPECTED = {
    6: "model.kv_chanels is not a config field",  # kv_channels is nearer than any field of the tree's
    7: "model.num_layer is not a config field",  # a ClassVar of the provider is no field
    8: "model.hidden_sizes is not a config field",  # a class that is not a dataclass has no fields
    9: "model.tensor_model_paralel_size is not a config field",
}


@pytest.mark.parametrize("cache", [False, True])
def test_keys_the_trees_own_classes_define_or_may_mean_are_left_alone(tree, cache):
    args = () if cache else ("--no-cache",)
    assert _unknown_keys(check_json(tree, *args)) == EXPECTED
    if cache:  # answered from the cache: the same
        assert _unknown_keys(check_json(tree, *args)) == EXPECTED


def test_a_pre_commit_run_on_the_yaml_file_reads_the_tree(tree):
    check_json(tree)  # the cache filled
    assert _unknown_keys(check_json(tree, paths=("conf/override.yaml",))) == EXPECTED


def test_a_field_removed_from_the_provider_is_unknown_again(tree):
    assert 3 not in _unknown_keys(check_json(tree))
    provider = tree / "pkg" / "providers.py"
    provider.write_text(PROVIDERS.replace("    kw_channels: int = 64\n", ""))
    found = _unknown_keys(check_json(tree, paths=("conf/override.yaml",)))
    assert found[3] == "model.kw_channels is not a config field" and found[4] == "model.kn_channels is not a config field"
    assert _unknown_keys(check_json(tree)) == found


def test_the_unsafe_rename_is_not_offered_for_a_field_of_the_tree(tree):
    override = tree / "conf" / "override.yaml"
    override.write_text("model:\n  kw_channels: 64\n  tensor_model_paralel_size: 2\n")
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--mcore-version", "0.20.0", "--fix",
                           "--unsafe-fixes", "--no-cache"], cwd=tree, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    assert override.read_text() == "model:\n  kw_channels: 64\n  tensor_model_parallel_size: 2\n"
