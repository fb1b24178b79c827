"""Shell launch scripts (`.sh` and extension-less scripts): every training launch command becomes a unit.

`shell_parse` does the shell work (tree-sitter-bash: arrays, continuations, `${VAR:-default}`, exports,
`bash -c` payloads); this module only turns its commands into launch units.
"""

from __future__ import annotations

from offlint import loop_passes
from offlint.sources.launch import command_unit, runs_script
from offlint.sources.launch_env import default_hostfiles
from offlint.sources.launch_words import Arg, EnvArg
from offlint.sources.shell_parse import parse_shell
from offlint.sources.shell_values import Command
from offlint.sources.shell_words import unbraced_subscripts
from offlint.types import InputError, Location, Unit


class ShellError(InputError):
    pass


def read_shell(path: str, text: str, line_offset: int = 0, env_known: bool = True,
               needs_arguments: bool = False, complete: bool = True, project=None) -> list[Unit]:
    """Launch units of a script. `complete`: a script offlint could not read in full is an error (the commands it
    missed would otherwise pass unseen); a command string in YAML, which may be prose, is read as far as it
    goes."""
    # a YAML command string is no script file: no $0
    script = parse_shell(text, path if complete else None, where=(path, line_offset),
                         read_file=project.text if project is not None else None, printing=not complete)
    if script.errors and (complete or not script.commands):
        more = f" (and {len(script.errors) - 1} more)" if len(script.errors) > 1 else ""
        raise ShellError(f"cannot parse shell script: {script.errors[0]}{more}; `bash -n {path}` tells whether bash "
                         f"accepts it (a template bash rejects too, such as `<PATH>` placeholders, can be left out "
                         f"with --extend-exclude or [tool.offlint] extend-exclude)")
    # (zsh's `$ARGS[@]` is the whole array)
    zsh = path.endswith(".zsh") or text.startswith("#!") and "zsh" in text.split("\n", 1)[0]
    crlf = text.find("\r\n") if complete else -1  # (a script file's line endings; a YAML string has none of its own)
    crlf_line = text.count("\n", 0, crlf) + 1 + line_offset if crlf >= 0 else 0
    units = []
    spans = tuple(((start[0] + line_offset, start[1]), (end[0] + line_offset, end[1]))
                  for start, end in script.assignments)
    hosts = default_hostfiles(text)  # (its deepspeed or mpirun launches without hosts may run on those hosts)
    for command in script.commands:
        if command.calls_function or command.runs_called_script or \
                not runs_script([_value(w) for w in command.argv], needs_arguments):
            continue  # (command_unit would give None; a function's body gives the commands it runs)
        unit = command_unit(*_convert(path, command, line_offset), env_known=env_known,
                            needs_arguments=needs_arguments, project=project, inside=command.inside,
                            env_open=command.env_open, image=command.image, default_hostfiles=hosts)
        if unit is not None:
            unit.path_condition = path_condition(command.assumes)
            unit.loop_passes = command.passes
            if command.written_at is not None:
                unit.written_at = Location(*command.written_at)
            unit.name = loop_passes.named(unit.name, command.passes)
            unit.assignment_spans = spans
            unit.crlf_line = crlf_line
            if not zsh:
                unit.unbraced = tuple((written, Location(path, w.line + line_offset, w.col), w.value or "")
                                      for w in command.argv for written in unbraced_subscripts(w.text))
            units.append(unit)
    return units


def path_condition(assumes: tuple[str, ...], shown: int = 3) -> str:
    """The decisions a command's path took from defaults, for its findings' "(on the path where ...)"."""
    if len(assumes) <= shown:
        return " and ".join(assumes)
    rest = len(assumes) - shown
    return " and ".join(assumes[:shown]) + f" (and {rest} more branch{'es' if rest > 1 else ''} decided the same way)"


def _convert(path: str, command: Command, line_offset: int):
    argv = [Arg(_value(w), Location(path, w.line + line_offset, w.col), w.text, w.unknown, w.conditional, w.flags,
                w.assumed, w.alternative) for w in command.argv]
    env = {name: EnvArg(name, s.value, Location(path, s.line + line_offset, s.col), s.unknown)
           for name, s in command.env.items()}
    return argv, env, Location(path, command.line + line_offset, command.col)


def _value(word) -> str | None:
    """A word's value; for a Python script whose directory is unknown (`python3 $MEGATRON_LM_DIR/pretrain_gpt.py`,
    the directory from the environment or `/scratch/$USER/...`), its file name: the launch runs that script,
    wherever it lies (a Megatron-LM fork's own launchers had given no unit at all). Not an override's value
    (verl's `custom_reward_function.path="$PROJECT_DIR/.../reward.py"`), which names no script the command runs."""
    if word.value is None and word.name.endswith(".py") and "=" not in word.text.partition("$")[0]:
        return word.name
    return word.value
