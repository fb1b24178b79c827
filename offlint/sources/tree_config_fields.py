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
import re

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
