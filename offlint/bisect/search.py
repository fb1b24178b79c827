"""The search: binary (one commit at a time) or k-ary (K commits per round), on positions, not commits.

Position 0 is the good end, N the bad end, 1..N-1 the commits between. `evaluate(positions)` tests one
round and returns "good", "bad" or "skip" per position; how (subprocesses, Slurm, cache, retries) is the
caller's business. Both ends are verified first (as mozregression does). Each round tests K points that
split the open interval into K+1 equal parts (K=1: the midpoint), so a deterministic failure is found in
ceil(log_{K+1}(N)) rounds after the ends. A skipped point is replaced by the nearest untested one; when
only skipped commits are left between the last good and the first bad, the result is ambiguous.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

Evaluate = Callable[[Sequence[int]], Sequence[str]]


@dataclass
class SearchResult:
    status: str  # "found" | "ambiguous" | "aborted"
    first_bad: int | None = None  # position of the first bad commit when found
    candidates: list[int] = field(default_factory=list)  # when ambiguous: any of these may be the first bad one
    last_good: int = 0
    reason: str = ""
    rounds: int = 0
    tested: list[int] = field(default_factory=list)  # positions in the order they were evaluated


def split_points(lo: int, hi: int, k: int, skipped: set[int], tested: set[int]) -> list[int]:
    """Up to k untested, unskipped positions strictly between lo and hi, nearest to the (k+1)-section points."""
    open_ = [p for p in range(lo + 1, hi) if p not in skipped and p not in tested]
    if not open_:
        return []
    span = hi - lo
    chosen: list[int] = []
    for j in range(1, k + 1):
        target = lo + (span * j) // (k + 1)
        if target <= lo:
            continue
        remaining = [p for p in open_ if p not in chosen]
        if not remaining:
            break
        chosen.append(min(remaining, key=lambda p: (abs(p - target), p)))
    return sorted(set(chosen))


def search(n: int, evaluate: Evaluate, jobs: int = 1, hint: int | None = None,
           on_round: Callable[[int, int], None] = lambda left, steps: None) -> SearchResult:
    """Find the first bad position in 1..n, given position 0 is expected good and n bad.

    `on_round(left, steps)` is told, before each round after the ends, how many candidates are left and
    roughly how many rounds remain (for the progress display).
    """
    result = SearchResult("aborted")
    tested: set[int] = set()

    def run(points: Sequence[int]) -> dict[int, str]:
        result.rounds += 1
        result.tested.extend(points)
        tested.update(points)
        return dict(zip(points, evaluate(list(points))))

    ends = run([0, n])
    if ends[0] != "good":
        result.reason = f"the good end is not good (it is {ends[0]})"
        return result
    if ends[n] != "bad":
        result.reason = f"the bad end is not bad (it is {ends[n]})"
        return result
    lo, hi, skipped = 0, n, set()
    pair = [p for p in (hint - 1, hint) if lo < p < hi] if hint is not None else []
    if pair:  # the pre-screen's prediction: test the predicted culprit and its parent first
        lo, hi = _narrow(run(pair), lo, hi, skipped)
    while hi - lo > 1:
        points = split_points(lo, hi, jobs, skipped, tested)
        if points:
            on_round(hi - lo - 1, math.ceil(math.log(hi - lo, jobs + 1) - 1e-9))
        if not points:
            result.status, result.last_good = "ambiguous", lo
            result.candidates = list(range(lo + 1, hi + 1))
            result.reason = "only skipped commits are left between the last good and the first bad commit"
            return result
        lo, hi = _narrow(run(points), lo, hi, skipped)
    result.status, result.first_bad, result.last_good = "found", hi, lo
    return result


def _narrow(verdicts: dict[int, str], lo: int, hi: int, skipped: set[int]) -> tuple[int, int]:
    skipped.update(p for p, v in verdicts.items() if v == "skip")
    bad = [p for p, v in verdicts.items() if v == "bad" and lo < p]
    hi = min([hi, *bad])
    good = [p for p, v in verdicts.items() if v == "good" and p < hi]
    lo = max([lo, *good])
    return lo, hi
