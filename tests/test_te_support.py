"""OFL117: the low-precision recipes Transformer Engine refuses on the unit's GPU (offlint/te_support.py).

The GPU comes from the recipe's name or `[tool.offlint] gpu`, never a guess; the precision from Bridge's
`mixed_precision` or the model's own fp8/fp4 fields. The rule's YAML examples cover the named-GPU shapes; these
tests cover the configured GPU, the table of what TE raises per compute capability, and branches.
"""

from __future__ import annotations

import pytest

from offlint import gpus, te_support
from offlint.api import CheckOptions, check
from offlint.te_support import (BLOCK_MESSAGE, FP8_MESSAGE, MXFP8_12_MESSAGE, MXFP8_MESSAGE, NVFP4_MESSAGE,
                                te_error)

A100, H100, B200, RTX_BLACKWELL = (8, 0), (9, 0), (10, 0), (12, 0)


@pytest.mark.parametrize(("recipe", "capability", "raised"), [
    # autocast.__enter__ -> check_recipe_support: RuntimeError for the recipes it knows
    ("delayed", A100, f"RuntimeError: {FP8_MESSAGE}"),
    ("tensorwise", A100, f"RuntimeError: {FP8_MESSAGE}"),
    ("blockwise", A100, f"RuntimeError: {BLOCK_MESSAGE}"),
    ("mxfp8", A100, f"RuntimeError: {MXFP8_MESSAGE}"),
    ("mxfp8", H100, f"RuntimeError: {MXFP8_MESSAGE}"),
    ("mxfp8", RTX_BLACKWELL, f"RuntimeError: {MXFP8_12_MESSAGE}"),
    # then FP8GlobalStateManager.autocast_enter: FP8 for every recipe, NVFP4 for NVFP4BlockScaling
    ("nvfp4", A100, f"AssertionError: {FP8_MESSAGE}"),
    ("custom", A100, f"AssertionError: {FP8_MESSAGE}"),
    ("nvfp4", H100, f"AssertionError: {NVFP4_MESSAGE}"),
    # what runs
    ("delayed", H100, ""), ("tensorwise", H100, ""), ("blockwise", H100, ""), ("custom", H100, ""),
    ("mxfp8", B200, ""), ("nvfp4", B200, ""), ("blockwise", B200, ""), ("nvfp4", RTX_BLACKWELL, ""),
])
def test_what_transformer_engine_raises(recipe, capability, raised):
    assert te_error(recipe, capability) == raised


RECIPE = '''
def {name}(fast):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, hidden_size=4096), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    {body}
    return cfg
'''


def _check(tmp_path, monkeypatch, name: str, body: str, gpu: str | None = None, strict: bool = False,
           header: str = ""):
    monkeypatch.chdir(tmp_path)
    if gpu is not None:
        (tmp_path / "pyproject.toml").write_text(f'[tool.offlint]\ngpu = "{gpu}"\n', encoding="utf-8")
    (tmp_path / "recipe.py").write_text(header + RECIPE.format(name=name, body=body), encoding="utf-8")
    result = check(["."], CheckOptions(select=["OFL117"], strict=strict, mcore_version="0.20.0", root=tmp_path,
                                       cache=False))
    assert not result.errors, result.errors
    return result.findings


def test_the_configured_gpu_is_used_when_the_name_names_none(tmp_path, monkeypatch):
    found = _check(tmp_path, monkeypatch, "llama3_8b_pretrain_config", 'cfg.mixed_precision = "bf16_with_mxfp8_mixed"',
                   gpu="h200")
    assert [f.code for f in found] == ["OFL117"]
    assert "on h200 (compute capability 9.0, from [tool.offlint] gpu)" in found[0].message
    assert MXFP8_MESSAGE in found[0].message
    assert found[0].location.line == 5  # the line that sets the precision


def test_no_gpu_no_finding_even_with_strict(tmp_path, monkeypatch):
    assert _check(tmp_path, monkeypatch, "llama3_8b_pretrain_config", 'cfg.mixed_precision = "bf16_with_nvfp4_mixed"',
                  strict=True) == []


def test_a_capacity_says_nothing_about_the_architecture(tmp_path, monkeypatch):
    assert _check(tmp_path, monkeypatch, "llama3_8b_pretrain_config", 'cfg.mixed_precision = "bf16_with_nvfp4_mixed"',
                  gpu="96", strict=True) == []


def test_the_name_beats_the_configured_gpu(tmp_path, monkeypatch):
    assert _check(tmp_path, monkeypatch, "llama3_8b_pretrain_8gpu_b200_fp8mx_config",
                  'cfg.mixed_precision = "bf16_with_mxfp8_mixed"', gpu="h100") == []


def test_a_blackwell_ultra_name_runs_every_recipe(tmp_path, monkeypatch):
    assert _check(tmp_path, monkeypatch, "llama3_8b_pretrain_8gpu_gb300_nvfp4_config",
                  'cfg.mixed_precision = "bf16_with_nvfp4_mixed"', gpu="a100", strict=True) == []


def test_a_rubin_name_runs_every_recipe(tmp_path, monkeypatch):
    """Rubin (R100, VR200) is compute capability 10.7: MXFP8 and NVFP4 run."""
    for name in ("llama3_8b_pretrain_8gpu_vr200_nvfp4_config", "llama3_8b_pretrain_8gpu_r100_fp8mx_config"):
        assert te_support.unit_gpu(str(tmp_path), *gpus.unit_gpu(name))[1] == (10, 7)
        assert _check(tmp_path, monkeypatch, name, 'cfg.mixed_precision = "bf16_with_nvfp4_mixed"', gpu="h100",
                      strict=True) == []


def test_fp8_on_an_a100_from_the_model_fields(tmp_path, monkeypatch):
    found = _check(tmp_path, monkeypatch, "llama3_8b_pretrain_config",
                   'cfg.model.fp8 = "hybrid"\n    cfg.model.fp8_recipe = "blockwise"', gpu="a100-80gb")
    assert len(found) == 1 and BLOCK_MESSAGE in found[0].message
    assert "Train in bf16 (bf16_mixed) on this GPU" in found[0].message


def test_a_branch_that_picks_mxfp8_is_reported_on_its_path(tmp_path, monkeypatch):
    body = ('if fast:\n        cfg.mixed_precision = "bf16_with_mxfp8_mixed"\n    else:\n'
            '        cfg.mixed_precision = "bf16_mixed"')
    found = _check(tmp_path, monkeypatch, "llama3_8b_pretrain_2gpu_h100_config", body)
    assert len(found) == 1 and not found[0].possible
    assert "on the path where `if fast`" in found[0].message and "is true" in found[0].message


MIXED_PRECISION = '''
from dataclasses import dataclass


@dataclass
class MixedPrecisionConfig:
    bf16: bool = False
    fp8: str | None = None
    fp8_recipe: str = "tensorwise"
    fp4: str | None = None
    fp4_recipe: str = "nvfp4"
    fp4_param: bool | None = None
    fp4_param_gather: bool = False
'''


def test_a_mixed_precision_config_record_with_fp4_primary_weights(tmp_path, monkeypatch):
    """A MixedPrecisionConfig the tree defines (Bridge's dataclass shape): its fp4 fields, with fp4_param taken
    from fp4_param_gather as MixedPrecisionConfig.finalize does."""
    (tmp_path / "mixed_precision.py").write_text(MIXED_PRECISION, encoding="utf-8")
    header = "from mixed_precision import MixedPrecisionConfig\n"
    body = 'cfg.mixed_precision = MixedPrecisionConfig(bf16=True, fp4="e2m1", fp4_param_gather=True)'
    found = _check(tmp_path, monkeypatch, "llama3_8b_pretrain_2gpu_h100_config", body, header=header)
    assert len(found) == 1
    assert "mixed_precision (fp4_recipe='nvfp4')" in found[0].message
    assert NVFP4_MESSAGE in found[0].message and "sm_100 or higher is required." in found[0].message
    body = body.replace("fp4=\"e2m1\", fp4_param_gather=True", "fp8=\"hybrid\"")  # current scaling: runs on Hopper
    assert _check(tmp_path, monkeypatch, "llama3_8b_pretrain_2gpu_h100_config", body, header=header) == []


def test_an_unread_precision_is_possible_only_when_the_unit_writes_it(tmp_path, monkeypatch):
    found = _check(tmp_path, monkeypatch, "llama3_8b_pretrain_2gpu_h100_config", "cfg.mixed_precision = fast",
                   strict=True)
    assert [f.possible for f in found] == [True]
    assert "MXFP8 and NVFP4 need 10.0" in found[0].message
    monkeypatch.chdir(tmp_path)
    launch = tmp_path / "launch.sh"
    launch.write_text("python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_2gpu_h100_bf16_config\n",
                      encoding="utf-8")
    result = check(["launch.sh"], CheckOptions(select=["OFL117"], strict=True, mcore_version="0.20.0", root=tmp_path,
                                               cache=False))
    assert result.findings == []  # the recipe is not in the linted files: its precision keeps its default


LAUNCH = "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --bf16"


def test_megatron_lm_flags_with_the_configured_gpu(tmp_path, monkeypatch):
    """Megatron-LM's --fp8-format/--fp8-recipe and --fp4-format/--fp4-param-gather are the model's fields (the
    param-gather flags become fp8_param/fp4_param in core_transformer_config_from_args); a launch script names no
    GPU, so only [tool.offlint] gpu gives one."""
    runs = iter(range(100))

    def findings(flags: str, gpu: str | None):
        project = tmp_path / f"project{next(runs)}"  # the configured GPU is read once per directory
        project.mkdir()
        monkeypatch.chdir(project)
        if gpu is not None:
            (project / "pyproject.toml").write_text(f'[tool.offlint]\ngpu = "{gpu}"\n', encoding="utf-8")
        (project / "launch.sh").write_text(f"{LAUNCH} {flags}\n", encoding="utf-8")
        result = check(["launch.sh"], CheckOptions(select=["OFL117"], mcore_version="0.20.0", root=project,
                                                   cache=False))
        assert not result.errors, result.errors
        return result.findings

    assert findings("--fp8-format hybrid --fp8-recipe mxfp8", None) == []  # no GPU known
    found = findings("--fp8-format hybrid --fp8-recipe mxfp8", "h100-80gb")
    assert len(found) == 1 and MXFP8_MESSAGE in found[0].message
    assert found[0].location.col == len(LAUNCH) + len(" --fp8-format hybrid ") + 1  # at --fp8-recipe
    found = findings("--fp4-format e2m1 --fp4-param-gather", "h200")
    assert len(found) == 1 and NVFP4_MESSAGE in found[0].message and "fp4_param" in found[0].message
    assert findings("--fp8-format hybrid --fp8-recipe tensorwise", "h100") == []
    assert len(findings("--fp8-format hybrid", "a100")) == 1  # delayed scaling, the CLI's default recipe
    assert findings("--fp8-recipe mxfp8", "a100") == []  # no --fp8-format: FP8 is off
