"""From findings to edits: each finding's fix (its rule's `autofix` data) placed where its provenance points.

A finding carries `written`: the keys it read that its unit writes, each with the place that writes it (in the
finding's file, or another file of the project the value came from). A `set` edits the place that writes the
key; a key the unit leaves at its default is inserted next to the unit's assignment to the same config section
(the one the finding points at when it is one). Nothing here reads or writes files.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from offlint import keys
from offlint.fix.edits import Change, section
from offlint.fix.spec import AutoFix, autofixes
from offlint.types import Finding, Location


@dataclass(frozen=True)
class PlannedFix:
    finding: Finding
    autofix: AutoFix
    changes: tuple[Change, ...]
    # The rule's next fixes for the finding, tried in order when this one cannot be made on the text (OFL202's
    # "turn the switch on" where the inert setting cannot be removed cleanly)
    fallbacks: tuple["PlannedFix", ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.path for c in self.changes))


def plan(findings: list[Finding], rules: dict, unsafe: bool) -> tuple[list[PlannedFix], int]:
    """The fixes to make, and how many findings have only unsafe fixes that were not asked for."""
    out: list[PlannedFix] = []
    hidden = 0
    for finding in findings:
        options = _makeable(finding, rules)
        allowed = [(f, changes) for f, changes in options if unsafe or is_safe(f, finding)]
        if options and not allowed:
            hidden += 1
        if allowed:
            candidates = [PlannedFix(finding, autofix, changes) for autofix, changes in allowed]
            out.append(replace(candidates[0], fallbacks=tuple(candidates[1:])))
    return out, hidden


def fixability(findings: list[Finding], rules: dict, placeable=None) -> tuple[int, int]:
    """(findings with a safe fix, findings whose only fixes are unsafe): ruff's `[*] N fixable` counts. A fix counts
    where it can be placed: OFL003's rename of a key no one known field is close to (a key set in the wrong section,
    `dist.tensor_model_parallel_size`) is no hidden fix, nor one whose edits `placeable(changes)` (where given)
    says cannot be made on the files."""
    safe = unsafe = 0
    for finding in findings:
        options = _makeable(finding, rules)
        if placeable is not None:
            options = [(autofix, changes) for autofix, changes in options if placeable(changes)]
        if any(is_safe(f, finding) for f, _ in options):
            safe += 1
        elif options:
            unsafe += 1
    return safe, unsafe


def is_safe(autofix: AutoFix, finding: Finding) -> bool:
    """Whether `--fix` makes this fix without `--unsafe-fixes`: a rule's safe fix, except the removal of a setting
    written anywhere but on a command line. OFL202 removes a sub-setting its switch makes inert; in a recipe or a YAML
    file a launch may turn the switch on (Megatron Bridge's DeepSeek-V4 performance recipe sets
    `optimizer_offload_fraction = 1.0` for such runs, and its test asserts it), so there it is unsafe. The command
    line is the last layer: a setting inert there stays inert. Nor is an edit of the command a called script
    writes, for a finding at a call (Finding.command_at): the script's other callers run that command too, some
    perhaps where the fix is wrong (OpenGPTX's tests run theirs in a PyTorch 1.11 container, which stops at the
    first allocation on expandable_segments)."""
    if not autofix.safe:
        return False
    if finding.command_at is not None and finding.command_at != finding.location and any(
            change.path == finding.command_at.path and change.line == finding.command_at.line
            for change in changes_for(finding, autofix)):
        return False  # the called script's command: its other callers (another container, say) run it too
    if autofix.action == "remove":
        return all(key in finding.on_command_line for key, _ in finding.written if key in autofix.keys)
    return True


def _makeable(finding: Finding, rules: dict) -> list[tuple[AutoFix, tuple[Change, ...]]]:
    """The finding's fixes that its provenance gives a place to make, each with its edits."""
    return [(autofix, changes) for autofix in autofixes(finding, rules)
            for changes in [changes_for(finding, autofix)] if changes]


def changes_for(finding: Finding, autofix: AutoFix) -> tuple[Change, ...]:
    """The edits of one fix for one finding; () when its provenance gives no place to make them."""
    written = list(finding.written)
    where = dict(written)
    if autofix.action == "set":
        key = autofix.key or (written[0][0] if written else "")
        if not key:
            return ()
        if key in where:
            return (_at(where[key], "set", key, value=autofix.value, transform=autofix.transform),)
        if autofix.transform:
            return ()
        sibling = _sibling(finding, key)
        return (_at(sibling, "insert", key, value=autofix.value),) if sibling is not None else ()
    if autofix.action == "remove":
        return tuple(_at(location, "remove", key) for key, location in written if key in autofix.keys)
    if autofix.action == "rename":
        if not written:
            return ()
        key, location = written[0]
        new_key = unambiguous_suggestion(key)
        return (_at(location, "rename", key, new_key=new_key),) if new_key else ()
    if autofix.action == "add-env":
        out = [_env(finding, autofix.name, autofix.option, append=True)]
        out += [_env(finding, name, value, append=False) for name, value in autofix.also]
        return tuple(out)
    if autofix.action == "drop-suppression":
        return (_at(finding.location, "drop-suppression"),)
    return ()


def _at(location: Location, op: str, key: str = "", **fields) -> Change:
    return Change(location.path, location.line, location.col, op, key, **fields)


def _sibling(finding: Finding, key: str) -> Location | None:
    """Where a key the unit leaves at its default goes: next to the unit's assignment to the same section, in the
    unit's own file when it has one there (a base builder in another file is shared by other units, which the
    new setting would change too), preferring the one the finding points at."""
    same = [loc for k, loc in finding.written if section(k) == section(key) and not k.startswith("env.")]
    own = [loc for loc in same if loc.path == finding.unit_path] or same
    for location in own:
        if location == finding.location:
            return location
    return own[-1] if own else None


def _env(finding: Finding, name: str, option: str, append: bool) -> Change:
    """Where the variable is written, else at the launch: where the command is written, for a launch in a script
    another one runs (Finding.command_at; the finding is reported at the call, whose words are the caller's)."""
    key = f"env.{name}"
    location = dict(finding.written).get(key, finding.command_at or finding.location)
    return _at(location, "env", key, name=name, option=option, append=append)


def unambiguous_suggestion(key: str) -> str:
    """The one known field a misspelt key is close to; '' when none is, or two are about as close."""
    sec, _, field = key.lstrip("+~").partition(".")
    if sec not in keys.FIELD_SECTIONS or not field:
        return ""
    known = sorted(keys.release_fields(sec))  # (the fields closest_field suggests)
    close = difflib.get_close_matches(field, known, n=2, cutoff=0.8)
    if not close:
        return ""
    if len(close) == 2:
        first, second = (difflib.SequenceMatcher(None, field, c).ratio() for c in close)
        if first - second < 0.05:
            return ""
    return f"{sec}.{close[0]}"
