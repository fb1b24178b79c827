#!/usr/bin/env python3
"""Time `offlint check` on a tree: cold, warm and (optionally) the pre-commit case of one changed file.

    python benchmarks/bench_check.py TREE [--runs 3] [--changed FILE[:FUNCTION]]... [-- extra offlint args]

Each run measures, in this order:
  no-cache `offlint check . --no-cache` from TREE: the cold check as issue 19 measured it (16.0 s against a 6.3 s
           floor), reading everything and writing nothing;
  cold     `offlint check .` from TREE with an empty cache (OFFLINT_CACHE_DIR is a fresh folder per run): the
           same reading, plus noting what each reading used and writing the cache (what a first run costs);
  warm     the same command again, right after (whatever the cold run left behind is kept);
  changed  `offlint check FILE` from TREE, with --changed (FILE is relative to TREE, or absolute inside it),
           the pre-commit case: FILE is edited first (a real edit: its cache entry is stale, and so is every
           entry whose reading used the edited part), and its original bytes are put back afterwards. The edit:
           FILE alone, a comment line appended at its end (no definition changes: the files importing it stay
           valid); FILE:FUNCTION, the module-level function FUNCTION edited, by a comment at the end of its
           `def` line (--edit in-place: no line moves, that function's text changes) or a statement inserted at
           the top of its body (--edit insert: it and every definition below it move down a line), or its first
           integer set with `=` in its body, plus one (--edit value: what the function gives changes, as a user's
           edit of a recipe's setting does; every reading that ran it reads it again). --edit new-file: FILE is
           left as it is and a new module is added beside it, FILE's text with each of its module-level functions
           renamed (`NAME_bench`, everywhere in the text: a new recipe file in FILE's shape, defining names no
           other file does), and `offlint check NEW` is timed, as pre-commit runs for a commit adding a file;
           the new file is removed afterwards. --changed may
           be given several times (a leaf recipe, a base builder most recipes call): one line each, in order,
           each after an untimed `offlint check .` that brings the cache's entries back to the unedited tree.

Each run first measures the *floor*: reading and `ast.parse`-ing, single-threaded, every Python file offlint's
discovery finds in TREE (the same files a check reads), in a fresh process; every line then gives its wall and CPU
time as a multiple of that run's floor ("x floor"), the figure issue 19's goals are stated in (the machine is shared
and absolute times drift; a ratio taken in the same run does not). offlint's own modules are byte-compiled first,
as `pip install` does, so no run pays for compiling them (PYTHONDONTWRITEBYTECODE would otherwise make every run
compile every module).

Every measurement runs offlint (`python -m offlint` with this interpreter) as a subprocess of a fresh wrapper
process, so the wrapper's `getrusage(RUSAGE_CHILDREN).ru_maxrss` is the peak RSS of that one offlint run.
Wall time is taken in the wrapper around the child (it excludes the wrapper's own start-up but includes
offlint's interpreter start-up and imports). Files per second uses the file count of offlint's own summary
line on standard error ("(N files, M units, ...)"); when offlint prints no summary (for example with -q or a
machine-readable --output-format) the rate is shown as "?". Standard output (the findings) is read and
discarded. One line per measurement, then the median of each kind. Nothing here asserts anything about time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs one command and reports its wall time, exit code, peak RSS and standard error as JSON on stdout.
_WRAPPER = r"""
import json, resource, subprocess, sys, time
cwd, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"wall": wall, "rc": proc.returncode, "maxrss": usage.ru_maxrss, "user": usage.ru_utime,
           "sys": usage.ru_stime, "stdout_lines": proc.stdout.count(b"\n"),
           "stderr": proc.stderr.decode("utf-8", "replace")}, sys.stdout)
"""
# The floor: reads and parses every Python file discovery finds under the working directory, one thread.
_FLOOR = r"""
import ast, json, time
from offlint.discover import discover
files, _ = discover(["."])
paths = [f.path for f in files if f.kind == "python"]
wall, cpu = time.perf_counter(), time.process_time()
for path in paths:
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        ast.parse(data)
    except (SyntaxError, ValueError):
        pass
json.dump({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "files": len(paths)}, sys.stdout)
""".replace("import ast, json, time", "import ast, json, sys, time")
_SUMMARY = re.compile(r"\((\d+) files?, (\d+) units?")
_FOUND = re.compile(r"Found (\d+) findings?|All checks passed!")


def measure(cwd: Path, args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "offlint", "check", *args]
    out = subprocess.run([sys.executable, "-c", _WRAPPER, str(cwd), *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench_check: the measuring wrapper failed:\n{out.stderr}")
    result = json.loads(out.stdout)
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    result["rss_mib"] = result["maxrss"] / (1024 * 1024 if sys.platform == "darwin" else 1024)
    summary = _SUMMARY.search(result["stderr"])
    result["files"] = int(summary.group(1)) if summary else None
    result["units"] = int(summary.group(2)) if summary else None
    found = _FOUND.search(result["stderr"])
    result["findings"] = (int(found.group(1)) if found.group(1) else 0) if found else None
    return result


def measure_floor(cwd: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _FLOOR], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench_check: measuring the ast-parse floor failed:\n{out.stderr}")
    return json.loads(out.stdout)


_INTEGER_SET = re.compile(rb"(?<![=!<>])=\s*(\d+)\b(?!\s*[.\w])")  # `x = 12`, `f(n=12)`: not `==`, not 1.5


def edited(original: bytes, function: str | None, edit: str) -> bytes:
    """The text of the benchmark's edit (see the module docstring)."""
    if function is None:
        return original + b"\n# edited by offlint's benchmark\n"
    lines = original.split(b"\n")
    start = next((i for i, ln in enumerate(lines) if re.match(rb"(async )?def " + re.escape(function.encode())
                                                               + rb"\s*\(", ln)), None)
    if start is None:
        raise SystemExit(f"bench_check: no module-level function {function} in the changed file")
    end = start  # the line that ends the signature (`):` or `) -> T:`)
    while end + 1 < len(lines) and not re.search(rb":\s*(#.*)?$", lines[end]):
        end += 1
    if edit == "insert":
        body = next((ln for ln in lines[end + 1:] if ln.strip()), b"    pass")
        indent = body[:len(body) - len(body.lstrip())] or b"    "
        lines.insert(end + 1, indent + b"_edited_by_offlint_benchmark = 1")
    elif edit == "value":
        found = None
        for index in range(end + 1, len(lines)):
            if lines[index][:1] not in (b" ", b"\t", b"") and not lines[index].startswith(b"#"):
                break  # the function's body ended
            found = _INTEGER_SET.search(lines[index].split(b"#")[0])
            if found:
                value = str(int(found.group(1)) + 1).encode()
                lines[index] = lines[index][:found.start(1)] + value + lines[index][found.end(1):]
                break
        if not found:
            raise SystemExit(f"bench_check: {function} sets no integer with `=` (--edit value)")
    else:
        lines[start] += b"  # edited by offlint's benchmark"
    return b"\n".join(lines)


def new_module(original: bytes) -> bytes:
    """--edit new-file's module: `original` with each module-level function renamed (NAME_bench) wherever its name
    stands as a word."""
    names = sorted(set(re.findall(rb"^(?:async )?def ([A-Za-z_]\w*)", original, re.M)), key=len, reverse=True)
    if not names:
        return original + b"\n"
    return re.sub(rb"\b(" + b"|".join(map(re.escape, names)) + rb")\b", rb"\1_bench", original)


def added_name(changed: str) -> str:
    """The module --edit new-file adds beside CHANGED (a path as given to offlint)."""
    return str(Path(changed).with_name(Path(changed).stem + "_offlint_bench.py").as_posix())


def measure_added(tree: Path, changed: str, extra: list[str]) -> dict:
    """Time `offlint check NEW` right after adding NEW (new_module of CHANGED) beside CHANGED; NEW is always removed."""
    path = Path(changed) if Path(changed).is_absolute() else tree / changed
    name = added_name(changed)
    added = Path(name) if Path(name).is_absolute() else tree / name
    if added.exists():
        raise SystemExit(f"bench_check: {added} exists already; remove it (an earlier run was cut short?)")
    try:
        added.write_bytes(new_module(path.read_bytes()))
        return measure(tree, [name, *extra])
    finally:
        added.unlink(missing_ok=True)


def measure_edited(tree: Path, changed: str, function: str | None, edit: str, extra: list[str]) -> dict:
    """Time `offlint check CHANGED` after a real edit of CHANGED; the file's bytes are always restored."""
    if edit == "new-file":
        return measure_added(tree, changed, extra)
    path = Path(changed) if Path(changed).is_absolute() else tree / changed
    original = path.read_bytes()
    try:
        path.write_bytes(edited(original, function, edit))
        return measure(tree, [changed, *extra])
    finally:
        path.write_bytes(original)


def line(label: str, r: dict, floor: dict | None = None) -> str:
    rate = f"{r['files'] / r['wall']:.1f} files/s" if r["files"] and r["wall"] > 0 else "? files/s"
    files = f"{r['files']} files" if r["files"] is not None else "? files"
    extra = []
    if r["units"] is not None:
        extra.append(f"{r['units']} units")
    if r["findings"] is not None:
        extra.append(f"{r['findings']} findings")
    extra.append(f"cpu {r['user'] + r['sys']:.2f} s")
    if floor and floor["wall"] > 0 and floor["cpu"] > 0:
        extra.append(f"{r['wall'] / floor['wall']:.2f}x floor wall, "
                     f"{(r['user'] + r['sys']) / floor['cpu']:.2f}x floor cpu")
    return (f"{label:<18} wall {r['wall']:8.2f} s  {files:>11}  {rate:>15}  peak RSS {r['rss_mib']:7.1f} MiB  "
            f"exit {r['rc']}  ({', '.join(extra)})")


def error_lines(r: dict) -> list[str]:
    return [ln for ln in r["stderr"].splitlines() if ln.startswith("offlint: error")]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s TREE [--runs N] [--changed FILE[:FUNCTION]]... "
                                           "[--edit in-place|insert|value|new-file] [-- extra offlint args]")
    parser.add_argument("tree", type=Path)
    parser.add_argument("--runs", type=int, default=3, help="no-cache/cold/warm(/changed) repetitions (default 3)")
    parser.add_argument("--changed", action="append", default=[], metavar="FILE[:FUNCTION]",
                        help="also time `offlint check FILE` run from TREE after an edit of FILE (of FUNCTION in "
                             "it); repeatable")
    parser.add_argument("--edit", choices=("in-place", "insert", "value", "new-file"), default="in-place",
                        help="how FILE:FUNCTION is edited (default in-place: no line moves); new-file: a module in "
                             "FILE's shape added beside it")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not tree.is_dir():
        parser.error(f"{args.tree} is not a directory")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    changed: list[tuple[str, str | None]] = []  # (file as given to offlint, function edited or None)
    for spec in args.changed:
        name, _, function = spec.partition(":") if not (tree / spec).is_file() else (spec, "", "")
        path = Path(name)
        full = path if path.is_absolute() else tree / path
        if not full.is_file():
            parser.error(f"--changed {spec}: no such file under {tree}")
        try:
            changed.append((full.resolve().relative_to(tree).as_posix(), function or None))
        except ValueError:
            changed.append((str(full.resolve()), function or None))
    cache = Path(tempfile.mkdtemp(prefix="offlint-bench-cache-"))
    os.environ["OFFLINT_CACHE_DIR"] = str(cache)  # inherited by every measured run

    import compileall

    import offlint

    compileall.compile_dir(str(Path(offlint.__file__).parent), quiet=1)
    version = subprocess.run([sys.executable, "-m", "offlint", "--version"], capture_output=True, text=True)
    print(f"# {version.stdout.strip() or 'offlint'}; Python {platform.python_version()} on {platform.machine()} "
          f"({os.cpu_count()} CPUs); tree {tree}")
    tail = "".join(f" {a}" for a in extra)
    print(f"# no-cache: (cd TREE && offlint check . --no-cache{tail})")
    print(f"# cold/warm: (cd TREE && offlint check .{tail})")
    labels = []
    for index, (name, function) in enumerate(changed, start=1):
        labels.append("changed" if len(changed) == 1 else f"changed {index}")
        if args.edit == "new-file":
            print(f"# {labels[-1]}: (cd TREE && offlint check {added_name(name)}{tail}) right after adding it: "
                  f"{name}'s text with its functions renamed (new-file)")
            continue
        edit = f"function {function} edited ({args.edit})" if function else "a comment line appended"
        print(f"# {labels[-1]}: (cd TREE && offlint check {name}{tail}) after an edit of {name}: {edit}")
    results: dict[str, list[dict]] = {"no-cache": [], "cold": [], "warm": [], **{label: [] for label in labels}}
    floors: list[dict] = []
    errors_shown = False
    for run in range(1, args.runs + 1):
        shutil.rmtree(cache, ignore_errors=True)
        floor = measure_floor(tree)
        floors.append(floor)
        print(f"{'floor ' + str(run) + '/' + str(args.runs):<18} wall {floor['wall']:8.2f} s  "
              f"{str(floor['files']) + ' files':>11}  cpu {floor['cpu']:.2f} s  (read + ast.parse, one thread)",
              flush=True)
        plan = [("no-cache", None), ("cold", None), ("warm", None)] + list(zip(labels, changed))
        for kind, target in plan:
            if target and kind != labels[0]:
                # Not timed: the cache's entries brought back to the unedited tree (without the whole-run answer,
                # which holds again once the edit is undone and would answer without looking at them).
                for last in cache.glob("*/last-*"):
                    last.unlink()
                measure(tree, [".", *extra])
            r = measure_edited(tree, target[0], target[1], args.edit, extra) if target else \
                measure(tree, [".", "--no-cache", *extra]) if kind == "no-cache" else measure(tree, [".", *extra])
            results[kind].append(r)
            print(line(f"{kind} {run}/{args.runs}", r, floor), flush=True)
            if r["rc"] == 2 and not errors_shown:
                for ln in error_lines(r)[:5] or r["stderr"].strip().splitlines()[-3:]:
                    print(f"#   {ln}")
                errors_shown = True
    if args.runs > 1:
        floor = {"wall": statistics.median(f["wall"] for f in floors), "cpu": statistics.median(f["cpu"] for f in floors)}
        for kind, rs in results.items():
            if not rs:
                continue
            med = dict(rs[0])
            med["wall"] = statistics.median(r["wall"] for r in rs)
            med["rss_mib"] = statistics.median(r["rss_mib"] for r in rs)
            med["user"] = statistics.median(r["user"] for r in rs)
            med["sys"] = statistics.median(r["sys"] for r in rs)
            med["rc"] = "/".join(sorted({str(r["rc"]) for r in rs}))
            print(line(f"{kind} median", med, floor))
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
