"""Shortcuts of the cache's writing give what the general paths give. The dedicated paths for Assignments (and
their Locations) write exactly what the general ones write: the cache format's encoder (cache_format._Encoder.
_assignment) and the call records' digest walk (python_records._Walk.assignment), on Assignments whose every field
takes its usual type and odd ones (fields typed str holding other values, Locations with odd coordinates, shared
objects, via tuples of every shape)."""

from __future__ import annotations

import itertools
import random

import pytest

from offlint import cache_format
from offlint.cache_format import VALUE_CLASSES, Codec
from offlint.sources import python_records
from offlint.types import ABSENT, KEY_DEFAULT, Assignment, Location, Severity, Source, Unknown

HERE = Location("a.py", 3, 1)
THERE = Location("b/c.py", 12, 5)

# Per field of Assignment (key, value, location, source, text, via, op): usual values first, then odd ones.
_CHOICES = [
    ["model.x", "a.py:3 key", "", 7, None, Unknown("k"), ("t", 1), HERE, "caf\u00e9"],
    ["v", 1, 2.5, True, None, float("nan"), float("inf"), 2 ** 70, [1, "a.py:9"], {"k": [1]}, ("a", "b"),
     (HERE, 1), Unknown("u"), KEY_DEFAULT, ABSENT, HERE, frozenset({"x"}), "b/c.py:12 here", Source.YAML],
    [HERE, THERE, Location("a.py", 4, 1), Location("a.py", True, 2), Location("a.py", 3.0, 1),
     Location(None, 1, 1), Location("a.py", "3", 1), None, Unknown("no place"), ("a.py", 3)],
    [Source.PYTHON, Source.YAML, Source.DEFAULT, "python", None, Severity.ERROR, 3],
    ["x = 1", "", "a.py:3 text", None, 5, Unknown("t"), ("t",)],
    [(), ("cfg.model",), ("cfg.model", "_pretrain_common()"), ("a.py:3 f()", "b/c.py:12 g()", "z.py:1 h()"),
     ("x", 1), ("x", True), ("x", 1.0), ("x", None), ("x", float("nan")), (HERE, "x"), (HERE,), (2.5,), (float("nan"),),
     ["cfg.model", "x"], None, "cfg.model", ("caf\u00e9", "x")],
    ["set", "add", "", None, 1, "a.py:7"],
]
_USUAL = [choices[0] for choices in _CHOICES]


def _assignments() -> list:
    """Each odd value of each field with the others usual, then seeded random mixes of all, some objects met
    twice (shared) and the same Locations and via tuples in several Assignments."""
    out = []
    for index, choices in enumerate(_CHOICES):
        for choice in choices:
            fields = list(_USUAL)
            fields[index] = choice
            out.append(Assignment(*fields))
    rng = random.Random(19)
    for _ in range(600):
        out.append(Assignment(*(rng.choice(choices) for choices in _CHOICES)))
    out.extend(out[::7])  # met again: written as references
    rng.shuffle(out)
    return out


def _encode(value, dedicated: bool, orjson: bool = True) -> str:
    codec = Codec(VALUE_CLASSES)
    assert codec._dedicated  # (the codec of offlint's classes takes the dedicated path)
    codec._dedicated = dedicated
    saved = cache_format.orjson
    if not orjson:
        cache_format.orjson = None
    try:
        return codec.dumps(value)
    finally:
        cache_format.orjson = saved


@pytest.mark.parametrize("orjson", [True, False])
def test_the_encoders_assignment_path_writes_what_the_general_path_writes(orjson):
    assignments = _assignments()
    values = [assignments, {"t": (HERE, assignments[:50], THERE)}, [HERE, ("cfg.model", "x"), assignments[3]]]
    for value in [*values, *assignments[:40]]:
        fast, general = _encode(value, True, orjson), _encode(value, False, orjson)
        assert fast == general
    loadable = [a for a in assignments if all(type(getattr(a, name)) is str for name in ("key", "text", "op"))
                and type(a.location) is Location and type(a.location.path) is str
                and isinstance(a.location.line, int) and isinstance(a.location.col, int)]
    assert len(loadable) > 50
    back = Codec(VALUE_CLASSES).loads(_encode(loadable, True, orjson))
    assert repr(back) == repr(loadable)


def test_the_encoders_assignment_path_refuses_what_the_general_path_refuses():
    class Place(Location):
        pass

    for odd in (Assignment("k", 1, Place("a.py", 1, 1), Source.PYTHON), Assignment("k", object(), HERE, Source.YAML)):
        for dedicated in (True, False):
            with pytest.raises(TypeError):
                _encode([odd], dedicated)


def _digests(value, files: set[str], dedicated: bool):
    saved = python_records._ASSIGNMENT_FIELDS
    python_records._ASSIGNMENT_FIELDS = saved if dedicated else None
    try:
        return python_records.encode(value, files)
    finally:
        python_records._ASSIGNMENT_FIELDS = saved


@pytest.mark.parametrize("files", [set(), {"a.py"}, {"a.py", "b/c.py", "z.py"}])
def test_the_record_walks_assignment_path_gives_the_general_paths_digest_and_lines(files):
    assert python_records._ASSIGNMENT_FIELDS is not None
    assignments = [a for a in _assignments() if not isinstance(a.value, frozenset)]
    shared = [1, "a.py:3"]
    mixes = [assignments, [Assignment("k", shared, HERE, Source.PYTHON), Assignment("k", shared, HERE, Source.YAML)],
             {"layer": assignments[:30], "more": (assignments[30], [assignments[31]])}]
    for value in [*mixes, *assignments[:60]]:
        fast, general = _digests(value, files, True), _digests(value, files, False)
        assert fast == general and fast is not None


def test_the_record_walks_assignment_path_refuses_what_the_general_path_refuses():
    for odd in (Assignment("k", frozenset({"a.py:3"}), HERE, Source.PYTHON), Assignment("k", object(), HERE, "x")):
        assert _digests([odd], {"a.py"}, True) is None and _digests([odd], {"a.py"}, False) is None


def test_assignments_that_differ_in_any_field_differ_in_digest_or_lines():
    """The pieces the dedicated path joins still separate the fields: one changed field changes the result."""
    seen = {}
    for fields in itertools.product(*(choices[:3] for choices in _CHOICES)):
        if isinstance(fields[1], float) and fields[1] != fields[1]:
            continue
        result = _digests([Assignment(*fields)], {"a.py"}, True)
        assert result is not None
        key = (result[0], repr(result[1]))
        assert key not in seen or seen[key] == repr(fields), (fields, seen[key])
        seen[key] = repr(fields)

