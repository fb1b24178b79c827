"""The environment Megatron Bridge's performance launcher gives a job (`setup_experiment.py` / `run_script.py`).

Until Bridge moved process settings into the recipes (`cfg.env_vars`, 2026-07), the performance scripts built
the job's environment themselves: `utils/executors.py` starts from the `PERF_ENV_VARS` literal, and
`PerfEnvPlugin.setup` (`perf_plugins.py`) adds and removes variables per model family, recipe, GPU, precision
and task (`executor.env_vars["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"`). That logic changed from
commit to commit, so it is read from the linted tree, never hard-coded: the launch's flags are bound through the
tree's `argument_parser.py` (option strings, dests, literal defaults) and the launcher's `PerfEnvPlugin(...)`
call to the plugin's fields, and the methods `setup` calls are run by a small interpreter that knows literals,
names, `self.<field>`, comparisons, `in`, `and`/`or`/`not`, conditional expressions, `if`, `for` over
literals, and `executor.env_vars` item writes, `pop` and `del`. A variable written under a condition it cannot
decide is unknown, and so is every variable when the environment is changed in a way it does not model. The
launcher's variables are exported in the job script, so they beat the shell's.

Nothing is added (the environment stays as the launch command alone gives it) when the tree has no such plugin,
or when its launcher also takes variables from the recipe (`recipe.env_vars`, Bridge from 2026-07 on).
"""

from __future__ import annotations

import ast
import posixpath
import re
from functools import lru_cache
from typing import Callable

from offlint.types import Assignment, Layer, Location, Source, Unknown

LAUNCHERS = ("setup_experiment.py",)  # the scripts that build the executor and its plugins (run_script.py runs
# inside the job, with the environment it was given)
PLUGIN_CLASS = "PerfEnvPlugin"
BASE_ENV = "PERF_ENV_VARS"
MAX_DEPTH = 4  # nested self.<method>() calls followed
MAX_STEPS = 20_000  # statements run per launch: a plugin that needs more is not followed (hostile input stays linear)
_RECIPE_ENV = re.compile(r"(?<!executor)\.env_vars\b")  # recipe.env_vars / cfg.env_vars, not executor.env_vars
_DROPPED = object()  # a variable the launcher removed (the shell's value, if any, stays)


class _Unsupported(Exception):
    """The environment is changed in a way the interpreter does not model: every variable is unknown."""


class _Unknown:
    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()


def script_candidates(launch_file: str, script: str) -> list[str]:
    """Where a script a launch names may lie in the tree, most likely first: relative to the launching file's
    folder or any folder above it (a script run from the repository root), then as written."""
    folder = posixpath.dirname(launch_file)
    candidates = []
    while True:
        candidates.append(posixpath.normpath(posixpath.join(folder, script)))
        if folder in ("", "/", "."):
            break
        folder = posixpath.dirname(folder)
    candidates.append(posixpath.normpath(script))
    return list(dict.fromkeys(candidates))


def add_launcher_env(unit, launch_file: str, read: Callable[[str], str | None]) -> None:
    """Give a launch of the performance launcher (`unit.launch_args`: the script as written, then its arguments)
    the environment that launcher builds, when the tree holds the launcher; `launch_file` is where the command
    is written (the script path is tried relative to its folder and each folder above it)."""
    if not unit.launch_args or posixpath.basename(unit.launch_args[0] or "") not in LAUNCHERS:
        return
    found = next((c for c in script_candidates(launch_file, unit.launch_args[0]) if read(c) is not None), None)
    arguments = list(unit.launch_args[1:])
    layer = launcher_layer(found, arguments, read, unit.location) if found is not None else None
    if layer is None:
        own = flags_layer(found, arguments, read, unit.location) if found is not None else None
        if own is not None:  # the launcher leaves the environment to the recipe, but exports the launch's own
            unit.layers.append(own)
            if "env" in own.base:
                _env_unknown(unit, own.base["env"])
        return
    unit.layers.append(layer)
    if "env" in layer.base:
        _env_unknown(unit, layer.base["env"])
        return
    unit.env_known = True
    unit.default_sections = frozenset(unit.default_sections | {"env"})
    unit.unknown_sections.pop("env", None)


def _env_unknown(unit, why: Unknown) -> None:
    unit.unknown_sections["env"] = why.reason
    unit.default_sections = frozenset(unit.default_sections - {"env"})
    unit.env_known = False


def launcher_layer(script: str, arguments: list[str | None], read: Callable[[str], str | None],
                   where: Location) -> Layer | None:
    """The environment layer of a launch (at `where`) running the performance script at path `script` with
    `arguments` (None: a word offlint could not resolve); `read(path)` gives a file's text or None. None when the
    tree's launcher does not build the environment itself."""
    folder = posixpath.dirname(script)
    plugins_path = posixpath.join(folder, "perf_plugins.py")
    plugins = _parse(read(plugins_path))
    plugin = _class(plugins, PLUGIN_CLASS) if plugins is not None else None
    if plugin is None or not _writes_env(plugin):
        return None
    texts = [read(posixpath.join(folder, name)) for name in
             ("setup_experiment.py", "run_script.py", "run_recipe.py", "utils/executors.py", "utils/utils.py")]
    if any(text and _RECIPE_ENV.search(text) for text in texts):
        return None
    launcher = _parse(read(script))
    if launcher is None or not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                   and n.func.id == PLUGIN_CLASS for n in ast.walk(launcher)):
        return None
    values, given = _flags(_parse(read(posixpath.join(folder, "argument_parser.py"))), arguments)
    fields = _plugin_fields(plugin, launcher, values)
    executors_path = posixpath.join(folder, "utils", "executors.py")
    env = _base_env(_parse(read(executors_path)), executors_path)
    layer = Layer("performance launcher environment", inherited=True)
    try:
        if fields is None:
            raise _Unsupported("the launcher's PerfEnvPlugin(...) call is not one offlint can bind")
        # utils/executors.py: `perf_env.update(custom_env_vars)` before the plugins run
        env.update({name: (value, where) for name, value in _own_env(values, given).items()})
        _Interpreter(plugin, plugins_path, fields).run_method("setup", [UNKNOWN, _Executor()], {}, env, 0)
    except RecursionError:
        return _unknown_layer(layer, env, "nested too deeply to follow")
    except _Unsupported as exc:
        return _unknown_layer(layer, env, str(exc))
    for name, (value, where) in sorted(env.items()):
        if value is _DROPPED:
            continue
        shown = Unknown(f"set by the performance launcher ({posixpath.basename(where.path)}:{where.line}) under a "
                        "condition offlint cannot decide") if value is UNKNOWN else str(value)
        layer.assignments.append(Assignment(f"env.{name}", shown, where, Source.ENV,
                                            "" if value is UNKNOWN else str(value),
                                            (f"by the performance launcher ({posixpath.basename(where.path)})",)))
    return layer


def flags_layer(script: str, arguments: list[str | None], read: Callable[[str], str | None],
                where: Location) -> Layer | None:
    """The variables the launch gives the job with the launcher's own flags (`-E K=V`, `-ce A=1,B=2`), where the
    launcher otherwise leaves the environment to the recipe (Bridge from 2026-07: `custom_env_vars` still go into
    the executor's environment, utils/executors.py); None when it gives none."""
    values, given = _flags(_parse(read(posixpath.join(posixpath.dirname(script), "argument_parser.py"))), arguments)
    try:
        own = _own_env(values, given)
    except _Unsupported as exc:
        own = {}
        unknown = str(exc)
    else:
        unknown = ""
    if not own and not unknown:
        return None
    layer = Layer("performance launch flags environment", inherited=True)
    layer.assignments = [Assignment(f"env.{name}", value, where, Source.ENV, value, ("by the launch's own flags",))
                         for name, value in sorted(own.items())]
    if unknown:
        layer.base = {"env": Unknown(f"the performance launch's environment ({unknown})")}
    return layer


def _own_env(values: dict[str, object], given: set[str]) -> dict[str, str]:
    """The variables the launch's own flags give the job: each given flag whose dest names env and whose value the
    tree's parser type makes a dict (`to_dict`) or pairs (`parse_kv`, appended); the pairs last, as Bridge's
    setup_experiment.py does (`custom_env_vars.update(dict(args.env or []))`). Raises _Unsupported for a flag that
    adds variables (`--env`, `--custom_env_vars`, `--kubeflow_env_list_json`) in a form offlint cannot read; a flag
    that only names the environment (`--dump_env`, store_true) adds none."""
    dicts, pairs = {}, {}
    for dest in sorted(d for d in given if "env" in d):
        value = values.get(dest)
        if isinstance(value, dict):
            dicts.update(value)
        elif isinstance(value, list) and all(isinstance(p, tuple) for p in value):
            pairs.update(value)
        elif dest == "env" or "env_vars" in dest or "env_list" in dest:
            raise _Unsupported(f"the launch adds its own variables with --{dest}")
    return {str(k): str(v) for k, v in {**dicts, **pairs}.items()}


def _unknown_layer(layer: Layer, env: dict, why: str) -> Layer:
    """The launcher changes the environment in a way offlint does not follow: every variable is unknown."""
    layer.assignments = [Assignment(f"env.{name}", Unknown(f"set by the performance launcher ({why})"), where,
                                    Source.ENV, "", ("by the performance launcher",))
                         for name, (_, where) in sorted(env.items())]
    layer.base = {"env": Unknown(f"the performance launcher's environment ({why})")}
    return layer


# ---- reading the tree -------------------------------------------------------------------------------------


@lru_cache(maxsize=16)  # one launcher's files serve every launch of it in the tree
def _parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _class(module: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _writes_env(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "env_vars" and isinstance(n.value, ast.Name)
               and n.value.id == "executor" for n in ast.walk(node))


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _flags(parser: ast.Module | None, arguments: list[str | None]) -> tuple[dict[str, object], set[str]]:
    """argparse dest -> value for the launch (defaults where the flag is not given), and the dests given."""
    values: dict[str, object] = {}
    options: dict[str, tuple[str, str, object]] = {}  # option string -> (dest, action, type name)
    for call in (n for n in ast.walk(parser) if isinstance(n, ast.Call)) if parser is not None else ():
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if not strings:
            continue
        longest = max(strings, key=len)
        dest = _literal(keywords.get("dest")) if "dest" in keywords else longest.lstrip("-").replace("-", "_")
        action = _literal(keywords.get("action")) if "action" in keywords else "store"
        kind = keywords["type"].id if isinstance(keywords.get("type"), ast.Name) else ""
        default = _literal(keywords.get("default")) if "default" in keywords else (
            False if action == "store_true" else True if action == "store_false" else None)
        values.setdefault(str(dest), default)
        for option in strings:
            options[option] = (str(dest), str(action), kind)
    given: set[str] = set()
    i = 0
    while i < len(arguments):
        word = arguments[i] or ""
        name, eq, inline = word.partition("=")
        if name in options:
            dest, action, kind = options[name]
            given.add(dest)
            if action == "store_true":
                values[dest] = True
            elif action == "store_false":
                values[dest] = False
            elif action == "store":
                raw = inline if eq else (arguments[i + 1] if i + 1 < len(arguments) else None)
                i += 0 if eq else 1
                values[dest] = _convert(raw, kind)
            elif action == "append" and kind == "parse_kv":
                raw = inline if eq else (arguments[i + 1] if i + 1 < len(arguments) else None)
                i += 0 if eq else 1
                held = values.get(dest)  # argparse appends to a list default
                values[dest] = (held if isinstance(held, list) else []) + [_convert(raw, kind)]
            else:
                values[dest] = UNKNOWN  # append, count, ...
        i += 1
    return values, given


def _convert(raw: str | None, kind: str) -> object:
    if raw is None:
        return UNKNOWN
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            return UNKNOWN
    if kind == "lower_str":
        return raw.lower()
    if kind == "to_dict":  # the tree's argument_parser.to_dict: "A=1,B=2"
        items = [item.split("=") for item in raw.split(",")]
        return dict(items) if all(len(item) == 2 for item in items) else UNKNOWN
    if kind == "parse_kv":  # the tree's argument_parser.parse_kv: "KEY=VALUE", the value as written
        key, eq, value = raw.partition("=")
        return (key, value) if eq and key else UNKNOWN
    if kind in ("", "str"):
        return raw
    return UNKNOWN


def _plugin_fields(plugin: ast.ClassDef, launcher: ast.Module, given: dict[str, object]) -> dict[str, object] | None:
    """The plugin's fields as the launcher constructs it: class defaults, then the `PerfEnvPlugin(...)` call's
    keywords, each `args.X` or a parameter that the launcher's own call binds to `args.X`."""
    fields: dict[str, object] = {}
    for statement in plugin.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            fields[statement.target.id] = _literal(statement.value) if statement.value is not None else UNKNOWN
    calls = [n for n in ast.walk(launcher) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == PLUGIN_CLASS]
    if len(calls) != 1:
        return None
    passed = {k.arg: k.value.attr for call in ast.walk(launcher) if isinstance(call, ast.Call)
              for k in call.keywords if k.arg and isinstance(k.value, ast.Attribute)
              and isinstance(k.value.value, ast.Name) and k.value.value.id == "args"}
    for keyword in calls[0].keywords:
        if keyword.arg is None:
            return None
        node = keyword.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
            fields[keyword.arg] = given.get(node.attr, UNKNOWN)
        elif isinstance(node, ast.Name) and passed.get(node.id, node.id) in given:
            fields[keyword.arg] = given[passed.get(node.id, node.id)]
        else:
            fields[keyword.arg] = _literal(node) if isinstance(node, ast.Constant) else UNKNOWN
    return fields


def _base_env(executors: ast.Module | None, path: str) -> dict[str, tuple]:
    """PERF_ENV_VARS as the module writes it; a variable the module changes elsewhere is unknown."""
    env: dict[str, tuple] = {}
    if executors is None:
        return env
    for statement in executors.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == BASE_ENV for t in targets) and isinstance(statement.value, ast.Dict):
            for key, value in zip(statement.value.keys, statement.value.values):
                name = _literal(key)
                if isinstance(name, str):
                    found = _literal(value)
                    env[name] = (UNKNOWN if found is UNKNOWN else str(found), _loc(path, key))
    for node in ast.walk(executors):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == BASE_ENV \
                and isinstance(node.ctx, (ast.Store, ast.Del)):
            name = _literal(node.slice)
            if isinstance(name, str):
                env[name] = (UNKNOWN, _loc(path, node))
    return env


def _loc(path: str, node: ast.AST) -> Location:
    return Location(path, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)


# ---- running the plugin's methods ------------------------------------------------------------------------


class _Executor:
    """The `executor` argument: its env_vars are the environment being built."""


class _Self:
    pass


class _Interpreter:
    def __init__(self, plugin: ast.ClassDef, path: str, fields: dict[str, object]):
        self.methods = {n.name: n for n in plugin.body if isinstance(n, ast.FunctionDef)}
        self.path = path
        self.fields = fields
        self.steps = 0

    def run_method(self, name: str, positional: list, keywords: dict, env: dict, depth: int) -> None:
        method = self.methods.get(name)
        if method is None or depth > MAX_DEPTH:
            if self._touches_env(method):
                raise _Unsupported(f"{PLUGIN_CLASS}.{name} is called too deep")
            return
        names: dict[str, object] = {}
        params = [a.arg for a in method.args.args]
        bound = [_Self(), *positional]
        for i, param in enumerate(params):
            names[param] = bound[i] if i < len(bound) else keywords.get(param, UNKNOWN)
        for param in (a.arg for a in method.args.kwonlyargs):
            names[param] = keywords.get(param, UNKNOWN)
        self.block(method.body, names, env, depth)

    def _touches_env(self, node: ast.AST | None) -> bool:
        return node is not None and _writes_env(node)

    # statements: each updates `env` (name -> (value | UNKNOWN | _DROPPED, Location)) in place
    def block(self, body: list[ast.stmt], names: dict, env: dict, depth: int) -> None:
        for statement in body:
            if isinstance(statement, ast.Return):
                if _writes_env(statement):
                    raise _Unsupported("a return value changes the environment")
                return
            self.statement(statement, names, env, depth)

    def statement(self, node: ast.stmt, names: dict, env: dict, depth: int) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Unsupported(f"more than {MAX_STEPS} statements to run")
        if isinstance(node, ast.If):
            test = self.truth(node.test, names, env)
            if test is UNKNOWN:
                if any(isinstance(n, ast.Return) for n in ast.walk(node)) and _writes_env(node):
                    raise _Unsupported("a return under an undecided condition")
                self._both(node.body, node.orelse, names, env, depth)
            else:
                self.block(node.body if test else node.orelse, names, env, depth)
        elif isinstance(node, ast.For):
            items = self.value(node.iter, names, env)
            if not isinstance(items, (list, tuple)) or not isinstance(node.target, ast.Name) or node.orelse:
                if _writes_env(node):
                    raise _Unsupported("a loop over values offlint cannot list")
                return
            for item in items:
                names[node.target.id] = item
                self.block(node.body, names, env, depth)
        elif isinstance(node, ast.Assign):
            self._assign(node, names, env)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            if _writes_env(node):
                raise _Unsupported("an augmented assignment to the environment")
            if isinstance(node.target, ast.Name):
                names[node.target.id] = UNKNOWN
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                name = self._env_item(target, names, env)
                if name is None:
                    raise _Unsupported("a deletion offlint cannot follow")
                env[name] = (_DROPPED, _loc(self.path, node))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.call(node.value, names, env, depth)
        elif _writes_env(node):
            raise _Unsupported(f"a {type(node).__name__} statement changes the environment")

    def _both(self, body, orelse, names: dict, env: dict, depth: int) -> None:
        """Run both branches of an undecided `if`; what they leave differently is unknown."""
        first, second = dict(env), dict(env)
        names_first, names_second = dict(names), dict(names)
        self.block(body, names_first, first, depth)
        self.block(orelse, names_second, second, depth)
        for name in set(first) | set(second):
            a, b = first.get(name), second.get(name)
            if a == b:
                continue  # neither branch changed it, or both did the same
            if a is not None and b is not None and a[0] == b[0] and a[0] is not UNKNOWN:
                env[name] = a
                continue
            before = env.get(name)
            changed = a if a is not None and a != before else b
            env[name] = (UNKNOWN, changed[1])
        for name in set(names_first) | set(names_second):
            a, b = names_first.get(name, UNKNOWN), names_second.get(name, UNKNOWN)
            names[name] = a if a == b and a is not UNKNOWN and type(a) is type(b) else UNKNOWN

    def _assign(self, node: ast.Assign, names: dict, env: dict) -> None:
        value = self.value(node.value, names, env)
        for target in node.targets:
            if isinstance(target, ast.Name):
                names[target.id] = value
                continue
            name = self._env_item(target, names, env)
            if name is not None:
                shown = value if value is UNKNOWN else _env_text(value)
                env[name] = (shown, _loc(self.path, node))
            elif _writes_env(target):
                raise _Unsupported("an assignment to the environment offlint cannot follow")

    def _env_item(self, target: ast.AST, names: dict, env: dict) -> str | None:
        """The variable name of `executor.env_vars[NAME]` (None when it is not one, or not decidable)."""
        if isinstance(target, ast.Subscript) and self._is_env(target.value, names):
            name = self.value(target.slice, names, env)
            return name if isinstance(name, str) else None
        return None

    def _is_env(self, node: ast.AST, names: dict) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "env_vars" and isinstance(node.value, ast.Name) \
            and isinstance(names.get(node.value.id), _Executor)

    def call(self, node: ast.Call, names: dict, env: dict, depth: int) -> object:
        func = node.func
        if isinstance(func, ast.Attribute) and self._is_env(func.value, names):
            if func.attr == "pop" and node.args:
                name = self.value(node.args[0], names, env)
                if not isinstance(name, str):
                    raise _Unsupported("a pop offlint cannot follow")
                env[name] = (_DROPPED, _loc(self.path, node))
                return UNKNOWN
            if func.attr in ("get", "keys", "items", "values", "copy", "__contains__"):
                return UNKNOWN
            raise _Unsupported(f"executor.env_vars.{func.attr}(...)")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and isinstance(names.get(func.value.id), _Self):
            positional = [self.value(a, names, env) for a in node.args]
            keywords = {k.arg: self.value(k.value, names, env) for k in node.keywords if k.arg}
            self.run_method(func.attr, positional, keywords, env, depth + 1)
            return UNKNOWN
        if any(self._is_env(a, names) for a in [*node.args, *(k.value for k in node.keywords)]):
            raise _Unsupported("the environment is passed to a call offlint does not follow")
        if any(isinstance(names.get(n.id), _Executor) for a in node.args for n in ast.walk(a)
               if isinstance(n, ast.Name)) and _writes_env(node):
            raise _Unsupported("the executor is passed to a call offlint does not follow")
        return UNKNOWN

    # expressions
    def truth(self, node: ast.expr, names: dict, env: dict) -> object:
        value = self.value(node, names, env)
        return UNKNOWN if value is UNKNOWN else bool(value)

    def value(self, node: ast.expr, names: dict, env: dict) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.value(e, names, env) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else (tuple(items) if isinstance(node, ast.Tuple)
                                                                      else list(items))
        if isinstance(node, ast.Name):
            return names.get(node.id, UNKNOWN)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and isinstance(names.get(node.value.id), _Self):
            return self.fields.get(node.attr, UNKNOWN)
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, names, env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = self.truth(node.operand, names, env)
            return UNKNOWN if operand is UNKNOWN else not operand
        if isinstance(node, ast.Compare):
            return self._compare(node, names, env)
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test, names, env)
            if test is UNKNOWN:
                return UNKNOWN
            return self.value(node.body if test else node.orelse, names, env)
        if isinstance(node, ast.Call):
            return self.call(node, names, env, MAX_DEPTH + 1) if _writes_env(node) else UNKNOWN
        return UNKNOWN

    def _bool_op(self, node: ast.BoolOp, names: dict, env: dict) -> object:
        is_and = isinstance(node.op, ast.And)
        saw_unknown = False
        for part in node.values:
            value = self.truth(part, names, env)
            if value is UNKNOWN:
                saw_unknown = True
            elif value != is_and:
                return value
        return UNKNOWN if saw_unknown else is_and

    def _compare(self, node: ast.Compare, names: dict, env: dict) -> object:
        left = self._operand(node.left, names, env)
        result: object = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self._operand(right_node, names, env)
            if isinstance(right, _EnvView) and type(op) in (ast.In, ast.NotIn) and isinstance(left, str):
                held = right.holds(left)
                if held is UNKNOWN:
                    result = UNKNOWN
                elif held != isinstance(op, ast.In):
                    return False
            elif left is UNKNOWN or right is UNKNOWN or isinstance(right, _EnvView) or isinstance(left, _EnvView):
                result = UNKNOWN
            else:
                try:
                    ok = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
                          ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
                          ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}[type(op)](left, right)
                except (KeyError, TypeError):
                    return UNKNOWN
                if not ok:
                    return False
            left = right
        return result

    def _operand(self, node: ast.expr, names: dict, env: dict) -> object:
        """A value, or `executor.env_vars` itself (for `"X" in executor.env_vars`)."""
        if self._is_env(node, names):
            return _EnvView(env)
        return self.value(node, names, env)


class _EnvView:
    """`executor.env_vars` in a membership test: whether it holds a variable, per variable."""

    def __init__(self, env: dict):
        self.env = env

    def holds(self, name: str) -> object:
        value = self.env.get(name, (_DROPPED, None))[0]
        return UNKNOWN if value is UNKNOWN else value is not _DROPPED


def _env_text(value: object) -> object:
    """What the job sees: executors export str(value)."""
    if value is None or isinstance(value, (_Self, _Executor)):
        return UNKNOWN
    return str(value)
