"""Rule conditions: a small, safe expression language with three-valued logic.

A condition is a Python expression (parsed with `ast`, never `eval`ed) over canonical keys
(`model.cpu_offloading and model.pipeline_model_parallel_size > 1`) and the helper functions below.
Every key reads as its effective value; an unknown value makes every expression that depends on it unknown,
except where Kleene logic decides anyway (`False and ?` is False, `True or ?` is True).
The evaluator records which keys it read and which of them were unknown, for related locations and --strict.
"""

from __future__ import annotations

import ast
import operator
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from offlint import keys, pipeline_layout, te_support
# The memory model and the other helpers the conditions call, imported with the conditions (so with the engine,
# before a cold check forks its workers, which inherit them): every unit check calls into them, and a lazy import
# cost each process 0.04 s of CPU and each call an import lookup (on Megatron Bridge 0.04 s of the parent's
# serial launch-command checks, and as much in each worker).
from offlint.estimate import oom
from offlint.estimate.devices import ends
from offlint.estimate.inputs import gpus_in_name
from offlint.estimate.shapes import Parallelism
from offlint.named_precision import configured
from offlint.sources.bridge_checks import EVAL_BATCH_CHECK, EXPERT_TP_DEFAULT, LOCAL_GRAPH_CHECK, NO_DEFAULT
from offlint.sources.bridge_schedule import KEY as SCHEDULE_KEY
from offlint.sources.mcore_source import CHECKS
from offlint.types import Assignment, Defaults, OneOf, Source, Unknown, Value
from offlint.versions import Version, parse_version


class ConditionError(ValueError):
    pass


class _Unknown:
    """The third truth value inside the evaluator (distinct from types.Unknown, which carries a reason)."""

    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()

_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.Mod: operator.mod}


@dataclass
class Scope:
    """What a condition can see: a key lookup, plus the per-assignment names for assignment-scope rules."""

    lookup: Callable[[str], Value]
    version: Version
    names: dict[str, object] = field(default_factory=dict)
    read: list[Value] = field(default_factory=list)
    _read_keys: set[str] = field(default_factory=set, repr=False)

    def key(self, name: str) -> object:
        value = self.lookup(name)
        if value.key not in self._read_keys:
            self._read_keys.add(value.key)
            self.read.append(value)
        return UNKNOWN if value.state == "unknown" else value.value  # (Value.is_unknown, without its call)


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


def truth(value: object) -> object:
    """Python truthiness, three-valued."""
    if value is UNKNOWN:
        return UNKNOWN
    return bool(value)


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
    if isinstance(node, ast.BoolOp):
        return _compile_bool_op(node)
    if isinstance(node, ast.UnaryOp):
        return _compile_unary(node)
    if isinstance(node, ast.Compare):
        return _compile_compare(node)
    if isinstance(node, ast.BinOp):
        return _compile_binary(node)
    if isinstance(node, ast.IfExp):
        return _compile_if(node)
    if isinstance(node, ast.Call):
        return _compile_call(node)
    raise ConditionError(f"unsupported expression: {type(node).__name__}")


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
    steps = [(_COMPARE[type(op)], _compile(right)) for op, right in zip(node.ops, node.comparators)]

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


# ---- helper functions available in conditions and message templates --------------------------------------


def _needs_scope(fn):
    fn.needs_scope = True
    return fn


def _takes_unknown(fn):
    fn.takes_unknown = True
    return fn


@_needs_scope
def version_at_least(scope: Scope, text: str) -> bool:
    return scope.version >= parse_version(text)


@_needs_scope
def checkout_checks(scope: Scope, name: str) -> bool:
    """Whether the checkout's own megatron-core makes the check `name` (sources/mcore_source.CHECK_TEXTS): checks
    added between releases, which no version number tells apart. False where no checkout source was read."""
    return name in (scope.version.names_from_source(CHECKS) or ())


@_needs_scope
def allowed_offload_modules(scope: Scope) -> list[str]:
    return sorted(_offload_modules(scope.version))


# The allocator options of other accelerators' PyTorch backends: a launch that sets one configures that backend's
# caching allocator, not CUDA's (torch_npu reads PYTORCH_NPU_ALLOC_CONF, Ascend's environment variable reference;
# torch_musa PYTORCH_MUSA_ALLOC_CONF, its MUSAAllocatorConfig). A device-visibility variable is no such sign: an
# MT-MegatronLM script for CUDA exports MUSA_VISIBLE_DEVICES, copied from its MUSA twin, and its code runs on CUDA.
OTHER_ACCELERATOR_VARIABLES = {"PYTORCH_NPU_ALLOC_CONF": "Ascend NPUs",
                               "PYTORCH_MUSA_ALLOC_CONF": "Moore Threads GPUs (MUSA)"}


@_needs_scope
def other_accelerator(scope: Scope) -> object:
    """Where the launch runs on an accelerator other than a CUDA GPU, why ("Ascend NPUs: the launch sets
    PYTORCH_NPU_ALLOC_CONF"): its entry script's code imports that backend's package (Unit.accelerator), or its
    environment sets that backend's allocator options (OTHER_ACCELERATOR_VARIABLES); "" where neither says so,
    unknown where one of those variables is unknown."""
    if scope.names.get("accelerator"):
        return scope.names["accelerator"]
    unknown = False
    for name, device in OTHER_ACCELERATOR_VARIABLES.items():
        value = scope.key(f"env.{name}")
        if value is UNKNOWN:
            unknown = True
        elif value is not None:
            return f"{device}: the launch sets {name}"
    return UNKNOWN if unknown else ""


@_needs_scope
def distributed_optimizer(scope: Scope) -> object:
    """Whether the run uses the distributed optimizer. In Megatron Bridge either flag turns it on (BR-4 syncs
    optimizer.use_distributed_optimizer and ddp.use_distributed_optimizer); in a plain megatron-core program
    get_megatron_optimizer decides from the OptimizerConfig alone (the DDP config's flag only lays out buffers)."""
    optimizer = truth(scope.key("optimizer.use_distributed_optimizer"))
    if scope.names.get("framework") == "megatron-core" or optimizer is True:
        return optimizer
    ddp = truth(scope.key("ddp.use_distributed_optimizer"))
    return True if ddp is True else UNKNOWN if UNKNOWN in (optimizer, ddp) else False


def _whole(value) -> bool:
    """An int that is not a bool (a size as megatron-core compares it)."""
    return isinstance(value, int) and not isinstance(value, bool)


def as_list(value) -> list:
    """megatron-core iterates these: a string iterates its characters, None is empty."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return list(value)
    if isinstance(value, str):
        return list(value)
    return [value]


@_needs_scope
def invalid_offload_modules(scope: Scope, modules) -> list:
    if scope.version.lists_unknown:  # (a fork of Megatron-LM the tree pins and has not checked out)
        return []
    allowed = _offload_modules(scope.version)
    # (a name that is no string, a list in a list, is no module either: megatron-core's set() of them raises)
    return sorted({str(m) for m in as_list(modules) if not isinstance(m, str) or m not in allowed})


def contains(collection, item) -> bool:
    return item in as_list(collection)


def overlap(collection, items) -> list:
    return sorted({str(i) for i in as_list(collection) if i in items})


def is_str(value) -> bool:
    return isinstance(value, str)


def is_list(value) -> bool:
    return isinstance(value, (list, tuple))


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def startswith(value, prefix) -> bool:
    return str(value).startswith(prefix)


def lower(value) -> str:
    return str(value).lower()


def fmt(value) -> str:
    """A value as a user would write it in a recipe."""
    if isinstance(value, str):
        return repr(value)
    return repr(value)


@_takes_unknown
def known(value) -> bool:
    return value is not UNKNOWN


@_needs_scope
def is_known_key(scope: Scope, key: str) -> bool:
    """Whether `key` may be a field of its section (OFL003). A section built from its own `_target_` (a config
    Megatron Bridge wrote out, `run_config.yaml`) takes its keys as that class's constructor arguments: offlint
    cannot list every class's fields (a Bridge provider from outside the tree, a newer megatron-core), and a key
    the class lacks fails loudly when the file is loaded, so its keys are not judged."""
    section, _, field_name = key.partition(".")
    if section not in ("model", "optimizer", "ddp") or not field_name or "." in field_name:
        return True
    if field_name in keys.known_fields(section):
        return True
    target = scope.key(f"{section}._target_")
    return isinstance(target, str) and target != ""


@_needs_scope
def suggestion(scope: Scope, key: str) -> str:
    """The closest known key for a typo, or '' when nothing is close."""
    return keys.closest_field(key)


@_needs_scope
def overrides(scope: Scope, key: str, other: str) -> object:
    """Whether `key` was set over `other` by an outer writer: from another file (a derived recipe elsewhere, a
    YAML file, a command line), by a function that calls the one that set `other` (its chain of calls is a
    proper prefix; a Bridge mutator's or a performance flag's own "by ..." step aside), or, where one writer
    copies both from workload records, from a record derived from the one `other` came from. Such a writer
    switching something off is overriding an earlier choice, not contradicting itself. False when either key is at
    its default; unknown when either value is."""
    if scope.key(key) is UNKNOWN or scope.key(other) is UNKNOWN:
        return UNKNOWN
    outer, inner = scope.lookup(key).assignment, scope.lookup(other).assignment
    if outer is None or inner is None:
        return False
    if outer.location.path != inner.location.path:
        return True
    (outer_calls, outer_records), (inner_calls, inner_records) = _writer(outer), _writer(inner)
    if outer_calls != inner_calls:
        return _proper_prefix(outer_calls, inner_calls)
    # One writer, copying both from workload records: `replace(BASE, cuda_graph_impl="none")` overrides what BASE
    # set (the records that passed a field on, outermost first: python_values.Record.made)
    return bool(outer_records) and _proper_prefix(outer_records, inner_records)


def _writer(a: Assignment) -> tuple[list[str], list[str]]:
    """An assignment's chain of calls (a Bridge mutator's or a performance flag's own "by ..." step aside) and the
    workload records its value came from (its "from ..." steps)."""
    calls = [step for step in a.via if not step.startswith(("by ", "from "))]
    return calls, [step for step in a.via if step.startswith("from ")]


def _proper_prefix(outer: list[str], inner: list[str]) -> bool:
    return len(outer) < len(inner) and inner[:len(outer)] == outer


def _graph_names(value) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else as_list(value)
    names = [str(item).rsplit(".", 1)[-1] for item in items if str(item) != ""]  # CudaGraphModule.attn -> attn
    return [] if names == ["full"] else names


@_takes_unknown
def graph_modules(scope, modules) -> object:
    """The CUDA graph module names megatron-core ends up with, before it migrates "full_iteration": the
    deprecated `cuda_graph_scope` (the only field before 0.18) replaces `cuda_graph_modules` when it names
    something; a string is split on commas; "full" alone means none (the whole layer). Modules that name
    something are the answer whatever an unknown scope is: any scope but None beside them is rejected (CG-5)."""
    named = [] if modules is UNKNOWN else _graph_names(modules)
    if scope is UNKNOWN:
        return named or UNKNOWN
    return _graph_names(scope) or (UNKNOWN if modules is UNKNOWN else named)


@_needs_scope
def written_known(scope: Scope, key: str) -> object:
    """Whether the unit writes `key` with a value offlint reads: False when nothing writes it or what writes it
    cannot be read (copied from an object offlint does not evaluate, say), so a rule about a chosen setting
    does not guess at one, even under --strict; unknown when the value depends on a branch (judged per path)."""
    value = scope.key(key)
    found = scope.lookup(key)
    if found.assignment is None:
        return False
    if value is UNKNOWN:
        return UNKNOWN if isinstance(found.value, OneOf) else False
    return True


@_needs_scope
def graph_modules_written(scope: Scope) -> object:
    """graph_modules() of the cuda_graph_scope and cuda_graph_modules the unit writes readably (written_known),
    a field it does not write, or writes with a value offlint cannot read, counting as unset (None)."""
    values = []
    for key in ("model.cuda_graph_scope", "model.cuda_graph_modules"):
        values.append(scope.key(key) if written_known(scope, key) is not False else None)
    return graph_modules(*values)


def _names_known(version: Version, field: str) -> frozenset[str] | None:
    """The names of a list the version allows: as the checkout's own megatron-core source allows them where offlint
    read them there (sources/mcore_source.py), else offlint's shipped data."""
    if version.lists_unknown:  # (a fork of Megatron-LM the tree pins and has not checked out)
        return None
    own = version.names_from_source(field)
    if own is not None:
        return own
    return _names_in_data_from(version, field) if version.guessed else _names_in_data(version, field)


@lru_cache(maxsize=64)
def _names_in_data_from(version: Version, field: str) -> frozenset[str] | None:
    """The names of a list any release from `version` on allows (a version only guessed: the tree may run a newer
    one); None where one of them has no such list."""
    known = keys.names_known_from(version, field)
    return None if known is None else frozenset(known)


@lru_cache(maxsize=64)
def _names_in_data(version: Version, field: str) -> frozenset[str] | None:
    """keys.names_known, once per version and list in a process: a union of the lists of the releases that bracket
    the version, in offlint's shipped data, which the graph and recompute module checks ask for on every unit."""
    known = keys.names_known(version, field)
    return None if known is None else frozenset(known)


def _offload_modules(version: Version) -> set[str]:
    own = version.names_from_source("offload_module_names")
    if own is not None:
        return set(own)
    return keys.allowed(keys.OFFLOAD_MODULES, keys.newest_known() if version.guessed else version)


@_needs_scope
def graph_module_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the CUDA-graph module names the unit writes (readably, written_known) in
    cuda_graph_scope or cuda_graph_modules, in its words; "" when it knows every one. Each string becomes an enum
    member by name, and any other raises KeyError: TransformerConfig.__post_init__ (0.16.1 transformer_config.py
    :1698-1711, `CudaGraphScope[scope]`; from 0.18 `normalize_cuda_graph_modules`, `CudaGraphModule[scope]`), and
    Megatron-LM's --cuda-graph-scope / --cuda-graph-modules argparse types before that. The names a version knows
    are the generated data's (offlint/data, "cuda_graph_names": the members, "full", the migrated spellings); for
    a version between two releases with data, the names either knows (keys.bracketing_data)."""
    known = _names_known(scope.version, "cuda_graph_names")
    if known is None:
        return ""
    unknown = [(key.split(".", 1)[1], name) for key in ("model.cuda_graph_scope", "model.cuda_graph_modules")
               if written_known(scope, key) is True for name in _graph_names(scope.key(key)) if name not in known]
    if not unknown:
        return ""
    field, name = unknown[0]
    spaced = (f" (one name with spaces: a command line that quotes a list passes it as one argument)"
              if " " in name.strip() else "")
    who = ("Megatron-LM's argument parser raises" if str(scope.names.get("defaults", "")) == "mlm-cli" else
           "TransformerConfig raises")
    return (f"{field} names {name!r}, which megatron-core does not know{spaced}: {who} KeyError: {name!r} at "
            f"start; the names are {', '.join(sorted(known - {'full'}))} (or 'full' alone)")


@_needs_scope
def recompute_module_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the recompute_modules of a selective recompute, in its words; "" when it knows
    every one, or does not check them (another granularity: OFL213). TransformerConfig.__post_init__ asserts
    "Invalid choices for recompute_modules: {...}" for a name outside the set it allows (0.16.1
    transformer_config.py:1196-1211); it takes the set of the value, so a string gives its characters. The names
    a version allows are the generated data's (offlint/data, "recompute_module_names", asked of megatron-core);
    for a version between two releases with data, a name either allows is not claimed (keys.bracketing_data). A
    string written in a Hydra override or YAML file is OFL002's."""
    if scope.key("model.recompute_granularity") != "selective":
        return ""
    modules = scope.key("model.recompute_modules")
    found = scope.lookup("model.recompute_modules")
    if modules is UNKNOWN or not modules or found.assignment is None:
        return ""
    if isinstance(modules, str) and found.assignment.source.value in ("hydra", "yaml"):
        return ""
    known = _names_known(scope.version, "recompute_module_names")
    if known is None:
        return ""
    invalid = sorted({str(name) for name in as_list(modules)} - known)
    if not invalid:
        return ""
    spaced = ("; a comma-joined or spaced word is one name (a command line that quotes a list passes it as one "
              "argument)" if any("," in name or " " in name for name in invalid) else "")
    return (f"recompute_modules names {', '.join(repr(n) for n in invalid)}, which megatron-core does not allow under "
            f"selective recompute{spaced}: its TransformerConfig asserts \"Invalid choices for recompute_modules: "
            f"{set(invalid)}\" when it builds the config; the modules are {', '.join(sorted(known))}")


def graph_scope_names(scope) -> list[str]:
    return [str(s) for s in as_list(scope)] if not isinstance(scope, str) else [scope]


FP32_SPELLINGS = ("torch.float32", "torch.float", "float32", "fp32", "torch.fp32")


def is_fp32(dtype) -> bool:
    """A dtype setting (as offlint reads it: "torch.float32", "fp32", ...) that means fp32."""
    return str(dtype) in FP32_SPELLINGS


@_needs_scope
def is_default(scope: Scope, key: str) -> object:
    """Whether the unit leaves `key` unset, so the default applies (an explicit write of the default value is a
    choice, not this); unknown when the value is."""
    if scope.key(key) is UNKNOWN:
        return UNKNOWN
    return scope.lookup(key).state == "default"


@_needs_scope
def is_written(scope: Scope, key: str) -> bool:
    """Whether some code, flag or file of the unit writes `key` (even with a value offlint cannot read). A key
    no one writes holds its default, or an unknown inherited from code offlint did not follow: a rule about a
    setting someone chose (OFL213) is not about that unit."""
    scope.key(key)
    return scope.lookup(key).assignment is not None


@_takes_unknown
def listing(*parts) -> str:
    """Message parts joined with ", ", leaving out empty ones (a setting that is not worth naming) and unknown
    ones; "?" when nothing known is left but something was unknown."""
    known_parts = [str(p) for p in parts if p is not UNKNOWN and p != ""]
    if known_parts:
        return ", ".join(known_parts)
    return "?" if any(p is UNKNOWN for p in parts) else ""


# ---- the memory model (OFL303, OFL304): pure arithmetic in offlint.estimate, never torch ---------------------


def _memory_inputs(scope: Scope, verdict: str = "oom"):
    """The unit's memory-model inputs (None when a size is unknown, or when the rule's `verdict`, one of
    oom.VERDICTS, depends on something open about the unit), computed once per scope. The keys that decide the
    verdict are recorded as read, so findings list them and --strict names the unknown ones."""
    if not hasattr(scope, "_memory_inputs"):
        unit_name, gpu = str(scope.names.get("unit_name", "")), str(scope.names.get("unit_gpu", ""))
        launch_gpus = int(scope.names.get("launch_gpus", 0))
        inputs, unknown, varying = _per_unit(scope, ("inputs", unit_name, launch_gpus),
                                             lambda: oom.inputs_for(scope.lookup, unit_name, gpu, launch_gpus))
        for key in unknown:
            scope.key(key)
        for key in oom.DRIVERS:
            if scope.lookup(key).assignment is not None:
                scope.key(key)
        scope._memory_inputs = (inputs, varying)
    inputs, varying = scope._memory_inputs
    return None if verdict in varying else inputs


def _device(scope: Scope):
    """The GPU the unit is sized against (for a bracketed capacity, devices.stated_range, its low end)."""
    return oom.device_for(str(scope.names.get("unit_name", "")), str(scope.names.get("unit_gpu", "")))


def _claim_device(scope: Scope):
    """The device a finding's figures name: for a bracketed capacity its high end, where an overrun or a short
    headroom still holds (the verdicts themselves hold at both ends: oom.oom_verdict, oom.risk_verdict)."""
    return ends(_device(scope))[-1]


def _memory_bound(scope: Scope, verdict: str = "oom"):
    """oom.bound of the unit's inputs, once per unit; None as _memory_inputs gives None for `verdict`."""
    inputs = _memory_inputs(scope, verdict)
    if inputs is None:
        return None
    return _per_unit(scope, ("bound", str(scope.names.get("unit_name", ""))), lambda: oom.bound(inputs))


def _per_unit(scope: Scope, what: tuple, compute):
    """`compute()`, once per resolved unit the scope reads (each rule's check has a scope of its own, and the
    memory model cost a third of a check: three rules ask for it)."""
    owner = getattr(scope.lookup, "__self__", None)  # the ResolvedUnit of `resolved.get`
    memo = owner.__dict__.setdefault("_per_unit", {}) if hasattr(owner, "__dict__") else {}
    if what not in memo:
        memo[what] = compute()
    return memo[what]


@_needs_scope
def estimated_peak_gib(scope: Scope) -> object:
    """One GPU's estimated peak (GiB): at the unit's GPU count, else the lower bound over data-parallel sizes."""
    result = _memory_bound(scope)
    return UNKNOWN if result is None else result.peak.total / 1024**3


@_needs_scope
def model_state_pp1_gib(scope: Scope) -> object:
    """Weights + gradients + optimizer states of one GPU at PP=1 (GiB)."""
    inputs = _memory_inputs(scope, "pp1")
    return UNKNOWN if inputs is None else oom.model_state_at_pp1(inputs) / 1024**3


@_needs_scope
def usable_gib(scope: Scope) -> float:
    return _claim_device(scope).usable_bytes / 1024**3


@_needs_scope
def gpu_name(scope: Scope) -> str:
    return _claim_device(scope).name


@_needs_scope
def gpu_count(scope: Scope) -> str:
    """How the estimate sized the job (oom.bound_size): "on 16 GPUs", "on up to 64 GPUs (...)", or "at any
    data-parallel size"."""
    inputs = _memory_inputs(scope)
    return "at any data-parallel size" if inputs is None else oom.bound_size(inputs)


@_needs_scope
def largest_memory_parts(scope: Scope) -> str:
    result = _memory_bound(scope)
    return "?" if result is None else oom.largest_parts(result)


@_needs_scope
def memory_savings(scope: Scope) -> str:
    inputs = _memory_inputs(scope)
    return "?" if inputs is None else oom.offload_savings(inputs, _device(scope))


@_needs_scope
def predicted_oom(scope: Scope) -> object:
    """OFL303: True when even the calibrated floor exceeds the device, else False (oom.oom_verdict): an overrun of
    the full estimate alone rests on the uncalibrated activations and allowance, so it is no finding, not even a
    "possible" one under --strict (`offlint estimate` shows it). Without an estimate (a feature the model does not cover, an unknown size)
    there is no finding, not even a "possible" one: no OOM is claimed without a number, and a model offlint cannot
    size is said once per run (oom.unsized_notes), not once per recipe. A GPU whose capacity is stated, not
    measured (Rubin), is judged at both ends of its bracket (devices.stated_range)."""
    result = _memory_bound(scope)
    if result is None:
        return False
    return {"oom": True, "uncalibrated": False, "fits": False}[oom.oom_verdict(result, _device(scope))]


@_needs_scope
def oom_message(scope: Scope) -> str:
    return oom.oom_message(_memory_bound(scope), _device(scope), scope.lookup,
                           str(scope.names.get("unit_name", "")), gpu_count(scope),
                           str(scope.names.get("unit_gpu", "")), int(scope.names.get("launch_gpus", 0)))


@_needs_scope
def oom_floor_gib(scope: Scope) -> object:
    result = _memory_bound(scope)
    return UNKNOWN if result is None else oom.floor_bytes(result) / 1024**3


def _expandable(scope: Scope) -> bool | None:
    for key in oom.ALLOCATOR_ENV_KEYS:
        scope.key(key)
    return oom.expandable(scope.lookup)


@_needs_scope
def oom_at_risk(scope: Scope) -> object:
    """OFL305: a peak that fits with less headroom than the allocator needs (oom.risk_verdict). Without an
    estimate (an unknown size, an unmodelled feature, a GPU of unknown capacity) it stays quiet: OFL303 names
    those unknowns under --strict, once per unit."""
    result = _memory_bound(scope, "risk")
    if result is None:
        return False
    verdict = oom.risk_verdict(result, _device(scope), _expandable(scope))
    return {"at risk": True, "possible": UNKNOWN, "uncalibrated": False, "no": False}[verdict]


@_needs_scope
def at_risk_margin_gib(scope: Scope) -> object:
    return oom.margin_bytes(_claim_device(scope), _expandable(scope) is not False) / 1024**3


@_needs_scope
def at_risk_fix(scope: Scope) -> str:
    inputs = _memory_inputs(scope, "risk")
    for key in ("ddp.nccl_ub", "ddp.use_megatron_fsdp", "model.cuda_graph_impl", "env.NCCL_GRAPH_REGISTER"):
        scope.key(key)
    if inputs is None:
        return "?"
    return oom.cheapest_fix(inputs, _device(scope), scope.lookup, _expandable(scope))


# ---- the parallel layout against the GPU count a recipe's name gives (OFL216) -----------------------------------


@_needs_scope
def layout_division(scope: Scope) -> object:
    """Why the unit's parallel layout cannot run on the GPU count its name gives (Bridge's `..._64gpu_...`), or a
    launch on the one its launcher starts (torchrun's `--nproc-per-node` x `--nnodes`, a performance launch's `-ng`),
    in megatron-core's words (Megatron-LM's, whose validate_args asserts first); "" when it can, or when neither says
    (a launch's world size is its own, whatever its recipe's name: a model-verification card runs a 416-GPU recipe
    on 352 GPUs at PP11). initialize_model_parallel raises when
    TP x PP x CP does not divide the world size, then when ETP x EP x PP does not. An unset ETP is TP's value in
    megatron-core (ModelParallelConfig.__post_init__) but 1 with EP > 1 in Megatron Bridge since 6f2f546ef
    (July 2026, transformer_config._set_moe_expert_tensor_parallel_default): read from the tree's Bridge, and where
    the tree has none the finding must hold for both. "" when a size it needs is unknown: no crash is claimed on a
    layout offlint cannot read."""
    if scope.names.get("unit_kind") == "recipe":
        world = gpus_in_name(str(scope.names.get("unit_name", "")))
        said = f"the recipe name says {world}"
    else:  # a launch runs on its own world size, whatever recipe it names: the one its launcher states
        world = int(scope.names.get("launch_gpus", 0))
        said = f"the launch starts {world}"
    if not world:
        return ""
    dense = [scope.key(f"model.{name}") for name in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")]
    if UNKNOWN in dense:
        return ""  # no crash is claimed on a layout offlint cannot read (as no OOM without a number)
    tp, pp, cp = (int(v) if v else 1 for v in dense)
    if world % (tp * pp * cp):
        if scope.names.get("defaults") == Defaults.MLM_CLI.value:  # its validate_args asserts first (0.14 on)
            stop = (f"Megatron-LM's validate_args asserts \"world size ({world}) is not divisible by total_model_size "
                    f"(total_model_size={tp * pp * cp})\"")
        else:
            stop = f"megatron-core raises \"world_size ({world}) is not divisible by {tp * pp * cp}\""
        return f"TP{tp} x PP{pp} x CP{cp} needs a multiple of {tp * pp * cp} GPUs, and {said}: {stop}"
    ep, etp = scope.key("model.expert_model_parallel_size"), scope.key("model.expert_tensor_parallel_size")
    if UNKNOWN in (ep, etp):
        return ""
    ep = int(ep) if ep else 1
    # TP's value or 1: a world size that 1 x EP x PP does not divide, TP x EP x PP does not divide either
    etp = _fewest_etp(etp, ep, tp, scope)
    if world % (etp * ep * pp):
        return (f"the expert layout ETP{etp} x EP{ep} x PP{pp} needs a multiple of {etp * ep * pp} GPUs, and {said}: "
                f"megatron-core raises \"world_size ({world}) is not divisible by "
                f"expert_tensor_model_pipeline_parallel size ({etp * ep * pp})\"")
    return ""


def _fewest_etp(etp, ep: int, tp: int, scope: Scope) -> int:
    """The expert TP that needs the fewest GPUs: the one set; else, with EP > 1, 1 where the tree's Bridge defaults it
    so (since July 2026) or the tree has no Bridge of its own (it may), TP's where its Bridge does not
    (bridge_checks.EXPERT_TP_DEFAULT: megatron-core takes TP's value); else TP's."""
    if etp:
        return int(etp)
    return tp if ep <= 1 or scope.key(EXPERT_TP_DEFAULT) == NO_DEFAULT else 1


@_needs_scope
def batch_division(scope: Scope) -> object:
    """Why megatron-core's micro-batch calculator refuses the recipe's batch sizes, in its words; "" when it does
    not, or offlint does not judge it. Bridge's initialize (and Megatron-LM's) builds a
    ConstantNumMicroBatchesCalculator (num_microbatches_calculator.py) with DP = world / (TP x PP x CP): it asserts
    "global batch size (G) is not divisible by micro batch size (M) times data parallel size (D)", or with
    decrease_batch_size_if_needed rounds G down to a multiple of M x D and asserts "number of microbatches should
    be at least 1". Judged where the world is known from the recipe: at the GPU count its name gives (as OFL216: a
    launch's world size is its own), and where even the fewest GPUs its layout tiles (an unset ETP: 1, as Bridge
    takes it with EP > 1, the fewer) leave more data-parallel ranks than the global batch has micro-batches: then
    no scale runs it. Not with a batch-size ramp-up or schedule (another calculator); "" when a value it needs is
    unknown or the global batch size is unset (megatron-core then takes M x D). Not for Bridge's performance
    recipes (`perf_recipes/`): the performance launcher that runs them rescales the global batch size with the
    data-parallel size of the launch (scripts/performance/utils/overrides.py, set_post_overrides)."""
    if scope.names.get("unit_kind") != "recipe" or "/perf_recipes/" in "/" + str(scope.names.get("unit_path", "")):
        return ""
    names = ("global_batch_size", "micro_batch_size", "rampup_batch_size", "step_batch_size_schedule",
             "decrease_batch_size_if_needed")
    gbs, mbs, rampup, schedule, decrease = (scope.key(f"train.{name}") for name in names)
    sizes = [scope.key(f"model.{name}") for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                     "context_parallel_size", "expert_model_parallel_size",
                                                     "expert_tensor_parallel_size")]
    if UNKNOWN in (gbs, mbs, rampup, schedule, decrease, *sizes) or rampup or schedule:
        return ""

    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if not (whole(gbs) and whole(mbs)) or not all(v is None or whole(v) for v in sizes):
        return ""
    tp, pp, cp, ep = (v or 1 for v in sizes[:4])
    etp = _fewest_etp(sizes[4], ep, tp, scope)
    dense = tp * pp * cp
    world = gpus_in_name(str(scope.names.get("unit_name", "")))
    where = " when training starts"
    check = scope.key(EVAL_BATCH_CHECK)  # (the tree's ConfigContainer.validate, before the calculator is built)
    if isinstance(check, str) and check:  # (the reader does not follow `validation`: the clause says "where")
        where += (f"; Megatron Bridge's ConfigContainer.validate ({check}) makes the same division of the evaluation "
                  f"batch sizes and, where those are left unset (they then default to these), stops the job first")
    if world and world % dense == 0 and not world % (etp * ep * pp):  # (OFL216 reports a layout that does not)
        dp = world // dense
        if not decrease and gbs % (mbs * dp):
            return (f"global batch size {gbs} with micro batch size {mbs} on the {world} GPUs the recipe name gives "
                    f"(TP{tp} x PP{pp} x CP{cp}: DP{dp}): megatron-core asserts \"global batch size ({gbs}) is not "
                    f"divisible by micro batch size ({mbs}) times data parallel size ({dp})\"" + where)
        if gbs < mbs * dp:
            return (f"global batch size {gbs} with micro batch size {mbs} on the {world} GPUs the recipe name gives "
                    f"(TP{tp} x PP{pp} x CP{cp}: DP{dp}) is less than one micro-batch per data-parallel rank: "
                    f"decrease_batch_size_if_needed rounds it to 0, and megatron-core asserts \"number of "
                    f"microbatches should be at least 1, got 0.\"" + where)
        return ""
    fewest = Parallelism(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp).min_world_size()
    dp = fewest // dense
    if gbs < mbs * dp:
        return (f"global batch size {gbs} with micro batch size {mbs} is less than one micro-batch for each of the "
                f"{dp} data-parallel ranks of the fewest GPUs the layout runs on ({fewest}: TP{tp} x PP{pp} x CP{cp}"
                + (_expert_layout(ep, etp, sizes[4], scope.key(EXPERT_TP_DEFAULT) != NO_DEFAULT) if ep > 1 else "")
                + "), so no GPU count runs it: megatron-core asserts "
                + (f"\"number of microbatches should be at least 1, got 0.\"" if decrease else
                   f"\"global batch size ({gbs}) is not divisible by micro batch size ({mbs}) times data parallel "
                   f"size ({dp})\"") + where)
    return ""


def _expert_layout(ep: int, etp: int, given, bridge_default: bool) -> str:
    """The experts' part of a layout as OFL217 names it; an expert TP the recipe leaves unset says whose it is (Bridge's
    1 under expert parallelism, or TP's, as megatron-core takes it: _fewest_etp): "128: TP4 x PP1 x CP1, EP32" had
    left the reader to guess the 4."""
    if given:
        return f", ETP{etp} x EP{ep}"
    return f", ETP{etp} x EP{ep} (expert TP unset: {'Bridge' if bridge_default else 'TP'}'s {etp})"


@_needs_scope
def pipeline_split_refusal(scope: Scope) -> object:
    """Why megatron-core refuses to split the decoder's layers over the pipeline stages, in its words; "" when it
    does not, or when offlint does not judge the split. Only the even split is judged: no custom
    `pipeline_model_parallel_layout` and no first/last-stage layer counts (their own checks are not read here),
    and not a hybrid model (its stages come from its layer pattern). Then TransformerBlock's
    get_num_layers_to_build asserts that the layers, plus one each for an embedding or loss counted in the split,
    divide by PP (transformer_block.py in 0.16.1 and 0.19.2: in plain words in 0.16, naming the values from 0.17;
    TransformerConfig.__post_init__ raises first for the counted cases), and that each rank's layers divide by a
    virtual pipeline size (a VPP offlint cannot read claims nothing). "" when a value it needs is unknown: no crash is claimed on a split offlint cannot read.
    Unknown where the sizes are known on each path of a branch (a OneOf: a launch that gives
    `--pipeline-model-parallel-size 16` on one alternative of an `if` only): the engine judges each path."""
    pp, layers = scope.key("model.pipeline_model_parallel_size"), scope.key("model.num_layers")
    others = [scope.key(f"model.{name}") for name in (
        "pipeline_model_parallel_layout", "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
        "hybrid_layer_pattern", "hybrid_override_pattern")]
    counted = [scope.key(f"model.account_for_{part}_in_pipeline_split") for part in ("embedding", "loss")]
    if UNKNOWN in (pp, layers, *others, *counted) or any(v not in (None, "") for v in others):
        unknown = [v for v in scope.read if v.state == "unknown"]
        by_path = unknown and all(isinstance(v.value, OneOf) and v.key in (
            "model.pipeline_model_parallel_size", "model.num_layers") for v in unknown)
        return UNKNOWN if by_path and not any(v not in (None, "", UNKNOWN) for v in others) else ""
    if not isinstance(pp, int) or not isinstance(layers, int) or isinstance(pp, bool) or pp <= 1 or layers <= 0:
        return ""
    total = layers + sum(1 for v in counted if v)
    extra = f" plus {total - layers} for the embedding/loss counted in the split" if total != layers else ""
    if total % pp == 0:
        vpp, per = scope.key("model.virtual_pipeline_model_parallel_size"), total // pp
        if not _whole(vpp) or vpp <= 1 or per % vpp == 0:
            return ""
        return (f"{layers} layers{extra} over PP{pp} are {per} per rank, which do not split into VPP{vpp} virtual "
                f"stages: megatron-core's TransformerBlock asserts \"num_layers_per_pipeline_rank {per} should be "
                f"divisible by vp_size {vpp}\" when it builds the model")
    first_check = _mlm_pipeline_check(scope)
    if first_check:
        return f"{layers} layers{extra} do not divide over PP{pp}: {first_check}"
    # (0.16 writes a plain text; from 0.17 an f-string with `=` names the values)
    said = "num_layers should be divisible by pipeline_model_parallel_size" if scope.version < parse_version(
        "0.17") else f"num_layers={total} should be divisible by config.pipeline_model_parallel_size={pp}"
    return (f"{layers} layers{extra} do not divide over PP{pp}: megatron-core's TransformerBlock asserts "
            f"\"{said}\" when it builds the model")


def _mlm_pipeline_check(scope: Scope) -> str:
    """For a Megatron-LM launch, the check that refuses layers not dividing over PP before the model is built:
    validate_args asserts it when the job starts (megatron/training/arguments.py, the same from 0.16.1 to
    d98e8a6), unless the virtual stages come from `--num-virtual-stages-per-pipeline-rank` (then only
    TransformerBlock's check is left); "" for another unit."""
    if scope.names.get("defaults") != Defaults.MLM_CLI.value or scope.version < parse_version("0.16"):
        return ""
    vpp = scope.lookup("model.virtual_pipeline_model_parallel_size").assignment
    if vpp is not None and not vpp.text.startswith("--num-layers-per-virtual-pipeline-stage"):
        return ""
    text = "number of layers of the model must be divisible pipeline model parallel size" if vpp is not None \
        else "Number of layers should be divisible by the pipeline-model-parallel size"
    return f"Megatron-LM's validate_args asserts \"{text}\" when the job starts"


@_needs_scope
def uneven_split_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the unit's first/last-stage layer counts (`num_layers_in_first_pipeline_stage`,
    `num_layers_in_last_pipeline_stage`), in its words; "" when it accepts them. TransformerConfig.__post_init__
    (the same code in 0.16.1 and 0.20.0, "Uneven PP") refuses them beside an embedding or loss counted in the split,
    then takes each set count (positive, divisible by a set VPP) and its stage off the layers and PP, and asserts
    that middle layers and middle stages come together, divide, and divide by VPP per rank. Not judged with a
    custom layout (OFL221's) or for hybrid models (their layer pattern decides), and "" when a value it needs is
    unknown. A Bridge launch or override file is judged unless its command line changes PP or VP without setting
    every count it keeps: Bridge's runner then drops counts that no longer fit (`sync_model_pipeline_layout`,
    scripts/training/recipe_runner.py)."""
    names = ("pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "num_layers",
             "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
             "pipeline_model_parallel_layout", "hybrid_layer_pattern", "hybrid_override_pattern",
             "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
    pp, vpp, layers, first, last, layout, hybrid, override, embedding, loss = (
        scope.key(f"model.{name}") for name in names)
    if UNKNOWN in (pp, vpp, layers, first, last, layout, hybrid, override, embedding, loss):
        return ""
    if (first is None and last is None) or layout not in (None, "") or hybrid not in (None, "") or \
            override not in (None, ""):
        return ""

    if not _whole(pp) or not _whole(layers) or not all(v is None or _whole(v) for v in (vpp, first, last)):
        return ""
    if scope.names.get("unit_kind") in ("yaml", "command") and scope.names.get("defaults") != "mlm-cli":
        counts = [f"model.num_layers_in_{part}_pipeline_stage" for part, v in (("first", first), ("last", last))
                  if v is not None]
        if any(_by_command_line(scope, key) for key in _TOPOLOGY) and \
                not all(_by_command_line(scope, key) for key in counts):
            return ""
    where = " when it builds the config"
    if embedding or loss:
        return ("num_layers_in_first/last_pipeline_stage with an embedding or loss counted in the split: "
                "megatron-core's TransformerConfig raises \"num_layers_in_first_pipeline_stage and "
                "num_layers_in_last_pipeline_stage cannot beset at the same time with "
                "account_for_embedding_in_pipeline_splitand account_for_loss_in_pipeline_split\"" + where)
    middle_layers, middle_stages = layers, pp
    for part, count in (("first", first), ("last", last)):
        if count is None:
            continue
        if count <= 0:
            return (f"num_layers_in_{part}_pipeline_stage={count}: megatron-core's TransformerConfig raises "
                    f"\"num_layers_in_{part}_pipeline_stage must be larger than 0\"" + where)
        if vpp is not None and count % vpp:
            return (f"num_layers_in_{part}_pipeline_stage={count} with VPP{vpp}: megatron-core's TransformerConfig "
                    f"raises \"number of layers at {part} stage: {count}must be divisible by virtual pipelineparallel "
                    f"degree {vpp}\"" + where)
        middle_layers, middle_stages = middle_layers - count, middle_stages - 1
    counts = ", ".join(f"num_layers_in_{part}_pipeline_stage={v}" for part, v in (("first", first), ("last", last))
                       if v is not None)
    if bool(middle_layers) != bool(middle_stages):
        return (f"{counts} with PP{pp} and {layers} layers leave {middle_layers} layers for {middle_stages} middle "
                f"stages: megatron-core's TransformerConfig raises \"Mismatch: {middle_layers} middle layers "
                f"remaining but {middle_stages} middle PP stages available.\"" + where)
    if middle_stages and middle_layers % middle_stages:
        return (f"{counts} with PP{pp} and {layers} layers leave {middle_layers} layers for {middle_stages} middle "
                f"stages: megatron-core's TransformerConfig raises \"number of layers at middle stage: "
                f"{middle_layers} must be divisible bythe middle pipeline model parallel size {middle_stages}\""
                + where)
    if middle_stages and vpp is not None and (middle_layers // middle_stages) % vpp:
        per_rank = middle_layers // middle_stages
        return (f"{counts} with PP{pp}, VPP{vpp} and {layers} layers leave {per_rank} layers per middle rank: "
                f"megatron-core's TransformerConfig raises \"number of layers on each middle pipeline rank:{per_rank} "
                f"must be divisible by virtualpipeline parallel degree {vpp}\"" + where)
    return ""


# What Bridge's training runner rebuilds a recipe's pipeline split after (recipe_runner.sync_model_pipeline_layout)
_TOPOLOGY = ("model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size")


def _by_command_line(scope: Scope, key: str) -> bool:
    """Whether `key`'s effective value is written by a Hydra override on the unit's command line."""
    scope.key(key)
    written = scope.lookup(key).assignment
    return written is not None and written.source is Source.HYDRA


@_needs_scope
def pipeline_layout_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the unit's custom pipeline layout (`pipeline_model_parallel_layout`), in its words;
    "" when it accepts it. TransformerConfig.__post_init__ raises when the layout comes with first/last-stage counts
    or a split that counts the embedding or loss, then parses it (PipelineParallelLayerLayout) and checks it against
    PP, VPP, num_layers and mtp_num_layers (validate_layer_layout; offlint/pipeline_layout.py mirrors both). Not
    judged for hybrid models (their layer pattern decides), and "" when a value it needs is unknown or the layout
    is not one offlint reads: no crash is claimed on a layout offlint cannot read. Judged where the layout reaches
    megatron-core as written: Megatron-LM's flags, plain megatron-core programs and Megatron Bridge's recipe
    functions; in a Bridge launch or override file only a layout it writes itself: Bridge's training runner
    builds a recipe-owned layout again after PP/VP overrides on the command line, but keeps one the command line
    sets (`sync_model_pipeline_layout`, scripts/training/recipe_runner.py), as its performance overrides do for
    DeepSeek-V3 and Kimi K2; a YAML file's layout stands unless the command line changes PP or VP."""
    if scope.names.get("defaults") != "mlm-cli" and scope.names.get("framework") != "megatron-core" and \
            scope.names.get("unit_kind") != "recipe":
        if scope.names.get("unit_kind") not in ("yaml", "command"):
            return ""
        scope.key("model.pipeline_model_parallel_layout")
        written = scope.lookup("model.pipeline_model_parallel_layout").assignment
        if written is None or written.source not in (Source.HYDRA, Source.YAML):
            return ""  # the recipe's layout (or a performance script's): the runner may build it again
        if written.source is Source.YAML and any(_by_command_line(scope, key) for key in _TOPOLOGY):
            return ""  # a YAML file's layout with PP/VP from the command line: rebuilt from a recipe's builder

    layout = scope.key("model.pipeline_model_parallel_layout")
    if layout is UNKNOWN or layout in (None, ""):
        return ""
    pp, vpp, layers, mtp = (scope.key(f"model.{name}") for name in (
        "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "num_layers", "mtp_num_layers"))
    hybrid = [scope.key(f"model.{name}") for name in ("hybrid_layer_pattern", "hybrid_override_pattern")]
    others = [scope.key(f"model.{name}") for name in ("num_layers_in_first_pipeline_stage",
                                                      "num_layers_in_last_pipeline_stage",
                                                      "account_for_embedding_in_pipeline_split",
                                                      "account_for_loss_in_pipeline_split")]
    if not _whole(pp) or pp < 1 or vpp is UNKNOWN or not (vpp is None or _whole(vpp)):
        return ""
    if any(v is not UNKNOWN and v for v in others):
        return ("pipeline_model_parallel_layout is set with first/last-stage layer counts or an embedding/loss "
                "counted in the split: megatron-core's TransformerConfig raises \"ValueError: "
                "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments.\"")
    # The counts need the sizes, and no hybrid layer pattern; the stages against PP and VPP, the embedding and the
    # loss are refused whatever they are (or the other pipeline arguments, if set, raise first).
    counts = _whole(layers) and (mtp is None or _whole(mtp)) and all(v in (None, "") for v in hybrid) and \
        UNKNOWN not in others
    stages = pipeline_layout.stages_of(layout)
    why, counted = pipeline_layout.refusal(stages, pp, vpp, layers, mtp, counts) if stages is not None else ("", "")
    if not why:
        return ""
    sizes = [f"PP{pp}"] + [f"VPP{vpp}"] * (vpp is not None) + [f"num_layers={layers}"] * _whole(layers) + \
        [f"mtp_num_layers={mtp}"] * (mtp is not UNKNOWN)
    return (f"pipeline_model_parallel_layout {fmt(layout)} with {', '.join(sizes)}" + (f" ({counted})" if counted
            else "") + f": megatron-core's TransformerConfig asserts \"{why}\" when it builds the config")


# ---- full recompute beside per-layer CUDA graphs (OFL225) -------------------------------------------------------

_FULL_RECOMPUTE_GRAPHS = "full recompute is only supported with full iteration CUDA graph."


@_needs_scope
def graph_full_recompute_refusal(scope: Scope) -> object:
    """OFL225: why megatron-core refuses a recompute granularity other than selective beside CUDA graphs that are
    not one full-iteration graph ("" when it does not, UNKNOWN when offlint cannot tell). TransformerConfig's
    graph block (`if self.cuda_graph_impl != "none":`) asserts it after the deprecated switches became an
    implementation (enable_cuda_graph: local, external_cuda_graph: transformer_engine): before 0.18 unless
    `cuda_graph_scope == [full_iteration]`; from 0.18 unless the implementation is "full_iteration", which a
    "full_iteration" module name (the deprecated spelling) turns it into (cuda_graph_config.py)."""
    granularity = scope.key("model.recompute_granularity")
    if granularity is not UNKNOWN and granularity != "full":
        return ""  # (selective has checks of its own, OFL226; another string is refused first, as RC-1: OFL001's)
    impl = _graph_impl(scope)
    if UNKNOWN in (impl, granularity):
        return UNKNOWN
    if impl == "none" and scope.version < parse_version("0.18"):
        return ""
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules")
                          if scope.version >= parse_version("0.18") else None)
    if names is UNKNOWN:
        return UNKNOWN
    if scope.version < parse_version("0.18"):
        if names == ["full_iteration"]:
            return ""
        where = f"cuda_graph_scope={names!r}" if names else "no full_iteration cuda_graph_scope"
    else:
        if impl == "full_iteration" or (impl in ("none", "local") and "full_iteration" in names):
            return ""
        if impl == "none":
            return ""
        if "full_iteration" in names:
            return UNKNOWN  # (Transformer Engine graphs named full_iteration: refused, in other words, first)
        where = f"cuda_graph_impl={impl!r}"
    return (f"recompute_granularity={granularity!r} with per-layer CUDA graphs ({where}): megatron-core's "
            f"TransformerConfig asserts \"{_FULL_RECOMPUTE_GRAPHS}\" when it builds the config")


def _graph_impl(scope: Scope) -> object:
    """The CUDA-graph implementation TransformerConfig's graph block checks under: `cuda_graph_impl`, or the
    deprecated switch that becomes one (enable_cuda_graph: "local", external_cuda_graph: "transformer_engine",
    CG-3); "none", or UNKNOWN."""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN or impl not in (None, "none"):
        return impl
    legacy = [scope.key("model.enable_cuda_graph"), scope.key("model.external_cuda_graph")]
    if True not in legacy and UNKNOWN in legacy:
        return UNKNOWN
    return "local" if legacy[0] is True else "transformer_engine" if legacy[1] is True else "none"


# ---- selective recompute beside CUDA graphs (OFL226) ------------------------------------------------------------

# TransformerConfig's messages, in the order it checks them (every release from 0.16.1; the MoE router one ends
# where its author's string does: the text after it is a separate statement, not part of the message).
_GRAPHED_MOE_ROUTER = "moe recompute is not supported with moe_router CUDA graph with: "
_GRAPHED_ATTENTION = "attention dropout is not supported with graphed attention recomputation."
_GRAPHED_MLP = "hidden dropout is not supported with graphed MLP/MoE recomputation."
_GRAPHED_JITTER = "moe_input_jitter_eps is not supported with graphed moe recomputation."


def _set_dropout(scope: Scope, key: str) -> object:
    """A dropout TransformerConfig's graph block compares with 0: its value where the unit sets it, or where the
    model config is megatron-core's own (a Megatron-LM launch, whose flag defaults to 0.1, or a plain
    TransformerConfig: its default, 0.1); None
    for a Bridge model the unit leaves it unset on, whose provider class's default offlint does not read (most
    providers set 0.0; megatron-core's 0.1 would be a guess)."""
    own = scope.names.get("framework") == "megatron-core" or scope.names.get("defaults") == Defaults.MLM_CLI.value
    if scope.lookup(key).assignment is None and not own:
        return None
    return scope.key(key)


@_needs_scope
def graph_selective_recompute_refusal(scope: Scope) -> object:
    """OFL226: why megatron-core refuses selective recompute beside CUDA graphs ("" when it does not, UNKNOWN when
    offlint cannot tell). Inside its graph block TransformerConfig asserts that a recomputed module is not covered
    by a graph it cannot replay: Transformer Engine graphs of the MoE router with "moe" recomputed; and, where the
    graph covers the module (the whole layer: a full-iteration graph, or per-layer graphs naming no module; else
    the module's own graph), recomputed attention with attention dropout, a recomputed MLP or MoE with hidden
    dropout, and a recomputed MoE with input jitter. Before 0.18 the whole layer is an empty `cuda_graph_scope` or
    one holding full_iteration; from 0.18 the "full_iteration" implementation or empty `cuda_graph_modules` (the
    deprecated module name "full_iteration" selects that implementation)."""
    granularity = scope.key("model.recompute_granularity")
    if granularity is not UNKNOWN and granularity != "selective":
        return ""
    impl = _graph_impl(scope)
    if impl == "none" and scope.version < parse_version("0.18"):
        return ""
    modern = scope.version >= parse_version("0.18")
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules")
                          if modern else None)
    recomputed = scope.key("model.recompute_modules")
    if UNKNOWN in (granularity, impl, names, recomputed):
        return UNKNOWN
    if modern and impl in ("none", "local") and "full_iteration" in names:
        impl, names = "full_iteration", [n for n in names if n != "full_iteration"]  # (the migration, TC-CG-migrate)
    if impl == "none":
        return ""
    # (unset, TransformerConfig.__post_init__ makes it ["core_attn"] before its graph block, in every release)
    recomputed = as_list(recomputed) if recomputed is not None else ["core_attn"]
    whole = impl == "full_iteration" or not names if modern else not names or "full_iteration" in names
    field = "cuda_graph_modules" if modern else "cuda_graph_scope"
    where = f"cuda_graph_impl={impl!r}, " + (f"{field}={names!r}" if names else "graphing whole layers")
    open_check = False
    experts = scope.key("model.num_moe_experts")
    if "moe_router" in names and not (_whole(experts) and experts > 1):
        return ""  # (a dense model, or one offlint cannot size: "moe cuda graph is only supported for MoE." first)
    if impl == "transformer_engine" and "moe" in recomputed and "moe_router" in names:
        return _selective_refusal("'moe' recomputed", where, _GRAPHED_MOE_ROUTER + "--cuda-graph-impl "
                                  "transformer_engine.")  # (as the assert prints it, its second string dropped)
    for dropout, module, graph, message in (("model.attention_dropout", "core_attn", "attn", _GRAPHED_ATTENTION),
                                            ("model.hidden_dropout", "mlp", "mlp", _GRAPHED_MLP),
                                            ("model.hidden_dropout", "moe", "moe", _GRAPHED_MLP),
                                            ("model.moe_input_jitter_eps", "moe", "moe", _GRAPHED_JITTER)):
        if module not in recomputed or not (whole or graph in names):
            continue
        value = _set_dropout(scope, dropout) if dropout != "model.moe_input_jitter_eps" else scope.key(dropout)
        if value is UNKNOWN:
            open_check = True
        elif value is not None and (dropout == "model.moe_input_jitter_eps" or value != 0):
            return _selective_refusal(f"{module!r} recomputed with {dropout.split('.')[1]}={value!r}", where,
                                      message)
    return UNKNOWN if open_check else ""


def _selective_refusal(what: str, where: str, message: str) -> str:
    return (f"selective recompute of {what} beside CUDA graphs ({where}): megatron-core's TransformerConfig "
            f"asserts \"{message}\" when it builds the config")


# ---- EP overlap on a model without a schedule plan (OFL219) -----------------------------------------------------


def _ep_overlap_on(scope: Scope) -> object:
    """(True, the key that turns it on) when Bridge runs with overlap_moe_expert_parallel_comm, (False, "") when it
    does not, UNKNOWN (_comm_overlap_field)."""
    return _comm_overlap_field(scope, "overlap_moe_expert_parallel_comm")


_PACKING = "Energon packing (dataset.packing_buffer_size), which turns EP overlap off,"


def _energon_packing(scope: Scope) -> object:
    """Whether Bridge turns EP overlap and delayed weight-gradient compute off for native Energon packing
    (ConfigContainer._disable_native_energon_packing_moe_overlap, before comm_overlap's setup): the dataset sets
    packing_buffer_size. True, False or UNKNOWN."""
    if scope.lookup("dataset.packing_buffer_size").assignment is None:
        return False
    held = scope.key("dataset.packing_buffer_size")
    return UNKNOWN if held is UNKNOWN else held is not None


def _comm_overlap_field(scope: Scope, name: str) -> object:
    """(True, the key that turns it on) when the model runs with the switch `name` on, (False, "") when not,
    UNKNOWN. Bridge's CommOverlapConfig.setup applies the section's value to the model, False where the section
    leaves it None (training/comm_overlap.py: _get_model_comm_overlap_cfgs, _override_user_cfgs, _apply_cfgs); a
    container without the section (it reads None, so does its required tp_comm_overlap) keeps the model's, as do
    Megatron-LM's flags and a plain megatron-core program (one that builds megatron-core's own config classes)."""
    if scope.names.get("framework") != "megatron-core" and scope.names.get("defaults") != "mlm-cli":
        section = scope.key(f"comm_overlap.{name}")
        if section is UNKNOWN:
            return UNKNOWN
        if section is not None:
            return (True, f"comm_overlap.{name}") if section is True else (False, "")
        present = scope.key("comm_overlap.tp_comm_overlap")
        if present is UNKNOWN:
            return UNKNOWN
        if present is not None:
            return False, ""
    model = scope.key(f"model.{name}")
    if model is UNKNOWN:
        return UNKNOWN
    return (True, f"model.{name}") if model is True else (False, "")


# ---- what megatron-core refuses beside EP overlap (OFL224) ------------------------------------------------------

# The asserts of TransformerConfig.__post_init__'s `if self.overlap_moe_expert_parallel_comm:` block, in its order,
# as each megatron-core release has them (read in the release tags of Megatron-LM: core_v0.16.1 to core_v0.19.0 and
# main d98e8a6): what each says; _ep_overlap_asserts gives the versions each is in.
_EP_VPP = "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when " \
    "pipeline_model_parallel_size > 1"
_EP_SIZE = "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"
_EP_DISPATCHER = "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"
_EP_FULL = "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
_EP_METHOD = "disable recomputation method when enabling overlap_moe_expert_parallel_comm"
_EP_LAYERS = "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm"
_EP_MOE = "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"  # from 0.17
_EP_HALF = "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"
_EP_SHARED = "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"
_EP_MTP_OLD = "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."  # before 0.19
_EP_MTP = "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."  # from 0.19: 0 allowed
_EP_MTP_PP = "Pipeline model parallel size must be larger than 1 when enabling overlap_moe_expert_parallel_comm " \
    "with MTP layer."  # before 0.18
_EP_NCCLEP = "overlap_moe_expert_parallel_comm with ncclep does not support offloading 'expert_fc1': it forces " \
    "expert FC1 to save the raw bf16 input, which the overlap path eagerly frees."  # from 0.19
_EP_GRAPH = "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"
_EP_DELAY = "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"


def _float16_model(scope: Scope) -> object:
    """Whether the model runs in bf16 or fp16 when TransformerConfig checks it: Bridge's `mixed_precision` (a
    recipe name, built as the tree builds it: named_precision, or a MixedPrecisionConfig) is copied over the
    model's bf16/fp16 before comm_overlap's setup and finalize (runtime_config_update); else the model's own."""
    mixed = scope.key("mixed_precision")
    if mixed is UNKNOWN:
        return UNKNOWN
    if mixed is not None:
        built = configured(scope.lookup)[0] if isinstance(mixed, str) else scope.lookup("mixed_precision")
        fields = getattr(built.value, "fields", None) if built.state == "known" else None
        if not isinstance(fields, dict):
            return UNKNOWN
        half = [fields.get(name, False) for name in ("bf16", "fp16")]
        if any(isinstance(v, Unknown) for v in half):
            return UNKNOWN
        return any(v is True for v in half)
    half = [scope.key("model.bf16"), scope.key("model.fp16")]
    if any(v is True for v in half):
        return True
    return UNKNOWN if UNKNOWN in half else False


def _ep_overlap_asserts(scope: Scope) -> list[tuple[str, object]]:
    """(what megatron-core asserts, whether the unit fails it: True, False or UNKNOWN), in __post_init__'s order,
    for the unit's version: each assert is a function of a few model fields. Where the version is only a guess (the
    tree's pin not checked out), an assert the newest release does not fail the unit on is not certain: the tree may
    run that one (Bridge 067f987 at the installed 0.16.1: 5 OFL224 errors on 0.16's CUDA-graph assert, which its pin
    does not make)."""
    found = _ep_overlap_asserts_at(scope, scope.version)
    if not scope.version.guessed:
        return found
    newest = dict(_ep_overlap_asserts_at(scope, keys.newest_known()))
    return [(text, UNKNOWN if verdict is True and newest.get(text) is not True else verdict)
            for text, verdict in found]


def _ep_overlap_asserts_at(scope: Scope, v: Version) -> list[tuple[str, object]]:
    k = scope.key
    checks: list[tuple[str, Callable[[], object]]] = [
        (_EP_VPP, lambda: _no_virtual_stages(scope)),
        (_EP_SIZE, lambda: _fails(k("model.expert_model_parallel_size"), lambda ep: not (_whole(ep) and ep > 1))),
        (_EP_DISPATCHER, lambda: _fails(k("model.moe_token_dispatcher_type"),
                                        lambda d: d not in ("alltoall", "flex"))),
        (_EP_FULL, lambda: _fails(k("model.recompute_granularity"), lambda g: g == "full")),
        (_EP_METHOD, lambda: _fails(k("model.recompute_method"), lambda m: m is not None)),
        (_EP_LAYERS, lambda: _fails(k("model.recompute_num_layers"), lambda n: n is not None)),
    ]
    if v >= parse_version("0.17"):  # moe_layer_recompute is rewritten to 'moe' recomputed before this block
        checks.append((_EP_MOE, lambda: _either(
            _fails(k("model.recompute_modules"), lambda m: "moe" in (m if isinstance(m, str) else as_list(m))),
            _fails(k("model.moe_layer_recompute"), lambda r: r is True))))
    checks += [(_EP_HALF, lambda: _negated(_float16_model(scope))),
               (_EP_SHARED, lambda: _fails(k("model.moe_shared_expert_overlap"), lambda s: bool(s)))]
    if v >= parse_version("0.19"):
        checks.append((_EP_MTP, lambda: _fails(k("model.mtp_num_layers"), lambda n: n not in (None, 0, 1))))
        checks.append((_EP_NCCLEP, lambda: _fails(k("model.moe_token_dispatcher_type"), lambda d: d == "flex")
                       and _fails(k("model.moe_flex_dispatcher_backend"), lambda b: b == "ncclep")
                       and _fails(k("model.fine_grained_activation_offloading"), lambda f: bool(f))
                       and _fails(k("model.offload_modules"), lambda m: "expert_fc1" in as_list(m))))
    else:
        checks.append((_EP_MTP_OLD, lambda: _fails(k("model.mtp_num_layers"), lambda n: n not in (None, 1))))
        if v < parse_version("0.18"):
            checks.append((_EP_MTP_PP, lambda: _fails(k("model.mtp_num_layers"), lambda n: n == 1)
                           and _fails(k("model.pipeline_model_parallel_size"), lambda pp: not (_whole(pp) and pp > 1))))
    checks.append((_EP_GRAPH, lambda: _graph_refused(scope, v)))
    return [(text, test()) for text, test in checks]


def _no_virtual_stages(scope: Scope) -> object:
    """A pipeline (PP > 1) without virtual stages when the overlap block runs: a custom layout set before it gives
    the virtual size itself (its stages over PP, when more than one: TransformerConfig's layout block, as
    Megatron-LM's validate_args does for its flag)."""
    pp = scope.key("model.pipeline_model_parallel_size")
    if pp is UNKNOWN or not (_whole(pp) and pp > 1):
        return UNKNOWN if pp is UNKNOWN else False
    vpp = scope.key("model.virtual_pipeline_model_parallel_size")
    if vpp is UNKNOWN or vpp is not None:
        return UNKNOWN if vpp is UNKNOWN else False
    layout = scope.key("model.pipeline_model_parallel_layout")
    if layout is UNKNOWN or layout in (None, ""):
        return UNKNOWN if layout is UNKNOWN else True
    stages = pipeline_layout.stages_of(layout)
    if stages is None or len(stages) % pp:
        return UNKNOWN  # a layout offlint cannot read, or one the layout block refuses first (OFL221)
    return len(stages) // pp == 1


def _fails(value, refused: Callable[[object], bool]) -> object:
    """Kleene: UNKNOWN for an unknown value, else whether the assert refuses it."""
    if value is UNKNOWN:
        return UNKNOWN
    try:
        return bool(refused(value))
    except TypeError:  # a value of a type megatron-core's own assert would raise on first
        return UNKNOWN


def _either(a, b) -> object:
    """Kleene `or`."""
    if a is True or b is True:
        return True
    return UNKNOWN if UNKNOWN in (a, b) else False


def _negated(value) -> object:
    return UNKNOWN if value is UNKNOWN else not value


def _graph_refused(scope: Scope, version: Version) -> object:
    """The CUDA graph assert: before 0.18 any graph but Transformer Engine's without moe/mlp in cuda_graph_scope;
    from 0.18 (the graph API split into full_iteration, inference scope and per-layer modules) only Transformer
    Engine graphs of moe or mlp, as the modules megatron-core ends up with (graph_modules)."""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN:
        return UNKNOWN
    if impl in (None, "none"):
        return False
    if version < parse_version("0.18"):
        if impl != "transformer_engine":
            return True
        names = scope.key("model.cuda_graph_scope")
        return UNKNOWN if names is UNKNOWN else bool({"moe", "mlp"} & set(_graph_names(names)))
    if impl != "transformer_engine":
        return False
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules"))
    return UNKNOWN if names is UNKNOWN else bool({"moe", "mlp"} & set(names))


@_needs_scope
def ep_overlap_refusal(scope: Scope) -> object:
    """OFL224: what megatron-core's TransformerConfig asserts about a run with MoE expert-parallel communication
    overlap ("" when nothing, UNKNOWN when offlint cannot tell): the first assert of its overlap block the unit
    certainly fails (an earlier one offlint cannot decide is named), or delay_wgrad_compute without the overlap.
    A unit whose overlap switch is unknown gives no finding, not even with --strict (most units fail some overlap
    assert by default). Megatron Bridge's comm_overlap setup makes most of the same checks first, in its own
    words (training/comm_overlap.py); megatron-core makes them again when the model config is finalized."""
    return _ep_overlap(scope)[0]


@_needs_scope
def ep_overlap_open(scope: Scope) -> str:
    """For a "possible" OFL224 (ep_overlap_refusal UNKNOWN): what is open, and what megatron-core asserts."""
    return _ep_overlap(scope)[1]


def _ep_overlap(scope: Scope) -> tuple[object, str]:
    """(ep_overlap_refusal's answer, what is open when it is UNKNOWN)."""
    on = _ep_overlap_on(scope)
    if on is UNKNOWN:  # most units fail an overlap assert by default (EP 1, the allgather dispatcher): no claim
        return "", ""
    packing = _energon_packing(scope)
    if packing is True:
        return "", ""
    if not on[0]:
        delay = _comm_overlap_field(scope, "delay_wgrad_compute")
        if delay is UNKNOWN or not delay[0]:
            return "", ""
        if packing is UNKNOWN:
            return UNKNOWN, f"{delay[1]}=True without the overlap, and whether {_PACKING} is used is not known"
        return (f"{delay[1]}=True{_written_at(scope, delay[1])} without overlap_moe_expert_parallel_comm: "
                f"megatron-core's TransformerConfig asserts \"{_EP_DELAY}\""), ""
    results = _ep_overlap_asserts(scope)
    texts = [text for text, _ in results]
    failed = [text for text, verdict in results if verdict is True]
    undecided = [text for text, verdict in results if verdict is UNKNOWN]
    head = f"{on[1]}=True{_written_at(scope, on[1])}"
    if packing is UNKNOWN and failed:
        return UNKNOWN, f"{head}, and whether {_PACKING} is used is not known; with it not, \"{failed[0]}\""
    if not failed:
        if not undecided:
            return "", ""
        return UNKNOWN, (f"{head}, and whether megatron-core's overlap asserts hold is not known: "
                         f"\"{undecided[0]}\"" + (f" and {len(undecided) - 1} more" if len(undecided) > 1 else ""))
    earlier = [text for text in undecided if texts.index(text) < texts.index(failed[0])]
    return (f"{head}: megatron-core's TransformerConfig asserts \"{failed[0]}\"" +
            (f" (and {len(failed) - 1} more of its overlap asserts fail)" if len(failed) > 1 else "") +
            (f"; an earlier assert offlint cannot decide may raise first: \"{earlier[0]}\"" if earlier else "")), ""


def _written_at(scope: Scope, key: str) -> str:
    where = scope.lookup(key).assignment
    return f" at {where.location.path}:{where.location.line}" if where is not None else ""


@_needs_scope
def bridge_local_graph_refusal(scope: Scope) -> object:
    """OFL223: why the tree's Megatron Bridge refuses a local CUDA graph in validate() ("" when it does not, or the
    tree's Bridge makes no such check: sources/bridge_checks.py): `cuda_graph_impl="local"` with neither a
    full-iteration scope (in cuda_graph_modules or cuda_graph_scope) nor, naming no module, a layer or block
    inference graph scope (utils/cuda_graph.py validate_cuda_graph_configuration, from Bridge 7e8662c66)."""
    check = scope.key(LOCAL_GRAPH_CHECK)
    if not isinstance(check, str) or not check:
        return ""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN:
        return UNKNOWN
    if impl != "local":
        return ""
    modules, graph_scope = scope.key("model.cuda_graph_modules"), scope.key("model.cuda_graph_scope")
    if UNKNOWN in (modules, graph_scope):
        return UNKNOWN
    names = _graph_names(modules) + _graph_names(graph_scope)
    if "full_iteration" in names:
        return ""
    layered = [n for n in dict.fromkeys(names) if n not in ("full_iteration_inference", "full")]
    if not layered:
        inference = scope.key("model.inference_cuda_graph_scope")
        if inference is UNKNOWN:
            return UNKNOWN
        if {"layer", "block"} & set(_graph_names(inference)):
            return ""
    what = f"the per-layer modules {layered}" if layered else "no full-iteration scope"
    return (f"cuda_graph_impl='local' with {what}: Megatron Bridge's ConfigContainer.validate ({check}) raises "
            f"\"ValueError: Megatron Bridge supports model.cuda_graph_impl=\"local\" only for full-iteration CUDA "
            f"graphs\" before the model is built")


@_needs_scope
def ep_overlap_schedule_refusal(scope: Scope) -> object:
    """What megatron-core raises at the first training forward when EP overlap runs a model whose class (read from
    the provider's provide() in the tree: sources/bridge_schedule.py) defines no build_schedule_plan; "" when it
    does not apply (no provider read, EP overlap off, a layout TransformerConfig refuses first: EP 1, or a pipeline
    without virtual stages), UNKNOWN when offlint cannot tell and one of the two is established (EP overlap on, or a
    model class known to lack the method): a recipe where both are unknown stays quiet even with --strict."""
    return _ep_overlap_schedule(scope)[0]


@_needs_scope
def ep_overlap_schedule_open(scope: Scope) -> str:
    """For a "possible" OFL219 (ep_overlap_schedule_refusal UNKNOWN): what is open, and what follows if it goes the
    wrong way."""
    return _ep_overlap_schedule(scope)[1]


_PLAN_RAISES = ("the first forward raises \"RuntimeError: _get_attr_wrapped_model couldn't find attribute "
                "build_schedule_plan\"")


def _ep_overlap_schedule(scope: Scope) -> tuple[object, str]:
    """(ep_overlap_schedule_refusal's answer, what is open when it is UNKNOWN)."""
    built = scope.lookup(SCHEDULE_KEY)
    if built.assignment is None:  # not a model section built from a provider offlint read
        return "", ""
    on = _ep_overlap_on(scope)
    if on is not UNKNOWN and not on[0]:
        return "", ""
    if on is UNKNOWN and not (isinstance(built.value, str) and built.value):
        return "", ""  # "possible" only for a model class known to lack the method
    lacking = f"{built.value}, which defines no build_schedule_plan" if isinstance(built.value, str) else ""
    experts = scope.key("model.num_moe_experts")
    if experts is not UNKNOWN and not experts:
        # EP overlap needs EP > 1, and TransformerConfig raises "num_moe_experts must be non None to use
        # expert-parallel" for that first (NVIDIA-NeMo/DFM's Flux and Wan: no MoE, both left to user overrides)
        return "", ""
    packing = _energon_packing(scope)
    if packing is not False:
        return (UNKNOWN, f"whether {_PACKING} is used is not known") if packing is UNKNOWN else ("", "")
    pp, vpp = scope.key("model.pipeline_model_parallel_size"), scope.key("model.virtual_pipeline_model_parallel_size")
    ep = scope.key("model.expert_model_parallel_size")
    if UNKNOWN in (pp, vpp, ep):
        return UNKNOWN, ("the pipeline or expert-parallel size is not known (with EP 1, or a pipeline without virtual "
                         "stages, TransformerConfig refuses EP overlap first)")
    if not isinstance(ep, int) or ep <= 1 or (isinstance(pp, int) and pp > 1 and vpp is None):
        return "", ""
    model = scope.key(SCHEDULE_KEY)
    if on is UNKNOWN:
        return UNKNOWN, (f"whether EP overlap (comm_overlap.overlap_moe_expert_parallel_comm) is on is not known; "
                         f"{lacking}, so with it on {_PLAN_RAISES}")
    where = scope.lookup(on[1]).assignment
    at = f" at {where.location.path}:{where.location.line}" if where is not None else " by default"
    if model is UNKNOWN or not model:
        return ("", "") if model == "" else (UNKNOWN, f"{on[1]}=True{at}, and whether the model class defines "
                                                      f"build_schedule_plan is not known")
    return (f"{on[1]}=True{at} sends every training forward through megatron-core's combined 1F1B schedule, which "
            f"asks the model for build_schedule_plan (combined_1f1b.py get_attr_wrapped_model); {model}, which "
            f"defines none, so {_PLAN_RAISES}"), ""


# ---- Transformer Engine's low-precision recipes on the unit's GPU (OFL117) --------------------------------------


def _te_verdict(scope: Scope):
    """te_support's verdict, once per scope; the keys that decided it are recorded as read."""
    if not hasattr(scope, "_te_verdict"):
        # (the project's directory as verdict takes it, str(Path.cwd()), without building a Path for each unit)
        found = te_support.verdict(scope.lookup, os.getcwd(), gpu=str(scope.names.get("unit_gpu", "")),
                                   gpu_from=str(scope.names.get("unit_gpu_from", "")))
        for key in found.keys:
            scope.key(key)
        scope._te_verdict = found
    return scope._te_verdict


@_needs_scope
def low_precision_refused(scope: Scope) -> object:
    """Whether Transformer Engine refuses the unit's FP8/FP4 recipe on the GPU the unit names (or
    [tool.offlint] gpu): unknown when the recipe is; False when the GPU is not known."""
    refused = _te_verdict(scope).refused
    return UNKNOWN if refused is None else refused


@_needs_scope
def low_precision_refusal(scope: Scope) -> str:
    """What the recipe is, where it is set, what Transformer Engine raises and what runs instead."""
    return _te_verdict(scope).message or "?"


FUNCTIONS: dict[str, Callable] = {
    "distributed_optimizer": distributed_optimizer,
    "other_accelerator": other_accelerator,
    "ep_overlap_schedule_refusal": ep_overlap_schedule_refusal,
    "bridge_local_graph_refusal": bridge_local_graph_refusal,
    "ep_overlap_schedule_open": ep_overlap_schedule_open,
    "ep_overlap_refusal": ep_overlap_refusal,
    "graph_full_recompute_refusal": graph_full_recompute_refusal,
    "graph_selective_recompute_refusal": graph_selective_recompute_refusal,
    "ep_overlap_open": ep_overlap_open,
    "version_at_least": version_at_least,
    "checkout_checks": checkout_checks,
    "allowed_offload_modules": allowed_offload_modules,
    "invalid_offload_modules": invalid_offload_modules,
    "as_list": as_list,
    "contains": contains,
    "overlap": overlap,
    "is_str": is_str,
    "is_list": is_list,
    "is_number": is_number,
    "lower": lower,
    "startswith": startswith,
    "fmt": fmt,
    "known": known,
    "is_known_key": is_known_key,
    "suggestion": suggestion,
    "graph_modules": graph_modules,
    "graph_modules_written": graph_modules_written,
    "written_known": written_known,
    "overrides": overrides,
    "graph_scope_names": graph_scope_names,
    "is_fp32": is_fp32,
    "is_default": is_default,
    "is_written": is_written,
    "listing": listing,
    "len": len,
    "str": str,
    "sorted": sorted,
    "bool": bool,
    "round": round,
    "estimated_peak_gib": estimated_peak_gib,
    "model_state_pp1_gib": model_state_pp1_gib,
    "usable_gib": usable_gib,
    "gpu_name": gpu_name,
    "gpu_count": gpu_count,
    "largest_memory_parts": largest_memory_parts,
    "memory_savings": memory_savings,
    "predicted_oom": predicted_oom,
    "pipeline_split_refusal": pipeline_split_refusal,
    "uneven_split_refusal": uneven_split_refusal,
    "graph_module_refusal": graph_module_refusal,
    "pipeline_layout_refusal": pipeline_layout_refusal,
    "recompute_module_refusal": recompute_module_refusal,
    "layout_division": layout_division,
    "batch_division": batch_division,
    "oom_floor_gib": oom_floor_gib,
    "oom_message": oom_message,
    "oom_at_risk": oom_at_risk,
    "at_risk_margin_gib": at_risk_margin_gib,
    "at_risk_fix": at_risk_fix,
    "low_precision_refused": low_precision_refused,
    "low_precision_refusal": low_precision_refusal,
}


def unknown_reason(value: Value) -> str:
    if isinstance(value.value, Unknown):
        return value.value.reason
    return "unknown"
