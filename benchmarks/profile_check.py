#!/usr/bin/env python3
"""Where a cold `offlint check` spends its time: cProfile over one check of a tree, summed by stage.

    python benchmarks/profile_check.py TREE [--mcore-version V] [--top 25] [--save FILE.prof]

The check runs in this process, in one worker (cProfile does not follow forked workers) and without the cache,
from inside TREE, as `offlint check .` would. Each function's own time (cProfile's tottime) is given to the
stage its code belongs to, by file: parsing (`ast.parse`/`compile`, tree-sitter), the Python, shell, YAML and
launch readers, linking, resolution, rules, the cache, discovery, and the rest; the time of standard-library code
(`ast.walk`, `re`, `isinstance`, ...) goes to the offlint code that called it. Then the functions with the most
own time, and the offlint functions with the most cumulative time. For comparison it also times the floor the
issue measures against: `ast.parse` of every .py file of the tree, single-threaded, in the same run.
Profiling slows Python code (not C code) down, so shares are a guide to where time goes, not absolute costs.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

# (stage, what a function's file path or name contains), first match wins. A function that matches none (the
# standard library: ast.walk, re, isinstance, ...) is charged to its callers, in proportion to the time it spent
# for each, up to one that matches.
STAGES = [
    ("parse: ast.parse (compile)", ("<built-in method builtins.compile>",)),
    ("parse: tree-sitter-bash", ("tree_sitter",)),
    ("Python reader (sources/python*)", ("offlint/sources/python",)),
    ("shell reader (sources/shell*)", ("offlint/sources/shell",)),
    ("YAML reader (yaml_file, PyYAML)", ("offlint/sources/yaml_file", "/yaml/", "_yaml")),
    ("Hydra overrides (hydra, hydra-core, OmegaConf)", ("offlint/sources/hydra", "/hydra/", "/omegaconf/", "antlr4")),
    ("launch and perf-script readers (sources/*)", ("offlint/sources/",)),
    ("linking commands (linking)", ("offlint/linking",)),
    ("resolution (resolve, keys, versions)", ("offlint/resolve", "offlint/keys", "offlint/versions")),
    ("rules (engine, conditions, rules, estimate)", ("offlint/engine", "offlint/conditions", "offlint/rules",
                                                     "offlint/estimate/", "offlint/model_sizes")),
    ("suppressions", ("offlint/suppressions",)),
    ("cache (cache, cache_format)", ("offlint/cache",)),
    ("discovery (discover, scope, changed, pathspec)", ("offlint/discover", "offlint/scope", "offlint/changed",
                                                        "pathspec")),
    ("reading files (reading, source_files)", ("offlint/reading", "offlint/source_files")),
    ("orchestration (api, pipeline; the gc pass at the end)", ("offlint/",)),
]
OTHER = "other (imports, unattributed)"


def direct_stage(function: tuple[str, int, str]) -> str | None:
    path, _, name = function
    where = f"{path}:{name}" if path != "~" else name
    return next((stage for stage, needles in STAGES if any(n in where for n in needles)), None)


def stage_shares(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per stage, stdlib and builtin time charged to the callers that caused it."""
    memo: dict[tuple, dict[str, float]] = {}

    def shares(function, seen: frozenset) -> dict[str, float]:
        if function in memo:
            return memo[function]
        stage = direct_stage(function)
        callers = stats.stats[function][4] if function in stats.stats else {}
        total = sum(entry[2] for entry in callers.values())
        if stage is not None:
            result = {stage: 1.0}
        elif not callers or total <= 0 or function in seen:
            result = {OTHER: 1.0}
        else:
            result = {}
            for caller, entry in callers.items():
                for name, part in shares(caller, seen | {function}).items():
                    result[name] = result.get(name, 0.0) + part * entry[2] / total
        memo[function] = result
        return result

    out: dict[str, float] = {}
    for function, (_, _, tottime, _, _) in stats.stats.items():
        for name, part in shares(function, frozenset()).items():
            out[name] = out.get(name, 0.0) + part * tottime
    return out


def parse_floor(tree: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds to `ast.parse` every .py file under `tree` (read first, not timed), and the count."""
    texts = []
    for path in sorted(tree.rglob("*.py")):
        if ".git" in path.parts:
            continue
        try:
            texts.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    start, cpu = time.perf_counter(), time.process_time()
    for name, text in texts:
        try:
            ast.parse(text, filename=name)
        except SyntaxError:
            pass
    return time.perf_counter() - start, time.process_time() - cpu, len(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--mcore-version", default=None)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--save", type=Path, help="also write the raw profile (for snakeviz, pstats)")
    args = parser.parse_args(argv)
    from offlint.api import CheckOptions, check

    tree = args.tree.resolve()
    floor, floor_cpu, py_files = parse_floor(tree)
    os.chdir(tree)
    options = CheckOptions(mcore_version=args.mcore_version, root=tree, cache=False, workers=1)
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    result = check(["."], options)
    profile.disable()
    wall = time.perf_counter() - start
    # Every call, counted per code object: pstats merges the entries of functions that share a file, line and name
    # (the methods dataclasses generate are all `<string>:2 __init__`, ...) and keeps one count of them, so its
    # total_calls swings by 1% from one process to the next (Megatron-LM d98e8a6: 176,000 of 20.5 M). call_count.py
    # reads this line.
    print(f"calls, every code object: {sum(entry.callcount for entry in profile.getstats())}")
    if args.save:
        profile.dump_stats(str(args.save))
    stats = pstats.Stats(profile)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    by_stage = stage_shares(stats)
    total = sum(by_stage.values())
    print(f"tree {tree}: {result.files_checked} files, {result.units} units, {len(result.findings)} findings; "
          f"megatron-core {result.version.version}; Python {sys.version.split()[0]}")
    print(f"profiled check (one worker, no cache): {wall:.1f} s wall, {total:.1f} s profiled own time")
    print(f"floor: ast.parse of {py_files} .py files, single-threaded, unprofiled: {floor:.1f} s wall, "
          f"{floor_cpu:.1f} s CPU")
    print()
    print(f"{'stage':48} {'own s':>7} {'share':>6}")
    for stage, seconds in sorted(by_stage.items(), key=lambda item: -item[1]):
        print(f"{stage:48} {seconds:7.2f} {seconds / total:6.1%}")
    print()
    print(f"{'function (most own time)':78} {'calls':>9} {'own s':>7}")
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[: args.top]
    for (path, line, name), (_, calls, tottime, _, _) in rows:
        where = f"{_short(path)}:{line} {name}" if path != "~" else name
        print(f"{where[:78]:78} {calls:9} {tottime:7.2f}")
    print()
    print(f"{'offlint function (most cumulative time)':78} {'calls':>9} {'cum s':>7}")
    rows = sorted(((f, v) for f, v in stats.stats.items() if "offlint/" in f[0]), key=lambda item: -item[1][3])
    for (path, line, name), (_, calls, _, cumtime, _) in rows[: args.top]:
        print(f"{(_short(path) + ':' + str(line) + ' ' + name)[:78]:78} {calls:9} {cumtime:7.2f}")
    return 0


def _short(path: str) -> str:
    return path.split("site-packages/")[-1].split("/offlint/", 1)[-1] if "/offlint/" in path or \
        "site-packages/" in path else path


if __name__ == "__main__":
    sys.exit(main())
