"""Moving the locations of a reading kept from the cache with the lines they name, when only line positions changed
(offlint.part_digests.line_moves): Location objects, and "path.py:LINE" in texts. What cannot be moved exactly
raises Unmovable, and the reading is done again.
"""

from __future__ import annotations

import enum
import re

from offlint.cache_format import Codec
from offlint.sources.python_values import PartialDict, Record
from offlint.types import ABSENT, KEY_DEFAULT, Location, Unit


class Unmovable(Exception):
    """A location of a kept reading that cannot be moved exactly with its lines."""


_PATH_LINE = re.compile(r"(?<![\w./\\-])(/?(?:[\w.\-]+/)*[\w.\-]+\.py):(\d+)")  # an absolute path too
_BARE_LINE = re.compile(r"\bline (\d+)")


def relocate(codec: Codec, units: list, findings: list, moves: dict[str, dict[int, int]]) -> tuple[list, list]:
    """Units (None: a function that gave none) and findings kept from the cache, with every location in a file of
    `moves` (old line -> new line) moved: Location objects, and "path.py:LINE" in texts. A text naming a line
    without its file ("line 12", a shortened path) may name a line of any file the reading used: it must name
    no line that moved (a line of code of a part the reading used, in a file whose lines moved, is in that
    file's `moves`; the reading used nothing else of it). And a unit's assignments must keep their order by line
    (the reader sorts them so, whatever their file). Raises Unmovable otherwise: the units are read again. The
    values given are not changed: what holds a moved location is copied."""
    shifted = {old for lines in moves.values() for old, new in lines.items() if old != new}
    if not shifted:
        return units, findings
    mover = _Mover(codec, moves, shifted)
    new_units = [mover.move(unit) for unit in units]
    new_findings = [mover.move(finding) for finding in findings]
    for old, new in zip(units, new_units):
        if old is not None and not _same_order(old, new):
            raise Unmovable(f"{old.name}: its assignments change order")
    return new_units, new_findings


class _Mover:
    """Copies a value made of the cache format's classes with its locations moved (copy on change: a part
    holding nothing moved is the same object; an object met twice is copied once, as the format shares it)."""

    def __init__(self, codec: Codec, moves: dict[str, dict[int, int]], shifted: set[int]):
        self.moves, self.shifted = moves, shifted
        self.decoding = codec._decoding  # class name -> (class, fields, ..., settable by __dict__)
        self.getters = codec._getters
        self.memo: dict[int, object] = {}
        self.texts: dict[str, str | Unmovable] = {}  # a text -> itself moved (texts repeat: the same provenance)

    def move(self, value):
        kind = type(value)
        if kind is str:
            if ".py:" not in value and "line " not in value:
                return value
            moved = self.texts.get(value)
            if moved is None:
                try:
                    moved = self.text(value)
                except Unmovable as exc:
                    moved = exc
                self.texts[value] = moved
            if type(moved) is not str:
                raise moved
            return moved
        if kind is int or kind is bool or kind is float or value is None:
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        if kind is Location:
            out = value
            lines = self.moves.get(value.path)
            if lines is not None:
                line = lines.get(value.line)
                if line is None:
                    raise Unmovable(str(value))
                if line != value.line:
                    out = Location(value.path, line, value.col)
        elif kind is tuple or kind is list:
            items = [self.move(item) for item in value]
            out = value if all(a is b for a, b in zip(items, value)) else kind(items)
        elif kind is dict or kind is PartialDict:
            pairs = [(self.move(k), self.move(v)) for k, v in value.items()]
            if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items())):
                out = value
            elif kind is dict:
                out = dict(pairs)
            else:
                out = kind(pairs, value.reason)
        elif kind is frozenset or kind is set:
            items = [self.move(item) for item in value]
            out = value if all(a is b for a, b in zip(items, value)) else kind(items)
        elif kind is Record:
            fields = self.move(value.fields)
            out = value if fields is value.fields else Record(value.name, fields, value.plain)
        elif isinstance(value, enum.Enum) or value is KEY_DEFAULT or value is ABSENT:
            out = value
        else:
            plain = self.decoding.get(kind.__name__)
            if plain is None or plain[0] is not kind:
                raise Unmovable(f"a {kind.__name__}")  # nothing offlint stores: read again
            fields = self.getters[kind.__name__](value)
            moved = [self.move(field) for field in fields]
            if all(a is b for a, b in zip(moved, fields)):
                out = value
            else:
                out = object.__new__(kind)
                if plain[4]:
                    out.__dict__.update(zip(plain[1], moved))
                else:
                    for name, field in zip(plain[1], moved):
                        object.__setattr__(out, name, field)
        self.memo[key] = out
        return out

    def text(self, value: str) -> str:
        moves, shifted = self.moves, self.shifted

        def path_line(match: re.Match) -> str:
            path, line = match.group(1), int(match.group(2))
            lines = moves.get(path)
            if lines is not None:
                new = lines.get(line)
                if new is None:
                    raise Unmovable(f"{path}:{line}")
                return f"{path}:{new}"
            if line in shifted and any(moved.endswith("/" + path) for moved in moves):
                raise Unmovable(match.group(0))
            return match.group(0)

        if any(int(line) in shifted for line in _BARE_LINE.findall(value)):
            raise Unmovable("a line named without its file")
        return _PATH_LINE.sub(path_line, value) if ".py:" in value else value


def _same_order(old: Unit, new: Unit) -> bool:
    """Whether `new` (`old` with its locations moved) has its assignments in the order a reading now gives. The
    Python reader sorts a recipe layer's assignments by line and column, whatever their file: moved lines can
    reorder them, and they are sorted again (the same as sorting the reader's own order, unless two of them
    that were apart now tie). Any other layer keeps its order, so moving must not change how they compare."""
    for before, after in zip(old.layers, new.layers):
        first, second = before.assignments, after.assignments
        if before.name == "recipe":
            pairs = sorted(zip(first, second), key=lambda pair: (pair[1].location.line, pair[1].location.col))
            for (a, c), (b, d) in zip(pairs, pairs[1:]):
                if (c.location.line, c.location.col) == (d.location.line, d.location.col) and \
                        (a.location.line, a.location.col) != (b.location.line, b.location.col):
                    return False
            after.assignments = [moved for _, moved in pairs]
            continue
        for index in range(1, len(first)):
            a, b = first[index - 1].location, first[index].location
            c, d = second[index - 1].location, second[index].location
            if ((a.line, a.col) < (b.line, b.col)) != ((c.line, c.col) < (d.line, d.col)) or \
                    ((a.line, a.col) == (b.line, b.col)) != ((c.line, c.col) == (d.line, d.col)):
                return False
    return True
