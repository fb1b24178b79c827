"""A YAML override file whose launch's entry script loads it itself and takes its own keys out before Megatron
Bridge reads it: those keys are the script's, not misspelt Bridge fields. A Bridge fork's tutorial launcher pops
`checkpoint.enabled` and `checkpoint.save_on_last_step` (acting on them), dumps the rest to a temporary file and
passes that to `process_config_with_overrides`; OFL003 had said Bridge ignores them (6 findings, sweep 37)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.yaml_keys_taken import taken_keys
from tests.check_helpers import write_tree

CONFIG = """\
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class CheckpointConfig:
    save: Optional[str] = None
    save_interval: Optional[int] = None


@dataclass
class TrainingConfig:
    train_iters: int = 0


@dataclass
class ConfigContainer:
    train: TrainingConfig = field(default_factory=TrainingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
"""

TRAIN = """\
import argparse
import tempfile

import yaml

from megatron.bridge.recipes.llama import llama32_1b_pretrain_config
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain
from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides


def own_keys(raw: dict) -> dict:
    custom = {"sources": raw.pop("data_sources", None)}
    ckpt = raw.get("checkpoint", {})
    if isinstance(ckpt, dict):
        custom["enabled"] = ckpt.pop("enabled", True)
    return custom


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file")
    args, overrides = parser.parse_known_args()
    config = llama32_1b_pretrain_config()
    path = args.config_file
    with open(path) as f:
        raw_yaml = yaml.safe_load(f)
    custom = own_keys(raw_yaml)
    if not custom["enabled"]:
        config.checkpoint.save = None
    with tempfile.NamedTemporaryFile(mode="w", suffix=".yaml", delete=False) as tmp:
        yaml.dump(raw_yaml, tmp)
        path = tmp.name
    config = process_config_with_overrides(config, config_filepath=path, cli_overrides=overrides)
    pretrain(config=config, forward_step_func=forward_step)


if __name__ == "__main__":
    main()
"""

YAML = """\
model:
  tensor_model_parallel_size: 1
checkpoint:
  enabled: false
  save_interval: 100
  save_intervall: 200
data_sources:
  - /data/a
"""

LAUNCH = """\
#!/bin/bash
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
torchrun --nproc_per_node=8 {script} --config-file conf/small.yaml train.train_iters=10
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    write_tree(tmp_path, files)
    return tmp_path


def _ofl003(tree: Path) -> list[str]:
    result = check([str(tree)], CheckOptions(mcore_version="0.16.1", root=tree, select=["OFL003"], cache=False))
    assert not result.errors, result.errors
    return sorted(f.message.split(" ", 1)[0] for f in result.findings)


BRIDGE = {"src/megatron/bridge/training/config.py": CONFIG, "conf/small.yaml": YAML}


def test_keys_the_entry_script_takes_out_are_not_judged(tmp_path):
    tree = _tree(tmp_path, {**BRIDGE, "run.sh": LAUNCH.format(script="train.py"), "train.py": TRAIN})
    assert _ofl003(tree) == ["checkpoint.save_intervall"]  # a typo Bridge does see is still reported


def test_the_same_file_passed_to_a_script_that_keeps_it_whole_is_judged(tmp_path):
    plain = TRAIN.replace("    custom = own_keys(raw_yaml)\n", "    custom = {'enabled': True}\n")
    tree = _tree(tmp_path, {**BRIDGE, "run.sh": LAUNCH.format(script="train.py"), "train.py": plain})
    assert _ofl003(tree) == ["checkpoint.enabled", "checkpoint.save_intervall"]


def test_a_file_also_run_by_a_script_that_keeps_it_whole_is_judged(tmp_path):
    """Bridge reads the key where the other script runs the file."""
    plain = TRAIN.replace("    custom = own_keys(raw_yaml)\n", "    custom = {'enabled': True}\n")
    tree = _tree(tmp_path, {**BRIDGE, "run.sh": LAUNCH.format(script="train.py"), "train.py": TRAIN,
                            "run_plain.sh": LAUNCH.format(script="plain.py"), "plain.py": plain})
    assert _ofl003(tree) == ["checkpoint.enabled", "checkpoint.save_intervall"]


def _taken(code: str) -> list[str]:
    tree = ast.parse(textwrap.dedent(code))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return sorted(taken_keys(functions, [n for n in tree.body if not isinstance(n, ast.FunctionDef)]))


@pytest.mark.parametrize("code, expected", [
    (TRAIN, ["checkpoint.enabled", "data_sources"]),
    # a section taken whole, a subscript chain, `del`, a keyword argument, a loader under another name
    ("import yaml\nraw = yaml.safe_load(open('x'))\nraw.pop('custom')\n", ["custom"]),
    ("import yaml\nraw = yaml.load(open('x'), Loader=yaml.SafeLoader)\nraw['a']['b'].pop('c')\n", ["a.b.c"]),
    ("import yaml\ncfg = yaml.safe_load(open('x'))\ndel cfg['train']['note']\n", ["train.note"]),
    ("import yaml\ndef f(*, conf):\n    conf.setdefault('t', {}).pop('k')\nf(conf=yaml.full_load(open('x')))\n",
     ["t.k"]),
    ("import yaml as y\nraw = y.safe_load(open('x'))\nraw.pop('k')\n", ["k"]),
])
def test_what_is_taken(code, expected):
    assert _taken(code) == expected


@pytest.mark.parametrize("code", [
    "import json\nraw = json.load(open('x'))\nraw.pop('k')\n",  # not the YAML file
    "import yaml\nraw = yaml.safe_load(open('x'))\nother = {}\nother.pop('k')\n",  # another mapping
    "import yaml\nraw = yaml.safe_load(open('x'))\nraw.pop(name)\n",  # a key offlint cannot read
    "import yaml\nraw = yaml.safe_load(open('x'))\nraw.get('k')\n",  # read, not taken
])
def test_what_is_not_taken(code):
    assert _taken(code) == []
