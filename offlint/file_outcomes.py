"""One file read into its outcome: its units, the findings of those that stand alone, and what the reading used.

`read_one` is what every worker process (workers.py) and a run in one process do for each file the cache could
not answer: the reading itself (source_files), the rules on the units that need nothing from other files
(engine), and, for the cache, what each unit's reading used (_note_uses), so that an edit re-reads only the units
that used what changed.
"""

from __future__ import annotations

from offlint.cache import FileOutcome
from offlint.call_records import file_state
from offlint.discover import SourceFile
from offlint.job import Job
from offlint.outcome_reuse import _definitions, stored_record
from offlint.resolve import resolve
from offlint.source_files import read_files
from offlint.sources.python_project import PythonProject
from offlint.sources.python_records import MARK, CallRecord
from offlint.types import FileError, UnitKind

def read_one(file: SourceFile, job: Job, project: PythonProject, digests: dict[str, str]) -> FileOutcome:
    """Read one file into units, check the ones that stand alone, and note what the reading depended on."""
    # here: a warm run, answered from the cache, checks nothing
    from offlint.engine import check_unit, internal_error

    errors: list[FileError] = []
    reusable = job.reusable(file.path)
    project.unit_reuse = {(file.path, name): (unit, used) for name, (unit, _, used, _) in reusable.items()}
    for _, _, _, records in reusable.values():
        project.records.update(records)
    try:
        with project.tracking() as touched:
            reads = read_files([file], job.texts, project, errors)
    finally:
        project.unit_reuse = {}
    unit_used = {name: used for (path, name), used in project.unit_used.items() if path == file.path}
    for name in unit_used:
        del project.unit_used[(file.path, name)]
    outcome = FileOutcome(file.path, digests[file.path])
    if job.keep_uses:
        _note_uses(outcome, file, job, project, digests, touched, unit_used)
    if errors:
        outcome.error = errors[0].message
        return outcome
    read = reads[0]
    outcome.units, outcome.suppressions = read.units, read.suppressions
    for unit in read.units:
        if unit.kind != UnitKind.COMMAND:
            stored = reusable.get(unit.name)
            if stored is not None and stored[0] is unit:
                outcome.findings.extend(stored[1])  # the same unit: the same findings
            else:
                try:
                    outcome.findings.extend(check_unit(resolve(unit, job.version), job.rules, job.strict))
                except Exception as exc:  # noqa: BLE001 - an offlint bug must not stop the other files
                    outcome.error, outcome.units, outcome.findings = internal_error(unit, exc), [], []
                    return outcome
    return outcome


def _note_uses(outcome: FileOutcome, file: SourceFile, job: Job, project: PythonProject, digests, touched: set,
               unit_used: dict) -> None:
    """What the reading of `file` used, in the outcome's form for the cache: deps, parts, unit_used, calls."""
    whole = {used for used in touched if isinstance(used, str)}
    parts: dict[str, set[str]] = {}
    marks: dict[tuple, str | None] = {}  # a call record's mark -> its ID in outcome.calls (None: none kept)
    for used in touched:
        if isinstance(used, str):
            continue
        if used[0] == MARK:
            marks[used] = None
        elif used[0] not in whole:
            parts.setdefault(used[0], set()).add(used[1])
    for mark in marks:
        found = project.records.get(mark)
        stored = found if isinstance(found, tuple) else \
            stored_record(found, mark[4], digests, project, job.texts) if found is not None else None
        if stored is not None:
            marks[mark] = stored[0]
            outcome.calls.update(stored[1])
    if any(rid is None for rid in marks.values()):  # a record that cannot be kept: what its runs used, noted plainly
        for mark, rid in marks.items():
            if rid is not None:
                continue
            found = project.records.get(mark)
            if not isinstance(found, CallRecord):
                raise RuntimeError(f"a call record without its uses: {mark[1:3]}")
            uses = found.all_deps()
            whole.update(used for used in uses if isinstance(used, str))
            for used in uses:
                if not isinstance(used, str) and used[0] not in whole:
                    parts.setdefault(used[0], set()).add(used[1])
        parts = {path: names for path, names in parts.items() if path not in whole}
    outcome.deps = {path: file_state(digests, path) for path in sorted(whole | set(parts)) if path != file.path}
    for path, names in sorted(parts.items()):
        state = digests.get(path)
        now = _definitions(project, path, state, job.texts) if path != file.path and state else None
        if now is not None and names <= now.keys():
            outcome.parts[path] = {name: now[name] for name in sorted(names)}
    own = _definitions(project, file.path, digests[file.path]) if file.kind == "python" else None
    if own is not None:  # the file's own units come from these parts (Cache.lookup, _same_definitions)
        outcome.parts[file.path] = own
    numbers = {path: str(index) for index, path in enumerate([file.path, *sorted(outcome.deps)])}

    def keys(key) -> list[str]:
        if isinstance(key, str):
            return [numbers[key]]
        if key[0] != MARK:
            return [f"{numbers[key[0]]}:{key[1]}"]
        if marks[key] is not None:
            return [f"c{marks[key]}"]
        return [item for dep in project.records[key].all_deps() for item in keys(dep)]

    outcome.unit_used = {name: sorted({item for key in used for item in keys(key)})
                         for name, used in unit_used.items()}
