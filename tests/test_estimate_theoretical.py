"""offlint's memory model agrees with Megatron-LM's own theoretical memory model within 1%.

`tests/data/theoretical_memory.json` holds numbers that scripts/record_theoretical_memory.py recorded by running
Megatron-LM's real functions (commit and file hash in the file). With OFFLINT_MLM_SRC pointing at a Megatron-LM
tree, the same functions are also called live. Compared: weights + gradients + optimizer states of the first
pipeline stage (Megatron-LM's "most loaded shard") for dense, GQA and MoE layouts; activations of the first stage
where Megatron-LM's formulas apply (multi-head attention, ffn = 4h, GeLU, dropout). Its non-sequence-parallel
formula multiplies by a flat 1.05 for temporaries, which offlint keeps in its separate allowance, so that
factor is applied to offlint's figure before comparing. Multi-latent attention and multi-token prediction are
compared on weights and optimizer only (Megatron-LM has no activation terms for them), at TP1 for MLA (its
formula splits all of MLA over TP, where the Transformer Engine spec duplicates the down projections) and PP1
for MTP; Megatron-LM's MTP term leaves out eh_proj and the MTP norms, added to its figure (_mtp_left_out_bytes).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training
from offlint.estimate.memory import estimate

ROOT = Path(__file__).resolve().parent.parent
RECORDED = json.loads((ROOT / "tests" / "data" / "theoretical_memory.json").read_text())
TOLERANCE = 0.01


def _inputs(config: dict) -> Inputs:
    model = dict(config["model"])
    if isinstance(model.get("moe_layer_freq"), list):
        model["moe_layer_freq"] = tuple(model["moe_layer_freq"])
    return Inputs(ModelShape(**model), Parallelism(**config["parallel"]), Training(**config["training"]))


def _ours(config: dict) -> dict:
    training = config["training"]
    inputs = _inputs(config)
    nmb = config["num_microbatches"]
    gbs = nmb * training["micro_batch_size"] * inputs.parallel.data_parallel(inputs.parallel.world_size)
    inputs = inputs.with_(training=Training(**training, global_batch_size=gbs))
    first = estimate(inputs).stages[0]
    activations = sum(p.bytes for p in first.parts if p.name.startswith("activations:"))
    return {"weight_and_optimizer_bytes": first.of("weights") + first.of("grads") + first.of("optimizer"),
            "activation_bytes": activations}


def _mtp_left_out_bytes(config: dict) -> float:
    """Megatron-LM's formula counts an MTP depth as one transformer layer; megatron-core's MTP layer also holds
    eh_proj (2h x h, split over TP) and three norms (enorm, hnorm, final_layernorm), which offlint counts (equal
    to real models: tests/test_estimate_params_mla_mtp.py). Their bytes on a rank, at Megatron-LM's own bytes
    per parameter (bf16 weight, fp32 gradient, 12 bytes of Adam state sharded by the distributed optimizer)."""
    m, p, t = config["model"], config["parallel"], config["training"]
    depths = m.get("mtp_num_layers") or 0
    h = m["hidden_size"]
    per_rank = depths * (2 * h * h / p["tp"] + 3 * h * (1 if m["rms_norm"] else 2))
    dp = p["world_size"] // (p["tp"] * p["pp"])
    return per_rank * (6 + 12 / dp if t["distributed_optimizer"] else 18)


def _compare(config: dict, theirs: dict) -> None:
    ours = _ours(config)
    w = ours["weight_and_optimizer_bytes"] / (theirs["weight_and_optimizer_bytes"] + _mtp_left_out_bytes(config))
    assert abs(w - 1) <= TOLERANCE, f"{config['name']}: weights+optimizer ratio {w:.4f}"
    if "activations" in config["compare"]:
        mine = ours["activation_bytes"]
        if theirs["activation_function"] == "compute_activation_memory_without_sp":
            mine *= 1.05
        a = mine / theirs["activation_bytes"]
        assert abs(a - 1) <= TOLERANCE, f"{config['name']}: activation ratio {a:.4f}"


@pytest.mark.parametrize("record", RECORDED["records"], ids=[r["config"]["name"] for r in RECORDED["records"]])
def test_agrees_with_recorded_megatron_lm_numbers(record):
    _compare(record["config"], record["megatron_lm"])


def test_recording_has_provenance():
    provenance = RECORDED["provenance"]
    assert len(provenance["commit"]) == 40 and provenance["file"].endswith("theoretical_memory_usage.py")
    assert {"weights", "activations"} <= {c for r in RECORDED["records"] for c in r["config"]["compare"]}


def _recorder():
    spec = importlib.util.spec_from_file_location("record_theoretical_memory",
                                                  ROOT / "scripts" / "record_theoretical_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_configurations_are_the_scripts():
    """The JSON was produced from the script's current configuration list (rerun the script after editing it)."""
    assert [r["config"] for r in RECORDED["records"]] == json.loads(json.dumps(_recorder().CONFIGS))


@pytest.mark.skipif(not os.environ.get("OFFLINT_MLM_SRC"),
                    reason="set OFFLINT_MLM_SRC=/path/to/Megatron-LM to call its theoretical memory model live")
def test_agrees_with_live_megatron_lm():
    recorder = _recorder()
    module = recorder.load_module(Path(os.environ["OFFLINT_MLM_SRC"]))
    for config in recorder.CONFIGS:
        _compare(config, recorder.run(module, config))
