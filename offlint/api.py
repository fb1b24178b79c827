"""The programmatic entry point: lint files and return findings and file errors. The CLI is a thin layer on it.

Pipeline: discover files -> read each into units (sources) -> link launch commands to the recipes and YAML
files they name in the same tree -> resolve each unit -> run rules -> apply suppressions and per-file
ignores -> sorted, de-duplicated findings.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from offlint import changed, pipeline, scope
from offlint.cache import Cache, digest, fingerprint
from offlint.discover import SourceFile, discover
from offlint.pipeline import Job
from offlint.reading import ReadError, read_text
from offlint.engine import check_unit
from offlint.resolve import resolve
from offlint.rules import Rule, load_rules, select_rules
from offlint.sources import perf_env, read_source
from offlint.sources.python_project import PythonProject
from offlint.suppressions import Suppression, find_suppressions
from offlint.types import FileError, Finding, Layer, Location, Severity, Unit, UnitKind
from offlint.versions import DetectedVersion, detect_version



@dataclass
class CheckOptions:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    strict: bool = False
    mcore_version: str | None = None  # --mcore-version
    configured_version: str | None = None  # [tool.offlint] megatron-core-version
    root: Path | None = None  # the project root (for the 3rdparty/Megatron-LM pin)
    validate: bool = False  # also build fully known units with the real megatron-core (OFL900)
    cache: bool = True  # reuse and refresh the cache of `root` (cache.py: in the user's cache directory)
    workers: int | None = None  # worker processes (default: one per CPU, when there is enough to do)
    changed_files: bool = True  # explicit files inside the project: re-check every unit they affect


@dataclass
class CheckResult:
    findings: list[Finding]
    errors: list[FileError]
    files_checked: int
    units: int
    version: DetectedVersion
    sources: dict[str, str]
    # --strict: the models and GPUs offlint could not size, once each (estimate.oom.unsized_notes); not findings
    notes: list[str] = field(default_factory=list)


@dataclass
class _Read:
    file: SourceFile
    text: str
    units: list[Unit]
    suppressions: list[Suppression]


def check(paths: list[str], options: CheckOptions, stdin: tuple[str, str] | None = None) -> CheckResult:
    """Lint `paths` (or, with `stdin=(filename, text)`, one in-memory file)."""
    with pipeline.cyclic_gc_paused():
        return _check(paths, options, stdin)


def _check(paths: list[str], options: CheckOptions, stdin: tuple[str, str] | None) -> CheckResult:
    all_rules = load_rules()
    selected = select_rules(all_rules, options.select, options.ignore, options.extend_select)
    project = scope.project_root(paths or ["."]) if stdin is None else None  # found from the paths
    root = project or options.root or Path.cwd()
    version = detect_version(options.mcore_version, options.configured_version, root)
    errors: list[FileError] = []
    texts = pipeline.Texts(_read_text)  # read on first use: a pre-commit run reads only what it needs
    if stdin is not None:
        name, text = stdin
        files = [SourceFile(name, _stdin_kind(name), True)]
        texts[name] = text
    else:
        files, problems = discover(paths, root)
        errors.extend(FileError(p, msg) for p, msg in problems)
    targets: set[str] | None = None  # part of a project: report only what concerns these files
    tree_files = files
    if project is not None and options.changed_files and paths and files and scope.selects_part_of(paths, project):
        tree_files, files = scope.project_files(root, paths, files)
        targets = {f.path for f in files}
        cache = _cache(options, root, selected, version, _python_paths(tree_files + files), stdin)
        known_deps = cache.dependencies() if cache is not None else None
        tree_files, files = changed.expand(files, root, lambda path: texts.get(path, ""), known_deps, tree_files)
    # The whole tree is read up front (its digests key the whole-run cache); a pre-commit run reads the files it
    # checks, and the modules they import only when a reader asks for them.
    needed = {f.path for f in files}
    for file in tree_files if targets is None else files:
        if (file.kind == "python" or file.path in needed) and texts[file.path] is None and \
                (targets is None or file.path in targets):
            errors.append(FileError(file.path, texts.problems[file.path]))
    rules = [all_rules[c] for c in sorted(selected) if all_rules[c].scope != "builtin" or c == "OFL004"]
    if not options.validate:
        selected.discard("OFL900")
    job = Job(files, texts, _python_paths(tree_files), rules, version.version, options.strict)
    run_key = ""
    digests = None
    key_paths: set[str] = set()
    if targets is None:
        cache = _cache(options, root, selected, version, job.python_paths, stdin)
        if cache is not None:
            key_paths = set(job.python_paths) | {f.path for f in files}
            digests = pipeline.digests_of(texts, sorted(key_paths))
            run_key = digest(repr((sorted(digests.items()), paths,
                                   sorted(options.per_file_ignores.items()), [str(e) for e in errors])))
            previous = cache.last_result(run_key, digests)
            if isinstance(previous, CheckResult):
                return replace(previous, version=version)  # the same rules; this run's way of naming them
    by_path = {f.path: f for f in files}
    reads: list[_Read] = []
    findings: list[Finding] = []
    own: set[int] = set()  # (ids of) the findings of units defined in the target files
    for outcome in pipeline.outcomes(job, cache, options.workers, prune=targets is None, digests=digests,
                                     first=frozenset(targets or ())):
        if outcome.error is not None:
            if targets is None or outcome.path in targets:
                errors.append(FileError(outcome.path, outcome.error))
            continue
        reads.append(_Read(by_path[outcome.path], texts[outcome.path], outcome.units, outcome.suppressions))
        findings.extend(outcome.findings)
        if targets is not None and outcome.path in targets:
            own.update(id(f) for f in outcome.findings)
    _link_commands(reads, errors)
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.COMMAND:
                found = check_unit(resolve(unit, version.version), rules, options.strict)
                findings.extend(found)
                if targets is not None and read.file.path in targets:
                    own.update(id(f) for f in found)
    unit_count = sum(len(read.units) for read in reads)
    if options.validate and "OFL900" in selected:
        resolved_units = [resolve(unit, version.version) for read in reads for unit in read.units]
        findings.extend(_validate(resolved_units, findings, all_rules))
    if targets is not None:
        target_units = [unit for read in reads if read.file.path in targets for unit in read.units]
        validated = {unit.name for unit in target_units}  # OFL900 findings name their unit
        findings = [f for f in findings if id(f) in own or _concerns(f, targets)
                    or (f.code == "OFL900" and f.unit in validated)]
        unit_count = len(target_units)
    findings = _dedupe(findings)
    findings = _apply_ignores(findings, reads, options, all_rules, selected, targets)
    findings.sort(key=Finding.sort_key)
    errors.sort(key=lambda e: e.path)
    checked = len(reads) if targets is None else len([r for r in reads if r.file.path in targets])
    result = CheckResult(findings, errors, checked, unit_count, version, {r.file.path: r.text for r in reads})
    if options.strict:
        from offlint.estimate.oom import unsized_notes

        result.notes = unsized_notes(unit for r in reads if targets is None or r.file.path in targets
                                     for unit in r.units)
    if run_key and cache is not None:
        shown = {f.location.path for f in findings} | {r.location.path for f in findings for r in f.related}
        cache.remember_result(run_key, replace(result, sources={p: t for p, t in result.sources.items()
                                                                if p in shown}), covered=key_paths)
    return result


def _python_paths(files: list[SourceFile]) -> list[str]:
    return sorted({f.path for f in files if f.kind == "python"})


def _cache(options: CheckOptions, root: Path, selected: set[str], version: DetectedVersion,
           python_paths: list[str], stdin) -> Cache | None:
    if not options.cache or stdin is not None or options.validate:
        return None
    from offlint.estimate.oom import device  # OFL303/OFL304 size against [tool.offlint] gpu

    return Cache(root, fingerprint(sorted(selected - {"OFL900"}), options.strict, str(version.version),
                                   repr(device()), _pyproject_digest(root), python_paths),
                 result_classes=(CheckResult,)).load()


def _pyproject_digest(root: Path) -> str:
    """The project's pyproject.toml ([tool.offlint] settings the options do not carry, such as the GPU)."""
    text, _ = _read_text(str(root / "pyproject.toml"))
    return digest(text) if text else ""


def _concerns(finding: Finding, targets: set[str]) -> bool:
    """When the paths name part of a project, a finding of a unit elsewhere is reported when it points into a
    named file or draws a value from one (a unit of a named file is always reported)."""
    return finding.location.path in targets or any(r.location.path in targets for r in finding.related)


def read_files(files: list[SourceFile], texts: dict[str, str], project: PythonProject,
               errors: list[FileError]) -> list[_Read]:
    """Read each file into units; a file that cannot be read becomes a FileError and the others go on."""
    reads: list[_Read] = []
    for file in files:
        text = texts.get(file.path)
        if text is None:
            text, error = _read_text(file.path)
            if error:
                errors.append(FileError(file.path, error))
                continue
        try:
            units = read_source(file.path, file.kind, text, explicit=file.explicit, project=project)
        except ValueError as exc:
            errors.append(FileError(file.path, _one_line(str(exc))))
            continue
        except RecursionError:
            errors.append(FileError(file.path, "too deeply nested to analyse"))
            continue
        except Exception as exc:  # an offlint bug must not stop the other files from being checked
            errors.append(FileError(file.path, f"internal error while reading ({type(exc).__name__}: "
                                               f"{_one_line(str(exc))}); please report it"))
            continue
        reads.append(_Read(file, text, units, find_suppressions(text)))
    return reads


def _validate(resolved_units, findings: list[Finding], all_rules: dict[str, Rule]) -> list[Finding]:
    from offlint.validate import MegatronCore, ProbeError, environments, validate_units

    found = environments()
    if not found:
        raise ValueError("--validate needs megatron-core: install it (pip install 'offlint[replay]') or set "
                         "OFFLINT_MCORE_SRC=/path/to/Megatron-LM")
    try:
        with MegatronCore(found[0]) as core:
            return validate_units(resolved_units, findings, all_rules, core)
    except ProbeError as exc:
        raise ValueError(f"--validate: {exc}") from None


def _stdin_kind(name: str) -> str:
    from offlint.discover import EXTENSIONS

    return EXTENSIONS.get(Path(name).suffix.lower(), "shell" if Path(name).suffix == "" else "")


def _read_text(path: str) -> tuple[str, str]:
    """(text, "") or ("", why not): through offlint.reading, the one reader of the linted tree's files."""
    try:
        return read_text(path), ""
    except ReadError as exc:
        return "", str(exc)


def _one_line(message: str) -> str:
    return " ".join(message.split())[:500]


def _link_commands(reads: list[_Read], errors: list[FileError]) -> None:
    """A launch command naming a recipe (or a YAML file) of the linted tree is checked on top of it."""
    recipes: dict[str, list[Unit]] = {}
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.RECIPE:
                recipes.setdefault(unit.name, []).append(unit)
    found_aliases: dict[str, set[str]] = {}
    tree_text = _tree_reader(reads)

    def originals_of(alias: str) -> set[str]:
        """The recipe names imported `as alias` anywhere in the tree (searched once per alias)."""
        if alias not in found_aliases:
            pattern = re.compile(rf"\b([A-Za-z_]\w*)\s+as\s+{re.escape(alias)}\b")
            found_aliases[alias] = {original for read in reads if read.file.kind == "python" and alias in read.text
                                    for original in pattern.findall(read.text)}
        return found_aliases[alias]

    yaml_layers = {}
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.YAML:
                yaml_layers[Path(read.file.path).resolve()] = unit
    for read in reads:
        for unit in read.units:
            if unit.kind != UnitKind.COMMAND:
                continue
            base_layers: list[Layer] = []
            matches = recipes.get(unit.recipe, []) if unit.recipe else []
            if unit.recipe and not matches:
                # Bridge's alias layout: `from .h100.llama3 import llama3_8b_pretrain_2gpu_config as
                # llama3_8b_pretrain_config` makes the legacy name run the real recipe.
                originals = originals_of(unit.recipe)
                matches = [r for name in originals for r in recipes.get(name, [])]
            if len(matches) > 1:  # several trees side by side define the name: the one nearest the launch
                closest = scope.nearest([r.location.path for r in matches], read.file.path)
                matches = [r for r in matches if r.location.path in closest]
            if len(matches) == 1:
                recipe = matches[0]
                base_layers = [Layer(f"recipe {recipe.name}", [a for layer in recipe.layers
                                                               for a in layer.assignments], inherited=True)]
                # The launch environment is the shell's plus the recipe's cfg.env_vars: known when the recipe's is,
                # or when the recipe sets none at all.
                unit.env_known = "env" in recipe.default_sections or recipe.env_unset
                unit.default_sections = frozenset(recipe.default_sections | ({"env"} if unit.env_known else set()))
                unit.unknown_sections = {s: r for s, r in recipe.unknown_sections.items()
                                         if s not in unit.default_sections}
            for name, where in unit.config_files:
                target = _find_yaml(name, read.file.path, yaml_layers)
                if target is not None:
                    base_layers.append(Layer(f"--config-file {name}", target.all_assignments(), inherited=True))
            unit.layers = base_layers + unit.layers
            if unit.launch_args:  # a performance launcher builds the job's environment itself
                near = read.file.path
                perf_env.add_launcher_env(unit, near, lambda path, near=near: tree_text(path, near))


def _tree_reader(reads: list[_Read]):
    """(path, near) -> text for what links launches to the tree: a file read in this run, else one of the project
    `near` lies in, read through the bounded reader (a pre-commit run reads only some files); never one outside."""
    texts: dict[str, str | None] = {posixpath.normpath(read.file.path): read.text for read in reads}
    roots: dict[str, Path | None] = {}

    def tree_text(path: str, near: str) -> str | None:
        path = posixpath.normpath(path)
        if path not in texts:
            folder = posixpath.dirname(near) or "."
            if folder not in roots:
                roots[folder] = scope.project_root([folder])
            root, real = roots[folder], Path(os.path.realpath(path))
            inside = root is not None and (real == root or root in real.parents) and real.is_file()
            text, error = _read_text(path) if inside else ("", "outside the project")
            texts[path] = None if error else text
        return texts[path]

    return tree_text


def _find_yaml(name: str, script: str, yaml_units: dict) -> Unit | None:
    for base in (Path(script).parent, Path.cwd()):
        candidate = (base / name).resolve()
        if candidate in yaml_units:
            return yaml_units[candidate]
    return None


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """Findings that several units share at one place are reported once, under one unit (the one the finding's
    file defines when there is one, else the first by name), with the others named in `shared_with`."""
    groups: dict[tuple, list[Finding]] = {}
    for finding in findings:
        key = (finding.code, finding.location, finding.message, finding.possible)
        groups.setdefault(key, []).append(finding)
    out = []
    for group in groups.values():
        names = sorted({f.unit for f in group})
        if len(names) == 1:
            out.append(group[0])
            continue
        first = min(group, key=lambda f: (f.unit_path != f.location.path, f.unit))
        others = tuple(name for name in names if name != first.unit)
        out.append(replace(first, units=len(names), shared_with=others))
    return out


def _apply_ignores(findings: list[Finding], reads: list[_Read], options: CheckOptions,
                   all_rules: dict[str, Rule], selected: set[str], targets: set[str] | None = None) -> list[Finding]:
    by_path = {r.file.path: r.suppressions for r in reads}
    kept = []
    for finding in findings:
        if _per_file_ignored(finding, options.per_file_ignores):
            continue
        suppressed = False
        for suppression in by_path.get(finding.location.path, []):
            if suppression.covers(finding.code, finding.location.line):
                suppression.used.add(finding.code)
                suppressed = True
        if not suppressed:
            kept.append(finding)
    if "OFL006" in selected:
        rule = all_rules["OFL006"]
        for path, suppressions in by_path.items():
            if targets is not None and path not in targets:
                continue
            for s in suppressions:
                relevant = [c for c in s.codes if c in selected] if s.codes else ["*"]
                if s.used or not relevant:
                    continue
                what = f"ignore[{', '.join(s.codes)}]" if s.codes else "ignore"
                finding = Finding(rule.code, rule.slug, rule.severity,
                                  f"unused suppression `# offlint: {what}`: no finding here to suppress",
                                  Location(path, s.line, s.col), fix=rule.fix, url=rule.url)
                if not _per_file_ignored(finding, options.per_file_ignores):
                    kept.append(finding)
    return kept


def _per_file_ignored(finding: Finding, per_file: dict[str, list[str]]) -> bool:
    for pattern, codes in per_file.items():
        if fnmatch.fnmatch(finding.location.path, pattern) or fnmatch.fnmatch(Path(finding.location.path).name,
                                                                               pattern):
            if any(finding.code.startswith(c) for c in codes) or "ALL" in codes:
                return True
    return False


def exit_code(result: CheckResult, fail_on: Severity) -> int:
    if result.errors:
        return 2
    if any(f.severity.rank >= fail_on.rank for f in result.findings):
        return 1
    return 0
