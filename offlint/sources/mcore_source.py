"""The module names a megatron-core source tree in the linted checkout allows, read from its own
`transformer/transformer_config.py` (never imported): a Megatron-LM checkout, or Bridge's 3rdparty/Megatron-LM
submodule, is the megatron-core its jobs run, and its lists move between releases. Megatron-LM PR 6365 added "mhc"
to the recompute modules at 0.19.0's version number, and offlint's table of the 0.19 release called it invalid
(OFL222, an error) on the PR's own test case.

What is read: in TransformerConfig's methods, `set(self.<field>) - NAME` (the check that asserts "Invalid choices for
<field>") and the set literal of strings last assigned to NAME before it in the same function. A list offlint
cannot read this way is not given, and offlint's table for the version applies.
"""

from __future__ import annotations

import ast

# the field a check reads -> the list name the rules ask for (offlint/data "..._names", keys.names_known)
CHECKED_FIELDS = {"recompute_modules": "recompute_module_names", "offload_modules": "offload_module_names"}


def allowed_names(text: str | None) -> dict[str, frozenset[str]]:
    """{list name: the names the source allows} for each list in CHECKED_FIELDS the source checks readably."""
    if not text or "Invalid choices for" not in text:
        return {}
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, frozenset[str]] = {}
    for function in (n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        assigned: dict[str, list[tuple[int, frozenset[str] | None]]] = {}  # None: a value offlint cannot read
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, []).append((node.lineno, _string_set(node.value)))
        for node in ast.walk(function):
            checked = _checked(node)
            if checked is None:
                continue
            field, name = checked
            before = [(line, names) for line, names in assigned.get(name, ()) if line <= node.lineno]
            if not before or CHECKED_FIELDS[field] in found:
                continue
            names = max(before, key=lambda pair: pair[0])[1]  # (walk order is not line order: the nearest line)
            if names is not None:
                found[CHECKED_FIELDS[field]] = names
    return found


def _checked(node: ast.AST) -> tuple[str, str] | None:
    """(field, NAME) of `set(self.<field>) - NAME` (or `set(self.<field> or []) - NAME`)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Name)):
        return None
    left = node.left
    if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "set"
            and len(left.args) == 1):
        return None
    attribute = left.args[0]
    if isinstance(attribute, ast.BoolOp) and isinstance(attribute.op, ast.Or):  # set(self.x or [])
        attribute = attribute.values[0]
    if not isinstance(attribute, ast.Attribute):
        return None
    if not (isinstance(attribute.value, ast.Name) and attribute.value.id == "self"
            and attribute.attr in CHECKED_FIELDS):
        return None
    return attribute.attr, node.right.id


def _string_set(node: ast.expr) -> frozenset[str] | None:
    if isinstance(node, ast.Set) and node.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(e.value for e in node.elts)
    return None
