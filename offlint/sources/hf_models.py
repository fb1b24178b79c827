"""`AutoBridge.from_hf_pretrained("<id>")` in a recipe: the model's sizes, which the recipe file does not spell out.

Bridge builds the model config from the Hugging Face `config.json` (recipe-patterns.md pattern 6). offlint never
downloads anything: a local `config.json` (the id is a directory path, or `<tree>/<id>/config.json` exists) is
read; otherwise the sizes come from offlint's table of public models (offlint/data/hf_models.json); otherwise the
model section stays unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from offlint.model_sizes import ModelConfigError, architecture, from_config_json, lookup, vision
from offlint.reading import ReadError, read_text

PROVIDER_METHODS = frozenset({"get_model_config", "to_megatron_provider", "to_megatron_model_config"})
# What a Hugging Face config decides (unknown when offlint cannot read it); everything else keeps its default.
HF_SIZE_KEYS = ("model.num_layers", "model.hidden_size", "model.ffn_hidden_size", "model.num_attention_heads",
                "model.num_query_groups", "model.kv_channels", "model.vocab_size", "model.seq_length",
                "model.num_moe_experts", "model.moe_ffn_hidden_size", "model.moe_router_topk",
                "model.moe_layer_freq", "model.multi_latent_attention", "model.hybrid_layer_pattern",
                "model.share_embeddings_and_output_weights", "model.gated_linear_unit", "model.normalization")


@dataclass(frozen=True)
class HFModel:
    """What `AutoBridge.from_hf_pretrained(id)` evaluates to in the reader; with `config`, what
    `AutoConfig.from_pretrained(id)` does (a Hugging Face config object, handed to `AutoBridge.from_hf_config`).
    `text_only`: its `.text_config` (a VLM's language model alone: no vision tower); `architecture`: the name the
    recipe wrote into `architectures` (Bridge picks the bridge class by it), else the model's own."""

    model_id: str
    architecture: str | None = None
    text_only: bool = False
    config: bool = False


def config_candidates(model_id: str, search_from: Path) -> list[Path]:
    """The local config.json files that would give a model id its sizes, in the order they are tried. The
    answer depends on each of them, present or not, so the cache keys a reading on all of them."""
    return [Path(model_id) / "config.json", search_from / model_id / "config.json"]


def model_sizes(model_id: str, search_from: Path, text_only: bool = False) -> tuple[dict[str, object], str] | None:
    """({key: value}, where they came from) for a model id, or None when offlint cannot know them. `text_only`:
    the language model of a VLM alone (its `text_config`), without the vision tower."""
    for config in config_candidates(model_id, search_from):
        try:
            if config.is_file():
                return from_config_json(config), f"from {config}"
        except (OSError, ModelConfigError):
            continue
    sizes = lookup(model_id)
    if sizes:
        tower = None if text_only else vision(model_id)  # a VLM's tower (Bridge's provider keeps vision_config whole)
        if tower:
            sizes["model.vision_config"] = tower
        return sizes, f"sizes of {model_id} from offlint's table of public models"
    return None


def model_architecture(model_id: str, search_from: Path) -> str | None:
    """The architecture Bridge dispatches on for a model id (`architectures[0]` of the config.json that gives
    its sizes, else the size table's), or None when offlint cannot know it."""
    for config in config_candidates(model_id, search_from):
        try:
            if config.is_file():
                names = json.loads(read_text(config, follow_links=True)).get("architectures")
                return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
        except (OSError, ReadError, json.JSONDecodeError, RecursionError, AttributeError):
            continue  # as model_sizes: the next candidate
    return architecture(model_id)
