"""The content-hash cache: what reading and checking one file gave, reused while valid.

An entry is keyed by the file's path and the hash of its text, and remembers the hash of every other file
its reading depended on (imported base builders, helpers, constants, a local Hugging Face config.json). Of a
Python module it used only in part, it also remembers which parts and their hashes (`definition_digests`: the
module-level statements, and each module-level function it ran or looked at), by what they mean and on which
lines they lie. It is valid while every other file is unchanged, or changed only in parts it did not use or
only where they mean the same (a comment, lines moved: its locations are moved with them): an edit of a base
builder's function re-reads the recipes that ran that function, not every recipe that imports the module. The same is kept per unit
(`FileOutcome.unit_used`), so a file read again reuses the units whose parts are unchanged (pipeline); a file
edited outside every definition keeps its units. The whole cache is keyed by a fingerprint of everything else
that decides the result: offlint's own code and rules, the options, the megatron-core version, the project's
pyproject.toml and the set of Python files (an added module can change an import).

What it trusts (offlint runs as a CI gate on pull requests, so the checked tree is hostile):
- Nothing inside the checked tree. The cache lives in the user's cache directory (`OFFLINT_CACHE_DIR`, else
  `$XDG_CACHE_HOME/offlint`, else `~/.cache/offlint`), one folder per project root; a cache directory that
  lies inside the checked project is not used at all, and an old in-tree `.offlint_cache/` is never read.
- Only files this user wrote: the folder and its files must belong to the current user, be writable by nobody
  else, and be regular files (symbolic links are not followed).
- Only data: entries are JSON (cache_format.py), so a planted or damaged file can at worst be ignored. Any
  problem reading it means "no cache", never an error and never a different answer.
"""

from __future__ import annotations

import ast
import bisect
import enum
import hashlib
import itertools
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from offlint.cache_format import VALUE_CLASSES, CacheFormatError, Codec
from offlint.suppressions import Suppression
from offlint.sources.python_values import PartialDict, Record
from offlint.types import ABSENT, KEY_DEFAULT, Finding, Location, Unit

ENV_DIR = "OFFLINT_CACHE_DIR"
_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This file is a cache directory tag created by offlint.\n"
        "# For information about cache directory tags, see https://bford.info/cachedir/\n")
FORMAT = 7  # 7: definition_digests by meaning, with the lines of each part
MODULE = "<module>"  # the module-level statements of a file (python_project.MODULE)
ABSENT_FILE = "absent"
MAX_CACHE_BYTES = 512 * 1024 * 1024  # a cache file bigger than this is not one offlint wrote for a real tree


@dataclass
class FileOutcome:
    """Everything one file contributes to a check, as computed when it was read."""

    path: str
    digest: str
    units: list[Unit] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)
    error: str | None = None
    findings: list[Finding] = field(default_factory=list)  # of its units that need no linking (not commands)
    deps: dict[str, str] = field(default_factory=dict)  # other files read while reading it -> their digest
    # Of those files, the ones read only in part: path -> {MODULE or a function's name: definition_digests'};
    # under its own path, all of a Python file's own parts (its units come from them)
    parts: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per unit a function gave (or did not: no unit of that name), what its reading used: "N" the whole of file N,
    # "N:part" one part of it, N numbering [this file, *sorted(deps)]; an edit re-reads only the units it concerns
    unit_used: dict[str, list[str]] = field(default_factory=dict)


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def definition_digests(module: ast.Module, lines: list[bytes]) -> dict[str, str]:
    """The parts of a parsed module a reading can use alone, each as "MEANING LAYOUT" (`meaning`, `layout`):
    each module-level function (from its first decorator), and MODULE: every other module-level statement, the
    names, order and decorators of the functions, the meaning of a function that imports inside its body (the
    reader collects those imports while preparing the module) and whether each method names a config key.

    MEANING changes whenever what reading the part gives can change, and not when the part only moves or its
    comments change: it hashes each statement's own text as written (`_Part`), not the comments and blank lines
    between statements nor a comment ending a statement's last line, plus the columns statements start at and
    whether a function's text names a config key (the reader skips one that does not, comments included).
    LAYOUT says on which lines those statements lie, so that a reading kept from the cache can have its
    locations moved with them (`line_moves`)."""
    from offlint.sources.python import worth_parsing

    return {name: f"{part.digest()} {part.layout()}"
            for name, part in _parts(module, lines, worth_parsing).items()}


def meaning(part_digest: str) -> str:
    """The MEANING of a definition_digests value (what a reading of it can give)."""
    return part_digest.partition(" ")[0]


def layout(part_digest: str) -> str:
    return part_digest.partition(" ")[2]


# The statement lists of a compound statement.
_BLOCKS_OF: dict[type, tuple[str, ...]] = {
    ast.FunctionDef: ("body",), ast.AsyncFunctionDef: ("body",), ast.ClassDef: ("body",),
    ast.If: ("body", "orelse"), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"), ast.With: ("body",), ast.AsyncWith: ("body",),
    ast.Try: ("body", "handlers", "orelse", "finalbody"), ast.ExceptHandler: ("body",), ast.Match: ("cases",),
    ast.match_case: ("body",),
    **({ast.TryStar: ("body", "handlers", "orelse", "finalbody")} if hasattr(ast, "TryStar") else {}),
}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# A text with nothing to leave out: no comment, no blank line, no trailing blank.
_UNCLEAN = re.compile(rb"#|[ \t\f\r]\n|\n\n|[ \t\f\r]\Z")
_ENDS = (b" \n", b"\t\n", b"\r\n", b"\f\n")  # a line ending in a blank


def _dirty(text: bytes, block: list[bytes]) -> list[int]:
    """The (0-based, sorted) indexes of the lines of `block` (joined: `text`) to look at: a `#` in them, a blank
    at their end, or nothing. Found with bytes.find: a regular expression tried at every byte costs more."""
    offsets = list(itertools.accumulate(map(len, block)))  # where each line ends in `text`
    found: set[int] = set()
    at = text.find(b"#")
    while at >= 0:
        index = bisect.bisect_right(offsets, at)
        found.add(index)
        at = text.find(b"#", offsets[index]) if index < len(offsets) else -1
    for needle in _ENDS:
        at = text.find(needle)
        while at >= 0:
            found.add(bisect.bisect_right(offsets, at))
            at = text.find(needle, at + 2)
    at = text.find(b"\n\n")
    while at >= 0:
        found.add(bisect.bisect_right(offsets, at) + 1)
        at = text.find(b"\n\n", at + 1)
    if text[:1] == b"\n":
        found.add(0)
    if text[-1:] in (b" ", b"\t", b"\f", b"\r"):
        found.add(len(block) - 1)
    return sorted(found)


class _Part:
    """One part's MEANING and the lines it is read from.

    Its text is its lines as written, less what cannot change a reading: blank and comment-only lines between
    statements, and a comment and blanks ending a statement's (or a compound statement's header's) last line.
    A line inside a statement (a call over several lines, a docstring) is kept whole: a comment inside
    parentheses is in a value's text as written, which messages show. Every line kept is kept with its
    indentation, so two parts of the same text hold the same statements at the same columns, on their `lines`
    in order. A function also hashes whether its comments name a config key (the reader skips a function whose
    text, comments included, names none)."""

    __slots__ = ("texts", "runs")

    def __init__(self):
        self.texts: list[bytes] = []
        self.runs: list[list[int]] = []  # the lines kept, as runs [first, last]

    def digest(self) -> str:
        return hashlib.blake2b(b"\0".join(self.texts), digest_size=16).hexdigest()

    def keep(self, first: int, last: int) -> None:
        runs = self.runs
        if runs and runs[-1][1] == first - 1:
            runs[-1][1] = last
        else:
            runs.append([first, last])

    def add(self, lines: list[bytes], first: int, last: int, statements: list, worth_parsing=None) -> None:
        """Lines first..last, which hold `statements` (and comments, blank lines around them)."""
        block = lines[first - 1:last]
        text = b"".join(block)
        if not _UNCLEAN.search(text):
            self.texts.append(text if text.endswith(b"\n") else text + b"\n")
            self.keep(first, last)
            if worth_parsing is not None:
                self.texts.append(b"-")
            return
        dirty = [first + index for index in _dirty(text, block)]
        tricky = {number for number in dirty if b"#" in lines[number - 1]
                  and (b"'" in lines[number - 1] or b'"' in lines[number - 1])}
        interior: set[int] = set()
        ends: dict[int, int] = {}
        _scan(statements, interior, ends, tricky, dirty)
        kept, comments = [], []
        start = first  # the first line not yet kept
        for number in dirty:
            if number in interior:
                continue
            if start < number:
                kept.append(b"".join(lines[start - 1:number - 1]))
                self.keep(start, number - 1)
            start = number + 1
            raw = lines[number - 1]
            if b"#" in raw:
                at = raw.find(b"#", ends.get(number, 0)) if number in tricky else raw.find(b"#")
                if at >= 0:
                    comments.append(raw[at:])
                    raw = raw[:at]
            raw = raw.rstrip()
            if raw:
                kept.append(raw + b"\n")
                self.keep(number, number)
        if start <= last:
            tail = b"".join(lines[start - 1:last])
            kept.append(tail if tail.endswith(b"\n") else tail + b"\n")
            self.keep(start, last)
        self.texts.append(b"".join(kept))
        if worth_parsing is not None:
            self.texts.append(b"config" if comments and worth_parsing(b"".join(comments)) else b"-")

    def layout(self) -> str:
        """The lines kept: the first one, then each as the gap from the one before (runs as GAP*COUNT)."""
        out = []
        previous = None
        for first, last in self.runs:
            out.append(str(first) if previous is None else str(first - previous))
            if last > first:
                out.append(f"1*{last - first}" if last - first > 1 else "1")
            previous = last
        return ",".join(out)


def _scan(statements: list, interior: set[int], ends: dict[int, int], tricky: set[int], dirty: list[int]) -> None:
    """The lines inside a statement (or a header, a decorator, a case pattern) over several lines, and, on the
    `tricky` lines (a `#` and a quote: which `#` starts the comment?), the column the last of them ends at. Only
    the `dirty` lines (sorted) are asked about: a compound statement without one is not looked into."""
    for stmt in statements:
        kind = type(stmt)
        blocks = _BLOCKS_OF.get(kind)
        if blocks is not None and kind is not ast.match_case:
            at = bisect.bisect_left(dirty, _start_line(stmt))
            if at == len(dirty) or dirty[at] > stmt.end_lineno:
                continue
        if blocks is None:
            first, last = stmt.lineno, stmt.end_lineno
            if last != first:
                interior.update(range(first, last))
            if last in tricky:
                ends[last] = max(ends.get(last, 0), stmt.end_col_offset)
            continue
        if kind is ast.match_case:
            heads = [stmt.pattern] + ([stmt.guard] if stmt.guard is not None else [])
        else:
            heads = list(getattr(stmt, "decorator_list", ()))
            first = stmt.lineno
            last, column = _header_end(stmt, (first, stmt.col_offset))
            if last != first:
                interior.update(range(first, last))
            if last in tricky:
                ends[last] = max(ends.get(last, 0), column)
        for head in heads:
            if head.end_lineno != head.lineno:
                interior.update(range(head.lineno, head.end_lineno))
            if head.end_lineno in tricky:
                ends[head.end_lineno] = max(ends.get(head.end_lineno, 0), head.end_col_offset)
        for name in blocks:
            _scan(getattr(stmt, name), interior, ends, tricky, dirty)


def _header_end(stmt, end: tuple[int, int]) -> tuple[int, int]:
    """Where the last expression of a compound statement's header ends (its start when it has none)."""
    kind = type(stmt)
    if kind is ast.If or kind is ast.While:
        last = stmt.test
    elif kind is ast.For or kind is ast.AsyncFor:
        last = stmt.iter
    elif kind is ast.Match:
        last = stmt.subject
    elif kind is ast.ExceptHandler:
        last = stmt.type
    elif kind is ast.Try or kind is getattr(ast, "TryStar", ast.Try):
        last = None
    elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
        if stmt.returns is not None:
            last = stmt.returns
        else:
            a = stmt.args
            for node in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, *a.kw_defaults, a.kwarg, *a.defaults):
                if node is not None and (node.end_lineno, node.end_col_offset) > end:
                    end = (node.end_lineno, node.end_col_offset)
            return end
    else:
        return _latest(stmt, end)
    return (last.end_lineno, last.end_col_offset) if last is not None else end


def _latest(node, end: tuple[int, int]) -> tuple[int, int]:
    for name, value in ast.iter_fields(node):
        if name in ("body", "decorator_list"):
            continue
        for child in value if isinstance(value, list) else (value,):
            if not isinstance(child, ast.AST):
                continue
            last = getattr(child, "end_lineno", None)
            if last is not None:
                if (last, child.end_col_offset) > end:
                    end = (last, child.end_col_offset)
            else:  # arguments, withitem: positions on their parts
                end = _latest(child, end)
    return end


def _start_line(stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return decorators[0].lineno if decorators else stmt.lineno


def _parts(module: ast.Module, lines: list[bytes], worth_parsing) -> dict[str, _Part]:
    out: dict[str, _Part] = {}
    rest = _Part()
    body = module.body
    index = 0
    while index < len(body):
        stmt = body[index]
        if isinstance(stmt, _FUNCTIONS):
            part = out.get(stmt.name) or _Part()  # defined twice: both count, in order
            part.add(lines, _start_line(stmt), stmt.end_lineno, [stmt], worth_parsing)
            out[stmt.name] = part
            rest.texts.append(b"def " + stmt.name.encode())
            for decorator in stmt.decorator_list:  # a registering one fills a dict
                rest.texts.append(b"".join(lines[decorator.lineno - 1:decorator.end_lineno]).strip())
            if b"import" in b"".join(lines[_start_line(stmt) - 1:stmt.end_lineno]):
                rest.texts.append(b"imports " + part.digest().encode())
            index += 1
            continue
        # A run of other statements (several on one line, `a = 1; b = 2`, read as one)
        group = [stmt]
        last = stmt.end_lineno
        while index + len(group) < len(body) and not isinstance(body[index + len(group)], _FUNCTIONS) \
                and _start_line(body[index + len(group)]) <= last:
            group.append(body[index + len(group)])
            last = max(last, group[-1].end_lineno)
        rest.add(lines, _start_line(stmt), last, group)
        for member in group:
            if type(member) is ast.ClassDef:  # its methods' units: only those whose text names a config key
                for method in member.body:
                    if isinstance(method, _FUNCTIONS):  # what its statements name is in the text already
                        comments = [line for line in lines[method.lineno - 1:method.end_lineno] if b"#" in line]
                        rest.texts.append(b"config" if comments and worth_parsing(b"".join(comments)) else b"-")
        index += len(group)
    out[MODULE] = rest
    return out


def line_moves(recorded: dict[str, str], now: dict[str, str]) -> dict[int, int] | None:
    """Old line -> new line of a file by its parts `recorded` (definition_digests when a reading used them) that
    have the same MEANING `now`: the lines those parts keep, in order. None when a layout cannot be read (a
    damaged record). Only those lines are mapped: a location on any other line cannot be moved exactly."""
    moves: dict[int, int] = {}
    for name, old in recorded.items():
        new = now.get(name)
        if new is None or (new != old and meaning(new) != meaning(old)):
            continue  # changed: its lines are not mapped (a reading that used it is not kept)
        if old == new:
            before = after = _lines(layout(old))
        else:
            before, after = _lines(layout(old)), _lines(layout(new))
        if before is None or after is None or len(before) != len(after):
            return None
        for line, moved in zip(before, after):
            if moves.setdefault(line, moved) != moved:
                return None
    return moves


def _lines(encoded: str) -> list[int] | None:
    """The lines a `_Part.layout` string lists."""
    if not encoded:
        return []
    try:
        items = encoded.split(",")
        numbers = [int(items[0])]
        for item in items[1:]:
            gap, _, count = item.partition("*")
            gap, count = int(gap), int(count) if count else 1
            if gap <= 0 or count <= 0 or len(numbers) + count > 10_000_000:
                return None
            last = numbers[-1]
            numbers.extend(range(last + gap, last + gap * count + 1, gap))
    except ValueError:
        return None
    return numbers


def _same_meaning(recorded: dict[str, str], now: dict[str, str]) -> bool:
    """Whether every part of `recorded` means the same `now` (definition_digests' values)."""
    for name, old in recorded.items():
        new = now.get(name)
        if new is None or (new != old and meaning(new) != meaning(old)):
            return False
    return True


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

    def move(self, value):
        kind = type(value)
        if kind is str:
            return self.text(value) if ".py:" in value or "line " in value else value
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


def file_state(digests, path: str) -> str:
    """What a dependency is now: its digest, or ABSENT_FILE when it does not exist or cannot be read (a reading
    that looked for a file and did not find it changes when the file appears)."""
    return digests.get(path) or ABSENT_FILE


def fingerprint(*parts: object) -> str:
    """The cache's key: offlint's code and rules (by name, size and mtime) plus the given option values."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((FORMAT, parts)).encode())
    package = Path(__file__).resolve().parent
    roots = [package]
    rules = package.parent / "rules"
    if rules.is_dir():
        roots.append(rules)
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                info = path.stat()
                h.update(f"{path.relative_to(root)}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return h.hexdigest()


def cache_home() -> Path:
    """Where offlint keeps its caches: OFFLINT_CACHE_DIR, else $XDG_CACHE_HOME/offlint, else ~/.cache/offlint."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "offlint"


def project_cache_dir(root: Path) -> Path | None:
    """The cache folder of the project at `root`, or None when the cache must not be used for it (the cache
    home lies inside the project, so the checked tree could have supplied it)."""
    try:
        home = cache_home().resolve()
        project = root.resolve()
    except (OSError, RuntimeError):
        return None
    if home == project or project in home.parents:
        return None
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in project.name)[:40] or "root"
    return home / f"{name}-{hashlib.blake2b(str(project).encode(), digest_size=8).hexdigest()}"


@dataclass
class _Entry:
    """A stored outcome: its key fields in the clear, the outcome itself encoded until someone needs it. An entry
    loaded from disk has no payload yet, only where it lies in the file (`span`: offset past the index, length):
    a pre-commit run reads the index and the few payloads it uses, not the whole file."""

    digest: str
    deps: dict[str, str]
    parts: dict[str, dict[str, str]]
    payload: str | None
    span: tuple[int, int] = (0, 0)


class Cache:
    def __init__(self, root: Path, key: str, result_classes: tuple[type, ...] = ()):
        """`result_classes`: the classes of a whole run's result beyond the values of a file's outcome."""
        self.directory = project_cache_dir(root)
        self.key = key
        self.codec = Codec(VALUE_CLASSES + (FileOutcome,) + result_classes)
        self._entries: dict[str, _Entry] | None = None  # read on first use: a warm run needs only `last`
        # The whole previous run: its key (every input's digest), the files beyond those it depended on, and its
        # encoded result. An unchanged tree gets the same answer without decoding a single unit.
        self.last: tuple[str, dict[str, str], str] | None = None
        self.changed = False  # the entries need writing
        self._write_last = False  # the whole-run result needs writing
        self.trusted = False
        self._payloads = None  # the open entries file, for payloads read on first use
        self._payload_start = 0

    @property
    def entries_file(self) -> Path | None:
        return self.directory / f"check-{self.key}.jsonl" if self.directory else None

    @property
    def last_file(self) -> Path | None:
        return self.directory / f"last-{self.key}.json" if self.directory else None

    def load(self) -> "Cache":
        self._entries, self.last = None, None
        self.trusted = self.directory is not None and _owned_private_dir(self.directory)
        last = _read_owned(self.last_file) if self.trusted else None
        if last is not None:
            self.last = self._parse_last(last)
        return self

    @property
    def entries(self) -> dict[str, _Entry]:
        if self._entries is None:
            self._entries = {}
            handle = _open_owned(self.entries_file) if self.trusted else None
            if handle is not None:
                self._payloads = handle
                self._entries = self._parse_index(handle.readline(MAX_CACHE_BYTES))
                self._payload_start = handle.tell()
        return self._entries

    def _parse_index(self, line: bytes) -> dict[str, _Entry]:
        """The first line of the entries file: {"format", "key", "entries": {path: [digest, deps, parts, offset,
        length]}}."""
        try:
            header = json.loads(line)
        except ValueError:
            return {}
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != self.key \
                or not isinstance(header.get("entries"), dict):
            return {}
        entries: dict[str, _Entry] = {}
        for path, meta in header["entries"].items():
            if not (isinstance(meta, list) and len(meta) == 5 and isinstance(meta[0], str) and _str_map(meta[1])
                    and isinstance(meta[2], dict) and all(_str_map(v) for v in meta[2].values())
                    and all(type(n) is int and n >= 0 for n in meta[3:])):
                continue  # a damaged entry costs that file a re-read, nothing more
            entries[path] = _Entry(meta[0], meta[1], meta[2], None, (meta[3], meta[4]))
        return entries

    def _payload(self, entry: _Entry) -> str | None:
        """An entry's encoded outcome, read from the file on first use."""
        if entry.payload is None and self._payloads is not None:
            offset, length = entry.span
            try:
                data = os.pread(self._payloads.fileno(), length, self._payload_start + offset)
            except (OSError, ValueError, OverflowError):
                return None
            entry.payload = data.decode("ascii", "replace") if len(data) == length else None
        return entry.payload

    def _parse_last(self, data: bytes) -> tuple[str, dict[str, str], str] | None:
        head, tab, payload = data.decode("ascii", "replace").partition("\t")
        try:
            meta = json.loads(head) if tab else None
        except ValueError:
            return None
        if not (isinstance(meta, dict) and meta.get("format") == FORMAT and meta.get("key") == self.key
                and isinstance(meta.get("run"), str) and _str_map(meta.get("deps"))):
            return None
        return meta["run"], meta["deps"], payload

    def last_result(self, run_key: str, digests) -> object | None:
        """The previous run's result when its inputs (`run_key`) and every other file it read are unchanged."""
        if self.last is None or self.last[0] != run_key:
            return None
        if any(file_state(digests, path) != recorded for path, recorded in self.last[1].items()):
            return None
        try:
            return self.codec.loads(self.last[2])
        except CacheFormatError:
            return None

    def remember_result(self, run_key: str, result: object, covered: set[str]) -> None:
        """Keep `result` for the run keyed by `run_key`; `covered`: the files the key already hashes. Every other
        file an entry depended on is kept with its digest, and checked before the result is reused."""
        deps = {path: recorded for entry in self.entries.values() for path, recorded in entry.deps.items()
                if path not in covered}
        try:
            self.last = (run_key, deps, self.codec.dumps(result))
        except (TypeError, ValueError, RecursionError):
            self.last = None
        self._write_last = True
        self.save(None)

    def dependencies(self) -> dict[str, dict[str, str]]:
        """file -> the files its last reading depended on (with their digests then)."""
        return {path: entry.deps for path, entry in self.entries.items()}

    def lookup(self, path: str, text_digest: str, digests, definitions=None) -> FileOutcome | None:
        """The stored outcome when the file is unchanged and everything it read is, or changed only in parts it
        did not use, or in parts it used only where they mean the same (comments, lines moved): then its locations
        are moved with their lines (`relocate`). `definitions(path)`: that file's definition_digests now (None when
        it does not parse)."""
        entry = self.entries.get(path)
        if entry is None:
            return None
        moving: dict[str, tuple[dict[str, str], dict[str, str]]] = {}  # file -> (parts recorded, parts now)
        if entry.digest != text_digest:
            # Edited, but maybe only where its definitions mean the same: the caller then reads its suppression
            # comments again (the outcome keeps the digest it was stored with).
            own = entry.parts.get(path)
            now = definitions(path) if own and definitions is not None else None
            if now is None or now.keys() != own.keys() or not _same_meaning(own, now):
                return None
            if now != own:
                moving[path] = (own, now)
        moved: dict[str, str] = {}  # files changed only in parts this reading did not use: their digest now
        for dep, dep_digest in entry.deps.items():
            state = file_state(digests, dep)
            if state == dep_digest:
                continue
            used = entry.parts.get(dep)
            now = definitions(dep) if used and definitions is not None else None
            if now is None or not _same_meaning(used, now):
                return None
            if any(now[name] != recorded for name, recorded in used.items()):
                moving[dep] = (used, now)
            else:
                moved[dep] = state
        payload = self._payload(entry)
        if payload is None:
            return None
        try:
            outcome = self.codec.loads(payload)
        except CacheFormatError:
            return None
        if not isinstance(outcome, FileOutcome) or outcome.path != path or outcome.digest != entry.digest:
            return None
        if moving:
            moves = {}
            for file, (recorded, now) in moving.items():
                lines = line_moves(recorded, now)
                if lines is None:
                    return None
                moves[file] = lines
            try:
                outcome.units, outcome.findings = relocate(self.codec, outcome.units, outcome.findings, moves)
            except Unmovable:
                return None
        if moved:  # still valid as stored, kept so if the entries are written anyway (not written for this alone)
            entry.deps = outcome.deps = {**entry.deps, **moved}
        return outcome

    def previous(self, path: str) -> FileOutcome | None:
        """The stored outcome of `path` whatever changed since (for the units still valid in it), or None."""
        entry = self.entries.get(path)
        payload = self._payload(entry) if entry is not None else None
        try:
            outcome = self.codec.loads(payload) if payload is not None else None
        except CacheFormatError:
            return None
        valid = isinstance(outcome, FileOutcome) and outcome.path == path and outcome.digest == entry.digest
        return outcome if valid else None

    def store(self, outcome: FileOutcome, payload: str | None = None) -> None:
        """Keep `outcome` (`payload`: its encoding, when a worker made it)."""
        try:
            payload = payload if payload is not None else self.codec.dumps(outcome)
        except (TypeError, ValueError, RecursionError):
            self.entries.pop(outcome.path, None)  # a value the format cannot hold: that file is read every time
            return
        self.entries[outcome.path] = _Entry(outcome.digest, outcome.deps, outcome.parts, payload)
        self.changed = True

    def save(self, keep: set[str] | None) -> None:
        """Write the entries (of the files in `keep`, when given) atomically; other keys' files are removed."""
        stale = set(self.entries) - keep if keep is not None else set()
        if not self.changed and not stale and not self._write_last:
            return
        for path in stale:
            del self.entries[path]
        self.changed = self.changed or bool(stale)
        if self.directory is None:
            return
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _owned_private_dir(self.directory):
                return
            tag = self.directory.parent / "CACHEDIR.TAG"
            if not tag.exists():
                _write_atomically(tag.parent, tag, _TAG)
            for old in self.directory.iterdir():
                if old.name.startswith(("check-", "last-")) and old not in (self.entries_file, self.last_file):
                    old.unlink(missing_ok=True)
            if self.changed:
                self._save_entries()
            if self.last is not None:
                run_key, deps, payload = self.last
                meta = json.dumps({"format": FORMAT, "key": self.key, "run": run_key, "deps": deps})
                _write_atomically(self.directory, self.last_file, [f"{meta}\t{payload}".encode("ascii")])
            else:
                self.last_file.unlink(missing_ok=True)
            self.changed = self._write_last = False
        except OSError:
            pass  # no writable cache directory: the check runs, only without a cache

    def _save_entries(self) -> None:
        """The entries file: its index, then the payloads. Those read from the previous file are copied as bytes
        from one read of it (a pre-commit run changes a few of thousands)."""
        stored = None
        if self._payloads is not None and any(entry.payload is None for entry in self.entries.values()):
            try:
                self._payloads.seek(self._payload_start)
                stored = memoryview(self._payloads.read(MAX_CACHE_BYTES))
            except (OSError, ValueError):
                stored = None
        index: dict[str, list] = {}
        chunks: list = []
        offset = 0
        for path, entry in self.entries.items():
            if entry.payload is not None:
                chunk = entry.payload.encode("ascii")
            elif stored is not None and entry.span[0] + entry.span[1] <= len(stored):
                chunk = stored[entry.span[0]:entry.span[0] + entry.span[1]]
            else:
                continue  # unreadable now: that file is read again next time
            index[path] = [entry.digest, entry.deps, entry.parts, offset, len(chunk)]
            chunks.append(chunk)
            offset += len(chunk)
        header = json.dumps({"format": FORMAT, "key": self.key, "entries": index}, ensure_ascii=True)
        _write_atomically(self.directory, self.entries_file, [header.encode("ascii"), b"\n", *chunks])


def _str_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _owned_private_dir(path: Path) -> bool:
    """A real directory (not a link) of the current user that nobody else can write to."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _open_owned(path: Path | None):
    """A regular file of the current user that nobody else can write to, opened for reading; None for anything
    else. Opened without following links and without blocking (a FIFO planted here must not hang the check)."""
    if path is None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    handle = os.fdopen(descriptor, "rb")
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022 \
            or info.st_size > MAX_CACHE_BYTES:
        handle.close()
        return None
    return handle


def _read_owned(path: Path | None) -> bytes | None:
    """The bytes of a file `_open_owned` accepts (at most MAX_CACHE_BYTES); None for anything else."""
    handle = _open_owned(path)
    if handle is None:
        return None
    with handle:
        data = handle.read(MAX_CACHE_BYTES + 1)
    return data if len(data) <= MAX_CACHE_BYTES else None


def _write_atomically(directory: Path, target: Path, data: str | list) -> None:
    """`data`: text, or the bytes-like chunks of the file."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            if isinstance(data, str):
                out.write(data.encode("ascii", "backslashreplace"))
            else:
                out.writelines(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
