"""Nemotron 3 Super from offlint's size table, and latent MoE in a hybrid Mamba model.

Bridge's Nemotron 3 Super recipes take the model from `AutoBridge.from_hf_pretrained(
"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16")`; offlint sizes it from `offlint/data/hf_models.json`. Its MoE
layers are latent (`moe_latent_size`): megatron-core's hybrid stack builds an 'E' layer as the same MoELayer a GPT
model's MoE layer is (fc1_latent_proj / fc2_latent_proj duplicated over TP, routed experts and dispatch in the
latent width, shared expert in the hidden width), so the GPT latent terms apply. The recipes here are fixtures of
our own in the shapes Bridge writes them; nothing is imported or run."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from offlint import model_sizes
from offlint.estimate import activations, params
from offlint.estimate.inputs import Parallelism, Training, read_inputs
from offlint.units import load_unit
from tests.estimate_helpers import write_recipe_tree

SUPER = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16"

COMMON = textwrap.dedent('''
    from megatron.bridge.training.config import ConfigContainer, GPTDatasetConfig, TrainingConfig
    from megatron.bridge.training.tokenizers.config import TokenizerConfig


    def _pretrain_common() -> ConfigContainer:
        return ConfigContainer(
            model=None,
            train=TrainingConfig(global_batch_size=64, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=4096, split="9999,8,2"),
            tokenizer=TokenizerConfig(tokenizer_type="NullTokenizer", vocab_size=1000),
        )
''')

RECIPES = textwrap.dedent(f'''
    import torch

    from megatron.bridge import AutoBridge
    from megatron.bridge.models.hybrid.hybrid_provider import HybridModelProvider
    from megatron.bridge.recipes.common import _pretrain_common


    def super_from_hf_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = AutoBridge.from_hf_pretrained("{SUPER}").to_megatron_provider(load_weights=False)
        cfg.model.tensor_model_parallel_size = 2
        cfg.model.pipeline_model_parallel_size = 1
        cfg.model.expert_model_parallel_size = 32
        cfg.model.expert_tensor_parallel_size = 1
        cfg.model.sequence_parallel = True
        cfg.model.seq_length = 4096
        cfg.model.mtp_num_layers = 2
        cfg.model.mtp_use_repeated_layer = True
        return cfg


    def latent_moe_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = HybridModelProvider(hybrid_layer_pattern="M*EME", hidden_size=256, num_attention_heads=4,
                                        num_query_groups=2, kv_channels=64, ffn_hidden_size=512, vocab_size=1024,
                                        seq_length=1024, mamba_num_heads=8, mamba_head_dim=64, num_moe_experts=8,
                                        moe_ffn_hidden_size=96, moe_router_topk=2,
                                        moe_shared_expert_intermediate_size=128, moe_latent_size=64,
                                        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                        expert_model_parallel_size=2)
        cfg.dataset.seq_length = 1024
        return cfg


    def hybrid_mla_pretrain_config():
        cfg = _pretrain_common()
        cfg.model = HybridModelProvider(hybrid_layer_pattern="M*EME", hidden_size=256, num_attention_heads=4,
                                        num_query_groups=2, kv_channels=64, ffn_hidden_size=512, vocab_size=1024,
                                        seq_length=1024, mamba_num_heads=8, mamba_head_dim=64, num_moe_experts=8,
                                        moe_ffn_hidden_size=96, moe_router_topk=2, multi_latent_attention=True,
                                        kv_lora_rank=64, tensor_model_parallel_size=1,
                                        pipeline_model_parallel_size=1, expert_model_parallel_size=2)
        cfg.dataset.seq_length = 1024
        return cfg
''')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_recipe_tree(tmp_path, "DEFAULT_NULL_TOKENIZER_VOCAB_SIZE: int = 32000\n", COMMON, "super_hf",
                             RECIPES)


def _inputs(path: str, name: str):
    return read_inputs(load_unit(path, name, mcore_version="0.20.0").resolved.get, name)


def test_super_takes_its_sizes_from_the_table_and_matches_the_checkpoints_element_count(tree):
    """The table's Super is Bridge's provider of the released checkpoint: 88 layers, latent MoE of 512 experts,
    the '*E' MTP depth config.json declares (num_nextn_predict_layers=1), which the recipe runs twice. One depth's
    parameters plus the 41 fp32 router correction biases (40 MoE layers and the depth's; buffers in megatron-core)
    are the 123,611,033,088 elements Bridge's verification card counts for the checkpoint."""
    inputs = _inputs(tree, "super_from_hf_pretrain_config")
    assert inputs.complete and not inputs.unsupported, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert (m.num_layers, m.hidden_size, m.num_moe_experts, m.moe_ffn_hidden_size, m.moe_latent_size,
            m.moe_shared_expert_intermediate_size, m.moe_router_topk, m.vocab_size) == \
        (88, 4096, 512, 2688, 1024, 5376, 22, 131072)
    assert (m.hybrid_pattern.count("M"), m.hybrid_pattern.count("E"), m.hybrid_pattern.count("*")) == (40, 40, 8)
    assert (m.hybrid_mtp_pattern, m.mtp_num_layers, m.mtp_repeated_layer) == ("*E", 2, True)
    assert (m.mamba_num_heads, m.mamba_head_dim, m.mamba_num_groups, m.mamba_state_dim) == (128, 64, 8, 128)
    router_biases = 41 * 512
    assert params.total(m) + router_biases == 123_611_033_088


def test_the_super_entry_names_its_sources():
    sources = " ".join(model_sizes.sources(SUPER))
    for where in ("NVIDIA/Megatron-LM@d98e8a6:examples/post_training/modelopt/conf/nvidia/"
                  "NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh",
                  "nemotron3_super_release_gb200/model_config.yaml", "test_nemotron_h_bridge.py",
                  "nemotron-3-super-120b-a12b/card.yaml"):
        assert where in sources
    assert model_sizes.architecture(SUPER) == "NemotronHForCausalLM"


def test_latent_moe_in_a_hybrid_model_is_modelled_and_mla_is_still_refused(tree):
    latent = _inputs(tree, "latent_moe_pretrain_config")
    assert latent.complete and not latent.unsupported, (latent.unknown, latent.unsupported)
    assert latent.model.moe_latent_size == 64
    mla = _inputs(tree, "hybrid_mla_pretrain_config")
    assert any("multi-latent attention" in why for why in mla.unsupported)


def test_a_hybrid_latent_moe_layer_holds_and_saves_what_a_gpt_latent_moe_layer_does(tree):
    """An 'E' layer with a latent size: the two latent projections replicated over TP (2 x h x latent), routed
    experts on latent-wide inputs, the shared expert on the hidden width; saved: fc2_latent_proj's latent-wide input
    and latent-wide expert inputs, the same tensors as the MoE part of a GPT latent-MoE layer."""
    m = _inputs(tree, "latent_moe_pretrain_config").model
    plain = replace(m, moe_latent_size=None)
    layer, before = params.HYBRID_LAYERS["E"](m), params.HYBRID_LAYERS["E"](plain)
    assert layer.replicated - before.replicated == 2 * 256 * 64
    assert layer.tp == before.tp  # the shared expert keeps the hidden width
    assert layer.expert == 8 * (64 * 96 + 96 * 64)  # squared ReLU: no gate; 64-wide in and out
    p = Parallelism(ep=2)
    t = Training(micro_batch_size=1, global_batch_size=8)
    hybrid = activations.layer_terms(m, p, t, moe=True, hybrid="E").terms
    gpt = activations.layer_terms(replace(m, hybrid_pattern=None), p, t, moe=True).terms
    assert hybrid == {k: v for k, v in gpt.items() if k not in activations._ATTENTION_PART}
    tokens = 1024
    assert hybrid["latent_fc2_input"] == 2 * tokens * 64
    assert hybrid["expert_fc1_input"] == 2 * activations.expert_rows(m, p, t) * 64
