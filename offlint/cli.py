"""The command line: click commands only, no logic. Exit codes: 0 clean, 1 findings, 2 usage/config/file error."""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import json
import os
import sys
import warnings
from pathlib import Path

import click

from offlint import __version__, citations
from offlint.api import CheckOptions, check, exit_code
from offlint.config import FAIL_ON, ConfigError, load_config
from offlint.reading import ReadError, decode, read_fd
from offlint.report import FORMATS, render, render_statistics
from offlint.report.escape import printable
from offlint.rules import RuleFileError, load_rules
from offlint.fix.request import fix_options, fixing
from offlint.types import Severity
from offlint import terminal
from offlint.options import color_option
from offlint.terminal import message, plural
from offlint.usage import fail as _fail
from offlint.discover import DEFAULT_EXCLUDE, EXTENSIONS, Exclusion
from offlint.estimate.devices import DeviceError, parse_device
from offlint.versions import VersionError, checked_as, parse_version


def _read_stdin(name: str) -> str:
    """Standard input, read like any file of the tree: at most the size limit, UTF-8 text."""
    try:
        if sys.stdin is None:
            raise ReadError("standard input is closed")
        return decode(read_fd(sys.stdin.fileno()))
    except ReadError as exc:
        _fail(f"{name} (standard input): {exc}")
    except (OSError, ValueError) as exc:  # no descriptor behind sys.stdin
        _fail(f"{name} (standard input): cannot read: {exc}")


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _exclusion(config, exclude: tuple[str, ...], extend_exclude: tuple[str, ...], force: bool | None) -> Exclusion:
    """ruff's rules: --exclude replaces `exclude` (which replaces the defaults); `extend-exclude` and
    --extend-exclude add to them. Configured patterns are relative to the pyproject.toml's directory, command-line
    ones to the working directory."""
    cwd, root = str(Path.cwd()), str(config.root or Path.cwd())
    if exclude:
        patterns = [(p, cwd) for p in _split(exclude)]
    elif config.exclude is not None:
        patterns = [(p, root) for p in config.exclude]
    else:
        patterns = [(p, "") for p in DEFAULT_EXCLUDE]
    patterns += [(p, root) for p in config.extend_exclude] + [(p, cwd) for p in _split(extend_exclude)]
    return Exclusion.of(patterns, force if force is not None else config.force_exclude)


class _OneLineUsageError(click.ClickException):
    """Every usage error in offlint's one style: `offlint: error: what is wrong; see 'offlint CMD --help'`, exit 2
    (instead of click's Usage/Try/Error block)."""

    exit_code = 2

    def __init__(self, error: click.UsageError):
        text = " ".join(error.format_message().split()).rstrip(".")
        text = text.replace(". (Did you mean", " (did you mean").replace(". Did you mean", " (did you mean")
        if "(did you mean" in text and not text.endswith(")"):
            text += ")"
        if len(text) > 1 and text[0].isupper() and text[1].islower():
            text = text[0].lower() + text[1:]
        super().__init__(text)
        path = error.ctx.command_path if error.ctx is not None else "offlint"
        self.hint = f"see '{path} --help'"

    def show(self, file=None) -> None:
        click.echo(message("error", f"{printable(self.message)}; {self.hint}"), err=True)


class _Commands(click.Group):
    """`check` is defined here; the other commands are imported only when invoked (or listed by --help), so a
    pre-commit `offlint check` does not pay for importing bisect, replay and estimate (about 0.14 s)."""

    LAZY = {"replay": "offlint.replay.command:replay_command", "bisect": "offlint.bisect.command:bisect_command",
            "estimate": "offlint.estimate.command:estimate_command"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def invoke(self, ctx: click.Context):
        """Ctrl-C ends any command with exit code 130, as shells report SIGINT; click alone would print
        "Aborted!" and exit 1, which reads as "findings"."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("offlint: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:  # a subcommand's options: the one error style
            raise _OneLineUsageError(exc) from None

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:  # the group's own options, an unknown command
            raise _OneLineUsageError(exc) from None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            module, attribute = self.LAZY[name].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="offlint")
def main() -> None:
    """offlint: find incompatible or ineffective Megatron offload settings before anything is launched."""


@main.command("check")
@click.argument("paths", nargs=-1)
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated), e.g. OFL1.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Lowest severity that makes the exit code 1 (default: warning).")
@click.option("--strict", is_flag=True, default=None,
              help="Also report rules whose verdict depends on unknown values, as 'possible'.")
@click.option("--mcore-version", default=None, help="megatron-core version to check against, e.g. 0.16.1.")
@click.option("--output-format", type=click.Choice(FORMATS), default="concise", show_default=True)
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of each finding.")
@click.option("--stdin-filename", default=None, help="The file name to use for input read from '-'.")
@click.option("--validate", is_flag=True,
              help="Also build every fully known unit with the installed megatron-core (or OFFLINT_MCORE_SRC) and "
                   "report its own errors as OFL900.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the content-hash cache (in OFFLINT_CACHE_DIR, else ~/.cache/offlint).")
@click.option("--quiet", "-q", is_flag=True, help="Do not print the summary line.")
@fix_options
@click.option("--exclude", multiple=True, metavar="PATTERNS",
              help="Glob patterns (comma-separated) to leave out, replacing the default exclusions (.git, .venv, "
                   "build, ...), as ruff's --exclude; a pattern without '/' matches a name anywhere.")
@click.option("--extend-exclude", multiple=True, metavar="PATTERNS",
              help="Glob patterns to leave out in addition to the default or configured exclusions.")
@click.option("--force-exclude", is_flag=True, default=None,
              help="Apply the exclusions to paths named on the command line too (for pre-commit).")
@color_option
def check_command(paths, select, ignore, extend_select, fail_on, strict, mcore_version, output_format,
                  statistics, stdin_filename, validate, no_cache, quiet, exclude, extend_exclude,
                  force_exclude) -> None:
    """Lint recipes, YAML overrides and launch scripts (default: the current directory)."""
    try:
        config = load_config(Path.cwd())
    except ConfigError as exc:
        _fail(str(exc))
    if config.gpu is not None:  # an unknown one had been the default H100 in `check`, without a word
        try:
            parse_device(config.gpu)
        except DeviceError as exc:
            _fail(f"{config.path}: [tool.offlint] gpu: {exc}")
    paths = list(paths) or ["."]
    stdin = None
    if paths == ["-"]:
        if not stdin_filename:
            _fail("reading from '-' needs --stdin-filename NAME (it decides how the text is parsed)")
        stdin = (stdin_filename, _read_stdin(stdin_filename))
    elif "-" in paths:
        _fail("'-' (standard input) cannot be combined with other paths")
    elif stdin_filename:
        _fail("--stdin-filename names the text read from '-'; add '-' to read standard input, or drop "
              "--stdin-filename to check files")
    exclusion = _exclusion(config, exclude, extend_exclude, force_exclude)
    if stdin is None and exclusion.force and all(exclusion.covers(os.path.realpath(p), str(Path.cwd()))
                                                 for p in paths if os.path.exists(p)) \
            and all(os.path.exists(p) for p in paths):
        if not quiet:  # pre-commit named only excluded files: nothing to do is a pass here, not a mistake
            click.echo(f"No files to check: every path given is excluded ({plural(len(paths), 'path')}).",
                       err=True)
        sys.exit(0)
    if mcore_version:
        try:
            version = parse_version(mcore_version)
        except VersionError as exc:
            _fail(f"--mcore-version: {exc}")
        try:
            checked_as(version, "--mcore-version", explicit=True)
        except VersionError as exc:
            _fail(str(exc))
    options = CheckOptions(
        select=_split(select) or config.select, ignore=config.ignore + _split(ignore),
        extend_select=config.extend_select + _split(extend_select), per_file_ignores=config.per_file_ignores,
        strict=bool(strict) if strict is not None else config.strict, mcore_version=mcore_version,
        configured_version=config.mcore_version, root=config.root or Path.cwd(), validate=validate,
        cache=not no_cache, exclusion=exclusion,
    )
    human = output_format in ("concise", "full") and not quiet
    try:
        with terminal.Bar("Reading files", enabled=human) as bar:
            options.progress = bar.update
            if _CONSOLE:  # no collection pass over what the check built: the process ends next (run())
                gc.disable()
            result = fixing().run(paths, options, stdin) if fixing().asked else check(paths, options, stdin=stdin)
    except (ValueError, VersionError, RuleFileError) as exc:
        _fail(str(exc))
    rules = load_rules()
    if statistics:
        sys.stdout.write(render_statistics(result.findings, rules))
    else:
        _write_out(render(output_format, result.findings, rules, result.sources,
                          color=human and terminal.color_for(sys.stdout)), output_format in _DOCUMENTS)
    for error in result.errors:
        click.echo(message("error", printable(str(error))), err=True)
    for note in result.notes if not quiet else ():
        click.echo(message("note", printable(note)), err=True)
    # A gate that read nothing must not pass: ruff only warns here (exit 0), but a CI gate pointed at the wrong
    # path would then stay green for ever. It is an error (exit 2, like a missing path), not findings (1).
    nothing = result.files_checked == 0 and not result.errors
    if nothing:
        kinds = ", ".join(sorted(EXTENSIONS))
        click.echo(message("error", f"{printable(' '.join(paths) if stdin is None else stdin[0])}: no file offlint "
                   f"reads ({kinds}, or a script with a shell #! line) is there, so nothing was checked; name the "
                   f"files or directories that hold recipes, overrides and launch scripts"), err=True)
    if result.version.note and not quiet:
        click.echo(message("warning", printable(result.version.note)), err=True)
    severity = Severity(fail_on or config.fail_on or "warning")
    if not quiet and output_format in ("concise", "full"):
        count = len(result.findings)
        summary = f"Found {plural(count, 'finding')}" if count else \
            ("No findings" if result.errors else "All checks passed!")
        if nothing:
            summary = "Nothing checked"
        if result.errors:
            summary += f", {plural(len(result.errors), 'file')} not checked"
        summary = fixing().summary(summary, count)
        requested = f" (for {result.version.requested})" if result.version.requested else ""
        click.echo(f"{summary} ({plural(result.files_checked, 'file')}, {plural(result.units, 'unit')}, megatron-core "
                   f"{result.version.version}{requested} from {result.version.origin}).", err=True)
    fixing().finish(result.findings, rules, quiet or output_format not in ("concise", "full"))
    global _CHECK_DONE
    _CHECK_DONE = _CONSOLE
    sys.exit(2 if nothing else exit_code(result, severity))


@main.command("rule")
@click.argument("code")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
@color_option
def rule_command(code: str, output_format: str) -> None:
    """Explain one rule: what it checks, why, the megatron-core error it mirrors, and how to fix it."""
    rules = load_rules()
    rule = rules.get(code.upper())
    if rule is None:
        _fail(f"unknown rule code `{code}` (see `offlint rules`)")
    if output_format == "json":
        click.echo(json.dumps({
            "code": rule.code, "slug": rule.slug, "severity": rule.severity.value, "versions": rule.versions,
            "summary": rule.summary, "explanation": rule.explanation, "fix": rule.fix, "keys": list(rule.keys),
            "mirrors": list(rule.mirrors), "url": rule.url,
            "cites": [{"id": cited, "url": citations.url(cited)} for cited in citations.cited_ids(rule)],
            "autofix": [{"title": f.title, "applicability": f.applicability, "action": f.action,
                         "description": f.describe()}
                        for f in (*rule.autofix, *(f for c in rule.checks for f in c.autofix))],
        }, indent=2))
        return
    lines = [f"# {rule.code} {rule.slug} ({rule.severity.value}; megatron-core {rule.versions})", "",
             rule.summary, ""]
    if rule.explanation:
        lines += [rule.explanation, ""]
    for mirror in rule.mirrors:
        lines.append(f"Mirrors {mirror.get('id', '')}: {mirror.get('error', '')}".rstrip())
    if rule.mirrors:
        lines.append("")
    cited = citations.cited_ids(rule)  # internal ids (AO-2, F-9): each a link a user can open
    if cited:
        lines += [f"Cited megatron-core checks ({citations.CHECKS_DOC}):",
                  *(f"  {c}: {citations.url(c)}" for c in cited), ""]
    if rule.fix:
        lines += [f"Fix: {rule.fix}", ""]
    autofixes = [*rule.autofix, *(f for check in rule.checks for f in check.autofix)]
    if autofixes:
        lines += ["Autofix (`offlint check --fix`; unsafe ones with `--unsafe-fixes`):",
                  *(f"    {f.describe()}" for f in autofixes), ""]
    for example in rule.examples:
        kind = "valid" if example.valid else "invalid"
        lines += [f"Example ({example.form}, {kind}):", *("    " + line for line in example.code.splitlines()), ""]
        for path, text in example.files:
            lines += [f"  beside it, {path}:", *("    " + line for line in text.splitlines()), ""]
    click.echo("\n".join(lines).rstrip())


@main.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
@color_option
def rules_command(output_format: str) -> None:
    """List every rule with its code, slug, severity and summary."""
    rules = load_rules()
    if output_format == "json":
        click.echo(json.dumps([{"code": r.code, "slug": r.slug, "severity": r.severity.value,
                                "summary": r.summary} for r in rules.values()], indent=2))
        return
    for rule in rules.values():
        code = terminal.style(rule.code, **terminal.SEVERITY_STYLE[rule.severity.value])
        severity = terminal.style(f"{rule.severity.value:<8}", fg=terminal.SEVERITY_STYLE[rule.severity.value]["fg"])
        click.echo(f"{code}  {rule.slug:<44} {severity} {rule.summary}", color=terminal.color_for(sys.stdout))


_CONSOLE = False  # running as the `offlint` command (run()), not inside another program (click's CliRunner, tests)
_CHECK_DONE = False  # the `offlint` command's check has written its report and every file: the process may end now


_DOCUMENTS = frozenset({"json", "sarif", "junit"})  # output formats a program reads, defined as UTF-8


def _write_out(text: str, document: bool) -> None:
    """A document (JSON, SARIF, JUnit XML) is written as UTF-8 whatever the locale's encoding, as its format
    defines it; other text in the locale's, a character it lacks as an escape (run() sets that up). With
    PYTHONIOENCODING=ascii, or a Windows console, a finding in `récipé.py` had ended in a UnicodeEncodeError."""
    target = getattr(sys.stdout, "buffer", None) if document else None
    if target is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    target.write(text.encode("utf-8", "backslashreplace"))


def _end_at_once(code: object) -> None:
    """End the process without the interpreter's teardown, which frees one by one every object a check built (0.18-
    0.28 s after a cold check of Megatron Bridge, whose parent holds 235 MiB) and runs no handler a finished check
    needs: its files are written and closed, its worker pool is shut down. mypy ends the same way (`hard_exit`).
    Output that cannot be flushed (a closed pipe) is left to the ordinary exit, which reports it as it always has."""
    if code is not None and type(code) is not int:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError as exc:
        if exc.errno in _WRITE_ERRORS:
            _write_failed(exc)
        return
    except ValueError:
        return
    os._exit(code or 0)


# Output that cannot be written for want of room or of a working device (a full disk, /dev/full, a quota)
_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _write_failed(exc: OSError) -> None:
    """One line and exit code 2 for output that cannot be written, not an internal error. Standard output is then
    pointed at /dev/null: what is left in its buffer is dropped, where the interpreter's exit would try to write it
    again and print a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    where = exc.filename or "standard output"
    click.echo(f"offlint: error: {where}: cannot write it ({exc.strerror or exc}); free some space or write "
               f"elsewhere", err=True)
    sys.exit(2)


def run() -> None:
    """Console entry point: any unexpected exception becomes a one-line message and exit code 2."""
    global _CONSOLE
    _CONSOLE = True
    # Python's own warnings about the code offlint reads are not offlint's to show: `ast.parse` of a linted file
    # with an invalid escape sequence ("\." in a regex string) printed a SyntaxWarning per place on 3.12+ (33 lines
    # on Pai-Megatron-Patch); 3.11 gives a DeprecationWarning, shown where PYTHONWARNINGS asks for them.
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    warnings.filterwarnings("ignore", message="invalid escape sequence", category=DeprecationWarning)
    if sys.stdout is None:  # (started with its standard output closed: `offlint check . >&-`)
        if sys.stderr is not None:
            sys.stderr.write("offlint: error: standard output is closed; send it to a file, a pipe or /dev/null\n")
        sys.exit(2)
    with contextlib.suppress(AttributeError, ValueError):  # (a character the output's encoding lacks: see _write_out)
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        os.getcwd()
    except OSError:  # (its folder was removed under the shell: every relative path would fail, as an internal error)
        click.echo("offlint: error: the current directory no longer exists; cd into the project again", err=True)
        sys.exit(2)
    try:
        main(standalone_mode=True, prog_name="offlint")  # `python -m offlint` too: hints name `offlint`
    except SystemExit as exc:
        # A check builds millions of objects with the cyclic collector off (workers.cyclic_gc_paused); the
        # collection that re-enabling it, or the interpreter's exit, runs over them took 2.7 s on Megatron Bridge
        # in a single-process check (a pre-commit run) and frees nothing the exiting process needs.
        gc.freeze()
        if _CHECK_DONE:
            _end_at_once(exc.code)
        raise
    except KeyboardInterrupt:
        click.echo("offlint: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # pragma: no cover - a bug; never show a traceback to a user
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRORS:
            _write_failed(exc)  # (not a bug: the disk is full)
        click.echo(f"offlint: internal error: {type(exc).__name__}: {exc} (please report it)", err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    run()
