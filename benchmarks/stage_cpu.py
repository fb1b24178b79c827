#!/usr/bin/env python3
"""CPU time of each stage of a cold `offlint check` with an empty cache, in one process, without a profiler.

    python benchmarks/stage_cpu.py TREE [-- extra offlint check args]

The check runs in this process with one worker (no fork: every stage is this process's CPU time) and the cyclic
collector off, as the command line runs it; each stage below is timed with `process_time` around its outermost
call. The stages nest where the reading does (a model card's commands are read as shell inside its YAML file;
the rules run inside the reading of a file): the indented lines are parts, not a sum. A profiler slows Python code about fourfold and C code not at all, so it misstates the shares; this does
not. CPU time, not wall, is what a shared machine still measures: compare two builds by alternating runs of each
(`PYTHONPATH=BUILD python benchmarks/stage_cpu.py TREE`), and read minima. One run per process: a second run
in the same process would find the memory model's memos warm. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import collections
import gc
import io
import os
import sys
import tempfile
import time
from contextlib import redirect_stdout

# (module, owner within it or "", function, label): the stages, outermost calls only
STAGES = [
    ("offlint.source_files", "", "read_files", "reading (all kinds)"),
    ("offlint.sources", "", "_python", "  Python files"),
    ("offlint.sources.shell", "", "read_shell", "  shell scripts"),
    ("offlint.sources", "", "_yaml", "  YAML files"),
    ("offlint.engine", "", "check_unit", "rules (engine.check_unit)"),
    ("offlint.file_outcomes", "", "_note_uses", "noting what each reading used"),
    ("offlint.cache", "Cache", "store", "storing outcomes (encoding)"),
    ("offlint.cache", "Cache", "save", "writing the cache"),
]


def _timed(spent: collections.Counter, depth: collections.Counter, label: str, function):
    def timed(*args, **kwargs):
        if depth[label]:
            return function(*args, **kwargs)
        depth[label] += 1
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - start
            depth[label] -= 1
    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", help="the tree to check (the check runs from there)")
    parser.add_argument("extra", nargs="*", help="after --: more `offlint check` arguments")
    args = parser.parse_args()
    if not os.path.isdir(args.tree):
        print(f"stage_cpu.py: error: {args.tree}: not a directory; give the tree to check", file=sys.stderr)
        return 2
    os.chdir(args.tree)
    os.cpu_count = lambda: 1  # one worker: the reading runs in this process
    import importlib

    spent: collections.Counter = collections.Counter()
    depth: collections.Counter = collections.Counter()
    for module_name, owner_name, name, label in STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        setattr(owner, name, _timed(spent, depth, label, getattr(owner, name)))
    from offlint.cli import main as offlint_main

    gc.disable()
    with tempfile.TemporaryDirectory(prefix="offlint-stage-cpu-") as cache:
        os.environ["OFFLINT_CACHE_DIR"] = cache
        start = time.process_time()
        try:
            with redirect_stdout(io.StringIO()):
                offlint_main(["check", ".", "-q", *args.extra], standalone_mode=False)
        except SystemExit:
            pass
        total = time.process_time() - start
    print(f"{total:.2f} s CPU in all")
    for _, _, _, label in STAGES:
        print(f"  {label:<34} {spent[label]:6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
