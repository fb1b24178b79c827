"""Shell launch scripts (`.sh` and extension-less scripts): every training launch command becomes a unit.

`shell_parse` does the shell work (tree-sitter-bash: arrays, continuations, `${VAR:-default}`, exports,
`bash -c` payloads); this module only turns its commands into launch units.
"""

from __future__ import annotations

from offlint.sources.launch import Arg, EnvArg, command_unit
from offlint.sources.shell_parse import Command, parse_shell
from offlint.types import Location, Unit


class ShellError(ValueError):
    pass


def read_shell(path: str, text: str, line_offset: int = 0, env_known: bool = True,
               needs_arguments: bool = False) -> list[Unit]:
    script = parse_shell(text)
    if script.errors and not script.commands:
        raise ShellError(f"cannot parse shell script: {script.errors[0]}")
    units = []
    for command in script.commands:
        unit = command_unit(*_convert(path, command, line_offset), env_known=env_known,
                            needs_arguments=needs_arguments)
        if unit is not None:
            units.append(unit)
    return units


def _convert(path: str, command: Command, line_offset: int):
    argv = [Arg(w.value, Location(path, w.line + line_offset, w.col), w.text, w.unknown, w.conditional)
            for w in command.argv]
    env = {name: EnvArg(name, s.value, Location(path, s.line + line_offset, s.col), s.unknown)
           for name, s in command.env.items()}
    return argv, env, Location(path, command.line + line_offset, command.col)
