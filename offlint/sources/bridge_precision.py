"""Megatron Bridge's named precision recipes ("bf16_mixed", "bf16_with_fp8_current_scaling_mixed", ...), read from
the linted tree's own code (never imported or run).

A recipe, YAML file or command line may give `mixed_precision` as a name. Bridge keeps the name until the run
starts: runtime_config_update (training/config.py) then calls get_mixed_precision_config(name)
(training/mixed_precision.py), which calls the function registered under that name (`@register`, hyphens read as
underscores), and MixedPrecisionConfig.setup copies the record it returns over the model, optimizer and DDP
configs. What each name builds therefore lives in the tree and changes with it: here the tree's own
get_mixed_precision_config is run on the name by offlint's Python reader (once per project and name, its reads
noted for the cache), and the record it returns, or why it cannot say, is kept on the unit
(Unit.precision_recipes) for what applies the name later (the estimate, OFL117: offlint/named_precision.py).
A tree without that module (a project that pip-installs Bridge) gets nothing here; those readers then fall back
to offlint's table of the recipes of one Bridge release.
"""

from __future__ import annotations

from offlint.types import OneOf, Unit, Unknown

MODULE = "megatron.bridge.training.mixed_precision"
RESOLVER = "get_mixed_precision_config"


def names_in(unit: Unit) -> set[str]:
    """The recipe names the unit's assignments give `mixed_precision`, on any path of a branch too."""
    names: set[str] = set()
    for layer in unit.layers:
        for assignment in layer.assignments:
            if assignment.key != "mixed_precision":
                continue
            value = assignment.value
            values = [path[0] for path in value.paths] if isinstance(value, OneOf) else [value]
            names.update(v for v in values if isinstance(v, str))
    return names


def attach(unit: Unit, project, near: str) -> None:
    """Read what the tree's get_mixed_precision_config builds for each name the unit gives `mixed_precision` and
    keep it on the unit, beside what it holds already (the recipe a command runs); nothing when the tree has no
    such module near `near` (the file that gives the name)."""
    names = names_in(unit) - set(unit.precision_recipes)
    if not names or project is None:
        return
    path = project.path_of(MODULE, near)
    if path is None:
        return
    unit.precision_recipes = {**unit.precision_recipes,
                              **{name: project.call_result(("bridge-precision", path, name),
                                                           lambda name=name: _built(project, path, name))
                                 for name in sorted(names)}}
    unit.precision_file = path


def _built(project, path: str, name: str):
    """The MixedPrecisionConfig record the tree's get_mixed_precision_config(name) returns, else an Unknown."""
    reader = project.reader(path)
    function = reader.functions.get(RESOLVER) if reader is not None else None
    if function is None:
        return Unknown(f"the precision recipe {name!r}: {path} defines no {RESOLVER}() offlint can read")
    result = reader.run_function(function, [name], {}, 1)
    if isinstance(getattr(result, "fields", None), dict):
        return result
    why = result.reason if isinstance(result, Unknown) else f"{result!r}, not a mixed-precision config"
    return Unknown(f"the precision recipe {name!r}: what {path}'s {RESOLVER}({name!r}) returns is not known "
                   f"({why}; Bridge raises on a name it does not register)")


def inherit(unit: Unit, base: Unit) -> None:
    """A launch command checked on top of a recipe or YAML file of the tree (linking) also holds the precision
    recipes that unit read; its own come first (they are the names its own layers give)."""
    if base.precision_file:
        unit.precision_recipes = {**base.precision_recipes, **unit.precision_recipes}
        unit.precision_file = unit.precision_file or base.precision_file
