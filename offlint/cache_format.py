"""The cache's storage format: plain JSON, with offlint's own value classes tagged by name and checked on load.

The cache used to be a pickle, and a pickle is a program: a planted cache file could run anything during
`offlint check`. JSON can only describe data. Every object in a cache entry is a JSON literal, a list, or a
tagged object `{"@": TAG, "v": ...}` naming one of an explicit set of classes (tuples, dicts, sets, and
offlint's dataclasses and enums); loading builds exactly those, sets their fields without calling any of
their code, and rejects anything else. A class the format cannot describe makes `dumps` raise TypeError:
the caller then leaves that entry out of the cache rather than storing something lossy.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import operator
from typing import Iterable

from offlint.sources.python_values import PartialDict, Record
from offlint.suppressions import Suppression
from offlint.types import (ABSENT, KEY_DEFAULT, Assignment, ByVersion, Defaults, FileError, Finding, Layer,
                           Location, OneOf, Related, Severity, Source, Unit, UnitKind, Unknown, UserInput)
from offlint.versions import DetectedVersion, Version

# Everything a file's outcome and a run's result are made of (offlint/types.py and the reader's values).
VALUE_CLASSES: tuple[type, ...] = (Location, Unknown, OneOf, UserInput, Assignment, ByVersion, Layer, Unit, Related,
                                   Finding, FileError, Suppression, Version, DetectedVersion, Source, UnitKind,
                                   Defaults, Severity, Record, PartialDict)
_SINGLETONS = {"KEY_DEFAULT": KEY_DEFAULT, "ABSENT": ABSENT}
_SIMPLE = {"str": str, "int": int, "bool": bool, "float": (int, float)}


class CacheFormatError(ValueError):
    """A stored entry that is not what offlint writes (damaged, or not written by offlint)."""


class Codec:
    """dumps/loads for values made of JSON literals, containers and the given classes (by their names)."""

    def __init__(self, classes: Iterable[type]):
        self._classes: dict[str, type] = {}
        for cls in classes:
            if cls.__name__ in self._classes or cls.__name__ in _SINGLETONS or len(cls.__name__) == 1:
                raise ValueError(f"cache format: class name {cls.__name__!r} is not unique")
            self._classes[cls.__name__] = cls
        # Per dataclass: its field names and, where the annotation is a plain type, that type (checked on load).
        self._fields = {name: [(f.name, _SIMPLE.get(f.type if isinstance(f.type, str) else ""))
                               for f in dataclasses.fields(cls)]
                        for name, cls in self._classes.items() if dataclasses.is_dataclass(cls)}
        self._getters = {name: _field_getter([field for field, _ in fields]) for name, fields in self._fields.items()}
        # Frozen dataclasses: safe to share between the places that held the same object.
        self._immutable = {name for name, cls in self._classes.items()
                           if dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen}

    def dumps(self, value: object) -> str:
        encoder = _Encoder(self)
        return json.dumps(encoder.encode(value), separators=(",", ":"), ensure_ascii=True, check_circular=False)

    def loads(self, text: str | bytes) -> object:
        decoder = _Decoder(self)
        try:
            return json.loads(text, object_hook=decoder.decode)
        except CacheFormatError:
            raise
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise CacheFormatError(str(exc)) from None


class _Encoder:
    """One value to JSON-ready data. An immutable object met again is written as a reference to its first
    occurrence (`{"@": "r", "v": N}`; the first carries `"#": N`), as pickle shares it."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.memo: dict[int, int] = {}
        encode = self.encode
        self._by_type = {
            list: lambda value: [encode(v) for v in value],
            tuple: lambda value: {"@": "t", "v": [encode(v) for v in value]},
            dict: lambda value: {"@": "d", "v": [[encode(k), encode(v)] for k, v in value.items()]},
            frozenset: lambda value: {"@": "f", "v": [encode(v) for v in value]},
            set: lambda value: {"@": "s", "v": [encode(v) for v in value]},
        }

    def encode(self, value: object) -> object:
        kind = type(value)
        if kind is str or kind is int or kind is bool or kind is float or value is None:
            return value
        container = self._by_type.get(kind)
        if container is not None:
            return container(value)
        for name, singleton in _SINGLETONS.items():
            if value is singleton:
                return {"@": name}
        codec = self.codec
        name = kind.__name__
        if codec._classes.get(name) is not kind:
            raise TypeError(f"cache format cannot store a {kind.__module__}.{kind.__qualname__}")
        if isinstance(value, enum.Enum):
            return {"@": name, "v": value.value}
        if kind is Record:
            return {"@": name, "v": [value.name, self.encode(value.fields), value.plain]}
        if kind is PartialDict:
            return {"@": name, "v": [self.encode(dict(value)), value.reason]}
        getter = codec._getters[name]
        if name not in codec._immutable:
            return {"@": name, "v": [self.encode(v) for v in getter(value)]}
        index = self.memo.get(id(value))
        if index is not None:
            return {"@": "r", "v": index}
        fields = [self.encode(v) for v in getter(value)]
        index = self.memo[id(value)] = len(self.memo)  # after its parts: the decoder meets them first
        return {"@": name, "v": fields, "#": index}


class _Decoder:
    """The object hook of one `loads`: JSON objects come in document order, innermost first."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.shared: list[object] = []

    def decode(self, obj: dict) -> object:
        tag = obj.get("@")
        if tag in _SINGLETONS and len(obj) == 1:
            return _SINGLETONS[tag]
        items = obj["v"]
        if tag == "r":
            if len(obj) != 2 or type(items) is not int or not 0 <= items < len(self.shared):
                raise CacheFormatError("bad reference")
            return self.shared[items]
        if len(obj) != 2 and not (len(obj) == 3 and "#" in obj):
            raise CacheFormatError("not an object offlint writes")
        if tag == "t":
            return tuple(_list(items))
        if tag == "d":
            return {_hashable(k): v for k, v in (_pair(i) for i in _list(items))}
        if tag == "f":
            return frozenset(_hashable(v) for v in _list(items))
        if tag == "s":
            return {_hashable(v) for v in _list(items)}
        codec = self.codec
        cls = codec._classes.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise CacheFormatError(f"unknown tag {tag!r}")
        if issubclass(cls, enum.Enum):
            return cls(items)
        if cls is Record:
            name, fields, plain = _list(items, 3)
            if not isinstance(name, str) or not isinstance(fields, dict) or not isinstance(plain, bool):
                raise CacheFormatError("bad Record")
            return Record(name, fields, plain)
        if cls is PartialDict:
            entries, reason = _list(items, 2)
            if not isinstance(entries, dict) or not isinstance(reason, str):
                raise CacheFormatError("bad PartialDict")
            return PartialDict(entries, reason)
        fields = codec._fields[tag]
        values = _list(items, len(fields))
        instance = object.__new__(cls)
        for (field, simple), value in zip(fields, values):
            if simple is not None and not isinstance(value, simple):
                raise CacheFormatError(f"{tag}.{field}: unexpected {type(value).__name__}")
            object.__setattr__(instance, field, value)
        if "#" in obj:
            if tag not in codec._immutable or obj["#"] != len(self.shared):
                raise CacheFormatError("bad shared object")
            self.shared.append(instance)
        return instance


def _field_getter(names: list[str]):
    """A function from an instance to the tuple of its field values (operator.attrgetter, always a tuple)."""
    getter = operator.attrgetter(*names)
    return getter if len(names) > 1 else (lambda value: (getter(value),))


def _list(items: object, length: int | None = None) -> list:
    if not isinstance(items, list) or (length is not None and len(items) != length):
        raise CacheFormatError("malformed entry")
    return items


def _pair(item: object) -> tuple[object, object]:
    key, value = _list(item, 2)
    return key, value


def _hashable(value: object) -> object:
    hash(value)  # a list where a key belongs raises TypeError, reported as a damaged entry
    return value
