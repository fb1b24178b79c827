"""GitHub Actions workflow commands, so findings show up as annotations on the pull request diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from offlint.report.concise import label
from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.types import Finding

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """The message part: GitHub decodes %25, %0D, %0A (toolkit's escapeData); any other control character
    would reach the log raw, so it is escaped (offlint.report.escape)."""
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """Property values additionally may not contain the `:` and `,` separators (toolkit's escapeProperty)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _one(f: Finding) -> str:
    loc = f.location
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in (("file", loc.path), ("line", loc.line), ("col", loc.col), ("title", f"offlint ({f.code})"))
    )
    return f"::{_LEVELS[f.severity.value]} {props}::{escape_data(f'{loc}: {f.code} {label(f)}')}\n"


def render(findings: list[Finding]) -> str:
    return "".join(_one(f) for f in findings)
