#!/usr/bin/env python3
"""Mutation fuzzing of `offlint check` (and of its fixes) on a real tree's own files.

    python3 scripts/fuzz_check.py TREE [--seed N] [--seconds S] [--runs N] [--fix] [--out DIR] [--mcore-version V]

Each run takes one of TREE's recipes, launch scripts or YAML configs (a file that names offloading, recompute, a
parallel size, a launcher or ConfigContainer), mutates one to three of its lines the way an edit in progress does
(a line deleted, doubled, swapped or cut short; a number (to 0, a fraction, inf, nan, 99999999999, ...), a word or
the indentation changed; a quote, a bracket, `$(` or another token put in) and checks that file as pre-commit does,
with the mutated text in place of the file's.
Without --fix the text is given as an overlay (CheckOptions.overlay): TREE is only read. With --fix, the tree's
files are copied to a temporary folder first, each mutated file is written there and `offlint check FILE --diff`
or `--fix --unsafe-fixes` is run on it; the folder is removed at the end.

A problem is a Python exception out of offlint, an "internal error" (offlint's own bug, which it reports as the
file's error), a run over 30 s, `--diff` writing a file, or `--fix` turning a file that parsed (Python, YAML,
`bash -n`) into one that does not. Each is written to --out (default ./fuzz-problems) as the mutated text and a note
of the file, the mutations and the problem, and printed on a line. Exits 1 when there was one, else 0; 2 on bad
input. The same seed on the same tree and offlint gives the same mutations.

Why: a lint gate meets files while they are being edited, and real files mutated find what hand-written hostile
inputs do not (session 59: 11,000 runs on Megatron Bridge 067f987 found a Hydra syntax error reported as an internal
error, and `expert_model_parallel_size = 0.5` ending a check in a division by zero).
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

RUN_LIMIT = 30  # seconds a run may take before it counts as a problem (issue 20's hostile inputs: 10 s)
# What makes a file worth mutating: it gives units, or a launch that runs one
_WORDS = ("offload", "recompute", "pipeline_model_parallel", "tensor_model_parallel", "micro_batch", "torchrun",
          "sbatch", "ConfigContainer")
_TOKENS = ["", "0", "-1", "1e400", "None", "True", "'", '"', "\\", "$(", "${", "`", "{", "}", "[", "]", "(", ")", ":",
           "|", "&&", ";", "#", "\t", "é", "\u2028", "*", "**", ".", ",", "=", "==", "--", "${X:-", "<<EOF", "EOF",
           "$((", "))", "lambda: 0", "yield", "await ", "global x", "del cfg", "...", "'''", '"""', "f'{", "@dec",
           "\x00", "\r", "999999999999999999999"]
_NUMBERS = ["0", "1", "3", "-2", "7", "1000000", "0.5", "2**40", "99999999999", "inf", "nan", "1e400"]


def sources() -> dict[str, str]:
    """The files offlint reads in the tree of the working directory (its discovery's): path relative to it -> kind."""
    from offlint.discover import discover

    return {os.path.normpath(file.path): file.kind for file in sorted(discover(["."])[0], key=lambda f: f.path)}


def candidates(every: dict[str, str]) -> list[str]:
    """Of `every` (sources()), the Python, shell and YAML files, not test code, that name one of _WORDS."""
    found = []
    for path, kind in every.items():
        if kind not in ("python", "shell", "yaml") or path.startswith("tests/") or "/tests/" in path:
            continue
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) <= 60_000 and any(word in text for word in _WORDS):
            found.append(path)
    return found


def mutate(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """`text` with one to three line-level edits, and their names."""
    lines = text.splitlines(keepends=True) or [""]
    done = []
    for _ in range(rng.randint(1, 3)):
        edit = rng.choice(["delete", "double", "swap", "cut", "token", "number", "indent", "word", "join"])
        i = rng.randrange(len(lines))
        line = lines[i]
        done.append(edit)
        if edit == "delete" and len(lines) > 1:
            del lines[i]
        elif edit == "double":
            lines.insert(i, line)
        elif edit == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], line
        elif edit == "cut":
            lines = lines[:i + 1]
            lines[-1] = line[:rng.randrange(len(line) + 1)]
        elif edit == "token":
            at = rng.randrange(len(line) + 1)
            lines[i] = line[:at] + rng.choice(_TOKENS) + line[at:]
        elif edit == "number" and (numbers := list(re.finditer(r"\d+", line))):
            hit = rng.choice(numbers)
            lines[i] = line[:hit.start()] + rng.choice(_NUMBERS) + line[hit.end():]
        elif edit == "indent":
            lines[i] = rng.choice(["", " ", "    ", "\t", "        "]) + line.lstrip()
        elif edit == "word" and (words := list(re.finditer(r"[A-Za-z_]+", line))):
            hit = rng.choice(words)
            lines[i] = line[:hit.start()] + rng.choice(re.findall(r"[A-Za-z_]+", text) or ["x"]) + line[hit.end():]
        elif edit == "join" and i + 1 < len(lines):
            lines[i] = line.rstrip("\r\n") + " " + lines.pop(i + 1)
    return "".join(lines), done


def parses(path: str, text: str) -> bool:
    """Whether `text` parses as the kind of file `path` is (Python, YAML, else shell by `bash -n`)."""
    import yaml

    try:
        if path.endswith(".py"):
            ast.parse(text)
        elif path.endswith((".yaml", ".yml")):
            list(yaml.safe_load_all(text))
        else:
            return subprocess.run(["bash", "-n"], input=text.encode(), capture_output=True).returncode == 0
    except Exception:  # noqa: BLE001 - any failure to parse is "does not parse"
        return False
    return True


class _Late(Exception):
    pass


def _late(*_) -> None:
    raise _Late


def check_run(path: str, text: str, mcore: str, strict: bool) -> str:
    """The problem a check of `path` with `text` in its place has, or ""."""
    from offlint import api

    options = api.CheckOptions(cache=False, workers=1, overlay={path: text}, mcore_version=mcore, strict=strict,
                               changed_files=False)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        result = api.check([path], options)
    return next((e.message for e in result.errors if "internal error" in e.message), "")


def fix_run(path: str, text: str, mcore: str, mode: str, tree: Path, every: dict[str, str]) -> str:
    """The problem `offlint check path MODE --unsafe-fixes` has on the mutated file written in place, or "". Every
    file it wrote (a fix may edit a launch in another file that runs the checked recipe) is checked too, then put
    back as it is in `tree` (`every`: the tree's files, sources())."""
    from click.testing import CliRunner

    from offlint.cli import main

    Path(path).write_bytes(text.encode("utf-8"))  # (as bytes: a "\r" the edits put in stays one)
    began = time.time_ns()
    try:
        result = CliRunner().invoke(main, ["check", path, "--no-cache", "--mcore-version", mcore, mode,
                                           "--unsafe-fixes"])
    finally:
        written = [other for other in every if other != path and os.stat(other).st_mtime_ns >= began]
        befores = {other: (tree / other).read_bytes().decode("utf-8", "replace") for other in written}
        afters = {other: Path(other).read_bytes().decode("utf-8", "replace") for other in written}
        for other in written:
            shutil.copyfile(tree / other, other)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return "".join(traceback.format_exception(result.exception))
    if "Traceback" in result.output or "internal error" in result.output:
        return result.output
    if result.exit_code not in (0, 1, 2):
        return f"exit {result.exit_code}"
    befores[path], afters[path] = text, Path(path).read_bytes().decode("utf-8", "replace")
    for name, after in afters.items():
        if mode == "--diff" and after != befores[name]:
            return f"--diff wrote {name}"
        if mode == "--fix" and after != befores[name] and parses(name, befores[name]) and not parses(name, after):
            return f"the fixes made {name}, which parsed, one that does not:\n{after}"
    return ""


def fixed_files(mcore: str) -> set[str]:
    """The files of the tree in the working directory that `offlint check . --diff --unsafe-fixes` would change."""
    from offlint import api
    from offlint.fix.run import fix

    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        outcome = fix(["."], api.CheckOptions(cache=False, mcore_version=mcore), unsafe=True, diff=True)
    return {os.path.normpath(path) for planned in outcome.fixed for path in planned.paths}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to go on (default 60)")
    parser.add_argument("--runs", type=int, default=0, help="stop after this many runs (default: --seconds decides)")
    parser.add_argument("--fix", action="store_true", help="run --diff and --fix on a copy of the tree")
    parser.add_argument("--out", default="fuzz-problems", help="where problems are written")
    parser.add_argument("--mcore-version", default="0.20.0")
    args = parser.parse_args()
    tree = Path(args.tree).resolve()
    if not tree.is_dir():
        print(f"fuzz_check.py: error: {args.tree}: not a directory; give the tree whose files to mutate",
              file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    home = os.getcwd()
    os.chdir(tree)
    scratch = None
    try:
        every = sources()  # (the files a fix may write)
        files = candidates(every)
        if not files:
            print(f"fuzz_check.py: error: {args.tree}: no recipe, launch script or YAML config naming {_WORDS[0]!r} "
                  f"or the like; give a training tree", file=sys.stderr)
            return 2
        if args.fix:  # (the tree's files, not its .git: fixes are written here, never into TREE)
            scratch = Path(tempfile.mkdtemp(prefix="offlint-fuzz-"))
            shutil.copytree(tree, scratch, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
            os.chdir(scratch)
        return _runs(args, tree, every, files, out)
    finally:
        os.chdir(home)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _runs(args, tree: Path, every: dict[str, str], files: list[str], out: Path) -> int:
    """The mutation runs, in the working directory (TREE, or its copy with --fix); 1 when one had a problem."""
    rng = random.Random(args.seed)
    fixable = sorted(set(files) & fixed_files(args.mcore_version)) if args.fix else []
    if args.fix:
        print(f"{len(fixable)} of the files have a fix (--diff of the whole tree); 70% of the runs take one of them")
    signal.signal(signal.SIGALRM, _late)
    runs = problems = 0
    start = time.monotonic()
    while (runs < args.runs) if args.runs else (time.monotonic() - start < args.seconds):
        path = rng.choice(fixable) if fixable and rng.random() < 0.7 else rng.choice(files)
        original = Path(path).read_bytes()
        text, edits = mutate(rng, original.decode("utf-8", "replace"))
        mode = rng.choice(["--diff", "--fix"]) if args.fix else ("--strict" if rng.random() < 0.3 else "")
        runs += 1
        began = time.monotonic()
        signal.alarm(RUN_LIMIT)
        try:
            problem = fix_run(path, text, args.mcore_version, mode, tree, every) if args.fix else \
                check_run(path, text, args.mcore_version, mode == "--strict")
        except _Late:
            problem = f"still running after {RUN_LIMIT} s"
        except Exception:  # noqa: BLE001 - an exception out of offlint is the problem looked for
            problem = traceback.format_exc()
        finally:
            signal.alarm(0)
            if args.fix:
                Path(path).write_bytes(original)
        if problem:
            problems += 1
            out.mkdir(parents=True, exist_ok=True)
            name = f"{args.seed}-{runs}"
            (out / f"{name}{Path(path).suffix or '.sh'}").write_bytes(text.encode("utf-8"))
            (out / f"{name}.txt").write_text(f"file: {path}\nedits: {', '.join(edits)}\nmode: {mode or 'check'}"
                                             f"\ntook: {time.monotonic() - began:.1f} s\n\n{problem}\n")
            last = problem.strip().splitlines()[-1] if problem.strip() else problem
            print(f"{path} ({', '.join(edits)}; {mode or 'check'}): {last[:200]}  [{out / name}.txt]")
    print(f"{runs} runs on {len(files)} files of {args.tree}, {problems} problem{'s' if problems != 1 else ''}"
          f" (seed {args.seed})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
