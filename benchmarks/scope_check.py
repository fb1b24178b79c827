#!/usr/bin/env python3
"""Whether a check of one file reports what the whole tree reports about it, on a real tree.

    python benchmarks/scope_check.py TREE [--added] [-- extra offlint args, e.g. --mcore-version 0.20.0]

Checks the whole tree once without a cache (the reference), builds a cache with a whole-tree run (as a
pre-commit hook's first run does), then, for every file a reference finding points into (its location or a
related location), checks that file alone with the cache, as pre-commit does, and compares the findings that
concern it (located in it or drawing a value from it): each must be there, and no other. Prints each file that
differs and a summary line; exits 1 when one differs. TREE is not modified; the cache lives in a temporary folder.

--added: each file as a commit adding it finds the cache: the cache is refreshed by a whole-tree run with the file
moved out of TREE (into the temporary folder, and back right after, whatever happens), then the file is checked
alone. A reading that asked for the file, or for a module name it answers, is read again (offlint/sources/
module_index.py): what the check reports must be what the whole tree reports about it.
tests/test_scope_consistency.py is the property-based form of this on generated trees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile


def _check(tree: str, paths: list[str], extra: list[str], env: dict) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "offlint", "check", *paths, *extra, "--output-format", "json"],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1, 2) or not done.stdout.startswith("["):  # 2: files it could not read, said
        print(f"scope_check: offlint check {' '.join(paths)} exited {done.returncode}: "
              f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}", file=sys.stderr)
        sys.exit(2)
    return json.loads(done.stdout or "[]")


def _concerns(finding: dict, path: str) -> bool:
    return finding["filename"] == path or any(r["filename"] == path for r in finding.get("related", []))


def _key(finding: dict) -> tuple:
    return finding["code"], finding["filename"], finding["location"]["row"], finding["location"]["column"], \
        finding["message"]


def _shared(finding: dict, reference: list[dict]) -> bool:
    """Whether the whole tree reports this finding once for several units, this one among them: a finding at a
    shared helper's line is reported once (`unit` and `shared_with` name the units), and a check of one file
    reports it for the file's own unit, pointing into that file."""
    return any(_key(f) == _key(finding) and finding.get("unit") in {f.get("unit"), *f.get("shared_with", [])}
               for f in reference)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tree, rest = argv[0], argv[1:]
    added = rest[:1] == ["--added"]
    rest = rest[1:] if added else rest
    extra = rest[1:] if rest[:1] == ["--"] else rest
    if not os.path.isdir(tree):
        print(f"scope_check: {tree}: not a directory; give the tree to check (a checkout)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="offlint-scope-") as cache:
        env = dict(os.environ, OFFLINT_CACHE_DIR=cache)
        reference = _check(tree, ["."], [*extra, "--no-cache"], env)
        _check(tree, ["."], extra, env)  # the cache a pre-commit run finds
        files = sorted({f["filename"] for f in reference} | {r["filename"] for f in reference
                                                               for r in f.get("related", [])})
        differ = 0
        for path in files:
            want = sorted(_key(f) for f in reference if _concerns(f, path))
            if added:
                aside = os.path.join(cache, "aside")
                shutil.move(os.path.join(tree, path), aside)
                try:
                    _check(tree, ["."], extra, env)  # the cache as the commit before the one adding it left it
                finally:
                    shutil.move(aside, os.path.join(tree, path))
            alone = [f for f in _check(tree, [path], extra, env) if _concerns(f, path)]
            got = sorted(_key(f) for f in alone)
            want = sorted(want + [_key(f) for f in alone if _key(f) not in want and _shared(f, reference)])
            if got != want:
                differ += 1
                print(f"{path}: missing {[k[:3] for k in want if k not in got]}, "
                      f"extra {[k[:3] for k in got if k not in want]}", flush=True)
    print(f"{len(files)} files the whole tree's {len(reference)} findings point into; {differ} checked alone"
          f"{' right after being added' if added else ''} report otherwise")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
