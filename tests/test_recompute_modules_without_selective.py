"""OFL213's exemption for a recompute_granularity the unit writes itself (None included) is for a derived recipe that
switches recompute off and keeps its base's list on purpose. Bridge's library recipes write
`recompute_granularity = None` and `recompute_modules = None` side by side; a user who turns the second into a list
and leaves the first is the rule's case, and the exemption had silenced it (a seeded-mistake study, session 64, B08).
Recipes in Bridge's shapes, fixtures of our own."""

from __future__ import annotations

from offlint.api import CheckOptions, check

HEADER = ("from megatron.bridge.models import GPTModelProvider\n"
          "from megatron.bridge.training.config import ConfigContainer\n\n\n")
BASE = ("def base_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8))\n"
        "    cfg.model.recompute_granularity = \"selective\"\n"
        "    cfg.model.recompute_modules = [\"core_attn\"]\n"
        "    return cfg\n\n\n")


def _ofl213(tmp_path, text: str) -> list[str]:
    (tmp_path / "recipes.py").write_text(HEADER + text)
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL213"],
                                                 mcore_version="0.20.0"))
    return sorted(f.unit for f in result.findings)


def test_a_list_written_after_the_recipe_s_own_none_is_reported(tmp_path):
    text = ("def small_pretrain_config():\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8))\n"
            "    cfg.model.recompute_granularity = None\n"
            "    cfg.model.recompute_modules = [\"core_attn\", \"mlp\"]\n"
            "    return cfg\n")
    assert _ofl213(tmp_path, text) == ["small_pretrain_config"]


def test_a_derived_recipe_switching_recompute_off_is_not(tmp_path):
    derived = ("def derived_config():\n"
               "    cfg = base_config()\n"
               "    cfg.model.recompute_granularity = None\n"
               "    return cfg\n")
    assert _ofl213(tmp_path, BASE + derived) == []
    # (a None written after the recipe's own list, in one function: switched off on purpose too)
    after = ("def small_pretrain_config():\n"
             "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8))\n"
             "    cfg.model.recompute_modules = [\"core_attn\", \"mlp\"]\n"
             "    cfg.model.recompute_granularity = None\n"
             "    return cfg\n")
    assert _ofl213(tmp_path, after) == []
