"""FP8 attention under NVFP4 (`fp8_dot_product_attention` with `fp4="e2m1"`, as Bridge's llama3 8B GB200 NVFP4 perf
recipe sets it). Transformer Engine (d0067d0, DotProductAttention.init_fp8_metadata) keeps the NVFP4 recipe for
attention unless NVTE_DPA_FP8_RECIPE names another, and then has no attention backend for training; with
Float8CurrentScaling or MXFP8BlockScaling attention saves what it saves under that FP8 recipe. Expected bytes are
derived here from the tensor shapes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations
from offlint.estimate.inputs import LowPrecision, ModelShape, Parallelism, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup


class _Record:
    def __init__(self, **fields):
        self.fields = {"bf16": True, "fp8": None, "fp4": "e2m1", "fp4_recipe": "nvfp4", "fp4_param_gather": True,
                       "fp8_dot_product_attention": True, "grad_reduce_in_fp32": True, **fields}


MODEL = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)


def _read(env: object = None, **fields):
    values = {"mixed_precision": _Record(**fields)}
    if env is not None:
        values["env.NVTE_DPA_FP8_RECIPE"] = env
    return read_inputs(lookup(values), "x_config", fp8_transpose=False)


@pytest.mark.parametrize(("env", "attention", "recipe"), [
    ("Float8CurrentScaling", True, "tensorwise"),
    ("MXFP8BlockScaling", True, "mxfp8"),
    ("F16", False, None),
])
def test_the_attention_recipe_is_read_from_nvte_dpa_fp8_recipe(env, attention, recipe):
    lp = _read(env).training.low_precision
    assert (lp.recipe, lp.attention, lp.attention_recipe) == ("nvfp4", attention, recipe)


@pytest.mark.parametrize(("env", "fields", "why"), [
    (None, {}, "without NVTE_DPA_FP8_RECIPE"),
    ("DelayedScaling", {}, "NVTE_DPA_FP8_RECIPE='DelayedScaling'"),
    ("Float8CurrentScaling", {"fp8_multi_head_attention": True}, "FP8 multi-head attention under NVFP4"),
])
def test_what_has_no_verdict(env, fields, why):
    inputs = _read(env, **fields)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_an_unknown_attention_recipe_leaves_the_estimate_unknown():
    inputs = _read(Unknown("set by the launcher"))
    assert "env.NVTE_DPA_FP8_RECIPE" in inputs.unknown and not inputs.complete


@pytest.mark.parametrize("recipe", ["tensorwise", "mxfp8"])
def test_nvfp4_linears_with_fp8_attention_save_fp8_q_k_v_and_a_bf16_output(recipe):
    """Row-wise FP8 q, k and v (MXFP8 with an E8M0 scale per 32 elements, the scale columns padded to 4) replace
    the bf16 ones; the output stays bf16 (current scaling's default NVTE_DPA_FP8CS_O_in_F16=1, MXFP8) and the
    NVFP4 output projection saves that same tensor (set_save_original_input)."""
    p, t = Parallelism(world_size=1), Training(global_batch_size=1)
    plain = LowPrecision("nvfp4", params=True)
    fp8 = replace(plain, attention=True, attention_recipe=recipe)
    bf16_attention = activations.layer_terms(MODEL, p, replace(t, low_precision=plain), False, True).terms
    terms = activations.layer_terms(MODEL, p, replace(t, low_precision=fp8), False, True).terms
    n, d = MODEL.seq_length, MODEL.kv_channels
    rows = MODEL.num_attention_heads + 2 * MODEL.num_query_groups
    row = d + -(-(-(-d // 32)) // 4) * 4 if recipe == "mxfp8" else d
    assert terms["core_attn_qkv"] == pytest.approx(n * rows * row)
    assert bf16_attention["core_attn_qkv"] == pytest.approx(2 * n * rows * d)
    assert terms["core_attn_out"] == bf16_attention["core_attn_out"] and "proj_input" not in terms
