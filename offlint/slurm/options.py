"""Slurm options: from the command line, over `[tool.offlint.slurm]` in pyproject.toml.

The same keys in both places (`--gpus-per-node 8` and `gpus-per-node = 8`), so a team can put its
partition, account and container image in the repository once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import click

# "torchrun": one torchrun per node (the step's argv is the per-rank program); "srun": one srun task per GPU;
# "program": one task per node and the step's program starts its own ranks (e.g. `offlint replay` on one node).
RANKS = ("torchrun", "srun", "program")
# A replay that names no --nodes is spread over nodes of this many GPUs (the common 8-GPU server).
DEFAULT_GPUS_PER_NODE = 8
KEYS = ("partition", "account", "nodes", "gpus-per-node", "time", "slurm-args", "task-per-gpu", "workdir")


class SlurmOptionsError(ValueError):
    """A bad Slurm option; the message is one line naming where it came from."""


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    nodes: int | None = None  # None: 1, or for a replay derived from its GPUs and the per-node count
    gpus_per_node: int | None = None  # None: the step's own `gpus` (a replay: DEFAULT_GPUS_PER_NODE per node)
    time_min: int | None = None  # None: the step's timeout, rounded up to whole minutes
    slurm_args: tuple[str, ...] = ()  # placed on the srun line (pyxis --container-image, ...)
    ranks: str = "torchrun"  # who starts one process per GPU: see RANKS
    workdir: Path | None = None  # shared storage for scripts, logs, worktrees, results


def parse_time(value: Any, where: str) -> int:
    """Minutes, rounded up: `30`, `"90"`, `"1:30:00"` (H:MM:SS), `"2-00:00:00"`, `"45:30"` (MM:SS)."""
    if isinstance(value, bool):
        raise SlurmOptionsError(f"{where}: time must be minutes or [D-]HH:MM:SS, not {value!r}")
    if isinstance(value, int):
        minutes = value
    else:
        text = str(value).strip()
        days, dash, clock = text.rpartition("-")
        parts = clock.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) > 3 or (dash and not days.isdigit()):
            raise SlurmOptionsError(f"{where}: time must be minutes or [D-]HH:MM:SS, not {text!r}")
        numbers = [int(p) for p in parts]
        if len(parts) == 1:
            seconds = numbers[0] * 60
        elif len(parts) == 2:  # Slurm reads MM:SS
            seconds = numbers[0] * 60 + numbers[1]
        else:
            seconds = numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
        minutes = math.ceil((seconds + int(days or 0) * 86400) / 60)
    if minutes < 1:
        raise SlurmOptionsError(f"{where}: time must be at least 1 minute")
    return minutes


def _positive(value: Any, name: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SlurmOptionsError(f"{where}: {name} must be an integer >= {minimum}, not {value!r}")
    return value


def build_options(cli: Mapping[str, Any], table: Mapping[str, Any] | None = None,
                  table_path: Path | None = None) -> SlurmOptions:
    """Merge command-line values (None: not given) over the `[tool.offlint.slurm]` table and validate."""
    table = dict(table or {})
    where_table = f"{table_path}: [tool.offlint.slurm]" if table_path else "[tool.offlint.slurm]"
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise SlurmOptionsError(f"{where_table}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    merged: dict[str, tuple[Any, str]] = {k: (v, where_table) for k, v in table.items()}
    for key in KEYS:
        value = cli.get(key.replace("-", "_"))
        if value is not None and value != () and value is not False:
            merged[key] = (value, f"--{key.removesuffix('s') if key == 'slurm-args' else key}")
    options: dict[str, Any] = {}
    for key in ("partition", "account"):
        if key in merged:
            value, where = merged[key]
            if not isinstance(value, str) or not value.strip():
                raise SlurmOptionsError(f"{where}: {key} must be a non-empty string")
            options[key] = value.strip()
    if "nodes" in merged:
        options["nodes"] = _positive(merged["nodes"][0], "nodes", merged["nodes"][1])
    if "gpus-per-node" in merged:
        value, where = merged["gpus-per-node"]
        options["gpus_per_node"] = _positive(value, "gpus-per-node", where, minimum=0)
    if "time" in merged:
        options["time_min"] = parse_time(*merged["time"])
    if "slurm-args" in merged:
        value, where = merged["slurm-args"]
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise SlurmOptionsError(f"{where}: slurm-args must be a list of strings, "
                                    "e.g. [\"--container-image=nvcr.io/nvidia/pytorch:25.01-py3\"]")
        options["slurm_args"] = tuple(value)
    if "task-per-gpu" in merged:
        value, where = merged["task-per-gpu"]
        if not isinstance(value, bool):
            raise SlurmOptionsError(f"{where}: task-per-gpu must be true or false")
        options["ranks"] = "srun" if value else "torchrun"
    if "workdir" in merged:
        value, where = merged["workdir"]
        base = table_path.parent if table_path and where == where_table else Path.cwd()
        options["workdir"] = (base / Path(str(value)).expanduser()).resolve()
    return SlurmOptions(**options)


def given_options(cli: Mapping[str, Any]) -> list[str]:
    """The Slurm options given on the command line, as the user spelled them (to refuse them without Slurm)."""
    return [f"--{key.removesuffix('s') if key == 'slurm-args' else key}" for key in KEYS
            if cli.get(key.replace("-", "_")) not in (None, (), False)]


def default_workdir(repo: Path) -> Path:
    """Under the repository's `.offlint/` (git-ignored state), never in the tracked tree."""
    return repo.resolve() / ".offlint" / "slurm"


def slurm_click_options(command: Callable) -> Callable:
    """The Slurm options of every command that can run steps on Slurm (`--launcher slurm`)."""
    decorators = [
        click.option("--partition", default=None, help="Slurm partition (sbatch --partition)."),
        click.option("--account", default=None, help="Slurm account (sbatch --account)."),
        click.option("--nodes", type=int, default=None,
                     help="Nodes per job (default: replay: its GPUs / --gpus-per-node, rounded up; bisect: 1)."),
        click.option("--gpus-per-node", type=int, default=None,
                     help=f"GPUs per node (default: replay: up to {DEFAULT_GPUS_PER_NODE}; bisect: the step's)."),
        click.option("--time", default=None,
                     help="Job time limit: minutes or [D-]HH:MM:SS, rounded up to minutes "
                          "(default: the step timeout)."),
        click.option("--slurm-arg", "slurm_args", multiple=True,
                     help="Extra srun argument, repeatable (e.g. --slurm-arg=--container-image=IMAGE)."),
        click.option("--task-per-gpu", is_flag=True, default=None,
                     help="srun one task per GPU (RANK from SLURM_PROCID) instead of one torchrun per node."),
        click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Shared storage for scripts, logs and results (default: <repo>/.offlint/slurm)."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command
