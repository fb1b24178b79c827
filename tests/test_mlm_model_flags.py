"""Megatron-LM launch flags that shape the model, as megatron-core gets them from the command line: `--swiglu` is
gated_linear_unit (core_transformer_config_from_args), and with no `--ffn-hidden-size` validate_args sizes the MLP
at 2/3 of 4h, in multiples of 64. A helper's sweep: on a Llama 3 8B launch `offlint estimate` counted 6.15B
parameters (the MLP without its gate) and asked for `--disable-bias-linear`'s and `--position-embedding-type`'s
settings as if they were not given. Fixtures of our own."""

from __future__ import annotations

import pytest

from offlint.units import load_unit

LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
          "--seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 "
          "--global-batch-size 64 --bf16 {extra}\n")


def _resolved(tmp_path, extra: str):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.sh").write_text(LAUNCH.format(extra=extra))
    return load_unit(str(tmp_path / "train.sh"), mcore_version="0.20.0", root=tmp_path).resolved


@pytest.mark.parametrize("extra, gated, ffn", [
    ("", False, None),  # megatron-core's default: 4h
    ("--swiglu", True, 10880),  # validate_args: int(4 * 4096 * 2 / 3 / 64) * 64
    ("--swiglu --ffn-hidden-size 14336", True, 14336),
    ("--ffn-hidden-size 14336 --swiglu", True, 14336),
])
def test_swiglu_gates_the_mlp_and_sizes_it_where_the_launch_does_not(tmp_path, extra, gated, ffn):
    resolved = _resolved(tmp_path, extra)
    assert resolved.get("model.gated_linear_unit").value is gated
    assert resolved.get("model.ffn_hidden_size").value == ffn


@pytest.mark.parametrize("extra, key, value", [
    ("--disable-bias-linear", "model.add_bias_linear", False),
    ("--position-embedding-type rope", "model.position_embedding_type", "rope"),
    ("--context-parallel-size 2", "model.context_parallel_size", 2),
    ("--use-rotary-position-embeddings", "model.position_embedding_type", "rope"),
    ("--position-embedding-type mrope --use-rotary-position-embeddings", "model.position_embedding_type", "rope"),
    ("--fp8-amax-history-len 1024", "model.fp8_amax_history_len", 1024),
])
def test_the_model_shapes_flags_are_read(tmp_path, extra, key, value):
    found = _resolved(tmp_path, extra).get(key)
    assert (found.state, found.value) == ("known", value)
