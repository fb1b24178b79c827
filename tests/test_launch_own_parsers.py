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
BRIDGE_LAUNCH = "python {script} checkpoint.load=/ckpt/model_name=0--val_loss=1.2-last/ train.train_iters=10\n"


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
    {"go.sh": BRIDGE_LAUNCH.format(script="/opt/other/train.py")},  # a script offlint cannot read, Bridge's keys
])
def test_one_that_hydra_parses_is(tmp_path, monkeypatch, files):
    errors = _errors(tmp_path, monkeypatch, files)
    assert len(errors) == 1 and errors[0].startswith("line 1: Hydra cannot parse")  # the file's error, not offlint's


HYDRA_APP = ('import hydra\n\n\n@hydra.main(config_path="conf", config_name="main", version_base=None)\n'
             'def main(cfg):\n    print(cfg.model.lora_rank)\n\n\nif __name__ == "__main__":\n    main()\n')
BRIDGE_SCRIPT = ("from megatron.bridge.training.utils.omegaconf_utils import parse_hydra_overrides\n\n"
                 "def main(cfg, overrides):\n    return parse_hydra_overrides(cfg, overrides)\n")
APP_LAUNCH = "python {script} model.lora_rank=32 optimizer.optimizer_offload_fracton=0.5 data.train_batch_size=8\n"


# NeMo 1's entry scripts: `hydra_runner` wraps hydra.main
NEMO1_APP = ('from nemo.core.config import hydra_runner\n\n\n'
             '@hydra_runner(config_path="conf", config_name="main")\ndef main(cfg):\n    print(cfg.model.lora_rank)\n')


@pytest.mark.parametrize("script, reported", [(HYDRA_APP, []), (NEMO1_APP, []),
                                              (BRIDGE_SCRIPT, ["OFL003", "OFL003"])])
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
    max_position_embeddings a misspelt Bridge field and its fix would have renamed it. (That name is a field of some
    Bridge providers, known to offlint since it reads their fields: the case below writes NeMo 1's
    `model.rotary_percentage`, which no Bridge or megatron-core class has, one letter pair from rotary_percent.)"""
    launch = (f"python /opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py {options} "
              "trainer.devices=8 model.encoder_seq_length=2048 model.max_position_embeddings=2048 "
              "model.rotary_percentage=0.5\n")
    write_tree(tmp_path, {"go.sh": launch})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert result.errors == []
    assert [f.code for f in result.findings] == reported


FOUNDRY = ("composer train/train.py train/yamls/pretrain/mpt-125m.yaml model.n_layers=12\n",  # its YAML first
           "python -m composer --nproc=8 train/train.py \"$YAML\" model.d_model=768 model.n_layers=12 model.n_heads=12 "
           "variables.run_name=x train_loader.num_workers=8 global_train_batch_size=256\n",  # its keys' shape
           LAUNCH.format(script="/opt/other/train.py"))  # NeMo-Run's `resume`, `trainer`, its `=` inside a value


@pytest.mark.parametrize("launch", FOUNDRY, ids=["yaml-first", "keys-shape", "nemo-run"])
def test_an_unreadable_script_s_arguments_shaped_as_another_program_s_are_its_own(tmp_path, monkeypatch, launch):
    """TrustLLM's launch repository (a helper's sweep, session 43) runs LLM Foundry, `composer train/train.py
    $YAML model.n_layers=...`, its script outside the tree: MPT's config names layers n_layers, and offlint had read
    the words as Megatron Bridge's overrides (OFL003 error: did you mean model.num_layers?). A script offlint cannot
    read given a YAML file first, or `key=value` words not shaped like ConfigContainer's (keys.bridge_shaped), sets
    a config of its own; one whose words are Bridge's is still checked."""
    write_tree(tmp_path, {"go.sh": launch})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert result.errors == [] and result.findings == []


@pytest.mark.parametrize("launch", [
    "python /opt/Megatron-Bridge/examples/pretrain.py model.num_layer=12 train.train_iters=10\n",
    "python /opt/Megatron-Bridge/examples/pretrain.py --config-file ours.yaml model.num_layer=12\n",
])
def test_an_unreadable_script_given_bridge_s_keys_is_checked(tmp_path, monkeypatch, launch):
    write_tree(tmp_path, {"go.sh": launch})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert [(f.code, "model.num_layers" in f.message) for f in result.findings] == [("OFL003", True)]


def test_a_hydra_list_with_an_unbraced_variable_is_one_override(tmp_path, monkeypatch):
    """`dataset.blend=[[$DATA/shard_a,$DATA/shard_b],null]` on a Bridge entry point: tree-sitter-bash had split the
    word at the second `$` and offlint handed Hydra `dataset.blend=[[$` (exit 2; NeMo launch scripts' data_prefix
    lists, a helper's sweep). bash passes one word; Hydra parses it, and the launch's other overrides are judged."""
    launch = ("DATA=${DATA:-/data}\ntorchrun --nproc_per_node 8 scripts/training/run_recipe.py "
              "dataset.blend=[[$DATA/shard_a,$DATA/shard_b],null] optimizer.optimizer_offload_fracton=0.5\n")
    write_tree(tmp_path, {"go.sh": launch})
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert [e.message for e in result.errors] == []
    assert [f.code for f in result.findings] == ["OFL003"]
    assert "optimizer_offload_fracton" in result.findings[0].message


def test_a_comment_naming_hydra_is_no_sign_of_hydra_s_grammar(tmp_path, monkeypatch):
    """A NeMo script's `# hydra interpolation does not work here` had made offlint take a script that reads its
    arguments otherwise for one that uses Hydra's grammar (a helper's sweep, session 46); code naming it still
    does."""
    commented = NEMO_RUN.replace("import nemo_run as run\n", "import nemo_run as run\n# hydra would refuse these\n")
    assert _errors(tmp_path, monkeypatch, {"cli.py": commented, "go.sh": LAUNCH.format(script="cli.py")}) == []
    nemo1 = NEMO1_APP.replace('config_name="main"', 'config_name="megatron_gpt_config"')
    errors = _errors(tmp_path, monkeypatch, {"cli.py": nemo1, "go.sh": LAUNCH.format(script="cli.py")})
    assert len(errors) == 1 and errors[0].startswith("line 1: Hydra cannot parse")  # the file's error, not offlint's


def test_another_programs_config_file_option_is_no_bridge_override(tmp_path, monkeypatch):
    """An HLLM recommender (DeepSpeed) runs `torchrun run.py --config_file a.yaml b.yaml` under expandable segments:
    the underscore spelling, which no Megatron Bridge script's argparse accepts, had been read as Bridge's
    `--config-file` recipe override, whose unread contents might set ddp.nccl_ub (--strict: OFL118 possible; a
    helper's sweep, session 47). Bridge's own spelling still is one."""
    launch = ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun --nproc_per_node=1 run.py "
              "--config_file{sep}overall/deepspeed.yaml HLLM/HLLM.yaml --loss nce\n")
    write_tree(tmp_path, {"go.sh": launch.format(sep=" ")})
    monkeypatch.chdir(tmp_path)
    strict = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, strict=True)
    assert check(["."], strict).findings == []
    write_tree(tmp_path, {"go.sh": launch.format(sep=" ").replace("--config_file", "--config-file")})
    assert [f.code for f in check(["."], strict).findings] == ["OFL118"]
