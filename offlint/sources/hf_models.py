"""`AutoBridge.from_hf_pretrained("<id>")` in a recipe: the model's sizes, which the recipe file does not spell out.

Bridge builds the model config from the Hugging Face `config.json` (recipe-patterns.md pattern 6). offlint never
downloads anything: a local `config.json` (the id is a directory path, or `<tree>/<id>/config.json` exists) is
read; otherwise the sizes come from offlint's table of public models (offlint/data/hf_models.json); otherwise the
model section stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offlint.model_sizes import ModelConfigError, from_config_json, lookup

PROVIDER_METHODS = frozenset({"get_model_config", "to_megatron_provider", "to_megatron_model_config"})


@dataclass(frozen=True)
class HFModel:
    """What `AutoBridge.from_hf_pretrained(id)` evaluates to in the reader."""

    model_id: str


def model_sizes(model_id: str, search_from: Path) -> tuple[dict[str, object], str] | None:
    """({key: value}, where they came from) for a model id, or None when offlint cannot know them."""
    for base in (Path(model_id), search_from / model_id):
        config = base / "config.json"
        try:
            if config.is_file():
                return from_config_json(config), f"from {config}"
        except (OSError, ModelConfigError):
            continue
    sizes = lookup(model_id)
    if sizes:
        return sizes, f"sizes of {model_id} from offlint's table of public models"
    return None
