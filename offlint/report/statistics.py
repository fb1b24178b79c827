"""ruff's --statistics: how often each code fired, most frequent first, to see where a codebase stands."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Mapping

from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.report.rule_info import RuleInfo
    from offlint.types import Finding


def render(findings: list[Finding], rules: Mapping[str, RuleInfo]) -> str:
    counts = Counter(f.code for f in findings)
    slugs = {f.code: f.slug for f in findings}
    for code, rule in rules.items():
        if code in slugs and not slugs[code]:
            slugs[code] = rule.slug
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "".join(printable(f"{count}\t{code}\t{slugs[code]}") + "\n" for code, count in rows)
