"""`--fractions 0,0.25,...`: one row per optimizer offload fraction, as a table and a PNG plot.

Rows are computed from result dicts (recorded or fresh), so the table and the plot can be rebuilt and tested
without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offlint.outcomes import Outcome
from offlint.replay import verify
from offlint.replay.result import outcome_of, peak_bytes


@dataclass(frozen=True)
class SweepRow:
    fraction: float | None  # None: the baseline (offloading off)
    outcome: str
    peak_allocated: int | None
    peak_reserved: int | None
    expected_drop: int | None
    step_s: float | None
    loss_delta: float | None
    verdict: str  # "pass", or the first failing criterion's outcome

    @property
    def label(self) -> str:
        return "off" if self.fraction is None else f"{self.fraction:g}"


def parse_fractions(text: str) -> list[float]:
    """'0,0.25,0.5' -> [0.0, 0.25, 0.5]; ValueError (one line) for anything outside [0, 1]."""
    values = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"--fractions: {part!r} is not a number") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"--fractions: {value:g} is outside [0, 1]")
        values.append(value)
    if not values:
        raise ValueError("--fractions: give at least one fraction, e.g. 0,0.25,0.5,0.75,1")
    return sorted(set(values))


def rows(baseline: dict, runs: dict[float, dict]) -> list[SweepRow]:
    out = [_row(None, baseline, None, Outcome(baseline["outcome"]).value)]
    for fraction in sorted(runs):
        result = runs[fraction]
        outcome, _ = verify.verdict(verify.check(baseline, result))
        ok = outcome_of(result) is Outcome.PASS
        out.append(_row(fraction, result, verify.max_loss_delta(baseline, result) if ok else None, outcome.value,
                        verify.expected_drop(baseline, result) if ok else None))
    return out


def _row(fraction, result, loss_delta, verdict_text, expected=None) -> SweepRow:
    return SweepRow(fraction, result["outcome"], peak_bytes(result), peak_bytes(result, "reserved"), expected,
                    verify.median_step_s(result), loss_delta, verdict_text)


def table(sweep: list[SweepRow]) -> str:
    """A Markdown table (pasteable into docs/gpu-validation.md)."""
    base = sweep[0]
    header = ("| fraction | outcome | peak allocated GiB | peak reserved GiB | drop GiB | expected drop GiB "
              "| step s | vs baseline | max loss delta | verdict |")
    lines = [header, "|" + "---|" * 10]
    for row in sweep:
        drop = (base.peak_allocated - row.peak_allocated
                if None not in (base.peak_allocated, row.peak_allocated) and row.fraction is not None else None)
        slowdown = f"{row.step_s / base.step_s:.2f}x" if row.step_s and base.step_s else "n/a"
        lines.append(f"| {row.label} | {row.outcome} | {_gib(row.peak_allocated)} | {_gib(row.peak_reserved)} "
                     f"| {_gib(drop)} | {_gib(row.expected_drop)} | {_num(row.step_s, '.3f')} | {slowdown} "
                     f"| {_num(row.loss_delta, '.2e')} | {row.verdict} |")
    return "\n".join(lines)


def plot(sweep: list[SweepRow], path: Path, title: str = "") -> Path:
    """Peak memory and step time against the offload fraction (baseline as dashed lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, points = sweep[0], [r for r in sweep[1:] if r.peak_allocated is not None]
    xs = [r.fraction for r in points]
    figure, (memory, speed) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    memory.plot(xs, [r.peak_allocated / 2**30 for r in points], "o-", label="peak allocated")
    memory.plot(xs, [(r.peak_reserved or 0) / 2**30 for r in points], "s--", label="peak reserved")
    if base.peak_allocated is not None:
        memory.axhline(base.peak_allocated / 2**30, color="gray", linestyle=":", label="baseline (no offload)")
    memory.set(xlabel="optimizer_offload_fraction", ylabel="GiB (largest rank)", title="Peak GPU memory")
    memory.legend()
    speed.plot(xs, [r.step_s or 0 for r in points], "o-", color="tab:red", label="median step time")
    if base.step_s:
        speed.axhline(base.step_s, color="gray", linestyle=":", label="baseline (no offload)")
    speed.set(xlabel="optimizer_offload_fraction", ylabel="seconds", title="Step time")
    speed.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.3f}"


def _num(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
