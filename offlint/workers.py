"""The processes a check runs in: files read by forked worker processes, each taking runs of files as it frees up;
work for them once the files are read (Aside); a list of items shared with one forked child (forked_map); and
what every process of a check sets up (the cyclic collector paused, a wide frame stack, ending with its parent).

Each worker keeps one PythonProject across its takes (modules which import each other tend to share a worker's
cached readers), reads its own contiguous run of files and, once that is done, takes files from the end of
another's (WorkQueue). Workers keep the units of files that hold only recipes until the parent asks for those
linking needs (Job.hold_recipes, _worker_held).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from bisect import bisect_left, bisect_right
from dataclasses import replace
from itertools import accumulate
from typing import Callable, NamedTuple

from offlint import file_outcomes
from offlint.cache import FileOutcome, Summary
from offlint.discover import SourceFile
from offlint.job import Job, Progress
from offlint.sources.python_project import PythonProject
from offlint.sources.python_roles import is_test_code
from offlint.types import UnitKind

MIN_FILES_PER_WORKER = 8  # below this, forking workers costs more than it saves
# A worker's take (WorkQueue.take) weighs at most 1/(BATCHES_PER_WORKER x workers) of the files, so that the parent
# unpickles outcomes while the workers still read, not all of them at the end; and at most 1/(GUIDED x workers) of
# what is left, so that the last takes are small and no worker idles while another reads a big last batch.
BATCHES_PER_WORKER = 8
GUIDED = 2


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


class Sent(NamedTuple):
    """The units the workers held of the names asked (_fetch_held): {path: its units of those names}."""

    names: frozenset[str]
    units: dict[str, list]


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
        out.append(file_outcomes.read_one(file, job, project, digests))
        if progress is not None:
            progress(len(out), len(files))
    return out
