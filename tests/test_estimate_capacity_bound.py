"""A GPU offlint has not measured but NVIDIA states larger than ones it has (B300, GB300: 288 GB): `offlint estimate`
sizes its recipes against a lower bound of its capacity, the largest capacity measured on a GPU NVIDIA states
smaller, and gives a verdict only when the peak fits that bound (a fit there holds on the real GPU); anything else
is no verdict. The rules never use the bound: no OFL303/304/305 for these GPUs. Recipes in Megatron Bridge's shapes.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from offlint.api import CheckOptions, check
from offlint.cli import main
from offlint.estimate import oom
from offlint.estimate.devices import DEVICES, GIB, STATED_GB, Device, capacity_bound
from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from offlint.estimate.report import verdict_state
from tests.test_estimate_verdicts import HEADER, OOM_ON_MODEL_STATE, _model, _recipe

FITS = "llama_pretrain_2gpu_b300_bf16_config"  # 8B at CP2 on 2 GPUs: ~106 GiB, over an H100, within GB200's
TOO_BIG = "llama_pretrain_2gpu_gb300_bf16_config"  # the same with 64 layers: ~197 GiB, over GB200's capacity
RECIPES = HEADER + _recipe(FITS, OOM_ON_MODEL_STATE) + _recipe(TOO_BIG, OOM_ON_MODEL_STATE, _model(layers=64))


def test_the_bound_is_the_largest_capacity_measured_on_a_gpu_nvidia_states_smaller():
    for gpu in ("b300", "gb300"):
        bound = capacity_bound(gpu)
        smaller = [d for name, d in DEVICES.items() if STATED_GB[name] < STATED_GB[gpu]]
        assert bound.device.total_mib == max(d.total_mib for d in smaller)
        assert bound.device.total_mib == DEVICES[bound.measured_on].total_mib
        assert bound.device.fp8_transpose is False  # Blackwell Ultra: no FP8 weight transposes
    assert oom.capacity_bound_for("gpt_oss_20b_pretrain_8gpu_b300_nvfp4_config").gpu == "b300"
    # no NVIDIA statement found for Rubin; measured GPUs need none; the rules still have no device for B300
    assert capacity_bound("vr200") is None and capacity_bound("r100") is None and capacity_bound("b200") is None
    assert oom.capacity_bound_for("x_pretrain_8gpu_vr200_nvfp4_config") is None
    assert oom.device_for(FITS) is None and oom.device_for(TOO_BIG) is None


def test_a_fit_against_the_bound_holds_on_any_larger_capacity(tmp_path):
    """verdict_state's margin is a share of the usable memory, so "fits" is monotone in the capacity."""
    bound = capacity_bound("b300").device
    inputs = read_inputs(_lookup(tmp_path, FITS), FITS, fp8_transpose=False)
    result = estimate(inputs, 2)
    assert verdict_state(result, bound) == "fits"
    for extra_mib in (0, 1, 10_000, 100_000, 1_000_000):
        larger = Device("larger", bound.total_mib + extra_mib)
        assert verdict_state(result, larger) == "fits" and verdict_state(result, larger, True) == "fits"


def _lookup(tmp_path, name):
    from offlint.units import load_unit

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPES)
    return load_unit(str(tmp_path / "recipes.py"), name, [], "0.16.1", None, root=tmp_path).resolved.get


def _estimate(tmp_path, name, *args):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPES)
    return CliRunner().invoke(main, ["estimate", str(tmp_path / "recipes.py"), "--recipe", name, *args])


def test_estimate_gives_a_fit_against_the_bound_and_says_what_it_rests_on(tmp_path):
    peak = json.loads(_estimate(tmp_path, FITS, "--output-format", "json", "--gpu", "4000").output)["peak_bytes"]
    assert DEVICES["h100-80gb"].usable_bytes < peak  # against the old stand-in it looked like an OOM
    out = json.loads(_estimate(tmp_path, FITS, "--output-format", "json").output)
    assert out["verdict_state"] == "fits" and out["peak_bytes"] == peak
    assert out["device"]["usable_bytes"] == capacity_bound("b300").device.usable_bytes
    assert any("fits even at GB200's capacity" in n and "B300's own is not measured" in n for n in out["notes"])
    assert not any("sized against h100-80gb" in n for n in out["notes"])


def test_estimate_gives_no_verdict_when_the_peak_does_not_fit_the_bound(tmp_path):
    peak = json.loads(_estimate(tmp_path, TOO_BIG, "--output-format", "json", "--gpu", "4000").output)["peak_bytes"]
    assert peak > capacity_bound("gb300").device.usable_bytes
    result = _estimate(tmp_path, TOO_BIG)
    assert result.exit_code == 2, result.output
    assert "no verdict" in result.output and "pass --gpu CAPACITY" in result.output
    assert f"{peak / GIB:.1f} GiB" in result.output and "GB300" in result.output
    assert "Traceback" not in result.output
    given = _estimate(tmp_path, TOO_BIG, "--gpu", "288")  # a capacity the user gives is used as it is
    assert given.exit_code == 0 and "fits" in given.output, given.output


def test_the_rules_stay_silent_for_a_gpu_with_only_a_bound(tmp_path):
    (tmp_path / "recipes.py").write_text(RECIPES)
    codes = [f.code for f in check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False)).findings]
    assert not {"OFL303", "OFL304", "OFL305"} & set(codes), codes
    # the same recipe named for a GPU offlint has measured gets its finding: the fixture is one the rules judge
    (tmp_path / "recipes.py").write_text(RECIPES.replace("_gb300_", "_h100_"))
    codes = [f.code for f in check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False)).findings]
    assert "OFL303" in codes, codes
