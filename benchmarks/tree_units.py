"""What the benchmark scripts share: a real tree read into units the way `offlint check` reads it (no cache),
and which of them are Megatron Bridge's public recipe functions."""

from __future__ import annotations

import os
from pathlib import Path

from offlint import pipeline
from offlint.job import Job, Texts
from offlint.discover import discover
from offlint.linking import link_commands
from offlint.reading import text_or_error
from offlint.source_files import FileRead
from offlint.versions import DetectedVersion, detect_version


def read_tree(tree: Path, mcore_version: str | None, link: bool = False) -> tuple[list, DetectedVersion]:
    """(every readable file of `tree` as read units, the megatron-core version); works from inside `tree`.
    `link`: launch commands are linked to the recipes and YAML files they name, as a check does."""
    os.chdir(tree)
    version = detect_version(mcore_version, None, Path("."))
    files, _ = discover(["."])
    texts = Texts(text_or_error)
    job = Job(files, texts, sorted(f.path for f in files if f.kind == "python"), [], version.version, False)
    by_path = {f.path: f for f in files}
    reads = [FileRead(by_path[o.path], texts[o.path], o.units, o.suppressions)
             for o in pipeline.outcomes(job, None) if o.error is None]
    if link:
        link_commands(reads, [])
    return reads, version


def public_recipe(path: str, name: str) -> bool:
    """A public recipe function: a `*_config` function, not private, in a `recipes/` or `perf_recipes/` folder."""
    parts = path.split("/")
    return name.endswith("_config") and not name.startswith("_") and \
        any(p in ("recipes", "perf_recipes") for p in parts[:-1])
