"""Small helpers over `ast` nodes that every part of the Python reader uses: dotted names, nested statements.
"""

from __future__ import annotations

import ast

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


_ATTRIBUTE, _NAME = ast.Attribute, ast.Name


def _attr_chain(node) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"] (a new list); None when the chain does not start at a name. (Classes tested by
    identity: the parser makes these exact classes, none of their subclasses.)"""
    parts: list[str] = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr)
        node = node.value
    if type(node) is not _NAME:
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def _call_name(func) -> str:
    chain = _attr_chain(func)
    return ".".join(chain) if chain else ""


def test_leaves(node: ast.AST) -> list[ast.AST]:
    """The operands a truth test reads, in order, through `and`/`or`, unary operators and comparisons (constants
    left out)."""
    leaves, pending = [], [node]
    while pending:
        test = pending.pop()
        if isinstance(test, ast.BoolOp):
            pending.extend(reversed(test.values))
        elif isinstance(test, ast.UnaryOp):
            pending.append(test.operand)
        elif isinstance(test, ast.Compare):
            pending.extend(reversed([test.left, *test.comparators]))
        elif not isinstance(test, ast.Constant):
            leaves.append(test)
    return leaves


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_BLOCKS_OF: dict[type, tuple[str, ...]] = {}  # a node class -> those of _BLOCKS among its fields, in _BLOCKS' order


def main_block(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__" and \
        len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant) and \
        test.comparators[0].value == "__main__" and isinstance(test.ops[0], ast.Eq)


def _statements(body):
    """Every statement in a block, nested blocks included (no expressions: cheaper than ast.walk). Only the fields
    a statement's class has are read (a getattr with a default of a missing one raises and clears an
    AttributeError: five for every simple statement)."""
    for stmt in body:
        yield stmt
        kind = type(stmt)
        names = _BLOCKS_OF.get(kind)
        if names is None:
            names = _BLOCKS_OF[kind] = tuple(name for name in _BLOCKS if name in getattr(kind, "_fields", ()))
        for name in names:
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def top_level_statements(body):
    """A module's top-level statements, those under `if`/`try` included (conditional imports and definitions)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from top_level_statements(node.body)
            yield from top_level_statements(node.orelse)
        elif isinstance(node, TRY):
            yield from top_level_statements(node.body)
            for handler in node.handlers:
                yield from top_level_statements(handler.body)
            yield from top_level_statements(node.orelse)


def _nodes(body: list[ast.stmt]):
    """The nodes of `body` in order, not those inside functions or classes it defines."""
    for stmt in body:
        yield from _below(stmt)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _below(top: ast.AST) -> tuple[ast.AST, ...]:
    """`top` and the nodes under it in order, not those inside functions or classes it defines; kept on `top`: the
    questions of linking walk each statement of an entry script's reach several times over (its calls, whether it
    may leave early, its nodes: 55,000 steps through 11 modules of Megatron Bridge, half of linking's time)."""
    known = top.__dict__.get("_offlint_below")
    if known is not None:
        return known
    found = []
    stack: list[ast.AST] = [top]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFINITIONS):
            continue
        found.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    top._offlint_below = found = tuple(found)
    return found
