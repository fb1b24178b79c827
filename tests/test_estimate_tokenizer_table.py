"""A Hugging Face tokenizer's length from offlint's table of public tokenizers (offlint/data/hf_models.json,
`tokenizers`): Megatron Bridge sizes a model from the tokenizer when model.vocab_size is unset or
tokenizer.use_tokenizer_vocab_size is True (training/setup.py, _validate_and_set_vocab_size; megatron-core's
HuggingFaceTokenizer.vocab_size is len(tokenizer)), and pads it to make_vocab_size_divisible_by x TP. The recipes
are fixtures of our own in the shapes Bridge writes them (a HybridModelProvider without vocab_size, the tokenizer
named by its Hugging Face id, a pinned revision in hf_tokenizer_kwargs); nothing is imported or run."""

from __future__ import annotations

import textwrap

import pytest

from offlint import model_sizes
from offlint.estimate.inputs import read_inputs
from offlint.units import load_unit
from tests.estimate_helpers import write_recipe_tree

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
LIGHTNING = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16"

COMMON = textwrap.dedent('''
    from megatron.bridge.training.config import ConfigContainer, GPTDatasetConfig, TrainingConfig
    from megatron.bridge.training.tokenizers.config import TokenizerConfig


    def _pretrain_common() -> ConfigContainer:
        return ConfigContainer(
            model=None,
            train=TrainingConfig(global_batch_size=16, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=2048, split="9999,8,2"),
            tokenizer=TokenizerConfig(tokenizer_type="HuggingFaceTokenizer", tokenizer_model=None,
                                      use_tokenizer_vocab_size=True),
        )
''')

RECIPES = textwrap.dedent(f'''
    from megatron.bridge.models.hybrid.hybrid_provider import HybridModelProvider
    from megatron.bridge.recipes.common import _pretrain_common

    _NANO = "{NANO}"
    _LIGHTNING = "{LIGHTNING}"


    def _hybrid(tp: int) -> HybridModelProvider:
        return HybridModelProvider(hybrid_layer_pattern="M*M-", hidden_size=512, num_attention_heads=8,
                                   num_query_groups=2, seq_length=2048, make_vocab_size_divisible_by=128,
                                   tensor_model_parallel_size=tp, pipeline_model_parallel_size=1)


    def nano_tp1_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = _hybrid(1)
        cfg.tokenizer.tokenizer_model = _NANO
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def nano_tp3_pretrain_config():
        cfg = nano_tp1_pretrain_config()
        cfg.model = _hybrid(3)
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def nano_preset_pretrain_config():
        cfg = nano_tp1_pretrain_config()
        cfg.model.vocab_size = 100000
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def nano_preset_kept_pretrain_config():
        cfg = nano_preset_pretrain_config()
        cfg.tokenizer.use_tokenizer_vocab_size = False
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def lightning_pinned_pretrain_config():
        cfg = nano_tp1_pretrain_config()
        cfg.tokenizer.tokenizer_model = _LIGHTNING
        cfg.tokenizer.hf_tokenizer_kwargs = {{"revision": "b3caaabed0263651a17dc1f2d4ce97e794f76c44"}}
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def lightning_measured_revision_pretrain_config():
        cfg = lightning_pinned_pretrain_config()
        cfg.tokenizer.hf_tokenizer_kwargs = {{"revision": "a9904d24bcc1d289a1950fa9d2b978c47cf903b9"}}
        cfg.model.pipeline_model_parallel_size = 1
        return cfg


    def unknown_tokenizer_pretrain_config():
        cfg = nano_tp1_pretrain_config()
        cfg.tokenizer.tokenizer_model = "someorg/Not-In-The-Table"
        cfg.model.pipeline_model_parallel_size = 1
        return cfg
''')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_recipe_tree(tmp_path, "DEFAULT_NULL_TOKENIZER_VOCAB_SIZE: int = 32000\n", COMMON, "hybrid", RECIPES)


def _inputs(path: str, name: str):
    return read_inputs(load_unit(path, name, mcore_version="0.20.0").resolved.get, name)


def test_the_table_states_each_tokenizers_length_with_its_sources():
    for hf_id in (NANO, LIGHTNING):
        assert model_sizes.tokenizer_length(hf_id) == (131072, 131072)
        assert len(model_sizes.tokenizer_sources(hf_id)) >= 3, hf_id
    assert model_sizes.tokenizer_length(NANO.lower()) == (131072, 131072)  # Hugging Face ids are case-insensitive
    assert model_sizes.tokenizer_length("someorg/Not-In-The-Table") is None
    assert model_sizes.tokenizer_revisions(LIGHTNING) == ["a9904d24bcc1d289a1950fa9d2b978c47cf903b9"]
    for hf_id, entry in model_sizes._tokenizers().items():
        length = entry["length"]
        assert isinstance(length, int) or (len(length) == 2 and 0 < length[0] <= length[1]), hf_id
        assert entry["sources"] and all(isinstance(s, str) and s for s in entry["sources"]), hf_id


def test_a_provider_without_vocab_takes_the_tabled_tokenizers_length_padded_and_says_where_it_came_from(tree):
    tp1 = _inputs(tree, "nano_tp1_pretrain_config")
    assert "model.vocab_size" not in tp1.unknown, tp1.unknown
    assert tp1.model.vocab_size == 131072  # 1024 x 128
    said = tp1.assumed["tokenizer.vocab_size"]
    assert NANO in said and "131072 tokens" in said and "actual-computer/toks" in said
    assert _inputs(tree, "nano_tp3_pretrain_config").model.vocab_size == 131328  # 342 x (128 x 3)


def test_use_tokenizer_vocab_size_takes_the_tabled_length_over_a_preset_one(tree):
    assert _inputs(tree, "nano_preset_pretrain_config").model.vocab_size == 131072
    kept = _inputs(tree, "nano_preset_kept_pretrain_config")
    assert kept.model.vocab_size == 100000 and "tokenizer.vocab_size" not in kept.assumed


def test_a_pinned_revision_other_than_the_measured_one_is_said(tree):
    pinned = _inputs(tree, "lightning_pinned_pretrain_config")
    assert pinned.model.vocab_size == 131072
    said = pinned.assumed["tokenizer.vocab_size"]
    assert "measured at revision a9904d24" in said and "pins b3caaabe" in said
    measured = _inputs(tree, "lightning_measured_revision_pretrain_config")
    assert "pins" not in measured.assumed["tokenizer.vocab_size"]


def test_a_tokenizer_the_table_does_not_know_stays_unknown(tree):
    inputs = _inputs(tree, "unknown_tokenizer_pretrain_config")
    assert "HuggingFaceTokenizer" in inputs.unknown["model.vocab_size"] and not inputs.complete


def test_a_bounded_length_gives_a_vocabulary_only_where_both_ends_pad_alike(tree, monkeypatch):
    bounds = {"length": [130950, 131072], "sources": ["a fixture's bound"]}
    monkeypatch.setattr(model_sizes, "_tokenizers", lambda: {NANO: bounds})
    tp1 = _inputs(tree, "nano_tp1_pretrain_config")
    assert tp1.model.vocab_size == 131072 and "between 130950 and 131072 tokens" in tp1.assumed["tokenizer.vocab_size"]
    bounds["length"] = [130000, 131072]  # 130048 or 131072 rows at TP1
    wide = _inputs(tree, "nano_tp1_pretrain_config")
    assert not wide.complete and "pads to 130048 or 131072 rows" in wide.unknown["model.vocab_size"]


AUTOBRIDGE = textwrap.dedent(f'''
    from megatron.bridge import AutoBridge
    from megatron.bridge.recipes.common import _pretrain_common


    def nano_from_hf_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = AutoBridge.from_hf_pretrained("{NANO}").to_megatron_provider(load_weights=False)
        cfg.model.vocab_size = None
        cfg.tokenizer.tokenizer_model = "{NANO}"
        cfg.model.tensor_model_parallel_size = 1
        cfg.model.pipeline_model_parallel_size = 1
        cfg.model.expert_model_parallel_size = 8
        return cfg
''')


def test_nemotron_3_nanos_sizes_come_from_the_size_table(tmp_path, monkeypatch):
    """A recipe that takes the Nano from its Hugging Face checkpoint (Bridge's GB200 recipe and SFT recipes do) is
    sized from offlint's table: the Megatron-LM flags that load the released checkpoint, the shapes Bridge's own
    H100 recipe writes out (31.58B parameters, tests/test_estimate_hybrid.py) and the tokenizer's 131072 tokens."""
    monkeypatch.chdir(tmp_path)
    path = write_recipe_tree(tmp_path, "X: int = 1\n", COMMON, "nano_hf", AUTOBRIDGE)
    inputs = _inputs(path, "nano_from_hf_pretrain_config")
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert (m.hidden_size, m.num_layers, m.num_moe_experts, m.moe_ffn_hidden_size, m.vocab_size) == \
        (2688, 52, 128, 1856, 131072)
    assert m.hybrid_pattern == "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
    assert "actual-computer/toks" in " ".join(model_sizes.tokenizer_sources(NANO))
    assert any("Megatron-LM" in s for s in model_sizes.sources(NANO))
