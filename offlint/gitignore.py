"""A .gitignore file's patterns matched as one regular expression.

pathspec's own matcher tries every pattern of a file in turn; on Megatron Bridge (112 patterns, ~2,900 paths)
that was a third of a warm `offlint check` and of a pre-commit run. pathspec still parses the patterns (git's
wildmatch rules are its job); here they are joined, last pattern first, into one alternation, so the first
alternative that matches is the last pattern that matches, which decides as in git (a `!negation` re-includes).
The joined regex of a .gitignore is kept between runs (warm_start.py, through MEMO), so a run whose .gitignore files
were seen before does not import pathspec at all; one that does imports it without asyncio (_pathspec) and compiles
no regex of its own per line, only the joined one.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import sys
import warnings

_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
_INLINE_FLAGS = re.compile(r"\(\?[aiLmsux-]")  # `(?i)`, `(?i:...)`: a pattern with flags of its own is not joined

# Where joined regexes are kept between runs (a warm_start.WarmStart, set for the duration of a check), or None
MEMO = None


class GitIgnore:
    def __init__(self, lines: list[str]) -> None:
        key = _key(lines) if MEMO is not None else None
        known = MEMO.gitignore(key) if key is not None else None
        self._spec = None  # pathspec's matcher, only where the patterns do not join (match() asks it then)
        self._walked = None  # (its name's regex, the rest's) for match_walked, where the patterns allow it
        self._compiled_joined: re.Pattern | None = None  # the joined regex, compiled when `match` first needs it
        if known is not None and known[0] is not None:
            self._joined, self._include = known[0], known[1]
            self._walked = _compiled(known[2])
            return
        pathspec = _pathspec()
        with warnings.catch_warnings():  # pathspec 1.x renamed the factory ("gitignore"); 0.11/0.12 lack the new name
            warnings.simplefilter("ignore", DeprecationWarning)
            # Each line's regex as text: what PathSpec.from_lines would compile, one regex per line, only to be joined
            translate = getattr(pathspec.util.lookup_pattern("gitwildmatch"), "pattern_to_regex", None)
            lines, translated = _readable(pathspec, translate, lines)
            self._joined, self._include, walked = _joined([(regex, include) for regex, include in translated
                                                           if include is not None]) \
                if translated is not None else (None, [], None)
            if self._joined is None:
                self._spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
        self._walked = _compiled(walked)
        if key is not None:
            MEMO.keep_gitignore(key, [self._joined, self._include, walked])

    @property
    def _regex(self) -> re.Pattern | None:
        """The joined regex (None where the patterns do not join), compiled on first use: a walk asks match_walked,
        which does not use it where there are match_walked's regexes (Megatron Bridge: every .gitignore)."""
        if self._compiled_joined is None and self._joined is not None:
            self._compiled_joined = re.compile(self._joined)
        return self._compiled_joined

    def match(self, relative: str) -> bool:
        """Whether `relative` (a path below the .gitignore's folder, "/" separated, a directory ending in "/") is
        ignored."""
        if self._regex is None:
            return self._spec.match_file(relative)
        found = self._regex.match(relative)
        return found is not None and self._include[found.lastindex - 1]

    def match_walked(self, relative: str) -> bool:
        """`match`, for a path whose every folder below the .gitignore's was matched and not ignored (a walk that
        does not enter an ignored folder, discover._walk_now). Where every pattern ignores (no `!`), a pattern of one
        segment (`*.pyc`, `build/`: most of them) can then match only at the path's last name: were it to match at
        an earlier one, it would have matched, and ignored, the folder that name is. So those are tried there alone,
        the others from the start as `match` tries them (Megatron Bridge's discovery: 309 -> 280 M instructions)."""
        if self._walked is None:
            return self.match(relative)
        name, rest = self._walked
        end = len(relative) - 1 if relative.endswith("/") else len(relative)
        return name.match(relative, relative.rfind("/", 0, end) + 1) is not None or rest.match(relative) is not None


def _compiled(walked: list[str] | None) -> tuple[re.Pattern, re.Pattern] | None:
    """match_walked's two regexes compiled, or None: none made, or kept ones that do not compile or have a group
    (not what _walked makes); then a walk asks `match`. Compiled here, when a walk needs them, not where a kept value
    is loaded (valid_joined): a pre-commit run whose walk is a kept listing never compiles them."""
    if walked is None:
        return None
    try:
        compiled = re.compile(walked[0]), re.compile(walked[1])
    except (re.error, RecursionError, OverflowError):
        return None
    return None if compiled[0].groups or compiled[1].groups else compiled


def _readable(pathspec, translate, lines: list[str]) -> tuple[list[str], list | None]:
    """The non-empty lines of a .gitignore that are patterns pathspec reads, and each one's translation (None where
    pathspec has no `translate`). Git matches nothing with a pattern it cannot read (a trailing `\\`) and goes on; so
    does offlint (one had ended the whole check in "Invalid git pattern", naming no file)."""
    kept, translated = [], []
    for line in lines:
        if not line:
            continue
        try:
            if translate is not None:
                translated.append(translate(line))
            else:
                pathspec.PathSpec.from_lines("gitwildmatch", [line])
        except ValueError:
            continue
        kept.append(line)
    return kept, translated if translate is not None else None


def _pathspec():
    """pathspec, imported. Before Python 3.13 its `deprecated` decorator is typing_extensions', which imports asyncio
    (about 60% of pathspec's import time) to tell coroutine functions; pathspec takes Python 3.13's
    `warnings.deprecated` first, so while it is imported `warnings` lends it `_deprecated`, which does what those do
    for the functions and methods pathspec marks."""
    if "pathspec" in sys.modules or hasattr(warnings, "deprecated"):
        import pathspec

        return pathspec
    warnings.deprecated = _deprecated
    try:
        import pathspec
    finally:
        del warnings.deprecated
    return pathspec


def _deprecated(message: str, /, *, category: type[Warning] | None = DeprecationWarning, stacklevel: int = 1):
    """Python 3.13's `warnings.deprecated`, for what pathspec marks with it: a function or method becomes one that
    warns, then calls it; a class or a coroutine function gets typing_extensions' own (pathspec marks neither)."""
    def decorate(marked):
        if category is None:
            marked.__deprecated__ = message
            return marked
        if isinstance(marked, type) or not callable(marked) or inspect.iscoroutinefunction(marked):
            from typing_extensions import deprecated

            return deprecated(message, category=category, stacklevel=stacklevel)(marked)

        @functools.wraps(marked)
        def warning(*args, **kwargs):
            warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            return marked(*args, **kwargs)

        marked.__deprecated__ = warning.__deprecated__ = message
        return warning

    return decorate


def valid_joined(value: object) -> bool:
    """Whether a kept [joined regex or None, include flags, match_walked's regexes or None] is one `_joined` could
    have made (it is used as is; match_walked's regexes are checked when compiled, by _compiled)."""
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[1], list)
            and all(type(flag) is bool for flag in value[1])):
        return False
    walked = value[2]
    if walked is not None and not (value[1] == [True] and isinstance(walked, list) and len(walked) == 2
                                   and all(isinstance(regex, str) for regex in walked)):
        return False
    if value[0] is None:
        return not value[1] and walked is None
    if value[0] == _NOTHING:
        return value[1] == [False] and walked is None
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


def _joined(patterns: list[tuple[str, bool]]) -> tuple[str | None, list[bool], list[str] | None]:
    """One regex (its text) whose group i matches where one of the i-th run of patterns from the end does (a run:
    patterns next to each other that all ignore, or all re-include), or (None, []) where that would not be exact: a
    pattern not anchored at the start (the alternation is tried at position 0 only), with flags, or with groups
    of its own (they would shift the numbering). `patterns`: each line's regex (pathspec's, as text) and whether it
    ignores. Which pattern of a run matched does not matter, only its kind; so within a run the patterns that match
    at any depth share one `^(?:.+/)?`, tried once for all of them instead of once each (Bridge's 112 patterns: most
    of a listing's time was that prefix, again and again). And, where every pattern ignores, GitIgnore.match_walked's
    two regexes: the patterns of one segment after their `^(?:.+/)?`, and the others as here."""
    runs: list[tuple[bool, list[str]]] = []
    for regex, include in reversed(patterns):
        if not isinstance(regex, str) or not regex.startswith("^") or _INLINE_FLAGS.search(regex):
            return None, [], None
        kind = bool(include)
        if not runs or runs[-1][0] != kind:
            runs.append((kind, []))
        runs[-1][1].append(_without_backtracking(_NAMED_GROUP.sub("(?:", regex)))
    alternatives = ["(" + _run(members) + ")" for _, members in runs]
    include = [kind for kind, _ in runs]
    if not alternatives:
        return _NOTHING, [False], None
    joined = "|".join(alternatives)
    walked = _walked(runs[0][1]) if include == [True] else None
    if walked is not None:
        # match_walked's two regexes compiled, without a group: they hold every pattern, as here, so this one
        # compiles too, with one group, its run's (compiled when `match` needs it)
        return joined, include, walked
    try:
        compiled = re.compile(joined)
    except re.error:
        return None, [], None
    if compiled.groups != len(alternatives) or compiled.flags != re.UNICODE:
        return None, [], None
    return joined, include, None


def _walked(members: list[str]) -> list[str] | None:
    """[the one-segment patterns after their `^(?:.+/)?`, the others] as two regexes without groups (match_walked),
    or None where there are no one-segment patterns."""
    named: list[str] = []
    others: list[str] = []
    for member in members:
        tail = member[len(_ANYWHERE):]
        if member.startswith(_ANYWHERE) and _one_segment(tail):
            named.append(tail)
        else:
            others.append(member)
    if not named:
        return None
    walked = ["(?:" + _shared(named) + ")", "(?:" + _run(others) + ")" if others else _NOTHING]
    try:
        return walked if all(re.compile(regex).groups == 0 for regex in walked) else None
    except re.error:
        return None


_ENDS = ("(?:(?:/)|$)", "(?:/)")  # how pathspec's patterns end (their group named as none): a "/" next, or the end


def _one_segment(tail: str) -> bool:
    """Whether a pattern's regex after its `^(?:.+/)?` matches within one name and then ends: before a "/" it takes,
    or at the end. It ends as pathspec's do (_ENDS), and before that nothing in it matches a "/": no "/", no `.`, no
    class with "/" or negated (but `[^/]`); nor holds only at the start (`^`)."""
    end = next((end for end in _ENDS if tail.endswith(end)), None)
    if end is None or not _closed(tail):
        return False
    body = tail[:-len(end)]
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            if body[index + 1:index + 2] in ("/", ""):
                return False
            index += 2
            continue
        if char == "[":
            if body.startswith("[^/]", index):
                index += 4
                continue
            close = body.find("]", index + 2)
            members = body[index + 1:close]
            if close < 0 or members.startswith("^") or "/" in members or "\\" in members or "[" in members:
                return False
            index = close + 1
            continue
        if char in "./^":
            return False
        index += 1
    return True


def _run(members: list[str]) -> str:
    """One regex matching where any of `members` does: those starting `^(?:.+/)?` under one such start, and among
    what follows it, those starting with a `*` of one segment (`*.pyc`, `*.egg`) under one such `*`: each split of a
    name is tried once for all of them, with the fast check of each one's next character, instead of once each
    (Python's `re` has no such sharing: the same decisions, since none of them has a group of its own)."""
    anywhere = [member[len(_ANYWHERE):] for member in members if member.startswith(_ANYWHERE)]
    others = [member for member in members if not member.startswith(_ANYWHERE)]
    parts = ([_ANYWHERE + "(?:" + _shared(anywhere) + ")"] if anywhere else []) + others
    return "|".join(parts)


def _shared(tails: list[str]) -> str:
    """`tails` as one alternation, those starting with a `*` of one segment under one such `*`."""
    starred = [rest for rest in (tail[len(_STAR):] for tail in tails if tail.startswith(_STAR)) if _closed(rest)]
    if len(starred) > 1:
        tails = [tail for tail in tails if not (tail.startswith(_STAR) and _closed(tail[len(_STAR):]))]
        tails.append(_STAR + "(?:" + "|".join(starred) + ")")
    return "|".join(tails)


def _closed(regex: str) -> bool:
    """Whether `regex`'s parentheses balance and each of its `|` is inside them: then `*` followed by it matches
    where `*(?:it|...)` matches with it, and nothing else does."""
    depth = index = 0
    while index < len(regex):
        char = regex[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":  # a class: `]` right after `[` or `[^` is one of its members
            end = index + 2 if regex.startswith("[^", index) else index + 1
            end += regex.startswith("]", end)
            while end < len(regex) and regex[end] != "]":
                end += 2 if regex[end] == "\\" else 1
            if end >= len(regex):
                return False
            index = end + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
        elif char == "|" and depth == 0:
            return False
        index += 1
    return depth == 0


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
