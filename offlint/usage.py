"""The one way every offlint command reports a user error: one line on standard error, exit code 2."""

from __future__ import annotations

import sys

import click

from offlint.terminal import message


def fail(text: str) -> None:
    click.echo(message("error", text), err=True)
    sys.exit(2)
