"""Python recipes (libcst): which config keys each function sets, to which values, from where.

The reader is a small abstract interpreter over one module. It walks each top-level function's statements
in order, tracking config objects (a Bridge `ConfigContainer`, a provider or a megatron-core config) bound to
local names, and records every key assignment with its position. It never imports or runs the code.

Within one file it follows: module constants (including `**CONSTANT` spreads in `cfg.env_vars`), chained
assignments, names bound to literals, base builders and helpers defined in the same file (with parameter
defaults and the arguments passed at the call site), and `if` branches (a key set differently on different
paths becomes unknown, naming the condition).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from offlint.keys import KEYS, OTHER_BRIDGE_SECTIONS
from offlint.types import Assignment, Layer, Location, Source, Unit, UnitKind, Unknown

MODEL_CLASSES = {"TransformerConfig", "MLATransformerConfig", "ModelParallelConfig"}
SECTION_CLASSES = {
    "OptimizerConfig": "optimizer",
    "DistributedDataParallelConfig": "ddp",
    "DistributedInitConfig": "dist",
}
CONTAINER_CLASSES = {"ConfigContainer"}
_PROVIDER = re.compile(r"^\w*(ModelProvider|ModelConfig|Provider)$")
SECTIONS_OF_CONTAINER = ("model", "optimizer", "ddp")
# Names that make a file worth parsing at all (a cheap prefilter; the keys rules read plus config classes).
_RELEVANT = re.compile(
    rb"offload|pipeline_model_parallel|recompute|cuda_graph|distributed_optimizer|precision_aware|env_vars"
    rb"|num_layers|Config\(|Provider\(|transformer_impl|bf16|fp16|PYTORCH_CUDA_ALLOC_CONF"
)


def worth_parsing(data: bytes) -> bool:
    return _RELEVANT.search(data) is not None


class PartialDict(dict):
    """A dict literal with a `**spread` offlint could not read: its own entries are known, the rest is not."""

    def __init__(self, items, reason: str):
        super().__init__(items)
        self.reason = reason


class ConfigObj:
    """A config object under construction: a container (with sections) or one section's object."""

    def __init__(self, kind: str, base: object, via: tuple[str, ...] = (), section: str = ""):
        self.kind = kind  # "container" or "section"
        self.section = section  # for a section object: "model", "optimizer", "ddp", ...
        self.base = base  # "default" or Unknown: what unset keys are
        self.via = via
        self.values: dict[str, Assignment] = {}  # field -> last assignment (section objects)
        self.children: dict[str, ConfigObj] = {}  # section -> object (containers)
        self.env: dict[str, Assignment] | None = None  # cfg.env_vars, when assigned from a literal
        self.env_unknown = ""  # why cfg.env_vars is not known (assigned from something offlint cannot read)
        self.top: dict[str, Assignment] = {}  # container-level keys such as mixed_precision

    def child(self, section: str) -> "ConfigObj":
        if section not in self.children:
            self.children[section] = ConfigObj("section", self.base, self.via, section)
        return self.children[section]

    def copy(self) -> "ConfigObj":
        other = ConfigObj(self.kind, self.base, self.via, self.section)
        other.values = dict(self.values)
        other.children = {k: v.copy() for k, v in self.children.items()}
        other.env = dict(self.env) if self.env is not None else None
        other.env_unknown = self.env_unknown
        other.top = dict(self.top)
        return other


@dataclass
class Frame:
    """Local names of one function activation."""

    names: dict[str, object] = field(default_factory=dict)
    returned: object = None
    depth: int = 0


class PythonReader:
    def __init__(self, path: str, module: cst.Module, positions):
        self.path = path
        self.module = module
        self.positions = positions
        self.constants: dict[str, object] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.via_stack: list[str] = []  # the same-file calls being followed, outermost first

    # ---- entry point -------------------------------------------------------------------------------------

    def units(self) -> list[Unit]:
        top = Frame()
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef):
                continue
        module_objects = self._run_block(self.module.body, top, skip_defs=True)
        for name, value in top.names.items():
            if not isinstance(value, ConfigObj):
                self.constants[name] = value
        units: list[Unit] = []
        if module_objects:
            units.append(self._unit("<module>", self._loc(self.module.body[0]) if self.module.body else
                                    Location(self.path, 1, 1), module_objects))
        for name, node in self.functions.items():
            unit = self._function_unit(name, node)
            if unit is not None:
                units.append(unit)
        for stmt in self.module.body:
            if isinstance(stmt, cst.ClassDef):
                for method in stmt.body.body:
                    if isinstance(method, cst.FunctionDef):
                        unit = self._function_unit(f"{stmt.name.value}.{method.name.value}", method)
                        if unit is not None:
                            units.append(unit)
        return units

    def _function_unit(self, name: str, node: cst.FunctionDef) -> Unit | None:
        """Run one function on its own (parameters at their defaults) and flatten what it built."""
        frame = Frame(names=dict(self.constants))
        self._bind_params(node, frame, args=None)
        objects = self._run_block(node.body.body, frame)
        if isinstance(frame.returned, ConfigObj):
            objects.append(frame.returned)
        objects = _dedupe(objects)
        return self._unit(name, self._loc(node.name), objects) if objects else None

    def _unit(self, name: str, location: Location, objects: list[ConfigObj]) -> Unit:
        """Flatten the config objects a function built into one unit (one configuration)."""
        layer = Layer("recipe")
        default_sections: set[str] = set()
        unknown_sections: dict[str, str] = {}
        env_known = False  # cfg.env_vars assigned from a literal
        env_default = False  # a ConfigContainer built here and never given env_vars: Bridge's empty default
        env_unknown = ""
        for obj in objects:
            sections = obj.children if obj.kind == "container" else {obj.section: obj}
            if obj.kind == "container":
                for section in SECTIONS_OF_CONTAINER:
                    if section not in sections:
                        _note_base(section, obj.base, default_sections, unknown_sections)
                layer.assignments.extend(obj.top.values())
                if obj.env_unknown:
                    env_unknown = obj.env_unknown
                    layer.assignments.extend((obj.env or {}).values())  # the entries it does spell out
                elif obj.env is not None:
                    env_known = True
                    layer.assignments.extend(obj.env.values())
                elif obj.base == "default":
                    env_default = True
            for section, child in sections.items():
                _note_base(section, child.base, default_sections, unknown_sections)
                layer.assignments.extend(child.values.values())
        if env_unknown:
            env_known = False
            unknown_sections["env"] = f"cfg.env_vars is not a literal: {env_unknown}"
        elif env_known or env_default:
            default_sections.add("env")
        else:
            unknown_sections["env"] = "the launch environment is not defined in this recipe"
        layer.assignments.sort(key=lambda a: (a.location.line, a.location.col))
        return Unit(name=name, kind=UnitKind.RECIPE, location=location, layers=[layer],
                    default_sections=frozenset(default_sections), unknown_sections=unknown_sections,
                    launches_training=env_known, env_known=env_known)

    # ---- statements --------------------------------------------------------------------------------------

    def _run_block(self, body, frame: Frame, skip_defs: bool = False) -> list[ConfigObj]:
        """Run statements in order; return the config objects created or touched (in creation order)."""
        touched: list[ConfigObj] = []
        for stmt in body:
            if frame.returned is not None:
                break
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    touched.extend(self._run_small(small, frame))
            elif isinstance(stmt, cst.If):
                touched.extend(self._run_if(stmt, frame))
            elif isinstance(stmt, (cst.For, cst.While)):
                touched.extend(self._run_branches([stmt.body.body, []], frame, self._loc(stmt), "loop"))
            elif isinstance(stmt, cst.With):
                touched.extend(self._run_block(stmt.body.body, frame))
            elif isinstance(stmt, cst.Try):
                touched.extend(self._run_block(stmt.body.body, frame))
        return touched

    def _run_if(self, node: cst.If, frame: Frame) -> list[ConfigObj]:
        branches = [node.body.body]
        orelse = node.orelse
        while orelse is not None:
            if isinstance(orelse, cst.If):
                branches.append(orelse.body.body)
                orelse = orelse.orelse
            else:
                branches.append(orelse.body.body)
                orelse = None
        if len(branches) == 1 or not isinstance(node.orelse, (cst.Else, cst.If)) or _no_else(node):
            branches.append([])
        test = self.module.code_for_node(node.test)
        return self._run_branches(branches, frame, self._loc(node), f"if {test}")

    def _run_branches(self, branches, frame: Frame, loc: Location, what: str) -> list[ConfigObj]:
        """Run each branch on a copy of the state, then merge: disagreeing values become unknown."""
        objects = [v for v in frame.names.values() if isinstance(v, ConfigObj)]
        results = []
        for body in branches:
            copies = {id(o): o.copy() for o in objects}
            names = {k: copies.get(id(v), v) if isinstance(v, ConfigObj) else v for k, v in frame.names.items()}
            sub = Frame(names=names, depth=frame.depth)
            self._run_block(body, sub)
            results.append((copies, sub))
        for obj in objects:
            _merge_into(obj, [copies[id(obj)] for copies, _ in results], loc, what)
        touched = list(objects)
        for name in {n for _, sub in results for n in sub.names}:
            values = [sub.names.get(name, frame.names.get(name)) for _, sub in results]
            if isinstance(frame.names.get(name), ConfigObj):
                continue  # merged above
            created = [v for v in values if isinstance(v, ConfigObj)]
            if created:
                # A config object first seen inside a branch: on the other paths its keys are unset.
                first = created[0]
                variants = [v if isinstance(v, ConfigObj) else ConfigObj(first.kind, first.base, (), first.section)
                            for v in values]
                merged = variants[0].copy()
                _merge_into(merged, variants, loc, what)
                frame.names[name] = merged
                touched.append(merged)
            elif all(_same(v, values[0]) for v in values):
                frame.names[name] = values[0]
            else:
                frame.names[name] = Unknown(f"`{name}` differs by branch ({what} at line {loc.line})")
        returns = [sub.returned for _, sub in results if sub.returned is not None]
        if returns and len(returns) == len(results) and all(isinstance(r, ConfigObj) for r in returns):
            frame.returned = returns[0]
        return touched

    def _run_small(self, small, frame: Frame) -> list[ConfigObj]:
        if isinstance(small, cst.Assign):
            value = self._eval(small.value, frame)
            touched = []
            for target in small.targets:
                touched.extend(self._assign(target.target, value, small.value, frame))
            return touched
        if isinstance(small, cst.AnnAssign) and small.value is not None:
            value = self._eval(small.value, frame)
            return self._assign(small.target, value, small.value, frame)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            result = self._eval(small.value, frame)
            return [result] if isinstance(result, ConfigObj) else []
        if isinstance(small, cst.Return) and small.value is not None:
            frame.returned = self._eval(small.value, frame)
            if frame.returned is None:
                frame.returned = Unknown("returns None")
            return []
        return []

    def _assign(self, target, value, value_node, frame: Frame) -> list[ConfigObj]:
        if isinstance(target, cst.Name):
            frame.names[target.value] = value
            return [value] if isinstance(value, ConfigObj) else []
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                if isinstance(element.value, cst.Name):
                    frame.names[element.value.value] = Unknown("tuple unpacking")
            return []
        if not isinstance(target, cst.Attribute):
            return []
        chain = _attr_chain(target)
        if chain is None:
            return []
        root, attrs = chain[0], chain[1:]
        receiver = frame.names.get(root)
        if not isinstance(receiver, ConfigObj):
            receiver = self._implicit_receiver(root, attrs, frame)
            if receiver is None:
                return []
        return self._store(receiver, attrs, value, value_node, target, root)

    def _implicit_receiver(self, root: str, attrs: list[str], frame: Frame) -> ConfigObj | None:
        """A name not bound to a config here (a parameter, or from a call offlint cannot follow)."""
        why = frame.names.get(root)
        reason = why.reason if isinstance(why, Unknown) else f"`{root}` comes from outside this function"
        looks_like_config = any(part in root.lower() for part in ("cfg", "config", "recipe", "container"))
        if attrs[0] in SECTIONS_OF_CONTAINER or (looks_like_config and (
                attrs[0] in ("env_vars", "mixed_precision") or attrs[0] in OTHER_BRIDGE_SECTIONS)):
            # `x.model.k = v` is a Bridge container whatever its name; `executor.env_vars = {...}` is not.
            obj = ConfigObj("container", Unknown(reason), (root,))
        elif len(attrs) == 1:
            section = _section_for(root, attrs[0])
            if section is None:
                return None
            obj = ConfigObj("section", Unknown(reason), (root,), section)
        else:
            return None
        frame.names[root] = obj
        return obj

    def _store(self, receiver: ConfigObj, attrs: list[str], value, value_node, target, root) -> list[ConfigObj]:
        loc = self._loc(target)
        text = self.module.code_for_node(value_node)
        if receiver.kind == "container":
            head = attrs[0]
            if len(attrs) == 1:
                if head in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = head
                        receiver.children[head] = value
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from `{text}`"
                        receiver.children[head] = ConfigObj("section", Unknown(reason), receiver.via, head)
                elif head == "env_vars":
                    receiver.env = self._env_dict(value_node, value, loc)
                    receiver.env_unknown = getattr(value, "reason", "") if isinstance(value, dict) else (
                        value.reason if isinstance(value, Unknown) else f"cfg.env_vars = {text}")
                elif head == "mixed_precision":
                    receiver.top["mixed_precision"] = self._assignment("mixed_precision", value, loc, text)
                return [receiver]
            if head in SECTIONS_OF_CONTAINER and len(attrs) == 2:
                child = receiver.child(head)
                child.values[attrs[1]] = self._assignment(f"{head}.{attrs[1]}", value, loc, text)
                return [receiver]
            if head == "env_vars" and len(attrs) == 2:
                if receiver.env is None:
                    receiver.env = {}
                receiver.env[attrs[1]] = self._assignment(f"env.{attrs[1]}", value, loc, text)
            return [receiver]
        if len(attrs) == 1:
            receiver.values[attrs[0]] = self._assignment(f"{receiver.section}.{attrs[0]}", value, loc, text)
            return [receiver]
        return []

    def _env_dict(self, node, value, loc: Location) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {}
        if not isinstance(value, dict):
            return out
        for name, (val, where, text) in value.items():
            out[str(name)] = Assignment(f"env.{name}", _env_str(val), where or loc, Source.ENV, text)
        return out

    def _assignment(self, key, value, loc, text) -> Assignment:
        if isinstance(value, ConfigObj):
            value = Unknown(f"a config object, not a value (`{text}`)")
        if isinstance(value, dict):
            value = {k: v[0] for k, v in value.items()}
        return Assignment(key, value, loc, Source.PYTHON, text, tuple(self.via_stack))

    # ---- expressions -------------------------------------------------------------------------------------

    def _eval(self, node, frame: Frame):
        """Evaluate an expression to a Python literal, a ConfigObj, a dict of (value, loc, text), or Unknown."""
        if isinstance(node, (cst.Integer, cst.Float)):
            return _literal_number(node)
        if isinstance(node, cst.SimpleString):
            return node.evaluated_value
        if isinstance(node, cst.ConcatenatedString):
            value = node.evaluated_value
            return value if isinstance(value, str) else Unknown("bytes")
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.value]
            if node.value in frame.names:
                return frame.names[node.value]
            return Unknown(f"`{node.value}` is not defined in this file")
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            inner = self._eval(node.expression, frame)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else Unknown(
                self.module.code_for_node(node))
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            items = [self._eval(e.value, frame) for e in node.elements if not isinstance(e, cst.StarredElement)]
            if any(isinstance(e, cst.StarredElement) for e in node.elements) or any(
                    isinstance(i, (Unknown, ConfigObj)) for i in items):
                return Unknown(f"`{self.module.code_for_node(node)}` is not a literal")
            return list(items)
        if isinstance(node, cst.Dict):
            return self._eval_dict(node, frame)
        if isinstance(node, cst.Attribute):
            return self._eval_attribute(node, frame)
        if isinstance(node, cst.Call):
            return self._eval_call(node, frame)
        return Unknown(f"`{self.module.code_for_node(node)}` is not a literal")

    def _eval_dict(self, node: cst.Dict, frame: Frame):
        out: dict = {}
        partial = ""
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                spread = self._eval(element.value, frame)
                if not isinstance(spread, dict):
                    partial = partial or f"`**{self.module.code_for_node(element.value)}` is not a literal dict"
                    continue
                partial = partial or getattr(spread, "reason", "")
                out.update(spread)
                continue
            key = self._eval(element.key, frame)
            if isinstance(key, (Unknown, ConfigObj, dict, list)):
                return Unknown("a dict key is not a literal")
            value = self._eval(element.value, frame)
            out[key] = (value, self._loc(element.key), self.module.code_for_node(element.value))
        return PartialDict(out, partial) if partial else out

    def _eval_attribute(self, node: cst.Attribute, frame: Frame):
        chain = _attr_chain(node)
        if chain is None:
            return Unknown(f"`{self.module.code_for_node(node)}`")
        text = ".".join(chain)
        if chain[0] == "torch" and len(chain) == 2:
            return f"torch.{chain[1]}"
        receiver = frame.names.get(chain[0])
        if isinstance(receiver, ConfigObj):
            attrs = chain[1:]
            if receiver.kind == "container" and attrs and attrs[0] in SECTIONS_OF_CONTAINER:
                child = receiver.child(attrs[0])
                if len(attrs) == 1:
                    return child
                if len(attrs) == 2 and attrs[1] in child.values:
                    return child.values[attrs[1]].value
            if receiver.kind == "section" and len(attrs) == 1 and attrs[0] in receiver.values:
                return receiver.values[attrs[0]].value
        return Unknown(f"`{text}` is read from an object offlint does not evaluate")

    def _eval_call(self, node: cst.Call, frame: Frame):
        name = _call_name(node.func)
        short = name.rsplit(".", 1)[-1] if name else ""
        text = self.module.code_for_node(node.func) + "(...)"
        if short in CONTAINER_CLASSES:
            obj = ConfigObj("container", "default", ())
            for arg in node.args:
                if arg.keyword is None:
                    continue
                key = arg.keyword.value
                value = self._eval(arg.value, frame)
                if key in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = key
                        obj.children[key] = value
                    elif value is None:
                        obj.children[key] = ConfigObj("section", Unknown(f"`{key}=None` in {short}(...)"), (), key)
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from {short}(...)"
                        obj.children[key] = ConfigObj("section", Unknown(reason), (), key)
                elif key == "env_vars":
                    obj.env = self._env_dict(arg.value, value, self._loc(arg))
                elif key == "mixed_precision":
                    obj.top[key] = self._assignment(key, value, self._loc(arg.keyword),
                                                    self.module.code_for_node(arg.value))
            return obj
        section = "model" if (short in MODEL_CLASSES or (short and _PROVIDER.match(short))) else \
            SECTION_CLASSES.get(short)
        if section:
            obj = ConfigObj("section", "default", (), section)
            for arg in node.args:
                if arg.keyword is None:
                    if isinstance(arg.star, str) and arg.star == "**":
                        obj.base = Unknown(f"`**{self.module.code_for_node(arg.value)}` in {short}(...)")
                    continue
                obj.values[arg.keyword.value] = self._assignment(
                    f"{section}.{arg.keyword.value}", self._eval(arg.value, frame), self._loc(arg.keyword),
                    self.module.code_for_node(arg.value))
            return obj
        if name in self.functions and frame.depth < 8:
            return self._call_local(self.functions[name], node, frame)
        # A call offlint does not follow: config objects passed to it may be changed by it.
        for arg in node.args:
            value = self._eval(arg.value, frame) if isinstance(arg.value, cst.Name) else None
            if isinstance(value, ConfigObj):
                _taint(value, Unknown(f"may be changed by `{text}`"))
        return Unknown(f"the result of `{text}`")

    def _call_local(self, fn: cst.FunctionDef, call: cst.Call, frame: Frame):
        """Follow a function defined in this file: bind arguments, run it, return what it returns."""
        sub = Frame(names=dict(self.constants), depth=frame.depth + 1)
        self._bind_params(fn, sub, args=(call, frame))
        self.via_stack.append(f"via {fn.name.value}() at line {self._loc(call).line}")
        try:
            self._run_block(fn.body.body, sub)
        finally:
            self.via_stack.pop()
        result = sub.returned
        return result if result is not None else Unknown(f"{fn.name.value}() returns no value")

    def _bind_params(self, fn: cst.FunctionDef, frame: Frame, args) -> None:
        params = fn.params
        ordered = list(params.posonly_params) + list(params.params)
        positional: list = []
        keywords: dict[str, object] = {}
        caller_frame = None
        if args is not None:
            call, caller_frame = args
            for arg in call.args:
                if arg.star:
                    continue
                value = self._eval(arg.value, caller_frame)
                if arg.keyword is None:
                    positional.append(value)
                else:
                    keywords[arg.keyword.value] = value
        for index, param in enumerate(ordered):
            name = param.name.value
            if index < len(positional):
                frame.names[name] = positional[index]
            elif name in keywords:
                frame.names[name] = keywords[name]
            else:
                frame.names[name] = self._param_default(param, fn)
        for param in params.kwonly_params:
            name = param.name.value
            frame.names[name] = keywords[name] if name in keywords else self._param_default(param, fn)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                frame.names[star.name.value] = Unknown(f"`{star.name.value}` collects arbitrary arguments")

    def _param_default(self, param: cst.Param, fn: cst.FunctionDef):
        if param.default is None:
            return Unknown(f"parameter `{param.name.value}` of {fn.name.value}()")
        return self._eval(param.default, Frame(names=dict(self.constants)))

    def _loc(self, node) -> Location:
        pos = self.positions[node].start
        return Location(self.path, pos.line, pos.column + 1)


# ---- helpers ---------------------------------------------------------------------------------------------


def _literal_number(node):
    try:
        from ast import literal_eval

        return literal_eval(node.value)
    except (ValueError, SyntaxError):
        return Unknown(node.value)


def _attr_chain(node) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return list(reversed(parts))


def _call_name(func) -> str:
    chain = _attr_chain(func)
    return ".".join(chain) if chain else ""


def _section_for(root: str, field: str) -> str | None:
    """Which section a bare receiver like `model_cfg.x` or `opt_config.x` writes to."""
    sections = {k.split(".", 1)[0] for k in KEYS if k.split(".", 1)[-1] == field and "." in k}
    lowered = root.lower()
    if "opt" in lowered and "optimizer" in sections:
        return "optimizer"
    if "ddp" in lowered and "ddp" in sections:
        return "ddp"
    if ("model" in lowered or "provider" in lowered or "transformer" in lowered) and "model" in sections:
        return "model"
    if len(sections) == 1 and lowered not in ("self", "args"):
        section = sections.pop()
        return section if section in ("model", "optimizer", "ddp") else None
    return None


def _note_base(section: str, base, default_sections: set, unknown_sections: dict) -> None:
    if base == "default":
        default_sections.add(section)
        unknown_sections.pop(section, None)
    elif section not in default_sections:
        unknown_sections[section] = base.reason if isinstance(base, Unknown) else str(base)


def _env_str(value):
    """Environment variables are strings; cfg.env_vars values are applied with str()."""
    if isinstance(value, Unknown):
        return value
    if isinstance(value, bool):
        return str(value)
    return str(value) if value is not None else "None"


def _taint(obj: ConfigObj, reason: Unknown) -> None:
    """A call offlint cannot follow received this object: its unset keys are no longer known defaults."""
    obj.base = reason if obj.base == "default" else obj.base
    for child in obj.children.values():
        _taint(child, reason)


def _same(a, b) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return False
    return type(a) is type(b) and a == b


def _no_else(node: cst.If) -> bool:
    orelse = node.orelse
    while isinstance(orelse, cst.If):
        orelse = orelse.orelse
    return orelse is None


def _merge_into(obj: ConfigObj, variants: list[ConfigObj], loc: Location, what: str) -> None:
    """After branches: a key with the same value on every path keeps it; otherwise it becomes unknown."""
    if obj.kind == "container":
        for section in set().union(*(v.children for v in variants)) | set(obj.children):
            children = [v.children.get(section) or ConfigObj("section", v.base, (), section) for v in variants]
            _merge_into(obj.child(section), children, loc, what)
        obj.top = _merge_values([v.top for v in variants], loc, what)
        envs = [v.env for v in variants]
        unknown = [v.env_unknown for v in variants if v.env_unknown]
        if unknown:
            obj.env, obj.env_unknown = None, unknown[0]
        elif all(e is None for e in envs):
            obj.env = None
        elif any(e is None for e in envs):
            obj.env, obj.env_unknown = None, f"cfg.env_vars is assigned only on some paths (`{what}`)"
        else:
            obj.env = _merge_values(envs, loc, what)
        return
    bases = [v.base for v in variants]
    obj.base = bases[0] if all(b == bases[0] for b in bases) else Unknown(f"set differently by branch ({what})")
    obj.values = _merge_values([v.values for v in variants], loc, what)


def _merge_values(maps: list[dict[str, Assignment]], loc: Location, what: str) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for name in set().union(*maps):
        options = [m.get(name) for m in maps]
        first = options[0]
        if all(o is not None for o in options) and all(
                _same(o.value, first.value) or o.value == first.value for o in options):
            out[name] = options[-1]
            continue
        present = [o for o in options if o is not None]
        anchor = present[-1]
        values = ", ".join(sorted({o.text or repr(o.value) for o in present}))
        missing = " or unset" if len(present) < len(options) else ""
        out[name] = Assignment(anchor.key, Unknown(f"{values}{missing} depending on `{what}` (line {loc.line})"),
                               anchor.location, anchor.source, anchor.text, anchor.via)
    return out


def _dedupe(objects: list) -> list[ConfigObj]:
    seen: set[int] = set()
    out = []
    for obj in objects:
        if isinstance(obj, ConfigObj) and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    # A section object attached to a container is represented by the container.
    attached = {id(child) for obj in out if obj.kind == "container" for child in obj.children.values()}
    return [o for o in out if id(o) not in attached]


def read_python(path: str, text: str) -> list[Unit]:
    """Parse one Python file and return its units. Raises SyntaxError-like `cst.ParserSyntaxError`."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return PythonReader(path, wrapper.module, positions).units()
