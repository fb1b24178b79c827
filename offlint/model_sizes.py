"""Model sizes of public Hugging Face models, as megatron-core keys, for configurations that take their model from
`AutoBridge.from_hf_pretrained("<id>")` (the sizes are not visible in the recipe file).

`lookup(hf_id)` reads `offlint/data/hf_models.json` (each entry names where its facts came from);
`from_config_json(path)` maps a Hugging Face `config.json` the way Megatron Bridge's bridges do (layers, widths,
grouped-query heads, head size, vocabulary, tied embeddings, MoE experts, shared experts and dense-first
layers, multi-latent attention, multi-token prediction depths). Both return `{"model.num_layers": 32, ...}`
with offlint's key names.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from offlint.reading import ReadError, read_text

# Architectures whose MLP is gated (SwiGLU / GeGLU), with RMSNorm and no linear biases, as their bridges map them.
_GATED_RMSNORM = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
                  "deepseek_v2", "deepseek_v3", "kimi_k2", "glm", "glm4_moe", "gemma", "gemma2", "gemma3", "gemma3_text",
                  "gpt_oss", "olmoe"}
_QK_NORM = {"qwen3", "qwen3_moe", "qwen3_next", "olmoe", "gemma3", "gemma3_text"}
_QKV_BIAS = {"qwen2", "qwen2_moe"}

_DIRECT = {
    "num_hidden_layers": "model.num_layers",
    "hidden_size": "model.hidden_size",
    "num_attention_heads": "model.num_attention_heads",
    "vocab_size": "model.vocab_size",
    "max_position_embeddings": "model.seq_length",  # Bridge sets seq_length from it (recipes usually override)
    "num_experts_per_tok": "model.moe_router_topk",
    "q_lora_rank": "model.q_lora_rank",
    "kv_lora_rank": "model.kv_lora_rank",
    "qk_nope_head_dim": "model.qk_head_dim",
    "qk_rope_head_dim": "model.qk_pos_emb_head_dim",
    "v_head_dim": "model.v_head_dim",
    # Bridge's generic mapping (models/conversion/model_bridge.py) and DeepSeekV3Bridge: MTP depths; 0 = none
    "num_nextn_predict_layers": "model.mtp_num_layers",
    "mtp_num_hidden_layers": "model.mtp_num_layers",
}


class ModelConfigError(ValueError):
    """A config.json that cannot be read or mapped (one line, for the user)."""


@lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    text = (resources.files("offlint") / "data" / "hf_models.json").read_text(encoding="utf-8")
    return json.loads(text)["models"]


def known_models() -> list[str]:
    return sorted(_table())


def lookup(hf_id: str) -> dict[str, object] | None:
    """The megatron-core sizes of a public model by its Hugging Face id, or None when offlint does not know it."""
    entry = _table().get(hf_id) or _table().get(_case_insensitive(hf_id))
    return dict(entry["model"]) if entry else None


def architecture(hf_id: str) -> str | None:
    """The Hugging Face architecture a public model's config.json names first (`Qwen3MoeForCausalLM`): Bridge
    picks the model's bridge class by it."""
    entry = _table().get(hf_id) or _table().get(_case_insensitive(hf_id))
    return entry.get("architecture") if entry else None


def vision(hf_id: str) -> dict[str, object] | None:
    """A vision-language model's vision tower, in its Hugging Face `vision_config` names (depth, hidden_size,
    ...), or None when offlint does not know it (the estimate then has no verdict for a frozen language model)."""
    entry = _table().get(hf_id) or _table().get(_case_insensitive(hf_id))
    return dict(entry["vision"]) if entry and isinstance(entry.get("vision"), dict) else None


def sources(hf_id: str) -> list[str]:
    entry = _table().get(hf_id) or _table().get(_case_insensitive(hf_id))
    return list(entry["sources"]) if entry else []


@lru_cache(maxsize=1)
def _tokenizers() -> dict[str, dict]:
    text = (resources.files("offlint") / "data" / "hf_models.json").read_text(encoding="utf-8")
    return json.loads(text).get("tokenizers", {})


def _tokenizer_entry(hf_id: str) -> dict | None:
    table = _tokenizers()
    if not isinstance(hf_id, str):
        return None
    return table.get(hf_id) or next((v for k, v in table.items() if k.lower() == hf_id.lower()), None)


def tokenizer_length(hf_id: str) -> tuple[int, int] | None:
    """How many tokens a public Hugging Face tokenizer has, as megatron-core's HuggingFaceTokenizer counts them
    (`vocab_size` is `len(tokenizer)`: the vocabulary with its added tokens), by its Hugging Face id: (fewest,
    most), equal where the public sources state the number and apart where they only bound it; None when offlint
    does not know the tokenizer."""
    entry = _tokenizer_entry(hf_id)
    if not entry:
        return None
    length = entry["length"]
    low, high = (length, length) if isinstance(length, int) else (int(length[0]), int(length[1]))
    return low, high


def tokenizer_sources(hf_id: str) -> list[str]:
    entry = _tokenizer_entry(hf_id)
    return list(entry["sources"]) if entry else []


def tokenizer_revisions(hf_id: str) -> list[str]:
    """The revisions of the Hugging Face repository at which the sources measured the tokenizer's length ([] when
    they do not name one)."""
    entry = _tokenizer_entry(hf_id)
    return list(entry.get("revisions", [])) if entry else []


def _case_insensitive(hf_id: str) -> str:
    lowered = hf_id.lower()
    return next((k for k in _table() if k.lower() == lowered), "")


def from_config_json(path: str | Path) -> dict[str, object]:
    """Map a Hugging Face config.json onto megatron-core keys (only the facts the file states)."""
    try:
        # Links are followed (Hugging Face's cache is made of them), to a regular file of at most 2 MiB only.
        config = json.loads(read_text(path, follow_links=True))
    except (ReadError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelConfigError(f"{path}: cannot read config.json ({exc})") from None
    if not isinstance(config, dict):
        raise ModelConfigError(f"{path}: config.json must hold a JSON object")
    return from_config(config.get("text_config") if isinstance(config.get("text_config"), dict) else config)


def from_config(config: dict) -> dict[str, object]:
    out: dict[str, object] = {}
    for hf_key, key in _DIRECT.items():
        if isinstance(config.get(hf_key), int) and not isinstance(config.get(hf_key), bool):
            out[key] = config[hf_key]
    model_type = _family(config)
    heads = config.get("num_attention_heads")
    mla = isinstance(config.get("kv_lora_rank"), int)
    if mla:
        out["model.multi_latent_attention"] = True
        if config.get("q_lora_rank") is None:  # DeepSeek-V2-Lite: the query is not compressed
            out["model.q_lora_rank"] = None
    else:
        if isinstance(config.get("num_key_value_heads"), int):
            out["model.num_query_groups"] = config["num_key_value_heads"]
        elif isinstance(heads, int):
            out["model.num_query_groups"] = heads
        if isinstance(config.get("head_dim"), int):
            out["model.kv_channels"] = config["head_dim"]
        elif isinstance(heads, int) and isinstance(config.get("hidden_size"), int):
            out["model.kv_channels"] = config["hidden_size"] // heads
    if isinstance(config.get("tie_word_embeddings"), bool):
        out["model.share_embeddings_and_output_weights"] = config["tie_word_embeddings"]
    if model_type in _GATED_RMSNORM:
        out.update({"model.gated_linear_unit": True, "model.normalization": "RMSNorm",
                    "model.add_bias_linear": False, "model.position_embedding_type": "rope"})
        out["model.qk_layernorm"] = model_type in _QK_NORM or bool(config.get("use_qk_norm")) or mla
        out["model.add_qkv_bias"] = model_type in _QKV_BIAS or bool(config.get("attention_bias"))
    if model_type == "gpt_oss":  # Bridge's GPTOSSBridge: biased linears and YaRN positions
        out.update({"model.add_bias_linear": True, "model.position_embedding_type": "yarn"})
    _moe(config, out)
    return out


# The architecture names a family more reliably than model_type (copies of configs get model_type wrong).
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen3NextForCausalLM": "qwen3_next", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3", "Glm4MoeForCausalLM": "glm4_moe", "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text", "GptOssForCausalLM": "gpt_oss", "OlmoeForCausalLM": "olmoe",
}


def _family(config: dict) -> str:
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and architectures[0] in _ARCHITECTURES:
        return _ARCHITECTURES[architectures[0]]
    return str(config.get("model_type", ""))


def _moe(config: dict, out: dict[str, object]) -> None:
    experts = next((config[k] for k in ("num_experts", "n_routed_experts", "num_local_experts")
                    if isinstance(config.get(k), int) and config[k] > 0), None)
    if isinstance(config.get("intermediate_size"), int):
        out["model.ffn_hidden_size"] = config["intermediate_size"]
    if experts is None:
        return
    out["model.num_moe_experts"] = experts
    # Mixtral-style configs have no separate expert width: every MLP is an expert of intermediate_size.
    width = config.get("moe_intermediate_size", config.get("intermediate_size"))
    if isinstance(width, int):
        out["model.moe_ffn_hidden_size"] = width
    shared = config.get("shared_expert_intermediate_size")
    if not isinstance(shared, int) and isinstance(config.get("n_shared_experts"), int) and isinstance(width, int):
        shared = config["n_shared_experts"] * width
    if isinstance(shared, int) and shared > 0:
        out["model.moe_shared_expert_intermediate_size"] = shared
    layers = config.get("num_hidden_layers")
    dense_first = config.get("first_k_dense_replace", 0)
    sparse_step = config.get("decoder_sparse_step", 1)
    only_dense = config.get("mlp_only_layers") or []
    if isinstance(layers, int) and (dense_first or only_dense or sparse_step not in (1, None)):
        out["model.moe_layer_freq"] = [
            0 if (i < dense_first or i in only_dense or (sparse_step and (i + 1) % sparse_step)) else 1
            for i in range(layers)]
    else:
        out["model.moe_layer_freq"] = 1
