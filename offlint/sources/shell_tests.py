"""What bash's tests and `case` patterns decide, on known strings.

Launch scripts choose their settings by `[[ "${PRESET}" == large ]]`, `[ -z "$PP" ]` or `case "$MODEL" in
llama*) ...`; when the walker knows the tested value it asks this module which way the test goes. Only what is
certain is decided: string and integer comparisons, emptiness, and glob patterns that `fnmatch` reads the way
bash does. File tests, regular expressions, extended globs and character classes stay undecided (None).
"""

from __future__ import annotations

import fnmatch
import re

_INT = re.compile(r"^\s*[-+]?\d+\s*$")
_EXTGLOB = re.compile(r"[@!+*?]\(")


def glob(pieces: list[tuple[str, bool]]) -> str | None:
    """An fnmatch pattern for a bash pattern given as (text, quoted) pieces: quoted text matches itself. None
    when the pattern uses what fnmatch reads differently (extended globs, `[[:class:]]`, `[^...]`)."""
    active = "".join("\0" if quoted else text for text, quoted in pieces)  # what bash reads as pattern syntax
    if _EXTGLOB.search(active) or "[:" in active or "[^" in active or "\\" in active:
        return None
    return "".join("".join(f"[{c}]" if c in "*?[" else c for c in text) if quoted else text
                   for text, quoted in pieces)


def quoted_pieces(raw: str) -> list[tuple[str, bool]] | None:
    """A pattern written as plain text and quotes (tree-sitter-bash gives `*"a b"*` after `=` as one token), as
    (text, quoted) pieces; None when it holds an expansion or an escape, or a quote is not closed."""
    if any(c in raw for c in "$`\\"):
        return None
    out, i = [], 0
    while i < len(raw):
        if raw[i] in "'\"":
            j = raw.find(raw[i], i + 1)
            if j < 0:
                return None
            out.append((raw[i + 1:j], True))
            i = j + 1
        else:
            j = min([k for k in (raw.find("'", i), raw.find('"', i)) if k >= 0], default=len(raw))
            out.append((raw[i:j], False))
            i = j
    return out


def matches(value: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern)


def unary(op: str, operand: str) -> bool | None:
    if op == "-z":
        return operand == ""
    if op == "-n":
        return operand != ""
    return None  # file tests, -v, -o ...: not decided from text


def binary(op: str, left: str, right: str | None, pattern: str | None) -> bool | None:
    """`left OP right`; for `==`/`=`/`!=` inside `[[ ]]` the right side is `pattern` (None: undecidable)."""
    if op in ("==", "=", "!="):
        if pattern is None:
            return None
        return matches(left, pattern) == (op != "!=")
    if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
        if right is None or not _INT.match(left) or not _INT.match(right):
            return None
        a, b = int(left), int(right)
        return {"-eq": a == b, "-ne": a != b, "-lt": a < b, "-le": a <= b, "-gt": a > b, "-ge": a >= b}[op]
    return None  # =~, <, >, -nt, -ef ...
