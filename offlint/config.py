"""`[tool.offlint]` in pyproject.toml: select, ignore, extend-select, per-file-ignores, megatron-core-version,
fail-on, strict, gpu, exclude, extend-exclude, force-exclude (ruff's meanings) and the [tool.offlint.slurm] table.
Found in the working directory or the nearest parent that has a pyproject.toml."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from offlint.reading import ReadError, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FAIL_ON = ("error", "warning", "info")
_KNOWN = {"select", "ignore", "extend-select", "per-file-ignores", "megatron-core-version", "fail-on", "strict",
          "slurm", "gpu", "exclude", "extend-exclude", "force-exclude"}


class ConfigError(ValueError):
    pass


@dataclass
class ProjectConfig:
    path: Path | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    mcore_version: str | None = None
    fail_on: str | None = None
    strict: bool = False
    slurm: dict = field(default_factory=dict)  # [tool.offlint.slurm], validated by offlint.slurm.options
    # The device `offlint estimate` and OFL303-OFL305 size against ("h100-80gb", "96"), and whose architecture OFL117
    # checks FP8/FP4 recipes against, where a recipe's name names no GPU.
    gpu: str | None = None
    exclude: list[str] | None = None  # ruff's semantics: replaces the default exclusions (discover.DEFAULT_EXCLUDE)
    extend_exclude: list[str] = field(default_factory=list)  # added to them
    force_exclude: bool = False  # exclusions apply to paths named on the command line too

    @property
    def root(self) -> Path | None:
        return self.path.parent if self.path else None


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if os.path.lexists(candidate):  # one that cannot be read (a link to /dev/zero, a FIFO) is an error, not
            return candidate            # a reason to use a parent folder's settings
    return None


def load_config(start: Path) -> ProjectConfig:
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    try:
        data = tomllib.loads(read_text(path, follow_links=True))
    except (ReadError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read pyproject.toml: {exc}") from None
    tools = data.get("tool", {})
    if not isinstance(tools, dict):  # (`tool = 5`: TOML that parses, yet no [tool.offlint] can be in it)
        raise ConfigError(f"{path}: `tool` must be a table ([tool.offlint] goes in it), not {type(tools).__name__}")
    table = tools.get("offlint")
    if table is None:
        return ProjectConfig(path=path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.offlint] must be a table")
    unknown = sorted(set(table) - _KNOWN)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.offlint]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(_KNOWN))})")
    config = ProjectConfig(path=path)
    config.select = _codes(table, "select", path)
    config.ignore = _codes(table, "ignore", path)
    config.extend_select = _codes(table, "extend-select", path)
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict) or not all(isinstance(v, list) for v in pfi.values()):
        raise ConfigError(f"{path}: per-file-ignores must map glob patterns to lists of codes")
    config.per_file_ignores = {str(k): [str(c).upper() for c in v] for k, v in pfi.items()}
    version = table.get("megatron-core-version")
    config.mcore_version = str(version) if version is not None else None
    fail_on = table.get("fail-on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise ConfigError(f"{path}: fail-on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    config.fail_on = fail_on
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"{path}: strict must be true or false")
    config.strict = strict
    slurm = table.get("slurm", {})
    if not isinstance(slurm, dict):
        raise ConfigError(f"{path}: [tool.offlint.slurm] must be a table")
    config.slurm = slurm
    gpu = table.get("gpu")
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, (str, int, float))):
        raise ConfigError(f"{path}: gpu must be a device name such as \"h100-80gb\" or a capacity in GiB")
    config.gpu = str(gpu) if gpu is not None else None
    for key in ("exclude", "extend-exclude"):
        value = table.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{path}: {key} must be a list of glob patterns, e.g. [\"examples/*\", \"*_test.sh\"]")
    config.exclude = table.get("exclude")
    config.extend_exclude = table.get("extend-exclude", [])
    force = table.get("force-exclude", False)
    if not isinstance(force, bool):
        raise ConfigError(f"{path}: force-exclude must be true or false")
    config.force_exclude = force
    return config


def _codes(table: dict, name: str, path: Path) -> list[str]:
    value = table.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {name} must be a list of rule codes, e.g. [\"OFL1\", \"OFL201\"]")
    return value
