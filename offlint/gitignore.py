"""A .gitignore file's patterns matched as one regular expression.

pathspec's own matcher tries every pattern of a file in turn; on Megatron Bridge (112 patterns, ~2,900 paths)
that was a third of a warm `offlint check` and of a pre-commit run. pathspec still parses the patterns (git's
wildmatch rules are its job); here they are joined, last pattern first, into one alternation, so the first
alternative that matches is the last pattern that matches, which decides as in git (a `!negation` re-includes).
The joined regex of a .gitignore is kept between runs (warm_start.py, through MEMO), so a run whose .gitignore files
were seen before does not import pathspec at all (35 ms, most of it the asyncio its deprecation decorator imports).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import warnings

_NAMED_GROUP = re.compile(r"\(\?P<\w+>")

# Where joined regexes are kept between runs (a warm_start.WarmStart, set for the duration of a check), or None
MEMO = None


class GitIgnore:
    def __init__(self, lines: list[str]) -> None:
        key = _key(lines) if MEMO is not None else None
        known = MEMO.gitignore(key) if key is not None else None
        if known is not None and known[0] is not None:
            self._spec = None  # pathspec is needed only where the patterns do not join (match() asks it then)
            self._regex, self._include = re.compile(known[0]), known[1]
            return
        import pathspec

        with warnings.catch_warnings():  # pathspec 1.x renamed the factory ("gitignore"); 0.11/0.12 lack the new name
            warnings.simplefilter("ignore", DeprecationWarning)
            self._spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
        self._regex, self._include = _joined([p for p in self._spec.patterns if p.include is not None])
        if key is not None:
            MEMO.keep_gitignore(key, [None if self._regex is None else self._regex.pattern, self._include])

    def match(self, relative: str) -> bool:
        """Whether `relative` (a path below the .gitignore's folder, "/" separated, a directory ending in "/") is
        ignored."""
        if self._regex is None:
            return self._spec.match_file(relative)
        found = self._regex.match(relative)
        return found is not None and self._include[found.lastindex - 1]


def valid_joined(value: object) -> bool:
    """Whether a kept [joined regex or None, include flags] is one `_joined` could have made (it is used as is)."""
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], list)
            and all(type(flag) is bool for flag in value[1])):
        return False
    if value[0] is None:
        return not value[1]
    if value[0] == _NOTHING:
        return value[1] == [False]
    try:
        return isinstance(value[0], str) and re.compile(value[0]).groups == len(value[1]) > 0
    except (re.error, RecursionError, OverflowError):
        return False


_PATHSPEC: list[str] = []


def _key(lines: list[str]) -> str | None:
    """A .gitignore's key among the kept regexes: its lines, and pathspec's installed files (their names, sizes and
    mtimes: another pathspec may parse the patterns differently); None without pathspec."""
    state = parser_state()
    if state is None:
        return None
    return hashlib.blake2b(repr((state, sys.version_info[:2], lines)).encode("utf-8", "surrogatepass"),
                           digest_size=16).hexdigest()


def parser_state() -> str | None:
    """A digest of pathspec's installed files (their names, sizes and mtimes), once per process; None without
    pathspec."""
    if not _PATHSPEC:
        import importlib.util

        spec = importlib.util.find_spec("pathspec")
        if spec is None or not spec.submodule_search_locations:
            return None
        state = []
        try:
            for location in spec.submodule_search_locations:
                for folder, subfolders, names in os.walk(location):
                    subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
                    for name in sorted(names):
                        if name.endswith(".py"):
                            info = os.stat(os.path.join(folder, name))
                            state.append(f"{os.path.join(folder, name)}:{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            return None
        _PATHSPEC.append(hashlib.blake2b("\n".join(state).encode(), digest_size=16).hexdigest())
    return _PATHSPEC[0]


_NOTHING = "(?!)"  # the joined regex of a .gitignore without patterns
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
        return re.compile(_NOTHING), [False]
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
