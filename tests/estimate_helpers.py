"""What the estimate tests share: a lookup over plain values, as `read_inputs` asks a resolved unit, and the
parameter count of a real megatron-core model to compare the estimate's with."""

from __future__ import annotations

from offlint.types import Assignment, Location, Source, Unknown, Value


def lookup(values: dict):
    """A resolved unit's `get` over `values`: a key not in it is left at its default, an `Unknown` is unknown."""
    def get(key: str) -> Value:
        if key not in values:
            return Value(key, "default", None)
        value = values[key]
        return Value(key, "unknown" if isinstance(value, Unknown) else "known", value)
    return get


def located_lookup(values: dict, source: Source = Source.PYTHON):
    """As `lookup`, with each known value written at recipe.py:1 by `source` (for what reads where a value was set,
    such as the launch-environment and provenance checks)."""
    def get(key: str) -> Value:
        if key not in values:
            return Value(key, "default", None)
        value = values[key]
        if isinstance(value, Unknown):
            return Value(key, "unknown", value)
        return Value(key, "known", value, Assignment(key, value, Location("recipe.py", 1, 1), source))
    return get


def count_params(model, prefix: str = "") -> int:
    """The parameters of a real model (a torch module) whose names start with `prefix`."""
    return sum(p.numel() for name, p in model.named_parameters() if name.startswith(prefix))


def write_recipe_tree(root: Path, tokenizer_utils: str, common: str, module: str, recipes: str) -> str:
    """A project at `root` laid out as Megatron Bridge's recipes are (recipes/utils/tokenizer_utils.py, a base
    builder in recipes/common.py, recipe functions in recipes/MODULE.py); returns the recipe module's path."""
    (root / "pyproject.toml").write_text("")
    package = root / "src" / "megatron" / "bridge" / "recipes"
    (package / "utils").mkdir(parents=True)
    (package / "utils" / "tokenizer_utils.py").write_text(tokenizer_utils)
    (package / "common.py").write_text(common)
    (package / f"{module}.py").write_text(recipes)
    return f"src/megatron/bridge/recipes/{module}.py"
