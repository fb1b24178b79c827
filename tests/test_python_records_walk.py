"""The call records' digest walk (python_records._Walk): its dedicated path for Assignments writes what the general
path (a dataclass of offlint.types, its fields in order) writes, on usual and odd fields, shared objects and the
lines of the run's files left out or kept; a text naming lines gives each of the run's files' lines by position."""

from __future__ import annotations

import random

import pytest

from offlint.sources import python_records
from offlint.sources.python_records import _Walk, encode
from offlint.types import ABSENT, KEY_DEFAULT, Assignment, Location, Severity, Source, Unknown

HERE = Location("a.py", 3, 1)
THERE = Location("b/c.py", 12, 5)
SHARED = [1, "a.py:4 shared"]

# Per field of Assignment (key, value, location, source, text, via, op): usual values first, then odd ones.
_CHOICES = [
    ["model.x", "a.py:3 key", "", 7, None, Unknown("k"), ("t", 1), HERE, "b/c.py:2 and a.py:9 key"],
    ["v", 1, 2.5, True, False, None, float("nan"), -0.0, 2 ** 70, [1, "a.py:9"], {"k": [1]}, ("a", "b"), SHARED,
     (HERE, 1), Unknown("u"), KEY_DEFAULT, ABSENT, HERE, frozenset({"x"}), "b/c.py:12 here", Source.YAML, "z.py:1"],
    [HERE, THERE, Location("z.py", 4, 1), Location("a.py", True, 2), Location("a.py", 3.0, 1), Location(None, 1, 1),
     None, Unknown("no place"), ("a.py", 3)],
    [Source.PYTHON, Source.YAML, Source.DEFAULT, "python", None, Severity.ERROR, 3],
    ["x = 1", "", "a.py:3 text", None, 5, Unknown("t"), ("t",), "a.py:1 a.py:2 b/c.py:3"],
    [(), ("cfg.model",), ("cfg.model", "_pretrain_common()"), ("a.py:3 f()", "b/c.py:12 g()", "z.py:1 h()"),
     ("x", 1, True, 1.0, None, float("nan")), (HERE, "x"), (THERE,), ["cfg.model", "x"], None, "cfg.model",
     ("a.py:3 f() via b/c.py:4 g()",), (SHARED, SHARED)],
    ["set", "add", "", None, 1, "a.py:7"],
]


def _assignments() -> list:
    out = []
    usual = [choices[0] for choices in _CHOICES]
    for index, choices in enumerate(_CHOICES):
        for choice in choices:
            fields = list(usual)
            fields[index] = choice
            out.append(Assignment(*fields))
    rng = random.Random(83)
    for _ in range(400):
        out.append(Assignment(*(rng.choice(choices) for choices in _CHOICES)))
    out.extend(out[::5])  # met again
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("files", [set(), {"a.py"}, {"a.py", "b/c.py", "z.py"}])
def test_the_walks_assignment_path_writes_what_the_general_path_writes(files, monkeypatch):
    assignments = _assignments()
    values = [assignments, {"t": (HERE, assignments[:50], THERE), "u": assignments[50:60]},
              (assignments[3], [assignments[4], ("a.py:1 x", assignments[5])]), *assignments[:60]]
    fast = [encode(value, files) for value in values]
    assert python_records._ASSIGNMENT is Assignment
    monkeypatch.setattr(python_records, "_ASSIGNMENT", None)
    general = [encode(value, files) for value in values]
    assert fast == general
    assert any(result is not None for result in fast)
    if files:
        assert any(result is not None and result[1] for result in fast)


def test_a_texts_lines_in_the_runs_files_are_left_out_in_order():
    lines: list = []
    walk = _Walk([], lines, {"a.py", "b/c.py"})
    assert walk.text("no line here") == "no line here"
    assert walk.text("z.py:3 f()") == "z.py:3 f()"
    assert walk.text("f() at a.py:3") == "f() at a.py:#"
    assert walk.text("a.py:4 f() via z.py:5 g() via b/c.py:6") == "a.py:# f() via z.py:5 g() via b/c.py:#"
    assert walk.text("xa.py:7 is another file") == "xa.py:7 is another file"
    assert lines == [["a.py", 3], ["a.py", 4], ["b/c.py", 6]]
