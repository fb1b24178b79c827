#!/usr/bin/env python3
"""Recall on a project's history: does offlint report each known past configuration mistake?

    python3 scripts/bridge_history_recall.py --mirror <bare mirror> \
        [--cases benchmarks/triage/bridge-history.json] [--only SHA ...] [--workdir DIR] [--json OUT]

The same script serves Megatron Bridge (the default cases file) and Megatron-LM
(`--cases benchmarks/triage/megatron-lm-history.json` with a Megatron-LM mirror).

Each case in the cases file is a Bridge commit C that fixed an offload, recompute, CUDA-graph, precision or
launch-environment mistake, with the findings that mistake should produce. For each case the trees of C~1
and C are taken from the mirror (blob by blob, so blobs missing from a partial mirror are skipped instead of
failing the archive), and `offlint check . --output-format json --mcore-version V --no-cache` runs in each
(V: the megatron-core version of that commit's 3rdparty/Megatron-LM pin, recorded in the case as
`mcore_version`; a case without one is checked with the version offlint reads from the tree itself, as for a
Megatron-LM checkout's megatron/core/package_info.py). A case with `paths` takes only those files (and folders)
from each commit, plus megatron/core/package_info.py where the commit has it, instead of the whole tree: a
Megatron-LM tree is large and its functional test cases and launch scripts are read on their own. A case whose
mistake is reached only from a command line (a performance-script flag, the environment the performance
launcher adds for one workload, a precision other than a recipe function's default) carries `launch`: that
command is written to `offlint_recall_launch.sh` at the root of both trees before the check, as the user's
launch script would be, and removed after.

`expected` lists the findings that would report the mistake, any one of which is enough: `code` (or "*" for
a rule that does not exist yet), and optionally `path` (the finding's file or one of its related locations),
`unit` (exact) or `unit_contains`, and `message_contains`. The case is a hit when an expected finding is
reported at the parent and no finding matching that same entry is reported at the fix. Prints hit/miss per
commit and the total; exits 0 whatever the score, since this measures the engine rather than gating it.
offlint runs as `python -m offlint` with the interpreter running this script: put another checkout first on
PYTHONPATH to measure it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ROOT / "benchmarks" / "triage" / "bridge-history.json"
LAUNCH_FILE = "offlint_recall_launch.sh"
VERSION_FILE = "megatron/core/package_info.py"  # a Megatron-LM tree's own megatron-core version


def git(mirror: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(mirror), *args], input=data, capture_output=True, check=True).stdout


def _feed(pipe, data: bytes) -> None:
    pipe.write(data)
    pipe.close()


def extract(mirror: Path, commit: str, dest: Path, paths: list[str] | None = None) -> Path:
    """Write the tree of `commit` under dest/<full sha> (kept between runs), or only `paths` (files or folders,
    plus VERSION_FILE) under dest/<full sha>-<digest of paths>. Gitlinks, symlinks and blobs the mirror does
    not hold are skipped: offlint reads none of them in Bridge's layout."""
    sha = git(mirror, "rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    if paths:
        wanted_paths = sorted({*paths, VERSION_FILE})
        tree = dest / f"{sha}-{hashlib.sha1(chr(0).join(wanted_paths).encode()).hexdigest()[:10]}"
    else:
        wanted_paths, tree = None, dest / sha
    if (tree / ".extracted").exists():
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    entries = []
    for record in git(mirror, "ls-tree", "-r", "-z", sha, "--", *(wanted_paths or [])).split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, blob = meta.decode().split()
        if kind == "blob" and mode != "120000":
            entries.append((blob, path.decode("utf-8", "surrogateescape")))
    present = git(mirror, "cat-file", "--batch-check", data="".join(b + "\n" for b, _ in entries).encode())
    wanted = [(b, p) for (b, p), line in zip(entries, present.decode().splitlines()) if not line.endswith("missing")]
    blobs = subprocess.Popen(["git", "-C", str(mirror), "cat-file", "--batch"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    feeder = threading.Thread(target=_feed, args=(blobs.stdin, "".join(b + "\n" for b, _ in wanted).encode()))
    feeder.start()  # written from a thread: git blocks on a full stdout pipe while we would block on stdin
    for _, path in wanted:
        size = int(blobs.stdout.readline().split()[2])
        content = blobs.stdout.read(size)
        blobs.stdout.read(1)
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    feeder.join()
    blobs.wait()
    (tree / ".extracted").write_text(f"{commit}\n{len(wanted)} of {len(entries)} blobs\n")
    return tree


def run_offlint(tree: Path, version: str | None, launch: str | None) -> tuple[list[dict], float, str]:
    """offlint's findings (paths relative to the tree), its wall time, and its error lines. Exit 2 (a file it
    could not read) still prints the findings of the other files, so they are kept. Without a version offlint
    takes the tree's own."""
    command = [sys.executable, "-m", "offlint", "check", ".", "--output-format", "json",
               *(["--mcore-version", version] if version else []), "--no-cache", "--fail-on", "info"]
    launch_path = tree / LAUNCH_FILE
    if launch:
        launch_path.write_text("#!/bin/bash\n" + launch.strip() + "\n")
    try:
        start = time.monotonic()
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=900)
        elapsed = time.monotonic() - start
    finally:
        launch_path.unlink(missing_ok=True)
    try:
        findings = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        return [], elapsed, done.stderr.strip() or f"exit {done.returncode}, output is not JSON"
    for finding in findings:
        finding["filename"] = finding["filename"].removeprefix("./")
        for related in finding.get("related") or []:
            related["filename"] = related.get("filename", "").removeprefix("./")
    return findings, elapsed, done.stderr.strip() if done.returncode == 2 else ""


def matches(finding: dict, want: dict) -> bool:
    if want["code"] != "*" and finding["code"] != want["code"]:
        return False
    if "path" in want and want["path"] != finding["filename"] and \
            want["path"] not in [r.get("filename") for r in finding.get("related") or []]:
        return False
    # A finding several units share is reported once, under one unit, with the others in `shared_with`.
    units = [finding.get("unit") or "", *(finding.get("shared_with") or [])]
    if "unit" in want and want["unit"] not in units:
        return False
    if not any(want.get("unit_contains", "") in unit for unit in units):
        return False
    return want.get("message_contains", "") in finding.get("message", "")


def label(want: dict) -> str:
    parts = [want["code"], want.get("path", "")]
    parts += [f"[{want[k]}]" for k in ("unit", "unit_contains") if k in want]
    parts += [f"'{want['message_contains']}'"] if "message_contains" in want else []
    return " ".join(p for p in parts if p)


def judge(case: dict, parent: list[dict], fix: list[dict]) -> tuple[bool, list[str], list[str]]:
    """A hit: an expected finding reported at the parent whose entry matches nothing at the fix."""
    at_parent = [label(w) for w in case["expected"] if any(matches(f, w) for f in parent)]
    at_fix = [label(w) for w in case["expected"] if any(matches(f, w) for f in fix)]
    return any(entry not in at_fix for entry in at_parent), at_parent, at_fix


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, required=True,
                        help="bare git mirror of the project the cases come from (Megatron Bridge, Megatron-LM)")
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--only", nargs="*", default=None, help="commit prefixes to run (default: all)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the extracted trees are kept between runs (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-case results here")
    args = parser.parse_args()
    cases = json.loads(args.cases.read_text())["cases"]
    if args.only:
        cases = [c for c in cases if any(c["commit"].startswith(p) or p.startswith(c["commit"]) for p in args.only)]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="offlint-history-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results, hits = [], 0
    for case in cases:
        commit, version = case["commit"], case.get("mcore_version")
        runs = {}
        for side, rev in (("parent", f"{commit}~1"), ("fix", commit)):
            tree = extract(args.mirror, rev, workdir, case.get("paths"))
            runs[side] = run_offlint(tree, version, case.get("launch"))
        hit, at_parent, at_fix = judge(case, runs["parent"][0], runs["fix"][0])
        errors = {side: run[2].splitlines() for side, run in runs.items() if run[2]}
        hits += hit
        verdict = "hit " if hit else "miss"
        unread = ", ".join(f"{len(lines)} error line(s) at the {side}" for side, lines in errors.items())
        print(f"{verdict} {commit} {case['date']} {case['class']}: parent {at_parent or 'none'}; "
              f"fix {at_fix or 'none'} ({runs['parent'][1]:.1f}+{runs['fix'][1]:.1f} s, mcore {version or 'of the tree'}"
              + (f"; {unread}" if unread else "") + ")")
        results.append({"commit": commit, "hit": hit, "at_parent": at_parent, "at_fix": at_fix,
                        "findings_parent": len(runs["parent"][0]), "findings_fix": len(runs["fix"][0]),
                        "errors": errors})
    print(f"{hits} of {len(cases)} hit ({100.0 * hits / max(len(cases), 1):.0f}%)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
