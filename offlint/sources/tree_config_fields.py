"""The fields the linted tree's own config dataclasses define, by section: Megatron Bridge's FluxProvider adds
`model.in_channels`, its DistributedDataParallelConfig adds `ddp.param_name_patterns_for_fp32_local_accumulation`.
No megatron-core release has them, yet a YAML override or a Hydra override that sets them is real.

A class belongs to a section when it is a @dataclass one of whose bases, followed through the tree's classes by
name, is a megatron-core config class or a model provider (`_SECTION_OF_BASE`). Its fields are the annotated
class-level names of it and of every @dataclass it derives from in the tree (a plain mixin's annotations are not
dataclass fields), ClassVars aside. Read with `ast` from the files whose text may define such a class; never run.
"""

from __future__ import annotations

import ast
import posixpath
import re
from typing import NamedTuple

# What a base's name says of its section: Bridge aliases megatron-core's classes (`MCoreOptimizerConfig`).
_SECTION_OF_BASE = (
    (re.compile(r"(TransformerConfig|ModelParallelConfig|ModelProvider)$"), "model"),
    (re.compile(r"OptimizerConfig$"), "optimizer"),
    (re.compile(r"(DistributedDataParallelConfig|DDPConfig)$"), "ddp"),
)
# A module-level class header with bases: its name and the text of its bases (a first look, confirmed by `ast`).
_HEADER = re.compile(r"^class\s+(\w+)\s*\(([^)]*)\)", re.MULTILINE)
_NAME = re.compile(r"\w+")


class _Class:
    __slots__ = ("bases", "fields", "dataclass")

    def __init__(self, bases: list[str], fields: set[str], dataclass: bool):
        self.bases, self.fields, self.dataclass = bases, fields, dataclass


def fields_by_section(texts) -> dict[str, frozenset[str]]:
    """{section: the field names the tree's config dataclasses of that section define}. `texts`: (path, text)
    pairs of the tree's Python files (a text None or unreadable is skipped)."""
    classes: dict[str, list[_Class]] = {}
    for text in _may_define(texts):
        try:
            module = ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # reported where the file is read, not here
        for node in module.body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(_read_class(node))
    found: dict[str, set[str]] = {}
    for name, defined in classes.items():
        for cls in defined:
            if not cls.dataclass:
                continue
            section = _section(cls, classes, set())
            if section is not None:
                found.setdefault(section, set()).update(_fields(cls, classes, set()))
    return {section: frozenset(names) for section, names in found.items()}


def _may_define(texts) -> list[str]:
    """The texts that may define a config dataclass or one of its bases: their class headers, read with a regular
    expression, lead to a config base by name. Parsing only these is a tenth of parsing every file of Bridge."""
    headers: dict[str, set[str]] = {}  # class name -> the names in its bases, over the tree
    defining: list[tuple[str, list[str]]] = []
    for _path, text in texts:
        if not text or "dataclass" not in text:
            continue
        names = []
        for match in _HEADER.finditer(text):
            headers.setdefault(match[1], set()).update(_NAME.findall(match[2]))
            names.append(match[1])
        if names:
            defining.append((text, names))
    wanted = {name for name in headers if _leads_to_config(name, headers, set())}
    for name in list(wanted):
        wanted |= _ancestors(name, headers)
    return [text for text, names in defining if wanted.intersection(names)]


def _leads_to_config(name: str, headers: dict[str, set[str]], seen: set[str]) -> bool:
    for base in headers.get(name, ()):
        if any(pattern.search(base) for pattern, _ in _SECTION_OF_BASE):
            return True
        if base not in seen:
            seen.add(base)
            if _leads_to_config(base, headers, seen):
                return True
    return False


def _ancestors(name: str, headers: dict[str, set[str]]) -> set[str]:
    found, todo = set(), [name]
    while todo:
        for base in headers.get(todo.pop(), ()):
            if base in headers and base not in found:
                found.add(base)
                todo.append(base)
    return found


def _read_class(node: ast.ClassDef) -> _Class:
    bases = [name for name in (_base_name(base) for base in node.bases) if name]
    fields = {statement.target.id for statement in node.body
              if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
              and not _is_class_var(statement.annotation)}
    return _Class(bases, fields, any(_base_name(d) == "dataclass" for d in node.decorator_list))


def _base_name(node: ast.expr) -> str:
    """`Name`, `module.Name`, `Name[T]`, `dataclass(...)`: the last name."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_class_var(annotation: ast.expr) -> bool:
    return _base_name(annotation) == "ClassVar" or (
        isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) and "ClassVar" in annotation.value)


def _section(cls: _Class, classes: dict[str, list[_Class]], seen: set[str]) -> str | None:
    for base in cls.bases:
        for pattern, section in _SECTION_OF_BASE:
            if pattern.search(base):
                return section
        if base not in seen:
            seen.add(base)
            for parent in classes.get(base, ()):
                if (section := _section(parent, classes, seen)) is not None:
                    return section
    return None


def _fields(cls: _Class, classes: dict[str, list[_Class]], seen: set[str]) -> set[str]:
    names = set(cls.fields)
    for base in cls.bases:
        if base not in seen:
            seen.add(base)
            for parent in classes.get(base, ()):
                if parent.dataclass:
                    names |= _fields(parent, classes, seen)
    return names


class Section(NamedTuple):
    """A section of the tree's ConfigContainer whose class offlint can list every field of: the class, where it is
    defined, and its fields (its own and those of every dataclass it derives from)."""

    cls: str
    path: str
    line: int
    fields: frozenset[str]


# Sections of the container judged elsewhere: megatron-core's classes (keys.known_fields, OFL003's own checks), whose
# model section a provider from outside the tree may widen, and the environment, a dict.
_JUDGED_ELSEWHERE = frozenset({"model", "optimizer", "ddp", "env_vars"})
_CONTAINER = re.compile(r"^class\s+ConfigContainer\b", re.MULTILINE)
_FIELDLESS_BASES = frozenset({"object", "ABC", "Generic"})
_MAX_HOPS = 8  # re-exports and bases followed for one class, at most


_BRIDGE_CONFIG = "megatron/bridge/training/config.py"


def container_sections(texts) -> dict[str, Section]:
    """{section: Section} for the sections of the tree's Megatron Bridge ConfigContainer (one @dataclass of that name in
    Bridge's megatron/bridge/training/config.py) that are annotated with one class (`dist: DistributedInitConfig`: not
    Optional, not a union, so no recipe puts another class there) whose every field offlint can read: the class and each
    dataclass it derives from are defined in the tree, found through the defining module's own classes and its imports
    (Bridge's `DistributedInitConfig(MTrainDistributedInitConfig)` derives from Megatron-LM's
    `megatron/training/config.py`, found in a checkout's `3rdparty/Megatron-LM`). A class with a base offlint cannot
    read is left out: its fields are not all known. `texts`: (path, text) pairs of the tree's Python files."""
    pairs = [(path, text) for path, text in texts if text]
    # (Bridge's own module: NVIDIA-NeMo/Nemotron's forks keep a stand-in ConfigContainer of a few fields in
    # kit/megatron_stub.py, which nothing imports; their YAML files are applied to Bridge's)
    defining = [(path, text) for path, text in pairs if posixpath.normpath(path).endswith(_BRIDGE_CONFIG)
                and "class ConfigContainer" in text and _CONTAINER.search(text)]
    if len(defining) != 1:
        return {}  # none, or several trees side by side: which one a launch runs is not known here
    path, text = defining[0]
    module = _parsed(text)
    container = _class_named(module, "ConfigContainer") if module is not None else None
    if container is None or not _is_dataclass(container):
        return {}
    resolver = _Resolver(pairs)
    out: dict[str, Section] = {}
    for statement in container.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(statement.annotation, (ast.Name, ast.Attribute))):
            continue
        section = statement.target.id
        if section.startswith("_") or section in _JUDGED_ELSEWHERE:
            continue
        found = resolver.complete(_base_name(statement.annotation), path, module)
        if found is not None and found.fields:  # (a class of no fields holds no settings: a callable's holder)
            out[section] = found
    return out


class _Resolver:
    """Finds a class by the name a module uses for it, and reads its fields, through the tree's files."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self._texts = {posixpath.normpath(path): text for path, text in pairs}
        self._by_name: dict[str, list[str]] | None = None  # a file's name -> the tree's files of that name
        self._modules: dict[str, ast.Module | None] = {}

    def complete(self, name: str, path: str, module: ast.Module, hops: int = 0) -> Section | None:
        """The Section of class `name` as `module` (the file `path`) names it; None where a field may be missed."""
        found = self._find(name, path, module, hops)
        if found is None:
            return None
        where, defined_in, node = found
        if not _is_dataclass(node):
            return None
        fields = set(_read_class(node).fields)
        for base in node.bases:
            base_name = _base_name(base)
            if base_name in _FIELDLESS_BASES:
                continue
            if hops >= _MAX_HOPS:
                return None
            parent = self.complete(base_name, where, defined_in, hops + 1)
            if parent is None:
                return None
            fields |= parent.fields
        return Section(node.name, where, node.lineno, frozenset(fields))

    def _find(self, name: str, path: str, module: ast.Module, hops: int):
        """(path, module, class node) of the class `name` names in `module`: defined there, or imported by
        `from M import C [as name]` from the one tree file that is module M."""
        own = _class_named(module, name)
        if own is not None:
            return path, module, own
        for statement in module.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            for alias in statement.names:
                if (alias.asname or alias.name) != name:
                    continue
                if hops >= _MAX_HOPS:
                    return None
                target = self._module_file(statement.module or "", statement.level, path)
                if target is None:
                    return None
                other = self._module(target)
                return self._find(alias.name, target, other, hops + 1) if other is not None else None
        return None

    def _module_file(self, dotted: str, level: int, importer: str) -> str | None:
        """The one tree file that is module `dotted` (relative to `importer`'s package for `level` dots)."""
        parts = dotted.split(".") if dotted else []
        if level:
            base = posixpath.dirname(posixpath.normpath(importer)).split("/")
            base = base[: len(base) - (level - 1)] if level > 1 else base
            rel = "/".join([*[p for p in base if p and p != "."], *parts])
            found = [p for p in (rel + ".py", rel + "/__init__.py") if p in self._texts]
        elif parts:
            # from some source root: `src/megatron/bridge/x.py`, `3rdparty/Megatron-LM/megatron/training/config.py`
            if self._by_name is None:
                self._by_name = {}
                for path in self._texts:
                    self._by_name.setdefault(posixpath.basename(path), []).append(path)
            rel = "/".join(parts)
            found = [path for candidate in (rel + ".py", rel + "/__init__.py")
                     for path in self._by_name.get(posixpath.basename(candidate), ())
                     if path == candidate or path.endswith("/" + candidate)]
        else:
            return None
        return found[0] if len(found) == 1 else None

    def _module(self, path: str) -> ast.Module | None:
        if path not in self._modules:
            text = self._texts.get(path)
            self._modules[path] = _parsed(text) if text else None
        return self._modules[path]


def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None  # reported where the file is read, not here


def _class_named(module: ast.Module, name: str) -> ast.ClassDef | None:
    found = [node for node in module.body if isinstance(node, ast.ClassDef) and node.name == name]
    return found[0] if len(found) == 1 else None


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(_base_name(d) == "dataclass" for d in node.decorator_list)
