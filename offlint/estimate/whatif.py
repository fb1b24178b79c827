"""What-if table: the same configuration with one memory knob turned, its peak memory and relative step time.

Knobs: optimizer offload fractions 0 / 0.25 / 0.5 / 0.75 / 1 (and the precision-aware optimizer, which decides
whether the fp32 master moves too, F-9), recompute choices, layer-level activation offloading by layer count
(PP=1 only, AO-2), fine-grained activation offloading, and TP x PP layouts on the same number of GPUs. Options
megatron-core would reject (activation offloading with PP>1 or with recompute) are built the way it accepts
them (PP=1, recompute off) or left out. The cheapest option that fits the device is marked, preferring one that
also leaves the at-risk margin (devices.AT_RISK_MARGIN with expandable_segments).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offlint.estimate import cost, memory, params
from offlint.estimate.devices import Device, margin_bytes
from offlint.estimate.inputs import Inputs

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass
class Option:
    group: str
    label: str
    inputs: Inputs
    result: memory.Estimate
    relative_time: float
    fits: bool
    cheapest: bool = False
    at_risk: bool = False  # fits, but with less headroom than the margin expandable_segments needs
    baseline: bool = False

    @property
    def peak_bytes(self) -> float:
        return self.result.peak.total


def what_if(inputs: Inputs, device: Device, world_size: int, layouts: bool = True,
            timed: bool = True) -> list[Option]:
    """The configured option and one per knob setting (and, with `layouts`, per other TP x PP layout). Without
    `timed` no step time is modelled (every relative_time 1.0, the cheapest not chosen by time): for a caller that
    reads only the options' memory."""
    t, p = inputs.training, inputs.parallel
    if not t.global_batch_size:
        # Compare layouts at the same global batch: the assumed micro-batch count of the configured layout.
        micro = max(cost.ASSUMED_MICROBATCHES, p.pp)
        inputs = inputs.with_(training=replace(t, global_batch_size=micro * t.micro_batch_size
                                               * p.data_parallel(world_size)))
    base_time = cost.step_seconds(inputs, memory.estimate(inputs, world_size), device) if timed else 0.0
    options = [_option("configured", "as configured", inputs, world_size, device, base_time)]
    options[0].baseline = True
    if inputs.model.wan is not None:  # Wan (diffusion.py): neither its knobs' memory nor its step time is modelled
        return options
    for group, label, variant in _variants(inputs, world_size, layouts):
        options.append(_option(group, label, variant, world_size, device, base_time))
    fitting = [o for o in options if o.fits and not o.at_risk] or [o for o in options if o.fits]
    if fitting:
        min(fitting, key=lambda o: (round(o.relative_time, 3), o.peak_bytes)).cheapest = True
    return options


def _option(group: str, label: str, inputs: Inputs, world: int, device: Device, base_time: float) -> Option:
    result = memory.estimate(inputs, world)
    relative = cost.step_seconds(inputs, result, device) / base_time if base_time else 1.0
    peak = result.peak.total
    return Option(group, label, inputs, result, relative, peak <= device.usable_bytes,
                  at_risk=device.usable_bytes - margin_bytes(device, True) < peak <= device.usable_bytes)


def _variants(inputs: Inputs, world: int, layouts: bool = True):
    m, p, t = inputs.model, inputs.parallel, inputs.training
    train = lambda **kw: inputs.with_(training=replace(t, **kw))  # noqa: E731

    # A frozen language model: no verdict with optimizer offload, recompute beyond core_attn or activation
    # offloading (inputs_vlm.read_frozen_lm); only the layouts and those two recompute settings are offered.
    frozen = t.frozen_lm is not None
    # A VLM whose language model trains: no verdict with activation or optimizer offloading (inputs_vlm.read_trained_vlm).
    no_offload_option = frozen or t.vlm is not None
    if (t.distributed_optimizer or t.params_bytes == 4) and not no_offload_option:
        for f in FRACTIONS:
            yield ("optimizer offload", f"fraction {f:g}", train(optimizer_cpu_offload=f > 0,
                                                                   optimizer_offload_fraction=f))
        if not t.precision_aware and t.distributed_optimizer and t.optimizer == "adam":
            yield ("optimizer offload", "fraction 1 + precision-aware",
                   train(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0, precision_aware=True))
    no_offload = dict(cpu_offloading=False, cpu_offloading_num_layers=0, fine_grained_offloading=False)
    # moe_paged_stash: megatron-core refuses it with cpu_offloading and with expert_fc1/moe_act offload, and
    # offlint does not model it under full recompute (inputs_moe.read_expert_budget); those options are left out.
    stash = t.expert_budget is not None and t.expert_budget.stash is not None
    yield ("recompute", "none", train(recompute_granularity=None, moe_layer_recompute=False))
    yield ("recompute", "selective core_attn", train(recompute_granularity="selective",
                                                      recompute_modules=("core_attn",), **no_offload))
    more = ("core_attn", "layernorm", "moe_act") if m.num_moe_experts else ("core_attn", "layernorm", "mlp")
    hybrid = m.hybrid_pattern is not None  # no verdict for these with Mamba layers (inputs_hybrid.hybrid_unsupported)
    if not hybrid and not frozen:
        yield ("recompute", f"selective {','.join(more)}", train(recompute_granularity="selective",
                                                                 recompute_modules=more, **no_offload))
    if not stash and not frozen:
        yield ("recompute", "full uniform 1", train(recompute_granularity="full", recompute_method="uniform",
                                                     recompute_num_layers=1, **no_offload))
    gdn = m.linear_attention_freq is not None  # no verdict with activation offloading (inputs_hybrid.gdn_unsupported)
    if p.pp == 1 and not hybrid and not gdn and not stash and not no_offload_option:
        for n in sorted({m.num_layers // 4, m.num_layers // 2, m.num_layers - 1} - {0}):
            yield ("activation offload", f"{n} of {m.num_layers} layers",
                   train(cpu_offloading=True, cpu_offloading_num_layers=n, recompute_granularity=None,
                         moe_layer_recompute=False, fine_grained_offloading=False))
    modules = ("attn_norm", "core_attn", "attn_proj", "mlp_norm") + (("expert_fc1", "moe_act")
                                                                      if m.num_moe_experts and not stash else ())
    if not (hybrid or gdn or m.attention_output_gate or no_offload_option):
        yield ("activation offload", "fine-grained " + ",".join(modules),
               train(fine_grained_offloading=True, offload_modules=modules, cpu_offloading=False,
                     activation_offload_fraction=1.0))
    for tp, pp in _layouts(inputs, world) if layouts else ():
        if (tp, pp) == (p.tp, p.pp):
            continue
        layout = replace(p, tp=tp, pp=pp, vpp=None, etp=tp if p.etp == p.tp else p.etp,
                         sequence_parallel=tp > 1, world_size=world, layout=None, first_stage_layers=None,
                         last_stage_layers=None, account_for_embedding=False, account_for_loss=False)
        if m.hybrid_pattern is not None and (params.layer_ranges(m, layout) is None or m.mamba_num_heads % tp
                                             or m.mamba_num_groups % tp):
            continue  # a pattern's pipes fix the stage count; the Mamba mixer splits heads and groups over TP
        if gdn and (m.gdn_key_heads % (tp * p.cp) or m.gdn_value_heads % (tp * p.cp)):
            continue  # megatron-core asserts that TP x CP divides the GDN heads
        variant = inputs.with_(parallel=layout)
        if pp > 1 and t.cpu_offloading:
            variant = variant.with_(training=replace(t, cpu_offloading=False, cpu_offloading_num_layers=0))
        yield ("layout", f"TP{tp} PP{pp}", variant)


def _layouts(inputs: Inputs, world: int) -> list[tuple[int, int]]:
    m, p = inputs.model, inputs.parallel
    out = []
    for tp in (1, 2, 4, 8):
        if m.num_attention_heads % tp or m.num_query_groups % tp:
            continue
        for pp in (1, 2, 4, 8, 16):
            if m.num_layers % pp or world % (tp * pp * p.cp):
                continue
            etp = tp if p.etp == p.tp else p.etp
            if m.num_moe_experts and (world // pp) % (p.ep * etp):
                continue
            out.append((tp, pp))
    return out
