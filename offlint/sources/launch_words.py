"""A launch command's words as the launch readers take them: `Arg`, a word of its argv, and `EnvArg`, a variable of its
environment, each with where it is written and why offlint cannot read its value; and `program`, the program a word
names.
"""

from __future__ import annotations

from dataclasses import dataclass

from offlint.types import Location


@dataclass(frozen=True)
class Arg:
    value: str | None
    location: Location
    text: str = ""
    unknown: str = ""
    conditional: str = ""
    flags: tuple[str, ...] | None = ()  # an unresolvable word's possible flags; None: any (shell_values.Word)
    assumed: tuple[str, ...] = ()  # the environment variables whose defaults its value took (shell_values.Word)
    alternative: tuple = ()  # the alternative of an undecided branch that appended it (shell_values.Word)


@dataclass(frozen=True)
class EnvArg:
    name: str
    value: str | None
    location: Location
    unknown: str = ""


def program(word: str | None) -> str:
    """A word's last path part (`/usr/bin/torchrun` -> "torchrun"), "" for None: posixpath.basename of a str in one
    call, not four (asked of several words of every command of every script)."""
    return "" if word is None else word[word.rfind("/") + 1:]
