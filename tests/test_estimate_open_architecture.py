"""Per-tensor FP8 on a GPU whose architecture offlint does not know (a capacity given in GiB): Transformer Engine
keeps an FP8 transpose of every GEMM weight on Hopper and not on Blackwell, so the estimate is made both ways
(oom.architectures) and a verdict is given only when it holds either way. Recipes are written in Megatron Bridge's
shapes; expected bytes are derived here from the parameter counts.
"""

from __future__ import annotations

import json
import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import oom, params, precision
from offlint.estimate.devices import GIB, parse_device
from offlint.estimate.inputs import LowPrecision, ModelShape, read_inputs
from offlint.estimate.memory import estimate
from tests.estimate_helpers import lookup
from tests.test_estimate_verdicts import HEADER, OOM_ON_MODEL_STATE, _recipe

SIZES = {"model.num_layers": 4, "model.hidden_size": 1024, "model.ffn_hidden_size": 3584,
         "model.num_attention_heads": 8, "model.num_query_groups": 2, "model.kv_channels": 128,
         "model.vocab_size": 32000, "model.seq_length": 2048, "model.gated_linear_unit": True,
         "model.add_bias_linear": False, "model.normalization": "RMSNorm",
         "model.share_embeddings_and_output_weights": False, "model.position_embedding_type": "rope",
         "model.fp8": "hybrid", "model.fp8_recipe": "tensorwise",
         "model.fp8_param": True}


def _gemm_weights(m: ModelShape) -> int:
    """GEMM weights by subtraction: all parameters less the embedding, the output layer and the RMSNorms."""
    return params.total(m) - 2 * m.vocab_size * m.hidden_size - (2 * m.num_layers + 1) * m.hidden_size


def test_an_open_architecture_is_estimated_with_and_without_the_transposes():
    inputs = read_inputs(lookup(SIZES), "x_config", fp8_transpose=None)
    assert inputs.complete and inputs.training.low_precision.transpose is None
    hopper, blackwell = oom.architectures(inputs)
    assert hopper.training.low_precision.transpose is True and blackwell.training.low_precision.transpose is False
    extra = estimate(hopper, 1).peak.of("weights") - estimate(blackwell, 1).peak.of("weights")
    assert extra == pytest.approx(_gemm_weights(inputs.model))  # one 1-byte transpose per GEMM weight element
    known = read_inputs(lookup(SIZES), "x_config", fp8_transpose=False)
    assert oom.architectures(known) == [known]


def test_the_open_transpose_is_never_sized_silently():
    with pytest.raises(ValueError):
        precision.weight_copy_bytes(LowPrecision("tensorwise", transpose=None))


def test_megatron_fsdp_with_per_tensor_fp8_on_an_open_architecture_gets_no_verdict():
    values = {**SIZES, "ddp.use_megatron_fsdp": True, "ddp.data_parallel_sharding_strategy": "optim_grads_params"}
    assert read_inputs(lookup(values), "x_config", fp8_transpose=False).complete
    inputs = read_inputs(lookup(values), "x_config", fp8_transpose=None)
    assert any("architecture offlint does not know" in why for why in inputs.unsupported), inputs.unsupported


def test_either_way_gives_the_verdict_only_when_both_agree():
    inputs = read_inputs(lookup(SIZES), "x_config", fp8_transpose=None)
    with_t, without = (estimate(v, 1).peak.total / GIB for v in oom.architectures(inputs))
    for capacity, agree in ((with_t * 2, True), ((with_t + without) / 2, False), (without / 4, True)):
        device = parse_device(f"{capacity + 1.0:.4f}")  # 1 GiB of the capacity is the driver's reserve
        shown, result, split, note = oom.either_way(inputs, lambda _, r: oom.oom_verdict(r, device), 1)
        assert shown.training.low_precision.transpose is True and result.peak.total / GIB == pytest.approx(with_t)
        assert bool(split) != agree and bool(note) == agree, capacity
        assert ("the verdict depends on it" in split) if split else ("holds either way" in note)


def test_check_claims_an_oom_only_when_it_holds_either_way(monkeypatch):
    """A unit without a GPU in its name sized against a capacity in GiB: a rule decides only when its own verdict
    is the same with and without the transposes (inputs_for names the verdicts that are not)."""
    inputs = read_inputs(lookup(SIZES), "x_config", fp8_transpose=None)
    bound = [oom.bound(v).peak.total / GIB for v in oom.architectures(inputs)]
    for capacity, given in ((bound[0] * 3, True), ((bound[0] + bound[1]) / 2, False)):
        monkeypatch.setattr(oom, "device", lambda c=capacity: parse_device(f"{c + 1.0:.4f}"))
        found, _, varying = oom.inputs_for(lookup(SIZES), "x_config")
        assert found.training.low_precision.transpose is True  # the alternative shown first
        assert ("oom" not in varying) == given, capacity
        if not given:
            assert oom.has_no_answer(lookup(SIZES), "x_config")
            assert "the verdict depends on it" in oom.no_verdict_reason(lookup(SIZES), "x_config")


R100 = "llama_pretrain_2gpu_r100_fp8cs_config"
FP8CS = "cfg.mixed_precision = 'bf16_with_fp8_current_scaling_mixed'\n"


def _estimate(tmp_path, *args):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "recipes.py"
    path.write_text(HEADER + _recipe(R100, OOM_ON_MODEL_STATE + FP8CS))
    return CliRunner().invoke(main, ["estimate", str(path), "--recipe", R100, "--output-format", "json", *args])


def test_estimate_says_the_verdict_holds_either_way_or_gives_one_per_architecture(tmp_path):
    roomy = json.loads(_estimate(tmp_path, "--gpu", "4000").output)
    assert roomy["verdict_state"] == "fits"
    note = next(n for n in roomy["notes"] if "holds either way" in n)
    without = float(note.split("without them (Blackwell) ")[1].split(" GiB")[0])
    with_t = roomy["peak_bytes"] / GIB
    assert without < with_t
    between = _estimate(tmp_path, "--gpu", f"{(with_t + without) / 2 + 1.0:.2f}")
    assert between.exit_code == 0, between.output
    out = json.loads(between.output)  # one verdict per architecture, each decided
    assert out["verdict_state"] == "depends" and "architecture offlint does not know" in out["verdict"]
    assert [(c["condition"], c["verdict_state"]) for c in out["cases"]] == [
        ("with Hopper's FP8 weight transposes", "does not fit"), ("without them (Blackwell)", "at risk")]
    blackwell = json.loads(_estimate(tmp_path, "--gpu", "b200").output)  # a named GPU settles it
    assert not any("either way" in n for n in blackwell["notes"])
    assert blackwell["peak_bytes"] / GIB == pytest.approx(without, abs=0.05)


def test_a_rubin_recipe_is_estimated_for_its_own_architecture(tmp_path):
    """Without --gpu a Rubin recipe is sized against Rubin (its stated capacity's bracket, devices.stated_range;
    tests/test_estimate_stated_capacity.py), and the peak is its architecture's (compute capability 10.7: no FP8
    weight transposes, as on Blackwell), not the default H100's (one per GEMM weight)."""
    result = _estimate(tmp_path)
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    rubin = json.loads(result.output)
    assert any("R100's capacity is not measured" in n for n in rubin["notes"])
    assert not any("either way" in n for n in rubin["notes"])  # the architecture is known: nothing open
    blackwell = json.loads(_estimate(tmp_path, "--gpu", "b200").output)
    hopper = json.loads(_estimate(tmp_path, "--gpu", "h100").output)
    assert blackwell["peak_bytes"] < hopper["peak_bytes"]
    assert rubin["peak_bytes"] == blackwell["peak_bytes"]


def test_a_floor_that_overruns_one_way_only_is_no_sure_oom_in_estimate_either(tmp_path):
    """Both ways overrun the GPU, but the calibrated floor only with the transposes: `estimate`'s verdict line says
    "an OOM even at the floor" of the way it shows, so its note says the floor of the other does not overrun, as
    `check` (which claims an OOM only where every way's floor overruns) reports none."""
    roomy = json.loads(_estimate(tmp_path, "--gpu", "4000").output)
    note = next(n for n in roomy["notes"] if "holds either way" in n)
    assert "an OOM is not sure" not in note
    from offlint.units import load_unit

    loaded = load_unit(str(tmp_path / "recipes.py"), R100, mcore_version="0.20.0")
    inputs = read_inputs(loaded.resolved.get, R100, fp8_transpose=None)
    results = [estimate(v, 2) for v in oom.architectures(inputs)]
    floors = [oom.floor_bytes(r) / GIB for r in results]
    assert floors[0] > floors[1]
    between = (floors[1] + min(floors[0], results[1].peak.total / GIB)) / 2  # the Blackwell floor fits, nothing else
    out = json.loads(_estimate(tmp_path, "--gpu", f"{between + 1.0:.3f}").output)
    assert out["verdict_state"] == "does not fit" and "an OOM even at the floor" in out["verdict"]
    note = next(n for n in out["notes"] if "holds either way" in n)
    assert "without them (Blackwell) its calibrated floor" in note and "an OOM is not sure" in note
