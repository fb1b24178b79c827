"""What a rule condition sees and its third truth value: the Scope a unit's check gives the evaluator (its keys as
resolved values, the names of an assignment-scope rule), UNKNOWN, and the markers a helper function carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from offlint.types import Value
from offlint.versions import Version


class ConditionError(ValueError):
    """A condition or template that is not valid in the language (raised when a rule is loaded)."""


class _Unknown:
    """The third truth value inside the evaluator (distinct from types.Unknown, which carries a reason)."""

    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()


@dataclass
class Scope:
    """What a condition can see: a key lookup, plus the per-assignment names for assignment-scope rules."""

    lookup: Callable[[str], Value]
    version: Version
    names: dict[str, object] = field(default_factory=dict)
    read: list[Value] = field(default_factory=list)
    # why a helper's answer was unknown where no key it read says so (the unit's accelerator: other_accelerator),
    # named with the unknown keys in a possible finding's message
    unknown_because: list[str] = field(default_factory=list)
    _read_keys: set[str] = field(default_factory=set, repr=False)

    def key(self, name: str) -> object:
        value = self.lookup(name)
        if value.key not in self._read_keys:
            self._read_keys.add(value.key)
            self.read.append(value)
        return UNKNOWN if value.state == "unknown" else value.value  # (Value.is_unknown, without its call)


def truth(value: object) -> object:
    """Python truthiness, three-valued."""
    if value is UNKNOWN:
        return UNKNOWN
    return bool(value)


def needs_scope(fn):
    """Marks a helper function that takes the Scope as its first argument (the language passes it)."""
    fn.needs_scope = True
    return fn


def takes_unknown(fn):
    """Marks a helper function called with UNKNOWN arguments too (any other call with one is UNKNOWN)."""
    fn.takes_unknown = True
    return fn
