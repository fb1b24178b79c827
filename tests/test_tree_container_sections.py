"""A key of a ConfigContainer section other than model, optimizer and ddp (train, checkpoint, dist, ...) is judged
against the linted tree's own class for that section (tree_config_fields.container_sections, tree_keys): a Bridge
fork's launcher wrote `dist.tensor_model_parallel_size=2 dist.pipeline_model_parallel_size=2`, which Bridge's
struct-mode Hydra parser refuses at launch ("Could not override 'dist.tensor_model_parallel_size'"); OFL003 judged
only megatron-core's sections. A section is judged only where its class, and every class it derives from, is in
the tree: one class (not Optional, not a union), found through the defining module's classes and imports (Bridge's
classes derive from Megatron-LM's `megatron/training/config.py`, in a checkout's 3rdparty/Megatron-LM). Fixtures of
our own, in the shapes Bridge writes."""

from __future__ import annotations

import pytest

from offlint.sources.tree_config_fields import container_sections
from tests.check_helpers import check_json, write_tree

CONFIG = '''
from dataclasses import dataclass, field
from typing import Optional

from megatron.core.optimizer import OptimizerConfig
from megatron.training.config import LoggerConfig as MTrainLoggerConfig
from megatron.training.config import SchedulerConfig as MTrainSchedulerConfig

from megatron.bridge.training.ft import FaultToleranceConfig
from megatron.bridge.training.tokenizers.config import TokenizerConfig


@dataclass(kw_only=True)
class DistributedInitConfig:
    distributed_backend: str = "nccl"
    lazy_init: bool = False


@dataclass
class _Exits:
    exit_interval: Optional[int] = None


@dataclass(kw_only=True)
class TrainingConfig(_Exits):
    train_iters: Optional[int] = None
    micro_batch_size: int = 1


@dataclass(kw_only=True)
class LoggerConfig(MTrainLoggerConfig):
    wandb_project: str = ""


@dataclass(kw_only=True)
class SchedulerConfig(MTrainSchedulerConfig):
    lr_warmup_iters: int = 0


@dataclass
class ConfigContainer:
    train: TrainingConfig
    model: object
    optimizer: OptimizerConfig
    scheduler: SchedulerConfig
    logger: LoggerConfig
    tokenizer: TokenizerConfig
    dist: DistributedInitConfig = field(default_factory=DistributedInitConfig)
    ft: Optional[FaultToleranceConfig] = None
    dataset: "GPTDatasetConfig | FinetuningDatasetConfig" = None
'''
MEGATRON_LM_CONFIG = '''
from dataclasses import dataclass


@dataclass(kw_only=True)
class LoggerConfig:
    log_interval: int = 100


class SchedulerConfig(object):  # not a dataclass here: its fields are not known
    lr_decay_style: str = "linear"
'''
TOKENIZER = '''
from dataclasses import dataclass


@dataclass
class TokenizerConfig(SomeoneElsesTokenizerConfig):
    tokenizer_type: str = ""
'''
LAUNCH = """#!/bin/bash
torchrun --nproc_per_node=8 scripts/training/run_recipe.py --recipe llama_config \\
    train.train_iters=10 train.exit_interval=5 dist.tensor_model_parallel_size=2 +train.no_such_key=1 \\
    logger.log_intervall=5 logger.wandb_project=x scheduler.anything=1 ft.whatever=1 tokenizer.anything=1 \\
    dist.lazy_init=true model.num_layers=4
"""
TREE = {
    "src/megatron/bridge/training/config.py": CONFIG,
    "src/megatron/bridge/training/tokenizers/config.py": TOKENIZER,
    "3rdparty/Megatron-LM/megatron/training/config.py": MEGATRON_LM_CONFIG,
    "launch.sh": LAUNCH,
}


def _texts(files: dict[str, str]) -> list[tuple[str, str]]:
    return [(path, text) for path, text in files.items() if path.endswith(".py")]


def test_the_sections_whose_every_field_the_tree_gives():
    sections = container_sections(_texts(TREE))
    assert {name: (s.cls, s.path, s.fields) for name, s in sections.items()} == {
        "dist": ("DistributedInitConfig", "src/megatron/bridge/training/config.py", {"distributed_backend", "lazy_init"}),
        "train": ("TrainingConfig", "src/megatron/bridge/training/config.py",
                  {"train_iters", "micro_batch_size", "exit_interval"}),  # and its dataclass base's
        # through `from megatron.training.config import LoggerConfig as MTrainLoggerConfig`, in 3rdparty
        "logger": ("LoggerConfig", "src/megatron/bridge/training/config.py", {"wandb_project", "log_interval"}),
    }  # scheduler: a base that is no dataclass; tokenizer: a base outside the tree; ft: Optional; dataset: a union
    assert sections["dist"].line == 14


def test_no_sections_without_one_config_container():
    assert container_sections(_texts({"a.py": "class Other:\n    pass\n"})) == {}
    twice = {"a/config.py": CONFIG, "b/config.py": CONFIG}
    assert container_sections(_texts(twice)) == {}  # two trees side by side: which one a launch runs is not known
    outside = {path: text for path, text in TREE.items() if not path.startswith("3rdparty/")}
    assert set(container_sections(_texts(outside))) == {"dist", "train"}  # Megatron-LM's file is not in the tree
    twice = {"a/src/megatron/bridge/training/config.py": CONFIG, "b/src/megatron/bridge/training/config.py": CONFIG}
    assert container_sections(_texts(twice)) == {}


def test_a_stand_in_container_outside_bridges_module_is_no_schema():
    """NVIDIA-NeMo/Nemotron's forks keep `kit/megatron_stub.py`, a ConfigContainer of a few fields for running their
    CLI without Bridge (nothing imports it); their YAML files are applied to Bridge's own container by
    `apply_overrides`, and OFL003 had reported 95 real checkpoint keys as not in the stub's CheckpointConfig. Only
    Bridge's module (megatron/bridge/training/config.py, in a Bridge checkout or a vendored one) is the schema."""
    stub = CONFIG.replace("class ConfigContainer:", "class ConfigContainer:  # a stand-in")
    assert container_sections(_texts({"src/nemotron/kit/megatron_stub.py": stub})) == {}
    vendored = {"3rdparty/Megatron-Bridge/" + path: text for path, text in TREE.items()}
    assert set(container_sections(_texts(vendored))) == {"dist", "train", "logger"}


def _unknown(found: list[dict]) -> list[tuple[str, int, str, str]]:
    return sorted((f["filename"], f["location"]["row"], f["severity"] if "severity" in f else "", f["message"])
                  for f in found if f["code"] == "OFL003")


@pytest.fixture
def tree(tmp_path):
    write_tree(tmp_path, {"pyproject.toml": "", **TREE})
    return tmp_path


def test_a_key_its_section_lacks_is_reported(tree):
    found = {(f["filename"], f["message"].split(":")[0]): f for f in check_json(tree, "--no-cache")
             if f["code"] == "OFL003"}
    assert sorted(found) == [
        ("launch.sh", "dist.tensor_model_parallel_size is not a field of dist (DistributedInitConfig, src/megatron/"
                      "bridge/training/config.py"),
        ("launch.sh", "logger.log_intervall is not a field of logger (LoggerConfig, src/megatron/bridge/training/"
                      "config.py"),
        ("launch.sh", "train.no_such_key is not a field of train (TrainingConfig, src/megatron/bridge/training/"
                      "config.py"),
    ]
    tp = found[("launch.sh", "dist.tensor_model_parallel_size is not a field of dist (DistributedInitConfig, "
                             "src/megatron/bridge/training/config.py")]
    assert tp["message"] == (
        "dist.tensor_model_parallel_size is not a field of dist (DistributedInitConfig, "
        "src/megatron/bridge/training/config.py:14): Hydra refuses the override at launch (\"Could not override "
        "'dist.tensor_model_parallel_size'\"); did you mean model.tensor_model_parallel_size?")
    assert tp["location"]["row"] == 3
    assert tp["severity"] == "error"
    messages = {f["message"]: f for f in found.values()}
    assert any(m.startswith("train.no_such_key") and "with a + or ++ prefix Hydra adds the key" in m
               and "did you mean" not in m and f["severity"] == "warning" for m, f in messages.items())
    assert any(m.startswith("logger.log_intervall") and m.endswith("did you mean logger.log_interval?")
               for m in messages)


def test_the_same_from_the_cache_and_in_a_pre_commit_run(tree):
    cold = _unknown(check_json(tree))
    assert len(cold) == 3
    assert _unknown(check_json(tree)) == cold
    assert _unknown(check_json(tree, paths=("launch.sh",))) == [f for f in cold if f[0] == "launch.sh"]


def test_a_field_added_to_the_class_is_known_again(tree):
    check_json(tree)
    config = tree / "src/megatron/bridge/training/config.py"
    config.write_text(CONFIG.replace("    lazy_init: bool = False\n",
                                     "    lazy_init: bool = False\n    tensor_model_parallel_size: int = 1\n"))
    assert not any(f[3].startswith("dist.") for f in _unknown(check_json(tree)))


def test_nothing_is_judged_where_the_tree_has_no_container(tree):
    (tree / "src/megatron/bridge/training/config.py").unlink()
    assert _unknown(check_json(tree, "--no-cache")) == []


def test_ignored_as_the_rule_is(tree):
    assert _unknown(check_json(tree, "--no-cache", "--ignore", "OFL003")) == []


def test_no_rename_is_offered_for_a_key_of_the_wrong_section(tree):
    """OFL003's rename is an unsafe fix to the one known field a typo is close to; a key no known field is close to
    has none, and the summary counts no hidden fix for it (it had: the count read the rule, not the edit)."""
    import subprocess
    import sys

    def summary() -> str:
        done = subprocess.run([sys.executable, "-m", "offlint", "check", "--no-cache", "--mcore-version", "0.20.0",
                               "launch.sh"], cwd=tree, capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        return done.stderr

    assert "hidden fix" not in summary()
    (tree / "launch.sh").write_text(LAUNCH.replace("model.num_layers=4", "model.cpu_ofloading=true"))
    assert "(1 hidden fix can be enabled with the `--unsafe-fixes` option)" in summary()


RECIPE = '''
from megatron.bridge.training.config import ConfigContainer


def llama_config() -> ConfigContainer:
    cfg = ConfigContainer()
    cfg.model.num_layers = 4
    return cfg
'''


def test_a_pre_commit_run_on_a_recipe_reads_no_container(tree, monkeypatch):
    """A recipe's edit decodes the launches that run it (for linking): their overrides are not the edit's, and
    reading the container's sections would read every Python file of the tree for them (Megatron Bridge: 1,713)."""
    from offlint import api
    from offlint.sources import tree_config_fields

    write_tree(tree, {"recipes/llama.py": RECIPE})
    monkeypatch.chdir(tree)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tree / ".cache"))
    options = {"mcore_version": "0.20.0", "root": tree}
    api.check(["."], api.CheckOptions(**options))
    asked = []
    original = tree_config_fields.container_sections
    monkeypatch.setattr(tree_config_fields, "container_sections", lambda texts: asked.append(1) or original(texts))
    (tree / "recipes/llama.py").write_text(RECIPE.replace("= 4", "= 8"))
    api.check(["recipes/llama.py"], api.CheckOptions(**options))
    assert asked == []
    found = api.check(["launch.sh"], api.CheckOptions(**options)).findings
    assert asked == [1] and sum(f.code == "OFL003" for f in found) == 3


OVERRIDES_YAML = """\
model:
  num_layers: 4
train:
  train_iters: 10
  trian_iters: 5
  micro_batch_size: 2
dist:
  tensor_model_parallel_size: 2
  lazy_init: true
scheduler:
  anything: 1
"""


def test_a_yaml_override_files_key_its_section_lacks_is_reported(tree):
    """An override file's keys of these sections were not read at all (yaml_file kept the modelled sections only).
    Bridge merges the file into the recipe's config unchecked and apply_overrides skips a key the dataclass lacks
    with a log line: a warning that the setting has no effect, as OFL003 says of the modelled sections' keys."""
    (tree / "conf").mkdir()
    (tree / "conf/override.yaml").write_text(OVERRIDES_YAML)
    found = [f for f in _unknown(check_json(tree, "--no-cache")) if f[0] == "conf/override.yaml"]
    assert found == [
        ("conf/override.yaml", 5, "warning", "train.trian_iters is not a field of train (TrainingConfig, "
         "src/megatron/bridge/training/config.py:25): Megatron Bridge skips unknown YAML keys with only a log line, "
         "so this setting has no effect; did you mean train.train_iters?"),
        ("conf/override.yaml", 8, "warning", "dist.tensor_model_parallel_size is not a field of dist "
         "(DistributedInitConfig, src/megatron/bridge/training/config.py:14): Megatron Bridge skips unknown YAML "
         "keys with only a log line, so this setting has no effect; did you mean model.tensor_model_parallel_size?"),
    ]
    assert _unknown(check_json(tree)) == _unknown(check_json(tree, "--no-cache"))  # the same from the cache


TARGET_YAML = """model:
  tensor_model_parallel_size: 2
dist:
  _target_: megatron.bridge.training.config.DistributedInitConfig
  lazy_init: true
train:
  _target_: my_project.config.LongTrainingConfig
  train_iters: 10
  warmup_days: 3
scheduler:
  _target_: megatron.bridge.training.config.SchedulerConfig
  _recursive_: false
  anything: 1
logger:
  log_intervall: 5
"""


def test_a_yaml_section_built_from_its_target_is_not_judged(tree):
    """Megatron Bridge's _apply_overrides instantiates a section's mapping that has a `_target_` (a Bridge fork's
    distillation example: `profiling: {_target_: ...ProfilingConfig, use_nsys_profiler: false, ...}`, for a section
    whose recipe value is None): `_target_` and Hydra's other reserved keys are no fields, and the other keys are
    the target's constructor arguments, which may be a class offlint does not read, as OFL003 already takes them
    for model, optimizer and ddp (conditions.settings.is_known_key). A section without one is judged as before."""
    (tree / "conf").mkdir()
    (tree / "conf/override.yaml").write_text(TARGET_YAML)
    found = [f for f in _unknown(check_json(tree, "--no-cache")) if f[0] == "conf/override.yaml"]
    assert [(path, line, message.partition(" is not")[0]) for path, line, _, message in found] == [
        ("conf/override.yaml", 15, "logger.log_intervall")]
