"""ruff's full format: a header, the location, a code frame with a caret, notes and help; for humans."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from offlint.report.concise import label, styled_code, styled_location
from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.types import Finding


def _frame(finding: Finding, sources: Mapping[str, str]) -> list[str]:
    """The finding's line with a caret under its column, or nothing when the source is not at hand."""
    loc = finding.location
    text = sources.get(loc.path)
    if text is None:
        return []
    lines = text.splitlines()
    if not 1 <= loc.line <= len(lines):
        return []
    line = lines[loc.line - 1]
    width = len(str(loc.line))
    gutter = " " * (width + 1) + "|"
    # Keep tabs in the caret's indent so it lines up however the terminal expands them; an escaped character
    # before the caret takes the width of its escape.
    pad = "".join(c if c == "\t" else " " for c in printable(line[: max(loc.col - 1, 0)]))
    line = printable(line)
    return [gutter, f"{loc.line} | {line}".rstrip(), f"{gutter} {pad}^", gutter]


def _one(finding: Finding, sources: Mapping[str, str], color: bool = False) -> str:
    head, *rest = _lines([label(finding)]) or [""]
    out = [f"{styled_code(finding, color)} {head}"]
    out += [" " * (len(finding.code) + 1) + more for more in rest]
    frame = _frame(finding, sources)
    indent = " " * len(str(finding.location.line)) if frame else " "
    out.append(f"{indent}--> {styled_location(finding, color)}")
    out += frame
    out += _lines(f"  = note: {r.note} ({printable(str(r.location))})" for r in finding.related)
    out += _lines([_units_note(finding)] if finding.shared_with else [])
    if finding.fix:
        out += _lines([f"help: {finding.fix}"])
    return "\n".join(out) + "\n"


def _units_note(finding: Finding, most: int = 5) -> str:
    """Which units share a finding at a shared line, so a reader knows the recipes it concerns."""
    names = (finding.unit, *finding.shared_with)
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"  = note: in units {', '.join(names[:most])}{more}"


def _lines(texts) -> list[str]:
    """Each line of each text, escaped on its own: the line breaks a message means are kept."""
    return [printable(line) for text in texts for line in text.splitlines()]


def render(findings: list[Finding], sources: Mapping[str, str], color: bool = False) -> str:
    return "\n".join(_one(f, sources, color) for f in findings)
