"""The programmatic entry point: lint files and return findings and file errors. The CLI is a thin layer on it.

Pipeline: discover files -> read each into units (sources) -> link launch commands to the recipes and YAML
files they name in the same tree -> resolve each unit -> run rules -> apply suppressions and per-file
ignores -> sorted, de-duplicated findings.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field, replace
from pathlib import Path

from offlint import changed, loop_passes, pipeline, scope
from offlint.cache import Cache, Deferred, FileOutcome, digest, fingerprint
from offlint.call_records import merge_moves
from offlint.discover import Exclusion, SourceFile, discover
from offlint.job import Job, Progress, Texts, digests_of
from offlint.linking import Aliases, launch_callers, link_commands
from offlint.reading import text_or_error
from offlint.relocation import Unmovable, relocate
from offlint.resolve import resolve
from offlint.rules import Rule, load_rules, select_rules
from offlint.source_files import FileRead
from offlint.tree_keys import tree_fields, tree_section_findings, without_tree_fields
from offlint.types import Defaults, FileError, Finding, Location, Severity, Unit, UnitKind
from offlint.versions import DetectedVersion, Version, detect_version, nested_checkout_version
from offlint.warm_start import WarmStart, remembered
from offlint.workers import Aside, cyclic_gc_paused, forked_map, on_wide_stack


# The builtin rules engine.check_unit computes per unit (the others are computed here, from what the readers keep)
_UNIT_BUILTINS = ("OFL004", "OFL007", "OFL008", "OFL009")


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
    # path -> text read instead of the file's (`check --diff` checks its fixes again without writing them)
    overlay: dict[str, str] = field(default_factory=dict)
    exclusion: Exclusion | None = None  # --exclude / --extend-exclude (default: discover.DEFAULT_EXCLUDE)
    progress: Progress | None = None  # told (files read, files to read) while files are read


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


def check(paths: list[str], options: CheckOptions, stdin: tuple[str, str] | None = None) -> CheckResult:
    """Lint `paths` (or, with `stdin=(filename, text)`, one in-memory file)."""
    project = scope.project_root(paths or ["."]) if stdin is None else None  # found from the paths
    root = project or options.root or Path.cwd()
    # The rule catalog and the .gitignore regexes as an earlier run kept them, with the cache (and under its rules)
    warm = WarmStart.load(root) if options.cache and stdin is None and not options.validate else None
    opened: list[Cache] = []  # the cache this check opens: its entries file stays open for payloads read on use
    try:
        with cyclic_gc_paused(), remembered(warm), Aside() as aside:
            result = on_wide_stack(_check, paths, options, stdin, project, root, warm, aside, opened)
    finally:
        for cache in opened:
            cache.close()
    if warm is not None:
        warm.save()
    return result


def _check(paths: list[str], options: CheckOptions, stdin: tuple[str, str] | None, project: Path | None,
           root: Path, warm: WarmStart | None, aside: Aside, opened: list[Cache]) -> CheckResult:
    all_rules = load_rules(warm)
    selected = select_rules(all_rules, options.select, options.ignore, options.extend_select)
    version = detect_version(options.mcore_version, options.configured_version, root)
    errors: list[FileError] = []
    texts = Texts(_overlaid(options.overlay))  # read on first use: a pre-commit run reads only what it needs
    if stdin is not None:
        name, text = stdin
        files = [SourceFile(name, _stdin_kind(name), True)]
        texts[name] = text
    else:
        files, problems = discover(paths, root, options.exclusion)
        errors.extend(FileError(p, msg) for p, msg in problems)
    targets: set[str] | None = None  # part of a project: report only what concerns these files
    tree_files = files
    if project is not None and options.changed_files and paths and files and scope.selects_part_of(paths, project):
        tree_files, files = scope.project_files(root, paths, files)
        targets = {f.path for f in files}
        cache = _cache(options, root, selected, version, stdin, opened)
        known_deps = cache.dependencies() if cache is not None else None
        tree_files, files = changed.expand(files, root, lambda path: texts.get(path, ""), known_deps, tree_files,
                                           cache.files_defining if cache is not None else None)
    # The whole tree is read up front (its digests key the whole-run cache); a pre-commit run reads the files it
    # checks, and the modules they import only when a reader asks for them.
    needed = {f.path for f in files}
    for file in tree_files if targets is None else files:
        if (file.kind == "python" or file.path in needed) and texts[file.path] is None and \
                (targets is None or file.path in targets):
            errors.append(FileError(file.path, texts.problems[file.path]))
    rules = [all_rules[c] for c in sorted(selected) if all_rules[c].scope != "builtin" or c in _UNIT_BUILTINS]
    if not options.validate:
        selected.discard("OFL900")
    job = Job(files, texts, _python_paths(tree_files), rules, version.version, options.strict)
    run_key = ""
    digests = None
    key_paths: set[str] = set()
    if targets is None:
        cache = _cache(options, root, selected, version, stdin, opened)
        if cache is not None:
            key_paths = set(job.python_paths) | {f.path for f in files}
            digests = digests_of(job, sorted(key_paths))
            run_key = digest(repr((sorted(digests.items()), paths,
                                   sorted(options.per_file_ignores.items()), [str(e) for e in errors])))
            previous = cache.last_result(run_key, digests)
            if isinstance(previous, CheckResult):
                return replace(previous, version=version)  # the same rules; this run's way of naming them
    by_path = {f.path: f for f in files}
    reads: list[FileRead] = []
    findings: list[Finding] = []
    own: set[int] = set()  # (ids of) the findings of units defined in the target files
    deferred: list[tuple[FileRead, Deferred]] = []  # files read for context only, or whose recipes were held
    held: dict[int, int] = {}  # id of the read of a pipeline.Held file -> how many units it has
    made: list[Aliases] = []  # the Aliases `wanted` made (over the files that become `reads`), used again below

    def wanted(found: list) -> set[str]:
        names, aliases = _recipes_run(found, by_path, texts)
        made.append(aliases)
        return names

    if targets is None and "OFL003" in selected:  # (a pre-commit run reads the tree's classes only if it must)
        aside.add("tree fields", tree_fields, job.python_paths)
    for outcome in pipeline.outcomes(job, cache, options.workers, prune=targets is None, digests=digests,
                                     first=frozenset(targets or ()), progress=options.progress,
                                     defer=targets is not None, wanted=None if options.strict else wanted,
                                     aside=aside):
        holding = None  # a pipeline.Held file: its recipes are decoded if a command runs one (_decode_linked)
        if isinstance(outcome, pipeline.Held):
            holding, outcome = outcome, outcome.outcome  # (its outcome: all but the units, read without error)
        if isinstance(outcome, Deferred):  # not a target (pipeline defers only those), valid as stored
            summary = outcome.summary
            if summary.error:
                continue  # a read error is reported for the target files only
            if not (summary.linked or summary.suppressions or summary.touches & targets):
                # Its findings would all be filtered out below; its recipes are decoded if a command runs one
                read = FileRead(by_path[outcome.path], texts[outcome.path], [], [])
                reads.append(read)
                deferred.append((read, outcome))
                continue
            outcome = outcome.outcome()
        if outcome.error is not None:
            if targets is None or outcome.path in targets:
                errors.append(FileError(outcome.path, outcome.error))
            continue
        reads.append(FileRead(by_path[outcome.path], texts[outcome.path], outcome.units, outcome.suppressions))
        if holding is not None:
            deferred.append((reads[-1], holding.later))
            held[id(reads[-1])] = holding.unit_count
        findings.extend(outcome.findings)
        if targets is not None and outcome.path in targets:
            own.update(id(f) for f in outcome.findings)
    # the `import X as Y` of the reads' Python files (the same files after decoding)
    aliases = made[0] if made else Aliases(reads)
    callers = launch_callers(reads)  # (launch commands are never deferred: every call's reading is here)
    keys, kept = _linked_kept(reads, deferred, cache, targets, aliases, callers)
    if deferred:
        reads = _decode_linked(reads, deferred, findings, {unit.recipe for unit, key, _ in keys.values()
                                                             if key not in kept and unit.recipe}, aliases,
                               _entry_script_names(unit for unit, _, _ in keys.values()))
        if cache is not None:
            for _, later in deferred:
                if later.again:
                    cache.read_again(later.path)
    relaunched = {id(unit) for unit in link_commands(reads, errors, aliases, callers)}
    checkouts: dict[str, Version] = {}  # a nested Megatron-LM checkout's folder -> the megatron-core it is
    if relaunched:  # YAML files checked as their launches run them: their stored findings give way
        names = {(read.file.path, unit.name) for read in reads for unit in read.units if id(unit) in relaunched}
        findings = [f for f in findings if (f.location.path, f.unit) not in names]
    launches = []  # (read, unit, its key in the cache, what its reading used, its findings kept there or None)
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.COMMAND or id(unit) in relaunched:
                _, key, used = keys.get(id(unit), (None, None, ()))
                launches.append((read, unit, key, used, kept.get(key) if key is not None else None))
    # (a run answered from the cache checks nothing, and need not import the rules: 0.04 s)
    aside.settle()  # (forked_map's child is forked from this thread alone)
    checked = iter(forked_map(
        lambda unit: _check_launch(unit, rules, _launch_version(unit, version, root, options, checkouts),
                                   options.strict),
        [unit for _, unit, _, _, found in launches if found is None], options.workers))
    for read, unit, key, used, found in launches:
        if found is None:
            found = next(checked)
            if isinstance(found, str):  # an offlint bug: it must not stop the other files
                errors.append(FileError(read.file.path, found))
                continue
            if key is not None and cache.exact.issuperset(used):  # (a payload that did not decode: not)
                cache.remember_linked(key, found)
        findings.extend(found)
        if targets is not None and read.file.path in targets:
            own.update(id(f) for f in found)
    if cache is not None:
        cache.save_linked(prune=targets is None)
    tree = aside.result("tree fields")
    if "OFL003" in selected and "OFL003" in all_rules:  # keys of sections only the tree's own classes list
        findings.extend(tree_section_findings([r for r in reads if targets is None or r.file.path in targets],
                                              job.python_paths, lambda path: texts[path], all_rules["OFL003"], tree))
    unit_count = sum(held.get(id(read), len(read.units)) for read in reads)
    if options.validate and "OFL900" in selected:
        resolved_units = [resolve(unit, version.version) for read in reads for unit in read.units]
        findings.extend(_validate(resolved_units, findings, all_rules))
    if targets is not None:
        target_units = [unit for read in reads if read.file.path in targets for unit in read.units]
        validated = {unit.name for unit in target_units}  # OFL900 findings name their unit
        findings = [f for f in findings if id(f) in own or _concerns(f, targets)
                    or (f.code == "OFL900" and f.unit in validated)]
        unit_count = len(target_units)
    findings = _at_the_launch(findings, callers, reads)
    findings = without_tree_fields(findings, job.python_paths, lambda path: texts[path], tree)
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


def _check_launch(unit: Unit, rules: list[Rule], version: Version, strict: bool) -> list[Finding] | str:
    """A linked launch command's findings, or the error an offlint bug in checking it makes."""
    from offlint.engine import check_unit, internal_error

    try:
        return check_unit(resolve(unit, version), rules, strict)
    except Exception as exc:  # noqa: BLE001 - reported as the file's error
        return internal_error(unit, exc)


def _launch_version(unit, run: DetectedVersion, root: Path, options: CheckOptions,
                    checkouts: dict[str, Version]) -> Version:
    """The megatron-core a launch command is judged with: that of the Megatron-LM checkout its entry script lies in,
    where the tree holds one of its own besides the root's (Unit.checkout); else the run's. MLPerf's training
    results bundle submitters' 0.9 and 0.12 copies side by side: a 0.9 launch had been told of a check only 0.12
    makes (OFL218)."""
    if not unit.checkout:
        return run.version
    if unit.checkout not in checkouts:
        checkouts[unit.checkout] = nested_checkout_version(unit.checkout, root, options.mcore_version,
                                                           options.configured_version) or run.version
    return checkouts[unit.checkout]


def _recipes_run(found: list, by_path: dict[str, SourceFile], texts: Texts) -> tuple[set[str], Aliases]:
    """The recipes the launch commands among `found` (every outcome pipeline.outcomes gives) run, and, for a name no
    file defines, the names imported `as` it, as _decode_linked looks them up: what workers that kept recipe units
    send back (pipeline.outcomes' `wanted`). With them, every recipe of a held file named as a Megatron-LM style
    launch's entry script, all of whose units _decode_linked takes (Megatron Bridge's MIMO training scripts: read
    again in the parent, once the workers were done, when they were not sent). With the Aliases that took, over the
    files _check makes reads of (scanned only if a name is not defined). A stored file whose summary says it has
    units linking needs is decoded here, as the loop in _check would decode it next."""
    outcomes: list[FileOutcome] = []
    defined: set[str] = set()
    paths: list[str] = []
    held: list[pipeline.Held] = []
    for hit in found:
        if isinstance(hit, pipeline.Held):
            defined |= hit.later.summary.recipes
            paths.append(hit.outcome.path)
            held.append(hit)
            continue
        if isinstance(hit, Deferred):
            if hit.summary.error:
                continue
            if not hit.summary.linked:
                defined |= hit.summary.recipes
                paths.append(hit.path)
                continue
            hit = hit.outcome()
        if hit.error is None:
            outcomes.append(hit)
            paths.append(hit.path)
    commands = [unit for outcome in outcomes for unit in outcome.units if unit.kind == UnitKind.COMMAND]
    names = {unit.recipe for unit in commands if unit.recipe}
    defined |= {unit.name for outcome in outcomes for unit in outcome.units if unit.kind == UnitKind.RECIPE}
    aliases = Aliases(FileRead(by_path[path], texts[path], [], []) for path in paths)
    scripts = _entry_script_names(commands)
    whole = {name for hit in held if posixpath.basename(hit.outcome.path) in scripts
             for name in hit.later.summary.recipes}
    return _looked_up(names, defined, aliases) | whole, aliases


def _entry_script_names(commands) -> set[str]:
    """The file names of the entry scripts Megatron-LM style launches among `commands` run: linking may read every
    unit of such a file of the tree (a script that reads its own flags, script_flags), so _decode_linked takes all."""
    return {posixpath.basename(unit.entry_script) for unit in commands
            if unit.entry_script and unit.defaults == Defaults.MLM_CLI}


def _looked_up(named: set[str], defined: set[str], aliases: Aliases) -> set[str]:
    """The recipe names linking looks up for launches naming `named`: each, and, for one no file defines
    (`defined`), the names imported `as` it (link_commands' alias layout)."""
    return named | {original for alias in named - defined for original in aliases.get(alias)}


def _linked_kept(reads: list[FileRead], deferred: list[tuple[FileRead, Deferred]], cache: Cache | None,
                 targets: set[str] | None, aliases: Aliases,
                 callers: dict[Location, list[Unit]]) -> tuple[dict[int, tuple], dict[str, list[Finding]]]:
    """Launch commands whose findings, linked to the tree, can be kept from an earlier run: ({id of a command unit:
    (the unit, its key or None, the files the key names)}, {key: findings kept}). `link_commands` links a command
    to the recipe units of its name in the run's files, or, when none defines it, of the names the run's Python
    files import `as` it; the findings come from that command unit and those recipe units, which are their files'
    stored payloads when those files are as stored (`Cache.exact`), or those payloads with their lines moved (an edit
    above a function they read: the findings are moved as the units are). So the key is the command's file, its
    place in that file's payload, and the files that define the recipes it may link to (none: it links to none),
    each by its payload's digest; for an alias, the names it stands for; and the call that runs its script, if
    any (linking.launch_callers). Not kept: commands of the target files
    (their linked units are reported on), and those whose linking reads more of the tree (a --config-file YAML, an
    entry script, a functional test case's CI recipes, a performance launcher's environment)."""
    keys: dict[int, tuple] = {}
    kept: dict[str, list[Finding]] = {}
    if cache is None:
        keys = {id(unit): (unit, None, ()) for read in reads for unit in read.units if unit.kind == UnitKind.COMMAND}
        return keys, kept
    defining: dict[str, set[str]] = {}  # recipe name -> the files of the run defining it
    for read in reads:
        for unit in read.units:
            if unit.kind == UnitKind.RECIPE:
                defining.setdefault(unit.name, set()).add(read.file.path)
    for _, later in deferred:
        for name in later.summary.recipes:
            defining.setdefault(name, set()).add(later.path)
    states: dict[str, tuple | None] = {}  # path -> Cache.payload_state

    def payload(path: str) -> str | None:
        if path not in states:
            states[path] = cache.payload_state(path)
        return states[path][0] if states[path] is not None else None

    for read in reads:
        target = targets is not None and read.file.path in targets
        for index, unit in enumerate(read.units):
            if unit.kind != UnitKind.COMMAND:
                continue
            keys[id(unit)] = (unit, None, ())
            if target or unit.config_files or unit.entry_script or unit.ci_test_case or unit.launch_args \
                    or payload(read.file.path) is None:
                continue
            originals: list[str] = []
            files = sorted(defining.get(unit.recipe, ())) if unit.recipe else []
            if unit.recipe and not files:
                originals = sorted(aliases.get(unit.recipe))
                files = sorted({path for name in originals for path in defining.get(name, ())})
            linked = [(path, payload(path)) for path in files]
            if any(found is None for _, found in linked):
                continue
            key = digest(repr((read.file.path, payload(read.file.path), index, unit.recipe, originals, linked,
                               [caller.location for caller in callers.get(unit.location, ())])))
            keys[id(unit)] = (unit, key, [read.file.path, *files])
            found = cache.linked_findings(key) if targets is not None else None
            if found is not None:
                found = _moved_findings(cache, found, [states[path][1] for path in [read.file.path, *files]])
            if found is not None:
                kept[key] = found
    return keys, kept


def _moved_findings(cache: Cache, found: list[Finding], moves: list[dict | None]) -> list[Finding] | None:
    """Kept findings of a launch command whose files' stored outcomes are valid with lines moved (`moves`: each
    file's line moves, None for one valid as stored), moved with them as those outcomes' units are
    (relocation.relocate); None when the moves disagree or a location cannot be moved (checked again)."""
    merged: dict[str, dict[int, int]] = {}
    for more in moves:
        if more is not None and not merge_moves(merged, {path: dict(lines) for path, lines in more.items()}):
            return None
    if not merged:
        return found
    try:
        return relocate(cache.codec, [], found, merged)[1]
    except Unmovable:
        return None


def _decode_linked(reads: list[FileRead], deferred: list[tuple[FileRead, Deferred]], findings: list[Finding],
                   named: set[str], aliases: Aliases, scripts: set[str] = frozenset()) -> list[FileRead]:
    """The deferred files' units that linking can use, decoded: those defining a recipe in `named` (the recipes that
    launch commands of the run name whose findings are not kept, `_linked_kept`), or (when no file defines that
    name) a recipe imported `as` it, as `link_commands` looks them up; and every unit of a file named as a Megatron-LM
    style launch's entry script (`scripts`: file names), which may read its own flags (script_flags). The other
    deferred files keep no units: linking finds nothing in them (a command linked to one keeps its findings), and
    their findings concern no target."""
    if not named and not scripts:
        return reads
    defined = {unit.name for read in reads for unit in read.units if unit.kind == UnitKind.RECIPE}
    defined.update(name for _, later in deferred for name in later.summary.recipes)
    named = _looked_up(named, defined, aliases)
    dropped = set()
    for read, later in deferred:
        script = posixpath.basename(later.path) in scripts and later.summary.recipes
        if later.summary.recipes & named or script:
            # only the recipes linking looks up: a name it does not look for is linked to nothing, and its findings
            # would all be filtered out (the file is deferred for that); all of an entry script's
            outcome = later.outcome(named | set(later.summary.recipes) if script else named)
            if outcome.error is not None:  # read again (the payload did not decode), and now unreadable
                dropped.add(id(read))
                continue
            read.units, read.suppressions = outcome.units, outcome.suppressions
            findings.extend(outcome.findings)
    return [read for read in reads if id(read) not in dropped] if dropped else reads


def _python_paths(files: list[SourceFile]) -> list[str]:
    return sorted({f.path for f in files if f.kind == "python"})


def _cache(options: CheckOptions, root: Path, selected: set[str], version: DetectedVersion, stdin,
           opened: list[Cache]) -> Cache | None:
    """The cache of this project and these settings, noted in `opened` (check closes it). Not of the set of files: a
    reading notes the lookups of it that its answers depend on (module_index), so an added file re-reads only what
    it changes."""
    if not options.cache or stdin is not None or options.validate:
        return None
    from offlint.estimate.devices import device  # OFL303/OFL304 size against [tool.offlint] gpu

    cache = Cache(root, fingerprint(sorted(selected - {"OFL900"}), options.strict, str(version.version),
                                    [(name, sorted(names)) for name, names in version.version.source_names],
                                    version.version.lists_unknown, version.version.own_clamp,
                                    repr(device()), _pyproject_digest(root)),
                  result_classes=(CheckResult,))
    opened.append(cache)
    return cache.load()


def _pyproject_digest(root: Path) -> str:
    """The project's pyproject.toml ([tool.offlint] settings the options do not carry, such as the GPU)."""
    text, _ = text_or_error(str(root / "pyproject.toml"))
    return digest(text) if text else ""


def _at_the_launch(findings: list[Finding], callers: dict[Location, list[Unit]],
                   reads: list[FileRead]) -> list[Finding]:
    """A finding every call of a script reports of a launch the script writes (Finding.command_at) is that launch's
    own: reported where the launch is written, as the script's own reading would (which is open: linking), and its
    fix made there. One a call does not report (it runs the script in an older container, say) stays at each call
    that does, its fix at the launch unsafe (fix.plan.is_safe): the other calls run the same command. So does one
    whose launch the script's own reading does not see (`exec "$@"`: the caller's words are the launch)."""
    if not callers:
        return findings
    seen = {unit.location: unit.name for read in reads for unit in read.units
            if unit.written_at is None and unit.location in callers}
    reporting: dict[tuple, set[tuple[str, str]]] = {}
    for f in findings:
        if f.command_at in seen:
            reporting.setdefault((f.code, f.command_at, f.message, f.possible), set()).add((f.unit_path, f.unit))
    everyone = {key for key, units in reporting.items()
                if units >= {(caller.location.path, caller.name) for caller in callers[key[1]]}}
    # (what the script's own reading reports of the launch, at an option of it: the calls' finding is that one)
    scripts = {at.path for at in seen}
    own = {(f.code, f.unit_path, f.unit, f.message, f.possible) for f in findings
           if f.command_at is None and f.unit_path in scripts}
    out = []
    for f in findings:
        if f.command_at in seen and (f.code, f.command_at, f.message, f.possible) in everyone:
            if (f.code, f.command_at.path, seen[f.command_at], f.message, f.possible) in own:
                continue
            f = replace(f, location=f.command_at, command_at=None)
        out.append(f)
    return out


def _concerns(finding: Finding, targets: set[str]) -> bool:
    """When the paths name part of a project, a finding of a unit elsewhere is reported when it points into a
    named file, or to a launch one writes (a caller's, Finding.command_at), or draws a value from one (a unit of a
    named file is always reported)."""
    return finding.location.path in targets or any(r.location.path in targets for r in finding.related) \
        or finding.command_at is not None and finding.command_at.path in targets


def _validate(resolved_units, findings: list[Finding], all_rules: dict[str, Rule]) -> list[Finding]:
    from offlint.validate import MegatronCore, ProbeError, environments, validate_units

    found = environments(explicit_first=True)
    if not found:
        raise ValueError("--validate needs megatron-core: install it (pip install 'offlint[replay]') or set "
                         "OFFLINT_MCORE_SRC=/path/to/Megatron-LM")
    try:
        with MegatronCore(found[0]) as core:
            return validate_units(resolved_units, findings, all_rules, core)
    except ProbeError as exc:
        raise ValueError(f"--validate: {exc}") from None


def _overlaid(overlay: dict[str, str]):
    if not overlay:
        return text_or_error
    return lambda path: (overlay[path], "") if path in overlay else text_or_error(path)


def _stdin_kind(name: str) -> str:
    from offlint.discover import EXTENSIONS

    return EXTENSIONS.get(Path(name).suffix.lower(), "shell" if Path(name).suffix == "" else "")


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """Findings that several units share at one place are reported once, under one unit (the one the finding's
    file defines when there is one, else the first by name), with the others named in `shared_with`."""
    groups: dict[tuple, list[Finding]] = {}
    for finding in findings:
        # (a launch a called script writes, found at the call as that script finds it at the command: one finding,
        # at the command, shared with the caller's unit)
        key = (finding.code, finding.command_at or finding.location, finding.message, finding.possible)
        groups.setdefault(key, []).append(finding)
    out = []
    for group in groups.values():
        # (the passes of a launch in a `for` loop are one unit here: its findings name the launch, not a pass)
        group = [replace(f, unit=loop_passes.base_name(f.unit, f.passes)) if f.passes else f for f in group]
        names = sorted({f.unit for f in group})
        # (the script's own reading before a call's, whose place is the caller's: a fix goes where the launch is)
        first = min(group, key=lambda f: (f.command_at is not None, f.unit_path != f.location.path, f.unit))
        others = tuple(name for name in names if name != first.unit)
        taken = loop_passes.taken([f.passes for f in group])
        out.append(replace(first, shared_with=others, passes=(),
                           message=f"{first.message}\n({taken})" if taken else first.message))
    return out


def _apply_ignores(findings: list[Finding], reads: list[FileRead], options: CheckOptions,
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
