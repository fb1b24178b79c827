"""Which stored outcomes, units and followed calls still hold in the tree as it is now, so that they are not read again.

A file's stored outcome is reused when nothing its reading used changed in meaning (cache.Cache.lookup); a file
read again reuses the units whose reading used nothing that changed (_reusable_units); a followed call recorded in
either is run again only when what it used changed (Verifier, call_records.RecordCheck). Each needs the definition
digests of the files now (part_digests), computed here once per text.
"""

from __future__ import annotations

import ast
from typing import Callable

from offlint.cache import Cache, FileOutcome, digest
from offlint.call_records import RecordCheck, file_state, merge_moves, record_id
from offlint.job import Job, Texts
from offlint.part_digests import definition_digests, line_moves, means_the_same
from offlint.reading import OnFirstUse
from offlint.relocation import Unmovable, relocate
from offlint.sources.python_project import PythonProject
from offlint.sources.python_records import MARK, CallRecord

class DefinitionDigests(OnFirstUse):
    """path -> part_digests.definition_digests of its text now; None for a file that cannot be read or parsed. Asked only
    of the files that changed since a cache entry's reading used them in part."""

    def __init__(self, texts: Texts):
        super().__init__(self._definitions)
        self._texts = texts
        self.modules: dict[str, ast.Module] = {}  # path -> its syntax tree, parsed here (a reader of it may reuse it)

    def _definitions(self, path: str) -> dict[str, str] | None:
        text = self._texts.get(path)
        if text is None:
            return None
        try:
            module = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        self.modules[path] = module
        found = definition_digests(module, [line.encode("utf-8") for line in text.splitlines(keepends=True)])
        _DEFINITIONS[(path, digest(text))] = found  # the same text's, when noting what a reading used (_definitions)
        return found


class Verifier:
    """Runs again, in the tree now, the followed calls that stored outcomes recorded (call_records.RecordCheck):
    once per call, in a project of its own (a worker forked later inherits what it ran)."""

    def __init__(self, job: Job, digests, parsed: dict[str, ast.Module] | None = None):
        self.job, self.digests = job, digests
        self.project: PythonProject | None = None
        self.parsed = parsed if parsed is not None else {}  # syntax trees of the texts, parsed already
        self.done: dict[tuple, list | None] = {}

    def shared(self) -> PythonProject:
        """Its project, for the files read after all (their modules' readers and followed calls are the same)."""
        if self.project is None:
            self.project = PythonProject(self.job.python_paths, self.job.texts.get, self.job.index())
        self.shared_parsed()
        return self.project

    def shared_parsed(self) -> None:
        """The syntax trees parsed already (for definition digests) given to its project, if it has one."""
        if self.project is not None and self.parsed:
            self.project.adopt_parsed(self.parsed)
            self.parsed.clear()

    def record(self, path: str, function: str, args: str, depth: int) -> tuple[str, dict] | None:
        """(ID, {ID: record}) of the call's record now and of its nested calls' (FileOutcome.calls); None when the
        run leaves no record."""
        key = (path, function, args, depth)
        if key not in self.done:
            self.done[key] = None
            if not (isinstance(path, str) and isinstance(function, str) and isinstance(args, str)
                    and type(depth) is int):
                return None
            project = self.shared()
            reader = project.reader(path) if project.knows(path) else None
            fn = reader.functions.quietly(function) if reader is not None else None
            try:
                found = reader.run_recorded(fn, args, depth) if isinstance(fn, ast.FunctionDef) else None
            except Exception:  # noqa: BLE001 - arguments offlint did not write, or a run that fails: read again
                found = None
            if found is not None:
                self.done[key] = stored_record(found, depth, self.digests, project, self.job.texts)
        return self.done[key]


def stored_record(record: CallRecord, depth: int, digests, project: PythonProject, texts
                  ) -> tuple[str, dict[str, list]] | None:
    """A CallRecord (python_records) in the form FileOutcome.calls keeps, with the digests of the tree now: (its
    ID, {ID: record} of it and the calls nested in it); None when its result cannot be encoded."""
    if depth in record.stored:
        return record.stored[depth]
    record.stored[depth] = None
    encoded = record.encoded()
    table: dict[str, list] = {}
    nested: list[str] = []
    for inner_depth, inner in record.nested:
        found = stored_record(inner, inner_depth, digests, project, texts)
        if found is None:
            return None
        nested.append(found[0])
        table.update(found[1])
    if encoded is None:
        return None
    whole = {dep for dep in record.deps if isinstance(dep, str)}
    names: dict[str, set[str]] = {}
    for dep in record.deps:
        if not isinstance(dep, str) and dep[0] not in whole:
            names.setdefault(dep[0], set()).add(dep[1])
    files = {path: file_state(digests, path) for path in sorted(whole | set(names))}
    parts: dict[str, dict[str, str]] = {}
    for path, used in sorted(names.items()):
        state = digests.get(path)
        now = _definitions(project, path, state, texts) if state else None
        if now is not None and used <= now.keys():
            parts[path] = {name: now[name] for name in sorted(used)}
    result, lines = encoded
    runs: list[list] = []
    for file, line in lines:
        if runs and runs[-1][0] == file:
            runs[-1][1].append(line)
        else:
            runs.append([file, [line]])
    stored = [record.path, record.function, record.args, depth, record.reach, record.refused, files, parts, result,
              runs, nested]
    rid = record_id(stored)
    table[rid] = stored
    record.stored[depth] = rid, table
    return rid, table


def _reusable_units(cache: Cache, path: str, digests, definitions, verify=None) -> dict[str, tuple]:
    """The units of a file's previous reading that are still valid: every part and file their reading used is
    unchanged (the file's own function and module-level statements included), or means the same, its lines
    perhaps moved (their locations are moved with them), and each followed call it recorded gives the same
    (call_records.RecordCheck). {unit name: (unit or None, its findings, what it used)}; what it used holds the
    records' marks (python_records.MARK), and `records` of the result maps them to their stored form now."""
    previous = cache.previous(path)
    if previous is None or previous.error is not None or not previous.unit_used:
        return {}
    try:
        return _still_valid(previous, path, digests, definitions, cache.codec, verify)
    except (TypeError, ValueError, AttributeError, KeyError):
        return {}  # an entry offlint did not write (the cache holds only data): the file is read whole


def _still_valid(previous: FileOutcome, path: str, digests, definitions, codec, verify=None) -> dict[str, tuple]:
    files = [path, *sorted(previous.deps)]
    recorded_state = {**previous.deps, path: previous.digest}
    moves: dict[str, dict[int, int] | None] = {}  # changed file -> old line -> new line (its parts' lines)

    def unchanged(file: str) -> bool:
        return file_state(digests, file) == recorded_state.get(file)

    def same_part(file: str, name: str) -> bool:
        if unchanged(file):
            return True
        recorded = previous.parts.get(file, {}).get(name)
        now = definitions.get(file)
        return recorded is not None and means_the_same(recorded, now.get(name) if now is not None else None)

    def moved(file: str) -> dict[int, int] | None:
        if file not in moves:
            moves[file] = line_moves(previous.parts.get(file, {}), definitions.get(file) or {})
        return moves[file]

    units = {unit.name: unit for unit in previous.units}
    findings: dict[str, list] = {}
    for finding in previous.findings:
        findings.setdefault(finding.unit, []).append(finding)
    check = RecordCheck(digests, definitions.get, verify)
    held: dict[str, tuple | None] = {}  # record ID -> (its line moves, its mark, (its ID now, its table now)) or None

    def record(rid: str) -> tuple | None:
        if rid not in held:
            found = check.holds(rid, previous.calls)
            held[rid] = None if found is None else (found[0], (MARK, *previous.calls[rid][:4]), found[1:])
        return held[rid]

    reusable = {}
    for name, keys in previous.unit_used.items():
        used: set = set()
        changed: set[str] = set()
        calls: list[tuple] = []
        for key in keys:
            if key[:1] == "c":
                found = record(key[1:])
                if found is None:
                    break
                calls.append(found)
                used.add(found[1])
                continue
            index, _, part = key.partition(":")
            if not index.isdigit() or int(index) >= len(files):
                return {}  # not what offlint writes
            file = files[int(index)]
            if not (same_part(file, part) if part else unchanged(file)):
                break
            used.add((file, part) if part else file)
            if part and not unchanged(file):
                changed.add(file)
        else:
            unit, found = units.get(name), findings.get(name, [])
            lines = {file: moved(file) for file in changed}
            if any(mapping is None for mapping in lines.values()):
                continue
            lines = {file: dict(mapping) for file, mapping in lines.items()}
            if not all(merge_moves(lines, moves) for moves, _, _ in calls):
                continue
            if any(old != new for mapping in lines.values() for old, new in mapping.items()):
                try:
                    [unit], found = relocate(codec, [unit], found, lines)
                except Unmovable:
                    continue
            reusable[name] = (unit, found, frozenset(used), {mark: now for _, mark, now in calls})
    return reusable


def _same_definitions(outcome: FileOutcome, text: str, text_digest: str) -> FileOutcome | None:
    """A Python file's outcome reused after an edit outside its definitions (a comment between them, blank
    lines at the end): its units and findings are the same; its suppression comments are read again."""
    from offlint.sources.python import worth_parsing
    from offlint.suppressions import find_suppressions

    if not worth_parsing(text.encode("utf-8", "replace")):
        return None  # a file walked to is parsed only when it names a key the rules read
    outcome.digest, outcome.suppressions = text_digest, find_suppressions(text)
    return outcome  # not stored again: rewriting the cache costs a pre-commit run more than this check


_DEFINITIONS: dict[tuple[str, str], dict[str, str]] = {}  # (path, digest of its text) -> definition_digests
# (path, digest of its text) -> the definition_digests a cache entry of that file as it is keeps (Cache.own_parts)
_STORED: Callable[[str, str], dict[str, str] | None] | None = None


def keep_stored_parts(own_parts: Callable[[str, str], dict[str, str] | None] | None) -> None:
    """The cache's definition digests of the files as they are (Cache.own_parts; None without a cache), which
    _definitions takes before parsing a file again: set by `pipeline.outcomes` for its run."""
    global _STORED
    _STORED = own_parts


def _definitions(project: PythonProject, path: str, text_digest: str, texts: Texts | None = None
                 ) -> dict[str, str] | None:
    """definition_digests of a module: as the cache entry of the file as it is keeps them (a pre-commit run's
    unchanged files: 8 of a leaf recipe's 10 computed again before), else from the syntax tree the project's reader
    of it parsed, else (it was not read: a unit reused from the cache used it) from `texts` parsed again; else
    None. They are a function of the text: the same from any of the three."""
    key = (path, text_digest)
    if key not in _DEFINITIONS:
        found = _STORED(path, text_digest) if _STORED is not None else None
        if found is None:
            reader = project.read_already(path)
            if reader is not None:
                found = definition_digests(reader.module, reader.lines)
            elif texts is not None:
                found = DefinitionDigests(texts).get(path)
        if found is None:
            return None
        if len(_DEFINITIONS) > 100_000:
            _DEFINITIONS.clear()
        _DEFINITIONS[key] = found
    return _DEFINITIONS[key]
