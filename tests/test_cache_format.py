"""The cache's JSON format: values come back equal, shared frozen objects shared, and anything offlint does not
write is refused (CacheFormatError), on the decoder's fast paths as on its general one."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offlint import cache_format
from offlint.cache_format import VALUE_CLASSES, CacheFormatError, Codec
from offlint.types import Assignment, Location, Severity, Source

CODEC = Codec(VALUE_CLASSES)


def test_values_come_back_equal_and_shared_objects_shared():
    here = Location("a.py", 3, 1)
    value = {"t": (here, here, Source.YAML, Severity.ERROR), "l": [1, "x", None, 2.5], "s": {1, 2},
             "f": frozenset({"a"})}
    back = CODEC.loads(CODEC.dumps(value))
    assert back == value
    assert back["t"][0] is back["t"][1] and type(back["t"]) is tuple and back["t"][2] is Source.YAML


def test_a_record_comes_back_with_the_module_that_defines_its_class_and_the_records_its_fields_came_from():
    from offlint.sources.python_values import Record

    made = {"num_gpus": ("from replace(...) at w.py:9", "from WorkloadBaseConfig(...) at w.py:4")}
    record = Record("WorkloadBaseConfig", {"num_gpus": 8, "peft": None}, True, "scripts/performance/utils/utils.py",
                    made)
    back = CODEC.loads(CODEC.dumps([record]))[0]
    assert (back.name, back.fields, back.plain, back.origin, back.made) == (
        record.name, record.fields, True, record.origin, made)
    with pytest.raises(CacheFormatError):  # a record of the form before its origin was kept
        CODEC.loads(json.dumps({"@": "Record", "v": ["W", {}, True]}))
    with pytest.raises(CacheFormatError):  # nor before the steps of its fields were
        CODEC.loads(json.dumps({"@": "Record", "v": ["W", {}, True, "w.py"]}))


def test_each_dumps_shares_objects_within_its_own_value_only():
    """A codec's encoder serves every `dumps`: an object written by one value is written whole by the next (a
    reference would point into another entry), also after a value that could not be written."""
    here = Location("a.py", 3, 1)
    value = [Assignment("k", 1, here, Source.PYTHON, "k = 1", ("f", "g")), here, ("f", "g"), Severity.ERROR]
    codec = Codec(VALUE_CLASSES)
    first = codec.dumps(value)
    assert codec.dumps(value) == first == Codec(VALUE_CLASSES).dumps(value)
    with pytest.raises(TypeError):
        codec.dumps([here, ("f", "g"), object()])
    assert codec.dumps(value) == first
    back = codec.loads(codec.dumps([value, value]))
    assert back == [value, value] and back[0][0] is back[1][0]


@pytest.mark.parametrize("entry", [
    {"@": "Location", "v": ["a.py", 3]},  # a field missing
    {"@": "Location", "v": ["a.py", "3", 1]},  # an int field given a string
    {"@": "Location", "v": ["a.py", 3, 1], "x": 1},  # a key offlint never writes
    {"@": "Location", "v": ["a.py", 3, 1], "#": 5},  # a shared object out of order
    {"@": "Location", "v": "a.py:3:1"},  # fields not a list
    {"@": "Location"},  # no fields
    {"@": "t", "v": "ab"},  # a tuple that is not a list
    {"@": "Source", "v": "no-such-source"},  # not a member
    {"@": "Source", "v": ["python"]},  # not a member's value
    {"@": "r", "v": 0},  # a reference to nothing
    {"@": "t", "v": ["a", "b"], "#": 1},  # a shared tuple out of order
    {"@": "t", "v": ["a", {"@": "t", "v": [1, 2]}], "#": 0},  # a shared tuple holding more than plain values
    {"@": "t", "v": ["a", 2.5], "#": 0},  # floats are never shared
    {"@": "d", "v": [["a", 1]], "#": 0},  # only tuples and frozen objects are shared
    {"@": "os.system", "v": ["true"]},  # not a class of the format
])
def test_what_offlint_does_not_write_is_refused(entry):
    with pytest.raises(CacheFormatError):
        CODEC.loads(json.dumps(entry))


def test_equal_tuples_of_plain_values_are_written_once_and_tuples_of_other_types_kept_apart():
    via = ("a.py:3 f()", "b.py:9 g()")
    value = [via, tuple(via), ("x", 1), ("x", True), ("x", 1.0), (None, 0), (None, False), ("x", 1), ("y",)]
    text = CODEC.dumps(value)
    assert text.count("a.py:3") == 1 and text.count('"x",1]') == 1
    back = CODEC.loads(text)
    assert back == value and back[0] is back[1] and back[2] is back[7]
    assert [tuple(map(type, item)) for item in back] == [tuple(map(type, item)) for item in value]


def _json_only(value: object) -> str:
    """What dumps writes with the json module alone (no orjson)."""
    saved, cache_format.orjson = cache_format.orjson, None
    try:
        return CODEC.dumps(value)
    finally:
        cache_format.orjson = saved


# Plain values and containers as recipes hold them: non-ASCII and astral text (offlint's placeholders are in a
# private-use plane), floats of every size, ints past 64 bits.
_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4), max_leaves=20)


@pytest.mark.skipif(cache_format.orjson is None, reason="orjson not installed")
@given(_VALUES)
def test_the_fast_writer_decodes_to_what_json_writes(value):
    text = CODEC.dumps(value)
    assert text.isascii()
    assert CODEC.loads(text) == CODEC.loads(_json_only(value)) == value


@pytest.mark.parametrize("value", [
    [float("nan"), 1.5],  # orjson would write null
    {"x": (float("inf"), -float("inf"))},
    [2 ** 70, -(2 ** 64)],  # orjson refuses ints past 64 bits
    ["\ud800 lone surrogate"],  # orjson refuses it
    ["caf\u00e9", "\U000f0001"],  # orjson writes UTF-8; the cache's files are ASCII
    ["plain", 1.0],  # (each case is also written nested past orjson's depth limit)
])
def test_what_the_fast_writer_cannot_write_as_json_does_is_written_by_json(value):
    deep = value
    for _ in range(300):  # past orjson's nesting limit
        deep = [deep]
    for case in (value, deep):
        text = CODEC.dumps(case)
        assert text == _json_only(case) and text.isascii()
        back = CODEC.loads(text)
        assert repr(back) == repr(case)  # NaN != NaN: compared as written
    assert math.isnan(CODEC.loads(CODEC.dumps([float("nan")]))[0])


def test_field_getter_gives_a_tuple_of_the_named_fields_however_many():
    here = Location("a.py", 3, 1)
    assert cache_format.field_getter([])(here) == ()
    assert cache_format.field_getter(["line"])(here) == (3,)
    assert cache_format.field_getter(["col", "path"])(here) == (1, "a.py")


def test_absent_is_one_object_after_pickling():
    """Workers send their units to the parent pickled: a ByVersion's ABSENT (a field the version lacks) came back as
    another object, so resolve kept the assignment (`value is ABSENT`) and OFL220 said "cuda_graph_modules names
    '<absent>'" on 11 Bridge recipes judged as 0.16, in whole-tree runs only (a one-file run has no workers)."""
    import pickle

    from offlint.types import ABSENT, KEY_DEFAULT, ByVersion

    assert pickle.loads(pickle.dumps(ABSENT)) is ABSENT and pickle.loads(pickle.dumps(KEY_DEFAULT)) is KEY_DEFAULT
    value = pickle.loads(pickle.dumps(ByVersion((((">=0.18", ["attn"]), ("<0.18", ABSENT))))))
    assert value.choices[1][1] is ABSENT


def test_a_launch_override_given_on_some_paths_keeps_its_below_through_pickle_and_the_cache():
    """A Hydra override one alternative of an undecided branch gives holds BELOW on the other paths (the recipe's
    value, put in its place when the unit is resolved): the same object after a worker pickles the unit and after
    the cache stores it, or `is BELOW` would miss it and the path would read as a value of its own."""
    import pickle

    from offlint.types import BELOW, OneOf

    value = OneOf("given on some paths", paths=((True, (("inside if at line 4", 0, "x"),), None, "a=true"),
                                                (BELOW, (("inside if at line 4", 1, "y"),), None, None)))
    assert pickle.loads(pickle.dumps(value)).paths[1][0] is BELOW
    assert CODEC.loads(CODEC.dumps(value)).paths[1][0] is BELOW
