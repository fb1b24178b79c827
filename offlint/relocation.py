"""Moving the locations of a reading kept from the cache with the lines they name, when only line positions changed
(offlint.part_digests.line_moves): Location objects, and "path.py:LINE" in texts. What cannot be moved exactly
raises Unmovable, and the reading is done again.
"""

from __future__ import annotations

import enum
import re

from offlint.cache_format import Codec, instance_of
from offlint.sources.python_values import PartialDict, Record
from offlint.types import ABSENT, BELOW, KEY_DEFAULT, Assignment, Location, Source, Unit


class Unmovable(Exception):
    """A location of a kept reading that cannot be moved exactly with its lines."""


_PATH_LINE = re.compile(r"(?<![\w./\\-])(/?(?:[\w.\-]+/)*[\w.\-]+\.py):(\d+)")  # an absolute path too
_BARE_LINE = re.compile(r"\bline (\d+)")
_ATOMS = frozenset((int, bool, float))
_TEXTS = frozenset((str,))


def _names_no_line(texts: tuple) -> bool:
    """Whether a tuple of texts names no line: none holds ".py:" or "line " (joined by a character neither holds,
    so that no pair of neighbours makes one)."""
    joined = "\0".join(texts)
    return ".py:" not in joined and "line " not in joined


def relocate(codec: Codec, units: list, findings: list, moves: dict[str, dict[int, int]],
             movers: list | None = None) -> tuple[list, list]:
    """Units (None: a function that gave none) and findings kept from the cache, with every location in a file of
    `moves` (old line -> new line) moved: Location objects, and "path.py:LINE" in texts. A text naming a line
    without its file ("line 12", a shortened path) may name a line of any file the reading used: it must name
    no line that moved (a line of code of a part the reading used, in a file whose lines moved, is in that
    file's `moves`; the reading used nothing else of it). And a unit's assignments must keep their order by line
    (the reader sorts them so, whatever their file). Raises Unmovable otherwise: the units are read again. The
    values given are not changed: what holds a moved location is copied.

    `movers`: a list the caller keeps across calls on values of one decoded outcome (alive meanwhile), so that
    calls with equal `moves` move each object the units share once (a file's 31 reusable recipe units, each
    moved alone, share their base builder's assignments)."""
    if not any(old != new for lines in moves.values() for old, new in lines.items()):
        return units, findings
    mover = next((m for m in movers if m.codec is codec and m.moves == moves), None) if movers else None
    if mover is None:
        mover = _Mover(codec, {file: dict(lines) for file, lines in moves.items()})
        if movers is not None:
            movers.append(mover)
    new_units = [mover.move(unit) for unit in units]
    new_findings = [mover.move(finding) for finding in findings]
    for old, new in zip(units, new_units):
        if old is not None and not mover.in_order(old, new):
            raise Unmovable(f"{old.name}: its assignments change order")
    return new_units, new_findings


class _Mover:
    """Copies a value made of the cache format's classes with its locations moved (copy on change: a part
    holding nothing moved is the same object; an object met twice is copied once, as the format shares it)."""

    def __init__(self, codec: Codec, moves: dict[str, dict[int, int]]):
        self.codec, self.moves = codec, moves
        self.decoding = codec._decoding  # class name -> (class, fields, ..., settable by __dict__)
        self.getters = codec._getters
        self.memo: dict[int, object] = {}
        self.texts: dict[str, str | Unmovable] = {}  # a text -> itself moved (texts repeat: the same provenance)
        self.leaves: set[type] = set()  # enum classes met: their members hold no location
        self.ordered: dict[int, bool] = {}  # id of a unit moved -> _same_order's answer (a unit met again: moved once)
        # Assignments (most of a unit's objects: with a Location, a Source and a `via` tuple each) are moved by
        # `_assignment`, where the codec holds them as offlint's Assignment
        self.assignment = self.decoding.get("Assignment") if codec._dedicated else None

    def in_order(self, old: Unit, new: Unit) -> bool:
        """_same_order, once per unit (it sorts the moved unit's recipe layer in place)."""
        key = id(old)
        if key not in self.ordered:
            self.ordered[key] = _same_order(old, new)
        return self.ordered[key]

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
        if kind in _ATOMS or value is None or kind in self.leaves:
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        if kind is Assignment and self.assignment is not None:
            out = self._assignment(value)
        elif kind is Location:
            out = value
            lines = self.moves.get(value.path)
            if lines is not None:
                line = lines.get(value.line)
                if line is None:
                    raise Unmovable(str(value))
                if line != value.line:
                    out = Location(value.path, line, value.col)
        elif kind is tuple and _TEXTS.issuperset(map(type, value)) and _names_no_line(value):
            out = value  # (a call chain: `via`)
        elif kind is tuple or kind is list or kind is frozenset or kind is set:
            items = self.items(value)
            out = value if items is None else kind(items)
        elif kind is dict or kind is PartialDict:
            keys, values = self.items(value.keys()), self.items(value.values())
            if keys is None and values is None:
                out = value
            else:
                pairs = zip(keys or list(value.keys()), values or list(value.values()))
                out = dict(pairs) if kind is dict else kind(pairs, value.reason)
        elif kind is Record:
            fields, made = self.move(value.fields), self.move(value.made)
            out = value if fields is value.fields and made is value.made else \
                Record(value.name, fields, value.plain, value.origin, made)
        elif isinstance(value, enum.Enum) or value is KEY_DEFAULT or value is ABSENT or value is BELOW:
            if isinstance(value, enum.Enum):
                self.leaves.add(kind)
            out = value
        else:
            plain = self.decoding.get(kind.__name__)
            if plain is None or plain[0] is not kind:
                raise Unmovable(f"a {kind.__name__}")  # nothing offlint stores: read again
            moved = self.items(self.getters[kind.__name__](value))
            out = value if moved is None else instance_of(kind, plain[1], plain[4], moved)
        self.memo[key] = out
        return out

    def _assignment(self, value: Assignment) -> Assignment:
        """What the dataclass path below gives for an Assignment, its fields looked at inline: the Location moved
        (through `move`, shared as the format shares it) when its file's lines moved, the texts and the `via` tuple
        of texts kept when they name no line, anything else through `move`."""
        name, item, where, source, text, via, op = fields = self.getters["Assignment"](value)
        moved = None
        if type(where) is not Location or where.path in self.moves:
            new = self.move(where)
            if new is not where:
                moved = list(fields)
                moved[2] = new
        for index, field in ((0, name), (1, item), (4, text), (6, op)):
            kind = type(field)
            if kind is str:
                if ".py:" not in field and "line " not in field:
                    continue
            elif kind in _ATOMS or field is None or kind in self.leaves:
                continue
            new = self.move(field)
            if new is not field:
                if moved is None:
                    moved = list(fields)
                moved[index] = new
        if type(source) is not Source:
            new = self.move(source)
            if new is not source:
                if moved is None:
                    moved = list(fields)
                moved[3] = new
        if not (type(via) is tuple and (not via or _TEXTS.issuperset(map(type, via)) and _names_no_line(via))):
            new = self.move(via)
            if new is not via:
                if moved is None:
                    moved = list(fields)
                moved[5] = new
        return value if moved is None else instance_of(Assignment, self.assignment[1], self.assignment[4], moved)

    def items(self, values) -> list | None:
        """`values` (a collection's items, an object's fields) each moved, as a list; None when none moved. A value
        that cannot hold a location (a number, a text naming no line, an enum member) is not looked at further."""
        out = None
        move, leaves = self.move, self.leaves
        for index, value in enumerate(values):
            kind = type(value)
            if kind is str:
                if ".py:" not in value and "line " not in value:
                    continue
            elif kind in _ATOMS or value is None or kind in leaves:
                continue
            moved = move(value)
            if moved is not value:
                if out is None:
                    out = list(values)
                out[index] = moved
        return out

    def text(self, value: str) -> str:
        moves = self.moves

        def shifted(line: int) -> bool:  # a line of some file of `moves` that moved
            return any(lines.get(line, line) != line for lines in moves.values())

        def path_line(match: re.Match) -> str:
            path, line = match.group(1), int(match.group(2))
            lines = moves.get(path)
            if lines is not None:
                new = lines.get(line)
                if new is None:
                    raise Unmovable(f"{path}:{line}")
                return f"{path}:{new}"
            if shifted(line) and any(moved.endswith("/" + path) for moved in moves):
                raise Unmovable(match.group(0))
            return match.group(0)

        if any(shifted(int(line)) for line in _BARE_LINE.findall(value)):
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
