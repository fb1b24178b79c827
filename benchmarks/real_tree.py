#!/usr/bin/env python3
"""Compare `offlint check` on a real checkout with a committed triage of its findings.

    python benchmarks/real_tree.py PATH [--expected FILE] [--strict] [--write-untriaged FILE] [-- extra offlint args]

Runs `python -m offlint check . --output-format json` (this interpreter, as a subprocess, from PATH, so paths
in the findings are relative to the checkout and the real command line is what is measured), then matches every
finding against the triage file:

- an *entry* `{"path", "line", "code", "verdict": "real" | "false-positive", "reason"}` matches one finding with
  that path, code and line. Two findings at one line are told apart by the entry's optional `"unit"` (the
  finding's `unit` field), `"possible"` (the --strict flag of the finding) and `"fingerprint"` (a substring the
  message must contain). Units are preferred but not required, so a renamed unit still matches the same line;
  `possible` and a fingerprint are always required when given.
- a *group* `{"group", "verdict", "reason", "count", "code"?, "possible"?, "path"?, "unit"?, "unknown"?,
  "message"?}` matches any number of findings left over by the entries: `code` is a code or a list, `path` a glob
  (fnmatch, `*` crosses `/`), `unit`, `unknown` and `message` are regular expressions searched in the unit name,
  in the message's "(depends on unknown values: ...)" part and in the whole message. The first group that
  matches wins. `count` is how many findings it matched when it was triaged (a changed count is reported).
  Groups are for `--strict`, whose thousands of "possible" findings are triaged by class.

The triage file is `{"offlint_args": [...], "extends": "other.json"?, "entries": [...], "groups": [...]}` (or a
bare list of entries). `offlint_args` are passed to offlint unless args are given after `--`; `extends` loads
another triage file's entries and groups first (the strict triage extends the default one).

Prints the counts per rule and verdict, the findings no entry or group matches ("untriaged"), the entries and
groups that match nothing any more ("gone"), and the false-positive entries still reported. Exit status: 0 when
every finding is triaged as real and no real entry is gone; 1 when there is an untriaged finding, a
false-positive entry or group still reported, a real entry gone (a lost true finding), or a file offlint
could not check (its `offlint: error:` lines are listed); 2 when offlint itself failed (no JSON list of findings)
or the triage file is unreadable. Without --expected, the Megatron Bridge triage in benchmarks/triage/ is
used (its -strict variant with --strict).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

TRIAGE_DIR = Path(__file__).resolve().parent / "triage"
DEFAULT_TRIAGE = TRIAGE_DIR / "megatron-bridge-067f987.json"
DEFAULT_STRICT_TRIAGE = TRIAGE_DIR / "megatron-bridge-067f987-strict.json"
VERDICTS = ("real", "false-positive")
_UNKNOWN_PART = re.compile(r"\(depends on unknown values: (.*)\)\s*$", re.S)


class TriageError(Exception):
    """The triage file cannot be used (unreadable, not JSON, or an entry without its required fields)."""


@dataclasses.dataclass
class Triage:
    entries: list[dict]
    groups: list[dict]
    offlint_args: list[str]


@dataclasses.dataclass
class Comparison:
    """Each finding with the entry or group it matched (None: untriaged), and what matched nothing."""

    matched: list[tuple[dict, dict | None]]
    gone_entries: list[dict]
    gone_groups: list[dict]
    group_counts: dict[int, int]  # id(group) -> findings it matched this run

    def verdict(self, match: dict | None) -> str:
        return "untriaged" if match is None else match["verdict"]

    def counts(self) -> dict[str, collections.Counter]:
        """Per rule code: how many findings are real, false-positive and untriaged."""
        table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for finding, match in self.matched:
            table[finding["code"]][self.verdict(match)] += 1
        return dict(sorted(table.items()))

    def untriaged(self) -> list[dict]:
        return [finding for finding, match in self.matched if match is None]

    def false_positives_reported(self) -> list[tuple[dict, dict]]:
        return [(finding, match) for finding, match in self.matched
                if match is not None and match["verdict"] == "false-positive"]

    def lost_real(self) -> list[dict]:
        return [e for e in self.gone_entries if e["verdict"] == "real"] + \
            [g for g in self.gone_groups if g["verdict"] == "real"]

    def exit_code(self) -> int:
        return 1 if self.untriaged() or self.false_positives_reported() or self.lost_real() else 0


def load_triage(path: Path, _seen: tuple[Path, ...] = ()) -> Triage:
    """Reads a triage file (and the one it extends) and checks each entry's and group's required fields."""
    path = path.resolve()
    if path in _seen:
        raise TriageError(f"{path}: 'extends' loops back to itself")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TriageError(f"{path}: {exc}") from None
    if isinstance(data, list):
        data = {"entries": data}
    if not isinstance(data, dict):
        raise TriageError(f"{path}: expected a JSON object or a list of entries")
    base = Triage([], [], [])
    if data.get("extends"):
        base = load_triage(path.parent / data["extends"], _seen + (path,))
    entries, groups = data.get("entries", []), data.get("groups", [])
    for entry in entries:
        _require(path, entry, ("path", "line", "code", "verdict", "reason"))
    for group in groups:
        _require(path, group, ("group", "verdict", "reason"))
    args = data.get("offlint_args", base.offlint_args)
    return Triage(base.entries + entries, base.groups + groups, list(args))


def _require(path: Path, item: object, fields: tuple[str, ...]) -> None:
    if not isinstance(item, dict) or any(f not in item for f in fields):
        raise TriageError(f"{path}: {str(item)[:120]} needs the fields {', '.join(fields)}")
    if item["verdict"] not in VERDICTS:
        raise TriageError(f"{path}: verdict {item['verdict']!r} is not one of {', '.join(VERDICTS)}")
    if not str(item["reason"]).strip():
        raise TriageError(f"{path}: {str(item)[:120]} has an empty reason")


def finding_path(finding: dict) -> str:
    return finding["filename"].replace("\\", "/").removeprefix("./")


def finding_line(finding: dict) -> int:
    return int(finding["location"]["row"])


def unknown_part(message: str) -> str:
    """The "(depends on unknown values: ...)" part of a --strict message, or ''."""
    match = _UNKNOWN_PART.search(message)
    return match.group(1) if match else ""


def _entry_fits(entry: dict, finding: dict, use_unit: bool) -> bool:
    if (entry["path"], entry["code"], int(entry["line"])) != \
            (finding_path(finding), finding["code"], finding_line(finding)):
        return False
    if entry.get("fingerprint") and entry["fingerprint"] not in finding["message"]:
        return False
    if "possible" in entry and bool(entry["possible"]) != bool(finding.get("possible")):
        return False
    return not (use_unit and entry.get("unit") is not None and entry["unit"] != finding.get("unit"))


def _group_fits(group: dict, finding: dict) -> bool:
    codes = group.get("code")
    if codes is not None and finding["code"] not in ([codes] if isinstance(codes, str) else codes):
        return False
    if "possible" in group and bool(finding.get("possible")) != bool(group["possible"]):
        return False
    if "path" in group and not fnmatch.fnmatchcase(finding_path(finding), group["path"]):
        return False
    if "unit" in group and not re.search(group["unit"], finding.get("unit") or ""):
        return False
    if "unknown" in group and not re.search(group["unknown"], unknown_part(finding["message"])):
        return False
    return not ("message" in group and not re.search(group["message"], finding["message"]))


def compare(findings: list[dict], triage: Triage) -> Comparison:
    """Matches findings to entries one to one (first with units, then without), the rest to groups."""
    match: dict[int, dict] = {}
    free = list(triage.entries)
    for use_unit in (True, False):
        for i, finding in enumerate(findings):
            if i in match:
                continue
            for k, entry in enumerate(free):
                if _entry_fits(entry, finding, use_unit):
                    match[i] = free.pop(k)
                    break
    group_counts = {id(g): 0 for g in triage.groups}
    for i, finding in enumerate(findings):
        if i in match:
            continue
        for group in triage.groups:
            if _group_fits(group, finding):
                match[i] = group
                group_counts[id(group)] += 1
                break
    return Comparison([(f, match.get(i)) for i, f in enumerate(findings)], free,
                      [g for g in triage.groups if group_counts[id(g)] == 0], group_counts)


def _where(finding: dict) -> str:
    return f"{finding_path(finding)}:{finding_line(finding)}:{finding['location'].get('column', 0)}"


def report(result: Comparison, triage: Triage, limit: int = 50) -> str:
    """The human-readable comparison: counts per rule and verdict, then what needs attention."""
    lines = [f"{'rule':8} {'real':>7} {'false+':>7} {'untriaged':>9} {'total':>7}"]
    totals: collections.Counter = collections.Counter()
    for code, counter in result.counts().items():
        totals.update(counter)
        lines.append(f"{code:8} {counter['real']:7} {counter['false-positive']:7} {counter['untriaged']:9} "
                     f"{sum(counter.values()):7}")
    lines.append(f"{'total':8} {totals['real']:7} {totals['false-positive']:7} {totals['untriaged']:9} "
                 f"{sum(totals.values()):7}")
    untriaged = result.untriaged()
    lines.append(f"\nuntriaged: {len(untriaged)}")
    for finding in untriaged[:limit]:
        lines.append(f"  {_where(finding)}: {finding['code']} [{finding.get('unit')}] {finding['message'][:160]}")
    if len(untriaged) > limit:
        lines.append(f"  ... and {len(untriaged) - limit} more (--write-untriaged FILE writes them all)")
    gone = result.gone_entries + result.gone_groups
    lines.append(f"\ngone (triaged, no longer reported): {len(gone)}")
    for item in gone[:limit]:
        where = f"{item['path']}:{item['line']}: {item['code']}" if "path" in item and "line" in item \
            else f"group {item['group']}"
        lines.append(f"  {where} ({item['verdict']}){'  LOST REAL FINDING' if item['verdict'] == 'real' else ''}")
    fps = result.false_positives_reported()
    lines.append(f"\nfalse-positive entries still reported: {len(fps)}")
    by_group = collections.Counter(m["group"] for _, m in fps if "group" in m)
    by_entry = [(f, m) for f, m in fps if "group" not in m]
    for finding, entry in by_entry[:limit]:
        lines.append(f"  {_where(finding)}: {finding['code']}: {entry['reason'][:140]}")
    if len(by_entry) > limit:
        lines.append(f"  ... and {len(by_entry) - limit} more entries")
    for name, count in by_group.most_common():
        lines.append(f"  group {name}: {count} findings")
    changed = [(g, result.group_counts[id(g)]) for g in triage.groups
               if "count" in g and result.group_counts[id(g)] not in (0, g["count"])]
    if changed:
        lines.append("\ngroups whose count changed (triaged -> now):")
        lines.extend(f"  {g['group']}: {g['count']} -> {n}" for g, n in changed)
    return "\n".join(lines)


def skeleton(findings: list[dict]) -> list[dict]:
    """Entries to fill in for findings not yet triaged (verdict and reason left empty on purpose)."""
    return [{"path": finding_path(f), "line": finding_line(f), "code": f["code"], "unit": f.get("unit"),
             "possible": bool(f.get("possible")), "verdict": "", "reason": "", "message": f["message"]}
            for f in findings]


def run_offlint(tree: Path, args: list[str], strict: bool) -> tuple[list[dict], list[str]]:
    """`offlint check . --output-format json` from the checkout: its findings and its per-file error lines.

    Exit 2 with a JSON list means some files could not be read (one `offlint: error:` line each) while the
    others were checked; anything else that is not exit 0 or 1 with a JSON list is an error."""
    cmd = [sys.executable, "-m", "offlint", "check", ".", "--output-format", "json", *args]
    if strict and "--strict" not in args:
        cmd.append("--strict")
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    try:
        findings = json.loads(proc.stdout)
    except ValueError:
        findings = None
    if proc.returncode not in (0, 1, 2) or not isinstance(findings, list):
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} without a JSON list of findings: "
                           f"{proc.stderr.strip()[-2000:]}")
    return findings, [line for line in proc.stderr.splitlines() if line.startswith("offlint: error:")]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else None
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path, help="the checkout to lint")
    parser.add_argument("--expected", type=Path, help="the triage file (default: the Megatron Bridge one)")
    parser.add_argument("--strict", action="store_true", help="run offlint with --strict")
    parser.add_argument("--write-untriaged", type=Path, metavar="FILE",
                        help="write the untriaged findings as entries to fill in")
    args = parser.parse_args(own)
    expected = args.expected or (DEFAULT_STRICT_TRIAGE if args.strict else DEFAULT_TRIAGE)
    try:
        triage = load_triage(expected)
    except TriageError as exc:
        print(f"real_tree: error: {exc}", file=sys.stderr)
        return 2
    if not args.tree.is_dir():
        print(f"real_tree: error: {args.tree}: not a directory", file=sys.stderr)
        return 2
    offlint_args = triage.offlint_args if extra is None else extra
    try:
        findings, errors = run_offlint(args.tree, offlint_args, args.strict)
    except (OSError, RuntimeError) as exc:
        print(f"real_tree: error: {exc}", file=sys.stderr)
        return 2
    result = compare(findings, triage)
    print(f"# offlint check . --output-format json {' '.join(offlint_args)}{' --strict' if args.strict else ''}"
          f" in {args.tree}: {len(findings)} findings; triage {expected}")
    print(report(result, triage))
    print(f"\nfiles offlint could not check: {len(errors)}")
    print("\n".join(f"  {line}" for line in errors))
    if args.write_untriaged:
        args.write_untriaged.write_text(json.dumps(skeleton(result.untriaged()), indent=1) + "\n", encoding="utf-8")
    return 1 if errors else result.exit_code()


if __name__ == "__main__":
    sys.exit(main())
