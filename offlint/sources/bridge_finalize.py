"""What a Megatron Bridge model provider's `finalize()` does to its config, read from the linted tree's own classes
(never imported or run).

Bridge runs `cfg.model.finalize()` in ConfigContainer.validate when the run starts, after every override (recipe,
YAML file, command line), and a provider may derive fields there: Bridge 067f987's Qwen3VLMoEModelProvider turns
`sequence_parallel` on whenever TP > 1 (qwen_vl/qwen3_vl_provider.py:302-307), over a recipe that set it False;
its TransformerConfig turns it off at TP 1 and gives `pipeline_dtype` the `params_dtype` when PP > 1
(models/transformer_config.py:165-176). What each provider does therefore lives in the tree and changes with it.

Here the provider class's `finalize` (its own, else its first in-tree base's, `super().finalize()` followed into
the next base that has one) becomes a small program of plain data, kept on the unit under `KEY` (not a field), and
resolve runs it over the unit's resolved values after every layer (`run`). What is read:
- `self.F = EXPR`, `if/elif/else`, a local `name = EXPR`, `if ...: return` (the rest runs on the other path);
- EXPR: literals, `self.F`, `getattr(self, "F", default)` (read as `self.F`: an attribute that is no field, such
  as the `_enable_in_batch_packing` ConfigContainer.validate may set, is unknown), locals, `and`/`or`/`not`,
  comparisons, + - * // %.
A write of a value the program cannot read (a helper's result, a method call; `+=`, a write in a loop or a `try`)
is left out: the field keeps what the unit gave it, as offlint had it before it read finalize. This is what keeps
HybridModelProvider's `self.num_layers = get_hybrid_total_layer_count(...)` (asserted equal to a num_layers already
set) from making every hybrid recipe's layer count unknown; the estimate reads the pattern itself. A value the
program can read from fields offlint does not know is unknown, and so is every field a branch on such a value may
write differently. Calls that may change the config themselves (`_set_moe_expert_tensor_parallel_default(self)`,
megatron-core's `__post_init__`, which offlint models on its own) are not followed.

A field the unit does not set and megatron-core's config does not have (HybridModelProvider's
`hybrid_override_pattern`, where the provider comes from a Hugging Face config) reads as the provider class's own
default when that is a literal (the nearest class of the chain that gives one, as Python looks it up).

The program's grammar (tuples, so that the cache stores it as any value):
  program: (("defaults", ((field, literal), ...)), step, ...)
  step: ("set", field, expr, where, text) | ("let", name, expr) | ("if", expr, steps, steps, where, text)
  expr: ("lit", value) | ("self", field) | ("local", name) | ("not", expr)
        | ("and", expr, expr, ...) | ("or", expr, expr, ...) | ("cmp", op, expr, expr) | ("bin", op, expr, expr)
        | ("?", text)
`where` is "path:LINE (Class.finalize)".
"""

from __future__ import annotations

import ast
import operator

from offlint.sources.bridge_schedule import ProviderClasses, registered_bridge
from offlint.types import Unknown

KEY = "model.finalize_program"  # not a field: the provider's finalize() as offlint reads it
_MAX_DEPTH = 8
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
            ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def program(project, path: str, name: str) -> tuple | Unknown:
    """The finalize program of the provider class `name` as the file `path` names it (() when it has none)."""
    if project is None:
        return Unknown("the provider's source is not read")
    return project.call_result(("bridge-finalize", path, name), lambda: _Finalize(project).of_class(path, name))


def bridge_program(project, architecture: str, importer: str) -> tuple | Unknown:
    """The same for the provider that the tree's bridge registered for a Hugging Face architecture builds."""
    bridge = registered_bridge(project, architecture, importer)
    if isinstance(bridge, Unknown):
        return bridge
    return project.call_result(("bridge-finalize-bridge", *bridge), lambda: _Finalize(project).of_bridge(*bridge))


class _Finalize(ProviderClasses):
    def of_class(self, path: str, name: str) -> tuple | Unknown:
        found = self.find(path, name)
        if found is None or found[0] != "tree":
            return Unknown(f"the provider {name} is not in the tree")
        return self._program(found)

    def of_bridge(self, path: str, name: str) -> tuple | Unknown:
        provider = self.bridge_provider_class(path, name)
        return provider if isinstance(provider, Unknown) else self._program(provider)

    def _program(self, found) -> tuple:
        steps = self._finalize(found, 0)
        if not steps:
            return ()
        read = sorted({expr[1] for expr in _exprs(steps) if expr[0] == "self"})
        defaults = tuple((field, value) for field in read
                         if (value := self._literal_default(found, field, 0)) is not _NO_DEFAULT)
        return (("defaults", defaults), *steps)

    def _literal_default(self, found, field: str, depth: int):
        """The literal default the class (or its nearest in-tree base that declares the field) gives `field`."""
        if found is None or found[0] != "tree" or depth > _MAX_DEPTH:
            return _NO_DEFAULT
        _, path, cls = found
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == field:
                held = node.value
                literal = isinstance(held, ast.Constant) and (held.value is None or isinstance(
                    held.value, (bool, int, float, str)))
                return held.value if literal else _NO_DEFAULT
        for base in cls.bases:
            got = self._literal_default(self.expression(path, base), field, depth + 1)
            if got is not _NO_DEFAULT:
                return got
        return _NO_DEFAULT

    def _finalize(self, found, depth: int) -> tuple:
        """The steps of `found`'s finalize, or of its first in-tree base that defines one; () when none does."""
        method = self._method(found, "finalize", depth) if depth <= _MAX_DEPTH else None
        if method is None:
            return ()
        owner, owner_found, function = method
        return _Block(self, owner, owner_found, depth).steps(function.body)

    def after(self, owner_found, depth: int) -> tuple:
        """What `super().finalize()` in the class `owner_found` runs: the next in-tree base's finalize (the first
        base that has one, as `_method` looks: single inheritance, as Bridge's providers). A base outside the tree
        (megatron-core's, whose __post_init__ offlint models on its own) adds nothing."""
        _, path, cls = owner_found
        for base in cls.bases:
            got = self.expression(path, base)
            if got is not None and got[0] == "tree":
                steps = self._finalize(got, depth + 1)
                if steps:
                    return steps
        return ()


class _Block:
    """One finalize method's statements as steps."""

    def __init__(self, reader: _Finalize, owner: str, owner_found, depth: int):
        self.reader, self.owner, self.found, self.depth = reader, owner, owner_found, depth
        self.path = owner_found[1]
        self.locals: set[str] = set()

    def where(self, node: ast.AST) -> str:
        return f"{self.path}:{node.lineno} ({self.owner}.finalize)"

    def steps(self, body: list[ast.stmt]) -> tuple:
        out: list = []
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Return):
                break
            if isinstance(statement, ast.Raise):
                break  # the run stops here: what follows never runs
            if isinstance(statement, ast.If) and statement.body and isinstance(statement.body[-1], ast.Return):
                # `if cond: ...; return`: the rest of the method runs on the other path only
                rest = body[index + 1:]
                out.append(("if", self.expr(statement.test), self.steps(statement.body),
                            self.steps([*statement.orelse, *rest]), self.where(statement), ast.unparse(statement.test)))
                break
            if isinstance(statement, ast.If):
                then, orelse = self.steps(statement.body), self.steps(statement.orelse)
                if then or orelse:
                    out.append(("if", self.expr(statement.test), then, orelse, self.where(statement),
                                ast.unparse(statement.test)))
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                out.extend(self._assign(statement))
            elif isinstance(statement, ast.Expr) and self._calls_super(statement.value):
                out.extend(self.reader.after(self.found, self.depth))
            elif isinstance(statement, ast.With):
                out.extend(self.steps(statement.body))
            else:  # anything else (a loop, a `try`, `+=`, a call) is left out; a local it binds is no longer read
                self.locals.difference_update(_bound_names(statement))
        return tuple(out)

    def _assign(self, statement) -> list:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if statement.value is None:
            return []
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            value = self.expr(statement.value)
            self.locals.add(targets[0].id)
            return [("let", targets[0].id, value)]
        return [("set", target.attr, self.expr(statement.value), self.where(statement), ast.unparse(statement.value))
                for target in targets if _is_self_attribute(target)]

    def _calls_super(self, call: ast.expr) -> bool:
        """`super().finalize()`, `super(Cls, self).finalize()` or `Base.finalize(self)`."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "finalize"):
            return False
        held = call.func.value
        if isinstance(held, ast.Call) and isinstance(held.func, ast.Name) and held.func.id == "super":
            return True
        return isinstance(held, ast.Name) and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and \
            call.args[0].id == "self"

    def expr(self, node: ast.expr) -> tuple:
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str))):
            return ("lit", node.value)
        if isinstance(node, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in node.elts):
            return ("lit", tuple(e.value for e in node.elts))
        if _is_self_attribute(node):
            return ("self", node.attr)
        if isinstance(node, ast.Name) and node.id in self.locals:
            return ("local", node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                len(node.args) in (2, 3) and isinstance(node.args[0], ast.Name) and node.args[0].id == "self" and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and not node.keywords:
            return ("self", node.args[1].value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            return ("and" if isinstance(node.op, ast.And) else "or", *(self.expr(v) for v in node.values))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return ("cmp", _COMPARE[type(node.ops[0])], self.expr(node.left), self.expr(node.comparators[0]))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            return ("bin", _ARITHMETIC[type(node.op)], self.expr(node.left), self.expr(node.right))
        return ("?", ast.unparse(node))


_NO_DEFAULT = object()


def _exprs(steps: tuple):
    """Every expression of the steps, nested ones too."""
    todo = [expr for step in steps for expr in _step_exprs(step)]
    while todo:
        expr = todo.pop()
        yield expr
        if expr[0] in ("not", "and", "or"):
            todo.extend(expr[1:])
        elif expr[0] in ("cmp", "bin"):
            todo.extend(expr[2:])


def _step_exprs(step: tuple) -> list:
    if step[0] == "set":
        return [step[2]]
    if step[0] == "let":
        return [step[2]]
    if step[0] == "if":
        return [step[1], *(e for inner in (*step[2], *step[3]) for e in _step_exprs(inner))]
    return []


def _is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _bound_names(statement: ast.stmt) -> set[str]:
    """The local names a statement left out of the program may bind (a loop variable, `n += 1`, `except E as e`)."""
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def by(where: str) -> str:
    """A step's `where` ("path.py:LINE (Class.finalize)") as a provenance step."""
    at, _, owner = where.rpartition(" (")
    return f"by {owner.rstrip(')')}() at {at} when the run starts"


# ---- running a program (resolve) --------------------------------------------------------------------------------

NOT_SET = object()  # what `read` gives for a field the unit does not set and megatron-core's config does not have
_UNKNOWN = object()  # a value offlint does not know, inside run()
_UNREAD = object()  # a value of code the program does not read (a helper's result): its write is left out
_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne, "is": operator.is_, "is not": operator.is_not,
        "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}
_BIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}


def run(program: tuple, read) -> dict[str, tuple[object, str, str]]:
    """The fields the program writes: field -> (value or Unknown, where, text), where `read(field)` gives a field's
    value before finalize (an Unknown when offlint does not know it, NOT_SET for a field the unit does not set and
    megatron-core's config does not have: the provider's literal default then). Only writes that change the value
    are returned."""
    defaults = dict(program[0][1]) if program and program[0][0] == "defaults" else {}

    def before(field: str) -> object:
        value = read(field)
        if value is NOT_SET:
            return defaults.get(field, Unknown(f"`model.{field}` is not known before finalize()"))
        return value

    written: dict[str, tuple[object, str, str]] = {}
    _Run(before, written, {}).steps(program)
    return {field: got for field, got in written.items() if not _same(got[0], before(field))}


def _same(a, b) -> bool:
    return not isinstance(a, Unknown) and not isinstance(b, Unknown) and type(a) is type(b) and a == b


class _Run:
    def __init__(self, read, written: dict, names: dict):
        self.read, self.written, self.names = read, written, names

    def field(self, name: str):
        value = self.written[name][0] if name in self.written else self.read(name)
        return _UNKNOWN if isinstance(value, Unknown) else value

    def steps(self, steps: tuple) -> None:
        for step in steps:
            kind = step[0]
            if kind == "set":
                _, field, expr, where, text = step
                value = self.expr(expr)
                if value is not _UNREAD:
                    self.written[field] = (Unknown(f"{where} sets it to `{text}`, which depends on values offlint "
                                                   f"does not know") if value is _UNKNOWN else value, where, text)
            elif kind == "let":
                self.names[step[1]] = self.expr(step[2])
            elif kind == "if":
                self._branch(step)

    def _branch(self, step: tuple) -> None:
        _, test, then, orelse, where, text = step
        decided = self.expr(test)
        if decided is not _UNKNOWN and decided is not _UNREAD:
            self.steps(then if decided else orelse)
            return
        paths = []
        for branch in (then, orelse):
            run = _Run(self.read, dict(self.written), dict(self.names))
            run.steps(branch)
            paths.append(run)
        changed = {field for run in paths for field, got in run.written.items() if self.written.get(field) is not got}
        for field in changed:
            before = self.written.get(field) or (self.read(field), "", "")
            values = [run.written.get(field, before)[0] for run in paths]
            if _same(values[0], values[1]):
                self.written[field] = paths[0].written.get(field, before)
            else:
                self.written[field] = (Unknown(f"{where} may change it: offlint cannot tell whether `{text}` holds"),
                                       where, "")
        for name in set(paths[0].names) | set(paths[1].names):
            values = [run.names.get(name, _UNREAD) for run in paths]
            self.names[name] = values[0] if values[0] is values[1] or _same(values[0], values[1]) else \
                _UNREAD if _UNREAD in values else _UNKNOWN

    def expr(self, expr: tuple):
        kind = expr[0]
        if kind == "lit":
            return expr[1]
        if kind == "self":
            return self.field(expr[1])
        if kind == "local":
            return self.names.get(expr[1], _UNREAD)
        if kind in ("and", "or"):
            return self._bool(kind, expr[1:])
        if kind not in ("not", "cmp", "bin"):
            return _UNREAD  # ("?", text)
        operands = [self.expr(e) for e in (expr[1:] if kind == "not" else expr[2:])]
        for sentinel in (_UNREAD, _UNKNOWN):
            if any(operand is sentinel for operand in operands):
                return sentinel
        try:
            return (not operands[0]) if kind == "not" else (_CMP if kind == "cmp" else _BIN)[expr[1]](*operands)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return _UNKNOWN  # the run would raise, or compare what offlint holds as text: not a value to decide on

    def _bool(self, kind: str, operands: tuple):
        """Python's `and`/`or`: the value that decides it (an operand known falsy decides an `and` whatever an unknown
        one before it, a truthy one an `or`: its truth is what a test reads), else unread or unknown where such an
        operand would."""
        undecided = None
        for operand in operands:
            value = self.expr(operand)
            if value is _UNREAD or value is _UNKNOWN:
                undecided = _UNREAD if _UNREAD in (value, undecided) else value
            elif (kind == "or") == bool(value):
                return value
        return undecided if undecided is not None else value
