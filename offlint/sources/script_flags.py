"""A launch of the tree's own training script, which reads its flags with its own parser and builds a Megatron Bridge
recipe from them: the launch runs that script's configuration with the flags it gives.

`torchrun pretrain_qwen3_vl_8b.py --tensor-model-parallel-size 1 --seq-length 8192 ...` (okoge-kaz's Megatron
Bridge launchers) looks like a Megatron-LM command line, and had been read as one: Megatron-LM's argparse defaults
for everything it does not give, where the script runs `qwen3_vl_8b_pretrain_config(...)` with its own. The script
is read as a unit of its own, whose values from `args.X` are the user's input (python_inputs.UserInput, naming the
flag). Here each such value is what this launch gives that flag, as the script's `add_argument` declares it
(its type, a switch's `store_true`/`store_false`, argparse's abbreviations of a long option), or the declared
default where the launch gives none; unknown where a word offlint cannot read may give it, or the value is not a
literal. Values the script computes from its flags stay unknown.
"""

from __future__ import annotations

import ast

from offlint.sources.python_inputs import NOT_LITERAL, ParserOption, parser_options
from offlint.types import Assignment, Layer, Location, Unit, Unknown, UserInput


def options(text: str | None) -> dict[str, ParserOption]:
    """The options the script's own parser declares (none where its text cannot be parsed)."""
    try:
        return parser_options(ast.parse(text)) if text else {}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}


def script_unit(units: list[Unit]) -> Unit | None:
    """The unit of a script's file that reads its command line (a value from `args.X`); None where none, or where
    several do (which one a launch runs is not known)."""
    reading = [unit for unit in units if any(isinstance(a.value, UserInput) and a.value.flags
                                             for a in unit.all_assignments())]
    return reading[0] if len(reading) == 1 else None


def bind(unit: Unit, script: Unit, parser: dict[str, ParserOption], path: str) -> bool:
    """Make the launch `unit` run `script`'s configuration (the unit of the tree's file `path`) with its flags. False
    (the launch unchanged) where the script's flags are not all declared by `parser`."""
    bound: list[Assignment] = []
    for a in script.all_assignments():
        value = a.value
        if isinstance(value, UserInput) and value.flags:
            found = [parser.get(option) for option in value.flags[0].split("/")]
            if not found or any(option is None for option in found) or len({o.dest for o in found}) != 1:
                return False
            given, where, text = _flag_value(found[0].dest, parser, unit.script_args)
            a = Assignment(a.key, given, where or a.location, a.source, text or a.text, a.via)
        bound.append(a)
    launch_layers = [layer for layer in unit.layers if layer.name != "command line"]
    unit.layers = [Layer(f"{path} with this launch's flags", bound, inherited=True), *launch_layers]
    unit.defaults, unit.framework = script.defaults, script.framework
    unit.unread_flags, unit.opaque_words, unit.path_flags = (), (), ()
    return True


def _flag_value(dest: str, parser: dict[str, ParserOption],
                args: tuple[tuple[str | None, Location, tuple[str, ...] | None], ...]
                ) -> tuple[object, Location | None, str]:
    """(the value argparse gives `dest` for these words, where the launch gives it, its text)."""
    mine = {option for option, declared in parser.items() if declared.dest == dest}
    value: object = _missing
    where: Location | None = None
    text = ""
    opaque = ""
    i = 0
    while i < len(args):
        word, location, flags = args[i]
        i += 1
        if word is None:  # (what it gives counts from here on, unless the flag follows it)
            if flags is None or mine & set(flags):
                opaque = f"a word of the launch offlint cannot read may give {'/'.join(sorted(mine))}"
            continue
        if word == "--":
            break
        name, equals, inline = word.partition("=")
        option = _option(name, parser)
        if option not in mine:
            continue
        declared = parser[option]
        where, text, opaque = location, word, ""
        if declared.action == "store_true":
            value = True
        elif declared.action == "store_false":
            value = False
        elif declared.action != "store":
            value = Unknown(f"{option} is read with an argparse action offlint does not evaluate")
        elif equals:
            value = _typed(inline, declared)
        elif i < len(args):
            given = args[i][0]
            i += 1
            value = _typed(given, declared) if given is not None else \
                Unknown(f"the value the launch gives {option} cannot be read")
            text = f"{word} {given}" if given is not None else word
        else:
            value = Unknown(f"{option} is given no value (argparse refuses the command line)")
    if opaque:
        return Unknown(opaque), None, ""
    if value is not _missing:
        return value, where, text
    declared = parser[min(mine)]  # (every option of the dest carries its default: python_inputs.parser_options)
    if declared.default is NOT_LITERAL:
        return Unknown(f"the default of {'/'.join(sorted(mine))} is not a literal"), None, ""
    return (_typed(declared.default, declared) if isinstance(declared.default, str) else declared.default), None, ""


_missing = object()


def _option(name: str, parser: dict[str, ParserOption]) -> str:
    """The declared option a word names: itself, or the one long option it abbreviates (argparse's allow_abbrev)."""
    if name in parser or not name.startswith("--"):
        return name
    matches = [option for option in parser if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def _typed(text: str, declared: ParserOption) -> object:
    """The value argparse makes of `text` with the option's type."""
    if declared.type == "str":
        return text
    if declared.type in ("int", "float"):
        try:
            return int(text) if declared.type == "int" else float(text)
        except ValueError:
            return Unknown(f"argparse refuses {text!r} as {declared.type}")
    return Unknown(f"`{text}` goes through a type function of the script's (not evaluated)")
