#!/usr/bin/env python3
"""Builds of offlint compared by the Python calls a cold check makes: a figure the machine's speed does not move.

    python benchmarks/call_count.py TREE BUILD [BUILD ...] [-- extra offlint check args]

Each BUILD is a folder holding an `offlint` package (and `rules/`: a `git archive COMMIT offlint rules`, say). For
each, profile_check.py runs one cold check of TREE in one process under cProfile, and this prints the calls it
counted (every Python function and builtin called, summed over the profiler's code objects: profile_check.py's
"calls, every code object" line), the units and findings, and the ratio to the first BUILD.

Why: on this shared machine the wall and CPU time of one build swing by 30% within minutes, so a change of 10% needs
many alternating pairs (ab_cold.py) to be seen, and a slow drift over many commits is never seen at all. The call
count is the same on every run of the same build and tree to within a few hundred calls in millions (PYTHONHASHSEED
is 0 unless set), and it moves with the interpretive work. (Until session 58 it was pstats' total_calls, which keeps
one count of the functions sharing a file, line and name, as the methods dataclasses generate do, which one varying
from process to process: a swing of 1%, 176,000 calls on Megatron-LM d98e8a6.) Session 25 found two accidental
costs with it (a module walked once per bridge, 23.3 M calls against 17.4 M; an entry script followed once per
launch) that the session-by-session timings had missed. It does not see C code's cost (parsing, hashing, encoding
in orjson), nor I/O: confirm a change it shows with ab_cold.py. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def calls(tree: str, build: str, extra: list[str]) -> tuple[int, str]:
    """(total calls, "N units, M findings") of one profiled cold check of `tree` with the offlint in `build`, its
    modules byte-compiled first, as `pip install` leaves them: the check imports its readers and rules when it first
    needs them, and compiling a module there would add the compiler's calls to the count."""
    compileall.compile_dir(os.path.join(build, "offlint"), quiet=1)
    env = dict(os.environ, PYTHONPATH=build, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    done = subprocess.run([sys.executable, str(_HERE / "profile_check.py"), tree, "--top", "1", *extra], env=env,
                          capture_output=True, text=True)
    counted = re.search(r"^calls, every code object: (\d+)$", done.stdout, re.M)
    if done.returncode != 0 or counted is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"profile_check.py with {build} exited {done.returncode}: {last}")
    found = re.search(r"(\d+) units, (\d+) findings", done.stdout)
    return int(counted.group(1)), found.group(0) if found else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("builds", nargs="+", metavar="BUILD")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if not os.path.isdir(args.tree):
        print(f"call_count.py: error: {args.tree}: not a directory; give the tree to check", file=sys.stderr)
        return 2
    for build in args.builds:
        if not os.path.isdir(os.path.join(build, "offlint")):
            print(f"call_count.py: error: {build}: holds no offlint package; give a folder with offlint/ and rules/ "
                  f"(git archive COMMIT offlint rules | tar -x -C FOLDER)", file=sys.stderr)
            return 2
    first = None
    for build in args.builds:
        try:
            total, what = calls(args.tree, build, extra)
        except RuntimeError as exc:
            print(f"call_count.py: error: {exc}", file=sys.stderr)
            return 2
        first = first or total
        print(f"{build}: {total:,} calls ({what}), {total / first:.3f}x the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
