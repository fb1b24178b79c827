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
from itertools import chain
from typing import Iterable

try:
    import orjson  # writes an entry's JSON text 7-8x faster than json (Bridge's 2,256: 0.09-0.11 s, not 0.72-0.88)
except ImportError:  # a declared dependency; without it json writes the same data
    orjson = None

from offlint.sources.python_values import MachineValue, PartialDict, Record
from offlint.suppressions import Suppression
from offlint.types import (ABSENT, BELOW, KEY_DEFAULT, AnyField, Assignment, ByVersion, Defaults, FileError, Finding,
                           Layer, Location, OneOf, Related, Severity, Source, Unit, UnitKind, Unknown, UserInput)
from offlint.versions import DetectedVersion, Version

# Everything a file's outcome and a run's result are made of (offlint/types.py and the reader's values).
VALUE_CLASSES: tuple[type, ...] = (Location, Unknown, OneOf, UserInput, AnyField, Assignment, ByVersion, Layer, Unit,
                                   Related, Finding, FileError, Suppression, Version, DetectedVersion, Source, UnitKind,
                                   Defaults, Severity, Record, PartialDict, MachineValue)
_SINGLETONS = {"KEY_DEFAULT": KEY_DEFAULT, "ABSENT": ABSENT, "BELOW": BELOW}
_SIMPLE = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def plain_json(value: object) -> bytes:
    """The JSON text, as ASCII bytes, of data made of dicts with str keys, lists, str, int, bool and None only (a
    cache file's index, a call record): orjson's where it is ASCII (a Bridge cold run's 2.2 MB index and 752
    records: 0.115 s with json; the same data, a few characters and floats spelled differently, Codec.dumps), json's
    otherwise (non-ASCII escaped, any other key or value written as json does)."""
    return _orjson_ascii(value) or json.dumps(value, ensure_ascii=True).encode("ascii")


def _orjson_ascii(value: object) -> bytes | None:
    """orjson's JSON text of `value` where it is ASCII; None without orjson, or where it refuses the value (an int
    beyond 64 bits, a lone surrogate, nesting past its depth) or writes UTF-8 (json escapes non-ASCII)."""
    if orjson is None:
        return None
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None
    return text if text.isascii() else None


def record_json(record: list) -> bytes:
    """`json.dumps(record, separators=(",", ":"), sort_keys=True)` as ASCII bytes (what a call record's ID is the
    digest of, call_records.record_id), written by orjson where its text is that one: the record has the shape
    outcome_reuse.stored_record makes (texts, ints, texts by text, lists of ints: no float, whose text orjson writes
    otherwise, and no None, under which a NaN would hide), and the text is ASCII without DEL (json escapes both).
    Bridge 067f987's cold run makes 975 of them: 0.07 s of json."""
    if orjson is not None and _record_shaped(record):
        try:
            text = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            text = None
        if text is not None and text.isascii() and b"\x7f" not in text:
            return text
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode("ascii")


_TEXTS, _INTS = frozenset((str,)), frozenset((int,))


def _record_shaped(record) -> bool:
    """[path, function, args, depth, reach, refused, {path: state}, {path: {part: digest}}, result,
    [[path, [line...]]...], [ID...]] of str and int (not bool) only (outcome_reuse.stored_record)."""
    if type(record) is not list or len(record) != 11:
        return False
    path, function, args, depth, reach, refused, files, parts, result, runs, nested = record
    if not (type(path) is str and type(function) is str and type(args) is str and type(result) is str
            and type(depth) is int and type(reach) is int and type(refused) is int and type(files) is dict
            and type(parts) is dict and type(runs) is list and type(nested) is list
            and _TEXTS.issuperset(map(type, files)) and _TEXTS.issuperset(map(type, files.values()))
            and _TEXTS.issuperset(map(type, parts)) and _TEXTS.issuperset(map(type, nested))):
        return False
    for names in parts.values():
        if type(names) is not dict or not _TEXTS.issuperset(map(type, names)) or \
                not _TEXTS.issuperset(map(type, names.values())):
            return False
    for run in runs:
        if type(run) is not list or len(run) != 2 or type(run[0]) is not str or type(run[1]) is not list or \
                not _INTS.issuperset(map(type, run[1])):
            return False
    return True


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
        self._getters = {name: field_getter([field for field, _ in fields]) for name, fields in self._fields.items()}
        # Frozen dataclasses: safe to share between the places that held the same object.
        self._immutable = {name for name, cls in self._classes.items()
                           if dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen}
        # What the decoder needs of a dataclass, in one look-up: (class, field names, the (index, field, type)
        # of the plainly typed fields, shareable). Set through the instance's __dict__ when the class has one
        # and no field is a descriptor (what object.__setattr__ would do then; no code of the class runs).
        self._decoding = {name: (self._classes[name], tuple(field for field, _ in fields),
                                 tuple((i, field, simple) for i, (field, simple) in enumerate(fields)
                                       if simple is not None),
                                 name in self._immutable, _settable_by_dict(self._classes[name], fields))
                          for name, fields in self._fields.items()}
        # Enums: value -> member (what calling the class finds for a str or int value).
        self._members = {name: dict(cls._value2member_map_) for name, cls in self._classes.items()
                         if issubclass(cls, enum.Enum)}
        # Enums: member -> what the encoder writes for it (one object per member, made here once: iterating an enum
        # and reading its members' values runs enum's Python code, about 35 us a `dumps` when each encoder made them)
        self._written = {name: {member: {"@": name, "v": member.value} for member in self._classes[name]}
                         for name in self._members}
        # Whether the encoder may write Assignments and Locations by its dedicated path (_Encoder._assignment):
        # only where this codec holds those classes, with the fields and sharing that path writes.
        self._dedicated = (self._classes.get("Assignment") is Assignment and self._classes.get("Location") is Location
                           and self._classes.get("Source") is Source
                           and [f for f, _ in self._fields["Assignment"]] == list(_ASSIGNMENT_FIELDS)
                           and [f for f, _ in self._fields["Location"]] == list(_LOCATION_FIELDS)
                           and {"Assignment", "Location"} <= self._immutable)
        self._encoder: _Encoder | None = None  # made on the first `dumps`

    def dumps(self, value: object) -> str:
        """The JSON text of `value`, ASCII only (`dumps_ascii`'s, as text)."""
        return self.dumps_ascii(value).decode("ascii")

    def dumps_ascii(self, value: object) -> bytes:
        """The JSON text of `value`, ASCII only (the cache's files are written as ASCII). orjson writes it when its
        text holds the same data as json's (it may spell some of it differently: DEL raw where json writes \\u007f,
        1.5e-7 where json writes 1.5e-07; both read back the same): not a non-finite float (json writes NaN and
        Infinity, orjson null), an int beyond 64 bits, a lone surrogate or nesting past orjson's depth (it
        raises), or a non-ASCII character (it writes UTF-8, json escapes): those few entries go through json."""
        encoder = self._encoder
        if encoder is None:  # one per codec: its handlers are made once, not again for each value
            encoder = self._encoder = _Encoder(self)
        encoder.memo.clear()  # (each `dumps` shares only within its own value)
        encoder.non_finite = False
        data = encoder.encode(value)
        text = _orjson_ascii(data) if not encoder.non_finite else None
        if text is not None:
            return text
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True, check_circular=False).encode("ascii")

    def loads(self, text: str | bytes) -> object:
        decoder = _Decoder(self)
        try:
            return json.loads(text, object_hook=decoder.decode)
        except CacheFormatError:
            raise
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise CacheFormatError(str(exc)) from None


_PLAIN = frozenset((str, int, bool, type(None)))  # written as they are (floats too, once seen to be finite)
_ASSIGNMENT_FIELDS = ("key", "value", "location", "source", "text", "via", "op")
_LOCATION_FIELDS = ("path", "line", "col")


class _Encoder:
    """One value to JSON-ready data. An immutable object met again (a frozen dataclass; a tuple of plain values,
    equal ones alike) is written as a reference to its first occurrence (`{"@": "r", "v": N}`; the first carries
    `"#": N`), as pickle shares it.

    Most of an outcome is plain values (strings and numbers: two thirds of the values of Megatron Bridge's outcomes)
    in containers and dataclasses: each container's items are written by one comprehension, which takes a plain
    value as it is and calls the handler of any other value's class directly (no call of `encode` per value)."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.memo: dict[object, int] = {}  # id of a frozen object, or (tuple, its items' types) -> its index
        self.non_finite = False  # a NaN or an infinity met (Codec.dumps: json writes it, not orjson)
        plain, encode = _PLAIN, self.encode
        by_type: dict[type, object] = {}

        def items(values) -> list:
            return [value if (kind := type(value)) in plain else
                    by_type[kind](value) if kind in by_type else encode(value) for value in values]

        memo = self.memo

        def tuple_(value: tuple) -> dict:
            """A tuple of two or more plain values (a call chain, `Assignment.via`) is written once per entry and
            referenced after, as a shared object: Megatron Bridge's outcomes hold 101,586 such tuples, 15,879 of
            them distinct within their entry (59.5 MB of payloads -> 48.7 MB)."""
            types = tuple(map(type, value))
            if len(types) < 2 or not plain.issuperset(types):
                return {"@": "t", "v": items(value)}
            key = (value, types)  # with the items' types: ("a", 1) == ("a", True), yet they are not the same
            index = memo.get(key)
            if index is not None:
                return {"@": "r", "v": index}
            index = memo[key] = len(memo)
            return {"@": "t", "v": list(value), "#": index}

        by_type.update({
            list: items,
            tuple: tuple_,
            dict: lambda value: {"@": "d", "v": [[key if type(key) in plain else encode(key),
                                                  item if type(item) in plain else encode(item)]
                                                 for key, item in value.items()]},
            frozenset: lambda value: {"@": "f", "v": items(value)},
            set: lambda value: {"@": "s", "v": items(value)},
            float: self._float,
        })
        self._by_type, self._items = by_type, items
        if codec._dedicated:
            self._assignment()

    def _assignment(self) -> None:
        """Handlers for the two classes of most of an outcome's objects (Megatron Bridge's 2,097 outcomes hold
        118,730 Assignments and 119,525 Locations, with a Source and a `via` tuple each), writing exactly what the
        general handlers write (a frozen object by `_handler`, a tuple by `tuple_`, fields in order, each object's
        index after its parts'), with their fields read and written inline instead of one handler call and one
        comprehension per object. A field of an unexpected type goes through `encode`, as in the general path."""
        memo, encode, by_type = self.memo, self.encode, self._by_type
        memo_get = memo.get
        plain = _PLAIN
        tuple_ = by_type[tuple]
        sources = self.codec._written["Source"]
        fields_of = self.codec._getters["Assignment"]

        def location(value):
            key = id(value)
            index = memo_get(key)
            if index is not None:
                return {"@": "r", "v": index}
            path, line, col = value.path, value.line, value.col
            if type(path) is str and type(line) is int and type(col) is int:
                fields = [path, line, col]
            else:
                fields = [item if type(item) in plain else encode(item) for item in (path, line, col)]
            index = memo[key] = len(memo)
            return {"@": "Location", "v": fields, "#": index}

        def assignment(value):
            key = id(value)
            index = memo_get(key)
            if index is not None:
                return {"@": "r", "v": index}
            name, item, where, source, text, via, op = fields_of(value)
            name = name if type(name) is str else encode(name)
            item = item if type(item) in plain else encode(item)
            if type(where) is Location:  # (location's lines, inline: nearly every Assignment has one)
                index = memo_get(id(where))
                if index is not None:
                    where = {"@": "r", "v": index}
                else:
                    path, line, col = where.path, where.line, where.col
                    if type(path) is str and type(line) is int and type(col) is int:
                        index = memo[id(where)] = len(memo)
                        where = {"@": "Location", "v": [path, line, col], "#": index}
                    else:
                        where = location(where)
            else:
                where = encode(where)
            source = sources[source] if type(source) is Source else encode(source)
            text = text if type(text) is str else encode(text)
            if type(via) is tuple and len(via) > 1:
                types = tuple(map(type, via))
                if plain.issuperset(types):
                    shared = (via, types)
                    index = memo_get(shared)
                    if index is not None:
                        via = {"@": "r", "v": index}
                    else:
                        index = memo[shared] = len(memo)
                        via = {"@": "t", "v": list(via), "#": index}
                else:
                    via = tuple_(via)
            elif type(via) is tuple and (not via or type(via[0]) in plain):
                via = {"@": "t", "v": list(via)}  # () or one plain value: not shared
            else:
                via = tuple_(via) if type(via) is tuple else encode(via)
            op = op if type(op) is str else encode(op)
            index = memo[key] = len(memo)
            return {"@": "Assignment", "v": [name, item, where, source, text, via, op], "#": index}

        by_type[Location] = location
        by_type[Assignment] = assignment

    def _float(self, value: float) -> float:
        if value - value != 0:  # NaN or an infinity (a finite value less itself is 0.0)
            self.non_finite = True
        return value

    def encode(self, value: object) -> object:
        kind = type(value)
        if kind in _PLAIN:
            return value
        handler = self._by_type.get(kind)
        if handler is None:
            handler = self._handler(value, kind)
        return handler(value)

    def _handler(self, value: object, kind: type):
        """How values of `kind` are written; kept for the next value of that kind (not for a singleton's class)."""
        for name, singleton in _SINGLETONS.items():
            if value is singleton:
                return lambda value, tag={"@": name}: tag
        codec = self.codec
        name = kind.__name__
        if codec._classes.get(name) is not kind:
            raise TypeError(f"cache format cannot store a {kind.__module__}.{kind.__qualname__}")
        encode, items = self.encode, self._items
        if isinstance(value, enum.Enum):  # a member is written the same way every time: one object per member
            members = codec._written[name]
            handler = lambda value: members.get(value) or {"@": name, "v": value.value}  # noqa: E731
        elif kind is Record:
            handler = lambda value: {"@": name, "v": [value.name, encode(value.fields), value.plain,  # noqa: E731
                                                       value.origin, encode(value.made)]}
        elif kind is PartialDict:
            handler = lambda value: {"@": name, "v": [encode(dict(value)), value.reason]}  # noqa: E731
        elif name not in codec._immutable:
            getter = codec._getters[name]
            handler = lambda value: {"@": name, "v": items(getter(value))}  # noqa: E731
        else:
            getter, memo = codec._getters[name], self.memo

            def handler(value):
                key = id(value)
                index = memo.get(key)
                if index is not None:
                    return {"@": "r", "v": index}
                fields = items(getter(value))
                index = memo[key] = len(memo)  # after its parts: the decoder meets them first
                return {"@": name, "v": fields, "#": index}
        if all(type(singleton) is not kind for singleton in _SINGLETONS.values()):
            self._by_type[kind] = handler
        return handler


class _Decoder:
    """The object hook of one `loads`: JSON objects come in document order, innermost first."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.shared: list[object] = []
        # The tags of nearly every object of an entry (Megatron Bridge's llama3.py: 15,505 objects, 3,177 each of
        # Assignment and Source, 2,663 tuples, 2,407 references, 1,563 Locations) -> their decoder, found with one
        # look-up: each gives what `_general` gives for the shape offlint writes, and hands any other to it.
        by_tag: dict[str, object] = {name: self._enum(members) for name, members in codec._members.items()}
        by_tag.update((name, self._plain(name, plain)) for name, plain in codec._decoding.items())
        by_tag["t"], by_tag["r"] = self._tuple, self._reference
        self.decode = lambda obj, get=by_tag.get, general=self._general: (
            get(obj.get("@"), general)(obj))

    def _tuple(self, obj: dict) -> object:
        items = obj.get("v")
        if len(obj) == 2 and type(items) is list:
            return tuple(items)
        return self._general(obj)

    def _reference(self, obj: dict) -> object:
        items, shared = obj.get("v"), self.shared
        if len(obj) == 2 and type(items) is int and 0 <= items < len(shared):
            return shared[items]
        return self._general(obj)

    def _enum(self, members: dict):
        general = self._general

        def decode(obj: dict) -> object:
            value = obj.get("v")
            member = members.get(value) if len(obj) == 2 and (type(value) is str or type(value) is int) else None
            return member if member is not None else general(obj)
        return decode

    def _plain(self, tag: str, plain: tuple):
        """`_dataclass` of one class, inline; any other shape than offlint writes goes to it (to be refused)."""
        dataclass_, shared, made = self._dataclass, self.shared, instance_of
        cls, names, simple, shareable, via_dict = plain
        count = len(names)

        def decode(obj: dict) -> object:
            values = obj.get("v")
            size = len(obj)
            if type(values) is not list or len(values) != count or not (size == 2 or size == 3 and "#" in obj
                                                                        and shareable and obj["#"] == len(shared)):
                return dataclass_(obj, tag, plain)
            for index, _, kind in simple:
                if not isinstance(values[index], kind):
                    return dataclass_(obj, tag, plain)
            instance = made(cls, names, via_dict, values)
            if size == 3:
                shared.append(instance)
            return instance
        return decode

    def _general(self, obj: dict) -> object:
        tag = obj.get("@")
        # The common cases first (tuples and offlint's dataclasses: nearly every object of an entry), with the
        # same checks as below.
        if tag == "t" and len(obj) == 2:
            items = obj["v"]
            if type(items) is not list:
                raise CacheFormatError("malformed entry")
            return tuple(items)
        codec = self.codec
        plain = codec._decoding.get(tag) if type(tag) is str else None
        if plain is not None:
            return self._dataclass(obj, tag, plain)
        members = codec._members.get(tag) if type(tag) is str else None
        if members is not None and len(obj) == 2:
            value = obj["v"]
            member = members.get(value) if type(value) is str or type(value) is int else None
            if member is not None:
                return member
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
            if len(obj) == 2:
                return tuple(_list(items))
            if obj["#"] != len(self.shared) or any(type(item) not in _PLAIN for item in _list(items)):
                raise CacheFormatError("bad shared tuple")
            self.shared.append(tuple(items))
            return self.shared[-1]
        if len(obj) != 2:
            raise CacheFormatError("not an object offlint writes")
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
            name, fields, plain, origin, made = _list(items, 5)
            if not isinstance(name, str) or not isinstance(fields, dict) or not isinstance(plain, bool) \
                    or not isinstance(origin, str) or not isinstance(made, dict) \
                    or not all(isinstance(steps, tuple) for steps in made.values()):
                raise CacheFormatError("bad Record")
            return Record(name, fields, plain, origin, made)
        if cls is PartialDict:
            entries, reason = _list(items, 2)
            if not isinstance(entries, dict) or not isinstance(reason, str):
                raise CacheFormatError("bad PartialDict")
            return PartialDict(entries, reason)
        return self._dataclass(obj, tag, codec._decoding[tag])

    def _dataclass(self, obj: dict, tag: str, plain: tuple) -> object:
        cls, names, simple, shareable, via_dict = plain
        size = len(obj)
        if size != 2 and not (size == 3 and "#" in obj):
            raise CacheFormatError("not an object offlint writes")
        values = obj["v"]
        if type(values) is not list or len(values) != len(names):
            raise CacheFormatError("malformed entry")
        for index, field, kind in simple:
            if not isinstance(values[index], kind):
                raise CacheFormatError(f"{tag}.{field}: unexpected {type(values[index]).__name__}")
        instance = instance_of(cls, names, via_dict, values)
        if size == 3:
            if not shareable or obj["#"] != len(self.shared):
                raise CacheFormatError("bad shared object")
            self.shared.append(instance)
        return instance


def instance_of(cls: type, names: tuple, via_dict: bool, values: list) -> object:
    """An object of the dataclass `cls` with these values of its fields `names`, built without its __init__, as the
    decoder builds what it reads (and relocation what it moves): through its __dict__ when `via_dict`
    (_settable_by_dict), else field by field."""
    instance = object.__new__(cls)
    if via_dict:
        instance.__dict__.update(zip(names, values))
    else:
        for field, value in zip(names, values):
            object.__setattr__(instance, field, value)
    return instance


def _settable_by_dict(cls: type, fields: list) -> bool:
    """Whether an instance's fields can be set by updating its __dict__: no __slots__, and no field name that the
    class (or a base) defines as a descriptor, which object.__setattr__ would go through."""
    if "__slots__" in cls.__dict__ or any("__slots__" in base.__dict__ for base in cls.__mro__[1:-1]):
        return False
    return not any(hasattr(getattr(cls, field, None), "__set__") for field, _ in fields)


def field_getter(names: list[str]):
    """A function from an instance to the tuple of its field values (operator.attrgetter, always a tuple)."""
    if not names:
        return lambda value: ()
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


# Shapes of the plain JSON an index line or a call record holds, checked before it is used
STR_ONLY = frozenset((str,))  # (a set of types: `STR_ONLY.issuperset(map(type, xs))` is all-str without a loop)
_DICT = frozenset((dict,))


def str_map(value: object) -> bool:
    """A dict of str keys and str values."""
    if not isinstance(value, dict):
        return False
    if STR_ONLY.issuperset(map(type, value)) and STR_ONLY.issuperset(map(type, value.values())):
        return True  # (the common case, looked at without a Python-level loop: a cache index has thousands)
    return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def str_maps(values) -> bool:
    """Whether each of `values` (a dict's values view) is a `str_map`: in the common case (dicts of str keys and
    values, as JSON gives them: an index's parts, 7,429 in Bridge's) without a Python-level loop."""
    if _DICT.issuperset(map(type, values)) and STR_ONLY.issuperset(map(type, chain.from_iterable(values))) \
            and STR_ONLY.issuperset(map(type, chain.from_iterable(map(dict.values, values)))):
        return True
    return all(str_map(v) for v in values)


def str_list(value: object) -> bool:
    """A list of str."""
    return isinstance(value, list) and (STR_ONLY.issuperset(map(type, value)) or all(isinstance(v, str) for v in value))
