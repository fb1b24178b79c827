"""moe_expert_rank_capacity_factor and moe_paged_stash (megatron-core 2a75ac12, Transformer Engine e7c550c5).

The capacity factor fixes the flex dispatcher's receive buffer (HybridEP, NCCL EP) at `factor` times the balanced
load, rounded up to 256 rows, and the experts compute on and save the whole buffer. moe_paged_stash copies the
saved tensors Transformer Engine's fused grouped MLP marks into one CUDA buffer sized at the balanced load times
its own factor, keeping only the layers being computed padded. Shapes follow the Megatron Bridge perf recipes
(Qwen3-30B-A3B, MXFP8, HybridEP, EP8 on GB200); expected bytes are derived here from the named terms.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.estimate import activations as act
from offlint.estimate import oom
from offlint.estimate.devices import GIB
from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from offlint.estimate.whatif import _variants
from offlint.types import Unknown
from tests.estimate_helpers import lookup

QWEN_MOE = {"model.num_layers": 8, "model.hidden_size": 2048, "model.ffn_hidden_size": 6144,
            "model.moe_ffn_hidden_size": 768, "model.num_attention_heads": 32, "model.num_query_groups": 4,
            "model.kv_channels": 128, "model.vocab_size": 151936, "model.seq_length": 4096,
            "model.num_moe_experts": 128, "model.moe_router_topk": 8, "model.gated_linear_unit": True,
            "model.add_bias_linear": False, "model.normalization": "RMSNorm", "model.hidden_dropout": 0.0,
            "model.share_embeddings_and_output_weights": False, "model.position_embedding_type": "rope",
            "model.expert_model_parallel_size": 8, "model.bf16": True, "train.micro_batch_size": 4,
            "train.global_batch_size": 512, "optimizer.use_distributed_optimizer": True,
            "model.fp8": "e4m3", "model.fp8_recipe": "mxfp8", "model.fp8_param": True,
            "model.moe_token_dispatcher_type": "flex", "model.moe_flex_dispatcher_backend": "hybridep",
            "model.use_transformer_engine_op_fuser": True, "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP": "1"}
CAPACITY = {"model.moe_expert_rank_capacity_factor": 1.5}
STASH = {**CAPACITY, "model.moe_paged_stash": True, "model.moe_paged_stash_buffer_size_factor_cuda": 1.2,
         "model.moe_paged_stash_buffer_size_factor_cpu": 1.0}
BLACKWELL, HOPPER, OPEN = False, True, None  # what fp8_transpose says of the GPU (devices.Device.fp8_transpose)


def _inputs(extra: dict, gpu: bool | None = BLACKWELL):
    return read_inputs(lookup({**QWEN_MOE, **extra}), "qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config",
                       world_size=8, fp8_transpose=gpu)


def _part(result, start: str) -> float:
    return sum(p.bytes for p in result.peak.parts if p.name.startswith(start))


def test_the_budget_is_read_with_the_fused_grouped_mlp_on_blackwell_only():
    b = _inputs(STASH).training.expert_budget
    assert (b.factor, b.backend, b.align, b.fused, b.stash, b.host) == (1.5, "hybridep", 256, True, 1.2, 1.0)
    hopper = _inputs(STASH, HOPPER).training.expert_budget
    assert not hopper.fused and hopper.stash is None  # nothing is marked, so the stash holds nothing
    bf16 = {k: v for k, v in QWEN_MOE.items() if not k.startswith("model.fp8")}
    assert read_inputs(lookup({**bf16, **STASH}), "x", world_size=8, fp8_transpose=BLACKWELL
                       ).training.expert_budget.stash is None
    unset = _inputs({**STASH, "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP": None}).training.expert_budget
    assert not unset.fused and unset.stash is None
    assert _inputs({}).training.expert_budget is None


def test_the_receive_budget_rounds_the_capacity_up_to_the_op_fusers_alignment():
    # 4000 tokens x top-8 x 1.5 = 48000 rows, rounded up to 256: 48128 (the balanced load is 32000).
    t = _inputs({**CAPACITY, "model.seq_length": 4000, "train.micro_batch_size": 1})
    assert act.expert_tokens(t.model, t.parallel, t.training) == 32000
    assert act.expert_rows(t.model, t.parallel, t.training) == 48128
    # NCCL EP rounds the local tokens up to 64 first: 4032 x 8 x 1.5 = 48384 (a multiple of 256).
    n = _inputs({**CAPACITY, "model.seq_length": 4000, "train.micro_batch_size": 1,
                 "model.moe_flex_dispatcher_backend": "ncclep"})
    assert act.expert_rows(n.model, n.parallel, n.training) == 48384


def test_the_capacity_factor_alone_saves_the_padded_expert_tensors():
    plain, padded = _inputs({}), _inputs(CAPACITY)
    m, p = plain.model, plain.parallel
    ratio = act.expert_rows(m, p, padded.training) / act.expert_tokens(m, p, plain.training)
    assert ratio == 1.5
    before = act.layer_terms(m, p, plain.training, True, True).terms
    after = act.layer_terms(m, p, padded.training, True, True).terms
    for name in act.STASHED_TERMS:
        assert after[name] == pytest.approx(before[name] * ratio)
    assert after["qkv_input"] == before["qkv_input"]
    # The receive half of the dispatch buffers holds the whole budget.
    width = m.hidden_size
    assert act.dispatch_buffers(m, p, padded.training) - act.dispatch_buffers(m, p, plain.training) == \
        pytest.approx(2 * width * act.expert_tokens(m, p, plain.training) * 0.5)


def test_the_paged_stash_keeps_a_buffer_at_the_balanced_load_and_two_padded_layers():
    padded, stashed = _inputs(CAPACITY), _inputs(STASH)
    m, p, t = stashed.model, stashed.parallel, stashed.training
    per_layer = sum(v for k, v in act.layer_terms(m, p, t, True, True).terms.items() if k in act.STASHED_TERMS)
    rows = act.expert_rows(m, p, t)
    balanced_rows = rows // 1.5  # experts.py avg_num_tokens: max_num_tokens // factor
    result = estimate(stashed)
    buffer = _part(result, "activations: MoE paged stash buffer")
    assert buffer == pytest.approx(1.2 * per_layer * balanced_rows / rows * m.num_layers)
    assert _part(result, "activations: MoE paged stash, padded") == pytest.approx(2 * per_layer)
    moved = per_layer * m.num_layers
    layers_padded = _part(estimate(padded), "activations: transformer layers")
    assert _part(result, "activations: transformer layers") == pytest.approx(layers_padded - moved)
    assert result.peak.host_activation_bytes == pytest.approx(buffer * 1.0 / 1.2)  # the pinned host buffer


def test_the_fused_grouped_mlp_keeps_the_fc2_input_under_moe_act_recompute():
    recompute = {"model.recompute_granularity": "selective", "model.recompute_modules": ["moe_act"]}
    fused = _inputs({**STASH, **recompute})
    layer = act.after_selective_recompute(act.layer_terms(fused.model, fused.parallel, fused.training, True,
                                                          True), fused.training)
    assert "expert_act_output" in layer.terms
    plain = _inputs({**recompute, "model.use_transformer_engine_op_fuser": False})  # megatron-core's own MLP
    layer = act.after_selective_recompute(act.layer_terms(plain.model, plain.parallel, plain.training, True,
                                                          True), plain.training)
    assert "expert_act_output" not in layer.terms


def _moe_act_terms(extra: dict, gpu: bool | None = BLACKWELL) -> dict:
    recompute = {"model.recompute_granularity": "selective", "model.recompute_modules": ["moe_act"]}
    t = _inputs({**recompute, **extra}, gpu)
    return act.after_selective_recompute(act.layer_terms(t.model, t.parallel, t.training, True, True),
                                         t.training).terms


def test_the_op_fusers_fused_grouped_mlp_keeps_the_fc2_input_without_the_capacity_factor_too():
    """The fused path is the op fuser's (experts.py `_make_fused_ops`), not the capacity factor's: with the op
    fuser, MXFP8, a GLU, NVTE_CUTEDSL_FUSED_GROUPED_MLP and a 10.x GPU, moe_act recompute drops nothing."""
    kept = _moe_act_terms({})
    assert _inputs({}).training.expert_budget is None and _inputs({"model.recompute_granularity": "selective",
                                                                   "model.recompute_modules": ["moe_act"]}).complete
    unfused = _moe_act_terms({"model.use_transformer_engine_op_fuser": False})
    assert "expert_act_output" in kept and "expert_act_output" not in unfused
    assert {k: v for k, v in kept.items() if k != "expert_act_output"} == unfused  # only that tensor differs
    # A non-GLU activation (SReLU, which TE recomputes) keeps the drop.
    srelu = _moe_act_terms({"model.gated_linear_unit": False})
    assert "expert_act_output" not in srelu


@pytest.mark.parametrize("extra, gpu, why", [
    ({}, HOPPER, "activation_recompute_in_mlp needs the fused path"),
    ({"model.fp8": None, "model.fp8_recipe": None}, BLACKWELL, "activation_recompute_in_mlp needs the fused path"),
    ({"env.NVTE_CUTEDSL_FUSED_GROUPED_MLP": None}, BLACKWELL, "activation_recompute_in_mlp needs the fused path"),
    ({}, OPEN, "compute capability offlint does not know"),
])
def test_moe_act_recompute_under_the_op_fuser_outside_the_fused_path_gets_no_verdict(extra, gpu, why):
    inputs = _inputs({"model.recompute_granularity": "selective", "model.recompute_modules": ["moe_act"], **extra},
                     gpu)
    assert not inputs.complete
    assert any(why in reason and "use_transformer_engine_op_fuser" in reason for reason in inputs.unsupported), \
        inputs.unsupported
    # the op fuser alone, without moe_act recompute, is not refused for it
    assert not any("moe_act" in reason for reason in _inputs(extra, gpu).unsupported)


@pytest.mark.parametrize("extra, gpu, why", [
    ({"model.moe_paged_stash": True}, BLACKWELL, "without moe_expert_rank_capacity_factor"),
    ({**CAPACITY, "model.moe_flex_dispatcher_backend": "deepep"}, BLACKWELL, "'deepep' flex backend"),
    ({**CAPACITY, "model.moe_token_dispatcher_type": "alltoall"}, BLACKWELL, "without the flex token dispatcher"),
    ({**CAPACITY, "model.use_transformer_engine_op_fuser": False}, BLACKWELL, "use_transformer_engine_op_fuser"),
    ({**STASH, "model.recompute_granularity": "full", "model.recompute_method": "uniform",
      "model.recompute_num_layers": 1}, BLACKWELL, "MoE layer recomputed"),
    ({**STASH, "model.recompute_granularity": "selective", "model.recompute_modules": ["moe"]}, BLACKWELL,
     "MoE layer recomputed"),
    ({**STASH, "model.moe_paged_stash_buffer_size_factor_cuda": -1.1}, BLACKWELL, "buffer factors"),
    ({**STASH, "model.recompute_granularity": "selective", "model.recompute_modules": ["moe_act"]}, OPEN,
     "compute capability offlint does not know"),
    ({**CAPACITY, "model.recompute_granularity": "selective", "model.recompute_modules": ["moe_act"]}, HOPPER,
     "activation_recompute_in_mlp needs the fused path"),
])
def test_what_megatron_core_refuses_or_offlint_does_not_model_gets_no_verdict(extra, gpu, why):
    inputs = _inputs(extra, gpu)
    assert not inputs.complete
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_an_unknown_setting_leaves_the_estimate_unknown():
    inputs = _inputs({**STASH, "model.moe_paged_stash_buffer_size_factor_cuda": Unknown("set by a helper")})
    assert "model.moe_paged_stash_buffer_size_factor_cuda" in inputs.unknown
    inputs = _inputs({**STASH, "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP": Unknown("the launch environment")})
    assert "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP" in inputs.unknown
    assert _inputs(CAPACITY, OPEN).training.expert_budget.fused is False  # without the stash it changes nothing


def test_the_stash_on_an_open_gpu_is_estimated_both_ways():
    inputs = _inputs(STASH, OPEN)
    assert inputs.complete and inputs.training.expert_budget.fused is None
    with pytest.raises(ValueError):
        estimate(inputs)  # never sized silently
    stashed, padded = oom.architectures(inputs)
    assert stashed.training.expert_budget == _inputs(STASH).training.expert_budget
    assert padded.training.expert_budget.fused is False
    assert estimate(stashed).peak.total == estimate(_inputs(STASH)).peak.total
    assert estimate(padded).peak.total == estimate(_inputs(CAPACITY)).peak.total
    fits = lambda _, r: r.peak.total < 100 * GIB  # noqa: E731 (both fit)
    shown, _, why, note = oom.either_way(inputs, fits, 8)
    assert shown is not inputs and not why and "holds either way" in note and "with the stash" in note
    split = lambda _, r: r.peak.total == estimate(padded).peak.total  # noqa: E731 (the two disagree)
    assert "compute capability offlint does not know" in oom.either_way(inputs, split, 8)[2]


def test_what_if_leaves_out_what_megatron_core_refuses_with_the_stash():
    labels = [(group, label) for group, label, _ in _variants(_inputs(STASH), 8, layouts=False)]
    assert ("recompute", "full uniform 1") not in labels
    assert not any(group == "activation offload" and "layers" in label for group, label in labels)
    fine = [label for _, label in labels if label.startswith("fine-grained")]
    assert fine and not any("expert_fc1" in label or "moe_act" in label for label in fine)
    assert ("recompute", "full uniform 1") in [(g, lbl) for g, lbl, _ in _variants(_inputs(CAPACITY), 8, False)]


def test_the_stash_is_worth_its_buffer_on_the_recipe_shape():
    # 48 layers as in the recipe: the padded expert tensors (1.5x) against the stash (1.2x plus two layers; with
    # 8 layers the two padded layers outweigh what the stash saves).
    full = {"model.num_layers": 48}
    padded = estimate(_inputs({**CAPACITY, **full})).peak.total / GIB
    stashed = estimate(_inputs({**STASH, **full})).peak.total / GIB
    plain = estimate(_inputs(full)).peak.total / GIB
    assert plain < stashed < padded
    assert math.isfinite(stashed)


# Conformance: megatron-core's own PagedStashManager sizes the CUDA buffer from the saved tensors of one capture
# iteration (on_save_for_backward, then allocate_stash_buffers). Run on the CPU in a megatron-core source tree
# unpacked by scripts/fetch_mcore_sdist.py (0.19.2 has the same sizing code as 2a75ac12); the manager's CUDA
# stream is never used on this path and is stubbed out.
SDISTS = sorted((Path(__file__).resolve().parent.parent / ".mcore").glob("megatron_core-*"))
SDISTS = [tree for tree in SDISTS if (tree / "megatron/core/transformer/moe/paged_stash.py").is_file()]
PROBE = """
import json, sys, torch
class _Stream:
    def __init__(self, *args, **kwargs):
        pass
torch.cuda.Stream = _Stream
from megatron.core.transformer.moe.paged_stash import PagedStashManager
rows, factor, layers, cuda, tensors = json.loads(sys.argv[1])
manager = PagedStashManager()
manager.device, manager.status = "cpu", "capture"
avg = int(rows // factor)
for _ in range(layers):
    manager.max_num_tokens, manager.avg_num_tokens = rows, avg
    manager.num_tokens_tensor = torch.tensor(avg)
    for width, dtype, scale in tensors:
        saved = torch.zeros(rows // 32 if scale else rows, width, dtype=getattr(torch, dtype))
        saved.grouped_tensor_scale_inv = scale
        manager.on_save_for_backward(saved)
manager.allocate_stash_buffers(cuda, 0.0)
print(json.dumps(sum(b.cuda_buffer.numel() * b.cuda_buffer.element_size()
                     for by_width in manager.stash_buffers.values() for b in by_width.values())))
"""


@pytest.mark.slow
@pytest.mark.skipif(not SDISTS, reason="no megatron-core source tree with paged_stash.py under .mcore/ "
                                       "(scripts/fetch_mcore_sdist.py 0.19.2)")
def test_the_stash_buffer_is_the_one_megatron_core_allocates():
    inputs = _inputs(STASH)
    m, p, t = inputs.model, inputs.parallel, inputs.training
    h, ffn = m.hidden_size, m.moe_ffn_hidden_size
    # What the fused grouped MLP marks, MXFP8: the fc1 input and the fc2 input as column-wise data with their
    # 1/32 scales, the activation's bf16 input (the per-row probabilities, 4 bytes a row, are left out).
    tensors = [(h, "uint8", False), (h, "uint8", True), (2 * ffn, "bfloat16", False), (ffn, "uint8", False),
               (ffn, "uint8", True)]
    rows = int(act.expert_rows(m, p, t))
    args = json.dumps([rows, 1.5, m.num_layers, 1.2, tensors])
    env = {**os.environ, "PYTHONPATH": str(SDISTS[-1])}
    out = subprocess.run([sys.executable, "-c", PROBE, args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    megatron = json.loads(out.stdout.strip().splitlines()[-1])
    offlint = _part(estimate(inputs), "activations: MoE paged stash buffer")
    assert offlint == pytest.approx(megatron, rel=1e-3)  # pages of 64 rows and int() truncation aside
