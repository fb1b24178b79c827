"""What the command line asked of fixes (`--fix`, `--unsafe-fixes`, `--diff`, `--show-fixes`), and the lines
`check` prints about them, in ruff's words. Light: the editors (and libcst) are imported only when a fix or a
diff is asked for, so a plain `check` stays as fast as before."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field

import click

from offlint.report.escape import printable
from offlint.terminal import plural

OPTIONS = (
    click.option("--fix", is_flag=True, help="Apply fixes to resolve findings (safe fixes only; see --unsafe-fixes)."),
    click.option("--unsafe-fixes", is_flag=True,
                 help="Include fixes that change what the run does (memory, speed, parallel layout)."),
    click.option("--diff", is_flag=True,
                 help="Print the fixes as a unified diff instead of applying them; exit 1 when there is a fix."),
    click.option("--show-fixes", is_flag=True, help="List the fixed findings per file (with --fix)."),
)


def fix_options(command):
    """The four options on a click command; the command itself gets them as `fixing()` (its context's
    FixRequest) rather than as parameters."""

    @functools.wraps(command)
    def wrapper(*args, fix, unsafe_fixes, diff, show_fixes, **kwargs):
        click.get_current_context().meta[_KEY] = FixRequest(fix, unsafe_fixes, diff, show_fixes)
        return command(*args, **kwargs)

    for option in reversed(OPTIONS):
        wrapper = option(wrapper)
    return wrapper


_KEY = "offlint.fix"


def fixing() -> "FixRequest":
    """The running command's FixRequest (a plain check's when none was made: nothing asked)."""
    context = click.get_current_context(silent=True)
    return context.meta.setdefault(_KEY, FixRequest()) if context is not None else FixRequest()


@dataclass
class FixRequest:
    fix: bool = False
    unsafe: bool = False
    diff: bool = False
    show: bool = False
    outcome: object = None  # fix.run.FixOutcome, once run
    hidden: int = 0
    done: list = field(default_factory=list)

    @property
    def asked(self) -> bool:
        return self.fix or self.diff

    def run(self, paths, options, stdin):
        """The check after the fixes (--fix); --diff prints the diff and ends the command here."""
        if stdin is not None:
            raise ValueError("--fix and --diff edit files: name them instead of reading standard input")
        from offlint.fix.run import fix

        self.outcome = outcome = fix(paths, options, self.unsafe, self.diff)
        self.hidden = outcome.hidden
        self._problems()
        if self.diff:
            sys.stdout.write(outcome.diff)
            count = len(outcome.fixed)
            extra = f" ({_hidden(self.hidden)})" if self.hidden else ""
            if count:
                click.echo(f"Would fix {plural(count, 'finding')}{extra}.", err=True)
            else:
                click.echo(f"No findings would be fixed{extra}.", err=True)
            sys.exit(1 if count else 0)
        return outcome.result

    def _problems(self) -> None:
        for path, why in sorted(self.outcome.problems.items()):
            click.echo(f"offlint: error: {printable(path)}: {printable(why)}", err=True)
        appeared = self.outcome.appeared
        if appeared:
            where = ", ".join(f"{f.code} at {f.location}" for f in appeared[:3])
            where += ", ..." if len(appeared) > 3 else ""
            verb = "would make" if self.diff else "made"
            click.echo(f"offlint: warning: the fixes {verb} {plural(len(appeared), 'finding')} appear that no fix "
                       f"removes ({printable(where)}); review them", err=True)

    def summary(self, summary: str, count: int) -> str:
        """ruff's `Found N errors (F fixed, R remaining)` after --fix."""
        if self.outcome is None or not self.outcome.fixed:
            return summary
        fixed = len(self.outcome.fixed)
        return f"Found {plural(count + fixed, 'finding')} ({fixed} fixed, {count} remaining)"

    def finish(self, findings, rules, quiet: bool) -> None:
        """--show-fixes' list; without --fix, how many findings `--fix` would fix (ruff's `[*] N fixable`)."""
        if self.outcome is not None:
            if self.show and self.outcome.fixed:
                from offlint.fix.run import show_fixes

                sys.stdout.write(show_fixes(self.outcome.fixed))
            if quiet:
                return
            _, hidden = self._counts(findings, rules)
            if hidden and not self.unsafe:
                click.echo(f"No fixes available ({_hidden(hidden)}).", err=True)
            return
        if quiet:
            return
        safe, unsafe = self._counts(findings, rules)
        if self.unsafe:
            safe, unsafe = safe + unsafe, 0
        hidden = f" ({_hidden(unsafe)})" if unsafe else ""
        if safe:
            click.echo(f"[*] {safe} fixable with the `--fix` option{hidden}.", err=True)
        elif unsafe:
            click.echo(f"No fixes available{hidden}.", err=True)

    @staticmethod
    def _counts(findings, rules) -> tuple[int, int]:
        from offlint.fix.apply import script_edits_apply
        from offlint.fix.plan import fixability  # no editor, no libcst: imported with the rules already

        texts: dict[str, str] = {}
        return fixability(findings, rules, lambda changes: script_edits_apply(changes, texts)) if findings else (0, 0)


def _hidden(count: int) -> str:
    """ruff's wording for fixes that only --unsafe-fixes applies."""
    return f"{plural(count, 'hidden fix', 'hidden fixes')} can be enabled with the `--unsafe-fixes` option"
