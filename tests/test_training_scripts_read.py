"""A script that builds a recipe with a few arguments and trains it is read for units, though its text names none of
the keys offlint's pre-screen looked for (python.worth_parsing): Bridge's own tutorials
(tutorials/recipes/llama/00_quickstart_pretrain.py) and a fork's Slurm launcher (okoge-kaz/Megatron-Bridge's Qwen3-VL
script: `cfg = qwen3_vl_8b_pretrain_config(tensor_model_parallel_size=1, seq_length=8192, micro_batch_size=4,
global_batch_size=64)` then `pretrain(cfg, forward_step)`) had given no unit. Fixtures of our own in that shape.
"""

from __future__ import annotations

import pytest

from offlint.sources.python import may_give_units
from tests.check_helpers import write_tree

RECIPE = ("from megatron.bridge.training.config import ConfigContainer, TrainingConfig\n"
          "from megatron.bridge.models import GPTModelProvider\n\n\n"
          "def tiny_pretrain_config(**user_kwargs):\n"
          "    kwargs = {'tensor_model_parallel_size': 1, 'micro_batch_size': 1, **user_kwargs}\n"
          "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=2, hidden_size=64, num_attention_heads=4),\n"
          "                          train=TrainingConfig())\n"
          "    cfg.model.tensor_model_parallel_size = kwargs['tensor_model_parallel_size']\n"
          "    cfg.train.micro_batch_size = kwargs['micro_batch_size']\n"
          "    cfg.train.global_batch_size = 6\n"
          "    return cfg\n")
SCRIPT = ("from pkg.recipes import tiny_pretrain_config\n"
          "from megatron.bridge.training.pretrain import pretrain\n\n\n"
          "def main():\n    cfg = tiny_pretrain_config({call})\n    pretrain(cfg, None)\n\n\n"
          "if __name__ == '__main__':\n    main()\n")


@pytest.mark.parametrize("call", ["tensor_model_parallel_size=1", "micro_batch_size=4", ""])
def test_a_training_script_is_read(call):
    assert may_give_units(SCRIPT.format(call=call).encode())


def test_it_is_a_unit_with_the_settings_its_call_gives(tmp_path, monkeypatch):
    from offlint.api import CheckOptions, check
    from offlint.units import load_unit

    write_tree(tmp_path, {"pkg/__init__.py": "", "pkg/recipes.py": RECIPE,
                          "train.py": SCRIPT.format(call="micro_batch_size=4")})
    monkeypatch.chdir(tmp_path)
    assert check(["train.py"], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False)).units == 1
    unit = load_unit("train.py").resolved
    assert unit.get("train.micro_batch_size").value == 4
