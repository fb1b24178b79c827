"""GPUs with a stated but no measured capacity (Rubin's R100 and VR200): sized by the bracket NVIDIA's stated
figure gives (devices.stated_range: between the figure read as decimal GB and read as GiB, as for every measured
GPU), with a verdict, a finding or a claim only where it holds at both ends of the bracket."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import devices, oom
from offlint.estimate.devices import DEVICES, GIB, STATED_GB, Device, ends, parse_device, stated_range
from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from offlint.estimate.report import capacity_cases, verdict_state
from tests.estimate_helpers import lookup
from tests.test_estimate_verdicts import HEADER, OOM_ON_MODEL_STATE, _recipe


def test_every_measured_capacity_lies_in_the_bracket_of_its_stated_size():
    """The bracket is what the table shows: nvidia-smi's total between stated GB and stated GiB on every measured
    GPU (a device whose total fell outside would make the Rubin bracket unsound)."""
    assert set(DEVICES) <= set(STATED_GB)
    for name, dev in DEVICES.items():
        gb = STATED_GB[name]
        assert gb * 1e9 / 2**20 <= dev.total_mib <= gb * 1024, name


def test_rubin_is_sized_by_its_stated_288_gb():
    for name in ("r100", "vr200"):
        low = parse_device(name)
        assert low.upper is not None and ends(low) == (low, low.upper)
        assert low.total_mib == pytest.approx(288e9 / 2**20) and low.upper.total_mib == 288 * 1024
        assert low.fp8_transpose is False  # compute capability 10.7: no FP8 weight transposes
    assert ends(DEVICES["b300"]) == (DEVICES["b300"],)  # a measured capacity is its own bracket
    assert oom.device_for("llama3_8b_pretrain_8gpu_vr200_bf16_config") == stated_range("vr200")


SIZES = {"model.num_layers": 32, "model.hidden_size": 4096, "model.ffn_hidden_size": 14336,
         "model.num_attention_heads": 32, "model.num_query_groups": 8, "model.kv_channels": 128,
         "model.vocab_size": 128256, "model.seq_length": 8192, "model.gated_linear_unit": True,
         "model.add_bias_linear": False, "model.normalization": "RMSNorm",
         "model.share_embeddings_and_output_weights": False, "model.position_embedding_type": "rope",
         "model.hidden_dropout": 0.0}


def _bracket(low_gib: float, high_gib: float) -> Device:
    high = Device("x (high)", high_gib * 1024)
    return Device("x (low)", low_gib * 1024, upper=high)


def _result():
    return estimate(read_inputs(lookup(SIZES), "x_config"), 1)


def test_agreed_is_the_judgement_of_both_ends_or_undecided():
    bracket = _bracket(100, 110)
    assert devices.agreed(lambda d: d.total_gib > 90, bracket, "?") is True
    assert devices.agreed(lambda d: d.total_gib > 105, bracket, "?") == "?"
    assert devices.agreed(lambda d: d.total_gib > 105, DEVICES["h100-80gb"], "?") is False


def test_a_verdict_needs_both_ends():
    result = _result()
    peak, floor = result.peak.total / GIB, oom.floor_bytes(result) / GIB
    assert floor < peak
    roomy = _bracket(peak * 2, peak * 2.2)
    assert oom.oom_verdict(result, roomy) == "fits" and oom.risk_verdict(result, roomy, True) == "no"
    # the peak is over the low end's usable memory and under the high end's: neither fits nor OOM is claimed
    split = _bracket(peak, peak + 10)
    assert {verdict_state(result, d) for d in ends(split)} == {"does not fit", "at risk"}
    assert oom.oom_verdict(result, split) == "uncalibrated"
    assert oom.risk_verdict(result, split, True) != "at risk"
    # even the floor is over the high end: an OOM at any capacity in the bracket
    small = _bracket(floor * 0.5, floor * 0.9)
    assert oom.oom_verdict(result, small) == "oom"
    # the floor is over the low end only: the OOM rests on a capacity offlint does not know
    assert oom.oom_verdict(result, _bracket(floor * 0.5, floor + 5)) == "uncalibrated"


def test_capacity_cases_split_the_bracket_where_the_verdict_changes():
    """Each state over the part of the bracket where it holds, the bounds where the peak starts to fit (peak +
    the driver's reserve) and where it leaves the at-risk margin (peak / (1 - margin) + reserve)."""
    result = _result()
    peak = result.peak.total / GIB
    wide = _bracket(peak - 5, peak * 1.5)
    fit_at = peak + devices.RESERVED_GIB
    safe_at = peak / (1 - devices.AT_RISK_MARGIN[False]) + devices.RESERVED_GIB
    assert capacity_cases(result, wide) == [(f"below {fit_at:.1f} GiB", "does not fit"),
                                            (f"from {fit_at:.1f} GiB to {safe_at:.1f} GiB", "at risk"),
                                            (f"from {safe_at:.1f} GiB", "fits")]
    expandable_safe = peak / (1 - devices.AT_RISK_MARGIN[True]) + devices.RESERVED_GIB
    assert capacity_cases(result, _bracket(peak + 2, peak * 1.5), True) == [
        (f"below {expandable_safe:.1f} GiB", "at risk"), (f"from {expandable_safe:.1f} GiB", "fits")]


R100 = "llama_pretrain_2gpu_r100_bf16_config"


def _estimate(tmp_path, *args):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "recipes.py"
    path.write_text(HEADER + _recipe(R100, OOM_ON_MODEL_STATE))
    return CliRunner().invoke(main, ["estimate", str(path), "--recipe", R100, "--output-format", "json", *args])


def test_estimate_gives_a_rubin_recipe_the_verdict_both_ends_agree_on(tmp_path):
    found = _estimate(tmp_path)
    assert found.exit_code == 0, found.output
    out = json.loads(found.output)
    assert out["verdict_state"] == "fits"
    note = next(n for n in out["notes"] if "capacity is not measured" in n)
    assert "R100" in note and "between 268.2 and 288.0 GiB" in note and "shown at 268.2 GiB" in note


def test_estimate_gives_a_rubin_recipe_a_verdict_per_part_of_the_bracket(tmp_path, monkeypatch):
    """Where the verdict differs between the ends, each part of the bracket gets its own, and the capacity
    where it changes is where a measured capacity (--gpu) changes it."""
    peak = json.loads(_estimate(tmp_path).output)["peak_bytes"] / GIB
    monkeypatch.setitem(devices.STATED_GB, "r100", round((peak + 1) * 1.03))  # the peak between the two ends
    found = _estimate(tmp_path)
    assert found.exit_code == 0 and "Traceback" not in found.output, found.output
    out = json.loads(found.output)
    assert out["verdict_state"] == "depends" and "R100's capacity is not measured" in out["verdict"]
    cases = out["cases"]
    assert [c["verdict_state"] for c in cases] == ["does not fit", "at risk"], cases
    bound = float(cases[0]["condition"].split("below ")[1].split(" GiB")[0])
    assert cases[1]["condition"] == f"with a capacity from {bound:.1f} GiB"
    assert bound == pytest.approx(peak + devices.RESERVED_GIB, abs=0.1)  # where the peak starts to fit
    for gib, state in ((bound - 0.1, "does not fit"), (bound + 0.1, "at risk")):  # a measured capacity decides
        assert json.loads(_estimate(tmp_path, "--gpu", f"{gib:.2f}").output)["verdict_state"] == state
    text = CliRunner().invoke(main, ["estimate", str(tmp_path / "recipes.py"), "--recipe", R100]).output
    assert f"  with a capacity below {bound:.1f} GiB: does not fit" in text, text
    monkeypatch.setitem(devices.STATED_GB, "r100", round(peak / 2))  # over the high end: does not fit, shown there
    out = json.loads(_estimate(tmp_path).output)
    assert out["verdict_state"] == "does not fit"
    assert any(f"shown at {round(peak / 2):.1f} GiB" in n for n in out["notes"])
