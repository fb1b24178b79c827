"""The GPU a unit is sized against, where the tree names it (offlint/gpus.py): a model card's hardware section around a
launch command, the recipe's name, else the folder of the unit's file.

On Megatron Bridge 067f987, `nemotron_3_5_lightning_pretrain_8k_config` (recipes/nemotronh/gb200/, no GPU in its
name) and the two launches of it in the Lightning card's `GB200:` sections were judged against the default H100 and
reported by OFL303; Bridge measured the run at 158.2 GiB on GB200. The fixtures are our own.
"""

from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from offlint.api import CheckOptions, check
from offlint.cli import main
from offlint.gpus import folder_gpu, named_gpu, unit_gpu
from offlint.sources import read_source
from tests.test_estimate_verdicts import HEADER, OOM_ON_MODEL_STATE, _model, _recipe

# ~197 GiB (tests/test_estimate_blackwell_ultra.py): over every Hopper and Blackwell GPU but B300 and GB300
GB300_SIZED = _recipe("llama_pretrain_2gpu_config", OOM_ON_MODEL_STATE, _model(layers=64))

CARD = """\
pretrain_performance:
  H100:
    command: >
      ./scripts/training/train.sh --nodes 2 --gpus-per-node 8
      --recipe llama_pretrain_2gpu_config --mode pretrain
  GB300:
    status: verified
    command: >
      ./scripts/training/train.sh --nodes 1 --gpus-per-node 2
      --recipe llama_pretrain_2gpu_config --mode pretrain
"""


def test_a_card_section_first_then_the_name_then_the_folder():
    # a card's command runs where its section says, whatever the recipe's name (Bridge PR 5629: a GB200 launch of an
    # `_h100_` recipe was judged against H100 memory)
    assert unit_gpu("x_8gpu_h100_bf16_config", "gb200", "recipes/x/h100/a.py") == ("gb200", "the card's GB200 section")
    assert unit_gpu("x_8gpu_b200_bf16_config", "", "recipes/x/h100/a.py") == ("b200", "the recipe name")
    assert unit_gpu("x_config", "gb300", "recipes/x/h100/a.py") == ("gb300", "the card's GB300 section")
    assert unit_gpu("x_config", "", "src/recipes/x/gb200/a.py") == ("gb200", "the recipe's folder (gb200/)")
    assert unit_gpu("x_config", "", "src/recipes/x/a.py") == (None, "")
    assert folder_gpu("/abs/perf_recipes/llama/vr200/llama3.py") == "vr200"
    assert folder_gpu("gb200.py") is None and named_gpu("llama31_405b_pretrain_256gpu_vr200_bf16_config") == "vr200"


def test_a_card_command_takes_its_hardware_section():
    units = read_source("examples/cards/llama/card.yaml", "yaml", CARD)
    assert [(u.location.line, u.card_gpu) for u in units] == [(4, "h100"), (9, "gb300")]


def _tree(tmp_path, folder: str):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "recipes" / "llama" / folder / "llama.py"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + GB300_SIZED)
    return path


def test_a_recipe_in_a_gpu_folder_is_sized_against_that_gpu(tmp_path):
    path = _tree(tmp_path, "gb300")
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL303"])).findings
    assert findings == []
    result = CliRunner().invoke(main, ["estimate", str(path), "--recipe", "llama_pretrain_2gpu_config",
                                       "--output-format", "json"])
    out = json.loads(result.output)
    assert out["verdict_state"] == "fits" and "device gb300, from the recipe's folder (gb300/)" in out["notes"]


def test_elsewhere_the_configured_gpu_still_judges_it(tmp_path):
    _tree(tmp_path, "common")
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL303"])).findings
    assert [f.unit for f in findings] == ["llama_pretrain_2gpu_config"]
    assert "h100-80gb" in findings[0].message


def test_a_launch_in_a_card_section_is_judged_on_that_gpu(tmp_path):
    """The recipe sits in no GPU folder: on the default H100 it does not fit; the card's GB300 launch of it does."""
    _tree(tmp_path, "common")
    card = tmp_path / "examples" / "card.yaml"
    card.parent.mkdir()
    card.write_text(textwrap.dedent(CARD))
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL303"])).findings
    judged = sorted((f.unit, u) for f in findings for u in [f.unit, *f.shared_with])
    launches = [u for _, u in judged if "train.sh" in u]
    assert launches and all("line 4" in u for u in launches), judged  # the H100 section's launch only


def test_a_launch_names_its_recipes_gpu_followed_by_punctuation():
    """A performance launch's unit name shows the recipe it builds as "(recipe NAME, chosen by ...)": the comma
    after a name ending in its GPU (Bridge 39d02fe7f~1's `llama3_70b_lora_config_gb200`) sized a GB200 job as an
    H100 one."""
    name = "setup_experiment.py at line 3 (recipe llama3_70b_lora_config_gb200, chosen by the performance scripts)"
    assert unit_gpu(name) == ("gb200", "the recipe name")
    assert named_gpu("run (--recipe qwen3_30b_a3b_pretrain_8gpu_h100-bf16)") == "h100"
    assert named_gpu("gb2000_config") is None
