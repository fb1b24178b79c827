"""Reading files into units and checking the units that stand alone: cached, and in parallel worker processes.

Each file becomes a `FileOutcome`: its units, suppressions, read error, the findings of its units that need
nothing from other files (recipes and YAML files; launch commands are checked after `api` links them to the
recipes they name), and the files its reading depended on. Outcomes come from the content-hash cache when
valid; the rest are computed by worker processes, each with its own lazily-read view of the Python tree, each
reading its own contiguous run of files (modules which import each other tend to share a worker's cached readers)
and, once that is done, taking files from the end of another's.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
import signal
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Callable, NamedTuple

from offlint.cache import Cache, Deferred, FileOutcome, Summary, digest, only_units
from offlint.call_records import RecordCheck, file_state, merge_moves, record_id
from offlint.discover import SourceFile
from offlint.part_digests import definition_digests, line_moves, means_the_same
from offlint.reading import OnFirstUse
from offlint.relocation import Unmovable, relocate
from offlint.resolve import resolve
from offlint.rules import Rule
from offlint.source_files import read_files
from offlint.sources.module_index import LOOKUP, ModuleIndex, lookup_state
from offlint.sources.python_project import PythonProject
from offlint.sources.python_records import MARK, CallRecord
from offlint.sources.python_roles import is_test_code
from offlint.types import FileError, UnitKind
from offlint.versions import Version

Progress = Callable[[int, int], None]  # (files read, files to read)

MIN_FILES_PER_WORKER = 8  # below this, forking workers costs more than it saves
# A worker's take (WorkQueue.take) weighs at most 1/(BATCHES_PER_WORKER x workers) of the files, so that the parent
# unpickles outcomes while the workers still read, not all of them at the end; and at most 1/(GUIDED x workers) of
# what is left, so that the last takes are small and no worker idles while another reads a big last batch.
BATCHES_PER_WORKER = 8
GUIDED = 2


@dataclass
class Job:
    """What every worker needs; inherited by forked workers, never pickled per file."""

    files: list[SourceFile]
    texts: Texts  # path -> text (None when unreadable), the Python tree included, read on first use
    python_paths: list[str]  # the Python files imports may resolve to
    rules: list[Rule]
    version: Version
    strict: bool
    # path -> {unit name: (unit or None, its findings, what its reading used)}: the units of a file read again that
    # are still valid (_reusable_units), found by the worker that reads it; the reader skips them
    reusable: Callable[[str], dict[str, tuple]] = lambda path: {}
    encode: Callable[[object], bytes] | None = None  # the cache's encoding: workers encode what they read, in parallel
    # Whether outcomes note what their reading used (deps, parts, unit_used, calls): only a cache reads them; a run
    # without one (--no-cache) skips encoding the call records and the definition digests
    keep_uses: bool = True
    # Whether forked workers keep the units of a file that holds only recipes, sending them only when linking names
    # them (_worker_held): set by `outcomes` when a caller says which it will look up. Should a worker not answer,
    # the file's payload stored this run gives them, or, without a cache, the file is read again
    hold_recipes: bool = False
    _index: ModuleIndex | None = None

    def index(self) -> ModuleIndex:
        """The module index of the Python files (made on first use; forked workers inherit it)."""
        if self._index is None:
            self._index = ModuleIndex(self.python_paths, self.texts.get)
        return self._index


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


class Texts(OnFirstUse):
    """path -> text; None for a file that cannot be read (why: `problems`)."""

    def __init__(self, read):
        super().__init__(self._text)
        self._read = read  # path -> (text, error message or "")
        self.problems: dict[str, str] = {}

    def _text(self, path: str) -> str | None:
        text, error = self._read(path)
        if error:
            self.problems[path] = error
        return None if error else text


class Digests(OnFirstUse):
    """path -> digest of its text; None for a file that cannot be read. A lookup of the set of files
    (module_index) -> what its answer depends on now."""

    def __init__(self, texts: Texts, index: Callable[[], ModuleIndex]):
        super().__init__(self._state)
        self._texts, self._index = texts, index

    def _state(self, path: str) -> str | None:
        if path.startswith(LOOKUP):
            return lookup_state(path, self._index())
        text = self._texts.get(path)
        return None if text is None else digest(text)


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


def digests_of(job: Job, paths: list[str]) -> Digests:
    """The digests of `paths`, computed now (the whole-run cache key needs every one of them)."""
    digests = Digests(job.texts, job.index)
    for path in paths:
        digests.get(path)
    return digests


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
    global _STORED
    _STORED = cache.own_parts if cache is not None else None
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
            hit.read_again = lambda file=file: read_one(file, job, verifier.shared(), digests)
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
                return read_one(file, job, verifier.shared(), digests)

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


class Sent(NamedTuple):
    """The units the workers held of the names asked (_fetch_held): {path: its units of those names}."""

    names: frozenset[str]
    units: dict[str, list]


def _held_units(outcome: FileOutcome, defined: frozenset[str], names: set[str] | None, sent: Sent | None,
                cache: Cache | None) -> FileOutcome | None:
    """A Held file's units of `names`, in its outcome without findings: as its worker sent them, when the names were
    asked of the workers (those of `names` it defines, `defined`); else decoded from the payload this run stored for
    it (None where that does not decode, or without a cache: the Deferred reads the file again)."""
    if names is not None and sent is not None and names & defined <= sent.names:
        return only_units(replace(outcome, units=sent.units.get(outcome.path, [])), names)
    return only_units(cache.previous(outcome.path), names) if cache is not None else None


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


@contextlib.contextmanager
def cyclic_gc_paused():
    """Reading builds millions of small, long-lived objects (syntax trees, readers, assignments); the cyclic
    collector rescans them all on every full collection, which on Megatron Bridge cost a third of the cold run
    (19.5 s against 14.4 s single-threaded; unpickling a warm cache likewise) for about 55 MB of cyclic garbage. Reference counting still frees
    everything else; the collector's previous state is restored afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def on_wide_stack(function: Callable, *args):
    """`function(*args)`, its calls kept in one large chunk of the interpreter's frame stack. CPython 3.11 and 3.12
    keep a thread's frames in 16 KiB chunks and unmap a chunk as soon as the frame at its start returns (later 3.13
    and 3.14 releases keep one: python/cpython#142183); the readers recurse deep, and every call crossing a chunk's
    start maps a fresh one and faults its pages in. A cold check of Megatron Bridge made 65,000 mmap/munmap pairs of
    16 KiB (0.4 s of system time of 7.3 s of CPU). This frame declares a stack of WIDE_STACK_SLOTS, which it never
    uses: CPython gives it a chunk of twice that, and the frames of its calls fit in the rest (pages are committed
    as they are touched). Forked workers inherit the chunk with the stack they were forked from."""
    return function(*args)


WIDE_STACK_SLOTS = 1 << 17  # 1 MiB of 8-byte slots: a recursion of 1,000 frames of up to 1 KiB fits beside it
try:
    on_wide_stack.__code__ = on_wide_stack.__code__.replace(co_stacksize=WIDE_STACK_SLOTS)
except (AttributeError, TypeError, ValueError):  # (an interpreter whose code objects do not take it: plain calls)
    pass


def worker_count(workers: int | None) -> int:
    """The worker processes a run may use: `workers` as given (--workers), else one per CPU."""
    return workers if workers is not None else (os.cpu_count() or 1)


def _compute(job: Job, files: list[SourceFile], digests: dict[str, str], workers: int | None,
             first: frozenset[str], progress: Progress, keep: Callable[..., None],
             project: PythonProject | None = None, wanted: Callable[[], set[str]] = set,
             aside: Aside | None = None) -> Sent | None:
    """Read `files`, handing each outcome to `keep` with its encoding for the cache when a worker made it, as the
    outcomes come: the parent stores a worker's batch while the workers read on, not every file once they are done
    (0.14 s after the workers on Megatron Bridge). `project`: one that read this tree already (the calls run again
    for the cache), read on. Where workers held units (Job.hold_recipes), those of the names `wanted()` gives once
    every file is read come back; else None. Forked workers then take the tasks of `aside`, which shuts their pool
    down."""
    if not files:  # every outcome came from the cache: the rules and the readers are not needed (0.04 s of imports)
        return None
    import offlint.engine  # noqa: F401 (read_one's, imported once before any worker is forked)

    count = max(1, min(worker_count(workers), len(files) // MIN_FILES_PER_WORKER))
    if count == 1:
        for outcome in _read_batch(job, files, digests, progress=progress, project=project):
            keep(outcome, None)
        return None
    import multiprocessing  # here: a small pre-commit run never forks, and need not import it
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    offlint.engine.prepare(job.rules, job.version)  # what a first unit check works out: once, before the fork

    if "fork" not in multiprocessing.get_all_start_methods():
        for outcome in _read_batch(job, files, digests):
            keep(outcome, None)
        return None
    global _JOB, _DIGESTS, _PROJECT, _QUEUE, _BARRIER
    leading = [f for f in files if f.path in first]
    rest = [f for f in files if f.path not in first]
    context = multiprocessing.get_context("fork")
    try:
        _PROJECT = project
        for outcome in _read_batch(job, leading, digests, reuse_project=True) if leading else ():
            keep(outcome, None)
        _JOB, _DIGESTS = job, digests  # forked workers inherit them (and the project the leading files built)
        read: set[str] = set()

        def read_here() -> None:
            """The files no worker sent, read in this process: the pool could not start, or lost a worker."""
            for outcome in _read_batch(job, [f for f in rest if f.path not in read], digests, reuse_project=True):
                keep(outcome, None)

        try:
            _QUEUE = WorkQueue(shares(job, rest, count), context)
            _BARRIER = context.Barrier(count)
            pool = ProcessPoolExecutor(count, mp_context=context, initializer=end_with_parent,
                                       initargs=(os.getpid(),))
        except (OSError, ImportError):  # no working POSIX semaphores (a container without /dev/shm)
            read_here()
            return None
        held = False
        fetched: Sent | None = None
        handed = False
        try:
            try:
                first_task = pool.submit(_worker_take)  # (the workers are forked here)
            except OSError:  # fork() refused (a process limit, no memory to copy): no worker took any file
                _end_workers(pool)
                read_here()
                return None
            # Two tasks per worker in flight, one more for each that brought files back: a worker never waits for
            # the parent to hand it work, and the parent unpickles one batch while the workers read the next.
            pending = {first_task, *(pool.submit(_worker_take) for _ in range(2 * count - 1))}
            try:
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        batch = future.result()
                        if batch:  # an empty one: every file was taken (some may still be read)
                            pending.add(pool.submit(_worker_take))
                        for outcome, payload, summary, units in batch:
                            keep(outcome, payload, summary, units)
                            read.add(outcome.path)
                            held = held or units > 0
                    progress(len(leading) + len(read), len(files))
            except BrokenProcessPool:  # a worker ended abruptly (the OOM killer); the units the workers held are
                read_here()  # (read again where linking needs them: no Sent)
                return None
            if held:
                fetched = _fetch_held(pool, count, frozenset(wanted()))
            if aside is not None:
                aside.start(pool)
                handed = True  # (nor are the workers' exits waited for here: 0.03 s on Megatron Bridge)
        finally:
            if not handed:
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        _JOB = _DIGESTS = _PROJECT = _QUEUE = _BARRIER = None
    assert len(read) == len(rest), "a file was not read"
    return fetched


def end_with_parent(parent: int) -> None:
    """In a forked worker, first: the worker ends when the process that forked it ends, however that ends. A CI
    job's time limit (`timeout 60 offlint check .`) sends SIGTERM to offlint alone; its workers, waiting on their
    task pipe (whose other end they hold too), stayed for ever, each holding the caller's standard error open, so
    a caller reading it waited for ever too. Linux's PR_SET_PDEATHSIG; elsewhere nothing is set."""
    try:
        import ctypes

        set_death_signal = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):  # not Linux
        return
    set_death_signal(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before that was set: nothing would signal this worker
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _end_workers(pool) -> None:
    """The workers a pool forked before a fork failed: they wait for tasks that no thread of the pool will send
    (concurrent.futures starts that thread once every worker is forked), so they are ended here."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
        process.join()


class Aside:
    """Work the parent wants once every file is read, which no outcome changes: the config fields the tree's classes
    define (tree_keys), asked after the launches are linked and checked. With forked workers, idle from then on,
    the tasks go to their pool once the files are read and the recipes the launches run fetched; the workers work
    them out while the parent links the launches (Megatron Bridge: 0.13 s of a cold check's serial tail), and the
    pool is shut down on leaving the Aside. Without workers (a run too small to fork them) `result` is None: the
    caller works it out itself.

    A task is `function(text, *args)`: a module-level function (a worker is sent its name and `args`), `text`
    path -> the job's text."""

    def __init__(self) -> None:
        self._tasks: list[tuple[str, Callable, tuple]] = []
        self._futures: dict[str, object] = {}
        self._pool = None
        self._joiner = None  # the pool's thread that joins its workers (concurrent.futures), joined on leaving

    def add(self, name: str, function: Callable, *args) -> None:
        self._tasks.append((name, function, args))

    def start(self, pool) -> None:
        """Hands the tasks to `pool`, which the Aside shuts down from now on. It is told to shut down at once: its
        workers end as soon as the tasks are done, while the parent links, and leaving the Aside waits for
        nothing (it had waited 0.026 s for their exits at the end of a cold check of Megatron Bridge)."""
        self._pool = pool
        for name, function, args in self._tasks:
            try:
                self._futures[name] = pool.submit(_aside_task, function, args)
            except RuntimeError:  # BrokenProcessPool: a worker stopped since; the caller works it out
                break
        # (the tasks handed over still run: only new ones are refused. The pool's thread that joins the workers once
        # they end is joined on leaving, which shutdown(wait=False) would otherwise leave to the interpreter's exit)
        self._joiner = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False)

    def result(self, name: str):
        """The task's answer, as a worker worked it out; None where none did (no workers, or a task that failed:
        the caller's own working gives the same answer)."""
        future = self._futures.get(name)
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - a worker that stopped, or an offlint bug in a task: worked out again
            return None

    def settle(self) -> None:
        """Wait until the pool's workers have ended, their tasks answered (worked out while the parent linked: on
        Megatron Bridge they are done by then). A process forked after this (forked_map) is forked from a process
        with one thread: fork() in one with more may leave a lock another thread held locked in the child for ever
        (Python 3.12 warns of it)."""
        if self._joiner is not None:
            self._joiner.join()
            self._joiner = None

    def __enter__(self) -> Aside:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self.settle()


MIN_FORKED_ITEMS = 32  # below this, forking a child for half of forked_map's items costs more than it saves
LOCK_PATIENCE = 2.0  # seconds forked_map's processes wait for the lock the other holds for a few microseconds


def forked_map(function: Callable, items: list, workers: int | None = None) -> list:
    """`[function(item) for item in items]`, shared with a child forked for it: this process works through the items
    from the front, the child from the back, each taking the next under a lock until they meet, so neither waits
    on the other whatever the items cost. For the launch commands' rules, which run once linking is done, when
    every other core is idle (Megatron Bridge: 265 launches, 0.14 s of a cold check's serial tail; with the
    halves fixed, the parent waited 0.036 s for a child slowed by its fork). The child inherits everything the
    items need; only its answers come back, pickled. Where it cannot fork, or the child fails, this process works
    out the items it lacks: the answers are the same either way."""
    if worker_count(workers) < 2 or len(items) < MIN_FORKED_ITEMS or not hasattr(os, "fork"):
        return [function(item) for item in items]
    import multiprocessing
    import pickle

    try:
        ends = _Ends(len(items), multiprocessing.get_context("fork"))
    except (OSError, ImportError):  # no working POSIX semaphores (a container without /dev/shm)
        return [function(item) for item in items]
    readable, writable = os.pipe()
    try:
        child = os.fork()
    except OSError:
        os.close(readable)
        os.close(writable)
        return [function(item) for item in items]
    if child == 0:  # the child: its answers down the pipe, then gone without running any exit handler
        status = 1
        try:
            os.close(readable)
            answers = {}
            while (index := ends.take(from_back=True)) is not None:
                answers[index] = function(items[index])
            with os.fdopen(writable, "wb") as out:
                out.write(pickle.dumps(answers, pickle.HIGHEST_PROTOCOL))
            status = 0
        finally:
            os._exit(status)
    os.close(writable)
    answers = {}
    while (index := ends.take(from_back=False)) is not None:
        answers[index] = function(items[index])
    with os.fdopen(readable, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(child, 0)
    try:
        theirs = pickle.loads(data) if status == 0 else None
    except Exception:  # noqa: BLE001 - a child cut short: its items are worked out here
        theirs = None
    if isinstance(theirs, dict):
        answers.update((index, answer) for index, answer in theirs.items() if index not in answers)
    return [answers[index] if index in answers else function(item) for index, item in enumerate(items)]


class _Ends:
    """The indices of the items forked_map's two processes have not taken yet: one takes from the front, the other
    from the back, under a lock in memory both share (forked with it)."""

    def __init__(self, count: int, context) -> None:
        self.bounds = context.RawArray("i", [0, count])  # the next index from the front, the end of those left
        self.lock = context.Lock()

    def take(self, from_back: bool) -> int | None:
        """The next index; None once none is left, or where the other process holds the lock too long (it was
        killed holding it): neither waits forever, and what one does not take the other takes, or the parent
        works out at the end."""
        if not self.lock.acquire(timeout=LOCK_PATIENCE):
            return None
        try:
            bounds = self.bounds
            if bounds[0] >= bounds[1]:
                return None
            if from_back:
                bounds[1] -= 1
                return bounds[1]
            bounds[0] += 1
            return bounds[0] - 1
        finally:
            self.lock.release()


def _aside_task(function: Callable, args: tuple):
    """An Aside task, in a worker: on the job's texts it inherited."""
    assert _JOB is not None
    return function(_JOB.texts.get, *args)


def _fetch_held(pool, count: int, names: frozenset[str]) -> Sent | None:
    """The units of `names` the workers hold, asked of each worker once (_worker_held); None when one could not
    answer (each Held file is then decoded from its stored payload)."""
    units: dict[str, list] = {}
    for future in [pool.submit(_worker_held, names) for _ in range(count)]:
        part = future.result()
        if part is None:
            return None
        units.update(part)
    return Sent(names, units)


_JOB: Job | None = None
_DIGESTS: dict[str, str] | None = None
_PROJECT: PythonProject | None = None  # one per worker process, kept across its batches
_QUEUE: WorkQueue | None = None  # the files the workers take
_BARRIER = None  # the workers' barrier: each of them answers one _worker_held
_HELD: dict[str, list] = {}  # in a worker: path -> the units it kept of a file it read (Job.hold_recipes)
HELD_TIMEOUT = 10.0  # seconds a worker waits at the barrier for the others (idle, they take milliseconds)


def _weight(job: Job, file: SourceFile) -> int:
    """About how long a file takes to read, in characters. A walked test module weighs as an empty file (it is not
    even parsed): counted by its size, Bridge's tests/ made three of eight runs nearly empty."""
    return 2000 + (0 if file.kind == "python" and not file.explicit and is_test_code(file.path) else
                   len(job.texts.get(file.path, "")))


def shares(job: Job, files: list[SourceFile], count: int) -> list[list[tuple[SourceFile, int]]]:
    """The files each of `count` workers reads first, with their weights: runs of files in path order, of similar
    total weight (files of one directory tend to import the same modules). Megatron Bridge 067f987, two workers:
    754 readers (97 modules read by both) and 3,005 followed-call runs, against 775 (118) and 3,106 with sixteen
    runs handed out as workers freed up; a split by import affinity did no better (benchmarks/README.md)."""
    ordered = sorted(files, key=lambda f: f.path)
    weights = [_weight(job, f) for f in ordered]
    target = sum(weights) / max(count, 1)
    runs: list[list[tuple[SourceFile, int]]] = [[]]
    size = 0
    for file, weight in zip(ordered, weights):
        if size >= target and len(runs) < count:
            runs.append([])
            size = 0
        runs[-1].append((file, weight))
        size += weight
    return runs + [[] for _ in range(count - len(runs))]


class WorkQueue:
    """The workers' shares of the files, and cursors in shared memory by which forked workers take them: a worker
    takes the next files of its own share and, that share done, the last ones of the share with the most weight
    left (stealing from the end, so that the owner, still reading, is not left waiting on the thief). Each file is
    taken once: the cursors change under their lock.

    A take weighs at most a fixed part of all the files and a shrinking part of what is left (guided
    self-scheduling, BATCHES_PER_WORKER and GUIDED). Megatron Bridge 067f987 with takes of a fixed count of files:
    one worker read its last 102 files (1.2 s) while the other had none left."""

    def __init__(self, runs: list[list[tuple[SourceFile, int]]], context) -> None:
        self.runs = [[file for file, _ in run] for run in runs]
        # per share: the weight of its files before each index
        self.before = [list(accumulate((weight for _, weight in run), initial=0)) for run in runs]
        self.largest = sum(before[-1] for before in self.before) / (len(runs) * BATCHES_PER_WORKER)
        # per share (next, end), then the count of shares claimed by a worker
        self.cursors = context.Array("i", [n for run in runs for n in (0, len(run))] + [0])
        self.share: int | None = None  # in a worker: its own share

    def take(self) -> list[SourceFile]:
        """This worker's next files; none once every file was taken."""
        cursors, parts = self.cursors, len(self.runs)
        with cursors.get_lock():
            if self.share is None:
                self.share = cursors[2 * parts] % parts
                cursors[2 * parts] += 1
            left = [self.before[s][cursors[2 * s + 1]] - self.before[s][cursors[2 * s]] for s in range(parts)]
            if not any(left):
                return []
            most = min(self.largest, sum(left) / (parts * GUIDED))
            own = self.share
            start, end = cursors[2 * own], cursors[2 * own + 1]
            before = self.before[own]
            if start < end:  # the first file reaching `most`
                stop = min(end, max(start + 1, bisect_left(before, before[start] + most, start + 1, end + 1)))
                cursors[2 * own] = stop
                return self.runs[own][start:stop]
            other = max(range(parts), key=lambda s: (left[s], -s))
            start, end = cursors[2 * other], cursors[2 * other + 1]
            before = self.before[other]
            want = min(most, left[other] / 2)  # the last file reaching it, counted from the end
            begin = max(start, min(end - 1, bisect_right(before, before[end] - want, start, end + 1) - 1))
            cursors[2 * other + 1] = begin
            return self.runs[other][begin:end]


def _worker_take() -> list[tuple[FileOutcome, bytes | None, Summary | None, int]]:
    """This worker's next files read: per file (outcome, its payload, its Summary where the units stay here, how
    many units stay here)."""
    assert _JOB is not None and _DIGESTS is not None and _QUEUE is not None
    return [_sent(outcome, _encoded(_JOB, outcome)) for outcome in
            _read_batch(_JOB, _QUEUE.take(), _DIGESTS, reuse_project=True)]


def _sent(outcome: FileOutcome, payload: bytes | None) -> tuple[FileOutcome, bytes | None, Summary | None, int]:
    """What a worker sends of one file: all of it, or, where the job holds recipes and the file's units are all
    recipes with a fallback should the worker not send them (a payload stored; without a cache, reading the file
    again), its outcome without them and its Summary (made here, from them); they stay in _HELD."""
    assert _JOB is not None
    units = outcome.units
    if not (_JOB.hold_recipes and (payload is not None or _JOB.encode is None) and units and outcome.error is None
            and all(unit.kind == UnitKind.RECIPE for unit in units)):
        return outcome, payload, None, 0
    _HELD[outcome.path] = units
    return replace(outcome, units=[]), payload, Summary.of(outcome), len(units)


def _worker_held(names: frozenset[str]) -> dict[str, list] | None:
    """{path: its held units of `names`} of this worker; None when not every worker reached the barrier in time.
    The barrier makes each worker take one of these tasks: each waits there until all do."""
    import threading

    assert _BARRIER is not None
    try:
        _BARRIER.wait(HELD_TIMEOUT)
    except threading.BrokenBarrierError:
        return None
    found = {path: [unit for unit in units if unit.name in names] for path, units in _HELD.items()}
    return {path: units for path, units in found.items() if units}


def _encoded(job: Job, outcome: FileOutcome) -> bytes | None:
    """The cache's encoding of an outcome, made in the worker (the parent would otherwise encode every file of a
    cold run one after another once the workers are done); None where the format cannot hold it."""
    if job.encode is None:
        return None
    try:
        return job.encode(outcome)
    except (TypeError, ValueError, RecursionError):
        return None


def _read_batch(job: Job, files: list[SourceFile], digests: dict[str, str],
                reuse_project: bool = False, progress: Progress | None = None,
                project: PythonProject | None = None) -> list[FileOutcome]:
    global _PROJECT
    project = project if project is not None else _PROJECT if reuse_project and _PROJECT is not None else \
        PythonProject(job.python_paths, job.texts.get, job.index())
    if reuse_project:
        _PROJECT = project
    out = []
    for file in files:
        out.append(read_one(file, job, project, digests))
        if progress is not None:
            progress(len(out), len(files))
    return out


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


_DEFINITIONS: dict[tuple[str, str], dict[str, str]] = {}  # (path, digest of its text) -> definition_digests
# (path, digest of its text) -> the definition_digests a cache entry of that file as it is keeps (Cache.own_parts)
_STORED: Callable[[str, str], dict[str, str] | None] | None = None


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
