"""What a bisect found, for people and for tools: Markdown, JSON, and a `git bisect log` replay file.

The JSON holds `status`, the first bad commit's full SHA and one record per tested commit; the Markdown
adds the per-commit table, the failure signature and log tail, and the offload-configuration diff between
the culprit and its parent. The bisect log uses git's own commands, so `git bisect replay FILE` redoes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from offlint.bisect.classify import read_tail
from offlint.bisect.history import Commit, Range
from offlint.terminal import plural

LOG_TAIL_LINES = 30


@dataclass
class Tested:
    commit: Commit
    verdict: str  # good | bad | skip
    runs: list[dict]  # outcome, signature, rules, detail, peak_allocated_bytes, duration_s, log, cached


@dataclass
class Report:
    status: str  # found | ambiguous | aborted
    range: Range
    probe: dict
    terms: dict
    tested: list[Tested]
    first_bad: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)
    reason: str = ""
    rounds: int = 0
    probe_runs: int = 0  # runs in this session
    cached_runs: int = 0
    confidence: str = ""
    config_diff: list[dict] = field(default_factory=list)
    prescreen: dict | None = None  # {"lints": distinct file sets linted, "predicted": SHA or None}

    def culprit_record(self) -> Tested | None:
        if self.first_bad is None:
            return None
        return next((t for t in self.tested if t.commit.sha == self.first_bad.sha), None)


def _commit(c: Commit | None) -> dict | None:
    return None if c is None else {"sha": c.sha, "subject": c.subject, "author": c.author, "date": c.date}


def to_json(report: Report) -> dict:
    return {
        "status": report.status,
        "first_bad_commit": report.first_bad.sha if report.first_bad else None,
        "first_bad": _commit(report.first_bad),
        "candidates": [_commit(c) for c in report.candidates],
        "reason": report.reason,
        "good": _commit(report.range.good), "bad": _commit(report.range.bad),
        "given_good": report.range.given_good, "used_merge_base": report.range.used_merge_base,
        "candidate_count": len(report.range.candidates),
        "probe": report.probe, "terms": report.terms,
        "rounds": report.rounds, "probe_runs": report.probe_runs, "cached_runs": report.cached_runs,
        "confidence": report.confidence,
        "tested": [{"commit": _commit(t.commit), "verdict": t.verdict, "runs": t.runs} for t in report.tested],
        "config_diff": report.config_diff,
        "prescreen": report.prescreen,
    }


def _peak(runs: list[dict]) -> str:
    peaks = [max(r["peak_allocated_bytes"]) for r in runs if r.get("peak_allocated_bytes")]
    return f"{max(peaks) / 2**30:.2f} GiB" if peaks else ""


def to_markdown(report: Report) -> str:
    lines = [f"# offlint bisect: {report.status}", ""]
    r = report.range
    lines.append(f"- Range: good `{r.good.short}` .. bad `{r.bad.short}`, {len(r.candidates)} candidate commits"
                 + (f" (good end {r.given_good[:10]} is not an ancestor; merge base used)" if r.used_merge_base
                    else ""))
    lines.append(f"- Probe: `{report.probe.get('kind')}`; bad on {', '.join(report.terms['bad'])}; "
                 f"good on {', '.join(report.terms['good'])}")
    lines.append(f"- Probe runs: {report.probe_runs} in {plural(report.rounds, 'round')}"
                 + (f", {report.cached_runs} reused from the journal" if report.cached_runs else ""))
    if report.confidence:
        lines.append(f"- Confidence: {report.confidence}")
    if report.prescreen is not None:
        predicted = report.prescreen["predicted"]
        lines.append(f"- Pre-screen: {report.prescreen['lints']} distinct file sets linted without a checkout; "
                     f"predicted first bad commit: {('`' + predicted[:10] + '`') if predicted else 'none'}")
    lines.append("")
    if report.first_bad:
        c = report.first_bad
        lines += ["## First bad commit", "", f"`{c.sha}` {c.subject}", "", f"Author: {c.author}, {c.date}", ""]
        culprit = report.culprit_record()
        bad_run = next((x for x in (culprit.runs if culprit else []) if x.get("verdict") == "bad"), None)
        if bad_run:
            if bad_run.get("signature"):
                lines += [f"Signature: `{bad_run['signature']}`"
                          + (f" (offlint {', '.join(bad_run['rules'])})" if bad_run.get("rules") else ""), ""]
            tail = read_tail(Path(bad_run["log"])).splitlines()[-LOG_TAIL_LINES:] if bad_run.get("log") else []
            if tail:
                lines += ["Log tail:", "", "```", *tail, "```", ""]
    if report.status == "ambiguous":
        lines += ["## Candidates", "", "The first bad commit is one of:", ""]
        lines += [f"- `{c.sha}` {c.subject}" for c in report.candidates] + [""]
    if report.reason:
        lines += [f"Reason: {report.reason}", ""]
    if report.config_diff:
        lines += ["## Offload configuration: parent -> first bad commit", "", "| key | parent | first bad | set at |",
                  "|---|---|---|---|"]
        for d in report.config_diff:
            lines.append(f"| `{d['key']}` | {d['parent']} | {d['culprit']} | {d['where'] or 'default'} |")
        lines.append("")
    lines += ["## Tested commits", "", "| commit | verdict | outcome | signature | peak | duration | subject |",
              "|---|---|---|---|---|---|---|"]
    order = {c.sha: i for i, c in enumerate([r.good, *r.candidates])}
    for t in sorted(report.tested, key=lambda t: order.get(t.commit.sha, -1)):
        outcomes = ", ".join(x["outcome"] + (" (cached)" if x.get("cached") else "") for x in t.runs)
        signature = next((x["signature"] for x in t.runs if x.get("signature")), "") or ""
        duration = sum(x.get("duration_s") or 0 for x in t.runs)
        lines.append(f"| `{t.commit.short}` | {t.verdict} | {outcomes} | {signature[:80].replace('|', '/')} | "
                     f"{_peak(t.runs)} | {duration:.1f} s | {t.commit.subject[:60].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def bisect_log(report: Report, first_parent: bool = True) -> str:
    """A file `git bisect replay` accepts: start with both ends, then one verdict line per tested commit.

    "bad" is the new state as --bad-on defines it (it may be `pass` when searching for a fix).
    """
    old, new = "good", "bad"
    r = report.range
    option = " '--first-parent'" if first_parent else ""
    lines = [f"git bisect start{option} '{r.bad.sha}' '{r.good.sha}'"]
    for t in report.tested:
        if t.commit.sha in (r.good.sha, r.bad.sha):
            continue
        word = {"good": old, "bad": new, "skip": "skip"}[t.verdict]
        lines.append(f"# {word}: [{t.commit.sha}] {t.commit.subject}")
        lines.append(f"git bisect {word} {t.commit.sha}")
    if report.first_bad:
        lines.append(f"# first {new} commit: [{report.first_bad.sha}] {report.first_bad.subject}")
    elif report.candidates:
        lines.append("# only skipped commits left to test; possible first bad commits:")
        lines += [f"# possible first {new} commit: [{c.sha}] {c.subject}" for c in report.candidates]
    return "\n".join(lines) + "\n"


def write(path: str | None, text: str) -> OSError | None:
    """Write `text` to `path` (its folder made, as ruff's --output-file does), if a path is given; the error that
    stopped it, if any: the caller reports it once the bisect's answer is shown."""
    if not path:
        return None
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    except OSError as exc:
        return exc
    return None


def write_json(path: str | None, report: Report) -> OSError | None:
    return write(path, json.dumps(to_json(report), indent=2) + "\n")
