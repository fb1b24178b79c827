"""One line per finding, `path:line:col: CODE message`, the default format: greppable and editor-clickable.

Only the message's first line is shown: the detail after it (the path a finding holds on, the unknown values it
depends on, where its values came from) is for `--output-format full` and json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.types import Finding

SEVERITY_COLORS = {"error": "red", "warning": "yellow", "info": "cyan"}


def label(finding: Finding, short: bool = False) -> str:
    """The message as users read it: `possible: ` marks verdicts that hang on unknown values (--strict); a finding
    at a line that is not its unit's own (a shared helper) says which unit (and its file), or how many, it comes
    from. `short`: the first line of the message only (the concise format)."""
    text = finding.message.split("\n", 1)[0] if short else finding.message
    message = f"possible: {text}" if finding.possible else text
    if finding.units > 1:
        return f"{message} [in {finding.units} units]"
    if finding.unit_path and finding.unit_path != finding.location.path:
        # and where the unit is defined: two entry scripts' `main` units reach one helper line (NVIDIA-NeMo/DFM's
        # pretrain_flux.py and finetune_flux.py), and `[in main]` twice had told them apart by nothing
        return f"{message} [in {finding.unit} ({finding.unit_path})]"
    return message


def one_line(text: str) -> str:
    """Fold a multi-line message onto one line so line-based tools see one finding per line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def styled_code(finding: Finding, color: bool) -> str:
    """The rule code, bold in its severity's colour on a terminal."""
    if not color:
        return finding.code
    import click

    return click.style(finding.code, fg=SEVERITY_COLORS.get(finding.severity.value), bold=True)


def styled_location(finding: Finding, color: bool) -> str:
    text = printable(str(finding.location))
    if not color:
        return text
    import click

    path, _, rest = text.rpartition(":")
    path, _, line = path.rpartition(":")
    return f"{click.style(path, bold=True)}:{line}:{rest}"


def render(findings: list[Finding], color: bool = False) -> str:
    return "".join(f"{styled_location(f, color)}: {styled_code(f, color)} {printable(one_line(label(f, True)))}\n"
                   for f in findings)
