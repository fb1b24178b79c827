#!/usr/bin/env python3
"""A wall-clock timeline of one cold `offlint check`: when each stage of the parent process ran, and what each
forked worker did.

    python benchmarks/timeline.py TREE [--workers N] [-- extra offlint check args]

The check runs in this process as `offlint check .` runs from TREE (its workers forked, one per CPU unless
--workers says how many; the cyclic collector paused), with an empty cache in a temporary folder. Each stage below
is timed around every call and printed in order of start, in seconds from this script's start: start, end,
length, name. The rules the parent runs on the launch commands after linking are one line (their calls
summed). Then each worker: its takes of files, the files read, its first and last take, and how long it was
reading; then the parent's CPU time while the workers read (what it took from them), and the end.

Why: with as many cores as workers, whatever the parent does before the fork or after the workers end runs while a
core idles, and its CPU while they read is taken from them. `stage_cpu.py` sums each stage's CPU time in one
process; this shows where those serial stretches lie (session 17's holding of recipe units in the workers, and
session 18's look at the tail, came from it). Nothing here asserts anything about time.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402 (after START: the imports are part of the timeline)
import collections  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from contextlib import redirect_stdout  # noqa: E402

# (module, owner within it or "", function, label): the parent's stages, in the order a cold check reaches them
STAGES = [
    ("offlint.api", "", "load_rules", "rules loaded"),
    ("offlint.api", "", "discover", "files discovered"),
    ("offlint.api", "", "digests_of", "texts read and digested"),
    ("offlint.pipeline", "", "_compute", "files read (workers forked)"),
    ("offlint.api", "", "_recipes_run", "recipes the launches run"),
    ("offlint.workers", "", "_fetch_held", "held recipe units fetched"),
    ("offlint.cache", "Cache", "save", "cache saved"),
    ("offlint.api", "", "_linked_kept", "launch findings kept"),
    ("offlint.api", "", "_decode_linked", "held recipes decoded"),
    ("offlint.api", "", "link_commands", "launches linked"),
    ("offlint.cache", "Cache", "save_linked", "launch findings saved"),
    ("offlint.cache", "Cache", "remember_result", "whole-run result saved"),
]
LAUNCH_CHECKS = "rules on the launch commands"


def _timed(function, note, parent: int, clock=time.perf_counter):
    """`function`, each of its calls in the process `parent` noted as `note(start, end)` by `clock`."""
    def timed(*args, **kwargs):
        begin = clock()
        try:
            return function(*args, **kwargs)
        finally:
            if os.getpid() == parent:
                note(begin, clock())
    return timed


_TAKES_FILE = ""  # where the workers note their takes (inherited through the fork)
_TAKE = None  # workers._worker_take itself


def _timed_take():
    """workers._worker_take in a worker, noted as a line: pid, start, end, files (at module level: the pool sends
    the function by name)."""
    begin = time.perf_counter()
    files = _TAKE()
    line = f"{os.getpid()} {begin - START:.6f} {time.perf_counter() - START:.6f} {len(files)}\n"
    descriptor = os.open(_TAKES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode())  # one small write: whole, whichever worker writes too
    finally:
        os.close(descriptor)
    return files


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # more `offlint check` arguments
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="%(prog)s TREE [--workers N] [-- extra offlint check args]")
    parser.add_argument("tree", help="the tree to check (the check runs from there)")
    parser.add_argument("--workers", type=int, help="worker processes (default: one per CPU)")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not os.path.isdir(args.tree):
        print(f"timeline.py: error: {args.tree}: not a directory; give the tree to check", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers < 1:
        print("timeline.py: error: --workers must be at least 1", file=sys.stderr)
        return 2
    os.chdir(args.tree)
    if args.workers is not None:
        os.cpu_count = lambda: args.workers
    import importlib

    from offlint import engine, pipeline, workers
    from offlint.cli import main as offlint_main
    from offlint.terminal import plural

    imported = time.perf_counter()
    parent = os.getpid()
    spans: list[tuple[float, float, str]] = [(START, imported, "offlint imported")]
    for module_name, owner_name, name, label in STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        setattr(owner, name, _timed(getattr(owner, name), lambda b, e, label=label: spans.append((b, e, label)),
                                    parent))

    reading: list[float] = []  # the parent's CPU time in `_compute`, once it returned
    pipeline._compute = _timed(pipeline._compute, lambda b, e: reading.append(e - b), parent, time.process_time)
    launch_checks: list[tuple[float, float]] = []

    def launch_check(begin: float, end: float) -> None:
        if reading:  # once the files are read, the parent checks only the launch commands it linked
            launch_checks.append((begin, end))

    engine.check_unit = _timed(engine.check_unit, launch_check, parent)
    global _TAKES_FILE, _TAKE
    with tempfile.TemporaryDirectory(prefix="offlint-timeline-") as scratch:
        _TAKES_FILE, _TAKE = os.path.join(scratch, "takes"), workers._worker_take
        workers._worker_take = _timed_take
        os.environ["OFFLINT_CACHE_DIR"] = os.path.join(scratch, "cache")
        try:
            with redirect_stdout(io.StringIO()):
                offlint_main(["check", ".", "-q", *extra], standalone_mode=False)
        except SystemExit:
            pass
        end = time.perf_counter()
        workers = collections.defaultdict(list)
        if os.path.exists(_TAKES_FILE):
            with open(_TAKES_FILE) as lines:
                for line in lines:
                    pid, begin, finish, files = line.split()
                    workers[pid].append((float(begin), float(finish), int(files)))
    if launch_checks:
        spans.append((launch_checks[0][0], launch_checks[-1][1],
                      f"{LAUNCH_CHECKS} ({plural(len(launch_checks), 'unit')}, "
                      f"{sum(e - b for b, e in launch_checks):.3f} s in them)"))
    for begin, finish, label in sorted(spans):
        print(f"{begin - START:8.3f} {finish - START:8.3f} {finish - begin:7.3f}  {label}")
    for index, (pid, takes) in enumerate(sorted(workers.items()), start=1):
        print(f"worker {index}: {plural(len(takes), 'take')}, {plural(sum(t[2] for t in takes), 'file')}, "
              f"first {min(t[0] for t in takes):.3f}, last {max(t[1] for t in takes):.3f}, "
              f"reading {sum(t[1] - t[0] for t in takes):.3f} s")
    if reading:
        print(f"parent CPU while the files were read: {reading[0]:.3f} s")
    print(f"end {end - START:.3f}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
