"""Python recipes (stdlib `ast`): which config keys each function sets, to which values, from where.

The reader is a small abstract interpreter over one module. It walks each top-level function's statements
in order, tracking config objects (a Bridge `ConfigContainer`, a provider or a megatron-core config) bound to
local names, and records every key assignment with its position. It never imports or runs the code.

Within one file it follows: module constants (including `**CONSTANT` spreads in `cfg.env_vars`), chained
assignments, names bound to literals, base builders and helpers defined in the same file (with parameter
defaults and the arguments passed at the call site), and `if` branches (python_branches.py: a key set
differently on different paths takes one value per path, each with its condition).

It reads the standard library's `ast`: about 15 times faster than a concrete syntax tree here, and values,
positions and source text are all it needs (suppression comments are read from the text by `suppressions`).
"""

from __future__ import annotations

import ast
import bisect
import re
from pathlib import Path

from offlint.sources import bridge_mutators, python_calls
from offlint.sources.hf_models import HF_SIZE_KEYS, PROVIDER_METHODS, HFModel, config_candidates, model_sizes
from offlint import keys
from offlint.keys import KEYS, OTHER_BRIDGE_SECTIONS
from offlint.sources import python_inputs, python_roles
from offlint.sources.python_branches import BranchPoint, merge_into, narrowings, paths_of, same
from offlint.sources.python_values import ConfigObj, Frame, FunctionRef, ModuleRef, ObjectTuple, PartialDict, Record
from offlint.types import Assignment, Layer, Location, OneOf, Source, Unit, UnitKind, Unknown, UserInput

MODEL_CLASSES = {"TransformerConfig", "MLATransformerConfig", "ModelParallelConfig"}
SECTION_CLASSES = {
    "OptimizerConfig": "optimizer",
    "DistributedDataParallelConfig": "ddp",
    "DistributedInitConfig": "dist",
    "TrainingConfig": "train",  # micro/global batch sizes, for the memory model and replay
}
CONTAINER_CLASSES = {"ConfigContainer"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
_PROVIDER = re.compile(r"^\w*(ModelProvider|ModelConfig|Provider)$")
SECTIONS_OF_CONTAINER = ("model", "optimizer", "ddp", "train")
# Names that make a file worth parsing at all (a cheap prefilter; the keys rules read plus config classes).
_RELEVANT = re.compile(
    rb"offload|pipeline_model_parallel|recompute|cuda_graph|distributed_optimizer|precision_aware|env_vars"
    rb"|num_layers|Config\(|Provider\(|transformer_impl|bf16|fp16|PYTORCH_CUDA_ALLOC_CONF"
)


def worth_parsing(data: bytes) -> bool:
    return _RELEVANT.search(data) is not None


_UNDECIDED = object()
_LOCAL_IMPORT = re.compile(rb"[ \t]+(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]")  # an import inside a block
_DECIDABLE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b, ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class PythonReader:
    def __init__(self, path: str, module: ast.Module, text: str, project=None):
        self.path = path
        self.module = module
        self.project = project  # a PythonProject: follow imports into the rest of the tree
        self.lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]
        self.constants: dict[str, object] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        # The calls being followed, outermost first (shared across the project's files).
        self.via_stack: list[str] = project.via_stack if project is not None else []
        self.dataclasses: dict[str, ast.ClassDef] = {}  # @dataclass classes: calls build Records
        self._module_objects: list[ConfigObj] | None = None
        self._options: dict[str, tuple[str, ...]] | None = None  # argparse dest -> option strings

    # ---- entry point -------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Index functions and imports, and evaluate the module body (its constants)."""
        if self._module_objects is not None:
            return
        self._module_objects = []
        for stmt in self.module.body:
            if isinstance(stmt, FUNCTIONS):
                self.functions[stmt.name] = stmt
            if isinstance(stmt, ast.ClassDef) and any(_call_name(d.func if isinstance(d, ast.Call) else d)
                                                      .endswith("dataclass") for d in stmt.decorator_list):
                self.dataclasses[stmt.name] = stmt
            # Imports at module level, also under `try:` and `if HAVE_BRIDGE:` (a name imported on one path is
            # what the module exports when that path runs; offlint follows it).
            for node in _statements([stmt]) if isinstance(stmt, (ast.If, *TRY)) else [stmt]:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    self._note_import(node)
        self._note_local_imports()
        top = Frame()
        self._module_objects = self._run_block(self.module.body, top)
        for name, value in top.names.items():
            if not isinstance(value, ConfigObj):
                self.constants[name] = value

    def _note_local_imports(self) -> None:
        """Imports inside function bodies (`from ...optimizer_utils import adam_with_cosine` deferred against an
        import cycle): callable from where they are imported; a module-level import of the name wins. Only the
        functions whose text holds an indented import are walked, statements only."""
        lines = sorted(i for i, line in enumerate(self.lines, start=1) if _LOCAL_IMPORT.match(line))
        if not lines:
            return
        module_level = dict(self.imports)
        for fn in [*self.functions.values(), *(m for c in self.module.body if isinstance(c, ast.ClassDef)
                                               for m in c.body if isinstance(m, FUNCTIONS))]:
            first = bisect.bisect_left(lines, fn.lineno)
            if first < len(lines) and lines[first] <= (fn.end_lineno or fn.lineno):
                for node in _statements(fn.body):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        self._note_import(node)
        self.imports.update(module_level)

    def _note_import(self, node) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = (alias.name, None)
                else:
                    head = alias.name.split(".", 1)[0]
                    self.imports[head] = (head, None)
            return
        module = node.module or ""
        if node.level and self.project is not None:
            package = self.project.module_name(self.path).split(".")
            if not self.project.is_package(self.path):
                package = package[:-1]
            package = package[:len(package) - (node.level - 1)] if node.level > 1 else package
            module = ".".join([*package, *([module] if module else [])])
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = (module, alias.name)

    def units(self) -> list[Unit]:
        if python_roles.is_test_code(self.path):
            return []  # test code runs only under pytest: neither a launch nor a recipe (python_roles)
        self.prepare()
        module_objects = self._module_objects or []
        units: list[Unit] = []
        if module_objects:
            units.append(self._unit("<module>", self._loc(self.module.body[0]) if self.module.body else
                                    Location(self.path, 1, 1), module_objects))
        for name, node in self.functions.items():
            if not self._mentions_config(node):
                continue  # no config key or config class in its text: nothing to report on its own
            unit = self._function_unit(name, node)
            if unit is not None:
                units.append(unit)
        for stmt in self.module.body:
            if isinstance(stmt, ast.ClassDef):
                for method in stmt.body:
                    if isinstance(method, FUNCTIONS) and self._mentions_config(method):
                        unit = self._function_unit(f"{stmt.name}.{method.name}", method)
                        if unit is not None:
                            units.append(unit)
        return units

    def _mentions_config(self, node) -> bool:
        end = getattr(node, "end_lineno", None) or node.lineno
        return worth_parsing(b"".join(self.lines[node.lineno - 1:end]))

    def _function_unit(self, name: str, node: ast.FunctionDef) -> Unit | None:
        """Run one function on its own (parameters at their defaults) and flatten what it built."""
        frame = Frame(names=dict(self.constants))
        self._bind_params(node, frame, [], {})
        objects = self._run_block(node.body, frame)
        if isinstance(frame.returned, ConfigObj):
            objects.append(frame.returned)
        objects = _dedupe(objects)
        if not objects:
            return None
        unit = self._unit(name, self._name_loc(node), objects)
        if name.rsplit(".", 1)[-1].startswith("_"):
            # A private builder (`_pretrain_common`, `_build_x_config`) is not launched itself: the public recipe
            # that calls it decides the launch environment (often by replacing cfg.env_vars).
            unit.launches_training = unit.env_known = unit.env_unset = False
            unit.default_sections = unit.default_sections - {"env"}
            unit.unknown_sections["env"] = f"{name}() is a private builder: its callers set the launch environment"
        params = [p.arg for p in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        unit.checked_through_callers = python_roles.checked_through_callers(name, objects, frame.names, params)
        return unit

    def _unit(self, name: str, location: Location, objects: list[ConfigObj]) -> Unit:
        """Flatten the config objects a function built into one unit (one configuration)."""
        layer = Layer("recipe")
        default_sections: set[str] = set()
        unknown_sections: dict[str, str] = {}
        env_known = False  # cfg.env_vars assigned from a literal
        env_default = False  # a ConfigContainer built here and never given env_vars: Bridge's empty default
        env_unknown = ""
        env_location = None
        for obj in objects:
            sections = obj.children if obj.kind == "container" else {obj.section: obj}
            if obj.kind == "container":
                for section in SECTIONS_OF_CONTAINER:
                    if section not in sections:
                        _note_base(section, obj.base, default_sections, unknown_sections)
                layer.assignments.extend(obj.top.values())
                env_location = obj.env_location or env_location
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
        elif env_known:
            default_sections.add("env")
        else:
            unknown_sections["env"] = "the launch environment is not defined in this recipe"
        layer.assignments.sort(key=lambda a: (a.location.line, a.location.col))
        return Unit(name=name, kind=UnitKind.RECIPE, location=location, layers=[layer],
                    default_sections=frozenset(default_sections), unknown_sections=unknown_sections,
                    launches_training=env_known, env_known=env_known, env_location=env_location,
                    env_unset=env_default and not env_known and not env_unknown, framework=_framework(objects))

    # ---- statements --------------------------------------------------------------------------------------

    def _run_block(self, body, frame: Frame) -> list[ConfigObj]:
        """Run statements in order; return the config objects created or touched (in creation order)."""
        touched: list[ConfigObj] = []
        for stmt in body:
            if frame.returned is not None:
                break
            if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.If):
                touched.extend(self._run_if(stmt, frame))
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                line = stmt.lineno
                split = BranchPoint(self._loc(stmt), "loop", (f"the loop body at line {line} runs",
                                                              f"the loop body at line {line} does not run"))
                touched.extend(self._run_branches([stmt.body, []], frame, split))
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                touched.extend(self._run_block(stmt.body, frame))
            elif isinstance(stmt, TRY):
                touched.extend(self._run_block(stmt.body, frame))
            else:
                touched.extend(self._run_small(stmt, frame))
        return touched

    def _run_if(self, node: ast.If, frame: Frame) -> list[ConfigObj]:
        decided = self._decide(node.test, frame)
        if decided is not None:  # the test is known here (a literal parameter default, a constant): one path runs
            return self._run_block(node.body if decided else node.orelse, frame)
        branches = [node.body]
        test = f"`if {self._segment(node.test)}` (line {node.lineno})"
        paths = [f"{test} is true"]
        orelse = node.orelse
        while len(orelse) == 1 and isinstance(orelse[0], ast.If):  # elif
            branches.append(orelse[0].body)
            paths.append(f"`elif {self._segment(orelse[0].test)}` (line {orelse[0].lineno}) is the branch taken")
            orelse = orelse[0].orelse
        branches.append(orelse)  # the else branch, or [] when there is none (the path that skips the if)
        paths.append(f"{test} is false" if len(branches) == 2 else f"no branch of {test} is taken")
        split = BranchPoint(self._loc(node), f"if {self._segment(node.test)}", tuple(paths),
                            self._input_flags(node, frame))
        tests, chain = [node.test], node
        while len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):  # each elif's own test
            chain = chain.orelse[0]
            tests.append(chain.test)
        return self._run_branches(branches, frame, split, narrow=[narrowings(t) for t in tests])

    def _input_flags(self, node: ast.If, frame: Frame) -> tuple[str, ...]:
        """The command-line flags an `if`/`elif` chain tests, when its tests read nothing else that is unknown
        (python_inputs); () otherwise."""
        flags: list[str] = []
        tests = [node.test]
        while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            tests.append(node.test)
        leaves = []
        while tests:
            test = tests.pop()
            if isinstance(test, ast.BoolOp):
                tests.extend(test.values)
            elif isinstance(test, ast.UnaryOp):
                tests.append(test.operand)
            elif isinstance(test, ast.Compare):
                tests.extend([test.left, *test.comparators])
            elif not isinstance(test, ast.Constant):
                leaves.append(test)
        for leaf in leaves:
            if isinstance(leaf, ast.Call) and _call_name(leaf.func) == "getattr" and len(leaf.args) >= 2 and \
                    isinstance(leaf.args[1], ast.Constant) and isinstance(leaf.args[1].value, str):
                namespace = self._eval(leaf.args[0], frame)  # getattr(args, "name", default)
                value = python_inputs.attribute(namespace, leaf.args[1].value, self._segment(leaf)) \
                    if isinstance(namespace, UserInput) and not namespace.flags else Unknown("")
            elif isinstance(leaf, (ast.Name, ast.Attribute)):
                value = self._eval(leaf, frame)
            else:
                return ()
            if isinstance(value, UserInput) and value.flags:
                flags.extend(value.flags)
            elif isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)):
                return ()
        return tuple(dict.fromkeys(flags))

    def _declared_options(self) -> dict[str, tuple[str, ...]]:
        """The argparse options declared in this module and in the modules it imports names from."""
        if self._options is None:
            self._options = {}
            readers = [self] + ([self.project.module_reader(m, self.path) for m in
                                 sorted({m for m, _ in self.imports.values()})] if self.project else [])
            for reader in readers:
                if reader is not None:
                    for dest, options in python_inputs.declared_options(reader.module).items():
                        self._options.setdefault(dest, options)
        return self._options

    def _decide(self, test, frame: Frame) -> bool | None:
        """The truth of an `if` test when every value it reads is a known literal, else None (both paths)."""
        if isinstance(test, ast.BoolOp):
            parts = [self._decide(v, frame) for v in test.values]
            if isinstance(test.op, ast.And):
                return False if False in parts else (True if all(p is True for p in parts) else None)
            return True if True in parts else (False if all(p is False for p in parts) else None)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._decide(test.operand, frame)
            return None if inner is None else not inner
        if isinstance(test, ast.Compare):
            objects = self._object_is_none(test, frame)
            if objects is not None:
                return objects
            left = self._literal(test.left, frame)
            for op, right_node in zip(test.ops, test.comparators):
                right = self._literal(right_node, frame)
                if left is _UNDECIDED or right is _UNDECIDED or type(op) not in _DECIDABLE:
                    return None
                try:
                    if not _DECIDABLE[type(op)](left, right):
                        return False
                except TypeError:
                    return None
                left = right
            return True
        value = self._literal(test, frame)
        return None if value is _UNDECIDED else bool(value)

    def _object_is_none(self, test: ast.Compare, frame: Frame) -> bool | None:
        """`x is None` / `x is not None` where x is an object the code built or looked up (a config, a dataclass
        record, a module or function): never None. None when the test is not one of those."""
        if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Is, ast.IsNot)) or not (
                isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None) or \
                isinstance(test.left, (ast.Call, ast.Lambda)):
            return None
        value = self._eval(test.left, frame)
        if not isinstance(value, (ConfigObj, Record, ObjectTuple, ModuleRef, FunctionRef, HFModel)):
            return None
        return isinstance(test.ops[0], ast.IsNot)

    def _literal(self, node, frame: Frame):
        if isinstance(node, ast.Lambda) or (isinstance(node, ast.Call) and not self._is_pure(node, frame)):
            return _UNDECIDED  # never run a call just to decide a branch (only the pure ones of python_calls)
        value = self._eval(node, frame)
        if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)) or (
                isinstance(value, dict) and not value):
            return _UNDECIDED
        return value

    def _run_branches(self, branches, frame: Frame, split: "BranchPoint", narrow=()) -> list[ConfigObj]:
        """Run each branch on a copy of the state, then merge: a value that differs by path becomes a OneOf.
        `narrow[i]`: what branch i's test fixes there (python_branches.narrowings)."""
        objects = [v for v in frame.names.values() if isinstance(v, ConfigObj)]
        results = []
        for index, body in enumerate(branches):
            copies = {id(o): o.copy() for o in objects}
            names = {k: copies.get(id(v), v) if isinstance(v, ConfigObj) else v for k, v in frame.names.items()}
            sub = Frame(names=names, depth=frame.depth)
            restore = self._narrow(narrow[index], sub, body) if index < len(narrow) else {}
            self._run_block(body, sub)
            for name, (fixed, before) in restore.items():
                if sub.names.get(name) is fixed:  # the body did not rebind it: the name is as before the test
                    sub.names[name] = before
            results.append((copies, sub))
        for obj in objects:
            merge_into(obj, [copies[id(obj)] for copies, _ in results], split)
        touched = list(objects)
        for name in {n for _, sub in results for n in sub.names}:
            values = [sub.names.get(name, frame.names.get(name)) for _, sub in results]
            if all(v is values[0] for v in values) and (name in frame.names or values[0] is not None):
                frame.names[name] = values[0]  # no branch rebound it (most names: constants, parameters)
                continue
            if isinstance(frame.names.get(name), ConfigObj):
                continue  # merged above
            created = [v for v in values if isinstance(v, ConfigObj)]
            if created:
                # A config object first seen inside a branch: on the other paths its keys are unset.
                first = created[0]
                variants = [v if isinstance(v, ConfigObj) else ConfigObj(first.kind, first.base, first.section)
                            for v in values]
                merged = variants[0].copy()
                merge_into(merged, variants, split)
                frame.names[name] = merged
                touched.append(merged)
            elif all(same(v, values[0]) for v in values):
                frame.names[name] = values[0]
            else:
                reason = f"`{name}` differs by branch ({split.what} at line {split.loc.line})"
                defined = name in frame.names or all(name in sub.names for _, sub in results)
                paths = paths_of([(v, None, "") for v in values], split) if defined else None
                frame.names[name] = OneOf(reason, paths) if paths else Unknown(reason)
        returns = [sub.returned for _, sub in results if sub.returned is not None]
        if returns and len(returns) == len(results) and all(isinstance(r, ConfigObj) for r in returns):
            frame.returned = returns[0]
        return touched

    def _narrow(self, facts, frame: Frame, body) -> dict:
        """Give what a branch's test fixes its value on that branch, where it is not known already: a config key
        gets an assignment at the test (so the merge after the `if` pairs it with the branch's path), a local name
        the literal for the branch's body only. A config the function was given (`cfg`, not yet an object here)
        becomes one as the body's own first write through it would make it. Returns {name: (literal, value
        before)} for the names."""
        restore = {}
        for target, literal_node in facts:
            literal = literal_node.value
            if isinstance(target, ast.Name):
                before = frame.names.get(target.id)
                if isinstance(before, (Unknown, OneOf, UserInput)):
                    frame.names[target.id] = literal
                    restore[target.id] = (literal, before)
                continue
            chain = _attr_chain(target)
            receiver = frame.names.get(chain[0]) if chain else None
            if chain and not isinstance(receiver, ConfigObj) and _writes_through(body, chain[0]):
                receiver = self._implicit_receiver(chain[0], chain[1:], frame)
            if not isinstance(receiver, ConfigObj):
                continue
            attrs = chain[1:]
            if receiver.kind == "container" and len(attrs) == 2 and attrs[0] in SECTIONS_OF_CONTAINER:
                receiver, attrs = receiver.child(attrs[0]), attrs[1:]
            if receiver.kind != "section" or len(attrs) != 1:
                continue
            current = receiver.values.get(attrs[0])
            value = current.value if current is not None else receiver.base
            if isinstance(value, (Unknown, OneOf)):
                key = f"{receiver.section}.{attrs[0]}"
                text = f"{self._segment(target)} (on the branch where it is {literal!r})"
                receiver.values[attrs[0]] = Assignment(key, literal, self._loc(target), Source.PYTHON, text,
                                                       tuple(self.via_stack))
        return restore

    def _run_small(self, stmt, frame: Frame) -> list[ConfigObj]:
        if isinstance(stmt, ast.Assign):
            value = self._eval(stmt.value, frame)
            touched = []
            for target in stmt.targets:  # a = b = value: every target gets the value (chained assignment)
                touched.extend(self._assign(target, value, stmt.value, frame))
            return touched
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            value = self._eval(stmt.value, frame)
            return self._assign(stmt.target, value, stmt.value, frame)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            result = self._eval(stmt.value, frame)
            return [result] if isinstance(result, ConfigObj) else []
        if isinstance(stmt, ast.Return):  # a bare `return` ends the function too
            frame.returned = self._eval(stmt.value, frame) if stmt.value is not None else None
            if frame.returned is None:
                frame.returned = Unknown("returns None")
            return []
        return []

    def _assign(self, target, value, value_node, frame: Frame) -> list[ConfigObj]:
        if isinstance(target, ast.Name):
            frame.names[target.id] = value
            return [value] if isinstance(value, ConfigObj) else []
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, ObjectTuple) and len(value) == len(target.elts):
                built: list[ConfigObj] = []
                for element, item in zip(target.elts, value):
                    built += self._assign(element, item, value_node, frame)
                return built
            for element in target.elts:
                if isinstance(element, ast.Name):
                    frame.names[element.id] = Unknown("tuple unpacking")
            return []
        if not isinstance(target, ast.Attribute):
            return []
        chain = _attr_chain(target)
        if chain is None:
            return []
        root, attrs = chain[0], chain[1:]
        receiver = frame.names.get(root)
        if isinstance(receiver, Record) and len(attrs) == 1:
            # `cfg = bf16_mixed(); cfg.fp8 = "hybrid"`: the write changes the record the name holds (kept
            # otherwise, the record would be known and wrong).
            frame.names[root] = receiver.replaced({attrs[0]: value})
            return []
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
            obj = ConfigObj("container", Unknown(reason))
        elif len(attrs) == 1:
            section = _section_for(root, attrs[0])
            if section is None:
                return None
            obj = ConfigObj("section", Unknown(reason), section)
        else:
            return None
        frame.names[root] = obj
        return obj

    def _store(self, receiver: ConfigObj, attrs: list[str], value, value_node, target, root) -> list[ConfigObj]:
        loc = self._loc(target)
        text = self._segment(value_node)
        if receiver.kind == "container":
            head = attrs[0]
            if len(attrs) == 1:
                if head in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = head
                        receiver.children[head] = value
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from `{text}`"
                        receiver.children[head] = ConfigObj("section", Unknown(reason), head)
                elif head == "env_vars":
                    receiver.env = self._env_dict(value_node, value, loc)
                    receiver.env_location = loc
                    receiver.env_unknown = getattr(value, "reason", "") if isinstance(value, dict) else (
                        value.reason if isinstance(value, Unknown) else f"cfg.env_vars = {text}")
                elif head == "mixed_precision":
                    receiver.top["mixed_precision"] = self._assignment("mixed_precision", value, loc, text)
                elif head == "peft":
                    # Whether the recipe fine-tunes adapters (the memory model covers full training only): the
                    # text of what it is set to, or None.
                    receiver.top["peft"] = self._assignment("peft", None if value is None else text, loc, text)
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
        if isinstance(node, ast.Constant):
            return node.value if not isinstance(node.value, bytes) else Unknown("bytes")
        if isinstance(node, ast.Name):
            if node.id in frame.names:
                return frame.names[node.id]
            return self._imported_value(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._eval(node.operand, frame)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else Unknown(
                self._segment(node))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self._eval(e, frame) for e in node.elts if not isinstance(e, ast.Starred)]
            if isinstance(node, ast.Tuple) and any(isinstance(i, ConfigObj) for i in items) and \
                    not any(isinstance(e, ast.Starred) for e in node.elts):
                return ObjectTuple(items)  # `return optimizer, scheduler`: unpacked by the caller
            if any(isinstance(e, ast.Starred) for e in node.elts) or any(
                    isinstance(i, (Unknown, ConfigObj)) for i in items):
                return Unknown(f"`{self._segment(node)}` is not a literal")
            return list(items)
        if isinstance(node, ast.Dict):
            return self._eval_dict(node, frame)
        if isinstance(node, ast.Attribute):
            return self._eval_attribute(node, frame)
        if isinstance(node, ast.Call):
            return self._eval_call(node, frame)
        if isinstance(node, ast.BoolOp) and not self._truth_only(node, frame):
            return self._eval_bool_value(node, frame)  # `x or 1`: the operand, not its truth
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp) and
                                                           isinstance(node.op, ast.Not)):
            decided = self._decide(node, frame)  # `bf16=precision == "bf16-mixed"`
            if decided is not None:
                return decided
        if isinstance(node, ast.JoinedStr):
            return self._eval_fstring(node, frame)
        if isinstance(node, ast.IfExp):
            decided = self._decide(node.test, frame)
            if decided is not None:
                return self._eval(node.body if decided else node.orelse, frame)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._eval_comprehension(node, frame)
        if isinstance(node, ast.Subscript):
            return python_calls.item(self._eval(node.value, frame), self._eval(node.slice, frame),
                                     self._segment(node))
        if isinstance(node, ast.BinOp):
            return python_calls.arithmetic(node.op, self._eval(node.left, frame), self._eval(node.right, frame),
                                           self._segment(node))
        return Unknown(f"`{self._segment(node)}` is not a literal")

    def _truth_only(self, node: ast.BoolOp, frame: Frame) -> bool:
        """`a and b` whose operands are truth values (or unknown): Kleene logic decides it (`? and False`)."""
        return all(isinstance(v, (ast.Compare, ast.BoolOp, ast.UnaryOp)) or (isinstance(v, ast.Constant) and
                                                                         isinstance(v.value, bool))
                   for v in node.values)

    def _eval_bool_value(self, node: ast.BoolOp, frame: Frame):
        """`a or b` / `a and b` as Python gives it: the first operand that decides, as a value."""
        value = None
        for operand in node.values:
            value = self._eval(operand, frame)
            if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)):
                decided = self._decide(node, frame)
                return decided if isinstance(decided, bool) and all(
                    isinstance(self._eval(v, frame), (bool, Unknown)) for v in node.values) else Unknown(
                    f"`{self._segment(node)}` is not a literal")
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _eval_fstring(self, node: ast.JoinedStr, frame: Frame):
        """An f-string of literal parts; the text is offered to the project's string probe (perf_scripts reads
        the recipe name a launcher computes this way)."""
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            value = self._eval(part.value, frame) if isinstance(part, ast.FormattedValue) else Unknown("")
            if not isinstance(value, (str, int, float, bool, type(None))) or part.format_spec is not None:
                return Unknown(f"`{self._segment(node)}` is not a literal")
            parts.append(repr(value) if part.conversion == ord("r") else ascii(value)
                         if part.conversion == ord("a") else str(value))
        text = "".join(parts)
        if len(text) > python_calls.MAX_LITERAL:
            return Unknown(f"`{self._segment(node)}` is too long to follow")
        if self.project is not None and self.project.string_probe is not None:
            self.project.string_probe.append(text)
        return text

    def _eval_comprehension(self, node, frame: Frame):
        """`[f(x) for x in literal if test]` over a literal sequence, each element a literal."""
        unknown = Unknown(f"`{self._segment(node)}` is not a literal")
        if len(node.generators) != 1 or node.generators[0].is_async or \
                not isinstance(node.generators[0].target, ast.Name):
            return unknown
        loop = node.generators[0]
        if any(isinstance(inner, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.Lambda))
               for part in (node.elt, *loop.ifs) for inner in ast.walk(part)):
            return unknown  # nested loops would multiply: hostile input stays linear
        items = self._eval(loop.iter, frame)
        items = list(items) if isinstance(items, dict) else items
        if not isinstance(items, (list, tuple, str)) or len(items) > python_calls.MAX_ITEMS:
            return unknown
        sub = Frame(names=dict(frame.names), depth=frame.depth)
        out = []
        for item in items:
            sub.names[loop.target.id] = item
            tests = [self._decide(test, sub) for test in loop.ifs]
            if None in tests:
                return unknown
            if all(tests):
                value = self._eval(node.elt, sub)
                if isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple, dict)):
                    return unknown
                out.append(value)
        return list(dict.fromkeys(out)) if isinstance(node, ast.SetComp) and all(
            isinstance(v, (str, int, float, bool)) for v in out) else out

    def _eval_dict(self, node: ast.Dict, frame: Frame):
        out: dict = {}
        partial = ""
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:  # **spread
                spread = self._eval(value_node, frame)
                if not isinstance(spread, dict):
                    partial = partial or f"`**{self._segment(value_node)}` is not a literal dict"
                    continue
                partial = partial or getattr(spread, "reason", "")
                out.update(spread)
                continue
            key = self._eval(key_node, frame)
            if isinstance(key, (Unknown, ConfigObj, dict, list)):
                return Unknown("a dict key is not a literal")
            value = self._eval(value_node, frame)
            out[key] = (value, self._loc(key_node), self._segment(value_node))
        return PartialDict(out, partial) if partial else out

    def _eval_attribute(self, node: ast.Attribute, frame: Frame):
        chain = _attr_chain(node)
        if chain is None:
            return Unknown(f"`{self._segment(node)}`")
        text = ".".join(chain)
        if chain[0] == "torch" and len(chain) == 2:
            return f"torch.{chain[1]}"
        receiver = frame.names.get(chain[0])
        if receiver is None and chain[0] in self.imports:
            receiver = self._imported_value(chain[0])
        if isinstance(receiver, UserInput) and not receiver.flags and len(chain) == 2:
            return python_inputs.attribute(receiver, chain[1], text)  # `args.name`
        if isinstance(receiver, Record) and len(chain) == 2:
            return receiver.fields.get(chain[1], Unknown(f"{receiver.name} has no field {chain[1]}"))
        if isinstance(receiver, ConfigObj):
            attrs = chain[1:]
            if receiver.kind == "container" and attrs and attrs[0] in SECTIONS_OF_CONTAINER:
                child = receiver.child(attrs[0])
                if len(attrs) == 1:
                    return child
                if len(attrs) == 2:
                    return _field(child, attrs[1], text)
            if receiver.kind == "section" and len(attrs) == 1:
                return _field(receiver, attrs[0], text)
        return Unknown(f"`{text}` is read from an object offlint does not evaluate")

    def _eval_call(self, node: ast.Call, frame: Frame):
        name = _call_name(node.func)
        short = name.rsplit(".", 1)[-1] if name else ""
        text = self._segment(node.func) + "(...)"
        if short == "cast" and len(node.args) == 2:  # typing.cast(Type, value) is the value
            return self._eval(node.args[1], frame)
        if python_inputs.is_parse_call(node):  # `args = parser.parse_args()`: what the user gives
            parsed = python_inputs.namespace(f"`{self._segment(node)}`", self._declared_options())
            return ObjectTuple((parsed, Unknown("arguments the parser does not know"))) \
                if short == "parse_known_args" else parsed
        pure = self._pure_call(node, frame)
        if pure is not python_calls.NOT_PURE:
            return pure
        if short == "from_hf_pretrained" and node.args:
            model_id = self._eval(node.args[0], frame)
            return HFModel(model_id) if isinstance(model_id, str) else Unknown(f"`{text}` of an unknown model")
        if isinstance(node.func, ast.Attribute) and node.func.attr in PROVIDER_METHODS:
            owner = self._eval(node.func.value, frame)
            if isinstance(owner, HFModel):
                return self._hf_model_section(owner, node)
        if short in CONTAINER_CLASSES:
            obj = ConfigObj("container", "default")
            obj.origin = "bridge"
            for arg in node.keywords:
                if arg.arg is None:
                    continue
                key = arg.arg
                value = self._eval(arg.value, frame)
                if key in SECTIONS_OF_CONTAINER:
                    if isinstance(value, ConfigObj) and value.kind == "section":
                        value.section = key
                        obj.children[key] = value
                    elif value is None:
                        obj.children[key] = ConfigObj("section", Unknown(f"`{key}=None` in {short}(...)"), key)
                    else:
                        reason = value.reason if isinstance(value, Unknown) else f"set from {short}(...)"
                        obj.children[key] = ConfigObj("section", Unknown(reason), key)
                elif key == "env_vars":
                    obj.env = self._env_dict(arg.value, value, self._loc(arg))
                elif key == "mixed_precision":
                    obj.top[key] = self._assignment(key, value, self._loc(arg), self._segment(arg.value))
                elif key == "peft":
                    text = self._segment(arg.value)
                    obj.top[key] = self._assignment(key, None if value is None else text, self._loc(arg), text)
            return obj
        section = "model" if (short in MODEL_CLASSES or (short and _PROVIDER.match(short))) else \
            SECTION_CLASSES.get(short)
        if section:
            obj = ConfigObj("section", "default", section)
            obj.origin = self._class_origin(name)
            for arg in node.keywords:
                if arg.arg is None:  # **kwargs: any key may be set
                    obj.base = Unknown(f"`**{self._segment(arg.value)}` in {short}(...)")
                    continue
                obj.values[arg.arg] = self._assignment(
                    f"{section}.{arg.arg}", self._eval(arg.value, frame), self._loc(arg), self._segment(arg.value))
            return obj
        if short in bridge_mutators.MUTATORS:
            # The tree's own helper when its source is there and decides every key it writes; the documented
            # model (bridge_mutators) where it is not, or where it branches on the megatron-core version.
            target = self._find_function(name) if name else None
            if target is not None and frame.depth < 8:
                done = self._tree_mutator(target, node, frame)
                if done is not _UNDECIDED:
                    return done
            return self._apply_mutator(short, node, frame)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            updated = self._env_update(node, frame)
            if updated is not _UNDECIDED:
                return updated
        if short == "replace" and node.args:
            base = self._eval(node.args[0], frame)
            if isinstance(base, Record):
                return base.replaced(self._call_keywords(node, frame))
        if name and self._imports_training_entry_point(name):
            return Unknown(f"`{text}` runs training")  # the configuration ends here; it is not changed
        if short == "import_module" and name and self._imported_from(name, "importlib") and node.args:
            target = self._eval(node.args[0], frame)  # importlib.import_module(f"configs.{family}")
            return ModuleRef(target) if isinstance(target, str) and not target.startswith(".") else Unknown(
                f"`{self._segment(node)}`: a module offlint cannot name")
        called = frame.names.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if isinstance(called, FunctionRef) and frame.depth < 8:  # `builder = getattr(module, name); builder()`
            return self._call(called.reader, called.fn, node, frame)
        if name and self._imports_mcore_consumer(name):
            return Unknown(f"the result of `{text}`")  # megatron-core reads the config; it does not change it
        dataclass = self._find_dataclass(name) if name else None
        if dataclass is not None:
            return self._record(dataclass, node, frame)
        target = self._find_function(name) if name else None
        if target is not None and frame.depth < 8:
            return self._call(target[0], target[1], node, frame)
        # A call offlint does not follow: the config objects it can reach (`f(cfg)`: the whole container,
        # `f(cfg.model)`: the model section) may be changed by it; the reason names the call and where it is.
        why = Unknown(f"may be changed by `{text}` at {self.path}:{node.lineno}")
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            arg = arg.value if isinstance(arg, ast.Starred) else arg
            value = self._eval(arg, frame) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if isinstance(value, ConfigObj):
                _taint(value, why)
        return Unknown(f"the result of `{text}`")

    # ---- calls known without following them (python_calls) ----------------------------------------------

    def _is_pure(self, node: ast.Call, frame: Frame) -> bool:
        """A call that only computes a value (decidable in a branch test without running anything else)."""
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in python_calls.PURE_BUILTINS and not self._shadowed(func.id, frame)
        return isinstance(func, ast.Attribute) and func.attr in python_calls.VALUE_METHODS and \
            isinstance(func.value, (ast.Constant, ast.Name, ast.Attribute, ast.JoinedStr))

    def _shadowed(self, name: str, frame: Frame) -> bool:
        return name in frame.names or name in self.functions or name in self.imports or name in self.constants

    def _pure_call(self, node: ast.Call, frame: Frame):
        """The value of a builtin, string method or logging call (python_calls), or NOT_PURE for any other."""
        func = node.func
        if python_calls.is_logging_call(func):
            return None
        if not self._is_pure(node, frame):
            return python_calls.NOT_PURE
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, frame)
            if not python_calls.has_value_method(receiver, func.attr):
                return python_calls.NOT_PURE  # not a string or a literal dict: a method of something else
            args = [self._eval(a, frame) for a in node.args if not isinstance(a, ast.Starred)]
            if len(args) != len(node.args) or node.keywords:
                return Unknown(f"`{self._segment(node)}` is not a literal")
            return python_calls.method_value(receiver, func.attr, args)
        if func.id in ("getattr", "hasattr"):
            return self._getattr(node, frame, func.id)
        if func.id == "isinstance" and len(node.args) == 2 and not node.keywords:
            return python_calls.isinstance_value(self._eval(node.args[0], frame), node.args[1])
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return Unknown(f"the result of `{self._segment(node.func)}(...)`")
        args = [self._eval(a, frame) for a in node.args]
        keywords = {k.arg: self._eval(k.value, frame) for k in node.keywords}
        if any(isinstance(v, (ConfigObj, Record, HFModel, ObjectTuple)) for v in [*args, *keywords.values()]):
            return Unknown(f"the result of `{self._segment(node.func)}(...)` on a config object")
        return python_calls.builtin_value(func.id, args, keywords)

    def _getattr(self, node: ast.Call, frame: Frame, which: str):
        """`getattr(obj, "name"[, default])` / `hasattr(obj, "name")`: the value where offlint knows it."""
        unknown = Unknown(f"`{self._segment(node)}`: not a value this code sets")
        if len(node.args) < 2 or node.keywords:
            return unknown
        obj = self._eval(node.args[0], frame)
        attr = self._eval(node.args[1], frame)
        if not isinstance(attr, str):
            return unknown
        found, value = False, None
        if isinstance(obj, ModuleRef) and self.project is not None:
            exported = self._exported(obj.name, attr, set())
            if exported is None:  # not a function or constant offlint finds there: unknown, not the default
                return unknown
            if which == "hasattr":
                return True
            return exported[2] if exported[1] == "value" else FunctionRef(exported[0], exported[2])
        if isinstance(obj, Record):
            found, value = attr in obj.fields, obj.fields.get(attr)
            if not found and which == "getattr" and len(node.args) > 2:
                return self._eval(node.args[2], frame)  # a namespace without that name: the default
            if not found and which == "hasattr":
                return False
        elif isinstance(obj, ConfigObj) and obj.kind == "container" and attr in SECTIONS_OF_CONTAINER:
            found, value = True, obj.child(attr)
        elif isinstance(obj, ConfigObj) and obj.kind == "section":
            if attr in obj.values:
                found, value = True, obj.values[attr].value
            elif obj.base == "default" and obj.section:  # a dataclass field, or not one, in every release
                exists = keys.field_in_every_version(f"{obj.section}.{attr}")
                if which == "hasattr":
                    return unknown if exists is None else exists
                if exists is False and len(node.args) > 2:
                    return self._eval(node.args[2], frame)
                value = _field(obj, attr, self._segment(node))
                return unknown if isinstance(value, Unknown) else value
        if not found:
            return unknown
        return True if which == "hasattr" else value

    def _class_origin(self, name: str) -> str:
        """Which library a config class comes from, by its import: "megatron-core", "bridge", or ""."""
        head = name.split(".", 1)[0]
        module = self.imports.get(head, ("", None))[0]
        if module == "megatron.core" or module.startswith("megatron.core.") or ".megatron.core." in f".{module}":
            return "megatron-core"
        return "bridge" if "megatron.bridge" in module else ""

    def _imported_from(self, name: str, module: str) -> bool:
        """`importlib.import_module` with `import importlib` (or `from importlib import import_module`)."""
        head = name.split(".", 1)[0]
        return head in self.imports and self.imports[head][0] == module and not self._shadowed_locally(head)

    def _shadowed_locally(self, name: str) -> bool:
        return name in self.functions

    def _imports_mcore_consumer(self, name: str) -> bool:
        """`get_megatron_optimizer`, `GPTModel`, ... imported from megatron-core (python_calls.MCORE_CONSUMERS)."""
        parts = name.split(".")
        if parts[-1] not in python_calls.MCORE_CONSUMERS or parts[0] not in self.imports:
            return False
        module, attr = self.imports[parts[0]]
        defining_module = ".".join(p for p in [module, attr if len(parts) > 1 else None, *parts[1:-1]] if p)
        return python_calls.is_mcore_consumer(parts[-1], defining_module)

    def _call_keywords(self, node: ast.Call, frame: Frame) -> dict:
        """Keyword arguments, `**spread` of literal dicts included (a spread offlint cannot read is skipped)."""
        out: dict = {}
        for keyword in node.keywords:
            if keyword.arg is not None:
                out[keyword.arg] = self._eval(keyword.value, frame)
                continue
            spread = self._eval(keyword.value, frame)
            if isinstance(spread, dict):
                out.update({k: v[0] if isinstance(v, tuple) and len(v) == 3 else v for k, v in spread.items()})
        return out

    def _find_dataclass(self, name: str):
        """(reader, class) for a called @dataclass of the tree, defined here or imported."""
        if name in self.dataclasses:
            return self, self.dataclasses[name]
        parts = name.split(".")
        if self.project is None or len(parts) != 1 or name not in self.imports:
            return None
        module, attr = self.imports[name]
        reader = self.project.module_reader(module, self.path) if attr is not None else None
        if reader is not None and attr in reader.dataclasses:
            return reader, reader.dataclasses[attr]
        return None

    def _record(self, found, node: ast.Call, frame: Frame) -> Record:
        reader, cls = found
        fields: dict = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                default = stmt.value
                if default is None:
                    fields[stmt.target.id] = Unknown(f"{cls.name}.{stmt.target.id} has no default")
                elif isinstance(default, ast.Call) and _call_name(default.func).endswith("field"):
                    factory = next((k.value for k in default.keywords if k.arg == "default_factory"), None)
                    literal = next((k.value for k in default.keywords if k.arg == "default"), None)
                    fields[stmt.target.id] = ({} if _call_name(factory) == "dict" else [] if _call_name(factory)
                                              == "list" else Unknown(f"{cls.name}.{stmt.target.id} default")) \
                        if factory is not None else reader._eval(literal, Frame(names=dict(reader.constants))) \
                        if literal is not None else Unknown(f"{cls.name}.{stmt.target.id}")
                else:
                    fields[stmt.target.id] = reader._eval(default, Frame(names=dict(reader.constants)))
        names = list(fields)
        for index, arg in enumerate(node.args):
            if index < len(names) and not isinstance(arg, ast.Starred):
                fields[names[index]] = self._eval(arg, frame)
        fields.update(self._call_keywords(node, frame))
        return Record(cls.name, fields)

    def _hf_model_section(self, model: HFModel, node: ast.Call) -> ConfigObj:
        """The model section Bridge builds from a Hugging Face config: its sizes when offlint can know them."""
        text = self._segment(node)
        found = model_sizes(model.model_id, Path(self.path).parent)
        if self.project is not None:
            self.project.touched.update(str(path) for path in config_candidates(model.model_id, Path(self.path).parent))
        # Fields the Hugging Face config does not map (offloading, recompute, parallelism) keep the provider's
        # dataclass defaults, as in Bridge; the sizes it maps are known only from a config.json or the table.
        obj = ConfigObj("section", "default", "model")
        if found is None:
            reason = Unknown(f"{model.model_id} is not in offlint's table of public models and no local "
                             f"config.json was found")
            for key in HF_SIZE_KEYS:
                obj.values[key.split(".", 1)[1]] = Assignment(key, reason, self._loc(node), Source.PYTHON, text,
                                                              tuple(self.via_stack))
            return obj
        sizes, origin = found
        loc = self._loc(node)
        for key, value in sizes.items():
            section, _, field_name = key.partition(".")
            if section == "model" and field_name:
                obj.values[field_name] = Assignment(key, value, loc, Source.PYTHON, text, (*self.via_stack, origin))
        return obj

    def _tree_mutator(self, target, node: ast.Call, frame: Frame):
        """Run a mutator's source from the tree on the config objects passed to it. If that leaves a key
        depending on a branch offlint cannot decide there (Bridge's cuda-graph helpers branch on whether the
        installed megatron-core has `CudaGraphModule`), undo it and return _UNDECIDED: the version-aware model
        decides instead."""
        receivers = [v for v in (self._eval(a, frame) for a in [*node.args, *(k.value for k in node.keywords)]
                                 if isinstance(a, (ast.Name, ast.Attribute))) if isinstance(v, ConfigObj)]
        before = [(obj, obj.copy()) for obj in receivers]
        result = self._call(target[0], target[1], node, frame)
        if any(_branch_dependent(obj, old) for obj, old in before):
            for obj, old in before:
                _restore(obj, old)
            return _UNDECIDED
        return result

    def _env_update(self, node: ast.Call, frame: Frame):
        """`cfg.env_vars.update({...})`: the entries join the recipe's environment (a literal dict only)."""
        chain = _attr_chain(node.func.value)
        if not chain or chain[-1] != "env_vars" or len(node.args) != 1 or node.keywords:
            return _UNDECIDED
        owner = frame.names.get(chain[0]) if len(chain) == 2 else None
        if not isinstance(owner, ConfigObj) or owner.kind != "container":
            return _UNDECIDED
        value = self._eval(node.args[0], frame)
        if not isinstance(value, dict) or isinstance(value, PartialDict):
            owner.env_unknown = owner.env_unknown or f"cfg.env_vars updated from `{self._segment(node.args[0])}`"
            return None
        if owner.env is None:
            owner.env = {}
            if owner.base != "default":  # the entries before the update are the unknown base's
                owner.env_unknown = owner.env_unknown or f"cfg.env_vars is only updated here ({self._segment(node)})"
        owner.env.update(self._env_dict(node.args[0], value, self._loc(node)))
        return None

    def _apply_mutator(self, name: str, node: ast.Call, frame: Frame):
        """A Bridge library mutator: its documented effects on the config object passed first (returns None)."""
        first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("config", "cfg")),
                                                    None)
        receiver = self._eval(first, frame) if first is not None else None
        if not isinstance(receiver, ConfigObj):
            return None
        modules = None
        if name == "set_cuda_graph_modules":
            given = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords
                                                                 if k.arg == "modules"), None)
            modules = bridge_mutators.member_names(self._module_names(given, frame)) if given is not None else \
                Unknown("set_cuda_graph_modules() without modules")
        loc, text = self._loc(node), self._segment(node)
        via = (*self.via_stack, f"by {name}() at {self.path}:{node.lineno}")
        for key, value in bridge_mutators.effects(name, modules):
            section, field_name = key.split(".", 1)
            if section == "env":
                if receiver.kind != "container":
                    continue
                if receiver.env is None:
                    # Only these variables are known: the rest of the launch environment is the shell's.
                    receiver.env = {}
                    receiver.env_unknown = receiver.env_unknown or f"cfg.env_vars is only updated by {name}()"
                receiver.env[field_name] = Assignment(key, value, loc, Source.ENV, text, via)
                continue
            target = receiver.child(section) if receiver.kind == "container" else receiver
            if target.kind == "section" and target.section in ("", section):
                target.values[field_name] = Assignment(key, value, loc, Source.PYTHON, text, via)
        return None

    def _module_names(self, node, frame: Frame):
        """CUDA graph modules as written: `[CudaGraphModule.attn, "mlp"]` -> ["attn", "mlp"]."""
        if isinstance(node, (ast.List, ast.Tuple)):
            names = []
            for element in node.elts:
                if isinstance(element, ast.Attribute):
                    names.append(element.attr)
                else:
                    value = self._eval(element, frame)
                    if not isinstance(value, str):
                        return Unknown(f"`{self._segment(element)}` is not a module name")
                    names.append(value)
            return names
        if isinstance(node, ast.Attribute) and _attr_chain(node) and _attr_chain(node)[0] in ("CudaGraphModule",
                                                                                             "CudaGraphScope"):
            return [node.attr]
        return self._eval(node, frame)

    def _call(self, reader: "PythonReader", fn: ast.FunctionDef, call: ast.Call, frame: Frame):
        """Follow a function (of this file or another): bind the arguments evaluated here, run it there."""
        positional = [self._eval(a, frame) for a in call.args if not isinstance(a, ast.Starred)]
        keywords = self._call_keywords(call, frame)
        where = "" if reader is self else f" in {reader.path}"
        entry = (f"via {fn.name}(){where} at line {call.lineno}" if not where else
                 f"via {fn.name}(){where}, called at {self.path}:{call.lineno}")
        key = _cache_key(reader.path, fn.name, positional, keywords)
        if key is None or self.project is None:
            self.via_stack.append(entry)
            try:
                return reader.run_function(fn, positional, keywords, frame.depth + 1)
            finally:
                self.via_stack.pop()
        # Base builders and inherited recipes are called with the same (literal) arguments again and again:
        # run each once, with provenance relative to the call, and hand every caller its own copy.
        def compute():
            outer = self.via_stack[:]
            self.via_stack[:] = []
            try:
                return reader.run_function(fn, positional, keywords, frame.depth + 1)
            finally:
                self.via_stack[:] = outer

        return _copy_result(self.project.call_result(key, compute), (*self.via_stack, entry))

    def run_function(self, fn: ast.FunctionDef, positional: list, keywords: dict, depth: int):
        sub = Frame(names=dict(self.constants), depth=depth)
        self._bind_params(fn, sub, positional, keywords)
        self._run_block(fn.body, sub)
        result = sub.returned
        return result if result is not None else Unknown(f"{fn.name}() returns no value")

    def recipe_unit(self, name: str, location: Location, built: ConfigObj) -> Unit:
        """A configuration another program built with this reader's help (a launcher's recipe selection),
        flattened into a recipe unit."""
        return self._unit(name, location, [built])

    def run_stepwise(self, fn: ast.FunctionDef, positional: list, keywords: dict, depth: int = 1):
        """Run a function one top-level statement at a time, yielding each statement once it has run (so a
        caller can tell which statement made which change: perf_scripts attributes config writes to flags)."""
        frame = Frame(names=dict(self.constants), depth=depth)
        self._bind_params(fn, frame, positional, keywords)
        for stmt in fn.body:
            if frame.returned is not None:
                return
            self._run_block([stmt], frame)
            yield stmt

    def _bind_params(self, fn: ast.FunctionDef, frame: Frame, positional: list, keywords: dict) -> None:
        params = fn.args
        ordered = [*params.posonlyargs, *params.args]
        defaults = dict(zip([p.arg for p in ordered][len(ordered) - len(params.defaults):], params.defaults))
        defaults.update({p.arg: d for p, d in zip(params.kwonlyargs, params.kw_defaults) if d is not None})
        for index, param in enumerate(ordered):
            if index < len(positional):
                frame.names[param.arg] = positional[index]
            elif param.arg in keywords:
                frame.names[param.arg] = keywords[param.arg]
            else:
                frame.names[param.arg] = self._param_default(param.arg, defaults.get(param.arg), fn)
        for param in params.kwonlyargs:
            frame.names[param.arg] = keywords[param.arg] if param.arg in keywords else \
                self._param_default(param.arg, defaults.get(param.arg), fn)
        if params.vararg is not None:
            frame.names[params.vararg.arg] = Unknown(f"`{params.vararg.arg}` collects arbitrary arguments")
        if params.kwarg is not None:
            # `**user_kwargs: Unpack[...]` recipes: the keywords no named parameter took (none when the recipe is
            # checked on its own), as a literal dict so `{**recommended_kwargs, **user_kwargs}` stays readable.
            named = {p.arg for p in (*ordered, *params.kwonlyargs)}
            extra = {k: v for k, v in keywords.items() if k not in named}
            if any(isinstance(v, Unknown) for v in extra.values()):
                frame.names[params.kwarg.arg] = Unknown(f"`{params.kwarg.arg}` collects arbitrary arguments")
            else:
                frame.names[params.kwarg.arg] = {k: (v, None, repr(v)) for k, v in extra.items()}

    # ---- names from other modules ----------------------------------------------------------------------

    def _find_function(self, name: str):
        """(reader, function) for a called name: defined here, or imported (through aliases and re-exports)."""
        if name in self.functions:
            return self, self.functions[name]
        parts = name.split(".")
        if self.project is None or parts[0] not in self.imports:
            return None
        module, attr = self.imports[parts[0]]
        if attr is None:  # `import pkg.mod as m; m.f()`
            if len(parts) < 2:
                return None
            module, attr = ".".join([module, *parts[1:-1]]), parts[-1]
        elif len(parts) > 1:  # `from pkg import mod; mod.f()`
            module, attr = ".".join([module, attr, *parts[1:-1]]), parts[-1]
        found = self._exported(module, attr, set())
        if found is not None and found[1] == "function":
            return found[0], found[2]
        return None

    def definition_of(self, name: str):
        """(path, function name) where a name this module defines or imports (through `x as name` aliases and
        re-exports) is defined in the tree; None when it is not a function of the tree."""
        self.prepare()
        found = self._find_function(name)
        return (found[0].path, found[1].name) if found is not None else None

    def _imports_training_entry_point(self, name: str) -> bool:
        """`pretrain` imported from Bridge's training package (decided from the import, without reading it)."""
        parts = name.split(".")
        if parts[-1] not in bridge_mutators.TRAINING_ENTRY_POINTS or parts[0] not in self.imports:
            return False
        module, attr = self.imports[parts[0]]
        defining_module = ".".join(p for p in [module, attr if len(parts) > 1 else None, *parts[1:-1]] if p)
        return bridge_mutators.is_training_entry_point(parts[-1], defining_module)

    def _imported_value(self, name: str):
        if self.project is not None and name in self.imports:
            module, attr = self.imports[name]
            if attr is not None:
                found = self._exported(module, attr, set())
                if found is not None and found[1] == "value":
                    return found[2]
        return Unknown(f"`{name}` is not defined in this file" if name not in self.imports else
                       f"`{name}` is imported from a module offlint did not find or read")

    def _exported(self, module: str, attr: str, seen: set):
        """What `from module import attr` gives: (reader, "function", fn) or (reader, "value", v), following
        aliases and re-exports through other modules (`__init__.py`)."""
        if (module, attr) in seen or len(seen) > 16:
            return None
        seen.add((module, attr))
        reader = self.project.module_reader(module, self.path)
        if reader is None:
            return None
        if attr in reader.functions:
            return reader, "function", reader.functions[attr]
        if attr in reader.constants:
            return reader, "value", reader.constants[attr]
        if attr in reader.imports:
            next_module, next_attr = reader.imports[attr]
            if next_attr is not None:
                return reader._exported(next_module, next_attr, seen)
        return None

    def _param_default(self, name: str, default, fn: ast.FunctionDef):
        if default is None:
            annotation = next((a.annotation for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
                               if a.arg == name), None)
            if python_inputs.is_namespace_annotation(annotation):  # `def main(args: argparse.Namespace)`
                return python_inputs.namespace(f"parameter `{name}` of {fn.name}()", self._declared_options())
            return Unknown(f"parameter `{name}` of {fn.name}()")
        return self._eval(default, Frame(names=dict(self.constants)))

    # ---- positions and source text ---------------------------------------------------------------------

    def _column(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; editors count characters."""
        raw = self.lines[line - 1] if 0 < line <= len(self.lines) else b""
        if raw.isascii():
            return byte_offset + 1
        return len(raw[:byte_offset].decode("utf-8", "replace")) + 1

    def _loc(self, node) -> Location:
        return Location(self.path, node.lineno, self._column(node.lineno, node.col_offset))

    def _name_loc(self, fn) -> Location:
        """Where a function's name is (ast points at `def`, or at its first decorator's line)."""
        raw = self.lines[fn.lineno - 1] if 0 < fn.lineno <= len(self.lines) else b""
        offset = raw.find(fn.name.encode(), fn.col_offset)
        return Location(self.path, fn.lineno, self._column(fn.lineno, offset if offset >= 0 else fn.col_offset))

    def _segment(self, node) -> str:
        """The source text of a node (as written, for messages)."""
        start, end = node.lineno, getattr(node, "end_lineno", None) or node.lineno
        if start == end:
            return self.lines[start - 1][node.col_offset:node.end_col_offset].decode("utf-8", "replace")
        parts = [self.lines[start - 1][node.col_offset:]] + self.lines[start:end - 1] + \
            [self.lines[end - 1][:node.end_col_offset]]
        return b"".join(parts).decode("utf-8", "replace")


def _freeze(value):
    if isinstance(value, ConfigObj) or isinstance(value, dict):
        raise TypeError
    if isinstance(value, OneOf):
        return "one of", value.reason, tuple((_freeze(v), steps) for v, steps, _, _ in value.paths)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    hash(value)
    return value


def _cache_key(path: str, name: str, positional: list, keywords: dict):
    """A key for a call whose arguments are plain values (config objects make a call uncacheable)."""
    try:
        return path, name, tuple(_freeze(v) for v in positional), tuple(sorted(
            (k, _freeze(v)) for k, v in keywords.items()))
    except TypeError:
        return None


def _copy_result(value, prefix: tuple):
    """A caller's own copy of a cached call result, its provenance prefixed with the caller's chain."""
    if isinstance(value, ObjectTuple):
        return ObjectTuple(_copy_result(item, prefix) for item in value)
    if not isinstance(value, ConfigObj):
        return value
    copy = value.copy()
    for obj in (copy, *copy.children.values()):
        obj.values = {k: _prefixed(a, prefix) for k, a in obj.values.items()}
    copy.top = {k: _prefixed(a, prefix) for k, a in copy.top.items()}
    if copy.env is not None:
        copy.env = {k: _prefixed(a, prefix) for k, a in copy.env.items()}
    return copy


def _prefixed(a: Assignment, prefix: tuple) -> Assignment:
    return Assignment(a.key, a.value, a.location, a.source, a.text, (*prefix, *a.via), a.op)


# ---- helpers ---------------------------------------------------------------------------------------------


def _attr_chain(node) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
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


def _field(obj: ConfigObj, name: str, text: str):
    """A field read from a section object: its value when this code set it; when it did not and the section was
    built here, the dataclass default if every known megatron-core release agrees on it; else unknown."""
    if name in obj.values:
        return obj.values[name].value
    if obj.base == "default" and obj.section:
        default = keys.default_in_every_version(f"{obj.section}.{name}")
        if default is not keys.NO_COMMON_DEFAULT:
            return list(default) if isinstance(default, list) else default
        return Unknown(f"`{text}` is not set here and its default depends on the megatron-core version")
    return obj.base if isinstance(obj.base, Unknown) else Unknown(f"`{text}` is not set here")


def _writes_through(body, root: str) -> bool:
    """Whether a block assigns an attribute of `root` (`root.optimizer.x = ...`) anywhere in it."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            chain = _attr_chain(target) if isinstance(target, ast.Attribute) else None
            if chain and chain[0] == root:
                return True
    return False


def _statements(body):
    """Every statement in a block, nested blocks included (no expressions: cheaper than ast.walk)."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def _branch_dependent(obj: ConfigObj, before: ConfigObj) -> bool:
    """Whether a call left a key of `obj` (or of its sections) unknown or depending on a branch, or tainted it."""
    if obj.base is not before.base and isinstance(obj.base, Unknown):
        return True
    if any(isinstance(a.value, Unknown) and before.values.get(k) is not a for k, a in obj.values.items()):
        return True
    return any(_branch_dependent(child, before.children.get(section) or ConfigObj("section", child.base, section))
               for section, child in obj.children.items())


def _restore(obj: ConfigObj, old: ConfigObj) -> None:
    """Put an object back as it was before a call, in place (names bound to it or its sections keep seeing it)."""
    obj.base, obj.values, obj.top = old.base, dict(old.values), dict(old.top)
    obj.env, obj.env_unknown, obj.env_location = old.env, old.env_unknown, old.env_location
    for section in list(obj.children):
        if section in old.children:
            _restore(obj.children[section], old.children[section])
        else:
            del obj.children[section]


def _framework(objects: list[ConfigObj]) -> str:
    """A unit that builds megatron-core's own config classes and no Bridge container or class is a megatron-core
    program: its configs are read by megatron-core's consumers one by one, not synced as Bridge does."""
    origins = {o.origin for o in objects} | {c.origin for o in objects for c in o.children.values()}
    if "megatron-core" in origins and "bridge" not in origins and all(o.kind == "section" for o in objects):
        return "megatron-core"
    return "bridge"


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


def parse(path: str, text: str) -> ast.Module:
    return ast.parse(text, filename=path)


def read_python(path: str, text: str, project=None) -> list[Unit]:
    """Parse one Python file and return its units. Raises SyntaxError (or ValueError) on invalid source."""
    if project is not None:
        reader = project.reader(path)  # already read when another file imported it
        if reader is None:
            module = parse(path, text)  # a syntax error is reported for the file being linted
            reader = project.reader(path, text, module)
        if reader is not None:
            return reader.units()
    return PythonReader(path, parse(path, text), text).units()
