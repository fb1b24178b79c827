"""A script that reads its `key=value` arguments with its own parser is not held to Hydra's grammar.

Seen on verdimrc/playground-nemo-2.0-gh (a helper's triage): `python custom_cpt_recipe.py
resume.restore_config.path=/ckpt/model_name=0--val_loss=1.2-last/` runs a NeMo-Run command line (`run.cli.main`),
which splits at the first `=`; offlint had read it as a Bridge launch and reported "Hydra cannot parse override",
exit 2. Bridge's entry points and a script of the tree that parses with Hydra still are. Fixtures of our own.
"""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from tests.check_helpers import write_tree

NEMO_RUN = ("import nemo_run as run\nfrom nemo.collections import llm\n\n"
            "if __name__ == '__main__':\n    run.cli.main(llm.finetune, default_factory=lambda: None)\n")
WITH_HYDRA = ("from megatron.bridge.training.utils.omegaconf_utils import parse_hydra_overrides\n\n"
              "def main(overrides):\n    return parse_hydra_overrides(None, overrides)\n")
LAUNCH = "python {script} resume.restore_config.path=/ckpt/model_name=0--val_loss=1.2-last/ trainer.max_steps=10\n"


def _errors(tmp_path, monkeypatch, files: dict[str, str]) -> list[str]:
    write_tree(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    return [e.message for e in result.errors]


def test_a_script_of_the_tree_with_its_own_parser_is_no_parse_error(tmp_path, monkeypatch):
    assert _errors(tmp_path, monkeypatch, {"cli.py": NEMO_RUN, "go.sh": LAUNCH.format(script="cli.py")}) == []


@pytest.mark.parametrize("files", [
    {"train.py": WITH_HYDRA, "go.sh": LAUNCH.format(script="train.py")},  # the tree's script parses with Hydra
    {"go.sh": LAUNCH.format(script="scripts/training/run_recipe.py")},  # a Bridge entry point
    {"go.sh": LAUNCH.format(script="/opt/other/train.py")},  # a script offlint cannot read
])
def test_one_that_hydra_parses_is(tmp_path, monkeypatch, files):
    errors = _errors(tmp_path, monkeypatch, files)
    assert len(errors) == 1 and "Hydra cannot parse" in errors[0]


HYDRA_APP = ('import hydra\n\n\n@hydra.main(config_path="conf", config_name="main", version_base=None)\n'
             'def main(cfg):\n    print(cfg.model.lora_rank)\n\n\nif __name__ == "__main__":\n    main()\n')
BRIDGE_SCRIPT = ("from megatron.bridge.training.utils.omegaconf_utils import parse_hydra_overrides\n\n"
                 "def main(cfg, overrides):\n    return parse_hydra_overrides(cfg, overrides)\n")
APP_LAUNCH = "python {script} model.lora_rank=32 optimizer.optimizer_offload_fracton=0.5 data.train_batch_size=8\n"


@pytest.mark.parametrize("script, reported", [(HYDRA_APP, []), (BRIDGE_SCRIPT, ["OFL003", "OFL003"])])
def test_a_hydra_application_s_overrides_are_its_own_config_s_keys(tmp_path, monkeypatch, script, reported):
    """rllm's cookbooks (a helper's sweep, session 40) pass `model.lora_rank=32` to `@hydra.main(config_path=...,
    config_name=...)` applications: the keys are that app's own config's, which Hydra checks; offlint had read them
    as Megatron Bridge overrides and reported 21 'misspelt' fields (OFL003: did you mean model.q_lora_rank?). A
    script that applies the overrides to a Bridge config is still checked."""
    write_tree(tmp_path, {"train.py": script, "go.sh": APP_LAUNCH.format(script="train.py"),
                          "conf/main.yaml": "model:\n  lora_rank: 4\n"})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert result.errors == []
    assert [f.code for f in result.findings if f.location.path == "go.sh"] == reported


@pytest.mark.parametrize("options, reported", [
    ("--config-path=/opt/NeMo/conf --config-name=megatron_gpt_config.yaml", []), ("-cn megatron_gpt_config", []),
    ("", ["OFL003"]),  # (no sign of a config of its own: read as Bridge's overrides, as before)
])
def test_hydra_s_config_options_name_the_application_s_own_config(tmp_path, monkeypatch, options, reported):
    """NeMo 1's `megatron_gpt_pretraining.py --config-name=megatron_gpt_config.yaml model.max_position_embeddings=
    2048`, its script outside the tree (a helper's sweep: a cluster's workflow repository): Hydra's options naming
    the config the application composes say its overrides are that config's keys; OFL003 had called
    max_position_embeddings a misspelt Bridge field and its fix would have renamed it."""
    launch = (f"python /opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py {options} "
              "trainer.devices=8 model.encoder_seq_length=2048 model.max_position_embeddings=2048\n")
    write_tree(tmp_path, {"go.sh": launch})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert result.errors == []
    assert [f.code for f in result.findings] == reported
