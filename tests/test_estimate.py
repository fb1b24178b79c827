"""The memory model's knobs behave as megatron-core allocates, and `offlint estimate` reads, prints, plots and fails
cleanly. Expected values are derived from the model's own parts (what a knob must change and what it must
leave alone), not copied from its output; agreement with Megatron-LM's numbers is tests/test_estimate_theoretical.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import activations, memory, params
from offlint.estimate.devices import GIB, DeviceError, parse_device
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "estimate"

LLAMA_8B = ModelShape(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                      num_query_groups=8, kv_channels=128, vocab_size=128256, seq_length=8192, gated_linear_unit=True,
                      tied_embeddings=False, rms_norm=True, add_bias_linear=False)
MOE = ModelShape(num_layers=8, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
                 kv_channels=128, vocab_size=151936, seq_length=4096, gated_linear_unit=True, tied_embeddings=False,
                 rms_norm=True, add_bias_linear=False, num_moe_experts=64, moe_ffn_hidden_size=768, moe_router_topk=8)
TRAIN = Training(micro_batch_size=1, global_batch_size=256, distributed_optimizer=True)


def _peak(model=LLAMA_8B, parallel=Parallelism(world_size=8), training=TRAIN) -> memory.StageMemory:
    return memory.estimate(Inputs(model, parallel, training)).peak


def _part(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


def test_distributed_optimizer_shards_master_and_moments_over_data_parallel_and_context_parallel():
    plain = _peak(training=replace(TRAIN, distributed_optimizer=False))
    for parallel, shards in ((Parallelism(world_size=8), 8), (Parallelism(cp=2, world_size=8), 8),
                             (Parallelism(tp=2, world_size=8), 4)):
        sharded = _peak(parallel=parallel)
        reference = _peak(parallel=replace(parallel), training=replace(TRAIN, distributed_optimizer=False))
        assert _part(sharded, "optimizer") == pytest.approx(_part(reference, "optimizer") / shards)
        assert sharded.of("grads") == reference.of("grads")  # the gradient buffer is not sharded
    assert _part(plain, "optimizer: moments") == pytest.approx(2 * _part(plain, "optimizer: fp32 master"))


def test_optimizer_offload_moves_moments_linearly_and_keeps_fp32_master_without_precision_aware():
    base = _peak()
    for fraction in (0.25, 0.5, 1.0):
        offloaded = _peak(training=replace(TRAIN, optimizer_cpu_offload=True, optimizer_offload_fraction=fraction))
        assert _part(offloaded, "optimizer: moments") == pytest.approx((1 - fraction) * _part(base, "optimizer: moments"))
        # F-9: the distributed optimizer's fp32 master shard stays on the GPU.
        assert _part(offloaded, "optimizer: fp32 master") == pytest.approx(_part(base, "optimizer: fp32 master"))
        assert offloaded.host_optimizer_bytes > 0 and offloaded.host_pinned_bytes < offloaded.host_optimizer_bytes


def test_precision_aware_offload_moves_the_master_too():
    collected = replace(TRAIN, manual_gc=True)  # the steady state: no first HybridDeviceOptimizer left
    full = _peak(training=replace(collected, optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,
                                  precision_aware=True))
    assert full.of("optimizer") == 0
    half = _peak(training=replace(collected, optimizer_cpu_offload=True, optimizer_offload_fraction=0.5,
                                  precision_aware=True))
    assert half.of("optimizer") == pytest.approx(0.5 * _peak().of("optimizer"))


def test_without_manual_gc_the_first_hybrid_optimizer_copies_stay():
    """get_megatron_optimizer's first HybridDeviceOptimizer, over all of the rank's 16-bit parameters (not the
    data-parallel shard), stays until garbage collection: fp32 copies of those on the GPU and of those offloaded,
    on the host (measured on an H200: docs/gpu-validation.md)."""
    half = replace(TRAIN, optimizer_cpu_offload=True, optimizer_offload_fraction=0.5)
    lingering = _peak(training=half)
    collected = _peak(training=replace(half, manual_gc=True))
    rank_params = _part(_peak(), "weights") / 2  # bf16 weights of this rank, unsharded over data parallelism
    left = _part(lingering, "optimizer: leftover fp32 copies")
    assert left == pytest.approx(0.5 * rank_params * 4)
    assert lingering.of("optimizer") == pytest.approx(collected.of("optimizer") + left)
    assert lingering.host_optimizer_bytes == pytest.approx(collected.host_optimizer_bytes + 0.5 * rank_params * 4)
    assert _part(collected, "optimizer: leftover") == 0
    everything = _peak(training=replace(half, optimizer_offload_fraction=1.0))
    assert _part(everything, "optimizer: leftover") == 0  # all offloaded: the copies are on the host


def test_precision_aware_without_offload_stores_param_remainders_and_16bit_moments():
    aware = _peak(training=replace(TRAIN, precision_aware=True, exp_avg_bytes=2, exp_avg_sq_bytes=2))
    base = _peak()
    assert _part(aware, "optimizer: master") == pytest.approx(_part(base, "optimizer: fp32 master") / 2)
    assert _part(aware, "optimizer: moments") == pytest.approx(_part(base, "optimizer: moments") / 2)


def test_tensor_and_sequence_parallelism_shard_activations():
    one = _peak(parallel=Parallelism(world_size=8))
    tp = _peak(parallel=Parallelism(tp=4, world_size=8))
    sp = _peak(parallel=Parallelism(tp=4, sequence_parallel=True, world_size=8))
    layers = "activations: transformer layers"
    assert _part(sp, layers) == pytest.approx(_part(one, layers) / 4)
    assert _part(sp, layers) < _part(tp, layers) < _part(one, layers)


def test_context_parallelism_divides_tokens():
    cp = _peak(parallel=Parallelism(cp=4, world_size=8))
    assert _part(cp, "activations: transformer layers") == pytest.approx(
        _part(_peak(), "activations: transformer layers") / 4)


def test_recompute_choices_order_memory():
    def layers(**kw):
        return _part(_peak(training=replace(TRAIN, **kw)), "activations")

    none = layers()
    selective = layers(recompute_granularity="selective", recompute_modules=("core_attn", "layernorm", "mlp"))
    full = layers(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    assert full < selective < none
    # Full recompute keeps one input per layer plus one layer rebuilt during backward.
    per_layer = activations.layer_terms(LLAMA_8B, Parallelism(), TRAIN, moe=False).total
    keep = activations.checkpoint_input(LLAMA_8B, Parallelism(), TRAIN)
    expected = 32 * keep + per_layer + activations.output_terms(LLAMA_8B, Parallelism(), TRAIN) + \
        activations.embedding_terms(LLAMA_8B, Parallelism(), TRAIN)
    assert full == pytest.approx(expected)


def test_layer_offloading_moves_all_but_the_staging_layer():
    per_layer = activations.layer_terms(LLAMA_8B, Parallelism(), TRAIN, moe=False).total
    base = _peak()
    offloaded = _peak(training=replace(TRAIN, cpu_offloading=True, cpu_offloading_num_layers=8))
    layers = "activations: transformer layers"
    assert _part(base, layers) - _part(offloaded, layers) == pytest.approx(7 * per_layer)
    assert offloaded.host_activation_bytes == pytest.approx(8 * per_layer)


def test_fine_grained_offloading_moves_only_the_named_tensors():
    t = replace(TRAIN, fine_grained_offloading=True, offload_modules=("core_attn",))
    layer = activations.layer_terms(LLAMA_8B, Parallelism(), t, moe=False)
    moved = _peak(training=t)
    assert moved.host_activation_bytes == pytest.approx(31 * layer.terms["core_attn_qkv"])


def test_pipeline_in_flight_microbatches_1f1b_and_interleaved():
    assert [memory.microbatches_in_flight(Parallelism(pp=4), s, 64) for s in range(4)] == [4, 3, 2, 1]
    assert memory.microbatches_in_flight(Parallelism(pp=4), 0, 2) == 2
    # Interleaved: 1 + (PP-1)/(PP*VPP) times PP stage-equivalents on the first rank.
    assert memory.microbatches_in_flight(Parallelism(pp=4, vpp=2), 0, 64) == pytest.approx(4 * (1 + 3 / 8))


def test_moe_experts_are_sharded_over_expert_parallelism_and_dispatch_buffers_counted():
    ep1 = _peak(model=MOE, parallel=Parallelism(world_size=8))
    ep8 = _peak(model=MOE, parallel=Parallelism(ep=8, world_size=8))
    experts = MOE.num_layers * MOE.num_moe_experts * params.mlp(MOE, MOE.moe_ffn_hidden_size)
    assert ep1.of("weights") - ep8.of("weights") == pytest.approx(experts * 7 / 8 * 2)
    assert _part(ep8, "MoE dispatch buffers") > 0


def test_devices():
    assert parse_device("h100-80gb").total_gib == pytest.approx(81559 / 1024)
    assert parse_device("96").usable_bytes == pytest.approx(95 * GIB)
    with pytest.raises(DeviceError):
        parse_device("tpu-v5")


# ---- the command ---------------------------------------------------------------------------------------------


def _run(*args):
    return CliRunner().invoke(main, ["estimate", *args], catch_exceptions=False)


@pytest.mark.parametrize("fixture", ["llama31_8b.py", "llama31_70b.py", "qwen3_30b_a3b.py"])
def test_estimate_prints_breakdown_whatif_and_verdict(fixture):
    result = _run(str(FIXTURES / fixture))
    assert result.exit_code == 0, result.output
    for text in ("peak GPU memory", "weights (bf16/fp16)", "gradients (fp32 main grads)", "what if",
                 "optimizer offload", "verdict:"):
        assert text in result.output


def test_estimate_json_is_consistent_with_its_parts():
    result = _run(str(FIXTURES / "qwen3_30b_a3b.py"), "--output-format", "json", "--gpu", "h200")
    data = json.loads(result.output)
    peak = data["stages"][data["peak_stage"]]
    assert sum(p["bytes"] for p in peak["parts"]) == pytest.approx(data["peak_bytes"])
    assert data["active_parameters"] < data["parameters"]
    assert data["device"]["name"] == "h200" and data["world_size"] == 8
    assert sum(o["cheapest_fitting"] for o in data["what_if"]) <= 1


def test_override_and_gpus_change_the_estimate():
    base = json.loads(_run(str(FIXTURES / "llama31_8b.py"), "--output-format", "json").output)
    more = json.loads(_run(str(FIXTURES / "llama31_8b.py"), "--output-format", "json", "--gpus", "8",
                           "--override", "model.recompute_granularity=full", "--override",
                           "model.recompute_method=uniform", "--override", "model.recompute_num_layers=1").output)
    assert more["data_parallel"] == 4 and more["peak_bytes"] < base["peak_bytes"]


def test_plot_writes_a_png(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    out = tmp_path / "whatif.png"
    result = _run(str(FIXTURES / "llama31_70b.py"), "--plot", str(out))
    assert result.exit_code == 0, result.output
    pixels = image.imread(out)
    assert pixels.shape[0] > 400 and pixels.shape[1] > 800


@pytest.mark.parametrize(("args", "expected"), [
    (["missing.py"], "no such file"),
    ([str(FIXTURES / "llama31_8b.py"), "--gpu", "tpu"], "unknown GPU"),
    ([str(FIXTURES / "llama31_8b.py"), "--override", "model.hidden_size=${oc.env:H}"], "cannot estimate without"),
    ([str(FIXTURES / "llama31_8b.py"), "--gpus", "3"], "3 GPUs cannot be divided"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, expected):
    result = CliRunner().invoke(main, ["estimate", *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("offlint: error:") and expected in lines[0], result.output


def test_check_does_not_import_torch(tmp_path):
    """OFL303/OFL304 run the estimate inside `offlint check`, which must stay light."""
    (tmp_path / "recipe.py").write_text((FIXTURES / "llama31_70b.py").read_text())
    code = ("import sys; from offlint.api import CheckOptions, check; "
            f"r = check([{str(tmp_path / 'recipe.py')!r}], CheckOptions(select=['OFL303', 'OFL304'])); "
            "assert 'torch' not in sys.modules and 'megatron' not in sys.modules, 'heavy import'; "
            "print(len(r.findings))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_recipe_that_names_its_gpu_is_sized_against_it():
    from offlint.estimate import oom

    assert oom.device_for("llama3_8b_pretrain_8gpu_b200_bf16_config").name == "b200"
    assert oom.device_for("qwen3_30b_a3b_pretrain_8gpu_h100_fp8cs_config").name == "h100-80gb"
    assert oom.device_for("llama3_8b_pretrain_8gpu_gb300_bf16_config").name == "gb300"
    assert oom.device_for("llama3_8b_pretrain_8gpu_vr200_bf16_config").name.startswith("vr200 (at least")  # a bracket
    assert oom.device_for("my_recipe_config") == oom.device()  # no GPU in the name: the configured one


def test_a_mixed_precision_config_record_sets_half_precision_parameters(tmp_path, monkeypatch):
    """Bridge perf recipes assign `cfg.mixed_precision = _perf_precision("bf16")`, a MixedPrecisionConfig built
    by bf16_mixed(): the parameters are bf16, as with the string "bf16_mixed"."""
    from offlint.estimate.inputs import read_inputs
    from offlint.units import load_unit

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "precision.py").write_text(
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass MixedPrecisionConfig:\n    bf16: bool = False\n    fp16: bool = False\n\n"
        "def bf16_mixed():\n    return MixedPrecisionConfig(bf16=True)\n")
    (tmp_path / "recipe.py").write_text(
        "from precision import bf16_mixed\n\n"
        "def record_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=4, hidden_size=256, num_attention_heads=4,\n"
        "                          vocab_size=1024, seq_length=128), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.mixed_precision = bf16_mixed()\n    return cfg\n\n"
        "def string_config():\n    cfg = record_config()\n    cfg.mixed_precision = 'bf16_with_mxfp8_mixed'\n    return cfg\n\n"
        "def fp32_config():\n    cfg = record_config()\n    cfg.mixed_precision = None\n    cfg.model.bf16 = False\n    return cfg\n")
    for name, params_bytes in (("record_config", 2), ("string_config", 2), ("fp32_config", 4)):
        loaded = load_unit("recipe.py", name, mcore_version="0.20.0")
        assert read_inputs(loaded.resolved.get, name).training.params_bytes == params_bytes, name


def test_full_recompute_counts_its_layers_per_virtual_pipeline_chunk():
    """megatron-core recomputes within each TransformerBlock, and with VPP every chunk is its own block: block
    recompute of 1 layer on 2 layers per chunk recomputes one layer of each chunk, not one of the stage."""
    model = replace(LLAMA_8B, num_layers=8)
    parallel = Parallelism(pp=2, vpp=2, world_size=2)
    training = replace(TRAIN, global_batch_size=64, recompute_granularity="full", recompute_method="block",
                       recompute_num_layers=1)
    stage = memory.estimate(Inputs(model, parallel, training)).stages[0]
    layer = activations.layer_terms(model, parallel, training, False).total
    keep = activations.checkpoint_input(model, parallel, training)
    per_stage = 2 * (keep + layer)  # two chunks, each: one recomputed layer's input plus one whole layer
    assert _part(stage, "activations: transformer layers") == pytest.approx(per_stage * stage.microbatches_in_flight)


def test_estimate_says_what_check_warns_of_the_version(tmp_path, monkeypatch):
    """A version named that is not the tree's own checkout's (versions._named_over): `check` warns of it, and
    `estimate` says it among its notes, as it says where the version came from."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "megatron" / "core").mkdir(parents=True)
    (tmp_path / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 16\nPATCH = 0\n")
    (tmp_path / "recipe.py").write_text((FIXTURES / "llama31_8b.py").read_text())
    monkeypatch.chdir(tmp_path)
    data = json.loads(_run("recipe.py", "--mcore-version", "0.20.0", "--output-format", "json").output)
    assert any(note.startswith("--mcore-version names megatron-core 0.20.0, but the tree's own "
                               "megatron/core/package_info.py is 0.16.0") for note in data["notes"])
    data = json.loads(_run("recipe.py", "--output-format", "json").output)
    assert not any("names megatron-core" in note for note in data["notes"])
