"""NVFP4, FP8 attention and selective recompute in a hybrid Mamba model (docs/estimate.md, "Hybrid Mamba models").

megatron-core 2a75ac12 (Bridge 067f987's pin) runs every hybrid layer under the FP8/FP4 context of its global index
(models/hybrid/hybrid_block.py), so NVFP4 quantizes a Mamba layer's in_proj and out_proj as FP8 does; FP8 attention
changes only the attention layers' core attention; selective recompute acts per layer kind: a MambaLayer recomputes
nothing, the attention and MLP layers' norms are fused into their first linear (IdentityOp norms), the MoE layer's
pre-MLP norm is a separate TENorm. Expected bytes are derived here from the tensor shapes of a small model.
"""

from __future__ import annotations

import pytest

from offlint.estimate import activations as act
from offlint.estimate import params, precision
from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from offlint.types import Unknown
from tests.estimate_helpers import lookup

H, HEADS, GROUPS, KV, FFN, SEQ = 512, 8, 2, 64, 1024, 512
MAMBA_HEADS, HEAD_DIM, M_GROUPS, STATE = 16, 32, 2, 16
D_INNER = MAMBA_HEADS * HEAD_DIM  # 512
WIDTH = 2 * D_INNER + 2 * M_GROUPS * STATE + MAMBA_HEADS  # in_proj: z, x, B, C, dt = 1104 (a multiple of 16)
EXPERTS, EXPERT_FFN, SHARED = 4, 256, 512
PATTERN = "M*EM-E"

# A HybridModelProvider as Bridge's Nemotron 3 recipes build it (keys as offlint reads them), our own sizes.
SIZES = {"model.hidden_size": H, "model.num_attention_heads": HEADS, "model.num_query_groups": GROUPS,
         "model.kv_channels": KV, "model.ffn_hidden_size": FFN, "model.vocab_size": 1024, "model.seq_length": SEQ,
         "model.hybrid_layer_pattern": PATTERN, "model.mamba_num_heads": MAMBA_HEADS,
         "model.mamba_head_dim": HEAD_DIM, "model.mamba_num_groups": M_GROUPS, "model.mamba_state_dim": STATE,
         "model.num_moe_experts": EXPERTS, "model.moe_ffn_hidden_size": EXPERT_FFN, "model.moe_router_topk": 2,
         "model.moe_shared_expert_intermediate_size": SHARED}


class _Precision:
    """A MixedPrecisionConfig record as the reader sees one (Bridge's bf16_with_nvfp4_mixed by default)."""

    def __init__(self, **fields):
        self.fields = {"bf16": True, "fp8": None, "fp4": "e2m1", "fp4_recipe": "nvfp4", "fp4_param_gather": True,
                       "grad_reduce_in_fp32": True, **fields}


def _fp8(recipe: str, **fields) -> _Precision:
    return _Precision(fp4=None, fp4_recipe=None, fp4_param_gather=False, fp8="hybrid", fp8_recipe=recipe,
                      fp8_param_gather=True, **fields)


def _read(extra: dict | None = None, precision_config: _Precision | None = None):
    values = dict(SIZES, **(extra or {}))
    if precision_config is not None:
        values["mixed_precision"] = precision_config
    return read_inputs(lookup(values), "x_config", fp8_transpose=False)


def _terms(inputs, index: int) -> dict[str, float]:
    m, p, t = inputs.model, inputs.parallel, inputs.training
    fp8 = precision.is_fp8_layer(m, t.low_precision, index)
    layer = act.layer_terms(m, p, t, m.is_moe_layer(index), fp8, m.layer_kind(index))
    kept = act.after_selective_recompute(layer, t, m.layer_kind(index)).terms
    return {k: v for k, v in kept.items() if v}  # no dropout: its masks are 0 bytes


def _layer_bytes(inputs) -> float:
    return {part.name: part.bytes for part in estimate(inputs).stages[0].parts}["activations: transformer layers"]


# GEMM weight elements per layer kind, from the linears' shapes (no biases: HybridModelProvider's default).
_MAMBA_GEMM = H * WIDTH + D_INNER * H  # in_proj, out_proj
_ATTENTION_GEMM = H * (HEADS * KV + 2 * GROUPS * KV) + HEADS * KV * H  # linear_qkv, linear_proj
_MLP_GEMM = 2 * H * FFN  # fc1, fc2 (squared ReLU, no gate)
_MOE_GEMM = 2 * H * SHARED + EXPERTS * 2 * H * EXPERT_FFN  # the shared expert and the routed experts (EP1)
_GEMM = {"M": _MAMBA_GEMM, "*": _ATTENTION_GEMM, "-": _MLP_GEMM, "E": _MOE_GEMM}


def test_nvfp4_is_modelled_for_a_16_aligned_mamba_mixer():
    inputs = _read(precision_config=_Precision())
    assert inputs.complete, (inputs.unsupported, inputs.unknown)
    lp = inputs.training.low_precision
    assert (lp.recipe, lp.params, lp.bf16_layers_start, lp.bf16_layers_end) == ("nvfp4", True, 0, 0)


def test_nvfp4_holds_every_layers_gemm_weights_in_fp4_mamba_in_and_out_proj_included():
    """FP4 primary weights: per GEMM weight element 2 x (1/2 + 1/16) bytes (E2M1 data and an E4M3 scale per 16,
    both usages) in place of bf16's 2; the conv1d, dt_bias, A_log, D and the norms stay bf16."""
    inputs = _read(precision_config=_Precision())
    m = inputs.model
    gemm = sum(_GEMM[kind] for kind in PATTERN)
    assert sum(sum(precision.gemm_weights(m, m.is_moe_layer(i), m.layer_kind(i))) for i in range(6)) == gemm
    parts = {part.name: part.bytes for part in estimate(inputs).stages[0].parts}
    weights = parts["weights (bf16/fp16; NVFP4 GEMM weights, nvfp4)"]
    assert weights == pytest.approx((params.total(m) - gemm) * 2 + gemm * 2 * (1 / 2 + 1 / 16))


def test_nvfp4_keeps_the_layers_first_last_layers_bf16_names_in_bf16():
    """get_fp4_context numbers the hybrid layers globally (hybrid_block.py): with one bf16 layer at each end the
    first Mamba layer and the last MoE layer keep bf16 weights (and a cached copy is not made for them)."""
    inputs = _read(precision_config=_Precision(first_last_layers_bf16=True, num_layers_at_start_in_bf16=1,
                                               num_layers_at_end_in_bf16=1))
    assert inputs.complete, inputs.unsupported
    m = inputs.model
    quantized = sum(_GEMM[kind] for kind in PATTERN[1:-1])
    parts = {part.name: part.bytes for part in estimate(inputs).stages[0].parts}
    weights = parts["weights (bf16/fp16; NVFP4 GEMM weights, nvfp4)"]
    assert weights == pytest.approx((params.total(m) - quantized) * 2 + quantized * 1.125)
    # the bf16 Mamba layer saves its in_proj input in bf16, the NVFP4 one (index 3) in FP4
    assert _terms(inputs, 0)["in_proj_input"] == 2 * SEQ * H
    assert _terms(inputs, 3)["in_proj_input"] == SEQ * H * (1 / 2 + 1 / 16)


def test_nvfp4_saves_the_mamba_linears_inputs_quantized_and_the_scan_in_bf16():
    """in_proj (its fused norm's output) and out_proj (the gated norm's output, which the norm does not keep:
    no set_save_original_input in MambaMixer) save the column-wise FP4 copy, 1/2 + 1/16 byte per element; the
    scan's input and output, the gated norm's input and the norm's own input stay bf16."""
    inputs = _read(precision_config=_Precision())
    fp4, bf16 = _terms(inputs, 0), _terms(_read(), 0)
    per = 1 / 2 + 1 / 16
    assert fp4["in_proj_input"] == SEQ * H * per
    assert fp4["out_proj_input"] == SEQ * D_INNER * per
    assert fp4["mamba_scan_input"] == bf16["mamba_scan_input"] == 2 * SEQ * WIDTH
    for name in ("mamba_norm_input", "mamba_scan_output", "mamba_gated_norm_input"):
        assert fp4[name] == bf16[name]
    # attention stays bf16 under NVFP4 (NVFP4BlockScaling.fp8_dpa is False): q, k, v and the output
    attention = _terms(inputs, 1)
    assert attention["core_attn_qkv"] == 2 * SEQ * (HEADS + 2 * GROUPS) * KV
    assert attention["core_attn_out"] == 2 * SEQ * HEADS * KV
    assert attention["qkv_input"] == SEQ * H * per


def test_nvfp4_needs_a_mixer_16_aligned_on_each_tensor_parallel_rank():
    """TP2 splits in_proj to 552 rows, not whole 16-element NVFP4 blocks: no verdict (TP1's 1104 has one)."""
    inputs = _read({"model.tensor_model_parallel_size": 2}, _Precision())
    assert any("NVFP4 with a Mamba in_proj 552" in why for why in inputs.unsupported), inputs.unsupported
    fp8 = _read({"model.tensor_model_parallel_size": 2}, _fp8("mxfp8"))
    assert not fp8.unsupported, fp8.unsupported  # FP8 asks only the whole width to be a multiple of 16


def _mxfp8_head_bytes(head_dim: int) -> float:
    """A row-wise MXFP8 q/k/v element: 1 byte, and one E8M0 scale per 32 elements of a head with the scale
    columns padded to a multiple of 4."""
    scales = -(-head_dim // 32)
    return 1 + (-(-scales // 4) * 4) / head_dim


def test_fp8_attention_saves_fp8_q_k_v_in_the_attention_layers_only():
    """fp8_dot_product_attention with MXFP8 (Bridge's Nemotron 3 Nano GB200 MXFP8 recipe): the attention layer
    saves q, k, v row-wise in MXFP8 instead of bf16, its output in bf16; the Mamba, MLP and MoE layers, which
    have no core attention, save what they save without it."""
    with_attention = _read(precision_config=_fp8("mxfp8", fp8_dot_product_attention=True))
    without = _read(precision_config=_fp8("mxfp8"))
    assert with_attention.complete, with_attention.unsupported
    assert with_attention.training.low_precision.attention
    attention = _terms(with_attention, 1)
    per_token = (HEADS + GROUPS) * KV * _mxfp8_head_bytes(KV) + GROUPS * KV * _mxfp8_head_bytes(KV)
    assert attention["core_attn_qkv"] == pytest.approx(SEQ * per_token)
    assert attention["core_attn_out"] == 2 * SEQ * HEADS * KV
    assert _terms(without, 1)["core_attn_qkv"] == 2 * SEQ * (HEADS + 2 * GROUPS) * KV
    for index in (0, 2, 4):  # Mamba, MoE, MLP
        assert _terms(with_attention, index) == _terms(without, index)
    saved = 2 * SEQ * (HEADS + 2 * GROUPS) * KV - SEQ * per_token
    assert _layer_bytes(without) - _layer_bytes(with_attention) == pytest.approx(saved)


def test_fp8_attention_with_delayed_scaling_copies_the_projection_input_in_attention_layers_only():
    """Delayed scaling: the FP8 attention output (1 byte) and the output projection's own FP8 input; the MoE
    layers keep the shared expert's quantized fc1 input and get no projection input."""
    inputs = _read(precision_config=_fp8("delayed", fp8_dot_product_attention=True, fp8_amax_history_len=16))
    assert inputs.complete, inputs.unsupported
    attention, moe, mlp = _terms(inputs, 1), _terms(inputs, 2), _terms(inputs, 4)
    assert attention["core_attn_out"] == SEQ * HEADS * KV
    assert attention["proj_input"] == SEQ * HEADS * KV
    assert attention["core_attn_qkv"] == SEQ * (HEADS + 2 * GROUPS) * KV
    assert "proj_input" not in moe and "proj_input" not in mlp
    assert moe["shared_fc1_input"] == SEQ * H


def test_selective_recompute_moe_and_layernorm_as_bridges_nemotron_3_nano_h100_recipe():
    """recompute_modules ["moe", "layernorm"]: the MoE layers keep only their input (the pre-MLP norm's input,
    which its checkpoint holds); the Mamba layers recompute nothing (MambaLayer has no recompute); the attention
    layer's norm is fused into linear_qkv, so `layernorm` leaves its saved input alone."""
    plain = _read()
    recompute = _read({"model.recompute_granularity": "selective", "model.recompute_modules": ["moe", "layernorm"]})
    assert recompute.complete, (recompute.unsupported, recompute.unknown)
    assert _terms(recompute, 0) == _terms(plain, 0)
    assert _terms(recompute, 1) == _terms(plain, 1)
    assert "qkv_input" in _terms(recompute, 1)
    assert _terms(recompute, 4) == _terms(plain, 4)  # the MLP layer: neither module applies
    assert _terms(recompute, 2) == {"mlp_norm_input": 2 * SEQ * H}
    dropped = sum(v for k, v in _terms(plain, 2).items() if k != "mlp_norm_input")
    assert _layer_bytes(plain) - _layer_bytes(recompute) == pytest.approx(2 * dropped)


def test_selective_recompute_of_layernorm_alone_drops_the_moe_norms_output():
    """["layernorm"] (Bridge's Nemotron 3 Nano H100 FP8 current-scaling recipe): only the MoE layers' pre-MLP norm
    output goes; the attention layer's fused norm keeps its FP8 output (linear_qkv's saved input)."""
    recompute = {"model.recompute_granularity": "selective", "model.recompute_modules": ["layernorm"]}
    plain, bf16 = _terms(_read(), 2), _terms(_read(recompute), 2)
    assert set(plain) - set(bf16) == {"moe_input"}
    current = _fp8("tensorwise")
    before, after = _terms(_read(precision_config=current), 2), _terms(_read(recompute, current), 2)
    assert set(before) - set(after) == {"moe_input"}
    assert _terms(_read(recompute, current), 1)["qkv_input"] == SEQ * H  # 1 byte per element, kept


def test_layernorm_recompute_with_delayed_scaling_has_no_verdict():
    """megatron-core's TransformerConfig raises for moe_act or layernorm recompute with FP8 delayed scaling."""
    inputs = _read({"model.recompute_granularity": "selective", "model.recompute_modules": ["layernorm"]},
                   _fp8("delayed", fp8_amax_history_len=16))
    assert any("Delayed scaling does not support" in why for why in inputs.unsupported), inputs.unsupported


def test_selective_recompute_of_the_mlp_checkpoints_the_whole_dense_mlp():
    """["mlp"]: the MLP layer keeps only its input (the checkpoint's, which fc1's fused norm saved before); MoE
    layers ignore it (TransformerLayer: recompute_mlp only when not a MoE layer)."""
    plain, recompute = _read(), _read({"model.recompute_granularity": "selective", "model.recompute_modules": ["mlp"]})
    assert recompute.complete, recompute.unsupported
    assert _terms(recompute, 4) == {"mlp_norm_input": 2 * SEQ * H}
    assert _terms(recompute, 2) == _terms(plain, 2)


@pytest.mark.parametrize("modules,dropped", [
    (["moe_act"], {"expert_act_output"}),
    (["shared_experts"], {"shared_fc1_output", "shared_act_output"}),
])
def test_moe_act_and_shared_experts_act_on_the_moe_layers_as_in_a_gpt_model(modules, dropped):
    plain, recompute = _read(), _read({"model.recompute_granularity": "selective", "model.recompute_modules": modules})
    assert set(_terms(plain, 2)) - set(_terms(recompute, 2)) == dropped
    assert _terms(recompute, 0) == _terms(plain, 0)


@pytest.mark.parametrize("extra,reason", [
    ({"model.recompute_modules": ["moe"], "model.cuda_graph_impl": "local", "model.cuda_graph_modules": ["attn"]},
     "local CUDA graphs"),
    ({"model.recompute_modules": ["moe"], "model.cuda_graph_impl": "transformer_engine",
      "model.cuda_graph_modules": ["moe_router"]}, "asserts"),
    # a recomputed part inside a graph: the whole layer (no per-layer modules), or the graphed MLP / MoE
    ({"model.recompute_modules": ["moe_act"], "model.cuda_graph_impl": "transformer_engine"}, "inside CUDA-graphed"),
    ({"model.recompute_modules": ["mlp"], "model.cuda_graph_impl": "transformer_engine",
      "model.cuda_graph_modules": ["mlp"]}, "'mlp' inside CUDA-graphed"),
    ({"model.recompute_modules": ["shared_experts"], "model.cuda_graph_impl": "local",
      "model.cuda_graph_modules": ["moe"]}, "'shared_experts' inside CUDA-graphed"),
])
def test_where_cuda_graphs_decide_the_recompute_there_is_no_verdict(extra, reason):
    inputs = _read({"model.recompute_granularity": "selective", **extra})
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


def test_cuda_graphs_that_leave_the_recomputed_parts_alone_keep_the_verdict():
    """Bridge's Nemotron 3 Nano H100 recipes graph attention and Mamba layers with Transformer Engine and recompute
    the MoE and its norm; without MoE layers a captured router decides nothing; with them megatron-core keeps the
    pre-MLP norm's output when the graphs capture the router without the preprocessing (inputs.
    _pre_mlp_norm_recomputed; tests/test_estimate_hybrid_norm_graphs.py); core_attn drops nothing, graphed or
    not."""
    graphs = {"model.recompute_granularity": "selective", "model.recompute_modules": ["moe", "layernorm"],
              "model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_modules": ["attn", "mamba"]}
    assert _read(graphs).complete
    routed = dict(graphs, **{"model.recompute_modules": ["layernorm"],
                             "model.cuda_graph_modules": ["attn", "moe_router"]})
    dense = {"model.hybrid_layer_pattern": "M*M-", "model.num_moe_experts": None}
    assert _read(dict(routed, **dense)).complete and _read(routed).complete
    assert _read(dict(routed, **dense)).training.pre_mlp_norm_recompute is True
    assert _read(routed).training.pre_mlp_norm_recompute is False
    whole = {"model.recompute_granularity": "selective", "model.recompute_modules": ["core_attn"],
             "model.cuda_graph_impl": "transformer_engine"}
    assert _read(whole).complete


def test_an_unknown_cuda_graph_scope_leaves_the_recompute_unknown():
    inputs = _read({"model.recompute_granularity": "selective", "model.recompute_modules": ["layernorm"],
                    "model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_modules": Unknown("launcher")})
    assert "model.cuda_graph_modules" in inputs.unknown and not inputs.complete
