"""Reading files into units and checking the units that stand alone, reusing the cache: the check's reading stage.

Each file becomes a `FileOutcome`: its units, suppressions, read error, the findings of its units that need
nothing from other files (recipes and YAML files; launch commands are checked after `api` links them to the
recipes they name), and the files its reading depended on. Outcomes come from the content-hash cache when
valid (outcome_reuse says which); the rest are read (file_outcomes.read_one) by forked worker processes
(workers.py), or in this process when they are few.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from offlint import file_outcomes
from offlint.cache import Cache, Deferred, FileOutcome, Summary, only_units
from offlint.call_records import RecordCheck
from offlint.discover import SourceFile
from offlint.job import Digests, Job, Progress
from offlint.outcome_reuse import DefinitionDigests, Verifier, _reusable_units, _same_definitions, keep_stored_parts
from offlint.workers import Aside, Sent, _compute

@dataclass
class Held:
    """A file a worker read whose units are all recipes, which the worker kept: its outcome without them (its
    findings and suppressions are all there), how many there were (`unit_count`), and `later`, a cache.Deferred
    whose `outcome(names)` gives those of `names` (linking looks up only the recipes that launch commands run).
    Sending every recipe's units to the parent cost both sides about as much as a quarter of the reading: on
    Megatron Bridge 10.7 MB pickled, of which linking used the units of 34 files of 228."""

    outcome: FileOutcome
    unit_count: int
    later: Deferred


def outcomes(job: Job, cache: Cache | None, workers: int | None = None, prune: bool = True,
             digests: dict[str, str] | None = None, first: frozenset[str] = frozenset(),
             progress: Progress | None = None, defer: bool = False,
             wanted: Callable[[list[FileOutcome | Deferred | Held]], set[str]] | None = None,
             aside: Aside | None = None) -> list[FileOutcome | Deferred | Held]:
    """One outcome per readable file of `job.files`, in order; reusing and refreshing `cache`.

    `prune`: the files are the whole tree, so cache entries of files not among them are dropped.
    `digests`: the texts' digests, when the caller already computed them.
    `first`: files the others depend on (the changed files of a pre-commit run): read before the workers start,
    so that they inherit those readers and call results instead of each computing them again.
    `progress`: called with (files read so far, files to read) as reading goes (the terminal's progress bar).
    `defer`: a file not in `first` whose stored outcome is valid as stored comes back undecoded (`cache.Deferred`:
    a pre-commit run decodes only the files it needs, by their summary).
    `wanted`: given every outcome, the recipe names linking will look up; with it, a file that forked workers read
    and whose units are all recipes comes back `Held` (with --strict, whose notes concern every unit, the caller
    passes none). Without a cache too: the workers then pickle 10.7 MB less of Megatron Bridge (its 228 recipe
    files' units; linking uses 34), about 5% of a --no-cache check's wall time.
    `aside`: work the caller wants once every file is read, for forked workers, idle by then (Aside).
    """
    keep_stored_parts(cache.own_parts if cache is not None else None)
    digests = digests if digests is not None else Digests(job.texts, job.index)
    definitions = DefinitionDigests(job.texts)
    verifier = Verifier(job, digests, definitions.modules)
    records = RecordCheck(digests, definitions.get, verifier.record, now=False)
    found: dict[str, FileOutcome] = {}
    missing: list[SourceFile] = []
    for file in job.files:
        if job.texts.get(file.path) is None:
            continue
        hit = cache.lookup(file.path, digests[file.path], digests, definitions.get,
                           defer=defer and file.path not in first, records=records) \
            if cache is not None else None
        if isinstance(hit, Deferred):
            hit.read_again = lambda file=file: file_outcomes.read_one(file, job, verifier.shared(), digests)
        elif hit is not None and hit.digest != digests[file.path]:
            hit = _same_definitions(hit, job.texts[file.path], digests[file.path])
        if hit is not None:
            found[file.path] = hit
        else:
            missing.append(file)
    if cache is not None:
        def reusable(path: str) -> dict[str, tuple]:
            found = _reusable_units(cache, path, digests, definitions, verifier.record)
            verifier.shared_parsed()  # the file's tree, parsed for its definition digests, for its reader
            return found

        job.reusable = reusable
    job.encode = cache.encode if cache is not None else None
    job.keep_uses = cache is not None
    job.hold_recipes = wanted is not None
    # A changed file parsed for its definition digests is not parsed again by the reading (nor by the calls run again)
    project = verifier.shared() if missing and (first or definitions.modules) else verifier.project
    sent: list[Sent] = []  # what the workers sent of the units they held, once every file was read (_compute)
    by_path = {file.path: file for file in missing}

    def keep(outcome: FileOutcome, payload: bytes | None, summary: Summary | None = None, held: int = 0) -> None:
        if held:
            def units(names, outcome=outcome, defined=summary.recipes):
                return _held_units(outcome, defined, names, sent[0] if sent else None, cache)

            def read_again(file=by_path[outcome.path]):
                return file_outcomes.read_one(file, job, verifier.shared(), digests)

            found[outcome.path] = Held(outcome, held, Deferred(outcome.path, outcome.digest, summary, units,
                                                               read_again))
        else:
            found[outcome.path] = outcome
        if cache is not None:
            cache.store(outcome, payload, summary)

    def names() -> set[str]:
        return wanted(list(found.values())) if wanted is not None else set()

    from_workers = _compute(job, missing, digests, workers, first, progress or (lambda done, total: None), keep,
                            project, names, aside)
    if from_workers is not None:
        sent.append(from_workers)
    if cache is not None:
        cache.save({f.path for f in job.files} if prune else None)
    return [found[f.path] for f in job.files if f.path in found]


def _held_units(outcome: FileOutcome, defined: frozenset[str], names: set[str] | None, sent: Sent | None,
                cache: Cache | None) -> FileOutcome | None:
    """A Held file's units of `names`, in its outcome without findings: as its worker sent them, when the names were
    asked of the workers (those of `names` it defines, `defined`); else decoded from the payload this run stored for
    it (None where that does not decode, or without a cache: the Deferred reads the file again)."""
    if names is not None and sent is not None and names & defined <= sent.names:
        return only_units(replace(outcome, units=sent.units.get(outcome.path, [])), names)
    return only_units(cache.previous(outcome.path), names) if cache is not None else None
