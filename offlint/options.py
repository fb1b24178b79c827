"""Options that several subcommands share, defined once so that each concept has one spelling, one unit and one
default everywhere (tests/test_option_spelling.py holds the table). Old spellings stay for one release as hidden
aliases that print a deprecation note on standard error.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

import click

from offlint import terminal

ITERS_DEFAULT = 20  # replay and bisect's replay probe: enough warm steps for a median step time
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_FACTORS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
            "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_LEGACY_BYTES = 2**20  # a plain number this large was bytes (--memory-budget before sizes); as GiB it is 1 PiB


class Bytes(int):
    """A size already converted (click converts a plan's default_map values again: they must pass unchanged)."""


class Size(click.ParamType):
    """A memory size in bytes: `80GiB`, `80G` (= GiB), `500MB`, `1.5TiB`, `4096B`; a plain number is GiB.
    `legacy_bytes`: a plain number of at least 2**20 is read as bytes, as the option used to take, with a note."""

    name = "size"

    def __init__(self, legacy_bytes: bool = False):
        self.legacy_bytes = legacy_bytes

    def convert(self, value: Any, param, ctx) -> int:
        if isinstance(value, Bytes):
            return value
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a size; write e.g. 80GiB, 500MB or 80 (GiB)", param, ctx)
        match = _SIZE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a size; write e.g. 80GiB, 500MB or 80 (GiB)", param, ctx)
        number, unit = float(match.group(1)), (match.group(2) or "").lower()
        if not unit:
            if self.legacy_bytes and number >= _LEGACY_BYTES:
                name = param.opts[0] if param is not None else "size"
                click.echo(terminal.message("warning", f"{name} {value}: plain numbers are GiB now; read as bytes "
                                                      f"this release (write {int(number)}B or a size such as "
                                                      f"80GiB)"), err=True)
                unit = "b"
            else:
                unit = "gib"
        elif unit in ("k", "m", "g", "t"):
            unit += "ib"
        elif unit in ("ki", "mi", "gi", "ti"):
            unit += "b"
        size = int(number * _FACTORS[unit])
        if size <= 0:
            self.fail(f"{value!r}: a size must be more than 0 bytes", param, ctx)
        return Bytes(size)


class PngPath(click.Path):
    """Where `--plot` writes its picture: a file name ending in .png, not a directory (click.Path's test, as the
    other output options have it), checked before any work is done (matplotlib picks the format by the suffix:
    `--plot out.txt` failed only after the estimate, with an internal error)."""

    name = "file.png"

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param, ctx) -> str:
        path = os.fspath(value)
        if not path.lower().endswith(".png"):
            self.fail(f"{path!r}: the plot is a PNG image; give a file name ending in .png", param, ctx)
        return super().convert(path, param, ctx)


def plot_option(help_text: str) -> Callable:
    return click.option("--plot", "plot_path", type=PngPath(), default=None, metavar="FILE.png", help=help_text)


def color_option(command: Callable) -> Callable:
    """--color auto|always|never (NO_COLOR and FORCE_COLOR apply under auto)."""
    return click.option("--color", type=click.Choice(terminal.COLOR_CHOICES), default=None, expose_value=False,
                        is_eager=True, callback=lambda ctx, param, value: terminal.set_color(ctx, value),
                        help="Colour codes, paths and severities: auto (on a terminal), always or never; "
                             "NO_COLOR / FORCE_COLOR apply under auto.")(command)


def mcore_version_option(help_text: str) -> Callable:
    return click.option("--mcore-version", default=None, metavar="VERSION", help=help_text)


def iters_option(help_text: str = "Training iterations.") -> Callable:
    return click.option("--iters", default=ITERS_DEFAULT, show_default=True, type=click.IntRange(1), help=help_text)


def output_format_option(choices: tuple[str, ...] | list[str], default: str) -> Callable:
    return click.option("--output-format", type=click.Choice(list(choices)), default=default, show_default=True,
                        help="How to print the result.")


def deprecated(old: str, target: str, new: str, **option_kwargs) -> Callable:
    """A hidden `old` option that sets parameter `target` (spelled `new` now), with a note on standard error.

    Click handles the parameters given on the command line first, in the order given, then the others; so when the
    target is already in ctx.params here, it was given too (an error), and otherwise its callback (`alias_of`)
    takes this value in place of its default."""

    def remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None or value == ():
            return
        click.echo(terminal.message("warning", f"{old} is deprecated and will be removed in the next release; "
                                               f"use {new}"), err=True)
        if target in ctx.params:
            raise click.UsageError(f"{old} is the old spelling of {new}; give only {new}", ctx)
        ctx.meta.setdefault("offlint.aliases", {})[target] = value

    option_kwargs.setdefault("default", None)
    return click.option(old, f"_alias_{target}", hidden=True, expose_value=False, callback=remember,
                        **option_kwargs)


def alias_of(default: Any = None) -> Callable:
    """The callback of a parameter that has a deprecated alias; the parameter itself defaults to None (so that
    "not given" can be told apart) and `default` is applied here."""

    def choose(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        aliases = ctx.meta.get("offlint.aliases", {})
        if param.name in aliases:
            if value is not None:
                name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
                raise click.UsageError(f"give {name} once, not also through its old spelling", ctx)
            return aliases[param.name]
        return default if value is None else value

    return choose
