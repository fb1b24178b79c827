"""Shortcuts of the cache's writing give what the general paths give. The dedicated path for Assignments (and
their Locations) of the cache format's encoder (cache_format._Encoder._assignment) writes exactly what the general
one writes, on Assignments whose every field takes its usual type and odd ones (fields typed str holding other
values, Locations with odd coordinates, shared objects, via tuples of every shape). A call record's ID is the
digest of json's sorted text, whether orjson or json writes it (cache_format.record_json)."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offlint import cache, cache_format, call_records
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


def test_assignments_that_differ_in_any_field_differ_in_digest_or_lines():
    """The call records' digest walk keeps the fields apart: one changed field changes the result."""
    seen = {}
    for fields in itertools.product(*(choices[:3] for choices in _CHOICES)):
        if isinstance(fields[1], float) and fields[1] != fields[1]:
            continue
        result = python_records.encode([Assignment(*fields)], {"a.py"})
        assert result is not None
        key = (result[0], repr(result[1]))
        assert key not in seen or seen[key] == repr(fields), (fields, seen[key])
        seen[key] = repr(fields)


# A call record's ID (call_records.record_id): the digest of json's sorted text, whoever writes it
# (cache_format.record_json).
_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=12)  # (orjson writes these: most records)
_TEXT = _ASCII | _ASCII | st.sampled_from(["a.py", "\x7f", "\x00\x1f\"\\", "caf\u00e9", "\ud800", "/x/",
                                           "\U000f0001"]) \
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
_INT = st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
_RECORDS = st.tuples(_TEXT, _TEXT, _TEXT, _INT, _INT, _INT, st.dictionaries(_TEXT, _TEXT, max_size=3),
                     st.dictionaries(_TEXT, st.dictionaries(_TEXT, _TEXT, max_size=3), max_size=3), _TEXT,
                     st.lists(st.tuples(_TEXT, st.lists(_INT, max_size=4)).map(list), max_size=3),
                     st.lists(_TEXT, max_size=3)).map(list)
_ODD = [None, True, False, float("nan"), float("inf"), -float("inf"), 1e16, 1.5e-05, 2.0, -0.0, 2 ** 64]
_BASE = ["a.py", "f", "[[],[]]", 1, 2, 0, {"b.py": "x", "a.py": "y"}, {"c.py": {"g": "d 1", "f": "e 2"}}, "abc",
         [["a.py", [1, 3]], ["b.py", [2]]], ["id1", "id2"]]


def _json_id(record) -> str:
    return cache.digest(json.dumps(record, separators=(",", ":"), sort_keys=True))


@given(_RECORDS)
def test_a_records_id_is_the_digest_of_jsons_sorted_text(record):
    assert cache_format.record_json(record) == json.dumps(record, separators=(",", ":"), sort_keys=True).encode("ascii")
    assert call_records.record_id(record) == _json_id(record)


@pytest.mark.parametrize("odd", _ODD, ids=repr)
def test_a_record_of_another_shape_gets_jsons_id_too(odd):
    """A value where the record has none of its type (a float, None, a bool, a big int) in any field or container:
    json's text all the same (NaN and null apart)."""
    spots = [*(lambda r, i=i: r.__setitem__(i, odd) for i in range(11)), lambda r: r[6].__setitem__("x", odd),
             lambda r: r[7]["c.py"].__setitem__("f", odd), lambda r: r[7].__setitem__("c.py", odd),
             lambda r: r[9][0][1].append(odd), lambda r: r[9][1].__setitem__(0, odd),
             lambda r: r[9].append(odd), lambda r: r[10].append(odd), lambda r: r.append(odd)]
    assert call_records.record_id(_BASE) == _json_id(_BASE)
    for spot in spots:
        changed = json.loads(json.dumps(_BASE))
        spot(changed)
        assert call_records.record_id(changed) == _json_id(changed)
    nan, none = json.loads(json.dumps(_BASE)), json.loads(json.dumps(_BASE))
    nan[9][0][1].append(float("nan"))
    none[9][0][1].append(None)
    assert call_records.record_id(nan) != call_records.record_id(none)


@pytest.mark.parametrize("text", ["\x7f", "a\x7fb", "caf\u00e9", "\ud800", "\x00\x1f", "\U000f0001", '"\\/', "\u2028"],
                         ids=repr)
def test_a_records_texts_are_written_as_json_writes_them(text):
    """DEL, control characters, non-ASCII and lone surrogates in any text or key of a record."""
    spots = [*(lambda r, i=i: r.__setitem__(i, text) for i in (0, 1, 2, 8)), lambda r: r[6].__setitem__(text, "x"),
             lambda r: r[6].__setitem__("a.py", text), lambda r: r[7]["c.py"].__setitem__(text, "y"),
             lambda r: r[7]["c.py"].__setitem__("f", text), lambda r: r[9][0].__setitem__(0, text),
             lambda r: r[10].append(text)]
    for spot in spots:
        changed = json.loads(json.dumps(_BASE))
        spot(changed)
        assert cache_format.record_json(changed) == \
            json.dumps(changed, separators=(",", ":"), sort_keys=True).encode("ascii")
        assert call_records.record_id(changed) == _json_id(changed)
