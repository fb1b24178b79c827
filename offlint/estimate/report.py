"""`offlint estimate` output: the breakdown table, host memory, the what-if table and the verdict (text or JSON)."""

from __future__ import annotations

from dataclasses import replace

from offlint.estimate import params
from offlint.estimate.devices import GIB, Device, agreed
from offlint.estimate.memory import Estimate
from offlint.estimate.whatif import Option
from offlint.terminal import plural


def _gib(n: float) -> str:
    return f"{n / GIB:8.2f}"


def verdict_state(result: Estimate, device: Device, with_expandable: bool | None = None) -> str:
    """"fits", "at risk" or "does not fit": the point estimate against the device and the at-risk margin
    (devices.AT_RISK_MARGIN; with an unknown launch environment, the margin without expandable_segments)."""
    from offlint.estimate import oom

    peak, usable = result.peak.total, device.usable_bytes
    if peak > usable:
        return "does not fit"
    return "at risk" if peak > usable - oom.margin_bytes(device, with_expandable is True) else "fits"


def agreed_state(result: Estimate, device: Device, with_expandable: bool | None = None) -> str | None:
    """verdict_state where it is the same at both ends of a bracketed (stated) capacity, else None."""
    return agreed(lambda d: verdict_state(result, d, with_expandable), device, None)


def capacity_cases(result: Estimate, device: Device, with_expandable: bool | None = None) -> list[tuple[str, str]]:
    """Over a bracketed capacity (devices.stated_range): each verdict_state with the part of the bracket it holds
    over, lowest capacity first ("below 279.6 GiB", "at risk"), the bounds found by bisection on verdict_state
    itself (the state only improves with capacity), to 1 MiB."""
    low, high = device.total_mib, device.upper.total_mib

    def state(mib: float) -> str:
        return verdict_state(result, replace(device, total_mib=mib, upper=None), with_expandable)

    cases, start = [], low
    while True:
        here = state(start)
        if state(high) == here:
            cases.append((here, start))
            break
        lo, hi = start, high  # state(lo) == here != state(hi)
        while hi - lo > 1:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if state(mid) == here else (lo, mid)
        cases.append((here, start))
        start = hi
    bounds = [f"{mib / 1024:.1f} GiB" for _, mib in cases[1:]]  # where each later state starts
    spans = [""] if not bounds else [f"below {bounds[0]}"] + [
        f"from {b}" + (f" to {bounds[i + 1]}" if i + 1 < len(bounds) else "") for i, b in enumerate(bounds)]
    return [(span, here) for span, (here, _) in zip(spans, cases)]


def bracket(low: Device) -> str:
    """What is known of a stated capacity (devices.stated_range), for a note or a conditional verdict."""
    name = low.name.split(" (")[0].upper()
    return (f"{name}'s capacity is not measured; NVIDIA's stated size brackets it between {low.total_gib:.1f} and "
            f"{low.upper.total_gib:.1f} GiB (as on every measured GPU)")


def depends(what: str, alternatives, device: Device,
            with_expandable: bool | None = None) -> tuple[str, list[tuple[str, str, str]]] | None:
    """None when every alternative (oom.alternatives) gets the same verdict on `device` (at both ends of a
    bracketed capacity); else what the verdict depends on and one (condition, state, verdict) per case: each
    alternative, and where a bracketed capacity's ends disagree, each part of the bracket (capacity_cases)."""
    states = [agreed_state(a.result, device, with_expandable) for a in alternatives]
    if None not in states and len(set(states)) == 1:
        return None
    cases = []
    for a, state in zip(alternatives, states):
        if state is not None:
            end = device if state == "fits" or device.upper is None else device.upper  # the end that decides it
            cases.append((a.label, state, verdict(a.result, end, with_expandable)))
            continue
        for span, here in capacity_cases(a.result, device, with_expandable):
            condition = f"{a.label}, with a capacity {span}" if a.label else f"with a capacity {span}"
            cases.append((condition, here, f"{here}: {a.result.peak.total / GIB:.1f} GiB needed"))
    whys = [what] if len(set(states)) > 1 else []
    whys += [f"the GPU's capacity ({bracket(device)}; pass --gpu CAPACITY, in GiB as torch reports it, once it is "
             f"measured)"] if None in states else []
    return " and ".join(whys), cases


def verdict(result: Estimate, device: Device, with_expandable: bool | None = None) -> str:
    from offlint.estimate import oom

    peak, usable = result.peak.total, device.usable_bytes
    floor = oom.floor_bytes(result)
    state = verdict_state(result, device, with_expandable)
    calibrated = (f"calibrated floor (model state + {oom.activation_floor(result):.0%} of activations, no allowance) "
                  f"{floor / GIB:.1f} GiB")
    if state == "does not fit":
        sure = "an OOM even at the floor" if floor > usable else "the floor fits: outside the calibrated range"
        return (f"does not fit: {peak / GIB:.1f} GiB needed, {usable / GIB:.1f} GiB usable (short by "
                f"{(peak - usable) / GIB:.1f} GiB); {calibrated}: {sure}")
    headroom = f"{peak / GIB:.1f} GiB of {usable / GIB:.1f} GiB usable ({(usable - peak) / GIB:.1f} GiB headroom)"
    if state == "at risk":
        with_it, without = oom.margin_bytes(device, True) / GIB, oom.margin_bytes(device, False) / GIB
        margin = (f"under the {with_it:.1f} GiB margin with expandable_segments" if with_expandable else
                  f"under the {without:.1f} GiB margin without expandable_segments ({with_it:.1f} GiB with it)")
        return f"at risk: {headroom}, {margin}; {calibrated}"
    return f"fits: {headroom}"


def largest_parts(result: Estimate, n: int = 3) -> list[tuple[str, float]]:
    parts = sorted(result.peak.parts, key=lambda p: p.bytes, reverse=True)
    return [(p.name, p.bytes) for p in parts[:n]]


def _vocab(m) -> str:
    if m.wan is not None:  # no vocabulary: the text tokens its blocks attend to
        return f"text tokens {m.wan.context_tokens * m.wan.packed_samples}"
    return f"vocab {m.vocab_size}"


def _parameters(m) -> int:
    if m.wan is not None:  # Bridge's Wan diffusion transformer (diffusion.py)
        from offlint.estimate import diffusion

        return diffusion.total(m)
    return params.total(m)


def render_text(title: str, result: Estimate, device: Device, options: list[Option], notes: list[str],
                with_expandable: bool | None = None, risk_fix: str = "", depending=None) -> str:
    """The estimate as text; `depending`: depends()'s answer, when the verdict depends on a fact offlint cannot
    know."""
    inputs = result.inputs
    m, p, t = inputs.model, inputs.parallel, inputs.training
    peak = result.peak
    total = _parameters(m)
    lines = [f"offlint estimate: {title}"]
    lines += [f"  note: {note}" for note in notes]
    active = total if m.wan else params.active(m)
    lines.append(f"model: {total / 1e9:.2f}B parameters" + (f" ({active / 1e9:.2f}B active)" if active != total else "")
                 + f", {m.num_layers} layers, hidden {m.hidden_size}, heads {m.num_attention_heads}/"
                   f"{m.num_query_groups}, {_vocab(m)}, seq {m.seq_length}, micro-batch {t.micro_batch_size}")
    layout = f"TP{p.tp} PP{p.pp}" + (f" VPP{p.vpp}" if p.vpp else "") + f" CP{p.cp}"
    if m.num_moe_experts:
        layout += f" EP{p.ep} ETP{p.etp}"
    lines.append(f"layout: {layout}{' SP' if p.sequence_parallel else ''}, DP{result.data_parallel} on "
                 f"{plural(result.world_size, 'GPU')}" + (f", expert DP{result.expert_data_parallel}" if m.num_moe_experts else "")
                 + (f", {result.num_microbatches} micro-batches per step" if result.num_microbatches else ""))
    lines.append(f"device: {device.name}, {device.total_gib:.1f} GiB, {device.usable_bytes / GIB:.1f} GiB usable")
    lines.append("")
    lines.append(f"peak GPU memory: pipeline stage {peak.stage} of {p.pp}"
                 f" (micro-batches in flight: {peak.microbatches_in_flight:g})")
    lines.append(f"  {'part':<52}{'GiB':>8}")
    for part in peak.parts:
        lines.append(f"  {part.name:<52}{_gib(part.bytes)}")
    lines.append(f"  {'total':<52}{_gib(peak.total)}")
    if p.pp > 1:
        lines.append("  per stage: " + ", ".join(f"{s.stage}: {s.total / GIB:.1f}" for s in result.stages) + " GiB")
    if peak.host_total:
        per_node = peak.host_total * device.gpus_per_node
        lines.append(f"host memory for offloading: {peak.host_total / GIB:.2f} GiB per GPU "
                     f"(optimizer {peak.host_optimizer_bytes / GIB:.2f}, of it pinned {peak.host_pinned_bytes / GIB:.2f};"
                     f" activations {peak.host_activation_bytes / GIB:.2f} pinned), {per_node / GIB:.1f} GiB per "
                     f"node of {device.gpus_per_node} GPUs")
    lines.append("")
    lines.append("what if (peak GiB on one GPU; step time relative to as configured; * = cheapest that fits; "
                 "risk = fits with less headroom than expandable_segments' margin):")
    width = max(len(o.label) for o in options) + 2
    lines.append(f"  {'knob':<20}{'option':<{width}}{'peak GiB':>9}{'host GiB':>9}  {'fits':<5}{'time':>6}")
    for o in options:
        mark = "*" if o.cheapest else " "
        lines.append(f"{mark} {o.group:<20}{o.label:<{width}}{o.peak_bytes / GIB:9.1f}{o.result.peak.host_total / GIB:9.1f}"
                     f"  {('risk' if o.at_risk else 'yes') if o.fits else 'no':<5}{o.relative_time:6.2f}x")
    lines.append("")
    if depending:  # a verdict for each way a fact offlint cannot know may go
        why, cases = depending
        lines.append(f"verdict: depends on {why}:")
        lines += [f"  {condition}: {text}" for condition, _, text in cases]
        return "\n".join(lines) + "\n"
    lines.append(f"verdict: {verdict(result, device, with_expandable)}")
    state = verdict_state(result, device, with_expandable)
    if state == "at risk" and risk_fix:
        lines.append(f"  cheapest fix: {risk_fix}")
    elif state == "does not fit":
        cheapest = next((o for o in options if o.cheapest), None)
        lines.append(f"  cheapest fitting option: {cheapest.group} {cheapest.label} "
                     f"({cheapest.relative_time:.2f}x step time)" if cheapest else
                     "  no option in the table fits this device")
    return "\n".join(lines) + "\n"


def render_json(title: str, result: Estimate, device: Device, options: list[Option], notes: list[str],
                with_expandable: bool | None = None, risk_fix: str = "", depending=None) -> dict:
    def stage(s):
        return {"stage": s.stage, "total_bytes": s.total, "microbatches_in_flight": s.microbatches_in_flight,
                "parts": [{"name": p.name, "kind": p.kind, "bytes": p.bytes} for p in s.parts],
                "host_optimizer_bytes": s.host_optimizer_bytes, "host_pinned_bytes": s.host_pinned_bytes,
                "host_activation_bytes": s.host_activation_bytes}

    from offlint.estimate import oom

    m = result.inputs.model
    return {
        "unit": title, "notes": notes,
        "parameters": _parameters(m), "active_parameters": _parameters(m) if m.wan else params.active(m),
        "world_size": result.world_size, "data_parallel": result.data_parallel,
        "expert_data_parallel": result.expert_data_parallel, "num_microbatches": result.num_microbatches,
        "device": {"name": device.name, "total_gib": device.total_gib, "usable_bytes": device.usable_bytes},
        "peak_stage": result.peak.stage, "peak_bytes": result.peak.total,
        "fits": result.peak.total <= device.usable_bytes,
        "verdict": f"depends on {depending[0]}" if depending else verdict(result, device, with_expandable),
        "verdict_state": "depends" if depending else verdict_state(result, device, with_expandable),
        "cases": [{"condition": c, "verdict_state": state, "verdict": text} for c, state, text in depending[1]]
        if depending else None,
        "floor_bytes": oom.floor_bytes(result),
        "at_risk_fix": risk_fix or None,
        "stages": [stage(s) for s in result.stages],
        "what_if": [{"knob": o.group, "option": o.label, "peak_bytes": o.peak_bytes,
                     "host_bytes": o.result.peak.host_total, "fits": o.fits, "at_risk": o.at_risk,
                     "relative_step_time": o.relative_time,
                     "cheapest_fitting": o.cheapest} for o in options],
    }


# Who refuses a configuration at each stage a refusing check names (rules.Check.stage; estimate/refusals.py).
_REFUSED_AT = {"config": "megatron-core refuses it when the config is built",
               "optimizer-build": "megatron-core refuses it when the optimizer is built",
               "model-build": "megatron-core refuses it when the model is built",
               "bridge": "Megatron Bridge refuses it before training",
               "cli": "Megatron-LM's argument parser refuses it",
               "runtime": "it fails when the job starts"}


def cannot_run_verdict(refusals) -> str:
    """The one-line verdict for a configuration with refusing findings (estimate/refusals.py)."""
    first = refusals[0]
    return f"cannot run: {_REFUSED_AT.get(first.stage, 'it is refused')} ({', '.join(sorted({f.code for f in refusals}))})"


def render_cannot_run_text(title: str, refusals, notes: list[str]) -> str:
    """`offlint estimate`'s answer for a configuration that cannot run: the findings `offlint check` reports for it,
    no memory figures (they would describe a job that never trains)."""
    lines = [f"offlint estimate: {title}"] + [f"  note: {note}" for note in notes]
    for f in refusals:
        lines.append(f"{f.severity.value}[{f.code}] {f.location}: {f.message.splitlines()[0]}")
        lines += [f"  help: {f.fix}"] if f.fix else []
    lines.append("")
    lines.append(f"verdict: {cannot_run_verdict(refusals)}; no memory estimate (fix the configuration, or "
                 f"estimate another with --override KEY=VALUE or --gpus N)")
    return "\n".join(lines) + "\n"


def render_cannot_run_json(title: str, refusals, notes: list[str]) -> dict:
    return {"unit": title, "notes": notes, "verdict": cannot_run_verdict(refusals), "verdict_state": "cannot run",
            "refusals": [{"code": f.code, "slug": f.slug, "stage": f.stage, "message": f.message.splitlines()[0],
                          "path": f.location.path, "line": f.location.line, "column": f.location.col,
                          "fix": f.fix or None} for f in refusals]}
