"""load_unit: one configuration by file, recipe name and overrides, read as `offlint check` reads it."""

import pytest

from offlint.units import UnitSelectionError, load_unit

RECIPES = "fixtures/good/recipes/llama_offload.py"


def test_recipe_by_name_follows_its_base_builder():
    loaded = load_unit(RECIPES, recipe="llama32_1b_activation_offload_config")
    value = loaded.resolved.get("model.num_layers")
    assert value.state == "known" and value.value == 16
    assert value.assignment.via == (f"via _base_config() at {RECIPES}:28",)


def test_overrides_are_the_last_layer_and_read_by_hydra():
    loaded = load_unit(RECIPES, recipe="llama3_8b_optimizer_offload_config",
                       overrides=["model.num_layers=3", "optimizer.optimizer_offload_fraction=0.5"])
    assert loaded.resolved.get("model.num_layers").value == 3
    assert loaded.resolved.get("optimizer.optimizer_offload_fraction").value == 0.5
    assert loaded.resolved.get("model.num_layers").assignment.location.path == "<--override>"


def test_a_card_is_linked_to_the_recipe_it_names():
    loaded = load_unit("fixtures/good/cards/card.yaml")
    assert "llama3_8b_optimizer_offload_config" in loaded.unit.name
    assert loaded.resolved.get("model.num_layers").value == 16


@pytest.mark.parametrize("config, recipe, overrides, message", [
    ("no/such/file.py", None, (), "no such file"),
    (RECIPES, None, (), "choose one with --recipe NAME"),
    (RECIPES, "nope", (), "no unit named 'nope'"),
    (RECIPES, "llama3_8b_optimizer_offload_config", ("num_layers",), "expected KEY=VALUE"),
    (RECIPES, "llama3_8b_optimizer_offload_config", ("model.x=[1,",), "Hydra cannot parse"),
])
def test_bad_selection_is_one_line(config, recipe, overrides, message):
    with pytest.raises(UnitSelectionError) as info:
        load_unit(config, recipe=recipe, overrides=overrides)
    assert message in str(info.value) and "\n" not in str(info.value)
