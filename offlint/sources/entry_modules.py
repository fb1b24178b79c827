"""The tree's modules an entry script's code reaches, read with `ast` (never imported or run): each parsed once
(ScriptModule: its functions, classes and imports, and the folders its top level adds to sys.path), and where an
import or a call of one leads among the tree's files (ModuleReach). The questions asked of an entry script
(entry_scripts) follow its code with these; whether it trains is entry_training's, what it sets before Megatron
validates its arguments entry_writes'.
"""

from __future__ import annotations

import ast
import collections
import posixpath
from typing import Callable

from offlint.sources.python_syntax import _call_name, _nodes

TreeText = Callable[[str, str], "str | None"]
MAX_FUNCTIONS = 400  # past this many functions followed the answer stays open

# How many module-level imports deep, and in how many of the tree's files at most, what a script's start runs is
# looked for (_Reach._imports_reached: a backend package's import, a patch of Megatron-LM's parser)
IMPORT_DEPTH = 4
IMPORTED_FILES = 64
# Calls that end the program
EXITS = frozenset({"exit", "sys.exit", "os._exit", "quit"})


class ModuleReach:
    """The modules an entry script's code reaches, parsed on first use and kept in `modules` (shared by the questions
    one run asks: `parsed`), and where its imports and calls lead among the tree's files."""

    NOT_FOLLOWED: frozenset[str] = frozenset()  # top-level packages whose imports are not looked for in the tree

    def __init__(self, launch_path: str, tree_text: TreeText, parsed: dict | None = None) -> None:
        self.launch_path = launch_path
        self.tree_text = tree_text
        self.modules: dict = {} if parsed is None else parsed
        self.search_paths: list[str] = []  # folders the modules read so far add to sys.path (ScriptModule.search_paths)

    def _imports_reached(self, module: ScriptModule, body: list[ast.stmt]) -> list[str]:
        """The tree's files that the imports among `body` name and, in turn, the module-level imports of those files
        (IMPORT_DEPTH deep, IMPORTED_FILES files at most): each runs when the script starts. MindSpeed-LLM's
        posttrain_gpt.py imports `mindspeed_llm`, whose `__init__` imports `mindspeed_llm.tasks.megatron_adaptor`,
        which imports torch_npu (two of its forks' NPU launches had been given the CUDA allocator's advice); a fork's
        posttrain_gpt.py reaches it four imports deep (launcher -> sft -> sft_trainer -> training.utils). A module
        reached so is parsed for its top level; its whole tree is walked only if a call is followed into it. A
        module's top level's are kept with the parsed modules: three questions of each script ask them."""
        key = ("imports reached", module.path) if body is module.top_level else None
        if key is not None and key in self.modules:
            found, added = self.modules[key]
            self.search_paths.extend(p for p in added if p not in self.search_paths)  # (as reading them adds)
            return found
        before = list(self.search_paths)
        found = self._reached_files(module, body)
        if key is not None:
            self.modules[key] = found, [p for p in self.search_paths if p not in before]
        return found

    def _reached_files(self, module: ScriptModule, body: list[ast.stmt]) -> list[str]:
        return list(self._reach(module, body, IMPORT_DEPTH, IMPORTED_FILES))

    def _reach(self, module: ScriptModule, body: list[ast.stmt], depth: int, most: int):
        """The tree's files the imports among `body` name, then theirs, `depth` levels deep and `most` files at most,
        each once, level by level (a generator: a search may stop at the first file it wants)."""
        found = self._imported_files(module, body, every=True)  # (all of the first level: the cap is on the rest)
        yield from found
        level, seen = found, set(found)
        for _ in range(depth - 1):
            deeper: list[str] = []
            for path in level:
                if len(seen) >= most:
                    break
                inner = self._module(path)
                for p in self._imported_files(inner, inner.top_level, every=True) if inner is not None else ():
                    if p not in seen and len(seen) < most:
                        seen.add(p)
                        deeper.append(p)
                        yield p
            level = deeper

    def _imported_files(self, module: ScriptModule, body: list[ast.stmt], every: bool = False) -> list[str]:
        """The tree's files the imports among `body` (statements of `module`) name (`from a.b import c`: a/b.py,
        a/b/__init__.py or a/b/c.py), looked for from the module's folder and each folder above it, then on the
        paths it adds to sys.path; each once. `every`: each of those files that exists, not the first.

        A module's top level's are kept with the parsed modules, by what they depend on besides the tree's texts
        (the paths on sys.path): every script whose imports reach a module asks again (Pai-Megatron-Patch a098ca5:
        1,024 asks for 364 answers, 0.3 s of its linking)."""
        key = ("imported files", module.path, every, tuple(self.search_paths)) if body is module.top_level else None
        if key is not None:
            held = self.modules.get(key)
            if held is not None:
                return list(held)
        found = self._imported_files_of(module, body, every)
        if key is not None:
            self.modules[key] = tuple(found)
        return found

    def _imported_files_of(self, module: ScriptModule, body: list[ast.stmt], every: bool) -> list[str]:
        names: list[tuple[str, str]] = []  # (module as written, a name imported from it or "")
        for node in body:
            if isinstance(node, ast.ImportFrom):
                source = "." * node.level + (node.module or "")
                names.extend((source, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                names.extend((alias.name, "") for alias in node.names)
        found: list[str] = []
        for source, name in names:
            if source.lstrip(".").split(".")[0] in self.NOT_FOLLOWED:
                continue  # (the module's own text says so)
            for path in self._candidates(module.path, source, name):
                if path not in found and self.tree_text(path, self.launch_path) is not None:
                    found.append(path)
                    if not every:
                        break
        return found

    def _candidates(self, importer: str, source: str, name: str) -> list[str]:
        parts = [part for part in source.lstrip(".").split(".") if part]
        out = []
        for base in self._bases(importer, source):
            stem = posixpath.join(base, *parts) if parts else base
            tails = [stem + ".py", posixpath.join(stem, "__init__.py")]
            if name:
                tails.append(posixpath.join(stem, name + ".py"))
            out.extend(posixpath.normpath(path) for path in tails if _inside(path))
        return out

    def _callees(self, module: ScriptModule, func: ast.expr) -> list[tuple[ScriptModule, str]]:
        """The tree's functions a call of `func` may run (each a name imported on several branches may be)."""
        if isinstance(func, ast.Name):
            if func.id in module.functions:
                return [(module, func.id)]
            sources = module.several_imports.get(func.id) or \
                ([module.imports[func.id]] if func.id in module.imports else [])
        elif isinstance(func, ast.Attribute):
            dotted = dotted_module(func.value, module.module_imports)
            if dotted is None and isinstance(func.value, ast.Name) and func.value.id in module.imports:
                # `from rl import setup` then `setup.defaults(args)`: a function of a submodule of the tree
                submodule = self._resolve(module.path, *module.imports[func.value.id])
                found = submodule is not None and submodule[1] is None and func.attr in submodule[0].functions
                return [(submodule[0], func.attr)] if found else []
            sources = [] if dotted is None else [(dotted, func.attr)]
        else:
            return []
        found = (self._imported_function(module, source, original) for source, original in sources)
        return [callee for callee in found if callee is not None]

    def _imported_function(self, module: ScriptModule, source: str, original: str,
                           hops: int = 0) -> tuple[ScriptModule, str] | None:
        """The tree's function `from source import original` names in `module` (through re-exports), else None."""
        if source.split(".")[0] == "megatron":
            return None
        target = self._resolve(module.path, source, original)
        if target is None or target[1] is None:
            return None
        target_module, name = target
        if name in target_module.functions:
            return target_module, name
        if name in target_module.imports and hops < 8:
            return self._imported_function(target_module, *target_module.imports[name], hops=hops + 1)
        return None

    def _module(self, path: str) -> ScriptModule | None:
        if path not in self.modules:
            text = self.tree_text(path, self.launch_path)
            try:
                self.modules[path] = None if text is None else ScriptModule(path, ast.parse(text))
            except (SyntaxError, ValueError, RecursionError):
                self.modules[path] = None
        module = self.modules[path]
        if module is not None:  # its top level ran on import: what it adds to sys.path is there from now on
            self.search_paths.extend(p for p in module.search_paths if p not in self.search_paths)
        return module

    def _tree_class(self, module: ScriptModule, name: str, hops: int = 0) -> tuple[ScriptModule, str] | None:
        """(module, class) where `name` in `module` is a class of the tree (through re-exports), else None."""
        if name in module.classes:
            return module, name
        if name not in module.imports or name in module.several_imports or hops >= 8:
            return None
        target = self._resolve(module.path, *module.imports[name])
        if target is None or target[1] is None:
            return None
        return self._tree_class(target[0], target[1], hops + 1)

    def _resolve(self, importer: str, source: str, original: str) -> tuple[ScriptModule, str | None] | None:
        """(module, name in it) for `from source import original` when the tree holds it, else None.

        Which file `source` is, is kept with the parsed modules, by the paths on sys.path it depends on: the calls of
        every script a launch runs resolve the same imports again (Pai-Megatron-Patch a098ca5: 10,542 for 942)."""
        key = ("module of", importer, source, tuple(self.search_paths))
        if key not in self.modules:
            self.modules[key] = self._module_of(importer, source)
        found = self.modules[key]
        if found is None:
            return None
        stem, path = found
        module = self._module(path)  # (read again: what its top level adds to sys.path, as the search added it)
        sub = None if _defines(module, original) else \
            self._module(posixpath.normpath(posixpath.join(stem, original + ".py")))
        return (sub, None) if sub is not None else (module, original)

    def _module_of(self, importer: str, source: str) -> tuple[str, str] | None:
        """(the folder or file stem, the path) of the first of the tree's files `source` may be that parses."""
        dotted = source.lstrip(".")
        parts = dotted.split(".") if dotted else []
        for base in self._bases(importer, source):
            stem = posixpath.join(base, *parts) if parts else base
            for path in (stem + ".py", posixpath.join(stem, "__init__.py")):
                if _inside(path) and self._module(posixpath.normpath(path)) is not None:
                    return stem, posixpath.normpath(path)
        return None

    def _bases(self, importer: str, source: str) -> list[str]:
        """The folders `from source import ...` in `importer` is looked for in: a relative import's package; else the
        script's own folder first (it is first on sys.path), then the folders above it up to the repository root,
        then what the modules read added to sys.path."""
        level = len(source) - len(source.lstrip("."))
        if level:
            base = posixpath.dirname(importer)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            return [base]
        bases, folder = [], posixpath.dirname(importer)
        while True:
            bases.append(folder)
            if posixpath.dirname(folder) == folder:
                break
            folder = posixpath.dirname(folder)
        return bases + [path for path in self.search_paths if path not in bases]


def imported_names(node: ast.stmt) -> list[str]:
    """The modules an import statement imports (`import a.b` -> a.b; `from a import b` -> a); [] for another."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [node.module]
    return []


def dotted_module(node: ast.expr, module_imports: dict[str, str]) -> str | None:
    """`a.b` in `a.b.f()` as the imported module it names, or None (an object, not a module)."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in module_imports:
        return None
    return ".".join([module_imports[node.id], *reversed(names)])


def _defines(module: ScriptModule, name: str) -> bool:
    return name in module.functions or name in module.imports or name in module.classes


def _inside(path: str) -> bool:
    return not posixpath.normpath(path).startswith("../")


def calls_in(body: list[ast.stmt]):
    """The calls in `body`, not those inside functions or classes it defines."""
    return (node for node in _nodes(body) if isinstance(node, ast.Call))


HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)  # (what a statement's body, handlers, cases hold)


class ScriptModule:
    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: set[str] = set()
        self.methods: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}  # class -> name -> def
        self.top_level: list[ast.stmt] = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                self.methods[node.name] = {item.name: item for item in node.body
                                           if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            else:
                self.top_level.append(node)
        self.search_paths = sys_path_entries(path, self.top_level)
        self._tree: ast.Module | None = tree  # (walked for its imports on first use: a module only an import
        self._imports: tuple | None = None   # reaches, looked at for its top level alone, is never walked)

    @property
    def imports(self) -> dict[str, tuple[str, str]]:
        """Local name -> (module as written, name there), for imports anywhere (a function's own lazy import too)."""
        return self._walked()[0]

    @property
    def module_imports(self) -> dict[str, str]:
        """`import a.b as m`: m -> "a.b"; `import a.b`: a -> "a"."""
        return self._walked()[1]

    @property
    def several_imports(self) -> dict[str, dict[tuple[str, str], list[tuple]]]:
        """A name imported from more than one place, each (branches choosing what `main` is: tasks/main.py's
        `if args.task == 'RACE': from race.finetune import main` / `elif ...: from orqa.evaluate import main`),
        with the `if` tests on the way to each import: ((test, True where in its body), ...) per import of it."""
        return self._walked()[2]

    def _walked(self) -> tuple:
        if self._imports is None:
            imports: dict[str, tuple[str, str]] = {}
            module_imports: dict[str, str] = {}
            bindings: dict[str, dict[tuple[str, str], list[tuple]]] = {}  # name -> (module, name) -> their tests
            todo: collections.deque[tuple[ast.AST, tuple]] = collections.deque([(self._tree, ())])
            # (ast.walk's order, keeping the `if` tests each node lies under; only the nodes that can hold a
            # statement are walked: an import is one, and no expression holds one)
            while todo:
                node, tests = todo.popleft()
                if isinstance(node, ast.If):
                    todo.extend((child, tests + ((node.test, True),)) for child in node.body)
                    todo.extend((child, tests + ((node.test, False),)) for child in node.orelse)
                    continue
                todo.extend((child, tests) for child in ast.iter_child_nodes(node)
                            if isinstance(child, HOLDS_STATEMENTS))
                if isinstance(node, ast.ImportFrom):
                    source = "." * node.level + (node.module or "")
                    for alias in node.names:
                        name = alias.asname or alias.name
                        imports[name] = (source, alias.name)
                        bindings.setdefault(name, {}).setdefault((source, alias.name), []).append(tests)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            module_imports[alias.asname] = alias.name
                        else:
                            top = alias.name.split(".")[0]
                            module_imports.setdefault(top, top)
            several = {name: found for name, found in bindings.items() if len(found) > 1}
            self._imports, self._tree = (imports, module_imports, several), None
        return self._imports


def sys_path_entries(path: str, body: list[ast.stmt]) -> list[str]:
    """The folders (relative to the tree's root, "" for the root) a module's top level adds to sys.path from its own
    file's path: `sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
    "examples"))`, through top-level names too (Pai-Megatron-Patch's checkpoint convertors import the model providers
    of its examples so). Other paths (the working directory's, an environment variable's) are not known."""
    names: dict[str, str | None] = {}

    def value(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return path if node.id == "__file__" else names.get(node.id)
        if not isinstance(node, ast.Call) or node.keywords:
            return None
        function, args = _call_name(node.func), node.args
        if function in ("os.path.abspath", "os.path.realpath", "os.path.normpath") and len(args) == 1:
            return value(args[0])
        if function == "os.path.dirname" and len(args) == 1:
            inner = value(args[0])
            return None if not inner else posixpath.dirname(inner)  # (the root's folder is outside the tree)
        if function == "os.path.join" and args and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                        for a in args[1:]):
            base = value(args[0])
            parts = [a.value for a in args[1:]]
            if base is None or any(part.startswith("/") for part in parts):
                return None
            joined = posixpath.normpath(posixpath.join(base or ".", *parts))
            return None if joined == ".." or joined.startswith("../") else "" if joined == "." else joined
        return None

    found: list[str] = []
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = value(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args and \
                _call_name(node.value.func) in ("sys.path.append", "sys.path.insert"):
            entry = value(node.value.args[-1])
            if entry is not None and entry not in found:
                found.append(entry)
    return found
