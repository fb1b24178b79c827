"""Which project a check's paths belong to, and how the files they name sit in that project's tree.

A finding in a file must not depend on which paths were named: a recipe in `perf_recipes/llama/b200/` reads
base builders and helpers elsewhere in the project, and launches elsewhere run it. So a check of paths inside a
project reads against the whole project (imports, recipes and launches) and the paths only select what is
reported: the units in the named files and every unit whose findings can land in them (changed.py).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from offlint.discover import SourceFile, discover

# What marks a project's root, strongest first: the repository, then a Python project file.
REPOSITORY_MARKERS = (".git",)
PROJECT_MARKERS = ("pyproject.toml", "setup.py", ".offlint.toml")


def project_root(paths: list[str]) -> Path | None:
    """The project every path lies in: the nearest enclosing repository (else the nearest directory with a
    Python project file) of each path, when they all agree; None when there is none or they disagree."""
    roots = set()
    for raw in paths:
        try:
            start = Path(os.path.realpath(raw))
        except (OSError, ValueError):
            return None
        if not os.path.isdir(start):  # os.path: False, never an error, for a path that cannot be looked at
            start = start.parent
        roots.add(_nearest(start, REPOSITORY_MARKERS) or _nearest(start, PROJECT_MARKERS))
    return roots.pop() if len(roots) == 1 and None not in roots else None


def _nearest(start: Path, markers: tuple[str, ...]) -> Path | None:
    for directory in (start, *start.parents):
        if any(os.path.exists(directory / marker) and not _a_module(directory, marker) for marker in markers):
            return directory
    return None


def _a_module(directory: Path, marker: str) -> bool:
    """A `setup.py` beside an `__init__.py` is a module of a package (Megatron Bridge's training/setup.py), not
    the project's packaging script."""
    return marker == "setup.py" and os.path.exists(directory / "__init__.py")


def selects_part_of(paths: list[str], root: Path) -> bool:
    """Whether the paths name part of the project at `root` (each inside it, none the root itself)."""
    real_root = os.path.realpath(root)
    for raw in paths:
        real = os.path.realpath(raw)
        if real == real_root or not real.startswith(real_root.rstrip(os.sep) + os.sep):
            return False
    return True


def project_files(root: Path, paths: list[str], files: list[SourceFile]) -> tuple[list[SourceFile], list[SourceFile]]:
    """(every file of the project, the named files) with one spelling per file: the project's, so that a file
    reached through the named paths and through the project is one file. A named file discovery would not
    find on its own (an ignored file named explicitly) joins the project's files."""
    spelled = str(root) if any(os.path.isabs(p) for p in paths) else os.path.relpath(root)
    tree = [f if (path := _as_user_writes(f.path, spelled)) == f.path else SourceFile(path, f.kind, f.explicit)
            for f in discover([spelled])[0]]  # (the same file spelled the same: that SourceFile, frozen, not a copy)
    by_path = {f.path: f for f in tree}
    by_real: dict[str, SourceFile] | None = None  # realpath of every file: only for a name spelled otherwise
    named = []
    for file in files:
        known = by_path.get(file.path)
        if known is None:
            if by_real is None:
                by_real = {os.path.realpath(f.path): f for f in tree}
            known = by_real.get(os.path.realpath(file.path))
        if known is None:
            tree.append(file)
            named.append(file)
        else:
            named.append(SourceFile(known.path, known.kind, file.explicit))
    return tree, named


def _as_user_writes(path: str, spelled_root: str) -> str:
    """A relative path below the working directory as the user names it there (`launch/x.sh`, not
    `../../proj/launch/x.sh` when the project root lies above the working directory)."""
    if os.path.isabs(spelled_root):
        return path
    if spelled_root == "." and not os.path.isabs(path):  # the common case: already below the working directory
        if path and path[0] != "." and path[-1] != "/" and "//" not in path and "/." not in path and os.sep == "/":
            return path  # no empty, "." or ".." part: normpath would give it back (the run lists 2,000)
        normal = os.path.normpath(path)  # with "/" separators already as_posix's result
        return normal if os.sep == "/" else Path(normal).as_posix()
    below = os.path.relpath(os.path.normpath(path))
    return Path(below).as_posix() if not below.startswith("..") else path


def nearest(candidates: list[str], here: str) -> list[str]:
    """The candidate paths sharing the most leading directories with `here`: where two trees side by side in one
    repository both define a name (a `recipes` package, a recipe function), the one next to its user."""
    mine = PurePosixPath(here).parts

    def shared(path: str) -> int:
        theirs = PurePosixPath(path).parts
        return next((i for i, (a, b) in enumerate(zip(theirs, mine)) if a != b), min(len(theirs), len(mine)))

    lengths = {path: shared(path) for path in candidates}
    best = max(lengths.values(), default=0)
    return [path for path in candidates if lengths[path] == best]
