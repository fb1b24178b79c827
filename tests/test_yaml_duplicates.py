"""OFL004 on a Megatron Bridge override file: Bridge reads it with OmegaConf.load, whose YAML loader refuses a key
repeated in one mapping ("found duplicate key"), whatever the two values; PyYAML, which the rule had named, keeps the
last one silently. A seeded-mistake study (session 64) had OFL004 say "the last one wins silently" of a file the job
cannot load. Where a launch's entry script loads the file with PyYAML itself and hands Bridge its copy (a Bridge
fork's tutorial launcher), the last value may be what Bridge reads."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.check_helpers import check_json, write_tree

REPEATED = "model:\n  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: {first}\n" \
           "  pipeline_model_parallel_size: {then}\n"

RUN_RECIPE = """\
import argparse

from megatron.bridge.recipes.llama import llama32_1b_pretrain_config
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain
from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file")
    args, overrides = parser.parse_known_args()
    config = process_config_with_overrides(llama32_1b_pretrain_config(), config_filepath=args.config_file,
                                           cli_overrides=overrides)
    pretrain(config=config, forward_step_func=forward_step)


if __name__ == "__main__":
    main()
"""

# (reads the file with PyYAML, writes its copy for Bridge)
COPIES = RUN_RECIPE.replace("import argparse\n", "import argparse\nimport tempfile\n\nimport yaml\n").replace(
    "    config = process_config_with_overrides(llama32_1b_pretrain_config(), config_filepath=args.config_file,\n",
    "    with open(args.config_file) as f:\n        raw = yaml.safe_load(f)\n"
    "    with tempfile.NamedTemporaryFile(mode='w', suffix='.yaml', delete=False) as tmp:\n"
    "        yaml.dump(raw, tmp)\n"
    "    config = process_config_with_overrides(llama32_1b_pretrain_config(), config_filepath=tmp.name,\n")

LAUNCH = "#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n" \
         "torchrun --nproc_per_node=8 {script} --config-file conf/run.yaml train.train_iters=10\n"


def _ofl004(tmp_path, files: dict[str, str]) -> list[dict]:
    write_tree(tmp_path, files)
    return [f for f in check_json(tmp_path, "--select", "OFL004", "--mcore-version", "0.20.0")]


@pytest.mark.parametrize("first,then", [(2, 1), (2, 2)])
def test_a_key_repeated_in_an_override_file_is_a_file_bridge_cannot_load(tmp_path_factory, tmp_path, first, then):
    text = REPEATED.format(first=first, then=then)
    probe = tmp_path_factory.mktemp("probe") / "run.yaml"
    probe.write_text(text)
    with pytest.raises(Exception, match="found duplicate key"):  # what Bridge's reader does with it
        OmegaConf.load(probe)
    (found,) = _ofl004(tmp_path, {"conf/run.yaml": text})
    assert (found["severity"], found["location"]["row"]) == ("error", 4)
    assert found["message"] == ("model.pipeline_model_parallel_size is given twice in one mapping (line 3, then line "
                                "4): Megatron Bridge reads override files with OmegaConf.load, which refuses this one "
                                "(\"found duplicate key\"), so the job stops before training")


def test_a_launch_passing_it_to_bridge_s_reader_reports_it_once(tmp_path):
    files = {"conf/run.yaml": REPEATED.format(first=2, then=1), "run_recipe.py": RUN_RECIPE,
             "run.sh": LAUNCH.format(script="run_recipe.py")}
    (found,) = _ofl004(tmp_path, files)
    assert found["severity"] == "error" and "OmegaConf.load" in found["message"]


def test_a_file_a_launch_s_script_may_copy_with_pyyaml_first(tmp_path):
    """PyYAML keeps the last of two values; the same value twice reaches Bridge once, and is no finding."""
    files = {"conf/run.yaml": REPEATED.format(first=2, then=1), "train.py": COPIES,
             "run.sh": LAUNCH.format(script="train.py")}
    (found,) = _ofl004(tmp_path, files)
    assert found["severity"] == "warning"
    assert found["message"] == ("model.pipeline_model_parallel_size is set twice with different values ('2' at line 3, "
                                "then '1'); the last one wins silently where a launch's script loads the file with "
                                "PyYAML first; where Bridge's OmegaConf.load reads it, the file is refused (\"found "
                                "duplicate key\")")
    files["conf/run.yaml"] = REPEATED.format(first=2, then=2)
    assert _ofl004(tmp_path, files) == []


# `model:` twice at the top level, its keys different in each; `optimizer:` once, with a key repeated inside it
SECTION_TWICE = ("model:\n  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 2\n"
                 "optimizer:\n  lr: 0.001\n  lr: 0.002\n"
                 "model:\n  tensor_model_parallel_size: 4\n")


def test_a_section_given_twice_at_the_top_level_is_refused_once_for_the_section(tmp_path_factory, tmp_path):
    """The seeded study's `model:` twice: its keys flatten to places in two mappings, which OFL004 had compared as
    keys only (nothing reported). OmegaConf refuses the file for the section; its keys are no repeat of their own."""
    probe = tmp_path_factory.mktemp("probe") / "run.yaml"
    probe.write_text(SECTION_TWICE)
    with pytest.raises(Exception, match="found duplicate key"):
        OmegaConf.load(probe)
    found = sorted(_ofl004(tmp_path, {"conf/run.yaml": SECTION_TWICE}), key=lambda f: f["location"]["row"])
    assert [(f["severity"], f["location"]["row"]) for f in found] == [("error", 6), ("error", 7)]
    assert found[0]["message"].startswith("optimizer.lr is given twice in one mapping (line 5, then line 6)")
    assert found[1]["message"] == (
        "`model:` is given twice at the top level (line 1, then line 7): Megatron Bridge reads override files with "
        "OmegaConf.load, which refuses this one (\"found duplicate key\"), so the job stops before training")
    assert [r["row"] for r in found[1]["related"]] == [1]


def test_a_section_given_twice_where_a_script_may_load_it_with_pyyaml_first(tmp_path):
    """PyYAML keeps the second mapping whole: the first one's pipeline_model_parallel_size is gone."""
    import yaml

    assert yaml.safe_load(SECTION_TWICE)["model"] == {"tensor_model_parallel_size": 4}
    files = {"conf/run.yaml": SECTION_TWICE, "train.py": COPIES, "run.sh": LAUNCH.format(script="train.py")}
    (section,) = [f for f in _ofl004(tmp_path, files) if f["message"].startswith("`model:`")]
    assert section["severity"] == "warning"
    assert section["message"] == (
        "`model:` is given twice at the top level (line 1, then line 7): where a launch's script loads the file with "
        "PyYAML first, the second mapping replaces the first, whose keys are dropped silently; where Bridge's "
        "OmegaConf.load reads it, the file is refused (\"found duplicate key\")")
