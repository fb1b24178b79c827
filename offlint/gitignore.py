"""A .gitignore file's patterns matched as one regular expression.

pathspec's own matcher tries every pattern of a file in turn; on Megatron Bridge (112 patterns, ~2,900 paths)
that was a third of a warm `offlint check` and of a pre-commit run. pathspec still parses the patterns (git's
wildmatch rules are its job); here they are joined, last pattern first, into one alternation, so the first
alternative that matches is the last pattern that matches, which decides as in git (a `!negation` re-includes).
"""

from __future__ import annotations

import re
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


def _joined(patterns) -> tuple[re.Pattern | None, list[bool]]:
    """One regex whose group i matches the i-th pattern from the end, or (None, []) where that would not be
    exact: a pattern not anchored at the start (the alternation is tried at position 0 only), with flags, or
    with groups of its own (they would shift the numbering)."""
    alternatives, include = [], []
    for pattern in reversed(patterns):
        regex = getattr(pattern, "regex", None)
        if regex is None or not isinstance(regex.pattern, str) or not regex.pattern.startswith("^") \
                or regex.flags != re.UNICODE:
            return None, []
        alternatives.append("(" + _NAMED_GROUP.sub("(?:", regex.pattern) + ")")
        include.append(bool(pattern.include))
    if not alternatives:
        return re.compile(r"(?!)"), [False]
    try:
        joined = re.compile("|".join(alternatives))
    except re.error:
        return None, []
    return (joined, include) if joined.groups == len(alternatives) else (None, [])
