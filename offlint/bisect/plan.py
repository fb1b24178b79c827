"""Saved bisect plans: a YAML file whose keys are `offlint bisect`'s own option names (`probe: validate`,
`bad-on: pass`, `override: [...]`), read as if they had been typed, so a bisect worth running once can be run
again (nightly, or after the next regression) with `offlint bisect --plan bisect/NAME.yaml --bad REV`.

The allowed keys are derived from the click command's options, so a renamed or added option is a plan key at
once, and a plan naming the old spelling fails with the closest current one. Values are checked against the
option's own click type (ranges, choices) before anything runs; every problem is one line naming the file.
Command-line flags win: the plan becomes click's `default_map`, which fills only what was not typed.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import click
import yaml

# A plan's own key besides the options: what it finds, for the person who runs it next.
DESCRIPTION = "description"
PLAN_OPTION = "plan"


class PlanError(ValueError):
    """A plan that cannot be used; the message is one line naming the file."""


def plan_keys(command: click.Command) -> dict[str, click.Option]:
    """Plan key (the option's long name without dashes, an argument's name: `config`) -> its click parameter, for
    every visible option and every argument."""
    keys: dict[str, click.Option] = {}
    for param in command.params:
        if isinstance(param, click.Argument):
            keys[param.name] = param
            continue
        if not isinstance(param, click.Option) or param.hidden or param.name in (PLAN_OPTION, "help"):
            continue
        longs = [opt for opt in param.opts if opt.startswith("--")]
        if longs:
            keys[longs[0][2:]] = param
    return keys


def load_plan(path: str | Path, command: click.Command, ctx: click.Context) -> dict[str, Any]:
    """The plan's values by click parameter name, converted and validated; PlanError otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan; plans are YAML files such as bisect/NAME.yaml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{path}{where}: not valid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a plan is a mapping of option names to values (probe: lint, ...), "
                        f"not a {type(data).__name__}")
    keys = plan_keys(command)
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == DESCRIPTION:
            if not isinstance(value, str):
                raise PlanError(f"{path}: description must be text")
            continue
        if not isinstance(key, str) or key not in keys:
            near = difflib.get_close_matches(str(key), [*keys, DESCRIPTION], n=1)
            hint = f"; did you mean '{near[0]}'?" if near else f"; the keys are the options of offlint bisect"
            raise PlanError(f"{path}: unknown key '{key}'{hint}")
        param = keys[key]
        values[param.name] = _convert(path, key, param, value, ctx)
    return values


def _convert(path: Path, key: str, param: click.Option, value: Any, ctx: click.Context) -> Any:
    """The value as the option would hold it after the command line; YAML types are checked first, so that
    `good: 0123` (an octal number in YAML) or `time: 1:30:00` (sexagesimal) is an error, not a silent number."""
    def wrong(expected: str) -> PlanError:
        return PlanError(f"{path}: {key}: expected {expected}, not {_shown(value)}")

    if getattr(param, "is_flag", False) and not param._flag_needs_value:
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if getattr(param, "_flag_needs_value", False) and value is True:  # an option whose value is optional: `key: true` is the bare flag
        return param.flag_value
    if param.multiple:
        items = value if isinstance(value, list) else [value]
        return tuple(_scalar(path, key, param, item, ctx, wrong) for item in items)
    return _scalar(path, key, param, value, ctx, wrong)


def _scalar(path: Path, key: str, param: click.Option, value: Any, ctx: click.Context, wrong) -> Any:
    kind = param.type
    if isinstance(value, (list, dict)) or value is None:
        raise wrong(_describe(kind))
    if isinstance(kind, click.types.IntParamType) and (isinstance(value, bool) or not isinstance(value, int)):
        raise wrong(_describe(kind))
    if isinstance(kind, click.types.FloatParamType) and (isinstance(value, bool)
                                                          or not isinstance(value, (int, float))):
        raise wrong(_describe(kind))
    if isinstance(kind, (click.types.StringParamType, click.Choice, click.Path)) and not isinstance(value, str):
        raise wrong(_describe(kind) + " (quote it)")
    try:
        return kind.convert(value, param, ctx)
    except click.BadParameter as exc:
        raise PlanError(f"{path}: {key}: {exc.message}") from None


def _describe(kind: click.ParamType) -> str:
    if isinstance(kind, click.Choice):
        return "one of " + ", ".join(map(str, kind.choices))
    if isinstance(kind, click.types.IntParamType):
        return "an integer"
    if isinstance(kind, click.types.FloatParamType):
        return "a number"
    return "text"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "an empty value"
    if isinstance(value, (list, dict)):
        return f"a {'list' if isinstance(value, list) else 'mapping'}"
    return repr(value)


def plan_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--plan FILE` (eager): its values become the defaults of the options not given on the command line."""
    if value is None or ctx.resilient_parsing:
        return value
    try:
        values = load_plan(value, ctx.command, ctx)
    except PlanError as exc:
        click.echo(f"offlint: error: {exc}", err=True)
        ctx.exit(2)
    ctx.default_map = {**(ctx.default_map or {}), **values}
    return value
