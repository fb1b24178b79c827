"""The model's vocabulary and sequence length as Megatron Bridge decides them at setup, read from recipes in the
shapes Bridge writes them (fixtures of our own): a model provider without `vocab_size` takes the tokenizer's, a
pretraining recipe's `use_tokenizer_vocab_size=True` overrides a preset one, and the provider pads a vocabulary
taken from the tokenizer to a multiple of make_vocab_size_divisible_by x TP (Bridge training/setup.py,
_validate_and_set_vocab_size; megatron-core's calculate_padded_vocab_size). A module constant imported from
another file (`DEFAULT_NULL_TOKENIZER_VOCAB_SIZE`) is followed, and nothing is imported or run."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from offlint.cli import main
from offlint.estimate import oom
from offlint.estimate.devices import GIB
from offlint.estimate.inputs import read_inputs
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
            train=TrainingConfig(global_batch_size=32, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=4096, split="9999,8,2"),
            tokenizer=TokenizerConfig(tokenizer_type="HuggingFaceTokenizer", tokenizer_model=None,
                                      use_tokenizer_vocab_size=True),
        )


    def _sft_common() -> ConfigContainer:
        return ConfigContainer(
            model=None,
            train=TrainingConfig(global_batch_size=32, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=4096, split="9999,8,2"),
            tokenizer=TokenizerConfig(tokenizer_type="HuggingFaceTokenizer", tokenizer_model=None),
        )
''')

RECIPES = textwrap.dedent('''
    from megatron.bridge.diffusion.models.wan.wan_provider import WanModelProvider
    from megatron.bridge.models.gpt_provider import GPTModelProvider
    from megatron.bridge.models.hybrid.hybrid_provider import HybridModelProvider
    from megatron.bridge.recipes.common import _pretrain_common, _sft_common
    from megatron.bridge.recipes.utils.tokenizer_utils import DEFAULT_NULL_TOKENIZER_VOCAB_SIZE


    def _model(tp: int) -> GPTModelProvider:
        return GPTModelProvider(num_layers=4, hidden_size=1024, num_attention_heads=8, seq_length=4096,
                                tensor_model_parallel_size=tp)


    def null_tokenizer_tp8_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = HybridModelProvider(hybrid_layer_pattern="M-M*", hidden_size=1024, num_attention_heads=8,
                                        seq_length=4096, make_vocab_size_divisible_by=128,
                                        tensor_model_parallel_size=8)
        cfg.tokenizer.tokenizer_type = "NullTokenizer"
        cfg.tokenizer.tokenizer_model = None
        cfg.tokenizer.vocab_size = DEFAULT_NULL_TOKENIZER_VOCAB_SIZE
        return cfg


    def null_tokenizer_tp1_pretrain_config():
        cfg = null_tokenizer_tp8_pretrain_config()
        cfg.model.tensor_model_parallel_size = 1
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def null_tokenizer_divisor_pretrain_config():
        cfg = null_tokenizer_tp1_pretrain_config()
        cfg.model.make_vocab_size_divisible_by = 1000
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def preset_vocab_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = _model(8)
        cfg.model.vocab_size = 128256
        cfg.tokenizer.tokenizer_model = "meta-llama/Meta-Llama-3-8B"
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def benchmark_pretrain_config():
        cfg = preset_vocab_pretrain_config()
        cfg.tokenizer.use_tokenizer_vocab_size = False
        cfg.tokenizer.tokenizer_type = "NullTokenizer"
        cfg.tokenizer.vocab_size = 128256
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def hf_tokenizer_sft_config():
        cfg = _sft_common()
        cfg.model = _model(2)
        cfg.tokenizer.tokenizer_model = "someorg/Some-Model"
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def preset_vocab_sft_config():
        cfg = hf_tokenizer_sft_config()
        cfg.model.vocab_size = 50000
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def wan_like_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = WanModelProvider(num_layers=4, hidden_size=1024, num_attention_heads=8, crossattn_emb_size=1024,
                                     seq_length=4096)
        cfg.tokenizer.tokenizer_type = "NullTokenizer"
        cfg.tokenizer.vocab_size = DEFAULT_NULL_TOKENIZER_VOCAB_SIZE
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def long_model_pretrain_config():
        cfg = benchmark_pretrain_config()
        cfg.model.seq_length = 131072
        cfg.dataset.seq_length = 8192
        cfg.model.pipeline_model_parallel_size = 1
        return cfg
''')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_recipe_tree(tmp_path, TOKENIZER_UTILS, COMMON, "my_model", RECIPES)


def _inputs(path: str, name: str, version: str = "0.20.0"):
    loaded = load_unit(path, name, mcore_version=version)
    return read_inputs(loaded.resolved.get, name)


def _padded(tokens: int, divisor: int, tp: int) -> int:
    multiple = divisor * tp
    return (tokens + multiple - 1) // multiple * multiple


def test_a_provider_without_vocab_takes_the_null_tokenizers_padded_by_divisor_times_tp(tree):
    tp8 = _inputs(tree, "null_tokenizer_tp8_pretrain_config")
    assert "model.vocab_size" not in tp8.unknown, tp8.unknown
    assert tp8.model.vocab_size == _padded(32000, 128, 8) != 32000
    assert _inputs(tree, "null_tokenizer_tp1_pretrain_config").model.vocab_size == 32000  # 250 x 128
    assert _inputs(tree, "null_tokenizer_divisor_pretrain_config").model.vocab_size == _padded(32000, 1000, 1)


def test_before_megatron_core_0_18_the_null_tokenizer_counts_an_end_of_document_token(tree):
    old = _inputs(tree, "null_tokenizer_tp1_pretrain_config", version="0.16.1")
    assert old.model.vocab_size == _padded(32001, 128, 1)


def test_use_tokenizer_vocab_size_pads_a_preset_vocabulary_and_says_what_it_assumed(tree):
    inputs = _inputs(tree, "preset_vocab_pretrain_config")
    assert inputs.model.vocab_size == _padded(128256, 128, 8) != 128256
    assert "meta-llama/Meta-Llama-3-8B" in inputs.assumed["tokenizer.vocab_size"]


def test_an_explicit_vocabulary_is_kept_unpadded_when_the_tokenizer_does_not_decide(tree):
    benchmark = _inputs(tree, "benchmark_pretrain_config")
    assert benchmark.model.vocab_size == 128256 and not benchmark.assumed
    assert _inputs(tree, "preset_vocab_sft_config").model.vocab_size == 50000


def test_a_hugging_face_tokenizers_length_is_not_guessed(tree):
    inputs = _inputs(tree, "hf_tokenizer_sft_config")
    assert "HuggingFaceTokenizer" in inputs.unknown["model.vocab_size"]
    assert not inputs.complete


def test_model_and_dataset_sequence_lengths_that_differ_are_both_estimated(tree):
    """Bridge's validate asserts the two equal; its training scripts run the dataset's, its performance scripts
    the model's: the estimate is made at both and a verdict given only where both agree."""
    assert _inputs(tree, "benchmark_pretrain_config").other_seq_length is None
    inputs = _inputs(tree, "long_model_pretrain_config")
    assert inputs.complete and inputs.model.seq_length == 131072
    assert inputs.other_seq_length == ("dataset.seq_length", 8192)
    variants = oom.architectures(inputs)
    assert [v.model.seq_length for v in variants] == [8192, 131072]  # the dataset's shown
    assert all(v.other_seq_length is None for v in variants)
    short, long = (estimate(v, 8).peak.total for v in variants)
    assert long > short
    between = oom.either_way(inputs, lambda _, r: r.peak.total > (long + short) / 2, 8)
    assert "model.seq_length=131072 and dataset.seq_length=8192" in between[2] and not between[3]
    agree = oom.either_way(inputs, lambda _, r: r.peak.total > 2 * long, 8)
    assert not agree[2] and "the verdict holds either way" in agree[3]
    assert agree[0].model.seq_length == 8192


def test_estimate_gives_a_verdict_for_each_sequence_length_a_launcher_may_run(tree):
    """Where the verdict differs, `offlint estimate` gives both, each named by the launchers that run it."""
    inputs = _inputs(tree, "long_model_pretrain_config")
    short, long = (estimate(v, 8).peak.total / GIB for v in oom.architectures(inputs))
    capacity = short / 0.8 + 1  # the short run fits with more than the at-risk margin, the long one does not fit
    assert long > capacity
    found = CliRunner().invoke(main, ["estimate", str(tree), "--recipe", "long_model_pretrain_config", "--gpus",
                                      "8", "--gpu", f"{capacity:.1f}", "--output-format", "json"])
    assert found.exit_code == 0, found.output
    out = json.loads(found.output)
    assert out["verdict_state"] == "depends" and "model.seq_length=131072 and dataset.seq_length=8192" in out["verdict"]
    assert [(c["condition"], c["verdict_state"]) for c in out["cases"]] == [
        ("at sequence length 8192 (as Bridge's training scripts run it)", "fits"),
        ("at sequence length 131072 (as its performance scripts run it)", "does not fit")]
    assert out["peak_bytes"] / GIB == pytest.approx(short)  # the dataset's length is shown


def test_a_diffusion_transformer_is_not_read_as_a_language_model_with_the_tokenizers_vocabulary(tree):
    inputs = _inputs(tree, "wan_like_pretrain_config")
    assert not inputs.complete and any("diffusion transformer" in why for why in inputs.unsupported)
