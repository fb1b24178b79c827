"""`replay --verify` criteria and the fraction sweep, judged on recorded results.

tests/data/replay holds hand-written results shaped like a real single-GPU run (baseline.json,
offloaded-1.0.json), where each failing case below changes the one thing its criterion looks at, and sweeps
measured on an H200 (h200-*.json, scripts/gpu_replay_check.sh and gpu_validation_1b.sh, docs/gpu-validation.md).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from offlint.outcomes import Outcome, REPLAY_EXIT_CODES
from offlint.replay import sweep, verify
from offlint.replay.mapping import map_unit
from offlint.units import load_unit

DATA = Path(__file__).resolve().parent / "data" / "replay"


@pytest.fixture
def baseline():
    return json.loads((DATA / "baseline.json").read_text())


@pytest.fixture
def offloaded():
    return json.loads((DATA / "offloaded-1.0.json").read_text())


def failed(criteria):
    return [c.name for c in criteria if not c.passed]


def test_a_good_offload_passes_every_criterion(baseline, offloaded):
    criteria = verify.check(baseline, offloaded)
    assert len(criteria) == 5 and failed(criteria) == []
    assert verify.verdict(criteria) == (Outcome.PASS, 0)


def test_rejected_configuration_fails_validation(baseline, offloaded):
    offloaded |= {"outcome": "crash", "phase": "config",
                  "signature": "ValueError: CPU offloading does not work when activation recomputation is enabled"}
    criteria = verify.check(baseline, offloaded)
    assert failed(criteria) == ["configuration validation passes", "training completes without OOM or NCCL errors"]
    assert "activation recomputation" in criteria[1].detail
    assert verify.verdict(criteria) == (Outcome.CRASH, REPLAY_EXIT_CODES[Outcome.CRASH])


@pytest.mark.parametrize("outcome", [Outcome.CUDA_OOM, Outcome.NCCL_ERROR])
def test_oom_or_nccl_error_fails_completion(baseline, offloaded, outcome):
    offloaded |= {"outcome": outcome.value, "phase": "train", "signature": "x"}
    criteria = verify.check(baseline, offloaded)
    assert failed(criteria) == ["training completes without OOM or NCCL errors"]
    assert verify.verdict(criteria) == (outcome, REPLAY_EXIT_CODES[outcome])


def test_a_failing_baseline_is_reported_first(baseline, offloaded):
    baseline |= {"outcome": "cuda-oom", "signature": "OutOfMemoryError: CUDA out of memory"}
    criteria = verify.check(baseline, offloaded)
    assert failed(criteria) == ["baseline runs"]
    assert verify.verdict(criteria)[0] is Outcome.CUDA_OOM


def test_loss_delta_just_over_the_tolerance_fails(baseline, offloaded):
    offloaded["loss"][7] = baseline["loss"][7] + 1.01 * verify.LOSS_TOLERANCE
    criteria = verify.check(baseline, offloaded)
    assert failed(criteria) == ["loss matches the baseline"]
    assert verify.verdict(criteria) == (Outcome.LOSS_DIVERGENCE, REPLAY_EXIT_CODES[Outcome.LOSS_DIVERGENCE])


def test_missing_iterations_cannot_match(baseline, offloaded):
    offloaded["loss"] = offloaded["loss"][:10]
    assert "cannot compare" in verify.loss_criterion(baseline, offloaded).detail


def test_memory_that_does_not_drop_with_the_fraction_fails(baseline, offloaded):
    offloaded["peak_allocated_bytes"] = [baseline["peak_allocated_bytes"][0] - 200 * 2**20]
    criteria = verify.check(baseline, offloaded)
    assert failed(criteria) == ["peak memory drops in proportion to the offload fraction"]
    assert verify.verdict(criteria)[0] is Outcome.MEMORY_REGRESSION


def test_the_expected_drop_is_the_offloaded_moments(baseline, offloaded):
    report = offloaded["offload"]["optimizer"]
    assert verify.expected_drop(baseline, offloaded) == 8 * report["offloaded_param_numel"]
    report["offloaded_param_numel"] //= 4
    assert verify.expected_drop(baseline, offloaded) == 8 * report["offloaded_param_numel"]
    offloaded["config"]["optimizer"] = {"use_precision_aware_optimizer": True}  # the fp32 master moves too
    assert verify.expected_drop(baseline, offloaded) == 12 * report["offloaded_param_numel"]


def _measured(name):
    report = json.loads((DATA / name).read_text())
    return report["baseline"], {float(k): v for k, v in report["runs"].items()}, report


@pytest.mark.parametrize("name", ["h200-tiny-sweep.json", "h200-1b-sweep.json"])
def test_the_model_explains_every_measured_h200_fraction(name):
    """Measured on an H200 (megatron-core 0.19.2): each fraction's drop is the offloaded moments less what the
    first HybridDeviceOptimizer left on the GPU, to 0.02 GiB; at fraction 1 nothing lingers and it passes."""
    base, runs, _ = _measured(name)
    for fraction, run in runs.items():
        expected, lingering = verify.expected_drop(base, run), verify.lingering_bytes(base, run)
        drop = verify.peak_bytes(base) - verify.peak_bytes(run)
        assert abs(drop - (expected - lingering)) < 0.02 * 2**30, fraction
        criterion = verify.memory_criterion(base, run)
        assert criterion.passed is (fraction == 1.0), (fraction, criterion.detail)
        assert ("first HybridDeviceOptimizer" in criterion.detail) is (fraction < 1.0)


@pytest.mark.parametrize("name", ["h200-tiny-sweep-manual-gc.json", "h200-1b-half-manual-gc.json",
                                  "h200-1b-full-manual-gc.json"])
def test_with_manual_gc_every_measured_fraction_drops_exactly_the_moments(name):
    """Measured on an H200 on 2026-12-04 with train.manual_gc on (the replay runs gc.collect() before training):
    every fraction's drop is the offloaded moments to 0.01 GiB, and each passes, fraction 0 too (its peak rose
    by 50 KiB, the hybrid optimizer's small per-tensor state, where nothing is expected to drop)."""
    base, runs, _ = _measured(name)
    for fraction, run in runs.items():
        drop = verify.peak_bytes(base) - verify.peak_bytes(run)
        assert abs(drop - verify.expected_drop(base, run)) < 0.01 * 2**30, fraction
        criterion = verify.memory_criterion(base, run)
        assert criterion.passed, (fraction, criterion.detail)
        assert "first HybridDeviceOptimizer" not in criterion.detail, (fraction, criterion.detail)


@pytest.mark.parametrize("name", ["h200-1b-sweep.json", "h200-1b-full-manual-gc.json"])
def test_the_measured_precision_aware_offload_frees_the_master_too(name):
    base, _, report = _measured(name)
    run = report["pa-offload"]
    drop = verify.peak_bytes(base) - verify.peak_bytes(run)
    assert abs(drop / verify.expected_drop(base, run) - 1) < 0.01
    assert verify.memory_criterion(base, run).passed


def test_nothing_through_an_offload_path_fails_memory_and_says_why(baseline, offloaded):
    offloaded["offload"] = copy.deepcopy(baseline["offload"])
    offloaded["offload"]["activation"] = {"requested": ["cpu_offloading"], "replayed": False,
                                          "note": "activation offloading could not be replayed: Transformer Engine"}
    criterion = verify.memory_criterion(baseline, offloaded)
    assert not criterion.passed and "Transformer Engine" in criterion.detail


def test_baseline_and_fraction_specs_switch_only_offloading():
    spec = map_unit(load_unit("fixtures/replay/tiny_gpt_recipes.py", "tiny_gpt_activation_offload_config").resolved)
    base = verify.baseline_spec(spec)
    assert not base.optimizer["optimizer_cpu_offload"] and "cpu_offloading" not in base.model
    assert spec.model["cpu_offloading"] is True  # the original is untouched
    half = verify.fraction_spec(spec, 0.5)
    assert half.optimizer["optimizer_offload_fraction"] == 0.5 and half.optimizer["optimizer_cpu_offload"]
    assert verify.offloads_anything(spec) and not verify.offloads_anything(base)


def _sweep_runs(baseline, offloaded):
    """Fraction f: the recorded offload with f of the parameters and their moments moved; 0.75 is an OOM."""
    runs = {}
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        run = copy.deepcopy(offloaded)
        report = run["offload"]["optimizer"]
        report["offloaded_share"] = fraction
        report["offloaded_param_numel"] = int(fraction * report["param_numel"])
        run["peak_allocated_bytes"] = [baseline["peak_allocated_bytes"][0] - 8 * report["offloaded_param_numel"]]
        runs[fraction] = run
    runs[0.75] |= {"outcome": "cuda-oom", "signature": "OutOfMemoryError: CUDA out of memory", "phase": "train"}
    return runs


def test_sweep_rows_and_table(baseline, offloaded):
    rows = sweep.rows(baseline, _sweep_runs(baseline, offloaded))
    assert [r.label for r in rows] == ["off", "0", "0.25", "0.5", "0.75", "1"]
    assert [r.verdict for r in rows] == ["pass", "pass", "pass", "pass", "cuda-oom", "pass"]
    assert rows[2].expected_drop == 8 * int(0.25 * offloaded["offload"]["optimizer"]["param_numel"])
    assert rows[5].loss_delta == verify.max_loss_delta(baseline, offloaded)
    text = sweep.table(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows)
    peak = (baseline["peak_allocated_bytes"][0] - 8 * offloaded["offload"]["optimizer"]["param_numel"]) / 2**30
    assert lines[-1].startswith(f"| 1 | pass | {peak:.3f} |")
    slowdown = verify.median_step_s(offloaded) / verify.median_step_s(baseline)
    assert f"{slowdown:.2f}x" in lines[-1]


def test_sweep_plot_is_a_png_of_the_expected_size(tmp_path, baseline, offloaded):
    from matplotlib import image

    rows = sweep.rows(baseline, _sweep_runs(baseline, offloaded))
    path = sweep.plot(rows, tmp_path / "sweep.png", title="tiny_gpt")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(path)
    assert pixels.shape[:2] == (400, 1000)
    assert pixels[..., :3].std() > 0.05  # something was drawn


@pytest.mark.parametrize("text, message", [
    ("0,1.5", "outside [0, 1]"), ("a", "not a number"), (",", "at least one fraction"),
])
def test_bad_fraction_lists(text, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        sweep.parse_fractions(text)


def test_fraction_list_is_sorted_and_deduplicated():
    assert sweep.parse_fractions("1, 0.5,0,0.5") == [0.0, 0.5, 1.0]


def test_a_result_that_cannot_be_written_is_one_line_that_says_where_the_runs_are(tmp_path, monkeypatch, capsys,
                                                                                  baseline, offloaded):
    """After the GPU runs (faked here with the recorded results), a --result-json that cannot be written (a folder
    where a file is) had ended in an internal error; the sweep's plot comes after its JSON, so it loses no run."""
    from offlint.replay import command

    runs = iter([baseline, baseline, *(_sweep_runs(baseline, offloaded)[f] for f in (0.0, 1.0))])  # replay, sweep
    monkeypatch.setattr(command, "_run", lambda *args, **kwargs: next(runs))
    (tmp_path / "file").write_text("")
    spec = map_unit(load_unit("fixtures/replay/tiny_gpt_recipes.py", "tiny_gpt_activation_offload_config").resolved)
    with pytest.raises(SystemExit) as ended:
        command._replay(spec, tmp_path / "run", 1, 60.0, str(tmp_path / "file" / "result.json"))
    assert ended.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"offlint: error: {tmp_path / 'file' / 'result.json'}: cannot write the result (")
    assert line.endswith(f"); each run's rank results and logs are in {tmp_path / 'run'}")
    with pytest.raises(SystemExit):
        command._sweep(spec, [0.0, 1.0], tmp_path / "sweep", 1, 60.0, None, str(tmp_path / "file" / "sweep.png"))
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["rows"][-1]["fraction"] == 1.0
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"offlint: error: {tmp_path / 'file' / 'sweep.png'}: cannot write the plot (")
