"""The one way every offlint command reports a user error: one line on standard error, exit code 2."""

from __future__ import annotations

import sys

import click


def fail(message: str) -> None:
    click.echo(f"offlint: error: {message}", err=True)
    sys.exit(2)
