"""B300 and GB300 are measured GPUs: their recipes are sized against the capacity nvidia-smi reports on them
(B300 SXM6 AC 275040 MiB, GB300 284208 MiB), like any other GPU offlint knows, so `offlint estimate` gives a verdict
and OFL303 judges them. Rubin (R100, VR200) has no measured capacity: a finding about it must hold at the high end of
its stated capacity's bracket (tests/test_estimate_stated_capacity.py). Recipes in Megatron Bridge's shapes (a GPU
in the recipe name)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from offlint.api import CheckOptions, check
from offlint.cli import main
from offlint.estimate import oom
from offlint.estimate.devices import CAPABILITY, DEVICES, GIB, keeps_fp8_transpose
from tests.test_estimate_verdicts import HEADER, OOM_ON_MODEL_STATE, _model, _recipe

# 8B at CP2 with 64 layers on 2 GPUs: ~197 GiB, over every Hopper and Blackwell GPU, within B300 and GB300
OVER_GB200 = "llama_pretrain_2gpu_gb300_bf16_config"
# the same with 112 layers: ~340 GiB, over B300 and GB300 on model state alone
OVER_B300 = "llama_pretrain_2gpu_b300_bf16_config"
RUBIN = "llama_pretrain_2gpu_vr200_bf16_config"
RECIPES = (HEADER + _recipe(OVER_GB200, OOM_ON_MODEL_STATE, _model(layers=64))
           + _recipe(OVER_B300, OOM_ON_MODEL_STATE, _model(layers=112))
           + _recipe(RUBIN, OOM_ON_MODEL_STATE, _model(layers=112)))


def test_b300_and_gb300_are_sized_against_their_measured_capacity():
    assert oom.device_for("gpt_oss_20b_pretrain_8gpu_b300_nvfp4_config") is DEVICES["b300"]
    assert oom.device_for("deepseek_v3_pretrain_64gpu_gb300_fp8mx_config") is DEVICES["gb300"]
    assert (DEVICES["b300"].total_mib, DEVICES["gb300"].total_mib) == (275040, 284208)
    for name in ("b300", "gb300"):  # compute capability 10.3: Transformer Engine keeps no FP8 weight transpose
        assert DEVICES[name].fp8_transpose is keeps_fp8_transpose(CAPABILITY[name]) is False
    assert DEVICES["gb300"].gpus_per_node == 4 and DEVICES["b300"].gpus_per_node == 8
    assert oom.device_for(RUBIN).upper is not None  # no capacity measured for Rubin: a bracket


def _write(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPES)


def _estimate(tmp_path, name, *args):
    _write(tmp_path)
    return CliRunner().invoke(main, ["estimate", str(tmp_path / "recipes.py"), "--recipe", name, *args])


def test_estimate_gives_a_verdict_against_the_recipes_gpu(tmp_path):
    fits = json.loads(_estimate(tmp_path, OVER_GB200, "--output-format", "json").output)
    assert DEVICES["gb200"].usable_bytes < fits["peak_bytes"] < DEVICES["gb300"].usable_bytes
    assert fits["verdict_state"] == "fits" and fits["device"]["usable_bytes"] == DEVICES["gb300"].usable_bytes
    assert "device gb300, from the recipe name" in fits["notes"]
    result = _estimate(tmp_path, OVER_B300)
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    over = json.loads(_estimate(tmp_path, OVER_B300, "--output-format", "json").output)
    assert over["peak_bytes"] > DEVICES["b300"].usable_bytes and over["verdict_state"] == "does not fit"
    assert f"{DEVICES['b300'].usable_bytes / GIB:.1f}" in result.output


def test_the_rules_judge_b300_gb300_and_rubin_at_its_high_end(tmp_path):
    _write(tmp_path)
    findings = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False)).findings
    oom_units = {f.unit for f in findings if f.code == "OFL303"}
    assert any(OVER_B300 in (u or "") for u in oom_units), findings
    assert not any(OVER_GB200 in (u or "") for u in oom_units), findings
    # ~340 GiB on model state alone: over even 288 GiB, the high end of VR200's bracket, which the message names
    rubin = [f for f in findings if f.code == "OFL303" and RUBIN in (f.unit or "")]
    assert len(rubin) == 1 and "287.0 GiB usable on vr200 (at most 288 GiB)" in rubin[0].message, rubin
