"""Writes into a dict or a list that a local name holds. A dict: `kw["k"] = v`, `kw["k"] += v`, `del kw["k"]`, `kw.update(...)`,
`kw.setdefault(k, v)`, `kw.pop(k)`, `kw.clear()`. The name gets a changed copy when every key written is a literal;
any other write leaves it unknown. Ignored, such a write left the dict as it was and known: a recipe that set
`user_kwargs["tensor_model_parallel_size"] = 8` before `return _common(**user_kwargs)` was read with `_common`'s
defaults (TP 1, PP 1), and reported a false OFL303 (Bridge's Qwen2.5 72B recipes before 2026-03).

A dict offlint reads maps each key to (value, its location, its text) (python_expressions._eval_dict); a
PartialDict's own entries are known and the rest is not, which a copy keeps.

A list: `xs.append(v)`, `xs.extend(known)` and `xs.clear()` give the name a changed copy; any other write
(`insert`, `remove`, `pop`, `sort`, `xs[i] = v`, ...) leaves it unknown. Ignored, `matches = []` filled by a loop
of `matches.append(...)` stayed a known empty list, and `if not matches: raise ...` was taken as certain (Bridge's
scripts/performance/utils/utils.py `_first_matching_perf_recipe_name`).
"""

from __future__ import annotations

from offlint.sources.python_values import PartialDict
from offlint.types import Unknown

WRITES = frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"})
LIST_WRITES = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__",
                         "__delitem__", "__iadd__"})
METHODS = WRITES | LIST_WRITES  # (one look-up per call the reader evaluates)
# The key, among a call's keyword arguments (python_call_effects._call_keywords), that stands for a `**spread` offlint
# cannot read in full: any parameter the call does not name may be set by it. Not an identifier: no keyword clashes.
SPREAD = "**"
_KEYS = (str, int, float, bool, type(None))


def spread_over(keywords: dict, names) -> dict:
    """A call's keyword arguments with an unread `**spread` (under SPREAD) given to every one of `names` they do not
    name: a field or parameter it may set is unknown, never at its default."""
    spread = keywords.pop(SPREAD, None)
    return keywords if spread is None else {**dict.fromkeys(names, spread), **keywords}


def literal_key(key: object) -> bool:
    """Whether `key` is a value offlint knows exactly (not Unknown, not a config object)."""
    return isinstance(key, _KEYS) or isinstance(key, tuple) and all(isinstance(k, _KEYS) for k in key)


def changed(held: dict, entries: dict | None = None, removed: tuple = (), cleared: bool = False) -> dict:
    """A copy of `held` with `entries` ({key: (value, location, text)}) set and the keys `removed` taken out; a
    PartialDict stays one (its unread part is still there), unless `cleared` (`kw.clear()` empties it all)."""
    items = {} if cleared else {k: v for k, v in held.items() if k not in removed}
    items.update(entries or {})
    if isinstance(held, PartialDict) and not cleared:
        return type(held)(items, held.reason)
    return items


def value_of(entry: object) -> object:
    """The value of a dict entry as offlint keeps it ((value, location, text)), or the entry itself."""
    return entry[0] if isinstance(entry, tuple) and len(entry) == 3 else entry


def unknown_write(name: str, text: str) -> Unknown:
    return Unknown(f"`{name}` is changed by `{text}`, which offlint cannot follow")


def list_write(held: list, method: str, args: list, keywords: bool) -> list | None:
    """`held` after `held.<method>(*args)`, or None when offlint cannot tell (the name becomes unknown)."""
    if keywords:
        return None
    if method == "append" and len(args) == 1:
        return [*held, args[0]]
    if method == "extend" and len(args) == 1 and isinstance(args[0], (list, tuple)):
        return [*held, *args[0]]
    if method == "clear" and not args:
        return []
    return None
