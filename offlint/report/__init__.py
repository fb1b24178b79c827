"""Reporters: turn sorted findings into text, one module per output format (modelled on ruff's)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Callable, Mapping

from offlint.report import concise, full, github, json_format, sarif, statistics
from offlint.report.rule_info import RuleInfo

if TYPE_CHECKING:
    from offlint.types import Finding

FORMATS = ("concise", "full", "json", "sarif", "github", "junit")


_RENDERERS: dict[str, Callable[[list[Finding], Mapping[str, RuleInfo], Mapping[str, str], bool], str]] = {
    "concise": lambda f, r, s, c: concise.render(f, c),
    "full": lambda f, r, s, c: full.render(f, s, c),
    "json": lambda f, r, s, c: json_format.render(f, r),
    "sarif": lambda f, r, s, c: sarif.render(f, r),
    "github": lambda f, r, s, c: github.render(f),
    # imported when asked for: its xml.etree (about 5 ms) would be imported by every check, pre-commit runs too
    "junit": lambda f, r, s, c: import_module("offlint.report.junit").render(f),
}


def render(fmt: str, findings: list[Finding], rules: Mapping[str, RuleInfo], sources: Mapping[str, str],
           color: bool = False) -> str:
    """Render `findings` (already sorted) in format `fmt`; the text ends with a newline unless it is empty.
    `color`: ANSI colour for a terminal (the human formats only; machine formats never get it)."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}") from None
    return renderer(findings, rules, sources, color)


def render_statistics(findings: list[Finding], rules: Mapping[str, RuleInfo]) -> str:
    """ruff's --statistics: one `count<TAB>CODE<TAB>slug` line per code."""
    return statistics.render(findings, rules)


__all__ = ["FORMATS", "RuleInfo", "render", "render_statistics"]
