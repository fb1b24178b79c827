"""offlint.model_sizes: lookups return megatron-core keys with sources, config.json files map the way Bridge maps
them, and the two independent sources behind the table agree.

tests/data/hf_configs.json holds the Hugging Face configs that Megatron Bridge's unit tests carry (source in each
entry); offlint/data/hf_models.json was built mostly from Megatron-LM flags used to load the released checkpoints.
Mapping the first with `from_config_json` must give the second wherever both state a fact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offlint import keys, model_sizes
from offlint.estimate import params
from offlint.estimate.inputs import ModelShape

ROOT = Path(__file__).resolve().parent.parent
BRIDGE_CONFIGS = json.loads((ROOT / "tests" / "data" / "hf_configs.json").read_text())


def test_every_entry_has_sources_and_known_keys():
    assert len(model_sizes.known_models()) >= 20
    for hf_id in model_sizes.known_models():
        assert model_sizes.sources(hf_id), hf_id
        for key in model_sizes.lookup(hf_id):
            section, _, name = key.partition(".")
            assert section == "model" and name in keys.known_fields("model"), (hf_id, key)


def test_lookup_is_exact_or_case_insensitive_and_none_for_unknown():
    assert model_sizes.lookup("Qwen/Qwen3-30B-A3B")["model.num_moe_experts"] == 128
    assert model_sizes.lookup("qwen/qwen3-30b-a3b") == model_sizes.lookup("Qwen/Qwen3-30B-A3B")
    assert model_sizes.lookup("nobody/not-a-model") is None


@pytest.mark.parametrize("hf_id", sorted(BRIDGE_CONFIGS))
def test_bridge_configs_map_to_the_table(hf_id, tmp_path):
    config = BRIDGE_CONFIGS[hf_id]["config"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    mapped = model_sizes.from_config_json(path)
    if "head_dim" not in config:
        mapped.pop("model.kv_channels", None)  # derived, not stated: Bridge's sample omits it for Qwen3
    table = model_sizes.lookup(hf_id)
    shared = set(mapped) & set(table)
    assert {"model.num_layers", "model.hidden_size", "model.vocab_size"} <= shared
    assert {k: mapped[k] for k in shared} == {k: table[k] for k in shared}


def _shape(hf_id: str) -> ModelShape:
    m = model_sizes.lookup(hf_id)
    freq = m.get("model.moe_layer_freq", 1)
    return ModelShape(
        num_layers=m["model.num_layers"], hidden_size=m["model.hidden_size"], ffn_hidden_size=m["model.ffn_hidden_size"],
        num_attention_heads=m["model.num_attention_heads"], num_query_groups=m["model.num_query_groups"],
        kv_channels=m.get("model.kv_channels", m["model.hidden_size"] // m["model.num_attention_heads"]),
        vocab_size=m["model.vocab_size"], seq_length=4096,
        gated_linear_unit=m["model.gated_linear_unit"], tied_embeddings=m["model.share_embeddings_and_output_weights"],
        rms_norm=True, add_bias_linear=False, add_qkv_bias=m["model.add_qkv_bias"], qk_layernorm=m["model.qk_layernorm"],
        learned_position_embeddings=False, num_moe_experts=m.get("model.num_moe_experts"),
        moe_ffn_hidden_size=m.get("model.moe_ffn_hidden_size"), moe_router_topk=m.get("model.moe_router_topk", 2),
        moe_shared_expert_intermediate_size=m.get("model.moe_shared_expert_intermediate_size"),
        moe_layer_freq=tuple(freq) if isinstance(freq, list) else freq)


@pytest.mark.parametrize(("hf_id", "billions", "active"), [
    # The size each model is named after (total, and active for MoE), within rounding of the name.
    ("meta-llama/Llama-2-7b-hf", 6.74, None),  # Meta's Llama 2 paper: 6.7B
    ("meta-llama/Llama-3.1-8B", 8.0, None),
    ("meta-llama/Llama-3.1-70B", 70.6, None),
    ("meta-llama/Meta-Llama-3-8B", 8.0, None),
    ("meta-llama/Meta-Llama-3-70B", 70.6, None),
    ("meta-llama/Meta-Llama-3.1-405B", 405.9, None),  # Bridge's 405B perf recipes load it by this id
    ("meta-llama/Llama-3.1-405B", 405.9, None),
    ("Qwen/Qwen2.5-72B", 72.0, None),
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
    ("Qwen/Qwen3-235B-A22B", 235.1, 22.1),
    ("zai-org/GLM-4.5-Air", 106.0, None),  # its "A12B" leaves out the embeddings
])
def test_parameter_totals_match_the_models_names(hf_id, billions, active):
    shape = _shape(hf_id)
    assert params.total(shape) / 1e9 == pytest.approx(billions, rel=0.03)
    if active:
        assert params.active(shape) / 1e9 == pytest.approx(active, rel=0.1)


def test_layer_lists_and_patterns_cover_every_layer():
    for hf_id in model_sizes.known_models():
        m = model_sizes.lookup(hf_id)
        if isinstance(m.get("model.moe_layer_freq"), list):
            assert len(m["model.moe_layer_freq"]) == m["model.num_layers"], hf_id
        if "model.hybrid_layer_pattern" in m:
            assert len(m["model.hybrid_layer_pattern"]) == m["model.num_layers"], hf_id


def test_from_config_json_reads_moe_and_mla_layouts(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BRIDGE_CONFIGS["deepseek-ai/DeepSeek-V3"]["config"]))
    mapped = model_sizes.from_config_json(path)
    assert mapped["model.multi_latent_attention"] is True
    assert mapped["model.moe_layer_freq"] == [0, 0, 0] + [1] * 58
    assert mapped["model.moe_shared_expert_intermediate_size"] == 2048


def test_from_config_json_bad_file_is_one_line_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(model_sizes.ModelConfigError, match="cannot read config.json"):
        model_sizes.from_config_json(path)


def test_a_gpt_oss_config_json_maps_as_bridge_maps_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
                                "num_hidden_layers": 24, "hidden_size": 2880, "num_attention_heads": 64,
                                "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088}))
    mapped = model_sizes.from_config_json(path)
    table = model_sizes.lookup("openai/gpt-oss-20b")
    for key in ("model.add_bias_linear", "model.position_embedding_type", "model.num_query_groups",
                "model.num_layers", "model.kv_channels"):
        assert mapped[key] == table[key], key


def test_qwen3_next_reads_as_a_gated_delta_net_model():
    """The table's Qwen3-Next sizes give the memory model its GDN layer mix (every 4th layer softmax attention
    with an output gate); Qwen3NextBridge's dropout-free layers come from the tree's bridge (tests/test_estimate_gdn.py
    checks the rest)."""
    from offlint.estimate.inputs import read_inputs
    from offlint.types import Value

    sizes = model_sizes.lookup("Qwen/Qwen3-Next-80B-A3B-Instruct")

    def lookup(key):
        return Value(key, "known", sizes[key]) if key in sizes else Value(key, "default", None)

    inputs = read_inputs(lookup, "q")
    assert not inputs.unsupported, inputs.unsupported
    m = inputs.model
    assert (m.linear_attention_freq, m.attention_output_gate) == (4, True)
    assert sum(m.is_gdn_layer(i) for i in range(m.num_layers)) == 36
