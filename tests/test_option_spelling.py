"""One name, one unit and one default per concept across `offlint check/estimate/replay/bisect/rule/rules`.

The table maps each concept that several subcommands share to its one allowed spelling and the spellings it must
not take. The walk reads every subcommand's click parameters (visible ones: hidden ones are the deprecated aliases
kept for one release, which must each print a note and be hidden) and fails on a forbidden spelling, on one name
with two meanings (different types, units or defaults), and on a shared concept missing from a command that has it.
"""

from __future__ import annotations

import click
import pytest

from offlint.cli import main
from offlint.options import Size

# concept -> (the one spelling, spellings it must not take anywhere)
CONCEPTS = {
    "output format": ("--output-format", {"--format", "-f", "--fmt", "--output"}),
    "megatron-core version": ("--mcore-version", {"--megatron-core-version", "--mcore", "--core-version",
                                                  "--megatron-version"}),
    "total GPU count": ("--gpus", {"--num-gpus", "--gpu-count", "--ngpus", "--world-size", "--nproc"}),
    "GPU device ids": ("--gpu-ids", {"--devices", "--device-ids", "--cuda-visible-devices", "--gpu-list"}),
    "training iterations": ("--iters", {"--iterations", "--steps", "--train-iters", "--num-iters", "--max-steps"}),
    "configuration file": ("CONFIG", {"--config", "--config-file", "--recipe-file", "--file"}),
    "colour": ("--color", {"--colour", "--colors", "--no-color"}),
    "recipe in a file": ("--recipe", {"--unit", "--recipe-name", "--function"}),
    "override": ("--override", {"--overrides", "--set", "--override-key"}),
    "run time limit": ("--timeout", {"--time-limit", "--timeout-s", "--max-time"}),
}
# Which commands take each shared concept (so a command cannot quietly drop one).
EXPECTED = {
    "--mcore-version": {"check", "estimate", "replay", "bisect"},
    "--output-format": {"check", "estimate", "rule", "rules"},
    "--iters": {"replay", "bisect"},
    "--color": {"check", "estimate", "replay", "bisect", "rule", "rules"},
    "CONFIG": {"estimate", "replay", "bisect"},
}
SIZES = {"--gpu-memory", "--memory-budget"}  # memory sizes: one type (80GiB, 500MB; a plain number is GiB)


def commands(group: click.Group = main) -> dict[str, click.Command]:
    ctx = click.Context(group)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


def spellings(param: click.Parameter) -> list[str]:
    if isinstance(param, click.Argument):
        return [param.human_readable_name]
    return [*param.opts, *param.secondary_opts]


# Concepts whose default is part of their meaning: `--iters` ran 20 in replay and 10 in bisect. Others keep a
# per-command default on purpose (`--timeout`: 1800 s for a replay run, 600 s for a bisect probe; `--output-format`:
# each command's own human format), but never another type or unit.
SAME_DEFAULT = {"--iters", "--gpus", "--mcore-version", "--color", "--gpu-memory", "--memory-budget", "--gpu-ids"}


def _meaning(param: click.Parameter, spelling: str) -> tuple:
    kind = param.type
    default = param.default if spelling in SAME_DEFAULT else "(per command)"
    return type(kind).__name__, default, getattr(param, "multiple", False), getattr(param, "is_flag", False)


def spelling_problems(by_name: dict[str, click.Command]) -> list[str]:
    problems = []
    forbidden = {spelling: (concept, allowed) for concept, (allowed, others) in CONCEPTS.items() for spelling in others}
    meanings: dict[str, tuple[str, tuple]] = {}
    for name, command in sorted(by_name.items()):
        for param in command.params:
            if getattr(param, "hidden", False):
                if not (param.name or "").startswith("_alias_") or param.expose_value:
                    problems.append(f"{name}: hidden {spellings(param)} is not a deprecated alias")
                continue
            for spelling in spellings(param):
                if spelling in forbidden:
                    concept, allowed = forbidden[spelling]
                    problems.append(f"{name}: {spelling} spells '{concept}', which is {allowed} everywhere")
                meaning = _meaning(param, spelling)
                seen = meanings.setdefault(spelling, (name, meaning))
                if seen[1] != meaning:
                    problems.append(f"{spelling} means {meaning} in {name} but {seen[1]} in {seen[0]}")
                if spelling in SIZES and not isinstance(param.type, Size):
                    problems.append(f"{name}: {spelling} is a memory size but not of the Size type")
    for spelling, expected in EXPECTED.items():
        having = {name for name, command in by_name.items()
                  if any(spelling in spellings(p) for p in command.params if not getattr(p, "hidden", False))}
        for missing in sorted(expected - having):
            if missing in by_name:
                problems.append(f"{missing}: has no {spelling}, which {', '.join(sorted(having))} have")
    return problems


def test_every_concept_is_spelled_one_way_across_the_subcommands():
    by_name = commands()
    assert {"check", "estimate", "replay", "bisect", "rule", "rules"} <= set(by_name)
    assert spelling_problems(by_name) == []


def test_the_walk_catches_a_concept_spelled_two_ways():
    """The checker itself: a planted command with the old spellings and a second meaning of --gpus fails."""
    @click.command("planted")
    @click.option("--format", type=click.Choice(["text", "json"]))
    @click.option("--gpus", default=None, help="device ids")
    @click.option("--iters", default=10, type=click.IntRange(1))
    @click.option("--memory-budget", type=click.IntRange(1))
    def planted(**_):
        pass

    problems = spelling_problems({**commands(), "planted": planted})
    assert any("--format spells 'output format'" in p for p in problems)
    assert any(p.startswith("--gpus means") for p in problems)  # a count elsewhere, a text of ids here
    assert any(p.startswith("--iters means") for p in problems)  # default 10 against 20
    assert any("--memory-budget is a memory size" in p for p in problems)


@pytest.mark.parametrize("command, old, new", [
    ("estimate", "--format", "--output-format"), ("bisect", "--gpus", "--gpu-ids"), ("bisect", "--config", "CONFIG"),
])
def test_old_spellings_are_hidden_aliases(command, old, new):
    params = commands()[command].params
    (alias,) = [p for p in params if old in getattr(p, "opts", ())]
    assert alias.hidden and not alias.expose_value
    assert any(new in spellings(p) for p in params if not getattr(p, "hidden", False))
