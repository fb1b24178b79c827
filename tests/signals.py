"""Ctrl-C in the tests that need it, whatever the test runner did to SIGINT.

A shell that starts a command in the background without job control (`cmd &` in a script, `nohup`) sets SIGINT
to ignored; children inherit that, and Python then never raises KeyboardInterrupt (`_thread.interrupt_main`
does nothing either). The tests that send Ctrl-C give their subject the default disposition back.
"""

from __future__ import annotations

import contextlib
import signal


def default_sigint() -> None:
    """`preexec_fn` for a subprocess that must react to SIGINT as a terminal's Ctrl-C would make it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_raises():
    """In this process: SIGINT raises KeyboardInterrupt inside the block."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
