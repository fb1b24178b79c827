"""One resolved configuration, picked by file (and recipe name), for the commands that act on one configuration.

`offlint estimate`, `offlint replay` and bisect's probes all start from "this recipe / YAML file / launch
script, plus these overrides". They read it exactly as `offlint check` does (same sources, same resolution,
imports followed through the surrounding tree), so what they act on is what the linter reported on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from offlint.discover import SourceFile, discover, kind_of
from offlint.linking import link_commands
from offlint.reading import text_or_error
from offlint.resolve import ResolvedUnit, resolve
from offlint.scope import project_root
from offlint.source_files import read_files
from offlint.sources import bridge_precision, hydra, launch
from offlint.sources.python_project import PythonProject
from offlint.types import Assignment, FileError, Layer, Location, Source, Unit, UnitKind
from offlint.versions import DetectedVersion, detect_version


OVERRIDE_LAYER = "--override"  # the name of the layer `--override KEY=VALUE` options make


class UnitSelectionError(ValueError):
    """A one-line, user-facing reason why no single configuration could be loaded (exit code 2)."""


@dataclass
class LoadedUnit:
    resolved: ResolvedUnit
    version: DetectedVersion
    assumed: tuple[str, ...] = ()  # what was assumed of the configuration to act on it, for the command's notes

    @property
    def unit(self) -> Unit:
        return self.resolved.unit

    def written_keys(self) -> frozenset[str]:
        """The keys the configuration itself writes (its recipe with the provider class defaults its reader added,
        files and command line), the `--override` layer aside: keys an override may set besides megatron-core's
        fields (a Bridge provider's own, such as `vision_cuda_graph_impl`)."""
        return frozenset(a.key for layer in self.unit.layers if layer.name != OVERRIDE_LAYER
                         for a in layer.assignments)


def load_unit(config: str, recipe: str | None = None, overrides: Sequence[str] = (),
              mcore_version: str | None = None, configured_version: str | None = None,
              root: Path | None = None) -> LoadedUnit:
    """Read `config`, pick the unit named `recipe` (or its only unit), layer `overrides` on top, resolve it."""
    path = Path(config)
    tree = root or tree_root(path)
    if os.path.lexists(config) and not path.is_dir():  # a link out of the tree, a FIFO, a device: as `check` says
        _, problems = discover([config], tree)
        if problems:
            raise UnitSelectionError(f"{config}: {problems[0][1]}")
    if not path.is_file():
        raise UnitSelectionError(f"{config}: no such file; give a recipe (.py), a YAML override file or a "
                                 f"launch script")
    kind = kind_of(path)
    if kind is None:
        raise UnitSelectionError(f"{config}: not a Python, YAML or shell file")
    tree_files, _ = discover([str(tree)])
    python_paths = [f.path for f in tree_files if f.kind == "python"]
    project = PythonProject(python_paths, lambda p: text_or_error(p)[0] or None)
    target = _shown(path)
    errors: list[FileError] = []
    reads = read_files([SourceFile(target, kind, True)], {}, project, errors)
    if errors:
        raise UnitSelectionError(str(errors[0]))
    units = reads[0].units
    if recipe and kind == "python" and not any(_named(u, recipe) for u in units):
        aliased = _aliased_recipe(project, target, recipe, errors)
        if aliased is not None:
            units, recipe = aliased
    if not units:
        raise UnitSelectionError(f"{config}: no recipe, override file or launch command found in it")
    unit = _pick(config, units, recipe)
    if unit.kind == UnitKind.COMMAND:
        reads += read_files(_linked_files(unit, target, tree_files), {}, project, errors)
        link_commands(reads, errors)
    unit.layers = unit.layers + [override_layer(overrides)] if overrides else unit.layers
    bridge_precision.attach(unit, project, target)  # a precision recipe an override names
    assumed = ()
    if unit.opaque_words:
        # `check` leaves the defaults such words may change unknown (no finding rests on a guess); a command that
        # acts on one configuration takes the launch as written, and says so (`--override` sets what they give)
        assumed = (f"assuming {launch.unreadable(unit.opaque_words)} gives no flags",)
        unit.opaque_words = ()
    version = detect_version(mcore_version, configured_version, tree)
    return LoadedUnit(resolve(unit, version.version), version, assumed)


def override_layer(overrides: Sequence[str]) -> Layer:
    """`--override KEY=VALUE` options as a last layer, read by Hydra's own parser like a command line."""
    layer = Layer(OVERRIDE_LAYER)
    for position, token in enumerate(overrides, start=1):
        if not hydra.looks_like_override(token):
            raise UnitSelectionError(f"--override {token!r}: expected KEY=VALUE with a dotted key, for example "
                                     f"model.cpu_offloading=true")
        try:
            parsed = hydra.parse_override(token)
        except hydra.OverrideError as exc:
            raise UnitSelectionError(f"--override: {exc}") from None
        for override in parsed:
            layer.assignments.append(Assignment(override.key, override.value, Location("<--override>", position, 1),
                                                Source.HYDRA, override.text, (), override.op))
    return layer


def tree_root(path: Path) -> Path:
    """The project around `path` (scope.project_root: its repository, else its Python project), else the file's
    directory."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))  # a link's own folder, not its target's
    return project_root([folder]) or Path(folder)


def _named(unit: Unit, recipe: str) -> bool:
    return unit.name == recipe or unit.name.split(" (")[0] == recipe


def _aliased_recipe(project: PythonProject, target: str, recipe: str, errors: list[FileError]):
    """A recipe name the file only imports (Bridge's `from .h100.qwen3_moe import X as qwen3_30b_a3b_pretrain_config`
    alias modules): the units of the file that defines it, and its name there; None when it is not one."""
    reader = project.reader(target)
    found = reader.definition_of(recipe) if reader is not None else None
    if found is None or found[0] == target:
        return None
    reads = read_files([SourceFile(found[0], "python", True)], {}, project, errors)
    return (reads[0].units, found[1]) if reads else None


def _pick(config: str, units: list[Unit], recipe: str | None) -> Unit:
    if recipe:
        named = [u for u in units if _named(u, recipe)]
        if len(named) == 1:
            return named[0]
        names = ", ".join(sorted(u.name for u in units))
        raise UnitSelectionError(f"{config}: no unit named {recipe!r} (found: {names}); pass one of those to "
                                 f"--recipe")
    if len(units) == 1:
        return units[0]
    names = ", ".join(sorted(u.name for u in units)[:12])
    raise UnitSelectionError(f"{config}: {len(units)} units ({names}); choose one with --recipe NAME")


def _linked_files(unit: Unit, target: str, tree_files: list[SourceFile]) -> list[SourceFile]:
    """The Python files that define the recipe a command names, and the YAML files it layers."""
    wanted: list[SourceFile] = []
    if unit.recipe:
        names = {unit.recipe}
        alias = re.compile(rf"\b([A-Za-z_]\w*)\s+as\s+{re.escape(unit.recipe)}\b".encode())
        python = [f for f in tree_files if f.kind == "python" and f.path != target]
        texts = {f.path: text_or_error(f.path)[0].encode() for f in python}
        for data in texts.values():
            names.update(m.decode() for m in alias.findall(data))  # Bridge's alias layout
        for name in sorted(names):
            definition = re.compile(rf"\bdef {re.escape(name)}\s*\(|^{re.escape(name)}\s*=".encode(), re.M)
            found = [SourceFile(f.path, "python", True) for f in python if definition.search(texts[f.path])]
            wanted += _nearest(found, target) if found else []
        wanted += [SourceFile(f.path, "python", True) for f in python if alias.search(texts[f.path])]
    for name, _ in unit.config_files:
        for base in (Path(target).parent, Path.cwd()):
            candidate = base / name
            if candidate.is_file():
                wanted.append(SourceFile(_shown(candidate), "yaml", True))
                break
    return wanted


def _nearest(files: list[SourceFile], target: str) -> list[SourceFile]:
    """Of several files defining the same name, the ones closest to the launching file (most shared folders)."""
    def shared(file: SourceFile) -> int:
        count = 0
        for a, b in zip(Path(file.path).parts, Path(target).parts):
            if a != b:
                break
            count += 1
        return count

    best = max((shared(f) for f in files), default=0)
    return [f for f in files if shared(f) == best]


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()
