"""OFL003 and a config Megatron Bridge wrote out: `run_config.yaml` holds every field of each section, with the class
it is built from as `_target_` (OpenEuroLLM's Megatron-Bridge-utils keeps them as checkpoint templates: a Bridge
Qwen3ModelProvider dump with `tp_comm_overlap_cfg`, a GPTModelProvider field, and `linear_attention_type`, a field of
a megatron-core newer than any offlint knows). Those keys are the class's constructor arguments, which offlint cannot
list for a class outside its data and the tree, and a wrong one fails loudly when the file is loaded: not judged.
The same keys in a plain override file, merged without a class, are, where no release or Bridge provider has them
(`tp_comm_overlap_cfg` is a field offlint knows from Bridge's providers: data/bridge-provider-fields.json). Fixtures
of our own."""

from __future__ import annotations

from tests.check_helpers import check_json

DUMP = """\
_target_: megatron.bridge.training.config.ConfigContainer
model:
  _target_: megatron.bridge.models.qwen.qwen_provider.Qwen3ModelProvider
  num_layers: 28
  tp_comm_overlap_cfg: null
  linear_attention_type: null
  tensor_model_parallel_size: 1
optimizer:
  _target_: megatron.core.optimizer.optimizer_config.OptimizerConfig
  lr: 0.0003
"""

OVERRIDE = """\
model:
  num_layers: 28
  tp_comm_overlap_cfg: null
  linear_attention_type: null
  tensor_model_parallel_size: 1
"""


def _unknown(tree) -> list[tuple[str, str]]:
    return sorted((f["filename"], f["message"].split(" ", 1)[0]) for f in check_json(tree, "--no-cache")
                  if f["code"] == "OFL003")


def test_keys_of_a_section_built_from_its_target_are_not_judged(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "run_config.yaml").write_text(DUMP)
    (tmp_path / "override.yaml").write_text(OVERRIDE)
    assert _unknown(tmp_path) == [("override.yaml", "model.linear_attention_type")]
