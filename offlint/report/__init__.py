"""Reporters: turn sorted findings into text, one module per output format (modelled on ruff's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from offlint.report import concise, full, github, json_format, junit, sarif, statistics
from offlint.report.rule_info import RuleInfo

if TYPE_CHECKING:
    from offlint.types import Finding

FORMATS = ("concise", "full", "json", "sarif", "github", "junit")


_RENDERERS: dict[str, Callable[[list[Finding], Mapping[str, RuleInfo], Mapping[str, str]], str]] = {
    "concise": lambda f, r, s: concise.render(f),
    "full": lambda f, r, s: full.render(f, s),
    "json": lambda f, r, s: json_format.render(f, r),
    "sarif": lambda f, r, s: sarif.render(f, r),
    "github": lambda f, r, s: github.render(f),
    "junit": lambda f, r, s: junit.render(f),
}


def render(fmt: str, findings: list[Finding], rules: Mapping[str, RuleInfo], sources: Mapping[str, str]) -> str:
    """Render `findings` (already sorted) in format `fmt`; the text ends with a newline unless it is empty."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}") from None
    return renderer(findings, rules, sources)


def render_statistics(findings: list[Finding], rules: Mapping[str, RuleInfo]) -> str:
    """ruff's --statistics: one `count<TAB>CODE<TAB>slug` line per code."""
    return statistics.render(findings, rules)


__all__ = ["FORMATS", "RuleInfo", "render", "render_statistics"]
