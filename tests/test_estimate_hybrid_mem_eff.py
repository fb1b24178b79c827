"""A Mamba mixer without the memory-efficient path (use_mamba_mem_eff_path=False, as Bridge's
nemotronh_4b_pretrain_1gpu_h100_bf16_config sets it): megatron-core's MambaMixer then runs causal_conv1d_fn,
mamba_chunk_scan_combined and the gated RMSNorm as separate autograd Functions, which keep other tensors than
the fused mamba_split_conv1d_scan_combined. The expected bytes are written out tensor by tensor from
docs/estimate.md's list, not computed by the code under test.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from offlint.estimate import activations as act
from offlint.estimate.inputs import Parallelism, Training, read_inputs
from offlint.estimate.memory import estimate
from offlint.units import load_unit
from tests.estimate_helpers import write_recipe_tree

TOKENIZER_UTILS = "DEFAULT_NULL_TOKENIZER_VOCAB_SIZE: int = 32000\n"

COMMON = textwrap.dedent('''
    from megatron.bridge.training.config import ConfigContainer, GPTDatasetConfig, TrainingConfig
    from megatron.bridge.training.tokenizers.config import TokenizerConfig


    def _pretrain_common() -> ConfigContainer:
        return ConfigContainer(
            model=None,
            train=TrainingConfig(global_batch_size=16, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=1024, split="9999,8,2"),
            tokenizer=TokenizerConfig(tokenizer_type="NullTokenizer", tokenizer_model=None),
        )
''')

# Bridge's Nemotron-H recipe shape, scaled down: 3 Mamba layers, one MLP, one attention layer. The variants also
# set pipeline_model_parallel_size: a function is a unit when it sets a key of offlint's table (keys.py), which
# use_mamba_mem_eff_path and micro_batch_size are not.
RECIPES = textwrap.dedent('''
    from megatron.bridge.models.hybrid.hybrid_provider import HybridModelProvider
    from megatron.bridge.recipes.common import _pretrain_common
    from megatron.bridge.recipes.utils.tokenizer_utils import DEFAULT_NULL_TOKENIZER_VOCAB_SIZE


    def small_hybrid_split_kernels_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = HybridModelProvider(
            hybrid_layer_pattern="M-M*M",
            num_layers=5,
            hidden_size=512,
            mamba_num_heads=16,
            mamba_head_dim=64,
            mamba_num_groups=4,
            mamba_state_dim=32,
            kv_channels=64,
            num_attention_heads=8,
            num_query_groups=2,
            ffn_hidden_size=2048,
            use_mamba_mem_eff_path=False,
            seq_length=1024,
            make_vocab_size_divisible_by=128,
            tensor_model_parallel_size=1,
            pipeline_model_parallel_size=1,
            context_parallel_size=1,
            sequence_parallel=False,
        )
        cfg.tokenizer.vocab_size = DEFAULT_NULL_TOKENIZER_VOCAB_SIZE
        cfg.dataset.seq_length = 1024
        cfg.train.micro_batch_size = 1
        return cfg


    def small_hybrid_fused_pretrain_config():
        cfg = small_hybrid_split_kernels_pretrain_config()
        cfg.model.use_mamba_mem_eff_path = True
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def small_hybrid_split_kernels_mbs2_pretrain_config():
        cfg = small_hybrid_split_kernels_pretrain_config()
        cfg.train.micro_batch_size = 2
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def small_hybrid_fused_mbs2_pretrain_config():
        cfg = small_hybrid_fused_pretrain_config()
        cfg.train.micro_batch_size = 2
        cfg.model.pipeline_model_parallel_size = 1
        return cfg
''')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_recipe_tree(tmp_path, TOKENIZER_UTILS, COMMON, "nemotron_like", RECIPES)


def _inputs(path: str, name: str):
    return read_inputs(load_unit(path, name, mcore_version="0.20.0").resolved.get, name)


def _layers(inputs) -> float:
    return {p.name: p.bytes for p in estimate(inputs).stages[0].parts}["activations: transformer layers"]


# The fixture's mixer: d_inner 16 x 64 = 1024, x|B|C 1024 + 2 x 4 x 32 = 1280 wide, 16 heads, 4 groups.
_D_INNER, _XBC, _HEADS, _GROUPS = 1024, 1280, 16, 4


def _split_mixer_bytes_per_token(norm_copy: bool) -> int:
    """What the separate kernels keep, per token at TP1, beside in_proj's and out_proj's inputs."""
    conv_input = 2 * _XBC                    # causal_conv1d_fn: x (the x|B|C slice, made contiguous)
    scan_inputs = 2 * (_XBC + _HEADS)        # mamba_chunk_scan_combined: x, B, C and dt
    da_cumsum = 4 * _HEADS                   # its fp32 dA_cumsum (1024 tokens are 8 whole chunks of 128)
    scan_output = 2 * _D_INNER               # its output (no z: the mixer's own gated RMSNorm gates)
    gate = 2 * _D_INNER                      # the norm's z
    rstd = 4 * _GROUPS                       # the norm's fp32 rstd per group
    norm_input = 2 * _D_INNER if norm_copy else 0  # the scan's output itself at micro-batch 1
    return conv_input + scan_inputs + da_cumsum + scan_output + gate + rstd + norm_input


def _fused_mixer_bytes_per_token() -> int:
    """What mamba_split_conv1d_scan_combined and the norm keep (zxbcdt, out_x, the norm's input and rstd)."""
    return 2 * (2 * _D_INNER + (_XBC - _D_INNER) + _HEADS) + 2 * _D_INNER + 2 * _D_INNER + 4 * _GROUPS


def test_a_recipe_without_the_memory_efficient_path_gets_an_estimate(tree):
    inputs = _inputs(tree, "small_hybrid_split_kernels_pretrain_config")
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    assert inputs.model.mamba_mem_eff_path is False
    assert _inputs(tree, "small_hybrid_fused_pretrain_config").model.mamba_mem_eff_path is True


@pytest.mark.parametrize("split,fused,tokens,norm_copy", [
    ("small_hybrid_split_kernels_pretrain_config", "small_hybrid_fused_pretrain_config", 1024, False),
    ("small_hybrid_split_kernels_mbs2_pretrain_config", "small_hybrid_fused_mbs2_pretrain_config", 2048, True),
])
def test_the_separate_kernels_change_only_the_mamba_layers_saved_tensors(tree, split, fused, tokens, norm_copy):
    """Three Mamba layers, one micro-batch in flight (PP1): the stage's layer activations differ by three
    times the mixers' difference; attention and MLP layers and the projections' inputs are the same."""
    per_layer = tokens * (_split_mixer_bytes_per_token(norm_copy) - _fused_mixer_bytes_per_token())
    assert _layers(_inputs(tree, split)) - _layers(_inputs(tree, fused)) == pytest.approx(3 * per_layer)


def test_split_terms_by_tensor_and_their_tensor_parallel_split(tree):
    m = _inputs(tree, "small_hybrid_split_kernels_pretrain_config").model
    one = act.mamba_terms(m, Parallelism(), Training())
    n = 1024
    assert one["mamba_conv_input"] == 2 * n * _XBC
    assert one["mamba_scan_input"] == 2 * n * (_XBC + _HEADS)
    assert one["mamba_scan_dA_cumsum"] == 4 * n * _HEADS
    assert one["mamba_gated_norm_input"] == 2 * n * _D_INNER + 4 * n * _GROUPS
    assert one["in_proj_input"] == one["mamba_norm_input"] == 2 * n * 512
    four = act.mamba_terms(m, Parallelism(tp=4, sequence_parallel=True), Training())
    assert all(four[k] == pytest.approx(v / 4) for k, v in one.items())
    # context parallelism: the all-to-all before the norm makes its input a tensor of its own
    cp2 = act.mamba_terms(m, Parallelism(cp=2), Training())
    assert cp2["mamba_gated_norm_input"] == 2 * 2 * (n / 2) * _D_INNER + 4 * (n / 2) * _GROUPS


def test_da_cumsum_covers_the_sequence_padded_to_whole_chunks(tree):
    m = replace(_inputs(tree, "small_hybrid_split_kernels_pretrain_config").model, seq_length=1000)
    assert act.mamba_terms(m, Parallelism(), Training())["mamba_scan_dA_cumsum"] == 4 * 1024 * _HEADS
