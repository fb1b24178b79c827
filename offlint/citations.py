"""The megatron-core checks and footguns a rule cites (AO-2, F-9, TC-CG-full, ...), as links into
docs/megatron-core-checks.md, where each id is a heading (GitHub's anchor: the id in lower case)."""

from __future__ import annotations

import re

CHECKS_DOC = "docs/megatron-core-checks.md"
CHECKS_URL = f"https://github.com/offlint/offlint/blob/main/{CHECKS_DOC}"
CITED_ID = re.compile(r"\b(?:TC-CG-[a-z]+|(?:AO|FG|CG|RC|OC|OB|TE|CLI|BR|EP|F)-\d+)\b")


def anchor(cited: str) -> str:
    return cited.lower()


def url(cited: str) -> str:
    return f"{CHECKS_URL}#{anchor(cited)}"


def cited_ids(rule) -> list[str]:
    """Every id the rule's text names, in order of first mention (mirrors first: they are what it mirrors)."""
    texts = [str(m.get("id", "")) for m in rule.mirrors]
    texts += [rule.summary, rule.explanation, rule.fix, *(c.message for c in rule.checks), *(c.fix for c in rule.checks)]
    seen: dict[str, None] = {}
    for text in texts:
        for found in CITED_ID.findall(text or ""):
            seen.setdefault(found)
    return list(seen)
