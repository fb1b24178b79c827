"""Records of followed calls, so that an edit of a base builder re-reads only the units whose call of it now gives
something else (the content-hash cache, offlint/cache.py).

A followed call whose arguments are plain literals and whose run PythonProject.followed_call keeps for reuse (no
effect besides its value, a result of its own) is, for the reading that made it, nothing but that value, what the
run used, how deep it went and how many calls it did not follow for depth: a second caller reuses exactly these.
Such a call leaves a record in the reading's dependencies instead of the function's part and what the run used
(`CallRecord`). After an edit of something the run used, the call is run once in the edited tree and its result
compared with the recorded one (`encoded`): every value exactly, every line of a file the run used (in a
Location or a "path.py:LINE" text) by its position, so that a result equal but for moved lines gives those
lines' moves, and the units that made the call are kept with their locations moved (offlint.relocation).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import json
import math
import re

from offlint import types
from offlint.sources import python_values
from offlint.sources.python_values import ConfigObj, ObjectTuple, PartialDict, Record
from offlint.types import Location

MARK = "<call>"  # a record in a reading's dependencies: (MARK, path, function, arguments, depth)
_PATH_LINE = re.compile(r"(?<![\w./\\-])(/?(?:[\w.\-]+/)*[\w.\-]+\.py):(\d+)")  # as offlint.relocation's
_BARE_LINE = re.compile(r"\bline \d")


class CallRecord:
    """One kept run of a followed call: `args`, the arguments as JSON ([positional, keywords], literals only);
    `reach` and `refused` as PythonProject's _Memo; `deps`, what the run itself used (paths and (path, part)
    pairs, the function's own part and its module's included); `nested`, the recorded calls it made, as (depth,
    CallRecord); `kept`, its result as kept for reuse (provenance relative to the call)."""

    __slots__ = ("path", "function", "args", "reach", "refused", "deps", "nested", "kept", "_encoded", "_files",
                 "stored")

    def __init__(self, path: str, function: str, args: str, reach: int, refused: int, deps: frozenset,
                 nested: tuple, kept):
        self.path, self.function, self.args = path, function, args
        self.reach, self.refused, self.deps, self.nested, self.kept = reach, refused, deps, nested, kept
        self._encoded: tuple | None = None
        self._files: set[str] | None = None
        self.stored: dict = {}  # depth -> its stored form (pipeline.stored_record), made once per process

    def files(self) -> set[str]:
        """The files its run used, its nested calls' runs included: their lines are left out of `encoded`."""
        if self._files is None:
            files = {dep if isinstance(dep, str) else dep[0] for dep in self.deps} | {self.path}
            for _, record in self.nested:
                files |= record.files()
            self._files = files
        return self._files

    def all_deps(self) -> set:
        """What its run used, its nested calls' runs included."""
        deps = set(self.deps)
        for _, record in self.nested:
            deps |= record.all_deps()
        return deps

    def encoded(self) -> tuple[str, list[list]] | None:
        """(digest of the result with the lines of the run's files left out, those lines in order as [path, line]);
        None when the result holds a value this encoding does not describe exactly."""
        if self._encoded is None:
            self._encoded = encode(self.kept, self.files()) or ("", [])
        return self._encoded if self._encoded[0] else None


def call_args(positional: list, keywords: dict) -> str | None:
    """The arguments of a call as JSON, when every one is a literal JSON gives back exactly (str, int, finite
    float, bool, None) and no text names a line; else None (the call leaves no record)."""
    if not positional and not keywords:
        return "[[],[]]"  # (what json.dumps writes for none: most followed calls pass nothing)
    for value in (*positional, *keywords.values()):
        kind = type(value)
        if kind is str:
            if ".py:" in value or "line " in value:
                return None
        elif kind is float:
            if not math.isfinite(value):
                return None
        elif not (kind is int or kind is bool or value is None):
            return None
    return json.dumps([positional, sorted(keywords.items())], separators=(",", ":"))


def arguments(args: str) -> tuple[list, dict]:
    positional, keywords = json.loads(args)
    return list(positional), dict((k, v) for k, v in keywords)


class _Refused(Exception):
    pass


_SINGLETONS: dict[int, str] | None = None


def _singleton(value) -> str | None:
    """The name of a constant of offlint's value modules that `value` is (KEY_DEFAULT, ABSENT, RETURNED_NONE...)."""
    global _SINGLETONS
    if _SINGLETONS is None:
        _SINGLETONS = {}
        for module in (types, python_values):
            for name, constant in vars(module).items():
                if not name.startswith("__") and type(constant).__module__ == module.__name__ and \
                        not isinstance(constant, type):
                    _SINGLETONS.setdefault(id(constant), f"{module.__name__}.{name}")
    return _SINGLETONS.get(id(value))


def encode(value, files: set[str]) -> tuple[str, list[list]] | None:
    """See CallRecord.encoded: `files`, the paths whose lines are left out of the digest."""
    out: list[str] = []
    lines: list[list] = []
    try:
        _Walk(out, lines, files).walk(value)
    except (_Refused, RecursionError):
        return None
    return hashlib.blake2b("\x1f".join(out).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest(), lines


_MATCHES: dict[str, tuple] = {}  # a text holding ".py:" -> its _PATH_LINE matches as (start, end, path, line)
# a class not walked by its own branch -> the names of its fields (a dataclass of offlint.types), True (an enum of
# offlint.types) or False (neither: a singleton constant, or no record)
_SHAPES: dict[type, tuple | bool] = {}


def _shape(kind: type) -> tuple | bool:
    if kind.__module__ != types.__name__:
        return False
    if dataclasses.is_dataclass(kind):
        return tuple(field.name for field in dataclasses.fields(kind))
    return issubclass(kind, enum.Enum)


class _Walk:
    def __init__(self, out: list[str], lines: list[list], files: set[str]):
        self.out, self.lines, self.files = out, lines, files
        self.seen: dict[int, int] = {}  # id of a mutable object met before -> its number (sharing is kept)

    def text(self, value: str) -> str:
        """`value` with the lines of `files` it names ("path.py:LINE") as "path.py:#", those lines noted in order.
        Its matches are found once per text (the same provenance texts recur in many results)."""
        if ".py:" not in value:
            return value
        found = _MATCHES.get(value)
        if found is None:
            if len(_MATCHES) > 100_000:
                _MATCHES.clear()
            found = _MATCHES[value] = tuple((match.start(), match.end(), match.group(1), int(match.group(2)))
                                            for match in _PATH_LINE.finditer(value))
        files = self.files
        pieces: list[str] = []
        at = 0
        for start, end, path, line in found:
            if path in files:
                self.lines.append([path, line])
                pieces.append(value[at:start])
                pieces.append(path + ":#")
                at = end
        if not pieces:
            return value
        pieces.append(value[at:])
        return "".join(pieces)

    def items(self, values) -> None:
        """Each of `values` walked (a text naming no line written here: most items are such texts)."""
        out = self.out
        for item in values:
            if type(item) is str and ".py:" not in item:
                out.append("s" + item)
            else:
                self.walk(item)

    def walk(self, value) -> None:
        out = self.out
        kind = type(value)
        if kind is str:
            out.append("s" + self.text(value))
        elif kind is tuple or kind is ObjectTuple:  # immutable: no sharing to keep
            out.append(f"{kind.__name__}({len(value)}")
            self.items(value)
            out.append(")")
        elif kind is Location:
            if value.path in self.files:
                self.lines.append([value.path, value.line])
                out.append(f"L{value.path}:#:{value.col}")
            else:
                out.append(f"L{value.path}:{value.line}:{value.col}")
        elif value is None or kind is bool or kind is int or kind is float:
            out.append(f"{kind.__name__}:{value!r}")
        elif kind is list:
            if self.shared(value):
                return
            out.append(f"list({len(value)}")
            self.items(value)
            out.append(")")
        elif kind is dict or kind is PartialDict:
            if self.shared(value):
                return
            out.append(f"{kind.__name__}({len(value)}")
            if kind is PartialDict:
                out.append("s" + self.text(value.reason))
            self.items(itertools.chain.from_iterable(value.items()))  # each key, then its item
            out.append(")")
        elif kind is frozenset or kind is set:
            items = []
            for item in value:
                if not (type(item) in (str, int, bool, float) or item is None) or \
                        type(item) is str and (".py:" in item or _BARE_LINE.search(item)):
                    raise _Refused  # no order to compare their lines in
                items.append(f"{type(item).__name__}:{item!r}")
            out.append(f"{kind.__name__}({','.join(sorted(items))})")
        elif kind is ConfigObj:
            if self.shared(value):
                return
            out.append("ConfigObj(")
            for name, item in sorted(vars(value).items()):
                if name != "serial":  # creation order: a copy's own, whatever the run
                    out.append(name)
                    self.walk(item)
            out.append(")")
        elif kind is Record:
            if self.shared(value):
                return
            out.append(f"Record({len(vars(value))}")
            for name, item in sorted(vars(value).items()):
                out.append(name)
                self.walk(item)
            out.append(")")
        else:
            shape = _SHAPES.get(kind)
            if shape is None:
                shape = _SHAPES[kind] = _shape(kind)
            if shape.__class__ is tuple:  # a dataclass of offlint.types (Assignment...): its fields in order
                out.append(f"{kind.__name__}(")
                for name in shape:
                    out.append(name)
                    item = getattr(value, name)
                    if type(item) is str and ".py:" not in item:
                        out.append("s" + item)
                    else:
                        self.walk(item)
                out.append(")")
            elif shape:  # an enum of offlint.types
                out.append(f"{kind.__name__}.{value._name_}")
            else:
                name = _singleton(value)
                if name is None:
                    raise _Refused  # FunctionRef, ModuleRef, a Hugging Face model...: no record
                out.append("K" + name)

    def shared(self, value) -> bool:
        """Note a mutable object (its identity is kept: two places holding one object are not two objects); True
        when it was met before (then written as a reference)."""
        number = self.seen.get(id(value))
        if number is not None:
            self.out.append(f"@{number}")
            return True
        self.seen[id(value)] = len(self.seen)
        return False
