"""Small helpers over `ast` nodes that every part of the Python reader uses: dotted names, nested statements.
"""

from __future__ import annotations

import ast

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _attr_chain(node) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return list(reversed(parts))


def _call_name(func) -> str:
    chain = _attr_chain(func)
    return ".".join(chain) if chain else ""


def _statements(body):
    """Every statement in a block, nested blocks included (no expressions: cheaper than ast.walk)."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)
