"""Which files to lint: walk directories respecting .gitignore, and tell each file's kind.

Kinds: "python" (.py), "yaml" (.yaml/.yml), "shell" (.sh/.bash/.sbatch/.slurm/.slrm, or no extension or .job with
a shell shebang; a makefile's is make's comment). A file named explicitly that is none of these is an error (fail
closed); inside a walked directory it is skipped. Only regular files are linted: a walk never follows a symbolic
link and never opens a FIFO, socket or device (one named explicitly is an error); what it cannot read is reported,
never skipped.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import operator
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from offlint.gitignore import GitIgnore
from offlint.reading import ReadError, not_regular, read_bytes, read_head

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".offlint_cache", ".offlint", ".venv", "venv", "node_modules",
             ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".eggs"}
DEFAULT_EXCLUDE = (*sorted(SKIP_DIRS), "*.egg-info")
EXTENSIONS = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".sh": "shell", ".bash": "shell",
              ".sbatch": "shell", ".slurm": "shell", ".slrm": "shell"}  # (.slrm: the Kempner Institute's Slurm jobs)
SHELLS = (b"sh", b"bash", b"zsh", b"dash", b"ksh")
# Extensions whose files are shell scripts where their #! line says so, as files with none are: `.job` (SURF's
# Snellius Slurm jobs; HTCondor's submit descriptions are named so too)
SHEBANG_EXTENSIONS = frozenset({".job"})
# make's build files: make reads a `#!/bin/sh` first line as a comment, and runs no file as a script (OpenManus-RL's
# vendored planner, a helper's sweep: "cannot parse shell script", exit 2)
MAKE_FILES = frozenset({"makefile", "Makefile", "GNUmakefile"})


@dataclass(frozen=True)
class Exclusion:
    """ruff's `exclude` / `extend-exclude`: glob patterns; one without a `/` matches a file or directory name
    anywhere in the tree (`.venv`, `foo_*.py`), one with a `/` a path relative to its base (the directory of the
    pyproject.toml that gave it, or the working directory for a command-line pattern). An excluded directory is not
    entered. Paths named on the command line are checked anyway unless `force` (ruff's --force-exclude), so
    pre-commit, which names files, follows the exclusions only with it."""

    names: tuple[str, ...] = DEFAULT_EXCLUDE  # patterns without a "/": matched against a name
    paths: tuple[str, ...] = ()  # patterns with a "/", made absolute (real paths) against their base
    force: bool = False

    @classmethod
    def of(cls, patterns: list[tuple[str, str]], force: bool = False) -> Exclusion:
        """From (pattern, base directory) pairs."""
        names = tuple(p.rstrip("/") for p, _ in patterns if "/" not in p.rstrip("/"))
        paths = tuple(os.path.normpath(os.path.join(os.path.realpath(base), p.rstrip("/")))
                      for p, base in patterns if "/" in p.rstrip("/"))
        return cls(names, paths, force)

    def matches(self, real: str) -> bool:
        return _any_of(self.names).match(os.path.basename(real)) is not None or \
            (bool(self.paths) and _any_of(self.paths).match(real) is not None)

    def entry_matcher(self):
        """`matches` for a walked entry, given as (its directory's real path, its name): the names' regex is tried
        on the name, the paths' (made once) on the joined path only when there are paths."""
        names = _any_of(self.names).match
        if not self.paths:
            return lambda directory, name: names(name) is not None
        paths = _any_of(self.paths).match
        return lambda directory, name: names(name) is not None or paths(os.path.join(directory, name)) is not None

    def covers(self, real: str, project: str) -> bool:
        """Whether `real` or a directory above it (up to the project) is excluded."""
        path = real
        while True:
            if self.matches(path):
                return True
            parent = os.path.dirname(path)
            if parent == path or not _inside(parent, project) or parent == project:
                return False
            path = parent


@functools.lru_cache(maxsize=64)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern:
    """One regex for a set of globs (fnmatchcase's semantics), tried once per walked entry instead of each glob."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns) or "(?!)")


@dataclass(frozen=True)
class SourceFile:
    path: str  # as shown to the user (relative when under the working directory)
    kind: str
    explicit: bool  # named on the command line (always parsed, errors always reported)


def kind_of(path: Path) -> str | None:
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind:
        return kind
    if (path.suffix == "" or path.suffix.lower() in SHEBANG_EXTENSIONS) and path.name not in MAKE_FILES:
        try:
            return "shell" if _shell_shebang(read_head(path, 200)) else None
        except ReadError:
            return None
    return None


def _shell_shebang(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    if not first.startswith(b"#!"):
        return False
    words = first[2:].replace(b"/", b" ").split()
    return any(w in SHELLS for w in words)


def _is_binary(path: Path) -> bool:
    try:
        return b"\0" in read_head(path, 8192)
    except ReadError:
        return True


def discover(paths: list[str], root: str | os.PathLike | None = None, exclusion: Exclusion | None = None
             ) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Return the files to lint and (path, problem) pairs for paths that cannot be linted.

    `root`: the project (default: the working directory). A path named through a symbolic link is followed only
    to a target inside it; a special file (FIFO, device, socket) is an error when named, skipped when walked.
    """
    files: list[SourceFile] = []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()  # real paths
    cwd = os.path.realpath(os.getcwd())
    project = os.path.realpath(root if root is not None else cwd)
    exclusion = exclusion or Exclusion()
    for raw in paths:
        try:
            os.lstat(raw)
        except OSError as exc:
            problems.append((raw, _os_problem(exc)))
            continue
        real = os.path.realpath(raw)
        linked = real != os.path.normpath(os.path.abspath(raw))
        if linked and not _inside(real, project):
            problems.append((raw, f"a symbolic link to {real}, outside the project ({project}); offlint does not "
                                  f"follow links out of the project"))
            continue
        try:
            info = os.stat(raw)
        except OSError as exc:
            broken = exc.errno in (errno.ENOENT, errno.ELOOP)
            problems.append((raw, "a broken symbolic link, or a loop of them" if broken else _os_problem(exc)))
            continue
        shown = _shown_under(real, ".", cwd, real if linked else raw)
        if exclusion.force and exclusion.covers(real, project):
            continue  # --force-exclude: excluded even when named
        if stat.S_ISDIR(info.st_mode):
            # The walk does not follow symbolic links, so only the root needs resolving: a file is shown as the
            # root's shown form joined with its path below the root.
            prefix = "" if shown == "." else shown.rstrip("/") + "/"
            under = os.path.join(real, "")  # the root's real path and "/": a file's real path is it and its path below
            for below, kind, problem in _walk(real, exclusion):
                if problem:  # an unreadable directory or file: not checked, so never a pass
                    problems.append(((prefix + below).rstrip("/") or shown, problem))
                    continue
                found = under + below
                if found not in seen:  # a file reached twice (two overlapping paths) is linted once
                    seen.add(found)
                    files.append(SourceFile(prefix + below, kind, False))
            continue
        if not stat.S_ISREG(info.st_mode):
            problems.append((raw, not_regular(info.st_mode)))
            continue
        kind = kind_of(Path(real))
        if kind is None and (Path(raw).suffix == "" or Path(raw).suffix.lower() in SHEBANG_EXTENSIONS) and \
                not _is_binary(Path(real)):
            continue  # an extension-less text file without a shell #! line (LICENSE, Makefile; a .job that is not a
            # script, pre-commit's pattern naming it): not ours
        if kind is None:
            problems.append((raw, "not a Python, YAML or shell file: offlint reads .py, .yaml, .yml, .sh and "
                                  "shell scripts with a #! line"))
            continue
        if real not in seen:
            seen.add(real)
            files.append(SourceFile(shown, kind, True))
    return files, problems


# A warm_start.WarmStart while a check runs (warm_start.remembered), else None: a walk's listing is kept there, and
# a later walk of the same directory, with the same exclusions, takes it when nothing it read has changed since
MEMO = None
RACY_NS = 2_000_000_000  # a listing whose folders or files changed this recently is not kept (see _kept_walk)


def _walk(root: str, exclusion: Exclusion):
    """(path below root, kind, "") of every lintable file under root, in sorted order (depth first), skipping
    ignored files, symbolic links and special files, none of which is ever opened; paths use "/". A directory
    or file that cannot be read gives (its path below root, "", why). With a `MEMO`, as kept (`_kept_walk`)."""
    if MEMO is None:
        return _walk_now(root, exclusion)
    return _kept_walk(root, exclusion)


def _kept_walk(root: str, exclusion: Exclusion):
    """`_walk_now`, or what it gave last time when nothing it read has changed: each folder it listed is the same
    (inode, mtime and ctime: a name added, removed or renamed in it, or its permissions changed, changes its ctime),
    and so is each file it opened (the .gitignore files and the heads of extension-less files: inode, size, mtime,
    ctime), under the same exclusions and .gitignore parser. A listing is kept only when it met no problem and
    nothing it read changed less than RACY_NS before the walk began: a change in the same clock tick as one seen
    then would leave the times as they were (git's "racy" entries). Megatron Bridge: 706 folders, 2,097 files,
    about 45 ms to walk (its .gitignore's regex on 2,800 paths), 3 ms to check."""
    from offlint.gitignore import parser_state

    key = repr((root, exclusion, parser_state()))
    kept = MEMO.listing(key)
    if kept is not None and _unchanged(root, kept):
        yield from ((below[1:], _KIND_OF[below[0]], "") for below in kept["found"].split("\n") if below)
        return
    start = time.time_ns()
    record: dict[str, list] = {"dirs": [], "files": []}
    found: list[str] = []
    clean = True
    for below, kind, problem in _walk_now(root, exclusion, record):
        clean = clean and not problem and "\n" not in below
        if not problem:
            found.append(_KIND_CODE[kind] + below)
        yield below, kind, problem
    recent = start - RACY_NS
    if clean and all(row[3] < recent and row[4] < recent for rows in record.values() for row in rows):
        # compact: the paths as one text, the folders' numbers as one list (the warm start's load parses it)
        MEMO.keep_listing(key, {"dirs": "\n".join(row[0] for row in record["dirs"]),
                                "numbers": [n for row in record["dirs"] for n in row[1:]],
                                "files": record["files"], "found": "\n".join(found)})


_KIND_CODE = {"python": "p", "yaml": "y", "shell": "s"}
_KIND_OF = {code: kind for kind, code in _KIND_CODE.items()}


def _unchanged(root: str, kept: dict) -> bool:
    """Whether every folder and file a kept listing read is as it was then."""
    dirs, numbers = kept["dirs"].split("\n"), kept["numbers"]
    if len(numbers) != 4 * len(dirs):
        return False
    join, lstat, isdir = os.path.join, os.lstat, stat.S_ISDIR
    try:
        for index, below in enumerate(dirs):
            info = lstat(join(root, below))
            if [info.st_ino, info.st_dev, info.st_mtime_ns, info.st_ctime_ns] != numbers[4 * index:4 * index + 4] \
                    or not isdir(info.st_mode):
                return False
        for below, inode, size, mtime, ctime in kept["files"]:
            info = os.stat(join(root, below))
            if (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns) != (inode, size, mtime, ctime):
                return False
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return True


def _walk_now(root: str, exclusion: Exclusion, record: dict[str, list] | None = None):
    """`_walk`, walking; `record`: where the state of each folder listed and each file opened is noted
    (_kept_walk), each before it is read."""
    specs: list[tuple[str, GitIgnore]] = []  # (folder below root, "a/" or "", its .gitignore)
    pending = [""]  # directories still to read, as paths below root ("a/b/"); a stack, so depth first
    excluded = exclusion.entry_matcher()
    extensions = EXTENSIONS
    under = os.path.join(root, "")  # a folder below root is this and its path below ("a/b/"): os.path.join's
    while pending:
        below = pending.pop()
        directory = under + below
        try:
            if record is not None:
                info = os.lstat(directory)
                record["dirs"].append([below, info.st_ino, info.st_dev, info.st_mtime_ns, info.st_ctime_ns])
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=_NAME)
        except OSError as exc:
            yield below, "", f"cannot read directory: {exc.strerror or exc}"
            continue
        subdirs = []
        classified = []  # (entry, is a directory, is a regular file): d_type, so usually without a stat
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                classified.append((entry, is_dir, not is_dir and entry.is_file(follow_symlinks=False)))
            except OSError as exc:
                yield below + entry.name, "", _os_problem(exc)
        for entry, is_dir, _ in classified:
            if entry.name == ".gitignore" and not is_dir:
                try:
                    if record is not None:
                        _note_file(record, below + entry.name, entry.path)
                    lines = read_bytes(entry.path).decode("utf-8", "replace").splitlines()
                    specs.append((below, GitIgnore(lines)))
                except ReadError as exc:  # which files it would exclude is unknown: say so
                    yield below + entry.name, "", f"{exc} (offlint reads .gitignore files to know what to skip)"
        for entry, is_dir, regular in classified:
            name = entry.name
            if is_dir:
                if not excluded(directory, name) and not (specs and _ignored(below + name + "/", specs)):
                    subdirs.append(below + name + "/")
                continue
            if not regular:
                continue  # a symbolic link, FIFO, socket or device: never followed, never opened
            # os.path.splitext's extension: from the last ".", unless only dots come before it (".bashrc": none)
            dot = name.rfind(".")
            extension = name[dot:] if dot > 0 and (name[0] != "." or name[:dot].strip(".")) else ""
            kind = extensions.get(extension) or extensions.get(extension.lower())
            if (kind is None and (extension and extension.lower() not in SHEBANG_EXTENSIONS or name in MAKE_FILES)) \
                    or excluded(directory, name) or (specs and _ignored(below + name, specs)):
                continue
            if kind is None:  # no extension (or .job): a shell script when its #! line says so
                try:
                    if record is not None:
                        _note_file(record, below + name, entry.path)
                    kind = "shell" if _shell_shebang(read_head(entry.path, 200)) else None
                except ReadError as exc:
                    yield below + name, "", f"{exc} (to tell whether it is a shell script)"
                    continue
            if kind:
                yield below + name, kind, ""
        pending.extend(reversed(subdirs))


_NAME = operator.attrgetter("name")


def _note_file(record: dict[str, list], below: str, path: str) -> None:
    """A file the walk opens, as it is before it does (a file it cannot stat is read, and reported, as without)."""
    try:
        info = os.stat(path)
    except OSError:
        record["files"].append([below, -1, -1, -1, -1])  # never the same again: the listing is walked next time
        return
    record["files"].append([below, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns])


def _os_problem(exc: OSError) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory"
    return f"cannot read: {exc.strerror or exc}"


def _inside(real: str, directory: str) -> bool:
    return real == directory or real.startswith(directory.rstrip(os.sep) + os.sep)


def _ignored(path: str, specs: list[tuple[str, GitIgnore]]) -> bool:
    """Whether a .gitignore above `path` (below the walk's root; a directory ends in "/") ignores it: a path the walk
    reached, so none of its folders was ignored (GitIgnore.match_walked)."""
    return any(path.startswith(folder) and ignore.match_walked(path[len(folder):]) for folder, ignore in specs)


def _shown_under(real_base: str, relative: str, cwd: str, given: str) -> str:
    """A path as shown to the user: relative to the working directory when it is under it, else as given."""
    real = os.path.normpath(os.path.join(real_base, relative))
    if real == cwd or real.startswith(cwd.rstrip(os.sep) + os.sep):
        return Path(os.path.relpath(real, cwd)).as_posix()
    return Path(given).as_posix()
