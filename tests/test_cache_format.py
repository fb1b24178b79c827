"""The cache's JSON format: values come back equal, shared frozen objects shared, and anything offlint does not
write is refused (CacheFormatError), on the decoder's fast paths as on its general one."""

from __future__ import annotations

import json

import pytest

from offlint.cache_format import VALUE_CLASSES, CacheFormatError, Codec
from offlint.types import Location, Severity, Source

CODEC = Codec(VALUE_CLASSES)


def test_values_come_back_equal_and_shared_objects_shared():
    here = Location("a.py", 3, 1)
    value = {"t": (here, here, Source.YAML, Severity.ERROR), "l": [1, "x", None, 2.5], "s": {1, 2},
             "f": frozenset({"a"})}
    back = CODEC.loads(CODEC.dumps(value))
    assert back == value
    assert back["t"][0] is back["t"][1] and type(back["t"]) is tuple and back["t"][2] is Source.YAML


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
    {"@": "os.system", "v": ["true"]},  # not a class of the format
])
def test_what_offlint_does_not_write_is_refused(entry):
    with pytest.raises(CacheFormatError):
        CODEC.loads(json.dumps(entry))
