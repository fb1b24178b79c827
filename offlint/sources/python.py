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

Where each part lives (one room each; `PythonReader` is assembled from the mixins):

- python (here): `read_python`, `PythonReader` (a module's functions, constants and units), positions.
- python_statements: blocks, `if` (decided or split into paths), loops, assignments and key writes.
- python_expressions: expressions to values: literals, names, f-strings, comprehensions, attribute reads,
  the calls known without following them (python_calls: builtins, string methods, `getattr`).
- python_call_effects: every other call: which kind it is, Bridge's mutators, `setattr` and `env_vars.update` on
  a config, writes into a local dict or list, and the taint of a call offlint cannot follow.
- python_constructors: config classes and `ConfigContainer(...)` with the tree's defaults, Hugging Face model
  sections, dataclass records.
- python_following: calls followed into functions (arguments bound, results cached), decorator registries.
- python_names: imports, and what an imported name is (through aliases and `__init__.py` re-exports).
- python_configs: config classes, sections and fields, defaults of unset fields, unknown bases.
- python_values (the values), python_branches (merging paths), python_project (the tree's modules),
  python_inputs (argparse values), python_roles (what runs on its own), python_syntax (`ast` helpers).
"""

from __future__ import annotations

import ast
import re
from operator import attrgetter

from offlint.sources import bridge_precision, python_inputs, python_roles
from offlint.sources.python_branches import settle_early
from offlint.sources.python_call_effects import CallEffects
from offlint.sources.python_configs import SECTIONS_OF_CONTAINER, _dedupe, _framework, _note_base
from offlint.sources.python_constructors import Constructors
from offlint.sources.python_expressions import Expressions
from offlint.sources.python_following import CallFollowing
from offlint.sources.python_names import NameLookup
from offlint.sources.python_statements import Statements
from offlint.sources.python_syntax import FUNCTIONS, TRY, _call_name, _statements, main_block
from offlint.sources.python_values import ConfigObj, Frame, PartialDict, Registry, configs_in, new_location
from offlint.types import InputError, Layer, Location, Unit, UnitKind, Unknown

# Names that make a file worth parsing at all (a cheap prefilter; the keys rules read plus config classes), and a
# function worth reading as a unit. Each is looked for as a plain substring, the ones most of Megatron Bridge's
# files hold first: three times faster than one regex of the alternatives (the 1,713 files of Bridge 067f987:
# 0.065 s against 0.19 s; same answers).
_RELEVANT = (b"bf16", b"num_layers", b"Config(", b"pipeline_model_parallel", b"Provider(", b"recompute", b"env_vars",
             b"cuda_graph", b"distributed_optimizer", b"fp16", b"offload", b"precision_aware",
             b"PYTORCH_CUDA_ALLOC_CONF", b"transformer_impl",
             # a script that builds a recipe with a few arguments and trains it (`cfg = llama32_1b_pretrain_config(
             # seq_length=...)`, `pretrain(cfg, forward_step)`: Bridge's own tutorials, a fork's Slurm launcher)
             b"tensor_model_parallel", b"micro_batch_size", b"pretrain(", b"finetune(")
# A function of a file worth parsing is also a unit when it names this (a recipe's return annotation): a recipe that
# builds its config by helpers alone (Bridge's old-layout Qwen3.5-VL PEFT recipes; 1,159 -> 1,188 units on
# 067f987). A file is worth parsing for it only where a function returns one (`-> ConfigContainer`): 26 more of
# Bridge's files (the training loop's) name it, none in a return annotation and none a recipe; a file of recipes
# that call helpers alone was read when a pre-commit run named it, and not in a check of the whole tree.
_RECIPE_ANNOTATION = b"ConfigContainer"
_RETURNS_CONTAINER = re.compile(rb"->\s*[\"']?(?:[\w.]*\.)?ConfigContainer\b")


def may_give_units(data: bytes) -> bool:
    """Whether a file found by walking the tree is parsed: it names a key or class the rules read, or a function of
    it returns a ConfigContainer."""
    return worth_parsing(data) or data.find(_RECIPE_ANNOTATION) != -1 and _RETURNS_CONTAINER.search(data) is not None


def worth_parsing(data: bytes) -> bool:
    # (bytes.find, not `in`: CPython 3.11's bytes `in` first tries its operand as an integer, raising and clearing a
    # TypeError for every word looked for)
    find = data.find
    for word in _RELEVANT:
        if find(word) != -1:
            return True
    return False


class PythonReader(Statements, Expressions, CallEffects, Constructors, CallFollowing, NameLookup):
    """One module's reader: its functions, imports and constants, and the units its functions build."""

    def __init__(self, path: str, module: ast.Module, text: str, project=None):
        self.path = path
        self.module = module
        self.project = project  # a PythonProject: follow imports into the rest of the tree
        self.lines = _lines(text)
        self._ascii = text.isascii()  # then every column is its byte offset + 1 (_column)
        self.constants: dict[str, object] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        # The calls being followed, outermost first (shared across the project's files).
        self.via_stack: list[str] = project.via_stack if project is not None else []
        self.dataclasses: dict[str, ast.ClassDef] = {}  # @dataclass classes: calls build Records
        self._module_objects: list[ConfigObj] | None = None
        self._options: dict[str, tuple[str, ...]] | None = None  # argparse dest -> option strings
        self._own_options: dict[str, tuple[str, ...]] | None = None  # those this module declares
        # Per statement of this module (by what is kept and the node's id, the node kept beside to check it is that
        # one): what its syntax and this file's text alone give, built on its first run (python_statements: an
        # `if`'s or a loop's split). One node may hold several (an `if` whose test is a comprehension).
        self._static: dict[tuple[str, int], tuple] = {}
        self._unrolled = 0  # loops being run pass by pass, one inside another (python_statements._loop_passes)
        self._segments: dict[int, tuple] = {}  # _segment's texts, the same way
        self._call_names: dict[int, tuple] = {}  # a call's name as written and its last part (python_call_effects)
        self._chains: dict[int, tuple] = {}  # an attribute chain's names and its text (python_expressions, _assign)
        self._params: dict[int, tuple] = {}  # a function's parameters in order and their defaults (the same)
        self._names_cuda: bool | None = None  # the text names `torch.cuda` (python_statements._tests_machine)

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
        body = self.module.body
        entry = body[-1] if body and _calls_own_functions(body[-1], body) else None
        self._module_objects = self._run_block(body[:-1] if entry is not None else body, top)
        if entry is not None and next(configs_in(top.names.values()), None) is not None:
            self._module_objects += self._run_block([entry], top)  # (the calls may change a config it holds)
        for name, value in top.names.items():
            if not isinstance(value, ConfigObj):
                self.constants[name] = value
        self._note_registries()
        self._note_outside_writes()

    def _note_outside_writes(self) -> None:
        """Module dicts other modules of the tree add entries to as they are imported (LLaVA-OneVision-2's
        ov2_qwen35.py: `from .ov2 import _OV2_BACKBONES` then `_OV2_BACKBONES.setdefault("qwen3.5-35b-a3b", ...)`):
        the entries written here are known, and a key they lack may still be there when the recipe runs."""
        if self.project is None:
            return
        folder = self.path.rpartition("/")[0]  # (its package: module_index.ModuleIndex.writers)
        for name, value in self.constants.items():
            if type(value) is dict:
                writers = [(path, replaces) for path, replaces in self.project.writers(folder, name)
                           if path != self.path]
                if writers:
                    reason = f"`{name}` also gets entries from {writers[0][0]} as it is imported"
                    # setdefault keeps the entries written here (known, as a registry's); update or `[k] =` may not
                    if any(replaces for _, replaces in writers):
                        self.constants[name] = PartialDict(value, reason)
                        continue
                    added: dict = {}
                    for path, _ in writers:
                        for key, entry in _set_by_default(self.project, path, name).items():
                            added.setdefault(key, entry)  # (the first import's setdefault wins; order unknown)
                    self.constants[name] = Registry({**added, **value}, reason)

    def own_options(self) -> dict[str, tuple[str, ...]]:
        """The argparse options this module declares, walked for once: every module that imports from it asks, and
        a module whose text never says `add_argument` declares none (no walk of its tree)."""
        if self.project is not None:
            self.project.touched.add(self.path)  # read from the whole module, not one function of it
        if self._own_options is None:
            mentions = b"".join(self.lines).find(b"add_argument") != -1  # (no line break inside the word)
            self._own_options = python_inputs.declared_options(self.module, self.lines) if mentions else {}
        return self._own_options

    def units(self) -> list[Unit]:
        if python_roles.is_test_code(self.path) and python_roles.is_test_module(self.path, b"".join(self.lines)):
            return []  # test code runs only under pytest: neither a launch nor a recipe (python_roles)
        if python_roles.imports_another_framework(self.module):
            return []  # another framework's job: its configs are that framework's
        self.prepare()
        module_objects = self._module_objects or []
        units: list[Unit] = []
        if module_objects:
            units.append(self._unit("<module>", self._loc(self.module.body[0]) if self.module.body else
                                    Location(self.path, 1, 1), module_objects))
        for name, node in self.functions.items():
            if not self._mentions_config(node):
                continue  # no config key or config class in its text: nothing to report on its own
            unit = self._unit_of(name, node)
            if unit is not None:
                units.append(unit)
        for stmt in self.module.body:
            if isinstance(stmt, ast.ClassDef):
                for method in stmt.body:
                    if isinstance(method, FUNCTIONS) and self._mentions_config(method):
                        unit = self._unit_of(f"{stmt.name}.{method.name}", method)
                        if unit is not None:
                            units.append(unit)
        return units

    def _unit_of(self, name: str, node: ast.FunctionDef) -> Unit | None:
        """A function's unit, through the project: still valid from the cache, or read now with what it used noted
        (PythonProject.function_unit)."""
        if self.project is None:
            return self._function_unit(name, node)
        return self.project.function_unit(self.path, name, lambda: self._function_unit(name, node))

    def _mentions_config(self, node) -> bool:
        end = getattr(node, "end_lineno", None) or node.lineno
        text = b"".join(self.lines[node.lineno - 1:end])
        return worth_parsing(text) or text.find(_RECIPE_ANNOTATION) != -1

    def _function_unit(self, name: str, node: ast.FunctionDef) -> Unit | None:
        """Run one function on its own (parameters at their defaults) and flatten what it built."""
        frame = Frame(names=dict(self.constants))
        self._bind_params(node, frame, [], {})
        # (a run that raised keeps what it built before: a launcher's `main()` that raised on a value offlint
        # assumed, an unset WORLD_SIZE, still names the recipe it built)
        objects = self._run_block(node.body, frame)
        settle_early(frame)
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
        overridden: set[str] = set()
        env_known = False  # cfg.env_vars assigned from a literal
        env_default = False  # a ConfigContainer built here and never given env_vars: Bridge's empty default
        env_unknown = ""
        env_location = None
        for obj in objects:
            sections = obj.children if obj.kind == "container" else {obj.section: obj}
            if obj.kind == "container":
                for section in SECTIONS_OF_CONTAINER:
                    if section not in sections:
                        _note_base(section, obj.base, default_sections, unknown_sections, overridden)
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
                _note_base(section, child.base, default_sections, unknown_sections, overridden)
                layer.assignments.extend(child.values.values())
        if env_unknown:
            env_known = False
            unknown_sections["env"] = f"cfg.env_vars is not a literal: {env_unknown}"
        elif env_known:
            default_sections.add("env")
        else:
            unknown_sections["env"] = "the launch environment is not defined in this recipe"
        layer.assignments.sort(key=_BY_PLACE)
        unit = Unit(name=name, kind=UnitKind.RECIPE, location=location, layers=[layer],
                    default_sections=frozenset(default_sections), unknown_sections=unknown_sections,
                    overridden_sections=frozenset(s for s in overridden if s in unknown_sections),
                    launches_training=env_known, env_known=env_known, env_location=env_location,
                    env_unset=env_default and not env_known and not env_unknown, framework=_framework(objects))
        bridge_precision.attach(unit, self.project, self.path)  # read here, so the unit's reuse depends on it
        return unit

    def _column(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; editors count characters."""
        raw = self.lines[line - 1] if 0 < line <= len(self.lines) else b""
        if raw.isascii():
            return byte_offset + 1
        return len(raw[:byte_offset].decode("utf-8", "replace")) + 1

    def _loc(self, node) -> Location:
        if self._ascii:  # (what _column gives on any line of an ASCII text)
            return new_location(self.path, node.lineno, node.col_offset + 1)
        return new_location(self.path, node.lineno, self._column(node.lineno, node.col_offset))

    def _name_loc(self, fn) -> Location:
        """Where a function's name is (ast points at `def`, or at its first decorator's line)."""
        raw = self.lines[fn.lineno - 1] if 0 < fn.lineno <= len(self.lines) else b""
        offset = raw.find(fn.name.encode(), fn.col_offset)
        return Location(self.path, fn.lineno, self._column(fn.lineno, offset if offset >= 0 else fn.col_offset))

    def _segment(self, node) -> str:
        """The source text of a node (as written, for messages): cut from the lines once per node (a function
        followed from many callers, or branching on many `if`s, asks again for the same nodes' texts)."""
        held = self._segments.get(id(node))
        if held is not None and held[0] is node:
            return held[1]
        start, end = node.lineno, getattr(node, "end_lineno", None) or node.lineno
        if start == end:
            text = self.lines[start - 1][node.col_offset:node.end_col_offset].decode("utf-8", "replace")
        else:
            parts = [self.lines[start - 1][node.col_offset:]] + self.lines[start:end - 1] + \
                [self.lines[end - 1][:node.end_col_offset]]
            text = b"".join(parts).decode("utf-8", "replace")
        self._segments[id(node)] = (node, text)  # (the node kept with it: an id is only unique while it lives)
        return text


_BY_PLACE = attrgetter("location.line", "location.col")  # an assignment's (line, column): the order of a unit's

# The line breaks str.splitlines knows besides "\n", "\r" and "\r\n" (bytes.splitlines knows only those three)
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


_ASCII_BREAKS = "\x0b\x0c\x1c\x1d\x1e"  # those of them an ASCII text can hold


def _lines(text: str) -> list[bytes]:
    """`text`'s lines (line ends kept) as UTF-8, split where str.splitlines splits: the encoded text split by
    bytes.splitlines where only "\n" and "\r" break lines (UTF-8 writes them as those bytes and no other character
    holds either), else each line encoded. An ASCII text (most) is searched for the five other breaks it can hold
    one character at a time (a memchr each), not by the pattern's character class (a set test per character)."""
    if not (any(ch in text for ch in _ASCII_BREAKS) if text.isascii() else _OTHER_BREAKS.search(text) is not None):
        return text.encode("utf-8").splitlines(keepends=True)
    return [line.encode("utf-8") for line in text.splitlines(keepends=True)]


def _calls_own_functions(stmt: ast.stmt, body: list[ast.stmt]) -> bool:
    """Whether `stmt`, a module's last statement, is an `if __name__ == "__main__":` block that only calls functions
    the module defines, without arguments (`main()`, `sys.exit(main())`). Such a block is not run with the module
    body (PythonReader.prepare): what its calls build is read where it is built, in the called function's own unit
    (a run with its parameters at their defaults, as the call makes it) or in the units of the functions that one
    calls; the block drops the calls' values, and an importer never runs it. Run with the body, Megatron Bridge
    067f987's 72 such blocks (`main()` of its example and performance scripts) added nothing to any unit, and a cold
    check made 5% more calls (22.15 M against 20.99 M). Where the module holds a config object the calls could
    change, the block is still run, after the rest of the body, as before."""
    if not main_block(stmt) or stmt.orelse or not stmt.body:
        return False
    own = {node.name for node in body if isinstance(node, FUNCTIONS)}
    for inner in stmt.body:
        call = inner.value if isinstance(inner, ast.Expr) else None
        if isinstance(call, ast.Call) and _call_name(call.func) == "sys.exit" and len(call.args) == 1 \
                and not call.keywords:
            call = call.args[0]  # `sys.exit(main())`
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in own
                and not call.args and not call.keywords):
            return False
    return True


def parse(path: str, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except MemoryError:  # how CPython's parser gives up on deep nesting (`x = ------...1`, a million signs)
        raise InputError("Python source nested too deeply for Python's own parser (it gave up); offlint does not "
                         "read it") from None


def read_python(path: str, text: str, project=None) -> list[Unit]:
    """Parse one Python file and return its units. Raises SyntaxError (or ValueError) on invalid source."""
    if python_roles.is_test_code(path) and python_roles.is_test_module(path, text.encode("utf-8", "replace")):
        # Test code gives no units (python_roles): parsed for its syntax errors only (unless another file's import
        # read it already), never run, its tree not kept: a tenth of a cold check of Megatron Bridge ran the
        # module bodies of its tests for nothing.
        if project is None or not project.has_reader(path):
            parse(path, text)
        return []
    if project is not None:
        reader = project.reader(path)  # already read when another file imported it
        if reader is None:
            module = parse(path, text)  # a syntax error is reported for the file being linted
            reader = project.reader(path, text, module)
        if reader is not None:
            units = reader.units()
            reader.note_reexports()
            return units
    return PythonReader(path, parse(path, text), text).units()


def note_reexports(path: str, text: str, project) -> None:
    """What the names a file not read for units (not `worth_parsing`) imports `as` others lead to, noted as used
    (NameLookup.note_reexports): only its imports are read, its module body is not run, and a file that does not
    parse gives nothing (its syntax errors are not reported for a file read for no units)."""
    reader = project.read_already(path)
    if reader is None:
        try:
            module = parse(path, text)
        except (SyntaxError, ValueError, RecursionError):
            return
        reader = PythonReader(path, module, text, project=project)
        for stmt in module.body:
            for node in _statements([stmt]) if isinstance(stmt, (ast.If, *TRY)) else [stmt]:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    reader._note_import(node)
    reader.note_reexports()


def _set_by_default(project, path: str, name: str) -> dict:
    """The rows a writer module adds to the dict `name` at module level with `name.setdefault(KEY, {...})`, as the
    reader stores a dict literal's entries (value, where, text): KEY a literal string or a string constant of that
    module, each field's value a literal (anything else is unknown). Read without running the module (its own
    imports may come from the module being prepared)."""
    module = project.parsed(path)
    text = project.text(path) or ""
    if module is None:
        return {}
    strings = {stmt.targets[0].id: stmt.value.value for stmt in module.body
               if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
               and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)}
    rows: dict = {}
    for stmt in module.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "setdefault"
                and isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 2
                and not call.keywords):
            continue
        key_node, value_node = call.args
        key = key_node.value if isinstance(key_node, ast.Constant) else \
            strings.get(key_node.id) if isinstance(key_node, ast.Name) else None
        if not isinstance(key, str) or not isinstance(value_node, ast.Dict) or None in value_node.keys:
            continue  # (a spread in the row: what it holds is not read here)
        row: dict = {}
        for field_node, item in zip(value_node.keys, value_node.values):
            if not (isinstance(field_node, ast.Constant) and isinstance(field_node.value, str)):
                continue
            try:
                value = ast.literal_eval(item)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = Unknown(f"`{name}[{key!r}][{field_node.value!r}]` is computed in {path}")
            row[field_node.value] = (value, Location(path, field_node.lineno, field_node.col_offset + 1),
                                     ast.get_source_segment(text, item) or "")
        rows.setdefault(key, (row, Location(path, key_node.lineno, key_node.col_offset + 1),
                              ast.get_source_segment(text, value_node) or ""))
    return rows
