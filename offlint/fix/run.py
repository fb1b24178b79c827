"""The fix workflow behind `check --fix / --unsafe-fixes / --diff / --show-fixes`, with ruff's semantics.

`--fix`: check, plan the fixes the findings allow, make them, write the files, and check again until nothing
more is fixed (a fix that overlapped another waits for the next pass); what remains is reported as `check`
reports it. `--diff`: the same passes on the texts in memory, nothing written, the changes printed as a unified
diff that `git apply` takes.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field, replace

from offlint.api import CheckOptions, CheckResult, check
from offlint.fix import apply
from offlint.fix.plan import PlannedFix, plan
from offlint.rules import load_rules
from offlint.terminal import plural

MAX_PASSES = 10


@dataclass
class FixOutcome:
    result: CheckResult  # the check after the fixes (for --diff: before them, nothing having changed)
    fixed: list[PlannedFix] = field(default_factory=list)
    hidden: int = 0  # findings whose only fixes are unsafe, not asked for
    problems: dict[str, str] = field(default_factory=dict)  # files left as they were: path -> why
    diff: str = ""
    # findings of a rule in a unit that had none of it before the fixes and that no fix removed: what the
    # fixes broke (a setting removed from a base builder that another recipe relied on), to review
    appeared: list = field(default_factory=list)


def fix(paths: list[str], options: CheckOptions, unsafe: bool, diff: bool) -> FixOutcome:
    """Fix until nothing more is fixable (a fix can make another finding appear or a deferred one possible).
    With `diff`, the passes run on an overlay of the fixed texts (CheckOptions.overlay) and nothing is written."""
    rules = load_rules()
    result = check(paths, options)
    outcome = FixOutcome(result)
    before = _keys(result.findings)
    overlay: dict[str, str] = {}
    originals: dict[str, str] = {}

    def read(path: str) -> str:
        return overlay[path] if path in overlay else apply.read(path)

    for _ in range(MAX_PASSES):
        planned, outcome.hidden = plan(result.findings, rules, unsafe)
        planned = [p for p in planned if not any(path in outcome.problems for path in p.paths)]
        if not planned:
            break
        edited = apply.make(planned, read)
        outcome.problems.update(edited.problems)
        written = set()
        for path in sorted(edited.texts):
            if diff:
                originals.setdefault(path, edited.originals[path])
                overlay[path] = edited.texts[path]
                written.add(path)
                continue
            problem = apply.write(path, edited.originals[path], edited.texts[path])
            if problem is None:
                written.add(path)
            else:
                outcome.problems[path] = problem
        outcome.fixed.extend(p for p in edited.made if all(path in written for path in p.paths))
        if not written:
            break
        result = check(paths, replace(options, overlay=dict(overlay)) if diff else options)
    outcome.appeared = [f for f in result.findings if not _keys([f]) <= before]
    if diff:
        outcome.diff = "".join(unified(path, originals[path], overlay[path]) for path in sorted(overlay)
                               if overlay[path] != originals[path])
    else:
        outcome.result = result
    return outcome


def _keys(findings) -> set[tuple[str, str]]:
    """(rule, unit) for every unit a finding is reported for (shared findings name the others)."""
    return {(f.code, unit) for f in findings for unit in (f.unit, *f.shared_with)}


def unified(path: str, before: str, after: str) -> str:
    """A unified diff with git's a/ b/ prefixes (so `git apply` takes it as it is), marking a last line that
    has no newline as git does."""
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def show_fixes(fixed: list[PlannedFix]) -> str:
    """ruff's `--show-fixes` block: per file, how many findings of each rule were fixed. A fix made in a file
    other than the finding's, or other than the file of the unit it was found for (the value came from a base
    builder there), names both files."""
    if not fixed:
        return ""
    per_path: dict[str, Counter] = {}
    for p in fixed:
        elsewhere = [path for path in p.paths if path != p.finding.location.path]
        label = f"{p.finding.code} ({p.finding.slug})" + (f", edited in {', '.join(elsewhere)}" if elsewhere else "")
        unit_path = p.finding.unit_path
        if unit_path and any(path != unit_path for path in p.paths):
            label += f", for {p.finding.unit} in {unit_path}"
        per_path.setdefault(p.finding.location.path, Counter())[label] += 1
    count = len(fixed)
    out = [f"Fixed {plural(count, 'finding')}:"]
    for path in sorted(per_path):
        out.append(f"- {path}:")
        for label, n in sorted(per_path[path].items()):
            out.append(f"    {n} × {label}")
    return "\n".join(out) + "\n"
