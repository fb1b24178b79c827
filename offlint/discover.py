"""Which files to lint: walk directories respecting .gitignore, and tell each file's kind.

Kinds: "python" (.py), "yaml" (.yaml/.yml), "shell" (.sh/.bash/.sbatch/.slurm, or no extension with a
shell shebang). A file named explicitly that is none of these is an error (fail closed); inside a walked
directory it is skipped.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pathspec

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".offlint_cache", ".offlint", ".venv", "venv", "node_modules",
             ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".eggs"}
EXTENSIONS = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".sh": "shell", ".bash": "shell",
              ".sbatch": "shell", ".slurm": "shell"}
SHELLS = (b"sh", b"bash", b"zsh", b"dash", b"ksh")


@dataclass(frozen=True)
class SourceFile:
    path: str  # as shown to the user (relative when under the working directory)
    kind: str
    explicit: bool  # named on the command line (always parsed, errors always reported)


def kind_of(path: Path) -> str | None:
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind:
        return kind
    if path.suffix == "" and _has_shell_shebang(path):
        return "shell"
    return None


def _has_shell_shebang(path: Path) -> bool:
    try:
        return _shell_shebang(path)
    except OSError:
        return False


def _shell_shebang(path: Path) -> bool:
    with open(path, "rb") as handle:
        first = handle.readline(200)
    if not first.startswith(b"#!"):
        return False
    words = first[2:].replace(b"/", b" ").split()
    return any(w in SHELLS for w in words)


def _is_binary(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"\0" in handle.read(8192)
    except OSError:
        return True


def discover(paths: list[str]) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Return the files to lint and (path, problem) pairs for paths that cannot be linted."""
    files: list[SourceFile] = []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()  # real paths
    cwd = os.path.realpath(os.getcwd())
    for raw in paths:
        path = Path(raw)
        try:
            info = os.stat(path)
        except OSError as exc:
            problems.append((raw, _os_problem(exc)))
            continue
        if stat.S_ISDIR(info.st_mode):
            # os.walk does not follow symbolic links below the root, so only the root needs resolving: a file
            # is shown as the root's shown form joined with its path below the root.
            real_root = os.path.realpath(path)
            shown_root = _shown_under(real_root, ".", cwd, raw)
            prefix = "" if shown_root == "." else shown_root.rstrip("/") + "/"
            for below, kind, problem in _walk(path):
                if problem:  # an unreadable directory or file: not checked, so never a pass
                    problems.append(((prefix + below).rstrip("/") or shown_root, problem))
                    continue
                real = os.path.join(real_root, below)
                if real not in seen:  # a file reached twice (two overlapping paths) is linted once
                    seen.add(real)
                    files.append(SourceFile(prefix + below, kind, False))
            continue
        kind = kind_of(path)
        if kind is None and path.suffix == "" and not _is_binary(path):
            continue  # an extension-less text file without a shell #! line (LICENSE, Makefile): not ours
        if kind is None:
            problems.append((raw, "not a Python, YAML or shell file: offlint reads .py, .yaml, .yml, .sh and "
                                  "shell scripts with a #! line"))
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            files.append(SourceFile(_shown_under(real, ".", cwd, raw), kind, True))
    return files, problems


def _walk(root: Path):
    """(path below root, kind, "") of every lintable file under root, in sorted order, skipping ignored and linked
    files; paths use "/". A directory or file that cannot be read gives (its path below root, "", why)."""
    specs: list[tuple[Path, pathspec.PathSpec]] = []
    unreadable: list[OSError] = []
    for directory, dirnames, filenames in os.walk(root, onerror=unreadable.append):
        yield from _unreadable_dirs(root, unreadable)
        here = Path(directory)
        below = os.path.relpath(directory, root)
        below = "" if below == "." else Path(below).as_posix() + "/"
        ignore_file = os.path.join(directory, ".gitignore")
        if os.path.isfile(ignore_file):
            try:
                with open(ignore_file, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
                specs.append((here, pathspec.PathSpec.from_lines("gitwildmatch", lines)))
            except OSError:
                pass
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")
                             and not _ignored(here / d, specs, True))
        for name in sorted(filenames):
            extension = os.path.splitext(name)[1]
            kind = EXTENSIONS.get(extension.lower())
            if kind is None and extension:
                continue
            found = os.path.join(directory, name)
            if os.path.islink(found) or (specs and _ignored(here / name, specs, False)):
                continue
            if kind is None:  # no extension: a shell script when its #! line says so
                try:
                    kind = "shell" if _shell_shebang(Path(found)) else None
                except OSError as exc:
                    yield below + name, "", f"{_os_problem(exc)} (to tell whether it is a shell script)"
                    continue
            if kind:
                yield below + name, kind, ""
    yield from _unreadable_dirs(root, unreadable)


def _unreadable_dirs(root: Path, errors: list[OSError]):
    while errors:
        error = errors.pop(0)
        below = Path(os.path.relpath(error.filename, root)).as_posix() if error.filename else "."
        yield ("" if below == "." else below + "/"), "", f"cannot read directory: {error.strerror or error}"


def _os_problem(exc: OSError) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory"
    return f"cannot read: {exc.strerror or exc}"


def _ignored(path: Path, specs, is_dir: bool) -> bool:
    for base, spec in specs:
        try:
            relative = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(relative + ("/" if is_dir else "")):
            return True
    return False


def _shown_under(real_base: str, relative: str, cwd: str, given: str) -> str:
    """A path as shown to the user: relative to the working directory when it is under it, else as given."""
    real = os.path.normpath(os.path.join(real_base, relative))
    if real == cwd or real.startswith(cwd.rstrip(os.sep) + os.sep):
        return Path(os.path.relpath(real, cwd)).as_posix()
    return Path(given).as_posix()
