"""Calls the Python reader knows without following them: what they compute, and what they can change.

A call offlint cannot follow may change every config object handed to it, so the reader forgets the defaults
of what it reaches (python.py `_taint`). That is right for an unknown helper, and wrong for the calls that only
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

from offlint.types import Unknown

NOT_PURE = object()  # the call is not one of these: the reader goes on with its own rules

# Builtins that return a value and change none of their arguments.
PURE_BUILTINS = frozenset({
    "getattr", "hasattr", "isinstance", "issubclass", "len", "str", "repr", "int", "float", "bool", "type", "id",
    "print", "sorted", "list", "tuple", "set", "frozenset", "dict", "min", "max", "sum", "any", "all", "abs",
    "round", "range", "enumerate", "zip", "callable", "format", "hash", "iter", "next", "reversed", "vars", "dir",
})
# Methods of str (and of the dict/list views a recipe reads) that compute a value and change nothing.
STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
                         "endswith", "replace", "casefold", "title", "capitalize", "isdigit", "isalpha",
                         "isnumeric", "removeprefix", "removesuffix", "join", "format"})
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
        if name in ("min", "max", "sum", "any", "all", "abs", "round") and args and \
                all(isinstance(a, (int, float, bool, list, tuple)) for a in args):
            return {"min": min, "max": max, "sum": sum, "any": any, "all": all, "abs": abs, "round": round}[name](
                *args)
    except (TypeError, ValueError, OverflowError):
        pass
    return Unknown(f"the result of `{name}(...)`")


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
        return getattr(receiver, method)(*args)
    except (TypeError, ValueError, AttributeError):
        return Unknown(f"the result of `.{method}(...)`")
