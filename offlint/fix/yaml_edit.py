"""YAML edits as byte-exact token edits on the lines of one mapping entry, verified by loading both texts.

Why not ruamel.yaml's round trip: it re-emits the whole document from its own model, and that model does not
keep everything: indentation of sequences is normalised to one setting per file, long lines are re-wrapped,
and the spelling of floats, nulls and booleans (`1.`, `~`, `yes`) and of quoted scalars may change. A token
edit changes only the value, key or line it is about, so every other byte stays the same by construction; and
each result is checked: both texts are loaded (PyYAML, as offlint reads them) and the edited document must
equal the original with exactly the intended change at the entry's path, else the edit is refused.

Supported shapes: a block-mapping entry `key: scalar` or `key: [flow, list]` on one line (a trailing comment
stays). Multi-line values, anchors, aliases, tags and flow mappings are refused (the finding stays).
"""

from __future__ import annotations

import copy
import re

import yaml

from offlint.fix.edits import Change, FixError, field_name, plain_text, transformed

_ENTRY = re.compile(r"(?P<indent>[ ]*)(?P<key>[^\s#:'\"][^:#]*?|'[^']*'|\"[^\"]*\")[ ]*:(?:[ ]+|$)")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def edit(text: str, changes: list[Change]) -> str:
    before = _load(text)
    expected = copy.deepcopy(before)
    for change in sorted(changes, key=lambda c: c.position, reverse=True):
        text, path, new_value, removed = _one(text, change)
        _apply(expected, path, new_value, removed, change)
    after = _load(text)
    if after != expected:
        raise FixError("the edit would change more than the entry it is about")
    return text


def _load(text: str):
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise FixError(f"not valid YAML: {str(exc).splitlines()[0]}") from None


def _entry(lines: list[str], index: int, col: int) -> re.Match:
    match = _ENTRY.match(lines[index])
    if match is None or len(match.group("indent")) != col - 1:
        raise FixError(f"line {index + 1} is not a mapping entry starting at column {col}")
    return match


def _value_span(line: str, match: re.Match) -> tuple[int, int]:
    """The value's columns on its line, without a trailing comment or spaces."""
    start = match.end()
    rest = line[start:].rstrip("\n")
    if rest[:1] in ("'", '"'):
        close = rest.find(rest[0], 1)
        if close < 0:
            raise FixError("a quoted value spanning lines")
        return start, start + close + 1
    if rest[:1] in ("|", ">", "&", "*", "!", "{"):
        raise FixError("a block scalar, anchor, alias, tag or flow mapping")
    comment = re.search(r"\s#", rest)
    end = comment.start() if comment else len(rest)
    value = rest[:end].rstrip()
    if value.startswith("[") and not value.endswith("]"):
        raise FixError("a flow list spanning lines")
    return start, start + len(value)


def _path(lines: list[str], index: int) -> list[str]:
    """The keys from the document root down to the entry on line `index`, from the indentation."""
    match = _ENTRY.match(lines[index])
    path = [_key_text(match.group("key"))]
    indent = len(match.group("indent"))
    for i in range(index - 1, -1, -1):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parent = _ENTRY.match(line)
        width = len(line) - len(line.lstrip(" "))
        if width < indent:
            if parent is None or line.lstrip().startswith("-"):
                raise FixError("the entry is inside a list")
            path.insert(0, _key_text(parent.group("key")))
            indent = width
        if indent == 0:
            break
    return path


def _key_text(raw: str) -> str:
    raw = raw.strip()
    return raw[1:-1] if raw[:1] in ("'", '"') else raw


def _block_end(lines: list[str], index: int) -> int:
    """The index after the entry's last line (its nested lines, if any)."""
    indent = len(lines[index]) - len(lines[index].lstrip(" "))
    j = index + 1
    while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip(" ")) > indent):
        j += 1
    while j > index + 1 and not lines[j - 1].strip():
        j -= 1
    return j


def _one(text: str, change: Change):
    lines = text.splitlines(keepends=True)
    index = change.line - 1
    if not 0 <= index < len(lines):
        raise FixError(f"line {change.line} is not in the file")
    match = _entry(lines, index, change.col)
    line = lines[index]
    key = _key_text(match.group("key"))
    path = _path(lines, index)
    if change.op != "insert" and key != field_name(change.key) and key != change.key:
        raise FixError(f"line {change.line} sets {key}, not {field_name(change.key)}")
    if change.op == "set":
        start, end = _value_span(line, match)
        written = line[start:end]
        raw, quote = (written[1:-1], written[0]) if written[:1] in ("'", '"') else (written, "")
        if change.transform:
            new = transformed(change.transform, raw)
            if quote and change.transform == "list":
                new = f"[{quote}{raw}{quote}]"
            elif quote:
                new = new if change.transform != "null" else "null"
        else:
            new = plain_text(change.value)
        lines[index] = line[:start] + new + line[end:]
        return "".join(lines), path, _load(new), False
    if change.op == "rename":
        new_key = field_name(change.new_key)
        key_start = len(match.group("indent"))
        lines[index] = line[:key_start] + new_key + line[key_start + len(match.group("key")):]
        return "".join(lines), path, new_key, False
    if change.op == "remove":
        end = _block_end(lines, index)
        if end != index + 1:
            raise FixError("the entry's value spans lines")
        siblings = _siblings(lines, index)
        if siblings == 1 and len(path) > 1:
            raise FixError("removing the only entry would leave its section empty")
        del lines[index]
        return "".join(lines), path, None, True
    if change.op == "insert":
        end = _block_end(lines, index)
        new_line = f"{match.group('indent')}{field_name(change.key)}: {plain_text(change.value)}\n"
        if end > 0 and not lines[end - 1].endswith("\n"):
            lines[end - 1] += "\n"
        lines.insert(end, new_line)
        return "".join(lines), path[:-1] + [field_name(change.key)], change.value, False
    raise FixError(f"cannot {change.op} a YAML entry")


def _siblings(lines: list[str], index: int) -> int:
    indent = len(lines[index]) - len(lines[index].lstrip(" "))
    count = 0
    for step in (-1, 1):
        j = index if step == 1 else index - 1
        while 0 <= j < len(lines):
            line = lines[j]
            width = len(line) - len(line.lstrip(" "))
            if line.strip() and not line.lstrip().startswith("#"):
                if width < indent:
                    break
                if width == indent:
                    count += 1
            j += step
    return count


def _apply(document, path: list[str], new_value, removed: bool, change: Change) -> None:
    """The intended change made to the loaded document, to compare with what the edited text loads to."""
    node = document
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            raise FixError("the entry's path is not in the document")
        node = node[part]
    if not isinstance(node, dict):
        raise FixError("the entry's parent is not a mapping")
    last = path[-1]
    if removed:
        node.pop(last, None)
    elif change.op == "rename":
        node[new_value] = node.pop(last)
    else:
        node[last] = new_value


def is_entry(text: str, change: Change) -> bool:
    """Whether the change's site is a mapping entry of the YAML file (else it is a token of a command the file
    holds, as in a card)."""
    lines = text.splitlines()
    index = change.line - 1
    if not 0 <= index < len(lines):
        return False
    match = _ENTRY.match(lines[index])
    return bool(match) and len(match.group("indent")) == change.col - 1 and (
        change.op == "insert" or _key_text(match.group("key")) in (field_name(change.key), change.key))
