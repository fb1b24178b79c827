"""Which of two recipes of one name Megatron Bridge's run_recipe.py loads: a library recipe (`recipes/`) and a
benchmark recipe (`perf_recipes/`) may share a name. The tree's recipe_metadata.py, beside the entry script, lists
the names it has settled: BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS selects the benchmark definition and
LIBRARY_RECIPE_PRECEDENCE_COLLISIONS the library one (recipe_runner.load_recipe, which logs which it takes; Bridge
067f987 lists nine names under the first, none under the second). Read from the tree's file, never imported; a name
it does not list, or a tree without the lists (a Bridge from before them), is left undecided: no recipe is linked.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable
from functools import lru_cache

PERF, LIBRARY = "/perf_recipes/", "/recipes/"
_LISTS = {"BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS": PERF, "LIBRARY_RECIPE_PRECEDENCE_COLLISIONS": LIBRARY}
_METADATA = "recipe_metadata.py"


def settled_package(name: str, entry_script: str, text_of: Callable[[str], str | None]) -> str | None:
    """PERF or LIBRARY: the package whose definition of recipe `name` the entry script at `entry_script` (a tree path)
    loads, as its recipe_metadata.py settles it; None where it does not. `text_of`: a tree path's text, or None."""
    text = text_of(posixpath.join(posixpath.dirname(entry_script), _METADATA))
    if not text or "_RECIPE_PRECEDENCE_COLLISIONS" not in text:
        return None
    return _settled_names(text).get(name)


@lru_cache(maxsize=8)
def _settled_names(text: str) -> dict[str, str]:
    """Recipe name -> PERF or LIBRARY, as a recipe_metadata.py's text lists them (parsed once per text: every launch
    of a settled name asks)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    listed: dict[str, frozenset[str]] = {}
    for statement in module.body:
        target, value = _assigned(statement)
        if target in _LISTS:
            listed[target] = _names(value)
    # (a name in both lists is the library's: the tree's resolved_benchmark_recipe_metadata looks at that one first)
    return {**dict.fromkeys(listed.get("BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS", ()), PERF),
            **dict.fromkeys(listed.get("LIBRARY_RECIPE_PRECEDENCE_COLLISIONS", ()), LIBRARY)}


def _assigned(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """(name, value) of a module-level `NAME = value` or `NAME: type = value`."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
            isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
        return statement.target.id, statement.value
    return None, None


def _names(value: ast.expr | None) -> frozenset[str]:
    """The strings of a literal set, `frozenset({...})`, `frozenset([...])` or `frozenset()`: nothing else is read."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("frozenset", "set") \
            and not value.keywords and len(value.args) <= 1:
        value = value.args[0] if value.args else None
    if isinstance(value, (ast.Set, ast.List, ast.Tuple)):
        return frozenset(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset()
