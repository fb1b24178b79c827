"""The four probes: how to test one commit (a `Step`) and what its result means (an outcome).

Every probe is a subprocess in the commit's worktree, with a timeout and a log file:
`lint` (offlint's rules on the chosen unit), `validate` (the resolved configuration built by the real
megatron-core: the installed one or the checkout's own, `--mcore-from-checkout`), `replay` (`offlint replay`,
the short GPU run) and `command` (any command, `{worktree}` substituted). `key()` is what the result cache
is keyed on besides the commit and its submodule SHAs.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from offlint.bisect.classify import REPLAY_OUTCOME_BY_CODE, Classified, classify
from offlint.outcomes import Outcome
from offlint.steps import Step, StepResult

PROBES = ("lint", "validate", "replay", "command")


@dataclass(frozen=True)
class Probe:
    kind: str
    config: str | None = None  # as given on the command line (absolute when outside the repository)
    config_in_repo: str | None = None  # the path relative to the repository root, read at each commit
    recipe: str | None = None
    overrides: tuple[str, ...] = ()
    select: tuple[str, ...] = ()  # lint: rule codes or prefixes
    mcore_from_checkout: str | None = None  # None: installed megatron-core; "" the worktree root; or a subdirectory
    command: str | None = None
    iters: int = 20  # replay (options.ITERS_DEFAULT, as `offlint replay`)
    memory_threshold: float = 0.10  # replay: a peak this fraction above the good end's is a memory regression
    memory_budget: int | None = None  # replay: bytes; a peak above it is a memory regression
    loss_tolerance: float = 0.5  # replay: final loss this fraction above the good end's (or NaN) is divergence
    timeout_s: float = 600.0
    config_digest: str = ""  # content of a configuration outside the repository (it can change between runs)
    replay_program: tuple[str, ...] = (sys.executable, "-m", "offlint", "replay")  # what starts a replay
    mcore_version: str | None = None  # --mcore-version: whose defaults lint, validate and replay read with

    def key(self) -> str:
        """Probe identity for the result cache (everything that changes a verdict except the commit)."""
        data = {k: v for k, v in asdict(self).items() if k not in ("timeout_s", "replay_program")
                and not (k == "mcore_version" and v is None)}  # keys of runs before --mcore-version still match
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def config_path(self, worktree: Path) -> str:
        if self.config_in_repo is not None:
            return str(worktree / self.config_in_repo)
        return str(self.config)

    def mcore_source(self, worktree: Path) -> str:
        if self.mcore_from_checkout is None:
            return ""
        return str(worktree / self.mcore_from_checkout) if self.mcore_from_checkout else str(worktree)

    def step(self, worktree: Path, name: str, log_dir: Path) -> Step:
        result_json = log_dir / f"{name}.json"
        log = log_dir / f"{name}.log"
        env = {"OFFLINT_BISECT_WORKTREE": str(worktree), "PYTHONUNBUFFERED": "1"}
        if self.kind in ("lint", "validate"):
            argv = [sys.executable, "-m", "offlint.bisect.child", self.kind, "--root", str(worktree),
                    "--config", self.config_path(worktree), "--result-json", str(result_json)]
            argv += ["--recipe", self.recipe] if self.recipe else []
            argv += [a for o in self.overrides for a in ("--override", o)]
            argv += [a for s in self.select for a in ("--select", s)]
            argv += ["--mcore-src", self.mcore_source(worktree)] if self.kind == "validate" else []
            argv += ["--mcore-version", self.mcore_version] if self.mcore_version else []
        elif self.kind == "replay":
            argv = [*self.replay_program, self.config_path(worktree)]
            argv += ["--recipe", self.recipe] if self.recipe else []
            argv += [a for o in self.overrides for a in ("--override", o)]
            argv += ["--iters", str(self.iters), "--result-json", str(result_json)]
            argv += ["--mcore-version", self.mcore_version] if self.mcore_version else []
            source = self.mcore_source(worktree)
            if source:
                env["PYTHONPATH"] = source
        else:
            argv = ["bash", "-c", str(self.command).replace("{worktree}", str(worktree))]
        return Step(name, tuple(argv), worktree, log, self.timeout_s, env, gpus=1 if self.kind == "replay" else 0)

    def classify(self, result: StepResult, rule_errors=None) -> Classified:
        result_json = None if self.kind == "command" else result.step.log.with_suffix(".json")
        exit_codes = REPLAY_OUTCOME_BY_CODE if self.kind == "replay" else None
        return classify(result, result_json, rule_errors, exit_codes)

    def against_baseline(self, verdict: Classified, baseline: Classified | None) -> Classified:
        """Replay: a passing run whose peak memory or loss is out of line with the good end's is not a pass."""
        if self.kind != "replay" or verdict.outcome is not Outcome.PASS:
            return verdict
        peak = max(verdict.peak_allocated_bytes or [0])
        if self.memory_budget is not None and peak > self.memory_budget:
            return replace(verdict, outcome=Outcome.MEMORY_REGRESSION,
                           signature=f"peak {_gib(peak)} above the budget of {_gib(self.memory_budget)}")
        if baseline is not None and baseline.peak_allocated_bytes:
            base = max(baseline.peak_allocated_bytes)
            if base and peak > base * (1 + self.memory_threshold):
                return replace(verdict, outcome=Outcome.MEMORY_REGRESSION,
                               signature=f"peak {_gib(peak)} is {peak / base - 1:.0%} above the good end's {_gib(base)}")
        if verdict.loss:
            last = verdict.loss[-1]
            base_loss = baseline.loss[-1] if baseline is not None and baseline.loss else None
            if not math.isfinite(last) or (base_loss is not None and last > base_loss * (1 + self.loss_tolerance)):
                return replace(verdict, outcome=Outcome.LOSS_DIVERGENCE, signature=f"final loss {last}")
        return verdict


@dataclass
class Terms:
    """Which outcome classes mean the new ("bad") state and which the old ("good") one; the rest is a skip."""

    bad: frozenset[Outcome]
    good: frozenset[Outcome] = field(default_factory=lambda: frozenset({Outcome.PASS}))

    def verdict(self, outcome: Outcome) -> str:
        if outcome in self.bad:
            return "bad"
        if outcome in self.good:
            return "good"
        return "skip"


def parse_classes(text: str | None, option: str) -> frozenset[Outcome] | None:
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = {o.value: o for o in Outcome}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"{option} {text!r}: unknown outcome class {', '.join(unknown) or '(empty)'}; choose from "
                         f"{', '.join(known)}")
    return frozenset(known[n] for n in names)


def make_terms(bad_on: str | None, good_on: str | None) -> Terms:
    """clarifications.md: bad defaults to every failure class, good to pass; `--bad-on pass` flips the default."""
    from offlint.outcomes import FAILURE_CLASSES

    bad = parse_classes(bad_on, "--bad-on") or frozenset(FAILURE_CLASSES)
    good = parse_classes(good_on, "--good-on")
    if good is None:
        good = frozenset(FAILURE_CLASSES) if Outcome.PASS in bad else frozenset({Outcome.PASS})
    overlap = bad & good
    if overlap:
        raise ValueError(f"--bad-on and --good-on both name {', '.join(sorted(o.value for o in overlap))}")
    return Terms(bad, good)


def _gib(nbytes: int) -> str:
    """Bytes as a reader compares them against a GPU's size (the exact count stays in the result file)."""
    return f"{nbytes / 2**30:.2f} GiB"
