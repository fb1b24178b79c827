"""OFL216: a recipe whose parallel layout cannot run on the GPU count its name gives (megatron-core's
initialize_model_parallel raises at start). Recipes in Megatron Bridge's shapes, fixtures of our own."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

HEADER = ("from megatron.bridge.models import GPTModelProvider\n"
          "from megatron.bridge.training.config import ConfigContainer\n\n\n")


def _recipe(name: str, body: str, experts: int = 64) -> str:
    lines = "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())
    return (f"def {name}():\n"
            f"    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8,"
            f" num_moe_experts={experts}))\n{lines}    return cfg\n\n\n")


def _findings(tmp_path, text: str):
    (tmp_path / "recipes.py").write_text(HEADER + text)
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL216"]))
    return [f for f in result.findings if f.code == "OFL216"]


def test_the_expert_layout_must_divide_the_named_count(tmp_path):
    found = _findings(tmp_path, _recipe("moe_pretrain_64gpu_gb300_bf16_config", """
        cfg.model.pipeline_model_parallel_size = 4
        cfg.model.expert_model_parallel_size = 32
    """))
    assert len(found) == 1, found
    assert "ETP1 x EP32 x PP4 needs a multiple of 128 GPUs" in found[0].message
    assert "world_size (64) is not divisible by expert_tensor_model_pipeline_parallel size (128)" in found[0].message


def test_an_unset_expert_tp_is_judged_at_bridges_default_of_one(tmp_path):
    """TP4 x PP2 with EP4 on 8 GPUs: with megatron-core's default (ETP = TP = 4) the expert grid needs 32 ranks, with
    Bridge's (ETP 1 when EP > 1, since July 2026) 8. The finding must hold for both, so there is none."""
    assert _findings(tmp_path, _recipe("moe_pretrain_8gpu_h100_bf16_config", """
        cfg.model.tensor_model_parallel_size = 4
        cfg.model.pipeline_model_parallel_size = 2
        cfg.model.expert_model_parallel_size = 4
    """)) == []
    # an explicit ETP is taken as written
    found = _findings(tmp_path, _recipe("moe_pretrain_8gpu_h100_bf16_config", """
        cfg.model.tensor_model_parallel_size = 4
        cfg.model.pipeline_model_parallel_size = 2
        cfg.model.expert_model_parallel_size = 4
        cfg.model.expert_tensor_parallel_size = 4
    """))
    assert len(found) == 1 and "ETP4 x EP4 x PP2 needs a multiple of 32 GPUs" in found[0].message, found


def test_a_name_without_a_count_and_a_launch_are_not_judged(tmp_path):
    assert _findings(tmp_path, _recipe("moe_pretrain_config", """
        cfg.model.pipeline_model_parallel_size = 4
        cfg.model.expert_model_parallel_size = 32
    """)) == []
    # a launch runs the recipe on its own world size (3 nodes x 8 GPUs here) with the layout it overrides: PP3
    # does not divide the 64 of the name, but the launch is not judged by the name (only the recipe is)
    (tmp_path / "recipes.py").write_text(HEADER + _recipe("dense_pretrain_64gpu_h100_bf16_config", """
        cfg.model.tensor_model_parallel_size = 8
        cfg.model.pipeline_model_parallel_size = 8
    """, experts=0))
    (tmp_path / "launch.sh").write_text(
        "#!/bin/bash\ntorchrun --nnodes 3 --nproc-per-node 8 scripts/training/run_recipe.py "
        "--recipe dense_pretrain_64gpu_h100_bf16_config model.pipeline_model_parallel_size=3\n")
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL216"]))
    assert result.findings == [], result.findings


def test_the_dense_layout_must_divide_the_named_count(tmp_path):
    found = _findings(tmp_path, _recipe("dense_pretrain_16gpu_h100_bf16_config", """
        cfg.model.tensor_model_parallel_size = 8
        cfg.model.pipeline_model_parallel_size = 4
    """, experts=0))
    assert len(found) == 1 and "TP8 x PP4 x CP1 needs a multiple of 32 GPUs" in found[0].message, found


def test_estimate_says_a_recipe_cannot_run_as_named(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from offlint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(HEADER + _recipe("moe_pretrain_64gpu_gb300_bf16_config", """
        cfg.model.vocab_size = 32000
        cfg.model.seq_length = 4096
        cfg.model.pipeline_model_parallel_size = 4
        cfg.model.expert_model_parallel_size = 32
    """))
    named = CliRunner().invoke(main, ["estimate", "recipes.py", "--recipe", "moe_pretrain_64gpu_gb300_bf16_config"])
    # a verdict, `offlint check`'s: the recipe cannot run as named, and there is no memory figure to give
    assert named.exit_code == 0 and "Traceback" not in named.output, named.output
    assert "error[OFL216] recipes.py:" in named.output and "needs a multiple of 128 GPUs" in named.output
    assert "verdict: cannot run: it fails when the job starts (OFL216)" in named.output
    assert "peak GPU memory" not in named.output
    fitting = CliRunner().invoke(main, ["estimate", "recipes.py", "--recipe", "moe_pretrain_64gpu_gb300_bf16_config",
                                        "--gpus", "128"])  # --gpus replaces the count the name gives
    assert fitting.exit_code == 0 and "OFL216" not in fitting.output and "peak GPU memory" in fitting.output, \
        fitting.output
    given = CliRunner().invoke(main, ["estimate", "recipes.py", "--recipe", "moe_pretrain_64gpu_gb300_bf16_config",
                                      "--gpus", "96"])
    assert given.exit_code == 2 and "OFL216" not in given.output, given.output  # the user's count: bad input only


SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
         "expert_model_parallel_size", "expert_tensor_parallel_size")


@pytest.mark.parametrize("value", ["0.5", "-2", "'eight'", "2.0"])
@pytest.mark.parametrize("size", SIZES)
def test_a_size_that_is_no_whole_count_is_not_judged(tmp_path, size, value):
    """A fraction, a negative count or a word is no layout megatron-core tiles: no claim, and no crash of any rule
    (`expert_model_parallel_size = 0.5` in a mutated Bridge performance recipe had ended its check in a division by
    zero, reported as offlint's internal error)."""
    (tmp_path / "recipes.py").write_text(HEADER + _recipe("moe_pretrain_64gpu_h100_bf16_config", f"""
        cfg.model.{size} = {value}
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
        cfg.optimizer.optimizer_cpu_offload = True
    """))
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, mcore_version="0.20.0", strict=True))
    assert result.errors == [], result.errors
    assert [f for f in result.findings if f.code == "OFL216"] == []
