"""Names in the Python reader: the module's imports (also under `try:`/`if`, and inside functions), and what
an imported name is (a function or a value of another module of the tree, followed through aliases and
`__init__.py` re-exports; python_project finds the module), or which library it comes from.
"""

from __future__ import annotations

import ast
import bisect
import re

from offlint.sources import bridge_mutators, python_calls
from offlint.sources.python_syntax import FUNCTIONS, _statements
from offlint.sources.python_values import FunctionRef, ModuleRef
from offlint.types import Unknown

# What lets a module bind a top-level name its text does not spell (_never_binds)
_DYNAMIC_BINDING = (b"import *", b"__getattr__", b"globals(", b"vars(", b"setattr(", b"sys.modules", b"exec(")

_LOCAL_IMPORT = re.compile(rb"[ \t]+(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]")  # an import inside a block


def _local_import_lines(lines: list[bytes]) -> list[int]:
    """The numbers (from 1) of the lines that `_LOCAL_IMPORT` matches at their start. Where each line ends in a
    newline, the joined text is searched for "import" and only the lines holding one (and starting with a space or a
    tab) are matched from their start: every line the pattern matches holds "import", and no match crosses a line
    end (its blanks, word characters and dots are no newline). A regex search for line starts tried every line of
    the file: 0.38 s against 0.07 s over the 1,713 .py files of Bridge 067f987. Line by line where another line
    break (a lone carriage return, a form feed) splits lines."""
    data = b"".join(lines)
    if not lines or data.count(b"\n") != len(lines) - (not data.endswith(b"\n")):
        return [i for i, line in enumerate(lines, start=1) if b"import" in line and _LOCAL_IMPORT.match(line)]
    found: list[int] = []
    number, counted, line_start = 1, 0, -1
    find, match = data.find, _LOCAL_IMPORT.match
    at = find(b"import")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        if start != line_start:  # the first "import" of its line: the line is tested once
            line_start = start
            if data[start] in b" \t" and match(data, start):
                number += data.count(b"\n", counted, start)
                counted = start
                found.append(number)
        at = find(b"import", at + 6)
    return found


class NameLookup:
    """Imports and the names they bring in; part of PythonReader."""

    def _note_local_imports(self) -> None:
        """Imports inside function bodies (`from ...optimizer_utils import adam_with_cosine` deferred against an
        import cycle): callable from where they are imported; a module-level import of the name wins. Only the
        functions whose text holds an indented import are walked, statements only."""
        lines = _local_import_lines(self.lines)
        if not lines:
            return
        module_level = dict(self.imports)
        # dict.values: indexing them is no use of any (python_project.Definitions); MODULE covers these imports
        for fn in [*dict.values(self.functions), *(m for c in self.module.body if isinstance(c, ast.ClassDef)
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

    def _find_function(self, name: str, quiet: bool = False):
        """(reader, function) for a called name: defined here, or imported (through aliases and re-exports).
        `quiet`: the function itself is not noted as used (the caller notes it: python_following._call)."""
        if name in self.functions:
            return self, (self.functions.quietly(name) if quiet and hasattr(self.functions, "quietly") else
                          self.functions[name])
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
        found = self._exported(module, attr, set(), quiet)
        if found is not None and found[1] == "function":
            return found[0], found[2]
        return None

    def definition_of(self, name: str):
        """(path, function name) where a name this module defines or imports (through `x as name` aliases and
        re-exports) is defined in the tree; None when it is not a function of the tree."""
        self.prepare()
        found = self._find_function(name)
        return (found[0].path, found[1].name) if found is not None else None

    def note_reexports(self) -> None:
        """Note as used where each `from module import x as y` of this module leads, when that is a function of the
        tree (through aliases and re-exports): a module that only re-exports a recipe under another name uses
        nothing else, yet a launch may run the recipe by that name, so the cache must record that this module
        depends on the recipe's (a pre-commit run chooses files by those dependencies; without a cache it finds
        them by text search). Only the modules' names are used (MODULE), not the function's body."""
        project = self.project
        if project is None:
            return
        for name, (module, attr) in list(self.imports.items()):
            if attr is None or attr == name:
                continue
            outer = project.touched
            project.touched = set()
            try:  # quiet: the function is found without noting its body as used (python_project.Definitions)
                found = self._exported(module, attr, set(), quiet=True)
            finally:
                used, project.touched = project.touched, outer
            if found is not None and found[1] == "function":
                outer.update(used)

    def _imports_training_entry_point(self, name: str) -> bool:
        """`pretrain` imported from Bridge's training package (decided from the import, without reading it)."""
        parts = name.split(".")
        if parts[-1] not in bridge_mutators.TRAINING_ENTRY_POINTS or parts[0] not in self.imports:
            return False
        module, attr = self.imports[parts[0]]
        defining_module = ".".join(p for p in [module, attr if len(parts) > 1 else None, *parts[1:-1]] if p)
        return bridge_mutators.is_training_entry_point(parts[-1], defining_module)

    def _imported_value(self, name: str):
        """A module-level name the frame does not hold: an imported value or module, or a function of the tree
        (this module's or an imported one) as a FunctionRef, which a call through a variable or parameter follows
        (Bridge's performance configs pass the library recipe as `recipe_fn`)."""
        if name in self.functions:
            return FunctionRef(self, self.functions[name])
        if self.project is not None and name in self.imports:
            module, attr = self.imports[name]
            if attr is not None:
                found = self._exported(module, attr, set())
                if found is not None and found[1] == "value":
                    return found[2]
                if found is not None and found[1] == "function":
                    return FunctionRef(found[0], found[2])
                if found is None and self.project.module_reader(f"{module}.{attr}", self.path) is not None:
                    return ModuleRef(f"{module}.{attr}")  # `from . import workloads as base_cfgs`: a module
            elif self.project.module_reader(module, self.path) is not None:
                return ModuleRef(module)  # `import pkg.workloads as base_cfgs`
        return Unknown(f"`{name}` is not defined in this file" if name not in self.imports else
                       f"`{name}` is imported from a module offlint did not find or read")

    def _module_member(self, module: str, attr: str) -> tuple[bool, object]:
        """(found, what) of `module.attr` of a module of the tree: a value (None too) or a FunctionRef; not found
        when offlint finds neither there (a dataclass included)."""
        exported = self._exported(module, attr, set())
        if exported is None or exported[1] == "dataclass":
            return False, None
        return True, exported[2] if exported[1] == "value" else FunctionRef(exported[0], exported[2])

    def _never_binds(self, module: str, attr: str) -> bool:
        """Whether the tree's module `module` cannot have a top-level name `attr`: its text never spells it, and it
        has no way to bind a name its text does not spell (a star import, a module `__getattr__`, `globals()`,
        `vars()`, `setattr`, `sys.modules`, `exec`). Then `getattr(module, attr, default)` is the default, as
        Bridge's performance scripts look a workload up by a computed name (`f"{gpu}_{precision}_{variant}"`)."""
        if self.project is None:
            return False
        path = self.project.path_of(module, self.path)
        return bool(path) and self.project.call_result(("never-binds", path, attr), lambda: _text_never_binds(
            self.project.module_reader(module, self.path), attr))

    def _exported(self, module: str, attr: str, seen: set, quiet: bool = False):
        """What `from module import attr` gives: (reader, "function", fn), (reader, "value", v) or (reader,
        "dataclass", its ClassDef), following aliases and re-exports through other modules (`__init__.py`).
        `quiet`: a function found is not noted as used (see _find_function)."""
        if (module, attr) in seen or len(seen) > 16:
            return None
        seen.add((module, attr))
        reader = self.project.module_reader(module, self.path)
        if reader is None:
            return None
        if attr in reader.functions:
            return reader, "function", (reader.functions.quietly(attr) if quiet else reader.functions[attr])
        if attr in reader.constants:
            return reader, "value", reader.constants[attr]
        if attr in reader.dataclasses:
            return reader, "dataclass", reader.dataclasses[attr]
        if attr in reader.imports:
            next_module, next_attr = reader.imports[attr]
            if next_attr is not None:
                return reader._exported(next_module, next_attr, seen, quiet)
        return None


def _text_never_binds(reader, attr: str) -> bool:
    """NameLookup._never_binds of a module's reader (None: a module offlint cannot read, which may bind anything):
    its code names `attr` nowhere. Only names count, not strings or comments: Bridge's workload modules list names in
    `__all__` that they do not bind (PR 3019: `getattr(module, name, None)` is None there, and taking it for unknown
    gave an error on a path no workload takes)."""
    if reader is None:
        return False
    text = b"".join(reader.lines)
    if any(word in text for word in _DYNAMIC_BINDING):
        return False
    if not re.search(rb"(?<![\w])" + re.escape(attr.encode()) + rb"(?![\w])", text):
        return True
    return attr not in _identifiers(reader.module)


def _identifiers(module: ast.Module) -> set[str]:
    """Every identifier the module's code spells where it could bind a name: names, imported names (and their
    first part), definitions, global and nonlocal names, exception and match-pattern captures."""
    found: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
    return found
