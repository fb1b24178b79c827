"""Test commits: the `evaluate` callback of the search, built from worktrees, a probe, a runner and the journal.

One round: every position without enough cached runs gets a run (K at a time, each in its own worktree);
with `retries`, a commit that looked good is run again, up to retries+1 times, and one failure of a bad
class makes it bad for good (a failure is certain, a pass only adds confidence). The bad end is run every
time when retries are on, which measures how often the failure shows up; that rate gives the confidence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from offlint.bisect.classify import Classified
from offlint.bisect.history import Commit, submodule_shas
from offlint.bisect.journal import Journal, result_key
from offlint.bisect.probes import Probe, Terms
from offlint.bisect.worktree import WorktreeError, Worktrees
from offlint.outcomes import Outcome
from offlint.steps import StepRunner


INFRA_ATTEMPTS = 3  # runs of a commit whose every run was an infrastructure failure (Slurm NODE_FAIL, ...)


@dataclass
class Run:
    sha: str
    attempt: int
    verdict: Classified
    log: str
    duration_s: float
    cached: bool = False


@dataclass
class CommitTester:
    commits: list[Commit]  # position 0 = good end, then the candidates (last = bad end)
    probe: Probe
    terms: Terms
    runner: StepRunner
    worktrees: Worktrees
    journal: Journal
    log_dir: Path
    jobs: int = 1
    retries: int = 0
    rule_errors: Callable | None = None
    progress: Callable[[str], None] = lambda line: None
    runs: dict[int, list[Run]] = field(default_factory=dict)
    batches: int = 0  # runner calls (rounds of real work)
    executed: int = 0  # probe runs started in this session (cache hits excluded)
    _submodules: dict[str, dict[str, str]] = field(default_factory=dict)

    def baseline(self) -> Classified | None:
        good = self.runs.get(0)
        return good[0].verdict if good else None

    def outcome_of(self, run: Run) -> Classified:
        return self.probe.against_baseline(run.verdict, self.baseline())

    def verdict(self, position: int) -> str:
        verdicts = [self.terms.verdict(self.outcome_of(r).outcome) for r in self.runs.get(position, [])]
        if "bad" in verdicts:
            return "bad"
        return "good" if "good" in verdicts else "skip"

    def __call__(self, positions: Sequence[int]) -> list[str]:
        for position in positions:
            self._load_cached(position)
        while True:
            todo = [p for p in positions if self._needs_run(p, positions)]
            if not todo:
                return [self.verdict(p) for p in positions]
            for start in range(0, len(todo), self.jobs):
                self._run_batch(todo[start:start + self.jobs])

    def _needs_run(self, position: int, round_: Sequence[int]) -> bool:
        runs = self.runs.get(position, [])
        if not runs:
            return True
        if all(r.verdict.outcome is Outcome.INFRA_FAILURE for r in runs):  # a node failure says nothing
            return len(runs) < INFRA_ATTEMPTS
        if len(runs) > self.retries or any(r.verdict.outcome is Outcome.BUILD_FAILURE for r in runs):
            return False
        calibrating = position == len(self.commits) - 1
        return calibrating or self.verdict(position) == "good"

    def _key(self, position: int) -> str:
        sha = self.commits[position].sha
        if sha not in self._submodules:
            self._submodules[sha] = submodule_shas(self.worktrees.repo, sha)
        return result_key(sha, self._submodules[sha], self.probe.key())

    def _load_cached(self, position: int) -> None:
        if position in self.runs:
            return
        cached = self.journal.runs(self._key(position))
        if cached:
            self.runs[position] = [Run(r["sha"], r["attempt"], _classified(r), r["log"], r["duration_s"], True)
                                   for r in cached]
            for run in self.runs[position]:
                self._report(position, run)

    def _run_batch(self, positions: list[int]) -> None:
        steps, prepared = [], []
        for slot, position in enumerate(positions):
            commit = self.commits[position]
            attempt = len(self.runs.get(position, [])) + 1
            name = f"{commit.short}-{self.probe.kind}-try{attempt}"
            try:
                worktree = self.worktrees.checkout(slot, commit.sha)
            except WorktreeError as exc:
                self._record(position, attempt, Classified(Outcome.BUILD_FAILURE, detail=str(exc)), "", 0.0)
                continue
            steps.append(self.probe.step(worktree, name, self.log_dir))
            prepared.append((position, attempt))
        if not steps:
            return
        self.batches += 1
        self.executed += len(steps)
        started = time.monotonic()
        results = self.runner.run(steps)
        for (position, attempt), result in zip(prepared, results):
            verdict = self.probe.classify(result, self.rule_errors)
            self._record(position, attempt, verdict, str(result.step.log), result.duration_s or
                         time.monotonic() - started)

    def _record(self, position: int, attempt: int, verdict: Classified, log: str, duration: float) -> None:
        sha = self.commits[position].sha
        run = Run(sha, attempt, verdict, log, round(duration, 3))
        self.runs.setdefault(position, []).append(run)
        self.journal.append({"type": "run", "key": self._key(position), "sha": sha, "attempt": attempt,
                             "outcome": verdict.outcome.value, "signature": verdict.signature,
                             "rules": verdict.rules, "detail": verdict.detail,
                             "peak_allocated_bytes": verdict.peak_allocated_bytes, "loss": verdict.loss,
                             "log": log, "duration_s": run.duration_s, "time": time.time()})
        self._report(position, run)

    def _report(self, position: int, run: Run) -> None:
        commit = self.commits[position]
        outcome = self.outcome_of(run)
        verdict = self.terms.verdict(outcome.outcome)
        note = " (cached)" if run.cached else ""
        signature = f" {outcome.signature}" if outcome.signature else ""
        self.progress(f"[{commit.short}] try {run.attempt}: {outcome.outcome.value} -> {verdict}{signature}"
                      f" ({run.duration_s:.1f} s){note}  {commit.subject[:60]}")

    def failure_rate(self) -> float | None:
        """How often the bad end failed with a bad class (None when it ran once)."""
        runs = self.runs.get(len(self.commits) - 1, [])
        if len(runs) < 2:
            return None
        bad = sum(self.terms.verdict(self.outcome_of(r).outcome) == "bad" for r in runs)
        return bad / len(runs)


def _classified(record: dict) -> Classified:
    return Classified(Outcome(record["outcome"]), record.get("signature"), list(record.get("rules") or []),
                      record.get("detail") or "", record.get("peak_allocated_bytes"), record.get("loss"))


class StaticTester(CommitTester):
    """`--probe lint --prescreen`: verdicts come from the pre-screen's static lint; nothing is checked out."""

    def __init__(self, *args, static: dict[int, Classified], **kwargs):
        super().__init__(*args, **kwargs)
        self.static = static

    def _key(self, position: int) -> str:
        return super()._key(position) + "-static"

    def _needs_run(self, position: int, round_) -> bool:
        return position not in self.runs  # a static verdict does not change when repeated

    def _run_batch(self, positions: list[int]) -> None:
        self.batches += 1
        self.executed += len(positions)
        for position in positions:
            attempt = len(self.runs.get(position, [])) + 1
            self._record(position, attempt, self.static[position], "", 0.0)
