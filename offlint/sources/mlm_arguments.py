"""Megatron-LM's own command line, read from the linted checkout: the option strings an entry script's argument
parser accepts, so that a launch flag it does not have (a typo, or a flag this checkout is too old or too new for)
is found before the job waits in a queue. Megatron-LM's parser is built with `allow_abbrev=False` and parsed
strictly (`parse_known_args` only with `ignore_unknown_args`), so such a flag stops the job: "unrecognized
arguments", exit 2.

What is read (never imported or run), in megatron/training/arguments.py (a checkout from before March 2024:
megatron/arguments.py, whose `parse_args` adds the `_add_*_args` groups itself) and what it calls:
- the base set: `add_megatron_arguments(parser)` (before December 2025 the `_add_*_args` calls in `parse_args`),
  and what `parse_args` adds beside it (a fork's own argument group);
- literal `X.add_argument("--a", "--b", ...)` calls in those functions and in the tree's functions they call;
  `action=argparse.BooleanOptionalAction` also makes `--no-<a>`;
- groups built from a config dataclass (`ArgumentGroupFactory(Cls, exclude=[...])`, Megatron-LM 72230d25ca on):
  an option per field of the class and its dataclass bases, less `exclude` and `init=False` fields, named
  `--<field-name>` (underscores to dashes); a bool field whose default is not False is `--no-<f>` and
  `--disable-<f>`; the field's `metadata={"argparse_meta": {"arg_names": [...]}}` replaces the names;
- the entry script's `extra_args_provider` (a function of the script, of a module beside it or of the tree; both
  sides of `f if cond else None`), walked the same way; and argparse's `-h`/`--help`.
Options added under an `if` or a `try` (the kitchen and ModelOpt ones, present when a package imports) count as
present. Anything offlint cannot read gives no option set, and so no finding: a computed option string or exclude
list, metadata that is not a literal, a function or class it cannot find that is handed the parser, a provider
it cannot name, an entry script that parses with `ignore_unknown_args=True`, builds an argparse parser of its own,
calls none of Megatron-LM's parsing entry points, or calls one of the same name that is not Megatron-LM's (its own
`pretrain`, imported from its own package: it may parse with another parser). The same derivation matched the real parser's option strings
exactly at six Megatron-LM commits from February 2025 to d98e8a6 (August 2026; the two kitchen options aside,
which depend on the environment), and, in the older layout, at eight from June 2020 to March 2024 and in two forks
of late 2023 (the real parser built by running `parse_args` with Megatron's own imports stubbed, session 51).
Megatron-DeepSpeed's `parse_args` hands the parser to `deepspeed.add_config_arguments`, which is not the tree's:
no option set there.
"""

from __future__ import annotations

import ast
import builtins
import posixpath
from typing import Callable

from offlint.sources.python_syntax import top_level_statements

ARGUMENTS = "megatron/training/arguments.py"
OLD_ARGUMENTS = "megatron/arguments.py"  # (a checkout from before megatron/training/, March 2024)
_BASE_FUNCTIONS = ("add_megatron_arguments", "parse_args")
# Megatron-LM's functions that parse the command line with an entry script's extra_args_provider
_PARSING_CALLS = frozenset({"parse_and_validate_args", "parse_args", "initialize_megatron", "pretrain"})
_POSITIONAL_PROVIDER = frozenset({"parse_and_validate_args", "parse_args"})  # (extra_args_provider, ...)
# where ignore_unknown_args comes when given by position (arguments.py, initialize.py at d98e8a6 and before)
_POSITIONAL_IGNORE = {"parse_and_validate_args": 1, "parse_args": 1, "initialize_megatron": 2}
_FACTORY = "ArgumentGroupFactory"
_PLAIN_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})
_NOT_FIELDS = ("ClassVar", "InitVar", "KW_ONLY")
_MAX_DEPTH = 12

ReadText = Callable[[str], "str | None"]


class _Unreadable(Exception):
    """Something the option set depends on that offlint cannot read: no option set at all."""


def entry_options(entry: str, read_text: ReadText, memo: dict) -> frozenset[str] | None:
    """The option strings the entry script `entry` (a path in the tree) accepts, or None when offlint cannot tell;
    in a checkout of either layout. `read_text(path)`: a file's text (None when absent); `memo`: kept across the
    calls of one run."""
    reader = _reader(entry, read_text, memo, (ARGUMENTS, OLD_ARGUMENTS))
    if reader is None:
        return None
    try:
        base = reader.base_options()
        providers = reader.providers(entry)
        if providers is None:
            return None
        return frozenset(base | set().union(*(reader.function_options(path, fn) for path, fn in providers)))
    except (_Unreadable, RecursionError):
        return None


def entry_required(entry: str, read_text: ReadText, memo: dict) -> tuple[tuple[str, ...], ...] | None:
    """The options the entry script's parser requires (`add_argument(..., required=True)`), each as its option
    strings, in the order the parser adds them (argparse names them so: "the following arguments are required:
    --input-image-path"); None where entry_options cannot tell the parser's options."""
    if entry_options(entry, read_text, memo) is None:
        return None
    reader = _reader(entry, read_text, memo, (ARGUMENTS, OLD_ARGUMENTS))
    found = [f for f in (reader.definition(reader.arguments_path(), name, ast.FunctionDef)
                         for name in _BASE_FUNCTIONS) if f is not None]
    try:
        return tuple(dict.fromkeys(required for path, fn in found + reader.providers(entry)
                                   for required in reader.function_required(path, fn)))
    except (_Unreadable, RecursionError):
        return None


def base_options(entry: str, read_text: ReadText, memo: dict) -> frozenset[str] | None:
    """The option strings the base parser of the checkout holding `entry` defines (its megatron/training/
    arguments.py, no entry script's extra_args_provider), or None when offlint cannot tell. Not an older layout's:
    OFL216 takes a checkout's flags that no release has for a fork's own (Unit.checkout_flags), and every release
    offlint knows is newer than that layout."""
    reader = _reader(entry, read_text, memo)
    if reader is None:
        return None
    try:
        return reader.base_options()
    except (_Unreadable, RecursionError):
        return None


def _reader(entry: str, read_text: ReadText, memo: dict, layouts: tuple[str, ...] = (ARGUMENTS,)) -> _Reader | None:
    """The reader of the checkout holding `entry` (its arguments file the first of `layouts` it has), one per
    checkout and run (None where there is none)."""
    root = checkout_root(entry, read_text, layouts)
    if root is None:
        return None
    layout = next(layout for layout in layouts
                  if read_text(posixpath.join(root, layout) if root else layout) is not None)
    reader = memo.get(("mlm-arguments", root, layout))
    if reader is None:
        reader = memo[("mlm-arguments", root, layout)] = _Reader(root, read_text, layout)
    return reader


def checkout_root(entry: str, read_text: ReadText, layouts: tuple[str, ...] = (ARGUMENTS,)) -> str | None:
    """The folder holding megatron/training/arguments.py (or another of `layouts`), the entry script's own or one
    above it: the Megatron-LM checkout whose code the script runs ("" for the working directory)."""
    folder = posixpath.dirname(posixpath.normpath(entry))
    while True:
        if any(read_text(posixpath.join(folder, layout) if folder else layout) is not None for layout in layouts):
            return folder
        if not folder or folder in (".", "/"):
            return None
        folder = posixpath.dirname(folder)


class _Reader:
    def __init__(self, root: str, read_text: ReadText, layout: str = ARGUMENTS):
        self.root, self.read_text, self.layout = root, read_text, layout
        self.modules: dict[str, ast.Module | None] = {}
        # (path, function, the parameters given the parser) -> (its options, the ones it requires: _walk)
        self.walked: dict[tuple, tuple[frozenset[str], tuple[tuple[str, ...], ...]]] = {}
        self.base: frozenset[str] | _Unreadable | None = None
        self.provided: dict[str, list | None] = {}  # entry script -> providers(): asked once per launch of it

    # ---- modules and names -------------------------------------------------------------------------------------

    def module(self, path: str) -> ast.Module | None:
        if path not in self.modules:
            text = self.read_text(path)
            try:
                self.modules[path] = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.modules[path] = None
        return self.modules[path]

    def module_path(self, dotted: str, importer: str, level: int = 0) -> str | None:
        """The tree's file for an imported module: from the checkout root, or (a top-level name) beside the
        importing script, as Python puts the script's folder first on sys.path."""
        if level:
            base = posixpath.dirname(importer)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            folders = [base]
        else:
            folders = [self.root, posixpath.dirname(importer)]
        for folder in folders:
            stem = posixpath.join(folder, *dotted.split(".")) if dotted else folder
            for candidate in (stem + ".py", posixpath.join(stem, "__init__.py")):
                candidate = posixpath.normpath(candidate)
                if self.module(candidate) is not None:
                    return candidate
        return None

    def definition(self, path: str, name: str, kind: type, local: ast.AST | None = None, depth: int = 0):
        """(path, node) of the function or class `name` as the module `path` (and the imports inside `local`)
        names it, through imports and re-exports; None when it is not the tree's."""
        module = self.module(path)
        if module is None or depth > _MAX_DEPTH:
            return None
        if local is None:
            for node in top_level_statements(module.body):
                if isinstance(node, kind) and node.name == name:
                    return path, node
        for node in (ast.walk(local) if local is not None else top_level_statements(module.body)):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = self.module_path(node.module or "", path, node.level)
                        if target is None:  # `from pkg import module`? not a function or class
                            return None
                        return self.definition(target, alias.name, kind, None, depth + 1)
        return self.definition(path, name, kind, None, depth + 1) if local is not None else None

    # ---- the option sets ---------------------------------------------------------------------------------------

    def arguments_path(self) -> str:
        """The checkout's arguments file (megatron/training/arguments.py, or megatron/arguments.py before 2024)."""
        return posixpath.join(self.root, self.layout) if self.root else self.layout

    def base_options(self) -> frozenset[str]:
        """The options every entry script's parser has (read once per checkout: its failure too)."""
        if self.base is None:
            path = self.arguments_path()
            found = [f for f in (self.definition(path, name, ast.FunctionDef) for name in _BASE_FUNCTIONS)
                     if f is not None]
            try:
                if not found:
                    raise _Unreadable(f"{path} defines neither of {_BASE_FUNCTIONS}")
                base = self.function_options(*found[0]) | {"-h", "--help"}
            except _Unreadable as exc:
                self.base = exc
            else:
                for more in found[1:]:  # parse_args beside add_megatron_arguments: a fork's own groups added there
                    try:  # (pigeon23's Megatron-mixtera: `parser = add_mixtera_arguments(parser)`, --mixtera-*)
                        base |= self.function_options(*more)
                    except _Unreadable:
                        pass  # (it hands the parser to code offlint cannot read: the base set stands)
                self.base = base
        if isinstance(self.base, _Unreadable):
            raise self.base
        return self.base

    def providers(self, entry: str) -> list | None:
        """The entry script's extra_args_provider functions; None when its parsing cannot be read. Worked out once per
        script: each launch of it asks, and each asking walked the script's whole tree twice (Megatron-LM d98e8a6:
        293 launches of 18 scripts, 0.8 s of a cold check's linking)."""
        if entry not in self.provided:
            self.provided[entry] = self._providers(entry)
        return self.provided[entry]

    def _providers(self, entry: str) -> list | None:
        module = self.module(entry)
        if module is None:
            return None
        found: list = []
        parses = False
        origins = _name_origins(module)
        for node in ast.walk(module):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node.func)
            if name == "ArgumentParser":
                return None  # a parser of its own: its flags are not Megatron-LM's
            if name not in _PARSING_CALLS:
                continue
            if isinstance(node.func, ast.Name) and not origins.get(name, "megatron.").startswith("megatron."):
                # the tree's own `pretrain` (fwyc0573's `from mg_scheduling.training import pretrain`, whose
                # initialize_megatron parses with mg_scheduling/arguments.py): another parser, not read
                return None
            parses = True
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if any(k.arg is None for k in node.keywords):
                return None  # `**kwargs`: the provider or ignore_unknown_args may be in it
            ignore = keywords.get("ignore_unknown_args")
            at = _POSITIONAL_IGNORE.get(name)
            if ignore is None and at is not None and len(node.args) > at:
                ignore = node.args[at]
            if ignore is not None and not (isinstance(ignore, ast.Constant) and ignore.value is False):
                return None  # unknown flags are ignored (or may be): not refused
            provider = keywords.get("extra_args_provider")
            if provider is None and name in _POSITIONAL_PROVIDER and node.args:
                provider = node.args[0]
            if provider is not None:
                resolved = self.provider(entry, provider)
                if resolved is None:
                    return None
                found += resolved
        return found if parses else None

    def provider(self, entry: str, node: ast.expr) -> list | None:
        if isinstance(node, ast.Constant) and node.value is None:
            return []
        if isinstance(node, ast.IfExp):  # `add_modelopt_args if has_nvidia_modelopt else None`: both sides
            body, orelse = self.provider(entry, node.body), self.provider(entry, node.orelse)
            return None if body is None or orelse is None else body + orelse
        if isinstance(node, ast.Name):
            found = self.definition(entry, node.id, ast.FunctionDef)
            return [found] if found is not None else None
        return None

    def function_options(self, path: str, fn: ast.FunctionDef, given: frozenset[str] | None = None
                         ) -> frozenset[str]:
        """The option strings `fn` (of the module `path`) adds to the parser it is given, and the tree's functions
        it calls add. `given`: its parameters a call passes the parser (or a group of it) to; None, its first (a
        function read as a parser's builder: add_megatron_arguments, an extra_args_provider)."""
        return self._walked(path, fn, given)[0]

    def function_required(self, path: str, fn: ast.FunctionDef, given: frozenset[str] | None = None
                          ) -> tuple[tuple[str, ...], ...]:
        """Of function_options, the options added with `required=True`, each as its option strings, in order."""
        return self._walked(path, fn, given)[1]

    def _walked(self, path: str, fn: ast.FunctionDef, given: frozenset[str] | None
                ) -> tuple[frozenset[str], tuple[tuple[str, ...], ...]]:
        key = (path, fn.name + f"@{fn.lineno}", given)
        if key in self.walked:
            return self.walked[key]
        self.walked[key] = (frozenset(), ())  # (a recursive call adds nothing new; dropped again if the walk fails,
        try:  # so that a function read in part is never taken for one read whole)
            options, required = self._walk(path, fn, given)
            self.walked[key] = (frozenset(options), tuple(dict.fromkeys(required)))
        except BaseException:
            del self.walked[key]
            raise
        return self.walked[key]

    def _walk(self, path: str, fn: ast.FunctionDef, given: frozenset[str] | None = None
              ) -> tuple[set[str], list[tuple[str, ...]]]:
        parsers = _parser_names(fn, given)
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}  # (the provider
        options: set[str] = set()  # parse_args is given calls it: not the base set)
        required: list[tuple[str, ...]] = []
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                options |= _add_argument(node)
                if any(k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is True
                       for k in node.keywords):
                    required.append(tuple(arg.value for arg in node.args))
            elif _called_name(func) == _FACTORY:
                options |= self.factory_options(path, fn, node)
            elif isinstance(func, ast.Name) and func.id not in params and not _builtin_call(func.id):
                found = self.definition(path, func.id, ast.FunctionDef, local=fn)
                if found is not None:
                    more, needed = self._walked(*found, _parameters_given(found[1], node, parsers))
                    options |= more
                    required += needed
                elif _hands_parser(node, parsers):
                    raise _Unreadable(f"{func.id}() is given the parser and is not the tree's")
            elif isinstance(func, ast.Attribute) and func.attr != "build_group" and _hands_parser(node, parsers) \
                    and not (isinstance(func.value, ast.Name) and func.value.id in parsers):  # (a factory's: its own)
                raise _Unreadable(f"{ast.unparse(func)}() is given the parser")
        return options, required

    def factory_options(self, path: str, fn: ast.FunctionDef, call: ast.Call) -> set[str]:
        """ArgumentGroupFactory(Cls, exclude=[...]): an option per field of the dataclass."""
        if not call.args or not isinstance(call.args[0], ast.Name):
            raise _Unreadable("an ArgumentGroupFactory of a class offlint cannot name")
        exclude = _exclude(fn, next((k.value for k in call.keywords if k.arg == "exclude"), None))
        found = self.definition(path, call.args[0].id, ast.ClassDef, local=fn)
        if found is None:
            raise _Unreadable(f"the config class {call.args[0].id} is not the tree's")
        options: set[str] = set()
        for name, field in self.dataclass_fields(*found).items():
            if name not in exclude:
                options |= _field_options(name, field)
        return options

    def dataclass_fields(self, path: str, cls: ast.ClassDef, depth: int = 0) -> dict[str, ast.AnnAssign]:
        """A dataclass's fields by name (its bases' first, as dataclasses.fields gives them), less init=False."""
        if depth > _MAX_DEPTH:
            raise _Unreadable(f"{cls.name}'s bases go too deep")
        fields: dict[str, ast.AnnAssign] = {}
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name in _PLAIN_BASES:
                continue
            found = self.definition(path, name, ast.ClassDef) if name else None
            if found is None:
                raise _Unreadable(f"a base of {cls.name} is not the tree's")
            fields.update(self.dataclass_fields(*found, depth + 1))
        if not any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
            return fields
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                    not ast.unparse(node.annotation).split("[")[0].endswith(_NOT_FIELDS):
                if _keyword(node.value, "init") is False:
                    fields.pop(node.target.id, None)
                else:
                    fields[node.target.id] = node
        return fields


# ---- one call or field --------------------------------------------------------------------------------------


def _add_argument(call: ast.Call) -> set[str]:
    strings = []
    for arg in call.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-")):
            raise _Unreadable(f"add_argument({ast.unparse(arg)}, ...): not a literal option string")
        strings.append(arg.value)
    action = next((k.value for k in call.keywords if k.arg == "action"), None)
    if action is not None and _called_name(action) == "BooleanOptionalAction":
        strings += [f"--no-{s[2:]}" for s in strings if s.startswith("--")]
    return set(strings)


def _field_options(name: str, field: ast.AnnAssign) -> set[str]:
    names = _arg_names(name, _keyword_node(field.value, "metadata"))
    if names is not None:
        return names
    flag = name.replace("_", "-")
    if _is_bool(field.annotation):
        default = _keyword(field.value, "default") if isinstance(field.value, ast.Call) else \
            _literal(field.value) if field.value is not None else _MISSING
        if default is not _MISSING and default is not None and not isinstance(default, str) and default == False:  # noqa: E712
            return {f"--{flag}"}  # store_true
        return {f"--no-{flag}", f"--disable-{flag}"}  # store_false (ArgumentGroupFactory: `default == False` or not)
    return {f"--{flag}"}


def _arg_names(name: str, metadata: ast.expr | None) -> set[str] | None:
    """`metadata={"argparse_meta": {"arg_names": [...]}}`: the names that replace the field's; None without."""
    if metadata is None:
        return None
    meta = _dict_entry(metadata, "metadata", name)
    argparse_meta = meta.get("argparse_meta")
    if argparse_meta is None:
        return None
    arg_names = _dict_entry(argparse_meta, "argparse_meta", name).get("arg_names")
    if arg_names is None:
        return None
    value = _literal(arg_names)
    if not (isinstance(value, list) and value and all(isinstance(n, str) for n in value)):
        raise _Unreadable(f"the arg_names of {name} are not literal strings")
    return set(value)


def _dict_entry(node: ast.expr, what: str, name: str) -> dict[str, ast.expr]:
    if not (isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                               for k in node.keys)):
        raise _Unreadable(f"the {what} of {name} is not a literal dict")
    return {k.value: v for k, v in zip(node.keys, node.values)}


_MISSING = object()


def _keyword_node(value: ast.expr | None, name: str) -> ast.expr | None:
    """A `field(...)` keyword's value node; None when absent (or the value is not a field() call)."""
    if not (isinstance(value, ast.Call) and _called_name(value.func) == "field"):
        return None
    return next((k.value for k in value.keywords if k.arg == name), None)


def _keyword(value: ast.expr | None, name: str):
    """A `field(...)` keyword's literal value; _MISSING when absent, not a literal, or not a field() call."""
    node = _keyword_node(value, name)
    return _literal(node) if node is not None else _MISSING


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def _is_bool(annotation: ast.expr) -> bool:
    """`bool`, `Optional[bool]`, `bool | None` (ArgumentGroupFactory's Optional handling)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "bool"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return isinstance(annotation.right, ast.Constant) and annotation.right.value is None and \
            _is_bool(annotation.left)
    if isinstance(annotation, ast.Subscript) and _called_name(annotation.value) == "Optional":
        return _is_bool(annotation.slice)
    return False


def _exclude(fn: ast.FunctionDef, node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Name):  # `exclude = [...]` earlier in the function
        bound = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and
                 any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)]
        node = bound[0] if len(bound) == 1 else None
    value = _literal(node) if node is not None else _MISSING
    if not (isinstance(value, (list, tuple, set)) and all(isinstance(v, str) for v in value)):
        raise _Unreadable("an exclude list that is not a literal")
    return set(value)


def _parser_names(fn: ast.FunctionDef, given: frozenset[str] | None = None) -> set[str]:
    """The names that hold the parser or a group of it in `fn`: the parameters `given` it (None: its first), and
    what `add_argument_group(...)` / `add_mutually_exclusive_group(...)` give, or `ArgumentParser(...)` (parse_args'
    own parser, which a fork may hand to more functions)."""
    names = set(given) if given is not None else {fn.args.args[0].arg} if fn.args.args else set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _called_name(node.value.func) in (
                "add_argument_group", "add_mutually_exclusive_group", "ArgumentParser"):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _hands_parser(call: ast.Call, parsers: set[str]) -> bool:
    return any(isinstance(a, ast.Name) and a.id in parsers for a in (*call.args, *(k.value for k in call.keywords)))


def _parameters_given(fn: ast.FunctionDef, call: ast.Call, parsers: set[str]) -> frozenset[str]:
    """The parameters of `fn` that `call` passes one of `parsers` to: a fork's parse_args calls helpers that are
    given no parser (`warn_rank_0(message)`), whose first parameter holds none."""
    positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    given = {name for name, value in zip(positional, call.args) if isinstance(value, ast.Name) and value.id in parsers}
    given |= {k.arg for k in call.keywords if k.arg and isinstance(k.value, ast.Name) and k.value.id in parsers}
    return frozenset(given)


def _name_origins(module: ast.Module) -> dict[str, str]:
    """name -> the module it is imported from (`from megatron.training import pretrain`: "megatron.training."), or
    "" for a function the module defines itself; names it does neither for are absent."""
    origins: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                origins[alias.asname or alias.name] = "." * node.level + (node.module or "") + "."
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            origins[node.name] = ""
    return origins


def _builtin_call(name: str) -> bool:
    return hasattr(builtins, name)


def _called_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
