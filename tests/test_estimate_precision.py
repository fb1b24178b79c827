"""FP8 training in the memory model (offlint/estimate/precision.py): which recipe keeps what, read from Bridge's
precision configs. Expected bytes are derived here from the parameter counts and Transformer Engine's storage
rules (docs/estimate.md, "FP8 training"), not copied from the model's output; that the GEMM weights are the
linear weights of a real GPTModel is tests/test_estimate_params.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations, memory, params
from offlint.estimate.inputs import Inputs, LowPrecision, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

# Llama-3-8B-shaped, no biases: every parameter that is not embedding, output layer or a norm is a GEMM weight.
MODEL = ModelShape(num_layers=8, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)
TRAIN = Training(micro_batch_size=1, global_batch_size=64, distributed_optimizer=True)
PARALLEL = Parallelism(world_size=8)


def _gemm_weights(m: ModelShape = MODEL) -> int:
    """GEMM weights by subtraction: all parameters less the embedding, the output layer and the RMSNorms."""
    norms = (2 * m.num_layers + 1) * m.hidden_size
    return params.total(m) - 2 * m.vocab_size * m.hidden_size - norms


def _nvfp4_bytes(rows: int, cols: int, rowwise: bool = True, columnwise: bool = True) -> int:
    """Bytes of one NVFP4 tensor of shape [rows, cols], as Transformer Engine allocates it
    (NVFP4Quantizer.inner_tensor_specs / create_tensor, get_scale_shape): per usage the E2M1 data with two
    elements per byte, one E4M3 byte per 16 elements with the scale tensor padded to 128 x 4, and an fp32 amax;
    the column-wise usage is stored transposed."""
    def up(x, k):
        return -(-x // k) * k

    def usage(m, k):
        return m * k // 2 + up(m, 128) * up(-(-k // 16), 4) + 4
    return (usage(rows, cols) if rowwise else 0) + (usage(cols, rows) if columnwise else 0)


def _gemm_shapes(m: ModelShape = MODEL) -> list[tuple[int, int]]:
    """[out, in] of one layer's TE linears: QKV, output projection, fc1 (gated: two halves), fc2."""
    h, q, kv, f = m.hidden_size, m.num_attention_heads * m.kv_channels, m.num_query_groups * m.kv_channels, \
        m.ffn_hidden_size
    return [(q + 2 * kv, h), (h, q), (2 * f, h), (h, f)]


def _stage(lp: LowPrecision | None, model=MODEL, parallel=PARALLEL, training=TRAIN) -> memory.StageMemory:
    return memory.estimate(Inputs(model, parallel, replace(training, low_precision=lp))).peak


def _weights(stage: memory.StageMemory) -> float:
    return stage.of("weights")


@pytest.mark.parametrize(("recipe", "transpose", "copy"), [
    ("tensorwise", True, 2.0),  # Hopper: FP8 data and its FP8 transpose
    ("tensorwise", False, 1.0),  # Blackwell: one FP8 buffer serves both GEMM layouts
    ("delayed", True, 2.0),
    ("mxfp8", True, 2 * (1 + 1 / 32)),  # row-wise and column-wise data, an E8M0 byte per 32 of each
    ("blockwise", True, 2 * (1 + 4 / (128 * 128))),  # both usages, an fp32 scale per 128x128 block
    # NVFP4: both usages, half a byte per element and an E4M3 scale per 16 (TE's allocation, amaxes aside)
    ("nvfp4", True, sum(_nvfp4_bytes(*shape) - 8 for shape in _gemm_shapes()) / sum(o * i for o, i in _gemm_shapes())),
])
def test_fp8_weights_per_recipe(recipe, transpose, copy):
    gemm, total = _gemm_weights(), params.total(MODEL)
    bf16 = _weights(_stage(None))
    assert bf16 == 2 * total
    state = 0.0
    if recipe == "delayed":  # 4 GEMMs per layer, 5 quantizers each, history + scale + scale_inv in fp32
        state = MODEL.num_layers * 4 * 5 * (1024 + 2) * 4
    lp = LowPrecision(recipe, params=False, transpose=transpose, amax_history=1024)
    # bf16 primary weights: Transformer Engine's cached quantized copy beside them.
    assert _weights(_stage(lp)) == pytest.approx(2 * total + copy * gemm + state)
    # FP8 primary weights (fp8_param_gather): the quantized copy replaces the bf16 GEMM weight.
    assert _weights(_stage(replace(lp, params=True))) == pytest.approx(2 * (total - gemm) + copy * gemm + state)


def test_fp8_changes_no_gradient_or_optimizer_bytes():
    lp = LowPrecision("tensorwise", params=True)
    for kind in ("grads", "optimizer"):
        assert _stage(lp).of(kind) == _stage(None).of(kind)


def test_first_and_last_bf16_layers_keep_no_fp8_copies_and_bf16_activations():
    lp = LowPrecision("tensorwise", params=False, bf16_layers_start=1, bf16_layers_end=2)
    full = LowPrecision("tensorwise", params=False)
    per_layer = _gemm_weights() / MODEL.num_layers * 2
    assert _stage(full).of("weights") - _stage(lp).of("weights") == pytest.approx(3 * per_layer)
    bf16_layer = activations.layer_terms(MODEL, PARALLEL, TRAIN, False).total
    fp8_layer = activations.layer_terms(MODEL, PARALLEL, replace(TRAIN, low_precision=lp), False, True).total
    layers = "activations: transformer layers"
    assert _part(_stage(lp), layers) - _part(_stage(full), layers) == pytest.approx(3 * (bf16_layer - fp8_layer))


def _part(stage: memory.StageMemory, name: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name == name)


@pytest.mark.parametrize(("recipe", "per"), [("delayed", 1.0), ("tensorwise", 1.0), ("mxfp8", 1 + 1 / 32),
                                             ("blockwise", 1 + 4 / 128),
                                             # the column-wise usage of an NVFP4 tensor, per element
                                             ("nvfp4", (_nvfp4_bytes(2048, 1024, rowwise=False) - 4) / 2048 / 1024)])
@pytest.mark.parametrize("sp", [False, True])
def test_fp8_linears_save_quantized_inputs(recipe, per, sp):
    """The QKV and fc1 inputs (normalised hidden states) and the fc2 input (activation output) are saved
    quantized; with delayed scaling the output projection saves a quantized copy beside flash attention's bf16
    output, the other recipes its original input (megatron-core's set_save_original_input), i.e. nothing more."""
    parallel = Parallelism(tp=2, sequence_parallel=sp, world_size=8)
    t = replace(TRAIN, low_precision=LowPrecision(recipe))
    bf16 = activations.layer_terms(MODEL, parallel, TRAIN, False).terms
    fp8 = activations.layer_terms(MODEL, parallel, t, False, True).terms
    n, h, f = MODEL.seq_length, MODEL.hidden_size, MODEL.ffn_hidden_size
    shard = 2 if sp else 1  # sequence parallelism shards the normalised inputs over TP
    assert fp8["qkv_input"] == pytest.approx(per * n * h / shard)
    assert fp8["fc1_input"] == pytest.approx(per * n * h / shard)
    assert fp8["act_output"] == pytest.approx(per * n * f / 2)
    if recipe == "delayed":
        assert fp8["proj_input"] == pytest.approx(per * n * 8 * 128 / 2)
    else:
        assert "proj_input" not in fp8
    assert fp8["core_attn_out"] == bf16["core_attn_out"]  # flash attention's output stays bf16
    for name in ("attn_norm_input", "mlp_norm_input", "core_attn_qkv", "fc1_output"):
        assert fp8[name] == bf16[name], name


class _Record:
    def __init__(self, **fields):
        self.fields = {"bf16": True, "fp16": False, "fp8": None, "fp8_recipe": "tensorwise", "fp8_param": None,
                       "fp8_param_gather": False, "fp4": None, "fp4_recipe": "nvfp4", "fp4_param": None,
                       "fp4_param_gather": False, "first_last_layers_bf16": False,
                       "num_layers_at_start_in_bf16": 0, "num_layers_at_end_in_bf16": 0, "fp8_amax_history_len": 1,
                       "grad_reduce_in_fp32": True, **fields}


def test_bridge_precision_configs_are_read():
    current = _Record(fp8="hybrid", fp8_param_gather=True, first_last_layers_bf16=True,
                      num_layers_at_start_in_bf16=1, num_layers_at_end_in_bf16=1)
    lp = read_inputs(lookup({"mixed_precision": current}), "x_config", fp8_transpose=True).training.low_precision
    assert lp == LowPrecision("tensorwise", params=True, transpose=True, bf16_layers_start=1, bf16_layers_end=1)
    # A recipe name Bridge looks up at run time (mixed_precision.py): the same settings.
    named = read_inputs(lookup({"mixed_precision": "bf16_with_fp8_current_scaling_mixed"}), "x_config",
                        fp8_transpose=True)
    assert named.training.low_precision == lp and not named.unsupported
    mx = read_inputs(lookup({"mixed_precision": "bf16_with_mxfp8_mixed"}), "x_config")  # no device needed
    assert mx.training.low_precision == LowPrecision("mxfp8", params=True) and not mx.unsupported
    bf16 = read_inputs(lookup({"mixed_precision": "bf16_mixed"}), "x_config", fp8_transpose=True)
    assert bf16.training.low_precision is None and not bf16.unsupported
    # Without Bridge's mixed_precision, megatron-core's own keys (Megatron-LM's --fp8-format).
    mcore = read_inputs(lookup({"model.fp8": "hybrid", "model.fp8_recipe": "delayed",
                                 "model.fp8_amax_history_len": 1024, "model.bf16": True}), "x", fp8_transpose=False)
    assert mcore.training.low_precision == LowPrecision("delayed", transpose=False, amax_history=1024)


def test_bridge_nvfp4_configs_are_read():
    """Bridge's bf16_with_nvfp4_mixed: fp4="e2m1", the nvfp4 recipe, FP4 primary weights (fp4_param_gather);
    nemotron_3_super_bf16_with_nvfp4_mixed also keeps the last 14 layers in bf16. The device's transpose question
    does not arise (None: any Blackwell-class GPU)."""
    named = read_inputs(lookup({"mixed_precision": "bf16_with_nvfp4_mixed"}), "x_config", fp8_transpose=False)
    assert named.training.low_precision == LowPrecision("nvfp4", params=True) and not named.unsupported
    assert named.training.compute_dtype == "fp4"
    record = _Record(fp4="e2m1", fp4_recipe="nvfp4", fp4_param_gather=True)
    assert read_inputs(lookup({"mixed_precision": record}), "x_config").training.low_precision == \
        named.training.low_precision
    bf16_weights = _Record(fp4="e2m1", fp4_recipe="nvfp4", fp4_param_gather=False)
    assert read_inputs(lookup({"mixed_precision": bf16_weights}), "x").training.low_precision == \
        LowPrecision("nvfp4", params=False)
    super_ = read_inputs(lookup({"mixed_precision": "nemotron_3_super_bf16_with_nvfp4_mixed"}), "x_config")
    assert super_.training.low_precision == LowPrecision("nvfp4", params=True, bf16_layers_end=14)
    mcore = read_inputs(lookup({"model.fp4": "e2m1", "model.fp4_param": True, "model.bf16": True}), "x")
    assert mcore.training.low_precision == LowPrecision("nvfp4", params=True)


@pytest.mark.parametrize("fp4_params", [False, True])
def test_nvfp4_weights_replace_or_join_the_bf16_ones(fp4_params):
    """FP4 primary weights (megatron-core 0.20: the row-wise bytes packed in the DDP buffer, the column-wise
    data and scales kept by the NVFP4 tensor) replace the bf16 GEMM weights; bf16 weights keep a cached NVFP4
    copy beside them."""
    gemm, total = _gemm_weights(), params.total(MODEL)
    per_layer = sum(_nvfp4_bytes(*shape) - 8 for shape in _gemm_shapes())
    copies = MODEL.num_layers * per_layer
    expected = 2 * (total - gemm) + copies if fp4_params else 2 * total + copies
    assert _weights(_stage(LowPrecision("nvfp4", params=fp4_params))) == pytest.approx(expected)


def test_nvfp4_leaves_the_mtp_block_in_bf16():
    """megatron-core builds and runs the MTP layers under FP8 contexts only: in NVFP4 training their weights and
    saved tensors are bf16, where FP8 training quantizes them."""
    m = replace(MODEL, mtp_num_layers=1)
    mtp = "activations: multi-token prediction (1 depths)"
    bf16, fp4, fp8 = _stage(None, m), _stage(LowPrecision("nvfp4", params=True), m), \
        _stage(LowPrecision("mxfp8", params=True), m)
    decoder_only = _weights(_stage(LowPrecision("nvfp4", params=True))) - _weights(_stage(None))
    assert _weights(fp4) - _weights(bf16) == pytest.approx(decoder_only)  # the MTP layer adds no NVFP4 copy
    assert _part(fp4, mtp) == _part(bf16, mtp) and _part(fp8, mtp) < _part(bf16, mtp)


@pytest.mark.parametrize(("values", "name", "transpose", "why"), [
    ({"mixed_precision": _Record(fp4="e2m1", fp4_recipe="custom")}, "x_config", False, "custom quantizer"),
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "x_config", True, "Hopper"),
    ({"mixed_precision": _Record(fp4="e2m1", fp8_dot_product_attention=True)}, "x_config", False, "FP8 attention"),
    ({"mixed_precision": _Record(fp8="hybrid", fp8_multi_head_attention=True)}, "x_config", True,
     "FP8 multi-head attention"),
    ({"mixed_precision": _Record(fp8="hybrid", fp8_recipe="blockwise", fp8_dot_product_attention=True)}, "x_config",
     True, "FP8 attention with blockwise"),
    ({"mixed_precision": _Record(fp8="hybrid", fp8_recipe="mxfp8", fp8_param_gather=True),
      "model.fp8_output_proj": True}, "x_config", False, "MXFP8 output layer (fp8_output_proj) with tied"),
    ({"mixed_precision": _Record()}, "llama3_8b_pretrain_8gpu_h100_fp8cs_config", True, "recipe name announces"),
    ({"model.fp8": "hybrid", "model.disable_parameter_transpose_cache": True}, "x", True, "transpose_cache"),
])
def test_what_fp8_settings_get_no_verdict(values, name, transpose, why):
    inputs = read_inputs(lookup(values), name, fp8_transpose=transpose)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


@pytest.mark.parametrize(("name", "transpose"), [("bf16_with_nvfp4_unknown_mixed", False),
                                              ("bf16_with_fp8_unknown_mixed", True)])
def test_a_precision_recipe_name_offlint_does_not_know_makes_the_estimate_unknown(name, transpose):
    # what the name builds is not known (Bridge raises on a name it does not register): no verdict, never bf16
    inputs = read_inputs(lookup({"mixed_precision": name}), "x_config", fp8_transpose=transpose)
    assert not inputs.complete and name in inputs.unknown["mixed_precision"]


def test_an_unknown_fp8_field_makes_the_estimate_unknown():
    inputs = read_inputs(lookup({"mixed_precision": _Record(fp8=Unknown("computed"))}), "x_config",
                         fp8_transpose=True)
    assert "mixed_precision" in inputs.unknown and not inputs.complete


def _mxfp8_row_bytes(d: int) -> int:
    """Bytes of one row of d elements quantized row-wise by MXFP8 (Transformer Engine's MXFP8Quantizer): the FP8
    data and one E8M0 scale per 32 elements, the scale columns padded to a multiple of 4."""
    return d + -(-(-(-d // 32)) // 4) * 4


@pytest.mark.parametrize("recipe", ["delayed", "tensorwise", "mxfp8"])
def test_fp8_attention_saves_fp8_q_k_v(recipe):
    """fp8_dot_product_attention: Transformer Engine's fused attention saves row-wise FP8 q, k and v (MXFP8 with
    its scales) instead of the bf16 ones; the output stays bf16, except with delayed scaling (FP8, and the output
    projection keeps its own quantized input). A recomputed core_attn keeps its bf16 inputs."""
    parallel = Parallelism(tp=2, world_size=8)
    lp = LowPrecision(recipe, attention=True)
    t = replace(TRAIN, low_precision=lp)
    plain = activations.layer_terms(MODEL, parallel, replace(t, low_precision=replace(lp, attention=False)), False,
                                    True).terms
    fp8 = activations.layer_terms(MODEL, parallel, t, False, True).terms
    n, d = MODEL.seq_length, MODEL.kv_channels
    rows = MODEL.num_attention_heads + 2 * MODEL.num_query_groups  # q heads, k and v groups
    row = _mxfp8_row_bytes(d) if recipe == "mxfp8" else d
    assert fp8["core_attn_qkv"] == pytest.approx(n * rows * row / 2)
    assert fp8["core_attn_out"] == plain["core_attn_out"] / (2 if recipe == "delayed" else 1)
    assert ("proj_input" in fp8) == (recipe == "delayed")
    selective = replace(t, recompute_granularity="selective", recompute_modules=("core_attn",))
    assert activations.layer_terms(MODEL, parallel, selective, False, True).terms["core_attn_qkv"] == \
        plain["core_attn_qkv"]


def test_fp8_attention_is_read():
    record = _Record(fp8="hybrid", fp8_recipe="mxfp8", fp8_param_gather=True, fp8_dot_product_attention=True)
    lp = read_inputs(lookup({"mixed_precision": record}), "x_config").training.low_precision
    assert lp == LowPrecision("mxfp8", params=True, attention=True)


def test_an_mxfp8_output_layer_caches_its_weight_and_saves_a_quantized_input():
    """fp8_output_proj with MXFP8 (megatron-core 0.20: TELMHeadColumnParallelLinear, built outside
    fp8_model_init): the bf16 LM head weight keeps a cached MXFP8 copy with both usages beside it, and its saved
    input is the column-wise MXFP8 copy of the final norm's output instead of the bf16 one."""
    values = {"mixed_precision": _Record(fp8="hybrid", fp8_recipe="mxfp8", fp8_param_gather=True),
              "model.fp8_output_proj": True, "model.share_embeddings_and_output_weights": False}
    lp = read_inputs(lookup(values), "x_config").training.low_precision
    assert lp == LowPrecision("mxfp8", params=True, output_layer=True)
    plain, head = _stage(replace(lp, output_layer=False)), _stage(lp)
    row = _mxfp8_row_bytes(MODEL.hidden_size) / MODEL.hidden_size  # 1 byte + an E8M0 scale per 32
    assert head.of("weights") - plain.of("weights") == pytest.approx(2 * row * MODEL.vocab_size * MODEL.hidden_size)
    name = "activations: output layer and logits"
    n, h = MODEL.seq_length, MODEL.hidden_size
    assert _part(plain, name) - _part(head, name) == pytest.approx((2 - row) * n * h)
