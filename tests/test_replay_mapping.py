"""Replay mapping: resolved units -> megatron-core kwargs, accepted by the real megatron-core (0.16.1 on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offlint.replay.mapping import MappingError, Shrink, map_unit, minimal_data_parallel
from offlint.units import load_unit

ROOT = Path(__file__).resolve().parent.parent
RECIPES = "fixtures/replay/tiny_gpt_recipes.py"
GOOD = "fixtures/good/recipes/llama_offload.py"


def spec_of(config, recipe=None, overrides=(), shrink=None, **kwargs):
    return map_unit(load_unit(config, recipe, overrides).resolved, shrink, **kwargs)


def test_recipe_values_reach_each_megatron_core_section():
    spec = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config")
    assert spec.model["num_layers"] == 8 and spec.model["hidden_size"] == 1024
    assert spec.model["bf16"] and spec.model["params_dtype"] == "torch.bfloat16"
    assert spec.optimizer["optimizer_cpu_offload"] and spec.optimizer["optimizer_offload_fraction"] == 1.0
    assert spec.optimizer["use_distributed_optimizer"] is spec.ddp["use_distributed_optimizer"] is True
    assert "seq_length" not in spec.model and spec.train["seq_length"] == 1024
    assert spec.world_size == 1


def test_shrink_options_replace_the_recipe_sizes():
    spec = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config",
                   shrink=Shrink(num_layers=2, hidden_size=128, seq_length=64, micro_batch_size=2,
                                 global_batch_size=8))
    assert (spec.model["num_layers"], spec.model["hidden_size"], spec.train["seq_length"]) == (2, 128, 64)
    assert spec.train["num_microbatches"] == 4


def test_overrides_set_the_batch_sizes_of_the_train_section():
    spec = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config",
                   overrides=["train.micro_batch_size=2", "train.global_batch_size=4"])
    assert spec.train["micro_batch_size"] == 2 and spec.train["num_microbatches"] == 2


def test_a_launch_script_keeps_megatron_lm_defaults_that_differ_from_the_dataclass():
    """--optimizer-cpu-offload without a fraction offloads everything on the CLI (argparse default 1.0)."""
    spec = spec_of("fixtures/good/launch/megatron_lm_pretrain.sh",
                   shrink=Shrink(hidden_size=256, seq_length=128),
                   overrides=["model.num_attention_heads=4"])
    assert spec.optimizer["optimizer_offload_fraction"] == 1.0


def test_the_default_fraction_is_kept_and_explained():
    spec = spec_of(RECIPES, "tiny_gpt_default_fraction_config")
    assert "optimizer_offload_fraction" not in spec.optimizer
    assert any("offloads nothing" in note for note in spec.notes)


@pytest.mark.parametrize("config, recipe, message", [
    ("fixtures/good/conf/llama32_1b_override.yaml", None,
     "replay needs values for model.num_layers, model.hidden_size, model.num_attention_heads, model.seq_length"),
    (GOOD, "llama3_8b_optimizer_offload_config", "--override model.seq_length=VALUE (or --seq-length N)"),
    (RECIPES, "tiny_gpt_fraction_from_env_config", "--override optimizer.optimizer_offload_fraction=VALUE"),
    (RECIPES, "tiny_gpt_mismatched_distopt_config", "--override ddp.use_distributed_optimizer=true"),
])
def test_unknown_or_contradictory_values_are_one_line_errors(config, recipe, message):
    with pytest.raises(MappingError) as info:
        spec_of(config, recipe)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("key", ["tensor_model_parallel_size", "pipeline_model_parallel_size",
                                 "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size"])
@pytest.mark.parametrize("value", ["0", "-2", "0.5"])
def test_a_parallel_size_that_is_no_whole_count_is_a_one_line_error(key, value):
    # (tensor_model_parallel_size=0 had ended `replay --dry-run` in a division by zero)
    with pytest.raises(MappingError) as info:
        spec_of(RECIPES, "tiny_gpt_optimizer_offload_config", overrides=[f"model.{key}={value}"])
    assert str(info.value).endswith(f"model.{key} is {float(value) if '.' in value else int(value)!r}; a parallel "
                                    f"size is a whole number of at least 1 (add --override model.{key}=N)")


def test_a_shrink_option_supplies_a_missing_size():
    spec = spec_of(GOOD, "llama3_8b_optimizer_offload_config", shrink=Shrink(seq_length=256))
    assert spec.train["seq_length"] == 256


def test_global_batch_must_divide_into_micro_batches():
    with pytest.raises(MappingError, match="pass --global-batch-size 2"):
        spec_of(RECIPES, "tiny_gpt_optimizer_offload_config", shrink=Shrink(micro_batch_size=2, global_batch_size=3))


def test_expert_parallelism_sets_the_smallest_data_parallel_size():
    spec = spec_of(RECIPES, "tiny_moe_ep4_config")
    assert spec.parallel["data_parallel_size"] == 4 and spec.world_size == 4
    assert minimal_data_parallel({"tensor_model_parallel_size": 2, "context_parallel_size": 1,
                                  "expert_model_parallel_size": 4, "expert_tensor_parallel_size": 1}) == 2


def test_megatron_core_accepts_the_mapped_kwargs():
    from offlint.replay import build

    spec = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config", overrides=["model.pipeline_model_parallel_size=2"])
    model, optimizer, ddp, dropped = build.build_configs(spec.to_json(), cpu=True)
    assert dropped == []
    assert model.num_layers == 8 and model.pipeline_model_parallel_size == 2
    assert str(model.pipeline_dtype) == "torch.bfloat16"
    assert optimizer.optimizer_cpu_offload and optimizer.optimizer_offload_fraction == 1.0
    assert ddp.use_distributed_optimizer == optimizer.use_distributed_optimizer


def test_megatron_core_rejection_reaches_the_replay_unchanged():
    """No TE on CPU: megatron-core 0.16.1 raises on use_precision_aware_optimizer (OC-4), as a real run would."""
    from offlint.replay import build

    spec = spec_of(GOOD, "llama3_8b_optimizer_offload_config", shrink=Shrink(seq_length=128))
    assert spec.optimizer["use_precision_aware_optimizer"] is True
    with pytest.raises(TypeError, match="not supported between instances of 'NoneType' and 'Version'"):
        build.build_configs(spec.to_json(), cpu=True)


def test_activation_offload_without_te_is_switched_off_and_reported():
    from offlint.replay import build

    spec = spec_of(RECIPES, "tiny_gpt_activation_offload_config")
    kwargs, report = build.activation_offload(spec.model, te_available=False)
    assert "cpu_offloading" not in kwargs and report["replayed"] is False
    assert "Transformer Engine is not installed" in report["note"]
    kept, report = build.activation_offload(spec.model, te_available=True)
    assert kept["cpu_offloading"] is True and report["replayed"] is True


BUILD_ON_CPU = textwrap.dedent("""
    import json, os, sys, torch
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
    torch.distributed.init_process_group("gloo")
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel()
    from offlint.replay import build
    spec = json.load(open(sys.argv[1]))
    config, _, _, _ = build.build_configs(spec, cpu=True)
    layer_spec, name = build.layer_spec(config, te_available=False)
    model = build.build_model(config, spec, layer_spec)
    print(json.dumps({"spec": name, "params": sum(p.numel() for p in model.parameters())}))
""")


def _free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.mark.slow
def test_the_model_a_rank_builds_has_the_mapped_size(tmp_path):
    """GPTModel built on CPU (gloo, local spec) from the mapped spec: its parameter count follows the shape."""
    spec = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config", shrink=Shrink(num_layers=2, hidden_size=64,
                                                                                seq_length=32))
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_json()))
    out = subprocess.run([sys.executable, "-c", BUILD_ON_CPU, str(path), _free_port()], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    built = json.loads(out.stdout.strip().splitlines()[-1])
    h, layers, vocab, seq = 64, 2, spec.train["vocab_size"], spec.train["seq_length"]
    per_layer = 12 * h * h + 13 * h  # two LayerNorms, QKV + projection, 4h MLP, all with biases
    # word and position embeddings, the layers, the final norm; the output layer shares the word embedding (Bridge's
    # and Megatron-LM's default, which the recipe leaves as is; GPTModel's own default would add vocab x h)
    assert spec.gpt["share_embeddings_and_output_weights"] is True
    expected = vocab * h + seq * h + layers * per_layer + 2 * h
    assert built == {"spec": "local", "params": expected}
    untied = spec_of(RECIPES, "tiny_gpt_optimizer_offload_config",
                     overrides=["model.share_embeddings_and_output_weights=false"])
    assert untied.gpt["share_embeddings_and_output_weights"] is False and not any(
        "share_embeddings" in note for note in untied.notes)


def test_manual_gc_reaches_the_rank_as_bridge_sets_it():
    """train.manual_gc: the rank collects before the first step, as Bridge's and Megatron-LM's loops do."""
    recipe = "fixtures/replay/tiny_gpt_recipes.py"
    assert spec_of(recipe, "tiny_gpt_optimizer_offload_config").train["manual_gc"] is True  # the recipe sets it
    loaded = load_unit(recipe, "tiny_gpt_optimizer_offload_config", overrides=["train.manual_gc=false"])
    assert map_unit(loaded.resolved).train["manual_gc"] is False
    assert spec_of("fixtures/replay/tiny_optimizer_offload.yaml").train["manual_gc"] is False  # not said: off


def test_the_first_hybrid_device_optimizer_is_held_only_by_a_cycle(monkeypatch):
    """Why the rank's gc.collect() matters: get_megatron_optimizer builds a HybridDeviceOptimizer over the 16-bit
    parameters that the DistributedOptimizer replaces; its fp32 copies stay (5.03 GiB for 1.35B parameters on
    an H200, docs/gpu-validation.md) until the cyclic garbage collector frees them."""
    import gc
    import weakref

    import torch
    from megatron.core.optimizer.cpu_offloading.hybrid_optimizer import HybridDeviceOptimizer

    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: None)  # its constructor asks for streams
    parameter = torch.nn.Parameter(torch.zeros(8, dtype=torch.bfloat16))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        optimizer = HybridDeviceOptimizer([{"params": [parameter]}], offload_fraction=0.0,
                                          cpu_optimizer_cls=torch.optim.AdamW, gpu_optimizer_cls=torch.optim.AdamW,
                                          param_update_in_fp32=True, overlap_cpu_optimizer_d2h_h2d=False, lr=1e-3)
        fp32_copy = weakref.ref(optimizer.param_to_fp32_param[parameter])
        del optimizer
        assert fp32_copy() is not None  # no reference left but a cycle: still allocated
        gc.collect()
        assert fp32_copy() is None
    finally:
        if was_enabled:
            gc.enable()
