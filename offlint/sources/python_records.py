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
from offlint.cache_format import field_getter
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
        self.stored: dict = {}  # depth -> its stored form (outcome_reuse.stored_record), made once per process

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


class _Walk:
    """The digest's pieces of one result: each value by the writer of its class (`_WRITERS`), one look-up per value
    instead of a test of each class in turn. A text naming no line, nearly every item of a container or object, is
    written where it is met (`items`)."""

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
        out, writers = self.out, _WRITERS
        for item in values:
            kind = type(item)
            if kind is str and ".py:" not in item:
                out.append("s" + item)
            else:
                (writers.get(kind) or _writer(kind))(self, item)

    def walk(self, value) -> None:
        kind = type(value)
        (_WRITERS.get(kind) or _writer(kind))(self, value)

    def shared(self, value) -> bool:
        """Note a mutable object (its identity is kept: two places holding one object are not two objects); True
        when it was met before (then written as a reference)."""
        number = self.seen.get(id(value))
        if number is not None:
            self.out.append(f"@{number}")
            return True
        self.seen[id(value)] = len(self.seen)
        return False


def _text(walk: _Walk, value: str) -> None:
    walk.out.append("s" + walk.text(value))


def _tuple(walk: _Walk, value: tuple) -> None:  # immutable: no sharing to keep
    walk.out.append(f"{type(value).__name__}({len(value)}")
    walk.items(value)
    walk.out.append(")")


def _location(walk: _Walk, value: Location) -> None:
    if value.path in walk.files:
        walk.lines.append([value.path, value.line])
        walk.out.append(f"L{value.path}:#:{value.col}")
    else:
        walk.out.append(f"L{value.path}:{value.line}:{value.col}")


def _scalar(walk: _Walk, value) -> None:
    walk.out.append(f"{type(value).__name__}:{value!r}")


def _list(walk: _Walk, value: list) -> None:
    if walk.shared(value):
        return
    walk.out.append(f"list({len(value)}")
    walk.items(value)
    walk.out.append(")")


def _dict(walk: _Walk, value: dict) -> None:
    if walk.shared(value):
        return
    kind = type(value)
    walk.out.append(f"{kind.__name__}({len(value)}")
    if kind is PartialDict:
        walk.out.append("s" + walk.text(value.reason))
    walk.items(itertools.chain.from_iterable(value.items()))  # each key, then its item
    walk.out.append(")")


def _set(walk: _Walk, value) -> None:
    items = []
    for item in value:
        if not (type(item) in (str, int, bool, float) or item is None) or \
                type(item) is str and (".py:" in item or _BARE_LINE.search(item)):
            raise _Refused  # no order to compare their lines in
        items.append(f"{type(item).__name__}:{item!r}")
    walk.out.append(f"{type(value).__name__}({','.join(sorted(items))})")


def _config(walk: _Walk, value: ConfigObj) -> None:
    if walk.shared(value):
        return
    walk.out.append("ConfigObj(")
    for name, item in sorted(vars(value).items()):
        if name != "serial":  # creation order: a copy's own, whatever the run
            walk.out.append(name)
            walk.walk(item)
    walk.out.append(")")


def _record(walk: _Walk, value: Record) -> None:
    if walk.shared(value):
        return
    walk.out.append(f"Record({len(vars(value))}")
    for name, item in sorted(vars(value).items()):
        walk.out.append(name)
        walk.walk(item)
    walk.out.append(")")


def _constant(walk: _Walk, value) -> None:
    name = _singleton(value)
    if name is None:
        raise _Refused  # FunctionRef, ModuleRef, a Hugging Face model...: no record
    walk.out.append("K" + name)


# The writer of each class of value: (walk, value) -> None, adding its pieces to walk.out
_WRITERS: dict[type, object] = {
    str: _text, tuple: _tuple, ObjectTuple: _tuple, Location: _location, type(None): _scalar, bool: _scalar,
    int: _scalar, float: _scalar, list: _list, dict: _dict, PartialDict: _dict, frozenset: _set, set: _set,
    ConfigObj: _config, Record: _record,
}


def _writer(kind: type):
    """The writer of a class without one yet, kept: a dataclass of offlint.types (Assignment...) as its name and its
    fields' values in order (the class says which fields), an enum of offlint.types as the member's name, any
    other value as the name of the constant it is (`_singleton`), else no record."""
    if kind.__module__ == types.__name__ and dataclasses.is_dataclass(kind):
        header = f"{kind.__name__}("
        fields = field_getter([field.name for field in dataclasses.fields(kind)])

        def write(walk: _Walk, value) -> None:
            walk.out.append(header)
            walk.items(fields(value))
            walk.out.append(")")
    elif kind.__module__ == types.__name__ and issubclass(kind, enum.Enum):
        prefix = f"{kind.__name__}."

        def write(walk: _Walk, value) -> None:
            walk.out.append(prefix + value._name_)
    else:
        write = _constant
    _WRITERS[kind] = write
    return write
