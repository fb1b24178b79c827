"""Carrying fixes out on file texts, and writing the results back safely.

Fixes are made one at a time, from the end of each file backwards, each on the text the previous ones left: an
edit never moves what lies before it, so the positions of the remaining fixes stay true. A fix whose edits
reach past one already made in the same file waits for the next pass (run.py checks again and re-plans). A fix
is all or nothing across the files it edits.

Writing: each file goes to a temporary file in its own directory, which is then renamed over it, so a reader
sees the old or the new text and never half of one. Right before, the file is read again and compared with the
text the fixes were planned on: a file that changed meanwhile is left as it is. A read-only file (no write
permission bit, or the directory refuses the temporary file) is left too. Each is one line in `problems`. A file
with other hard links is written in place instead: a file renamed over one of its names would leave the others
(a config shared with another checkout) on the old text, no longer linked.
"""

from __future__ import annotations

import ast
import errno
import os
import stat
import tempfile
from dataclasses import dataclass, field

from offlint.fix.edits import Change, FixError
from offlint.fix.plan import PlannedFix
from offlint.reading import BOM, ReadError, read_text

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass
class Edited:
    """The texts of the files fixes changed, with the fixes made."""

    originals: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    made: list[PlannedFix] = field(default_factory=list)
    deferred: int = 0  # fixes left for the next pass (they overlap one made in this pass)
    problems: dict[str, str] = field(default_factory=dict)  # path -> why it is not fixed (one line)


def make(planned: list[PlannedFix], reader=None) -> Edited:
    """Every fix that can be made, on texts read from disk (or from `reader(path)`)."""
    reader = reader or read
    result = Edited()
    touched: dict[str, tuple[int, int]] = {}  # path -> the earliest position edited so far
    order = sorted(planned, key=lambda p: max((c.path, c.position) for c in p.changes), reverse=True)
    for planned_fix in order:
        for fix in (planned_fix, *planned_fix.fallbacks):
            outcome = _try(fix, result, touched, reader)
            if outcome != "failed":
                break
    for path in list(result.texts):
        if path in result.problems or result.texts[path] == result.originals[path]:
            result.texts.pop(path)
            result.originals.pop(path)
    result.made = [f for f in result.made if not any(p in result.problems for p in f.paths)]
    return result


def _try(fix: PlannedFix, result: Edited, touched: dict[str, tuple[int, int]], reader) -> str:
    """Make one fix on the texts so far: "made", "deferred" (it reaches past an edit made in this pass), "skipped"
    (a file it edits has a problem) or "failed" (it cannot be made on this text; the next fallback may)."""
    by_path: dict[str, list[Change]] = {}
    for change in fix.changes:
        by_path.setdefault(change.path, []).append(change)
    if any(path in result.problems for path in by_path):
        return "skipped"
    if any(path in touched and max(c.position for c in changes) >= touched[path]
           for path, changes in by_path.items()):
        result.deferred += 1
        return "deferred"
    new_texts = {}
    for path, changes in by_path.items():
        try:
            if path not in result.texts:
                result.originals[path] = result.texts[path] = reader(path)
            new_texts[path] = edit_text(path, result.texts[path], changes)
        except (OSError, ReadError) as exc:
            result.problems[path] = f"cannot read it: {exc}"
            return "skipped"
        except FixError as exc:  # this fix is left out; one about the whole file leaves the file alone
            if str(exc).startswith("file:"):
                result.problems.setdefault(path, str(exc)[5:].strip())
                return "skipped"
            return "failed"
    for path, changes in by_path.items():
        result.texts[path] = new_texts[path]
        first = min(c.position for c in changes)
        touched[path] = min(touched.get(path, first), first)
    result.made.append(fix)
    return "made"


def read(path: str) -> str:
    return read_text(path)


def script_edits_apply(changes: tuple[Change, ...], texts: dict[str, str]) -> bool:
    """Whether a fix's edits of shell scripts can be made on the files as they are (`texts`: those read so far), so
    that `[*] N fixable` does not count what --fix then leaves (a launch inside a `bash -c '...'` string, which
    tree-sitter-bash reads as one word). Edits of Python and YAML files are taken to apply: checking them needs
    their editors (libcst), which a run without --fix does not load."""
    by_path: dict[str, list[Change]] = {}
    for change in changes:
        if not change.path.endswith((".py", *YAML_SUFFIXES)):
            by_path.setdefault(change.path, []).append(change)
    try:
        for path, group in by_path.items():
            if path not in texts:
                texts[path] = read(path)
            edit_text(path, texts[path], group)
    except (OSError, ReadError, FixError):
        return False
    return True


def edit_text(path: str, text: str, changes: list[Change]) -> str:
    """One fix's edits in one file, by the file's kind; FixError when they cannot be made safely. A message
    starting with 'file:' is about the whole file (it does not parse), not just this fix."""
    drops = [c for c in changes if c.op == "drop-suppression"]
    others = [c for c in changes if c.op != "drop-suppression"]
    if drops:
        dropped = drop_comments(text, drops)
        _same_meaning(path, text, dropped, drops)
        text = dropped
    if not others:
        _verify(path, text)
        return text
    if path.endswith(".py"):
        _verify(path, text)
        from offlint.fix import python_edit

        new = python_edit.edit(text, others)
    elif path.endswith(YAML_SUFFIXES):
        from offlint.fix import shell_edit, yaml_edit

        entries = [c for c in others if yaml_edit.is_entry(text, c)]
        tokens = [c for c in others if c not in entries]
        new = yaml_edit.edit(text, entries) if entries else text
        if tokens:
            new = shell_edit.edit_command_text(new, tokens)
    else:
        from offlint.fix import shell_edit

        new = shell_edit.edit_script(text, others)
    _verify(path, new, after=True)
    return new


def _verify(path: str, text: str, after: bool = False) -> None:
    """The text still parses as what it is (Python, YAML); a file that does not parse before is not fixed."""
    prefix = "the fix would make it unparsable" if after else "file: cannot be parsed, so it is not fixed"
    if path.endswith(".py"):
        try:
            ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            raise FixError(f"{prefix}: {exc}") from None
    elif path.endswith(YAML_SUFFIXES):
        import yaml

        try:
            yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            raise FixError(f"{prefix}: {str(exc).splitlines()[0]}") from None


def _same_meaning(path: str, before: str, after: str, drops: list[Change]) -> None:
    """A deleted suppression must have been a comment, not text inside a string: the Python syntax tree, the
    YAML data, or (in a script) tree-sitter-bash's comment node at the place says so."""
    if path.endswith(".py"):
        try:
            same = ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
        except (SyntaxError, ValueError):
            same = False
    elif path.endswith(YAML_SUFFIXES):
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            same = yaml.load(before, Loader=loader) == yaml.load(after, Loader=loader)
        except yaml.YAMLError:
            same = False
    else:
        from offlint.fix.shell_edit import is_comment

        same = all(is_comment(before, c.line, c.col) for c in drops)
    if not same:
        raise FixError("the suppression is not a comment there")


def drop_comments(text: str, changes: list[Change]) -> str:
    """Delete the `# offlint: ignore...` comments at the changes' positions: the whole line when the comment is
    alone on it, else the comment and the spaces before it."""
    lines = text.splitlines(keepends=True)
    for change in sorted(changes, key=lambda c: c.position, reverse=True):
        index = change.line - 1
        if not 0 <= index < len(lines):
            raise FixError(f"line {change.line} is not in the file")
        line = lines[index]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        start = change.col - 1
        if not body[start:].lstrip("#").lstrip().lower().startswith("offlint"):
            raise FixError(f"no suppression comment at line {change.line}, column {change.col}")
        if not body[:start].strip():
            del lines[index]
        else:
            lines[index] = body[:start].rstrip(" \t") + ending
    return "".join(lines)


def _starts_with_bom(path: str) -> bool:
    """Whether the file begins with UTF-8's byte order mark, which reading.decode drops from its text (a fix had
    written the file back without it)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(BOM)) == BOM
    except OSError:
        return False


def _write_in_place(path: str, data: bytes) -> None:
    """`data` written over the file's own bytes. The room is reserved first where the system can (a full disk then
    fails before a byte is written, the text intact), not by truncating the file and hoping the new text fits."""
    with open(path, "r+b") as handle:
        reserve = getattr(os, "posix_fallocate", None)
        if reserve is not None:
            try:
                reserve(handle.fileno(), 0, len(data))
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # (a system that cannot: on)
                    raise
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def write(path: str, original: str, new: str) -> str | None:
    """Replace `path`'s text `original` by `new` atomically; the reason (one line) when it is left as it is."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"cannot read it: {exc.strerror}"
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        return "the file is read-only, so it is not fixed"
    try:
        current = read_text(path)
    except (OSError, ReadError) as exc:
        return f"cannot read it: {exc}"
    if current != original:
        return "the file changed while offlint ran, so it is not fixed; run offlint again"
    if _starts_with_bom(path):  # (reading drops it: written back, the fixed file keeps it)
        new = "\ufeff" + new
    if info.st_nlink > 1:  # (see the module's docstring)
        try:
            _write_in_place(path, new.encode("utf-8"))
        except OSError as exc:
            return f"cannot write it ({exc.strerror}), so it is not fixed"
        return None
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(prefix=".offlint-fix-", dir=directory)
    except OSError as exc:
        return f"cannot write next to it ({exc.strerror}), so it is not fixed"
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, stat.S_IMODE(info.st_mode))
        os.replace(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return f"cannot write it ({exc.strerror}), so it is not fixed"
    return None
