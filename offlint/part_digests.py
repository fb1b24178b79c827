"""What each part of a Python module means, and on which lines it lies: the cache's digests of the parts a reading
used (`definition_digests`), and how a file's lines moved between two of them (`line_moves`).

A part is a module-level function (from its first decorator) or MODULE, every other module-level statement. Its
digest has two halves: its MEANING (the statements as written, less comments and the blank lines between them: a
comment or a moved line changes nothing a reading can give) and its LAYOUT (the lines it keeps), so that a kept
reading's locations can be moved with their lines (offlint.relocation) instead of the reading being done again.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import itertools

MODULE = "<module>"  # the module-level statements of a file (python_project.MODULE)


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
_DECORATED = frozenset((ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))  # the statements with decorators
_AS_SPACE = bytes.maketrans(b"\t\r\f", b"   ")  # the other blanks a line can end in (before its line end)
_BLANKS = (b" ", b"\t", b"\f", b"\r")


def _dirty(lines: list[bytes]) -> tuple[list[int], set[int]]:
    """The (1-based, sorted) numbers of a module's lines to look at (a `#` in them, a blank at their end, or nothing),
    and the set of those with a `#`. Found once in the module's text with bytes.find (a regular expression tried at
    every byte costs more); each part takes its own lines' (`_Part.add`). Bytes are searched with `find` here, not
    `in`: CPython's `bytes in bytes` first tries the needle as an int, raising and clearing a TypeError each time."""
    text = b"".join(lines)
    starts = [0, *itertools.accumulate(map(len, lines))]  # where each line starts in `text` (and the last ends)
    hashed: set[int] = set()
    at = text.find(b"#")
    while at >= 0:
        number = bisect.bisect_right(starts, at)
        hashed.add(number)
        at = text.find(b"#", starts[number])
    found = set(hashed)
    spaced = text.translate(_AS_SPACE)  # a blank before a line end as " \n": one search for the four
    at = spaced.find(b" \n")
    while at >= 0:
        found.add(bisect.bisect_right(starts, at))
        at = spaced.find(b" \n", at + 2)
    at = text.find(b"\n\n")
    while at >= 0:
        found.add(bisect.bisect_right(starts, at) + 1)
        at = text.find(b"\n\n", at + 1)
    if text[:1] == b"\n":
        found.add(1)
    if text[-1:] in _BLANKS:
        found.add(len(lines))
    return sorted(found), hashed


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

    def add(self, lines: list[bytes], first: int, last: int, statements: list, marks: tuple[list[int], set[int]],
            worth_parsing=None) -> bytes:
        """Lines first..last, which hold `statements` (and comments, blank lines around them), `marks` the module's
        lines to look at and those with a `#` (`_dirty`); gives back those lines' text as written."""
        text = b"".join(lines[first - 1:last])
        marked, hashed = marks
        low = bisect.bisect_left(marked, first)
        high = bisect.bisect_right(marked, last, low)
        if low == high:
            self.texts.append(text if text.endswith(b"\n") else text + b"\n")
            self.keep(first, last)
            if worth_parsing is not None:
                self.texts.append(b"-")
            return text
        dirty = marked[low:high]
        tricky = {number for number in dirty if number in hashed
                  and (lines[number - 1].find(b"'") >= 0 or lines[number - 1].find(b'"') >= 0)}
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
            if number in hashed:
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
        return text

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
        if blocks is None:
            first, last = stmt.lineno, stmt.end_lineno
            if last != first:
                interior.update(range(first, last))
            if last in tricky:
                ends[last] = max(ends.get(last, 0), stmt.end_col_offset)
            continue
        if kind is not ast.match_case:
            at = bisect.bisect_left(dirty, _start_line(stmt))
            if at == len(dirty) or dirty[at] > stmt.end_lineno:
                continue
        if kind is ast.match_case:
            heads = [stmt.pattern] + ([stmt.guard] if stmt.guard is not None else [])
        else:
            heads = list(stmt.decorator_list) if kind in _DECORATED else []
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
    if type(stmt) in _DECORATED:  # (getattr with a default on any other node raises and catches an AttributeError)
        decorators = stmt.decorator_list
        if decorators:
            return decorators[0].lineno
    return stmt.lineno


def _parts(module: ast.Module, lines: list[bytes], worth_parsing) -> dict[str, _Part]:
    out: dict[str, _Part] = {}
    rest = _Part()
    marks = marked, hashed = _dirty(lines)
    body = module.body
    index = 0
    while index < len(body):
        stmt = body[index]
        if isinstance(stmt, _FUNCTIONS):
            part = out.get(stmt.name) or _Part()  # defined twice: both count, in order
            text = part.add(lines, _start_line(stmt), stmt.end_lineno, [stmt], marks, worth_parsing)
            out[stmt.name] = part
            rest.texts.append(b"def " + stmt.name.encode())
            for decorator in stmt.decorator_list:  # a registering one fills a dict
                rest.texts.append(b"".join(lines[decorator.lineno - 1:decorator.end_lineno]).strip())
            if text.find(b"import") >= 0:
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
        rest.add(lines, _start_line(stmt), last, group, marks)
        for member in group:
            if type(member) is ast.ClassDef:  # its methods' units: only those whose text names a config key
                for method in member.body:
                    if isinstance(method, _FUNCTIONS):  # what its statements name is in the text already
                        comments = [lines[number - 1] for number in marked[
                            bisect.bisect_left(marked, method.lineno):bisect.bisect_right(marked, method.end_lineno)]
                            if number in hashed]
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
        if not means_the_same(old, new):
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


def means_the_same(old: str, new: str | None) -> bool:
    """Whether a part recorded as `old` (a definition_digests value) is there `new` with the same MEANING."""
    return new is not None and (new == old or meaning(new) == meaning(old))


def same_meaning(recorded: dict[str, str], now: dict[str, str]) -> bool:
    """Whether every part of `recorded` means the same `now` (definition_digests' values)."""
    return all(means_the_same(old, now.get(name)) for name, old in recorded.items())
