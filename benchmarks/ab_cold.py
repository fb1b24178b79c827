#!/usr/bin/env python3
"""Two builds of offlint compared on cold checks of one tree, in alternating pairs, each pair between two floor runs.

    python benchmarks/ab_cold.py TREE BUILD_A BUILD_B [--pairs 8] [-- extra offlint args]

BUILD_A and BUILD_B are folders holding an `offlint` package (a `git archive` of a commit, say); each check runs
`python -m offlint check .` from TREE with that folder first on PYTHONPATH and an empty cache. Pair i runs A then
B (B then A for odd i), between two runs of bench_check.py's floor (reading and `ast.parse`-ing, single-threaded,
every Python file offlint's discovery finds in TREE). Prints each pair (wall, its ratio to the mean of the two
floors around it, CPU), then each build's median ratio to the floor and the medians of the pairs' B/A
ratios of wall and CPU time.

Why pairs: on a shared machine the speed swings within minutes (the same floor took 2.9-5.0 s in one session), more
than a change of a few percent; the two runs of a pair and their floors are a minute apart at most, and the
alternating order cancels a drift within a pair. Each build's modules are compiled first, as `pip install`
compiles them: under PYTHONDONTWRITEBYTECODE (set on this machine) a fresh `git archive` is otherwise compiled
again by every run, and by every worker for the modules it imports itself (0.1-0.2 s a run). Nothing here asserts
anything about time.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_check import measure_floor  # (this folder is the script's: first on sys.path)


def _cold(tree: str, build: str, extra: list[str]) -> tuple[float, float]:
    """(wall, CPU of the check and its workers) of one cold check."""
    cache = tempfile.mkdtemp(prefix="offlint-ab-")
    env = dict(os.environ, PYTHONPATH=build, OFFLINT_CACHE_DIR=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", *extra], cwd=tree, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: findings; anything else did not check the tree
        print(f"ab_cold: offlint ({build}) exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}",
              file=sys.stderr)
        sys.exit(2)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(cache, ignore_errors=True)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("build_a")
    parser.add_argument("build_b")
    parser.add_argument("--pairs", type=int, default=8)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:cut]), argv[cut + 1:]  # after `--`: offlint's own arguments
    for build in (args.build_a, args.build_b):
        if not os.path.isdir(os.path.join(build, "offlint")):
            parser.error(f"{build}: no offlint package there; give a folder holding one (a git archive of a commit)")
    builds = [os.path.abspath(args.build_a), os.path.abspath(args.build_b)]
    for build in builds:  # compiled as `pip install` compiles them: no run pays for it (bench_check.py does the same)
        compileall.compile_dir(os.path.join(build, "offlint"), quiet=1)
    pairs = []
    for index in range(args.pairs):
        first = measure_floor(Path(args.tree))["wall"]
        runs = {build: _cold(args.tree, build, extra) for build in (builds if index % 2 == 0 else builds[::-1])}
        floor = (first + measure_floor(Path(args.tree))["wall"]) / 2
        a, b = runs[builds[0]], runs[builds[1]]
        pairs.append((floor, a, b))
        print(f"pair {index + 1}: floor {floor:.2f} s   A {a[0]:.2f} s ({a[0] / floor:.2f}x floor, CPU {a[1]:.2f} s)   "
              f"B {b[0]:.2f} s ({b[0] / floor:.2f}x floor, CPU {b[1]:.2f} s)   B/A {b[0] / a[0]:.3f}", flush=True)
    for name, build, side in (("A", args.build_a, 1), ("B", args.build_b, 2)):
        ratios = [pair[side][0] / pair[0] for pair in pairs]
        print(f"{name} {build}: x floor median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
              f"max {max(ratios):.2f}), CPU median {statistics.median(pair[side][1] for pair in pairs):.2f} s")
    print(f"B/A: wall {statistics.median(b[0] / a[0] for _, a, b in pairs):.3f}, "
          f"CPU {statistics.median(b[1] / a[1] for _, a, b in pairs):.3f} (medians of the pairs)")


if __name__ == "__main__":
    main()
