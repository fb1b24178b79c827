"""A JSON array of findings, shaped like ruff's --output-format json so existing tooling can read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from offlint.report.escape import json_dumps

if TYPE_CHECKING:
    from offlint.report.rule_info import RuleInfo
    from offlint.types import Finding


def rule_url(finding: Finding, rules: Mapping[str, RuleInfo]) -> str:
    """The finding's own URL, else its rule's documentation URL, else empty."""
    rule = rules.get(finding.code)
    return finding.url or (rule.url if rule is not None else "")


def _one(f: Finding, rules: Mapping[str, RuleInfo]) -> dict:
    loc = {"row": f.location.line, "column": f.location.col}
    return {
        "code": f.code,
        "slug": f.slug,
        "severity": f.severity.value,
        "message": f.message,
        "filename": f.location.path,
        "location": loc,
        "end_location": dict(loc),
        "unit": f.unit,
        "unit_path": f.unit_path,  # the file that defines it (two entry scripts may each define a `main`)
        "units": f.units,
        "shared_with": list(f.shared_with),
        "related": [
            {"filename": r.location.path, "row": r.location.line, "column": r.location.col, "note": r.note}
            for r in f.related
        ],
        "fix": f.fix or None,
        "possible": f.possible,
        "url": rule_url(f, rules) or None,
    }


def render(findings: list[Finding], rules: Mapping[str, RuleInfo]) -> str:
    return json_dumps([_one(f, rules) for f in findings]) + "\n"
