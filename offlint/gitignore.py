"""A .gitignore file's patterns matched as one regular expression.

pathspec's own matcher tries every pattern of a file in turn; on Megatron Bridge (112 patterns, ~2,900 paths)
that was a third of a warm `offlint check` and of a pre-commit run. pathspec still parses the patterns (git's
wildmatch rules are its job); here they are joined, last pattern first, into one alternation, so the first
alternative that matches is the last pattern that matches, which decides as in git (a `!negation` re-includes).
"""

from __future__ import annotations

import re
import sys
import warnings

import pathspec

_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


class GitIgnore:
    def __init__(self, lines: list[str]) -> None:
        with warnings.catch_warnings():  # pathspec 1.x renamed the factory ("gitignore"); 0.11/0.12 lack the new name
            warnings.simplefilter("ignore", DeprecationWarning)
            self._spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
        self._regex, self._include = _joined([p for p in self._spec.patterns if p.include is not None])

    def match(self, relative: str) -> bool:
        """Whether `relative` (a path below the .gitignore's folder, "/" separated, a directory ending in "/") is
        ignored."""
        if self._regex is None:
            return self._spec.match_file(relative)
        found = self._regex.match(relative)
        return found is not None and self._include[found.lastindex - 1]


_ANYWHERE = "^(?:.+/)?"  # pathspec's start of a pattern without a "/" inside: at any depth


def _joined(patterns) -> tuple[re.Pattern | None, list[bool]]:
    """One regex whose group i matches where one of the i-th run of patterns from the end does (a run: patterns
    next to each other that all ignore, or all re-include), or (None, []) where that would not be exact: a
    pattern not anchored at the start (the alternation is tried at position 0 only), with flags, or with groups
    of its own (they would shift the numbering). Which pattern of a run matched does not matter, only its kind;
    so within a run the patterns that match at any depth share one `^(?:.+/)?`, tried once for all of them
    instead of once each (Bridge's 112 patterns: most of a listing's time was that prefix, again and again)."""
    runs: list[tuple[bool, list[str]]] = []
    for pattern in reversed(patterns):
        regex = getattr(pattern, "regex", None)
        if regex is None or not isinstance(regex.pattern, str) or not regex.pattern.startswith("^") \
                or regex.flags != re.UNICODE:
            return None, []
        kind = bool(pattern.include)
        if not runs or runs[-1][0] != kind:
            runs.append((kind, []))
        runs[-1][1].append(_without_backtracking(_NAMED_GROUP.sub("(?:", regex.pattern)))
    alternatives = ["(" + _run(members) + ")" for _, members in runs]
    include = [kind for kind, _ in runs]
    if not alternatives:
        return re.compile(r"(?!)"), [False]
    try:
        joined = re.compile("|".join(alternatives))
    except re.error:
        return None, []
    return (joined, include) if joined.groups == len(alternatives) else (None, [])


def _run(members: list[str]) -> str:
    """One regex matching where any of `members` does: those starting `^(?:.+/)?` under one such start."""
    anywhere = [member[len(_ANYWHERE):] for member in members if member.startswith(_ANYWHERE)]
    others = [member for member in members if not member.startswith(_ANYWHERE)]
    parts = ([_ANYWHERE + "(?:" + "|".join(anywhere) + ")"] if anywhere else []) + others
    return "|".join(parts)


_STAR = r"[^/]*"  # pathspec's `*`: any run within one path segment
_FIXED_RUN = re.compile(r"(?:\\.|\[\^/\]|\[[^\]/\\]*\]|[^\\\[\]()|*+?{}.$^/])+")  # fixed length, never "/"


def _without_backtracking(pattern: str) -> str:
    """pathspec's regex, with each `*` that is followed by a fixed run and then another `*` of the same segment
    made to take that run's first occurrence, atomically. Python's `re` otherwise tries every way to split a name
    among the stars: a .gitignore line `*a*a*a...*b` (25 stars) against a file named `aaa...a.py` never finished.
    The first occurrence is always a right choice: the next `*` takes up whatever lies between it and a later
    one, since none of it is a "/". Python 3.10 has no atomic groups: the pattern is left as it is there."""
    if sys.version_info < (3, 11):
        return pattern
    parts = pattern.split(_STAR)
    out = [parts[0]]
    for position, run in enumerate(parts[1:], start=1):
        if position < len(parts) - 1 and _FIXED_RUN.fullmatch(run):
            out.append(f"(?>{_STAR}?{run})")
        else:
            out.append(_STAR + run)
    return "".join(out)
