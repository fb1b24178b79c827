"""What an entry script's code sets in its own process before Megatron validates the parsed arguments: attributes of
the arguments (`args.x = ...`: Write) and environment variables (`os.environ[...] = ...`: EnvironmentWrite), and
whether it starts Ray; from one walk of the code its top level reaches (WritesReach). The questions themselves are
entry_scripts' (`namespace_writes`, `environment_writes`, `ray_driver`).

Read with `ast` only; nothing is imported or run.
"""

from __future__ import annotations

import ast
import itertools
from typing import Callable, NamedTuple

from offlint.sources.entry_modules import EXITS, MAX_FUNCTIONS, ModuleReach, ScriptModule, calls_in, dotted_module
from offlint.sources.entry_training import TRAINING_CALLS, TRAINING_PREFIXES
from offlint.sources.python_syntax import _call_name, _nodes, main_block

# Megatron's calls that validate the parsed arguments (training runs them too)
_CHECKING_CALLS = TRAINING_CALLS | {"initialize_megatron", "validate_args"}


class Write(NamedTuple):
    """An attribute the entry script's code sets on the parsed arguments, where it first does, and its value where
    offlint knows what the run has (`UNREAD` otherwise). `choices`, where the value is UNREAD but each place sets a
    literal: (path, line, literal) for each; a run has one of them, or the command line's value where it reaches
    none (LoongForge's validator turns fine-grained offloading off with `if args.x: args.x = False`)."""

    attribute: str
    path: str
    line: int
    value: object
    choices: tuple[tuple[str, int, object], ...] = ()


UNREAD = object()  # Write.value: what the run's code sets is not known


class EnvironmentWrite(NamedTuple):
    """An environment variable the entry script's code sets in its own process (`os.environ["NAME"] = "v"`), where
    it first does, its value where offlint knows what the run has (`UNREAD` otherwise), and whether only where the
    launch left it unset (`os.environ.setdefault`)."""

    name: str
    path: str
    line: int
    value: object
    only_if_unset: bool


class WritesReach(ModuleReach):
    """Walks the code an entry script's top level reaches, noting what it sets and whether each place is certain."""

    def __init__(self, launch_path, tree_text, parsed: dict | None = None) -> None:
        super().__init__(launch_path, tree_text, parsed)
        self.checking: dict[tuple[ScriptModule, str], bool] = {}  # a function of the tree -> _checks_arguments

    def module_writes(self, path: str) -> tuple[Write, ...]:
        # attribute -> its places -> (the literal set there or UNREAD, whether every run sets it there)
        sites: dict[str, dict[tuple[str, int], tuple[object, bool]]] = {}
        for module, node, certain in self._reached(path):
            for attribute in _stored_attributes(node):
                places = sites.setdefault(attribute, {})
                _, before = places.get((module.path, node.lineno), (UNREAD, False))
                # (walked as certain, then not)
                places[(module.path, node.lineno)] = (_literal(node), certain or before)
        writes = []
        for attribute, places in sites.items():
            first, (literal, certain) = next(iter(places.items()))
            known = literal if len(places) == 1 and certain else UNREAD
            choices = () if known is not UNREAD or any(held is UNREAD for held, _ in places.values()) else \
                tuple((*where, held) for where, (held, _) in places.items())
            writes.append(Write(attribute, *first, known, choices))
        return tuple(writes)

    def module_run_facts(self, path: str) -> tuple[str, tuple[EnvironmentWrite, ...]]:
        """(ray_driver's answer, environment_writes' answer), from one walk of the code the script reaches."""
        ray = ""
        sites: dict[tuple[str, bool], dict[tuple[str, int], object]] = {}  # (name, setdefault) -> places -> value
        for module, node, certain in self._reached(path):
            if not ray and isinstance(node, ast.Call) and _starts_ray(module, node.func):
                ray = f"{module.path}:{node.lineno}"
            for name, value, only_if_unset in _environment_stores(node):
                places = sites.setdefault((name, only_if_unset), {})
                if places.get((module.path, node.lineno), UNREAD) is UNREAD:
                    places[(module.path, node.lineno)] = value if certain else UNREAD
        return ray, tuple(EnvironmentWrite(name, *next(iter(places)),
                                           next(iter(places.values())) if len(places) == 1 else UNREAD, only_if_unset)
                          for (name, only_if_unset), places in sites.items())

    def _reached(self, path: str) -> list[tuple[ScriptModule, ast.AST, bool]]:
        """(module, node, certain) for every node of the module's top level and of the tree's functions its calls
        reach, each function once (twice where a call every run makes reaches it after another did), at most
        `MAX_FUNCTIONS` of them. `certain`: every run of the script reaches the node (`_certain_nodes`). Kept with
        the parsed modules: module_writes and module_run_facts each walk a script's reach from the same start (a
        reader of their own), and a launch of a Megatron-LM style script asks both."""
        key = ("reached", path)
        if key not in self.modules:
            self.modules[key] = list(self._walk(path))
        return self.modules[key]

    def _walk(self, path: str):
        module = self._module(path)
        bodies = [] if module is None else [(module, module.top_level, True)]
        followed: set[tuple[str, str, bool]] = set()
        while bodies:
            module, body, certain = bodies.pop()
            for node, sure in _certain_nodes(body, certain, lambda call: self._checks_arguments(module, call)):
                yield module, node, sure
                if not isinstance(node, ast.Call):
                    continue
                callees = self._callees(module, node.func)
                sure = sure and len(callees) == 1  # (a name imported on several branches: the arguments choose)
                for callee in callees:
                    key = (callee[0].path, callee[1], sure)
                    if key not in followed and len(followed) < MAX_FUNCTIONS:
                        followed.add(key)
                        bodies.append((callee[0], callee[0].functions[callee[1]].body, sure))

    def _checks_arguments(self, module: ScriptModule, call: ast.Call) -> bool:
        """Whether `call` runs Megatron's validation of the parsed arguments (`initialize_megatron`, `validate_args`,
        or training, which runs them), itself or in the tree's functions it calls: a value the code sets after it is
        not the one Megatron checked (Megatron-LM's `export.py` sets `args.use_cpu_initialization` after
        `initialize_megatron`). Open past `MAX_FUNCTIONS` functions: then it may."""
        name = _call_name(call.func).rsplit(".", 1)[-1]
        if name in _CHECKING_CALLS or name.startswith(TRAINING_PREFIXES):
            return True
        for callee in self._callees(module, call.func):
            if callee not in self.checking:
                if len(self.checking) >= MAX_FUNCTIONS:
                    return True
                self.checking[callee] = False  # (recursion)
                body = callee[0].functions[callee[1]].body
                self.checking[callee] = any(self._checks_arguments(callee[0], inner) for inner in calls_in(body))
            if self.checking[callee]:
                return True
        return False


def _starts_ray(module: ScriptModule, func: ast.expr) -> bool:
    """Whether a call of `func` is Ray's `init` (`ray.init`, `import ray as r; r.init`, `from ray import init`)."""
    if isinstance(func, ast.Attribute):
        return func.attr == "init" and dotted_module(func.value, module.module_imports) == "ray"
    return isinstance(func, ast.Name) and module.imports.get(func.id) == ("ray", "init")


def _certain_nodes(body: list[ast.stmt], certain: bool, checks: Callable[[ast.Call], bool]):
    """`_nodes(body)` as (node, certain): whether a run of `body` that is itself certain reaches the node before
    Megatron validates the arguments. Those are its statements that are no compound statement, up to the first one
    that may leave it early (a `return`, a `raise` or an exit inside a compound statement, or one of its own) or
    makes a call that `checks`, and the call each of them makes as its whole value (`main()`,
    `args = parse_args()`, `return _defaults(args)`) with the calls among that call's arguments; a `__main__` block
    counts as the top level it is in (the script is run as a program)."""
    ends = False
    for stmt in body:
        checking = {id(call) for call in calls_in([stmt]) if checks(call)} if certain and not ends else set()
        if certain and not ends and main_block(stmt):
            yield from ((node, False) for node in _nodes([stmt.test]))
            yield from _certain_nodes(stmt.body, True, checks)
            yield from _certain_nodes(stmt.orelse, False, checks)
        else:
            sure = certain and not ends and isinstance(stmt, _SIMPLE)
            calls = _calls_before_checks(getattr(stmt, "value", None), checking) if sure else set()
            for node in _nodes([stmt]):
                # (`args.x = 1` is certain unless its own value validates first)
                yield node, sure and (id(node) in calls or node is stmt and not checking)
        ends = ends or not certain or bool(checking) or isinstance(stmt, (ast.Return, ast.Raise)) or \
            not isinstance(stmt, _SIMPLE) and _may_leave(stmt)


_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Import, ast.ImportFrom, ast.Pass,
           ast.Global, ast.Nonlocal, ast.Delete, ast.Assert)


def _evaluated_calls(node: ast.expr | None):
    """A call and the calls among its arguments, which Python evaluates before it (`train(parse_args())`)."""
    if isinstance(node, ast.Call):
        yield node
        for argument in (*node.args, *(k.value for k in node.keywords)):
            yield from _evaluated_calls(argument.value if isinstance(argument, ast.Starred) else argument)


def _calls_before_checks(value: ast.expr | None, checking: set[int]) -> set[int]:
    """The ids of the `_evaluated_calls` of a statement's value that run before Megatron validates the arguments:
    those none of whose arguments makes a call in `checking` (`defaults(initialize_megatron())` runs `defaults`
    after it)."""
    calls = list(_evaluated_calls(value))
    return {id(call) for call in calls
            if not any(id(inner) in checking for inner in itertools.islice(_evaluated_calls(call), 1, None))}


def _may_leave(stmt: ast.stmt) -> bool:
    """Whether a compound statement may leave its function (or the program) early."""
    return any(isinstance(node, (ast.Return, ast.Raise))
               or isinstance(node, ast.Call) and _call_name(node.func) in EXITS for node in _nodes([stmt]))


def _literal(node: ast.AST) -> object:
    """The constant an assignment sets (`args.x = True`, `args.x: int = 4`, `-1`), else UNREAD."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant) \
            and type(value.operand.value) in (int, float):
        return -value.operand.value
    if isinstance(value, ast.Constant) and type(value.value) in (bool, int, float, str):
        return value.value
    return UNREAD


def _stored_attributes(node: ast.AST) -> list[str]:
    """The attributes a statement or call sets on the parsed arguments: `args.x = ...`, `args.x += ...`, `args.x,
    args.y = ...`, `setattr(args, "x", ...)`, on a name Megatron's convention gives them (`args = get_args()`, a
    parameter `args`, `megatron_args`). Another object's attribute is not one: Megatron Bridge's MIMO example sets
    `cfg.recompute_granularity = "full"` on a TransformerConfig it builds, which is not the command line's."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3 and \
                _holds_arguments(node.args[0]) and isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str):
            return [node.args[1].value]
        return []
    if isinstance(node, ast.Assign):
        targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    return [t.attr for t in targets if isinstance(t, ast.Attribute) and _holds_arguments(t.value)]


_ENVIRONMENT_CALLS = frozenset({"setdefault", "putenv", "_set_allocator_settings"})  # (_environment_stores)


def _environment_stores(node: ast.AST) -> list[tuple[str, object, bool]]:
    """(variable, its literal value or UNREAD, only where unset) for what a statement or call sets in the process's
    environment (see environment_writes)."""
    def text(value: ast.expr | None) -> object:
        return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else UNREAD

    kind = type(node)
    if kind is ast.Assign:
        return [(target.slice.value, text(node.value), False) for target in node.targets
                if type(target) is ast.Subscript and _call_name(target.value) in ("os.environ", "environ")
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)]
    if kind is not ast.Call or type(node.func) is not ast.Attribute or node.keywords or \
            node.func.attr not in _ENVIRONMENT_CALLS:
        return []
    name, args = _call_name(node.func), node.args
    if name.endswith("_set_allocator_settings") and len(args) == 1:  # torch.cuda.memory._set_allocator_settings
        return [("PYTORCH_CUDA_ALLOC_CONF", text(args[0]), False)]
    if name in ("os.environ.setdefault", "environ.setdefault", "os.putenv") and len(args) == 2 and \
            isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return [(args[0].value, text(args[1]), name != "os.putenv")]
    return []


def _holds_arguments(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and (node.id == "args" or node.id.endswith("_args"))
