"""One line per finding, `path:line:col: CODE message`, the default format: greppable and editor-clickable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.types import Finding


def label(finding: Finding) -> str:
    """The message as users read it: `possible: ` marks verdicts that hang on unknown values (--strict); a finding
    at a line that is not its unit's own (a shared helper) says which unit, or how many, it comes from."""
    message = f"possible: {finding.message}" if finding.possible else finding.message
    if finding.units > 1:
        return f"{message} [in {finding.units} units]"
    if finding.unit_path and finding.unit_path != finding.location.path:
        return f"{message} [in {finding.unit}]"
    return message


def one_line(text: str) -> str:
    """Fold a multi-line message onto one line so line-based tools see one finding per line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def render(findings: list[Finding]) -> str:
    return "".join(printable(f"{f.location}: {f.code} {one_line(label(f))}") + "\n" for f in findings)
