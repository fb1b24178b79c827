"""The rule condition language: a Python expression, parsed with `ast` and never `eval`ed, turned once into nested
closures over a Scope, with three-valued logic (an unknown value makes every expression that depends on it unknown,
except where Kleene logic decides anyway: `False and ?` is False, `True or ?` is True)."""

from __future__ import annotations

import ast
import operator
from functools import lru_cache
from typing import Callable

from offlint import keys
from offlint.conditions.functions import FUNCTIONS
from offlint.conditions.scope import UNKNOWN, ConditionError, Scope, truth


COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.Mod: operator.mod}


Compiled = Callable[[Scope], object]


@lru_cache(maxsize=None)
def compile_condition(text: str) -> Compiled:
    """A condition as a function of a scope. Checked once (only safe constructs, only known functions), then
    turned into nested closures, so evaluating it for thousands of units does not walk its syntax tree."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"condition is not a valid expression: {text!r} ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            raise ConditionError(f"construct not allowed in conditions: {ast.dump(node)[:40]}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise ConditionError(f"unknown function in condition {text!r}")
    return _compile(tree.body)


def evaluate(text: str, scope: Scope) -> object:
    """Evaluate a condition or a template expression; returns a value or UNKNOWN."""
    return compile_condition(text)(scope)


def _compile(node: ast.AST) -> Compiled:
    """The evaluator of one expression node; an unsupported construct raises when the condition is loaded."""
    if isinstance(node, ast.Constant):
        constant = node.value
        return lambda scope: constant
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return _compile_collection(node)
    if isinstance(node, ast.Name):
        return _compile_name(node.id)
    if isinstance(node, ast.Attribute):
        dotted = _dotted(node)
        if dotted is None:
            raise ConditionError("attribute access is only allowed on keys")
        return lambda scope: scope.key(dotted)
    compiler = _COMPILERS.get(type(node))
    if compiler is None:
        raise ConditionError(f"unsupported expression: {type(node).__name__}")
    return compiler(node)


def _compile_collection(node: ast.List | ast.Tuple | ast.Set) -> Compiled:
    elements = [_compile(e) for e in node.elts]
    make_set = isinstance(node, ast.Set)

    def collection(scope: Scope) -> object:
        items = [element(scope) for element in elements]
        if any(i is UNKNOWN for i in items):
            return UNKNOWN
        return set(items) if make_set else items

    return collection


_NOT_NAMED = object()  # (a name the scope does not give)


def _compile_name(name: str) -> Compiled:
    def lookup(scope: Scope) -> object:
        value = scope.names.get(name, _NOT_NAMED)
        if value is not _NOT_NAMED:
            return value
        if name in keys.KEYS:  # a top-level key such as mixed_precision
            return scope.key(name)
        raise ConditionError(f"unknown name {name!r} in condition")

    return lookup


def _compile_unary(node: ast.UnaryOp) -> Compiled:
    operand = _compile(node.operand)
    if isinstance(node.op, ast.Not):
        return lambda scope: UNKNOWN if (value := operand(scope)) is UNKNOWN else not value
    if isinstance(node.op, ast.USub):
        return lambda scope: UNKNOWN if (value := operand(scope)) is UNKNOWN else -value
    raise ConditionError("unsupported unary operator")


def _compile_binary(node: ast.BinOp) -> Compiled:
    left_of, right_of = _compile(node.left), _compile(node.right)
    if type(node.op) not in _BINARY:
        raise ConditionError(f"unsupported operator: {type(node.op).__name__}")
    apply = _BINARY[type(node.op)]

    def binary(scope: Scope) -> object:
        left, right = left_of(scope), right_of(scope)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        try:
            return apply(left, right)
        except (TypeError, ZeroDivisionError, KeyError):
            return UNKNOWN

    return binary


def _compile_if(node: ast.IfExp) -> Compiled:
    test_of, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)

    def if_expression(scope: Scope) -> object:
        test = truth(test_of(scope))
        if test is UNKNOWN:
            return UNKNOWN
        return body(scope) if test else orelse(scope)

    return if_expression


def _compile_call(node: ast.Call) -> Compiled:
    function = FUNCTIONS[node.func.id]
    arguments = [_compile(a) for a in node.args]
    takes_unknown = getattr(function, "takes_unknown", False)
    needs_scope = getattr(function, "needs_scope", False)
    # One evaluator for each arity the helpers are called with, without a list of one argument or none to build and
    # test (`predicted_oom()`, `is_default(key)`: every unit evaluates them, each check of each rule)
    if not arguments:
        return function if needs_scope else lambda scope: function()
    if len(arguments) == 1:
        (argument,) = arguments

        def call_one(scope: Scope) -> object:
            value = argument(scope)
            if value is UNKNOWN and not takes_unknown:
                return UNKNOWN
            return function(scope, value) if needs_scope else function(value)

        return call_one

    def call(scope: Scope) -> object:
        args = [argument(scope) for argument in arguments]
        if not takes_unknown:
            for value in args:  # (any(a is UNKNOWN for a in args), without a generator for each call)
                if value is UNKNOWN:
                    return UNKNOWN
        if needs_scope:
            return function(scope, *args)
        return function(*args)

    return call


def _compile_bool_op(node: ast.BoolOp) -> Compiled:
    is_and = isinstance(node.op, ast.And)
    parts = [_compile(v) for v in node.values]

    def bool_op(scope: Scope) -> object:
        saw_unknown = False
        for part in parts:
            value = part(scope)  # (truth's test, inline: not and `and`/`or` take a value's truth as bool() does)
            if value is UNKNOWN:
                saw_unknown = True
            elif is_and and not value:
                return False
            elif not is_and and value:
                return True
        return UNKNOWN if saw_unknown else is_and

    return bool_op


def _compile_compare(node: ast.Compare) -> Compiled:
    left_of = _compile(node.left)
    steps = [(COMPARE[type(op)], _compile(right)) for op, right in zip(node.ops, node.comparators)]

    def compare(scope: Scope) -> object:
        left = left_of(scope)
        result: object = True
        for apply, right_of in steps:
            right = right_of(scope)
            if left is UNKNOWN or right is UNKNOWN:
                result = UNKNOWN if result is not False else False
            else:
                try:
                    ok = apply(left, right)
                except TypeError:
                    ok = False  # e.g. '4' > 1: megatron-core would raise; the rule's own condition is not met
                if not ok:
                    return False
            left = right
        return result

    return compare


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# The other expressions' compilers, by node type (_compile looks this up when it runs, once the module is loaded)
_COMPILERS: dict[type, Callable[..., Compiled]] = {
    ast.BoolOp: _compile_bool_op, ast.UnaryOp: _compile_unary, ast.Compare: _compile_compare,
    ast.BinOp: _compile_binary, ast.IfExp: _compile_if, ast.Call: _compile_call,
}
