"""A launch of the tree's own training script that reads its flags with argparse and builds a Megatron Bridge
recipe from them (sources/script_flags.py): the launch runs that configuration with the flags it gives.

okoge-kaz's Megatron Bridge launchers run `torchrun pretrain_qwen3_vl_8b.py --tensor-model-parallel-size 1
--micro-batch-size 4 ...`, a script whose parser declares those flags and passes them to the Qwen3-VL recipe. The
launch had been read as a Megatron-LM command line (Megatron-LM's defaults for everything else), and the script's
own unit had every such value unknown, so neither was checked with the values the job runs. Fixtures of our own.
"""

from __future__ import annotations

import ast

import pytest

from offlint.sources import script_flags
from offlint.sources.python_inputs import NOT_LITERAL, parser_options
from offlint.types import Location, Unknown
from tests.check_helpers import check_json, write_tree

RECIPE = """\
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, DistributedDataParallelConfig
from megatron.bridge.models import GPTModelProvider


def tower_pretrain_config(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1,
                          offload: bool = False):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=30, hidden_size=1024, num_attention_heads=8),
                          optimizer=OptimizerConfig(bf16=True, use_distributed_optimizer=True),
                          ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
    cfg.model.tensor_model_parallel_size = tensor_model_parallel_size
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size
    cfg.model.cpu_offloading = offload
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""
SCRIPT = """\
import argparse

from megatron.bridge.training.pretrain import pretrain
from recipes.tower import tower_pretrain_config


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    parser.add_argument("--offload", action="store_true", default=False)
    parser.add_argument("--no-offload", dest="offload", action="store_false")
    return parser.parse_args()


def main():
    args = parse_args()
    cfg = tower_pretrain_config(tensor_model_parallel_size=args.tensor_model_parallel_size,
                                pipeline_model_parallel_size=args.pipeline_model_parallel_size,
                                offload=args.offload)
    pretrain(config=cfg, forward_step_func=None)


if __name__ == "__main__":
    main()
"""
LAUNCH = """\
#!/bin/bash
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
torchrun --nproc_per_node=8 experiments/pretrain_tower.py \\
    --tensor-model-parallel-size 1 \\
    FLAGS
"""


def _codes(tmp_path, flags: str) -> list[str]:
    write_tree(tmp_path, {"recipes/__init__.py": "", "recipes/tower.py": RECIPE,
                          "experiments/pretrain_tower.py": SCRIPT, "launch.sh": LAUNCH.replace("FLAGS", flags)})
    return sorted(f["code"] for f in check_json(tmp_path) if f["filename"] != "recipes/tower.py"
                  and "line 3" in f["unit"])


def test_the_launch_runs_the_scripts_recipe_with_its_flags(tmp_path):
    """PP 2 with activation offloading: megatron-core refuses the pair (OFL102), a launch of the script does."""
    assert _codes(tmp_path, "--pipeline-model-parallel-size 2 --offload") == ["OFL102"]


def test_a_flag_the_launch_does_not_give_takes_the_parsers_default(tmp_path):
    assert _codes(tmp_path, "--pipeline-model-parallel-size 2") == []  # offload stays off
    assert _codes(tmp_path, "--pipeline-model-parallel-size 2 --offload --no-offload") == []  # the last one wins
    assert _codes(tmp_path, "--pipeline-model-par=2 --off") == ["OFL102"]  # argparse's abbreviations


def test_a_word_offlint_cannot_read_leaves_the_flags_it_may_give_unknown(tmp_path):
    assert _codes(tmp_path, "--pipeline-model-parallel-size 2 $EXTRA_ARGS") == []


def _args(*words):
    return tuple((word, Location("launch.sh", 3, 1 + i), None if word is None else ()) for i, word in enumerate(words))


def test_flag_values_as_argparse_gives_them():
    parser = parser_options(ast.parse(SCRIPT))
    assert script_flags._flag_value("pipeline_model_parallel_size", parser, _args("--pipeline-model-parallel-size",
                                                                                  "4"))[0] == 4
    assert script_flags._flag_value("pipeline_model_parallel_size", parser,
                                    _args("--pipeline-model-parallel-size=4"))[0] == 4
    assert isinstance(script_flags._flag_value("pipeline_model_parallel_size", parser,
                                               _args("--pipeline-model-parallel-size", "four"))[0], Unknown)
    assert script_flags._flag_value("offload", parser, _args())[0] is False
    assert script_flags._flag_value("offload", parser, _args("--offload"))[0] is True
    # an unreadable word after the flag may give it again; one before it does not matter
    assert isinstance(script_flags._flag_value("offload", parser, _args("--offload", None))[0], Unknown)
    assert script_flags._flag_value("offload", parser, _args(None, "--offload"))[0] is True
    # `--` ends the options
    assert script_flags._flag_value("offload", parser, _args("--", "--offload"))[0] is False


@pytest.mark.parametrize("declaration, default", [
    ('p.add_argument("--x", type=int, default=3)', 3),
    ('p.add_argument("--x", type=int)', None),
    ('p.add_argument("--x", default=os.environ["X"])', NOT_LITERAL),
    ('p.add_argument("--x", action="store_true")', False),
    ('p.add_argument("--x", action="store_false")', True),
])
def test_parser_defaults(declaration, default):
    assert parser_options(ast.parse(declaration))["--x"].default == default


@pytest.mark.slow  # a whole-tree run per file
def test_a_check_of_one_file_reports_what_the_whole_tree_does(tmp_path):
    """Pre-commit: an edit of the launch needs the script it runs, and an edit of the script or of the recipe it calls
    needs the launches running it (changed.expand), with the cache a whole-tree run left (scope_check.py)."""
    import subprocess
    import sys
    from pathlib import Path

    assert _codes(tmp_path, "--pipeline-model-parallel-size 2 --offload") == ["OFL102"]
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "scope_check.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path), "--", "--mcore-version", "0.20.0"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("; 0 checked alone report otherwise"), done.stdout
    assert not done.stdout.splitlines()[-1].startswith("0 files"), done.stdout
