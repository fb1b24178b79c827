"""The offload-configuration diff between the first bad commit and its parent.

Both commits' configurations are read the way the probes read them (`load_unit` in a worktree), and every
key of offlint's key registry (the keys rules.md's rules read) whose effective value differs is listed with
where it was set, so "what changed" is visible even when the change is in an inherited base builder.
"""

from __future__ import annotations

from pathlib import Path

from offlint import keys
from offlint.bisect.probes import Probe
from offlint.units import UnitSelectionError, load_unit


def effective_values(probe: Probe, worktree: Path) -> dict[str, tuple[str, str]] | None:
    """key -> (value as text, where it was set) for every registry key, or None when it cannot be read."""
    if not probe.config:
        return None
    try:
        loaded = load_unit(probe.config_path(worktree), probe.recipe, probe.overrides, root=worktree)
    except (UnitSelectionError, OSError, ValueError):
        return None
    out = {}
    for name in sorted(keys.KEYS):
        value = loaded.resolved.get(name)
        where = ""
        if value.assignment is not None:
            where = str(value.assignment.location)
            if where.startswith(str(worktree)):
                where = where[len(str(worktree)) + 1:]
        out[name] = (f"{value.value!r}" if value.state != "unknown" else "unknown", where)
    return out


def config_diff(repo, probe: Probe, parent_sha: str, culprit_sha: str) -> list[dict]:
    """The diff, from the files offlint reads at each commit (extracted with `git archive`, no checkout)."""
    import tempfile

    from offlint.bisect.prescreen import extract

    with tempfile.TemporaryDirectory(prefix="offlint-diff-") as directory:
        parent, culprit = Path(directory, "parent"), Path(directory, "culprit")
        extract(repo, parent_sha, parent)
        extract(repo, culprit_sha, culprit)
        before, after = effective_values(probe, parent), effective_values(probe, culprit)
    if before is None or after is None:
        return []
    return [{"key": k, "parent": before[k][0], "culprit": after[k][0], "where": after[k][1] or before[k][1]}
            for k in sorted(after) if before.get(k, ("", ""))[0] != after[k][0]]
