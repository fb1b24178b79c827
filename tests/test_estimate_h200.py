"""`offlint estimate` against the peaks measured on an H200 (tests/data/replay/h200-*.json, docs/gpu-validation.md).

The replays ran megatron-core's local spec (no Transformer Engine on that machine), whose attention is unfused,
GPTModel's untied output layer, and no garbage collection before training; the estimate is told the same with
three overrides. Its model state and
activations (everything but the allowance) must be within 10% of each run's peak allocated memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import activations, inputs
from offlint.estimate.shapes import ModelShape, Parallelism, Training

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "replay"
# those runs (c343913) had no train.manual_gc: the first HybridDeviceOptimizer's copies stayed
AS_REPLAYED = ("model.share_embeddings_and_output_weights=false", "model.attention_backend=local",
               "train.manual_gc=false")
GPT_1B = str(ROOT / "fixtures" / "replay" / "gpt_1b_recipes.py")
TINY = str(ROOT / "fixtures" / "replay" / "tiny_gpt_recipes.py")


def _measured_runs():
    big = json.loads((DATA / "h200-1b-sweep.json").read_text())
    tiny = json.loads((DATA / "h200-tiny-sweep.json").read_text())
    yield "1.35B no offload", GPT_1B, "gpt_1b_config", (), big["baseline"]
    for fraction, run in big["runs"].items():
        yield (f"1.35B fraction {fraction}", GPT_1B, "gpt_1b_optimizer_offload_config",
               (f"optimizer.optimizer_offload_fraction={fraction}",), run)
    yield "1.35B precision-aware", GPT_1B, "gpt_1b_precision_aware_offload_config", (), big["pa-offload"]
    yield ("167M no offload", TINY, "tiny_gpt_optimizer_offload_config",
           ("optimizer.optimizer_cpu_offload=false", "model.vocab_size=32768"), tiny["baseline"])
    for fraction, run in tiny["runs"].items():
        yield (f"167M fraction {fraction}", TINY, "tiny_gpt_optimizer_offload_config",
               (f"optimizer.optimizer_offload_fraction={fraction}", "model.vocab_size=32768"), run)


def _peak_stage(config: str, recipe: str, overrides: tuple[str, ...]) -> dict:
    """`offlint estimate`'s JSON for the busiest stage of one recipe on one H200, told what the replay ran."""
    args = ["estimate", config, "--recipe", recipe, "--gpu", "h200", "--gpus", "1", "--output-format", "json"]
    for override in AS_REPLAYED + overrides:
        args += ["--override", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    return report["stages"][report["peak_stage"]]


@pytest.mark.parametrize("name, config, recipe, overrides, measured", list(_measured_runs()),
                         ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_the_estimate_without_allowance_is_within_10_percent_of_the_measured_peak(name, config, recipe, overrides,
                                                                                  measured):
    parts = _peak_stage(config, recipe, overrides)["parts"]
    floor = sum(p["bytes"] for p in parts if p["kind"] != "allowance")
    peak = max(measured["peak_allocated_bytes"])
    assert abs(floor / peak - 1) < 0.10, f"{name}: estimated {floor / 2**30:.2f} GiB, measured {peak / 2**30:.2f}"


@pytest.mark.parametrize("name, config, recipe, overrides, measured",
                         [run for run in _measured_runs() if run[4]["offload"]["optimizer"].get("offloaded_param_numel")],
                         ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_the_host_memory_is_within_10_percent_of_what_the_offload_added(name, config, recipe, overrides, measured):
    """The host's peak resident set less the run without offloading's (the process itself): the hybrid
    optimizer's fp32 copies, moments and gradient copies, and the first one's leftover fp32 copies."""
    baseline = json.loads((DATA / ("h200-1b-sweep.json" if config == GPT_1B else "h200-tiny-sweep.json"))
                          .read_text())["baseline"]
    host = _peak_stage(config, recipe, overrides)["host_optimizer_bytes"]
    added = measured["host_peak_rss_bytes"] - baseline["host_peak_rss_bytes"]
    assert abs(host / added - 1) < 0.10, f"{name}: estimated {host / 2**30:.2f} GiB, measured {added / 2**30:.2f}"


def test_unfused_attention_keeps_the_scores_and_recompute_drops_them():
    shape = ModelShape(num_layers=2, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
                       num_query_groups=16, kv_channels=64, vocab_size=32768, seq_length=1024)
    flash = activations.layer_terms(shape, Parallelism(tp=2), Training(), moe=False)
    unfused_shape = ModelShape(**{**shape.__dict__, "unfused_score_bytes": 7})
    unfused = activations.layer_terms(unfused_shape, Parallelism(tp=2), Training(), moe=False)
    assert "core_attn_scores" not in flash.terms
    assert unfused.terms["core_attn_scores"] == 7 * 1024 * 1024 * 16 / 2  # tokens x keys x heads / TP
    assert unfused.without(activations.RECOMPUTE_DROPS["core_attn"]).total == flash.total


def test_unfused_scores_belong_to_attention_layers_only():
    """A hybrid model's attention layer keeps the scores (Falcon-H1's provider defaults to unfused attention);
    its MLP, MoE and gated-delta-net layers do not."""
    shape = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
                       num_query_groups=16, kv_channels=64, vocab_size=32768, seq_length=1024,
                       hybrid_pattern="M*-E", num_moe_experts=4, moe_ffn_hidden_size=1024, unfused_score_bytes=7,
                       mamba_num_heads=32, mamba_head_dim=64, mamba_num_groups=8, mamba_state_dim=128)
    for kind in "*-E":
        terms = activations.layer_terms(shape, Parallelism(), Training(), moe=kind == "E", hybrid=kind).terms
        assert ("core_attn_scores" in terms) is (kind == "*"), kind
    gdn = activations.layer_terms(ModelShape(**{**shape.__dict__, "hybrid_pattern": None}), Parallelism(),
                                  Training(), moe=False, gdn=True).terms
    assert "core_attn_scores" not in gdn


@pytest.mark.parametrize("backend, fp32, dropout, expected", [
    ("auto", True, 0.1, 0), ("flash", True, 0.1, 0), ("AttnBackend.fused", True, 0.1, 0),
    ("local", True, 0.1, 7), ("AttnBackend.unfused", True, 0.1, 7), ("unfused", False, 0.1, 5),
    ("local", True, 0.0, 6), ("local", False, 0.0, 2)])
def test_unfused_score_bytes(backend, fp32, dropout, expected):
    assert inputs.unfused_score_bytes(backend, fp32, dropout) == expected
