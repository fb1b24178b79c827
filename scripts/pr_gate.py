#!/usr/bin/env python3
"""What offlint would add as a CI gate on a project's pull requests: the findings each pull request's head has
that its base does not, and those it loses.

    python3 scripts/pr_gate.py --mirror <bare mirror> [--main REF] [--mcore-version V] [--workdir DIR]
        [--json OUT] PR [PR ...]

PR is a pull-request number (the mirror's refs/heads/pull-request/N, as NVIDIA's copy-pr-bot pushes them, else
GitHub's refs/pull/N/head) or a commit. Its base is the merge base of its head with --main (default: the mirror's
HEAD). Both trees are taken from the mirror blob by blob and checked with `offlint check . --output-format json --no-cache` as
bridge_history_recall.py does (`--mcore-version` for a Bridge tree; a Megatron-LM tree gives its own). A finding
is the same at both when its code, file, unit (without " at line N") and first message line (without digits) are:
a number that moved is not news, a finding that moved to another unit is, and a file the pull request renamed
(git's rename detection) keeps its findings. Every new finding is what the gate would
ask the pull request's author to answer, so each must be read against the code before it is called right
(benchmarks/triage/). Prints the new and gone findings per pull request; exits 0 whatever they are, since this
measures the gate rather than being one. offlint runs as `python -m offlint` with this script's interpreter.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bridge_history_recall import extract, git, run_offlint  # noqa: E402  (the same trees and the same runs)

_DIGITS = re.compile(r"\d+(\.\d+)?")
_AT_LINE = re.compile(r" at line \d+")


def key(finding: dict, renamed: dict[str, str] | None = None) -> tuple:
    """What makes two findings the same; `renamed`: the base's paths the pull request moved -> their head paths."""
    first = finding.get("message", "").split("\n", 1)[0]
    filename = finding.get("filename")
    return (finding.get("code"), (renamed or {}).get(filename, filename), _AT_LINE.sub("", finding.get("unit") or ""),
            _DIGITS.sub("#", first))


def head_of(mirror: Path, pr: str) -> str:
    """The commit of a pull request's head: NVIDIA's copy-pr-bot branch (refs/heads/pull-request/N), else GitHub's
    own ref (refs/pull/N/head, which a mirror of all refs holds for every pull request); or `pr` as a commit."""
    refs = [f"refs/heads/pull-request/{pr}", f"refs/pull/{pr}/head"] if pr.isdigit() else [pr]
    for ref in refs:
        try:
            return git(mirror, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip()
        except subprocess.CalledProcessError:
            continue
    raise ValueError(f"none of {', '.join(refs)}")


def renames(mirror: Path, base: str, head: str) -> dict[str, str]:
    """The files the pull request moved (git's rename detection): base path -> head path."""
    out = git(mirror, "diff", "--name-status", "-M", "-z", base, head).decode("utf-8", "surrogateescape").split("\0")
    moved, at = {}, 0
    while at < len(out) - 1:
        status = out[at]
        if status.startswith("R") and at + 2 < len(out):
            moved[out[at + 1]] = out[at + 2]
            at += 3
        else:
            at += 3 if status.startswith("C") else 2
    return moved


def compare(base: list[dict], head: list[dict], renamed: dict[str, str] | None = None
            ) -> tuple[list[dict], list[dict]]:
    """(the head's findings the base does not have, the base's findings the head does not have); a finding of a
    file the pull request moved is the same as one of the moved file (`renamed`: base path -> head path)."""
    at_base, at_head = {key(f, renamed) for f in base}, {key(f) for f in head}
    return [f for f in head if key(f) not in at_base], [f for f in base if key(f, renamed) not in at_head]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, required=True, help="a bare mirror of the project")
    parser.add_argument("--main", default="HEAD", help="the branch pull requests merge into (default: HEAD)")
    parser.add_argument("--mcore-version", help="the megatron-core version to check against (a Bridge tree)")
    parser.add_argument("--workdir", type=Path, help="where the trees are kept (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the new and gone findings per pull request here")
    parser.add_argument("prs", nargs="+", metavar="PR")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="offlint-pr-gate-"))
    report = {}
    for pr in args.prs:
        try:
            head = head_of(args.mirror, pr)
            base = git(args.mirror, "merge-base", head, args.main).decode().strip()
        except Exception as exc:  # noqa: BLE001  (a name the mirror does not hold: say so and go on)
            print(f"{pr}: not in the mirror ({exc})")
            continue
        runs = {}
        for side, commit in (("base", base), ("head", head)):
            findings, seconds, errors = run_offlint(extract(args.mirror, commit, workdir), args.mcore_version, None)
            runs[side] = findings
            print(f"{pr} {side} {commit[:10]}: {len(findings)} findings in {seconds:.1f} s"
                  + (f"; errors: {errors.splitlines()[0]}" if errors else ""))
        new, gone = compare(runs["base"], runs["head"], renames(args.mirror, base, head))
        for label, found in (("new", new), ("gone", gone)):
            for finding in found:
                first = finding["message"].split("\n", 1)[0]
                print(f"  {label}: {finding['code']} {finding['filename']}:{finding['location']['row']} "
                      f"[{finding.get('unit', '')}] {first[:160]}")
        report[pr] = {"base": base, "head": head, "base_findings": len(runs["base"]),
                      "head_findings": len(runs["head"]), "new": new, "gone": gone}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(f"{sum(len(r['new']) for r in report.values())} new and "
          f"{sum(len(r['gone']) for r in report.values())} gone findings over {len(report)} pull requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
