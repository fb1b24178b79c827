"""How offlint talks to a person at a terminal: colour, progress, plurals. Nothing here when output is piped.

Colour: `--color auto|always|never` (auto: on when the stream is a terminal), with the usual environment
overrides: `NO_COLOR` (non-empty) turns it off and `FORCE_COLOR` (non-empty, not 0/false) turns it on; an explicit
`--color always|never` beats both. Progress (a bar or a status line on standard error) needs both standard output
and standard error to be terminals, no `CI` variable (CI logs are files), and a human output format.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, TextIO

import click

COLOR_CHOICES = ("auto", "always", "never")
_COLOR_KEY = "offlint.color"  # in click's context meta, which a command's contexts share: no state between runs


def set_color(ctx: click.Context, choice: str | None) -> None:
    """--color, for the command being run."""
    if choice:
        ctx.meta[_COLOR_KEY] = choice


def _env_on(name: str) -> bool:
    value = os.environ.get(name, "")
    return bool(value) and value.lower() not in ("0", "false")


def color_for(stream: TextIO | None = None) -> bool:
    """Whether text written to `stream` (default: standard output) gets ANSI colour."""
    ctx = click.get_current_context(silent=True)
    choice = ctx.meta.get(_COLOR_KEY, "auto") if ctx is not None else "auto"
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if _env_on("FORCE_COLOR"):
        return True
    return _is_tty(stream if stream is not None else sys.stdout) and os.environ.get("TERM") != "dumb"


def style(text: str, stream: TextIO | None = None, **styles) -> str:
    """`text` styled with click's styles when `stream` gets colour, else unchanged."""
    return click.style(text, **styles) if color_for(stream) else text


SEVERITY_STYLE = {"error": {"fg": "red", "bold": True}, "warning": {"fg": "yellow", "bold": True},
                  "info": {"fg": "cyan", "bold": True}}


def message(kind: str, text: str) -> str:
    """`offlint: error: text` (or warning, note), its label coloured for standard error."""
    label = style(f"{kind}:", sys.stderr, **SEVERITY_STYLE.get(kind, {"fg": "cyan", "bold": True}))
    return f"offlint: {label} {text}"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 file', '2 files', '0 files'; `many` for irregular plurals ('1 branch', '2 branches')."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def _is_tty(stream) -> bool:
    try:
        return bool(stream) and stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def progress_enabled() -> bool:
    """Progress only for a person watching: both streams on a terminal, not in CI, not on a dumb terminal."""
    return (_is_tty(sys.stdout) and _is_tty(sys.stderr) and not os.environ.get("CI")
            and os.environ.get("TERM") != "dumb")


class Bar:
    """A transient progress bar on standard error (click's), drawn from the first `update(done, total)` and erased
    when the work ends, so that a fast (cached) run shows nothing and a finished one leaves no line behind."""

    def __init__(self, label: str, enabled: bool = True):
        self.label = label
        self.live = enabled and progress_enabled()
        self._bar = None

    def __enter__(self) -> "Bar":
        return self

    def update(self, done: int, total: int) -> None:
        if not self.live or total <= 0:
            return
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr, show_pos=True,
                                          width=30, color=color_for(sys.stderr))
            self._bar.__enter__()
        self._bar.length = total
        self._bar.update(done - self._bar.pos)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            sys.stderr.write("\r\033[K\033[?25h")  # erase the bar, show the cursor again
            sys.stderr.flush()
            self._bar = None


class Status:
    """A status line at the bottom of the terminal for long waits (bisect rounds, replay runs): `echo` prints a
    line above it, `set` changes its text; a clock ticks in it. Without a terminal, `echo` just prints and the
    status line never appears."""

    def __init__(self, enabled: bool = True):
        self.live = enabled and progress_enabled()
        self.text = ""
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Status":
        if self.live:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._clear()

    def set(self, text: str) -> None:
        with self._lock:
            self.text = text
            self._draw()

    def echo(self, line: str) -> None:
        with self._lock:
            self._clear()
            click.echo(line, err=True)
            self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self._draw()

    def _clear(self) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _draw(self) -> None:
        if not self.live or not self.text:
            return
        elapsed = int(time.monotonic() - self._start)
        clock = f"{elapsed // 60}:{elapsed % 60:02d}"
        sys.stderr.write("\r\033[K" + style(f"{self.text} [{clock}]", sys.stderr, fg="cyan"))
        sys.stderr.flush()


def echo_through(status: Status | None) -> Callable[[str], None]:
    """A line printer for progress messages on standard error, above the status line when there is one."""
    return status.echo if status is not None else (lambda line: click.echo(line, err=True))
