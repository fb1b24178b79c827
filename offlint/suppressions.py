"""Suppression comments: `# offlint: ignore[OFL102, OFL201]` or bare `# offlint: ignore`, in .py, .yaml, .sh.

A trailing comment covers findings on its own line; a comment alone on a line covers the next line that is
not a comment. A suppression that covers nothing is itself a finding (OFL006, like ruff's RUF100).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DIRECTIVE = re.compile(r"#\s*offlint:\s*ignore(?:\[([^\]]*)\])?", re.IGNORECASE)


@dataclass
class Suppression:
    line: int  # the line the comment is on
    col: int
    target_line: int  # the line whose findings it covers
    codes: tuple[str, ...]  # empty = every code
    used: set[str] = field(default_factory=set)

    def covers(self, code: str, line: int) -> bool:
        return line == self.target_line and (not self.codes or code in self.codes)


def find_suppressions(text: str) -> list[Suppression]:
    if not _DIRECTIVE.search(text):  # one search of the text (a line's match is one of the text's) before each line's
        return []
    lines = text.splitlines()
    out: list[Suppression] = []
    for index, line in enumerate(lines):
        match = _DIRECTIVE.search(line)
        if not match:
            continue
        codes = tuple(c.strip().upper() for c in (match.group(1) or "").split(",") if c.strip())
        own_line = line[:match.start()].strip() == ""
        target = index + 1
        if own_line:
            target = next((j + 1 for j in range(index + 1, len(lines))
                           if lines[j].strip() and not lines[j].lstrip().startswith("#")), index + 1)
        out.append(Suppression(index + 1, match.start() + 1, target, codes))
    return out
