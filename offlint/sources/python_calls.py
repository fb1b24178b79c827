"""Calls the Python reader knows without following them: what they compute, and what they can change.

A call offlint cannot follow may change every config object handed to it, so the reader forgets the defaults
of what it reaches (python_configs `_taint`). That is right for an unknown helper, and wrong for the calls that only
look: builtins such as `getattr`, `hasattr`, `isinstance`, `len`, logging, and string methods. Those are
evaluated here when their inputs are literals (`"a,b".split(",")`, `getattr(cfg.model, "cuda_graph_impl",
None)` once the recipe set it), so the branches that test them can be decided, and they never taint.

megatron-core's own consumers of a configuration (`get_megatron_optimizer(config, ...)`, `GPTModel(config=...)`,
the DDP wrappers, ...) read it to build the model and the optimizer; they do not change the offload,
recompute, CUDA-graph or optimizer settings offlint reads. A plain megatron-core script hands its configs to
them, and that must not make its defaults unknown.
"""

from __future__ import annotations

import ast

from offlint.sources.python_values import PartialDict, Registry
from offlint.types import Unknown

NOT_PURE = object()  # the call is not one of these: the reader goes on with its own rules

# Builtins that return a value and change none of their arguments.
PURE_BUILTINS = frozenset({
    "getattr", "hasattr", "isinstance", "issubclass", "len", "str", "repr", "int", "float", "bool", "type", "id",
    "print", "sorted", "list", "tuple", "set", "frozenset", "dict", "min", "max", "sum", "any", "all", "abs",
    "round", "range", "enumerate", "zip", "callable", "format", "hash", "iter", "next", "reversed", "vars", "dir",
})
# `dataclasses.is_dataclass(x)` as written (the module's function, or its name imported from it): it only looks.
IS_DATACLASS = ("dataclasses.is_dataclass", "is_dataclass")
# Methods of str (and of the dict/list views a recipe reads) that compute a value and change nothing.
STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
                         "endswith", "replace", "casefold", "title", "capitalize", "isdigit", "isalpha",
                         "isnumeric", "removeprefix", "removesuffix", "join", "format"})
DICT_METHODS = frozenset({"get", "keys", "values", "items"})
VALUE_METHODS = STR_METHODS | DICT_METHODS
MAX_LITERAL = 10_000  # longest string or list the reader builds (hostile input stays small)
MAX_ITEMS = 1_000  # longest sequence a comprehension runs over
LOGGING_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
_LOGGER_NAMES = ("logger", "log", "logging", "_logger", "LOGGER", "_log", "warnings")

# megatron-core functions and classes that consume a configuration without changing the keys offlint reads.
MCORE_CONSUMERS = frozenset({
    "get_megatron_optimizer", "get_megatron_optimizer_config", "get_mup_config_overrides",
    "GPTModel", "MambaModel", "HybridModel", "T5Model", "BertModel", "MultimodalModel", "LLaVAModel",
    "DistributedDataParallel", "FullyShardedDataParallel", "TorchFullyShardedDataParallel",
    "get_gpt_layer_with_transformer_engine_spec", "get_gpt_layer_local_spec", "get_gpt_decoder_block_spec",
    "get_gpt_mtp_block_spec", "get_mamba_stack_spec", "TransformerBlock", "TransformerLayer",
    "get_model", "setup_model_and_optimizer", "get_forward_backward_func", "OptimizerParamScheduler",
    "initialize_model_parallel", "model_parallel_cuda_manual_seed", "finalize_model_grads",
})
MCORE_PACKAGE = "megatron.core"


def is_logging_call(func: ast.AST) -> bool:
    """`logger.info(...)`, `logging.warning(...)`, `warnings.warn(...)`: output only."""
    return isinstance(func, ast.Attribute) and func.attr in LOGGING_METHODS and \
        isinstance(func.value, ast.Name) and func.value.id in _LOGGER_NAMES


def is_mcore_consumer(name: str, module: str) -> bool:
    """A megatron-core consumer, named as imported (`module`: the dotted module it comes from)."""
    return name in MCORE_CONSUMERS and (module == MCORE_PACKAGE or module.startswith(MCORE_PACKAGE + ".")
                                        or f".{MCORE_PACKAGE}." in f".{module}.")


def builtin_value(name: str, args: list, keywords: dict) -> object:
    """The value of a pure builtin on literal arguments; an Unknown when an argument is not one."""
    if any(isinstance(a, Unknown) for a in [*args, *keywords.values()]) or keywords:
        return Unknown(f"the result of `{name}(...)`")
    try:
        if name == "len" and len(args) == 1 and isinstance(args[0], (str, list, tuple, dict)):
            return len(args[0])
        if name in ("int", "float", "str", "bool") and len(args) == 1 and \
                isinstance(args[0], (str, int, float, bool, type(None))):
            return {"int": int, "float": float, "str": str, "bool": bool}[name](args[0])
        if name == "int" and len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], int):
            return int(args[0], args[1])
        if name in ("list", "tuple", "sorted") and len(args) == 1 and isinstance(args[0], (list, tuple, str)):
            return list(args[0]) if name != "sorted" else sorted(args[0])
        if name == "dict" and len(args) == 1 and isinstance(args[0], dict):  # a copy, as partly known as its source
            reason = getattr(args[0], "reason", "")
            return PartialDict(args[0], reason) if reason else dict(args[0])
        if name in ("min", "max", "sum", "any", "all", "abs", "round") and args and \
                all(isinstance(a, (int, float, bool, list, tuple)) for a in args):
            return {"min": min, "max": max, "sum": sum, "any": any, "all": all, "abs": abs, "round": round}[name](
                *args)
    except (TypeError, ValueError, OverflowError):
        pass
    return Unknown(f"the result of `{name}(...)`")


def _plain(value: object) -> object:
    """A dict literal's entry as the reader stores it, (value, where, text), or a plain value: the value."""
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[2], str) and (
            value[1] is None or type(value[1]).__name__ == "Location"):
        return value[0]
    return value


def value_receiver(node: ast.AST) -> bool:
    """Whether a method's receiver, as written, may be a literal value: a constant, a name, an attribute, an
    f-string, or a string method's result (`key.strip().lower()`)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
        node = node.func.value
    return isinstance(node, (ast.Constant, ast.Name, ast.Attribute, ast.JoinedStr))


def has_value_method(receiver: object, method: str) -> bool:
    return (isinstance(receiver, str) and method in STR_METHODS) or (isinstance(receiver, dict)
                                                                      and method in DICT_METHODS)


def method_value(receiver: object, method: str, args: list) -> object:
    """A string method, or dict.get/keys/values/items, on a literal with literal arguments."""
    if isinstance(receiver, str):
        return str_method_value(receiver, method, args)
    if getattr(receiver, "reason", ""):  # a dict literal with a spread offlint could not read
        return Unknown(f"the result of `.{method}(...)` on a partly known dict")
    if method == "get" and 1 <= len(args) <= 2:
        key = as_key(args[0])
        if isinstance(key, Unknown):
            return Unknown("`.get(...)` of an unknown key")
        try:
            found = key in receiver
        except TypeError:  # a key Python cannot hash (a list): the program raises there
            return Unknown("`.get(...)` of a key that is no dict key")
        return _plain(receiver[key]) if found else (args[1] if len(args) == 2 else None)
    if not args:
        if method == "keys":
            return list(receiver)
        if method == "values":
            return [_plain(v) for v in receiver.values()]
        return Unknown("`.items()`")
    return Unknown(f"the result of `.{method}(...)`")


def as_key(value: object) -> object:
    """A value as a dict key: a tuple of literals, which the reader holds as a list, is a tuple again (`(pp, vp)`
    looked up among a layout table's `(4, 1)` keys); any other value as it is."""
    if isinstance(value, list) and all(isinstance(k, _SCALARS) for k in value):
        return tuple(value)
    return value


def item(container: object, key: object, text: str) -> object:
    """`container[key]` on a literal dict, list or string. A tuple key (read as a list) looks up the dict's tuple
    keys (`layout_map[(pp, vp)]`)."""
    key = as_key(key)
    if isinstance(container, dict) and (not getattr(container, "reason", "") or isinstance(container, Registry)) \
            and isinstance(key, (*_SCALARS, tuple)) and key in container:
        return _plain(container[key])
    if isinstance(container, (list, str)) and isinstance(key, int) and not isinstance(key, bool) and \
            -len(container) <= key < len(container):
        return container[key]
    return Unknown(f"`{text}` is not a literal")


def arithmetic(op: ast.operator, left: object, right: object, text: str) -> object:
    """`a + b` and friends on literal numbers, `+` on literal strings and lists, all of bounded size."""
    unknown = Unknown(f"`{text}` is not a literal")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    try:
        if isinstance(op, ast.Add) and (numbers or (type(left) is type(right) and isinstance(left, (str, list)))):
            result = left + right
        elif isinstance(op, ast.Mult) and _repeat_count(left, right) is not None:
            # `["decoder"] * 16`: a bounded repetition of a literal list or string
            result = left * right if isinstance(left, (str, list)) else right * left
        elif numbers and isinstance(op, (ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)):
            result = {ast.Sub: lambda: left - right, ast.Mult: lambda: left * right, ast.Div: lambda: left / right,
                      ast.FloorDiv: lambda: left // right, ast.Mod: lambda: left % right}[type(op)]()
        else:
            return unknown
    except (ZeroDivisionError, OverflowError, TypeError):
        return unknown
    if isinstance(result, (str, list)) and len(result) > MAX_LITERAL or \
            isinstance(result, int) and abs(result) > 2 ** 63:
        return unknown
    return result


_SCALARS = (str, int, float, bool, type(None))


def _repeat_count(left: object, right: object) -> int | None:
    """n for `sequence * n` or `n * sequence` when the result stays within MAX_LITERAL, else None."""
    sequence, n = (left, right) if isinstance(left, (str, list)) else (right, left)
    if not isinstance(sequence, (str, list)) or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return None
    return n if len(sequence) * n <= MAX_LITERAL else None


_BUILTIN_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "tuple": tuple, "dict": dict}


def builtin_types(types: ast.expr) -> bool:
    """Whether `types` (isinstance's second argument) names only builtin types (`str`, `(list, tuple)`)."""
    names = types.elts if isinstance(types, ast.Tuple) else [types]
    return all(isinstance(n, ast.Name) and n.id in _BUILTIN_TYPES for n in names)


def isinstance_value(value: object, types: ast.expr) -> object:
    """`isinstance(literal, str)` (or a tuple of builtin types) on a literal value; unknown otherwise."""
    names = types.elts if isinstance(types, ast.Tuple) else [types]
    if not all(isinstance(n, ast.Name) and n.id in _BUILTIN_TYPES for n in names) or isinstance(value, Unknown) \
            or type(value).__module__ != "builtins":
        return Unknown("the result of `isinstance(...)`")
    return isinstance(value, tuple(_BUILTIN_TYPES[n.id] for n in names))


def str_method_value(receiver: str, method: str, args: list) -> object:
    """A string method on a literal string with literal arguments."""
    if any(not isinstance(a, (str, int, list, tuple, type(None))) for a in args):
        return Unknown(f"the result of `.{method}(...)`")
    try:
        if method == "join":
            return receiver.join(args[0]) if len(args) == 1 and all(isinstance(s, str) for s in args[0]) else \
                Unknown("`.join(...)` of values that are not literal strings")
        if method == "format":
            return Unknown("`.format(...)`")
        result = getattr(receiver, method)(*args)
        too_long = isinstance(result, (str, list)) and len(result) > MAX_LITERAL
        return Unknown(f"the result of `.{method}(...)` is too long to follow") if too_long else result
    except (TypeError, ValueError, AttributeError):
        return Unknown(f"the result of `.{method}(...)`")
