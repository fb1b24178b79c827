"""Gated delta net (GDN) models in the memory model (Qwen3-Next): how the configuration is read, what is refused
with its reason, and what each GDN layer saves. Parameter counts are checked against real megatron-core models in
tests/test_estimate_params_gdn.py. The saved tensors are listed here a second time, tensor by tensor with the
shape and dtype megatron-core's GatedDeltaNet.forward and flash-linear-attention 0.5.1's autograd Functions give
them (docs/estimate.md, "Gated delta net"), and compared with activations.gdn_terms.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import activations as act
from offlint.estimate import params, precision, whatif
from offlint.estimate.devices import parse_device
from offlint.estimate.inputs import LowPrecision, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

# What Qwen3NextBridge maps from Qwen3-Next-80B-A3B's config.json (offlint/data/hf_models.json), at a smaller
# sequence, as a Bridge recipe's resolved keys.
QWEN3_NEXT = {
    "model.num_layers": 48, "model.hidden_size": 2048, "model.ffn_hidden_size": 5120,
    "model.num_attention_heads": 16, "model.num_query_groups": 2, "model.kv_channels": 256,
    "model.vocab_size": 151936, "model.seq_length": 4096, "model.gated_linear_unit": True,
    "model.normalization": "RMSNorm", "model.add_bias_linear": False, "model.qk_layernorm": True,
    "model.share_embeddings_and_output_weights": False, "model.position_embedding_type": "rope",
    "model.hidden_dropout": 0.0, "model.num_moe_experts": 512, "model.moe_ffn_hidden_size": 512,
    "model.moe_router_topk": 10, "model.moe_shared_expert_intermediate_size": 512,
    "model.moe_shared_expert_gate": True, "model.attention_output_gate": True,
    "model.experimental_attention_variant": "gated_delta_net", "model.linear_attention_freq": 4,
    "model.linear_conv_kernel_dim": 4, "model.linear_key_head_dim": 128, "model.linear_value_head_dim": 128,
    "model.linear_num_key_heads": 16, "model.linear_num_value_heads": 32,
    "mixed_precision": "bf16_mixed", "ddp.use_megatron_fsdp": False,
}


def _shape(**changes) -> ModelShape:
    inputs = read_inputs(lookup(QWEN3_NEXT))
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    return replace(inputs.model, **changes)


def test_bridge_keys_give_the_gdn_layer_mix_and_sizes():
    m = _shape()
    assert (m.linear_attention_freq, m.gdn_key_heads, m.gdn_value_heads, m.gdn_key_head_dim,
            m.gdn_value_head_dim, m.gdn_conv_kernel, m.attention_output_gate) == (4, 16, 32, 128, 128, 4, True)
    assert [i for i in range(m.num_layers) if not m.is_gdn_layer(i)] == list(range(3, 48, 4))


def test_unset_gdn_sizes_take_megatron_cores_defaults():
    values = {k: v for k, v in QWEN3_NEXT.items() if not k.startswith("model.linear_") or k.endswith("_freq")}
    m = read_inputs(lookup(values)).model
    # TransformerConfig at megatron-core 2a75ac12: kernel 4, head dims 128, 16 key and 32 value heads
    assert (m.gdn_conv_kernel, m.gdn_key_head_dim, m.gdn_value_head_dim, m.gdn_key_heads, m.gdn_value_heads) == \
        (4, 128, 128, 16, 32)


def test_qwen3_next_has_80b_parameters_and_3b_active():
    """The released model: 80B total, 3B activated (its model card; without MTP, embeddings apart)."""
    m = _shape()
    embeddings = 2 * m.vocab_size * m.hidden_size
    assert abs(params.total(m) - 80e9) < 0.5e9
    assert abs(params.active(m) - embeddings - 3e9) < 0.3e9


@pytest.mark.parametrize("extra,reason", [
    ({"model.experimental_attention_variant": "dsa"}, "variant 'dsa'"),
    ({"model.experimental_attention_variant": "gdn2"}, "variant 'gdn2'"),
    ({"model.linear_attention_freq": None}, "linear_attention_freq=None"),
    ({"model.linear_attention_freq": [1, 0]}, "list of 2 layers for 48"),
    ({"model.tensor_model_parallel_size": 32}, "TP32 x CP1"),
    ({"model.context_parallel_size": 3}, "TP1 x CP3"),
    ({"model.linear_num_key_heads": 12}, "key heads divide value heads"),
    ({"model.deterministic_mode": True}, "deterministic mode"),
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "NVFP4 training of a gated-delta-net"),
    # in_proj 2 x 8 x 128 + 2 x 8 x 128 + 2 x 8 = 4112 wide: a multiple of 16, not of MXFP8's 32
    ({"mixed_precision": "bf16_with_mxfp8_mixed", "model.linear_num_key_heads": 8,
      "model.linear_num_value_heads": 8}, "multiple of 32"),
    ({"mixed_precision": None, "model.bf16": True, "model.fp8": "hybrid", "model.fp8_recipe": "mxfp8",
      "model.fp8_dot_product_attention": True}, "output gate with multi-latent attention, FP8 attention"),
    ({"ddp.use_megatron_fsdp": True}, "Megatron-FSDP or LoRA"),
    ({"model.fine_grained_activation_offloading": True}, "activation offloading of a gated"),
    ({"model.cpu_offloading": True, "model.cpu_offloading_num_layers": 2}, "activation offloading of a gated"),
    ({"model.mtp_num_layers": 1, "model.linear_attention_freq": 5}, "gated-delta-net last layer"),
    ({"model.hybrid_layer_pattern": "M*" * 24}, "hybrid Mamba model"),
])
def test_what_is_not_modelled_is_refused_with_its_reason(extra, reason):
    inputs = read_inputs(lookup(QWEN3_NEXT | extra))
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


@pytest.mark.parametrize("key", ["model.experimental_attention_variant", "model.linear_attention_freq"])
def test_an_unknown_variant_or_layer_mix_leaves_the_estimate_unknown(key):
    inputs = read_inputs(lookup(QWEN3_NEXT | {key: Unknown("set by a helper offlint does not read")}))
    assert key in inputs.unknown and not inputs.complete and not inputs.unsupported


def test_a_megatron_lm_frequency_string_is_read_as_argparse_converts_it():
    """--linear-attention-freq 4 reaches offlint as the string "4"; Megatron-LM's la_freq_type makes it 4. A
    pattern expression ("([1]*3+[0])*12", which la_freq_type evaluates) is refused, not guessed."""
    assert read_inputs(lookup(QWEN3_NEXT | {"model.linear_attention_freq": "4"})).model.linear_attention_freq == 4
    inputs = read_inputs(lookup(QWEN3_NEXT | {"model.linear_attention_freq": "([1]*3+[0])*12"}))
    assert any("offlint reads a positive int" in why for why in inputs.unsupported), inputs.unsupported


def test_mtp_after_a_last_softmax_layer_is_modelled():
    inputs = read_inputs(lookup(QWEN3_NEXT | {"model.mtp_num_layers": 1}))
    assert inputs.complete and not inputs.model.is_gdn_layer(47)


def _saved_tensors(m: ModelShape, p: Parallelism, t: Training) -> list[tuple[str, float, int]]:
    """Each tensor a GDN layer keeps for backward: (what, elements on one GPU, bytes per element), from the code."""
    s = m.seq_length // p.cp * t.micro_batch_size  # tokens per CP rank (after the all-to-all: all tokens, 1/CP heads)
    sp = p.tp if p.sequence_parallel else 1
    hk, hv, dk, dv = m.gdn_key_heads // p.tp, m.gdn_value_heads // p.tp, m.gdn_key_head_dim, m.gdn_value_head_dim
    return [
        ("in_proj's fused norm: its input", s * m.hidden_size / sp, 2),
        ("in_proj: the normed input", s * m.hidden_size / sp, 2),
        ("causal_conv1d: x, a view keeping in_proj's output [q k v z beta alpha]",
         s * (2 * hk * dk + 2 * hv * dv + 2 * hv), 2),
        ("l2norm(q, k): y", s * 2 * hk * dk, 2),
        ("l2norm(q, k): rstd", s * 2 * hk, 4),
        ("chunk_gated_delta_rule: q, k repeated to the value heads", s * 2 * hv * dk, 2),
        ("chunk_gated_delta_rule: v", s * hv * dv, 2),
        ("chunk_gated_delta_rule: g after chunk_local_cumsum", s * hv, 4),
        ("chunk_gated_delta_rule: beta", s * hv, 2),
        ("chunk_gated_delta_rule: A [B, T, HV, 64]", s * hv * 64, 2),
        ("out_norm: its input, the rule's output", s * hv * dv, 2),
        ("out_norm: rstd per head", s * hv, 4),
        ("output gate: the norm's output", s * hv * dv, 2),
        ("output gate: z", s * hv * dv, 2),
        ("out_proj: its input", s * hv * dv, 2),
    ]


@pytest.mark.parametrize("parallel,micro", [(Parallelism(), 1), (Parallelism(tp=2), 2),
                                            (Parallelism(tp=4, sequence_parallel=True), 1),
                                            (Parallelism(tp=2, cp=2, sequence_parallel=True), 1)])
def test_gdn_layer_saves_what_megatron_core_and_fla_keep(parallel, micro):
    m, t = _shape(), Training(micro_batch_size=micro)
    expected = sum(n * size for _, n, size in _saved_tensors(m, parallel, t))
    assert act.gdn_terms(m, parallel, t) and sum(act.gdn_terms(m, parallel, t).values()) == pytest.approx(expected)


def test_a_gdn_layer_is_its_gdn_terms_and_the_moe_part_of_a_transformer_layer():
    m, p, t = _shape(), Parallelism(), Training()
    gdn = act.layer_terms(m, p, t, moe=True, gdn=True).terms
    softmax = act.layer_terms(m, p, t, moe=True).terms
    assert {k for k in gdn if not k.startswith("gdn_")} == {k for k in softmax if k not in act._ATTENTION_PART}
    assert all(gdn[k] == softmax[k] for k in gdn if not k.startswith("gdn_"))


def test_the_attention_output_gate_keeps_the_gate_and_the_gated_output():
    """Attention._apply_output_gate multiplies the attention output by sigmoid(gate): the gate is kept, and the
    gated output is linear_proj's saved input (no longer the attention output itself)."""
    m, p, t = _shape(), Parallelism(tp=2), Training()
    q = m.num_attention_heads * m.kv_channels / p.tp
    gated = act.layer_terms(m, p, t, moe=True).terms
    plain = act.layer_terms(replace(m, attention_output_gate=False), p, t, moe=True).terms
    assert gated["attn_output_gate"] == 2 * (2 * m.seq_length * q)
    assert {k: v for k, v in gated.items() if k != "attn_output_gate"} == plain


def test_gdn_norm_out_recompute_keeps_only_the_checkpoints_inputs():
    """recompute_modules=["gdn_norm_out"]: CheckpointWithoutOutput keeps the rule's output and the gate, drops the
    norm's saved tensors, and discards out_proj's input after out_proj ran."""
    m, p = _shape(), Parallelism()
    t = Training(recompute_granularity="selective", recompute_modules=("gdn_norm_out",))
    full = act.layer_terms(m, p, t, moe=True, gdn=True)
    kept = act.after_selective_recompute(full, t).terms
    assert set(full.terms) - set(kept) == {"gdn_gated_norm", "gdn_out_proj_input"}
    assert {"gdn_rule_output", "gdn_gate"} <= set(kept)


def test_layernorm_recompute_leaves_the_fused_gdn_norm_alone():
    """megatron-core recomputes the input layernorm only where it is a module of its own (TransformerLayer:
    not IdentityOp); a GDN layer's is fused into in_proj. The pre-MoE norm is separate and is recomputed."""
    m, p = _shape(), Parallelism()
    t = Training(recompute_granularity="selective", recompute_modules=("layernorm",))
    full = act.layer_terms(m, p, t, moe=True, gdn=True)
    assert set(full.terms) - set(act.after_selective_recompute(full, t).terms) == {"moe_input"}


def test_what_if_offers_only_options_with_a_verdict():
    """No activation offloading (refused for GDN models) and no TP that does not divide the GDN heads."""
    inputs = read_inputs(lookup(QWEN3_NEXT | {"model.expert_model_parallel_size": 8}), world_size=64)
    assert inputs.complete, inputs.unsupported
    inputs = inputs.with_(model=replace(inputs.model, gdn_key_heads=2, gdn_value_heads=4))
    options = whatif.what_if(inputs, parse_device("h100-80gb"), 64)
    assert not [o for o in options if o.group == "activation offload"]
    layouts = {o.label for o in options if o.group == "layout"}
    assert layouts and not [label for label in layouts if label.startswith(("TP4", "TP8"))]


# A pretrain recipe in Megatron Bridge's shape (its recipes/qwen/h100/qwen3_next.py): the model from the Hugging
# Face config, MoE with expert parallelism, selective recompute of the norms and the MoE, one MTP depth.
RECIPE = '''
from megatron.bridge import AutoBridge
from megatron.bridge.training.config import ConfigContainer
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.optimizer import OptimizerConfig


def qwen3_next_80b_a3b_pretrain_64gpu_h100_bf16_config() -> ConfigContainer:
    cfg = ConfigContainer(
        model=AutoBridge.from_hf_pretrained("Qwen/Qwen3-Next-80B-A3B-Instruct").to_megatron_provider(
            load_weights=False
        ),
        optimizer=OptimizerConfig(bf16=True, use_distributed_optimizer=True),
        ddp=DistributedDataParallelConfig(grad_reduce_in_fp32=True, use_distributed_optimizer=True),
    )
    cfg.mixed_precision = "bf16_mixed"
    cfg.model.tensor_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_size = 4
    cfg.model.expert_model_parallel_size = 16
    cfg.model.expert_tensor_parallel_size = 1
    cfg.model.seq_length = 4096
    cfg.model.mtp_num_layers = 1
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["layernorm", "moe", "moe_act"]
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 256
    return cfg


def qwen3_next_80b_a3b_pretrain_64gpu_h100_fp8cs_config() -> ConfigContainer:
    cfg = qwen3_next_80b_a3b_pretrain_64gpu_h100_bf16_config()
    cfg.mixed_precision = "bf16_with_fp8_current_scaling_mixed"
    return cfg
'''


# Bridge's Qwen3NextBridge in its shape: the dropout-free layers come from the tree's bridge, not from offlint's table.
BRIDGE = '''
from transformers import Qwen3NextForCausalLM

from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge


@MegatronModelBridge.register_bridge(source=Qwen3NextForCausalLM, target=GPTModel, model_type="qwen3_next")
class Qwen3NextBridge(MegatronModelBridge):
    def provider_bridge(self, hf_pretrained):
        provider = super().provider_bridge(hf_pretrained)
        provider.hidden_dropout = 0.0
        provider.moe_shared_expert_intermediate_size = hf_pretrained.config.shared_expert_intermediate_size
        return provider
'''


def _estimate(tmp_path: Path, recipe: str):
    (tmp_path / "pyproject.toml").write_text("")
    bridge = tmp_path / "src" / "megatron" / "bridge" / "models" / "qwen" / "qwen3_next_bridge.py"
    bridge.parent.mkdir(parents=True)
    bridge.write_text(BRIDGE)
    path = tmp_path / "qwen3_next.py"
    path.write_text(RECIPE)
    here = os.getcwd()
    os.chdir(tmp_path)  # the tree offlint reads is the project of the working directory, as from a checkout
    try:
        return CliRunner().invoke(main, ["estimate", str(path), "--recipe", recipe, "--output-format", "json"])
    finally:
        os.chdir(here)


def test_a_bridge_shaped_qwen3_next_recipe_gets_a_verdict(tmp_path):
    result = _estimate(tmp_path, "qwen3_next_80b_a3b_pretrain_64gpu_h100_bf16_config")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["verdict_state"] in ("fits", "at risk", "does not fit")
    # the stage-0 layers' activations are the GDN and softmax layers' terms after recompute, one micro-batch
    # each of the PP=4 micro-batches in flight on stage 0
    m = _shape(mtp_num_layers=1)
    p = Parallelism(pp=4, ep=16)
    t = Training(recompute_granularity="selective", recompute_modules=("layernorm", "moe", "moe_act"))
    per_layer = [act.after_selective_recompute(act.layer_terms(m, p, t, True, gdn=m.is_gdn_layer(i)), t).total
                 for i in range(12)]
    stage0 = next(s for s in data["stages"] if s["stage"] == 0)
    layers = next(part["bytes"] for part in stage0["parts"] if part["name"] == "activations: transformer layers")
    assert layers == pytest.approx(sum(per_layer) * 4)


def test_an_fp8_qwen3_next_recipe_gets_a_verdict(tmp_path):
    result = _estimate(tmp_path, "qwen3_next_80b_a3b_pretrain_64gpu_h100_fp8cs_config")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    names = [part["name"] for part in data["stages"][0]["parts"]]
    assert "weights (bf16/fp16; FP8 GEMM weights, tensorwise)" in names, names


@pytest.mark.parametrize("recipe", ["mxfp8", "tensorwise", "delayed"])
def test_fp8_gdn_layer_saves_its_projections_inputs_quantized(recipe):
    """In FP8 training in_proj (its fused norm's output) and out_proj save their inputs quantized; the norm input,
    the convolution's, the L2 norm's, the delta rule's and the gated norm's tensors stay as in bf16 (they are not
    Transformer Engine linears), and the MoE part is quantized as in a GPT layer."""
    m, p = _shape(), Parallelism()
    lp = LowPrecision(recipe=recipe, transpose=True)
    fp8 = act.layer_terms(m, p, Training(low_precision=lp), moe=True, fp8=True, gdn=True).terms
    bf16 = act.layer_terms(m, p, Training(), moe=True, gdn=True).terms
    per = precision.saved_input_bytes(lp)
    for name in ("gdn_in_proj_input", "gdn_out_proj_input"):
        assert fp8[name] == bf16[name] * per / 2
    assert all(fp8[k] == bf16[k] for k in bf16 if k.startswith("gdn_") and not k.endswith("proj_input"))
    gpt = act.layer_terms(m, p, Training(low_precision=lp), moe=True, fp8=True).terms
    assert all(fp8[k] == gpt[k] for k in fp8 if not k.startswith("gdn_"))
    assert "proj_input" not in fp8  # no softmax attention output to copy


def test_delayed_scaling_quantizes_the_gated_attention_output():
    """With delayed scaling linear_proj saves a quantized copy of its input (megatron-core calls
    set_save_original_input only for the other recipes); behind the output gate that input is the gated output,
    which nothing else keeps: the gate stays bf16, the gated output is the quantized copy."""
    m, p = _shape(), Parallelism()
    q = m.num_attention_heads * m.kv_channels
    for recipe, gate, proj in (("delayed", 2, 1), ("mxfp8", 4, 0)):
        lp = LowPrecision(recipe=recipe, transpose=True)
        terms = act.layer_terms(m, p, Training(low_precision=lp), moe=True, fp8=True).terms
        assert terms["attn_output_gate"] == gate * m.seq_length * q
        assert terms.get("proj_input", 0) == proj * precision.saved_input_bytes(lp) * m.seq_length * q
