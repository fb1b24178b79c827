"""What Megatron Bridge's model bridge for a Hugging Face architecture sets on the model config, read from the
linted tree's own bridge classes (never imported or run).

`AutoBridge.from_hf_pretrained(id)` picks the bridge class registered for the architecture the model's
config.json names (`@MegatronModelBridge.register_bridge(source=Qwen3MoeForCausalLM, ...)`, or the name as a
string). Its `provider_bridge` (for `.to_megatron_provider()`) or `hf_config_to_model_config_kwargs` (for
`.get_model_config()`) maps the config's sizes and then sets the family's own keys, often with literal values
(`provider.hidden_dropout = 0.0`, `config_kwargs.update(normalization="RMSNorm", ...)`). Those literal settings are
what this module reads, so that a recipe gets them from the code that runs, not from a copy in offlint.

What is read: in the method's top-level statements, on the name it returns, `NAME.key = <literal>`,
`NAME["key"] = <literal>` and `NAME.update(key=<literal>, ...)`, after those of the base class's method when the
name comes from `super().<method>(...)` (the literal keywords of the call when it is bound to anything else). A
key later set from something else (`hf_config.x`, a call), or set inside a branch or loop, is left out, and so is
everything before a statement that hands NAME to a call (`setattr(provider, k, v)`): its value is then the size
table's or the default, as without the tree. Keys megatron-core or Bridge do not define for the model are left
out too, and the provider dataclass's own defaults are not read.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from offlint.keys import release_fields
from offlint.scope import nearest

# The recipe's call on the AutoBridge -> the bridge method that builds what it returns.
METHOD_OF_CALL = {"to_megatron_provider": "provider_bridge",
                  "get_model_config": "hf_config_to_model_config_kwargs",
                  "to_megatron_model_config": "hf_config_to_model_config_kwargs"}
_PACKAGE = "megatron.bridge.models"  # where Bridge keeps its model bridges (models/<family>/<name>_bridge.py)
_MAX_BASES = 6
# A line that may start a top-level class's registering decorator: `@...register_bridge...`, or an `@` line that goes
# on to the next (an open parenthesis or a backslash at its end). A module without one registers no bridge, and is
# not parsed: Bridge's conversion/model_bridge.py (118 KB) names LlamaForCausalLM and register_bridge only in an
# indented docstring example, and parsing it took 0.02 s of every pre-commit run on a Llama recipe.
_DECORATOR_LINE = re.compile(r"^@(?:[^\n]*\bregister_bridge\b|[^\n]*[(\\][ \t\r]*$)", re.M)


@dataclass(frozen=True)
class Setting:
    value: object
    where: str  # "set by Qwen3MoEBridge.provider_bridge at src/.../qwen3_moe_bridge.py:59"


def settings(project, architecture: str, call: str, importer: str) -> dict[str, Setting]:
    """{model field: Setting} the tree's bridge for `architecture` sets with literal values for the AutoBridge
    method `call`; {} when the tree has no bridge registered for it (a project that pip-installs Bridge)."""
    method = METHOD_OF_CALL.get(call)
    if method is None or project is None:
        return {}
    found = project.call_result(("bridge-registrations", architecture), lambda: _registrations(project, architecture))
    paths = nearest(sorted({path for path, _ in found}), importer)
    if len(paths) != 1:  # none, or two copies of Bridge equally near the recipe
        return {}
    classes = [name for path, name in found if path == paths[0]]
    if len(classes) != 1:
        return {}
    return project.call_result(("bridge-settings", paths[0], classes[0], method),
                               lambda: _Reader(project).method_settings(paths[0], classes[0], method, 0) or {})


def _registrations(project, architecture: str) -> list[tuple[str, str]]:
    """(path, class name) of every bridge class in the tree registered for `architecture`."""
    out = []
    for path in project.paths_in_package(_PACKAGE, "_bridge.py"):
        text = project.text(path)
        if not text or architecture not in text or "register_bridge" not in text or not _DECORATOR_LINE.search(text):
            continue
        module = project.parsed(path) if hasattr(project, "parsed") else _parse(text)
        constants = _string_constants(module)
        for node in module.body if module else ():
            if isinstance(node, ast.ClassDef) and any(_registers(d, architecture, constants)
                                                      for d in node.decorator_list):
                out.append((path, node.name))
    return out


def _string_constants(module: ast.Module | None) -> dict[str, str]:
    """The module's top-level `NAME = "text"` bindings made once (Bridge's Qwen3.5 bridges register
    `source=_QWEN3_5_MOE_HF_CLASS_NAME`, a constant holding the architecture's name)."""
    bound: dict[str, list] = {}
    for node in module.body if module else ():
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            if isinstance(target, ast.Name):
                bound.setdefault(target.id, []).append(node.value if not isinstance(node, ast.AugAssign) else None)
    return {name: values[0].value for name, values in bound.items()
            if len(values) == 1 and isinstance(values[0], ast.Constant) and isinstance(values[0].value, str)}


def _registers(decorator: ast.expr, architecture: str, constants: dict[str, str] | None = None) -> bool:
    """`@X.register_bridge(source=<architecture>, ...)`: the class object's name, the name as a string, or a
    module constant holding it."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "register_bridge"):
        return False
    source = next((k.value for k in decorator.keywords if k.arg == "source"), None)
    if isinstance(source, ast.Constant):
        return source.value == architecture
    if isinstance(source, ast.Name):
        return source.id == architecture or (constants or {}).get(source.id) == architecture
    return isinstance(source, ast.Attribute) and source.attr == architecture


class ParsedModules:
    """The tree's modules by path, each parsed once (None where it is missing or does not parse)."""

    def __init__(self, project):
        self.project = project
        self.modules: dict[str, ast.Module | None] = {}

    def module(self, path: str) -> ast.Module | None:
        if path not in self.modules:
            if hasattr(self.project, "parsed"):  # a PythonProject: parsed once for every reader of the project
                self.modules[path] = self.project.parsed(path)
            else:
                text = self.project.text(path)
                self.modules[path] = _parse(text) if text else None
        return self.modules[path]


class _Reader(ParsedModules):
    """Reads one bridge method (and its in-tree base classes' for `super()`), parsing each file once."""

    def method_settings(self, path: str, class_name: str, method: str, depth: int) -> dict[str, Setting] | None:
        """The literal settings of `class_name.method` (inherited from the first in-tree base that defines it);
        None when neither the class nor a base in the tree defines it."""
        module = self.module(path)
        cls = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == class_name), None) \
            if module else None
        if cls is None or depth > _MAX_BASES:
            return None
        function = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method), None)
        if function is None:
            return self.base_settings(path, module, cls, method, depth)
        returned = _returned_name(function)
        if returned is None:
            return {}
        where = f"set by {class_name}.{method} at {path}"
        out: dict[str, Setting] = {}
        fields = release_fields("model")
        for statement in function.body:
            if _is_super_call(statement, returned, method):
                out = dict(self.base_settings(path, module, cls, method, depth) or {})
                continue
            if _binds(statement, returned):  # `provider = SomeProvider(num_layers=..., bf16=True)`: its literal keywords
                call = statement.value
                out = {k.arg: Setting(_literal(k.value), f"{where}:{statement.lineno}") for k in
                       (call.keywords if isinstance(call, ast.Call) else ()) if k.arg in fields}
                out = {k: v for k, v in out.items() if v.value is not _NOT_LITERAL}
                continue
            out = self.after(path, module, statement, returned, where, out, depth)
        return out

    def after(self, path: str, module: ast.Module, statement: ast.stmt, name: str, where: str,
              out: dict[str, Setting], depth: int) -> dict[str, Setting]:
        """The settings after one top-level statement acting on `name`. A call of a plain function of the tree
        that is handed `name` (`_apply_qwen35_moe_config(provider, text_config)`) is read as its body acting on
        that parameter, the same way; any other call handed `name` (`setattr(provider, k, v)`, a method, a
        function with an early return) may set any key: what was read before it is dropped."""
        helper = self.helper(path, module, statement, name) if depth <= _MAX_BASES else None
        if helper is not None:
            helper_path, helper_module, function, parameter = helper
            helper_where = f"set by {function.name} at {helper_path}"
            for inner in function.body:
                out = self.after(helper_path, helper_module, inner, parameter, helper_where, out, depth + 1)
            return out
        if _hands_on(statement, name):  # `setattr(provider, k, v)`, `_tune(provider)`: any key may change
            return {}
        fields = release_fields("model")
        out = dict(out)
        for key, value in _literal_sets(statement, name):
            if value is _NOT_LITERAL or key not in fields:
                out.pop(key, None)
            else:
                out[key] = Setting(value, f"{where}:{statement.lineno}")
        if not isinstance(statement, (ast.Assign, ast.Expr)):  # a branch, loop, with or try: not decided
            for key in _keys_set_within(statement, name):
                out.pop(key, None)
        return out

    def helper(self, path: str, module: ast.Module, statement: ast.stmt, name: str):
        """(its path, its module, the function, the parameter `name` binds) for a statement that only calls a
        module-level function of the tree with `name` as one positional argument and nothing else of it; None
        otherwise, or where the function returns before its last statement (what follows would be undecided)."""
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or any(
                isinstance(k.value, ast.Name) and k.value.id == name for k in call.keywords) or any(
                isinstance(a, ast.Starred) for a in call.args):
            return None
        positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
        if len(positions) != 1 or any(name in {n.id for n in ast.walk(a) if isinstance(n, ast.Name)}
                                      for i, a in enumerate(call.args) if i != positions[0]):
            return None
        found = self.function_path(path, module, call.func.id)
        target = self.module(found) if found else None
        function = next((n for n in target.body if isinstance(n, ast.FunctionDef) and n.name == call.func.id),
                        None) if target else None
        if function is None or function.args.vararg or positions[0] >= len(function.args.args) or \
                function.args.posonlyargs or function.decorator_list:
            return None
        if any(isinstance(n, ast.Return) for s in function.body[:-1] for n in ast.walk(s)) or any(
                isinstance(n, ast.Return) for s in function.body[-1:] if not isinstance(s, ast.Return)
                for n in ast.walk(s)):
            return None
        parameter = function.args.args[positions[0]].arg
        if any(isinstance(n, ast.Name) and n.id == parameter and isinstance(n.ctx, ast.Store)
               for n in ast.walk(function)):  # the parameter rebound: later writes go to another object
            return None
        return found, target, function, parameter

    def function_path(self, path: str, module: ast.Module, name: str) -> str | None:
        """The file that defines module-level function `name` as `path` sees it (the module or a
        `from X import name`)."""
        if any(isinstance(n, ast.FunctionDef) and n.name == name for n in module.body):
            return path
        return self.imported_path(path, module, name)

    def base_settings(self, path: str, module: ast.Module, cls: ast.ClassDef, method: str, depth: int):
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else None
            found = self.class_path(path, module, name) if name else None
            if found is not None:
                inherited = self.method_settings(found, name, method, depth + 1)
                if inherited is not None:
                    return inherited
        return None

    def class_path(self, path: str, module: ast.Module, name: str) -> str | None:
        """The file that defines class `name` as `path` sees it: the module itself or a `from X import name`."""
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in module.body):
            return path
        return self.imported_path(path, module, name)

    def imported_path(self, path: str, module: ast.Module, name: str) -> str | None:
        for node in module.body:
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name and a.name == name
                                                        for a in node.names):
                dotted = node.module or ""
                if node.level:
                    package = self.project.module_name(path).split(".")[:-node.level]
                    dotted = ".".join([*package, *([dotted] if dotted else [])])
                return self.project.path_of(dotted, path)
        return None


_NOT_LITERAL = object()


def _literal_sets(statement: ast.stmt, name: str):
    """(key, literal value or _NOT_LITERAL) for each key a top-level statement sets on `name`."""
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            key = _target_key(target, name)
            if key:
                yield key, _literal(statement.value)
    elif isinstance(statement, ast.Expr) and _is_update(statement.value, name):
        for keyword in statement.value.keywords:
            if keyword.arg is not None:
                yield keyword.arg, _literal(keyword.value)


def _keys_set_within(statement: ast.stmt, name: str) -> set[str]:
    keys = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign):
            keys.update(k for k in (_target_key(t, name) for t in node.targets) if k)
        elif isinstance(node, ast.Call) and _is_update(node, name):
            keys.update(k.arg for k in node.keywords if k.arg)
    return keys


_READS = frozenset({"getattr", "hasattr", "isinstance", "len", "print"})


def _hands_on(statement: ast.stmt, name: str) -> bool:
    """Whether the statement passes `name` itself to a call that may set keys offlint cannot name."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _READS):
            passed = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, ast.Name) and a.id == name for a in passed):
                return True
    return False


def _target_key(target: ast.expr, name: str) -> str | None:
    """`name.key` or `name["key"]`."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == name:
        return target.attr
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name \
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
        return target.slice.value
    return None


def _is_update(call: ast.expr, name: str) -> bool:
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "update" \
        and isinstance(call.func.value, ast.Name) and call.func.value.id == name


def _is_super_call(statement: ast.stmt, name: str, method: str) -> bool:
    """`name = super().<method>(...)`."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == name):
        return False
    call = statement.value
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == method \
        and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name) \
        and call.func.value.func.id == "super"


def _binds(statement: ast.stmt, name: str) -> bool:
    return isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                     for t in statement.targets)


def _returned_name(function: ast.FunctionDef) -> str | None:
    """The name the method returns last at its top level (`return provider`)."""
    last = function.body[-1] if function.body else None
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Name):
        return last.value.id
    return None


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return _NOT_LITERAL


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
