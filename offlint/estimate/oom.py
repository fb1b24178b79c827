"""What OFL303 (predicted OOM) and OFL304 (activation offloading on a model too large for PP=1) ask of the memory
model, for the rule conditions in `offlint.conditions`. Pure arithmetic: `offlint check` never imports torch.

What a finding may rest on (docs/estimate.md, "Verdicts and what a finding rests on"): the model state (weights,
gradient buffer, optimizer shard) is exact; the activation model and the allowance are not calibrated against
measured peaks well enough to decide a near-limit case. So OFL303 reports an OOM at default settings only when the
*floor* (model state + ACTIVATION_FLOOR of the modelled activations, no allowance) exceeds the device; when only
the full estimate does, the verdict rests on the uncalibrated part and there is no finding, not even under
--strict (on Megatron Bridge every such "possible" OOM was a recipe NVIDIA runs; `offlint estimate` still shows
the figure). OFL305 (at risk) is the same for a peak that fits but leaves less headroom than the allocator needs
(devices.AT_RISK_MARGIN); only where the launch environment is unknown is its verdict "possible".

A configuration rarely states its GPU count, so the rules use a lower bound when it is unknown: the peak at the
largest data-parallel size its batch sizes allow (global / micro; any size without a global batch size: the
distributed optimizer's shard shrinks towards nothing), one micro-batch in flight (`largest_world`).
A finding then means the configuration cannot fit however many GPUs it runs on. The device is the one a Bridge
recipe names (`..._8gpu_b200_bf16_config` is sized against a B200; Rubin's R100 and VR200 against the bracket
of their stated capacity, devices.stated_range, with a verdict only where it is the same at both ends), else
`[tool.offlint] gpu`, else h100-80gb.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Callable

from offlint.estimate.devices import GIB, Device, agreed, device, ends, margin_bytes, parse_device
from offlint.estimate.inputs import Inputs, Lookup, read_inputs
from offlint.estimate import params
from offlint.estimate.memory import Estimate, estimate, model_state
from offlint.gpus import NAMED_GPUS, named_gpu
from offlint.terminal import plural

# Keys a finding lists as related locations (the ones that decide the size), besides any unknown input.
DRIVERS = ("model.num_layers", "model.hidden_size", "model.seq_length", "model.tensor_model_parallel_size",
           "model.pipeline_model_parallel_size", "model.recompute_granularity", "optimizer.optimizer_cpu_offload",
           "model.cpu_offloading")
_ANY_DP = 1 << 20  # a data-parallel size large enough that the optimizer shard is negligible

# The share of the modelled activations a finding may rest on: the activation model may be this much too high
# (25%, the same tolerance the step-time model is held to) before an OOM it predicts stops being certain.
ACTIVATION_FLOOR = 0.75


def device_for(unit_name: str, gpu: str = "") -> Device:
    """The device a unit is sized against: `gpu` (the token gpus.unit_gpu found: the unit's name, card section
    or folder), else the GPU its name names, else the configured one."""
    token = gpu or named_gpu(unit_name)
    return device() if token is None else parse_device(NAMED_GPUS[token])


def fp8_transpose(unit_name: str, gpu: str = "") -> bool | None:
    """Whether per-tensor FP8 keeps a transposed weight copy on the unit's device (None: not known, for a capacity
    given in GiB; Transformer Engine keeps the transpose below 10.0 and on 12.x, not on 10.x, 11.x or from 13.0
    on)."""
    return device_for(unit_name, gpu).fp8_transpose


# The inputs a "possible" finding names when they are unknown (the model sizes first; at most a few others).
SIZE_KEYS = ("model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.vocab_size",
             "model.seq_length")


def architectures(inputs: Inputs) -> list[Inputs]:
    """The inputs to estimate: `inputs` alone, or one per open alternative: for per-tensor FP8 on a GPU whose
    architecture offlint does not know (LowPrecision.transpose None), with Hopper's FP8 weight transposes (the
    larger) and without them; for moe_paged_stash on a GPU whose compute capability is not known
    (ExpertBudget.fused None), with the stash and with the padded expert tensors; for an unset expert tensor
    parallel size (Parallelism.etp_open), at TP's value and at 1; for a VLM whose language model trains
    (TrainedVLM.patches None), with every token a vision token (under vision CUDA graphs: the padded tower) and with
    no image; for a tower under vision CUDA graphs (TrainedVLM.graph_bound None), with the most and the least its
    graphs' pool keeps for one layer's backward; for a frozen language model with
    MTP, shared-expert or gated-attention layers (FrozenLM.bound None), at the most and the least they keep; for a
    VLM micro-batch the tree's step does not pad (Inputs.short_tokens), padded to seq_length and at the fewest
    tokens the step gives; for model and dataset sequence lengths that differ (Inputs.other_seq_length), at the
    dataset's (the tokens the data loader gives, what Bridge's training scripts run) and at the model's. The first
    is the one shown."""
    lp = inputs.training.low_precision if inputs.training else None
    out = [inputs] if lp is None or lp.transpose is not None else \
        [inputs.with_(training=replace(inputs.training, low_precision=replace(lp, transpose=t))) for t in (True, False)]
    budget = inputs.training.expert_budget if inputs.training else None
    if budget is not None and budget.fused is None:  # moe_paged_stash: with the fused grouped MLP and without
        out = [v.with_(training=replace(v.training, expert_budget=replace(budget, fused=f)))
               for v in out for f in (True, False)]
    if inputs.parallel is not None and inputs.parallel.etp_open:  # an unset ETP: megatron-core's TP, Bridge's 1
        out = [v.with_(parallel=replace(v.parallel, etp=e, etp_open=False))
               for v in out for e in (inputs.parallel.tp, 1)]
    vlm = inputs.training.vlm if inputs.training else None
    if vlm is not None and vlm.patches is None:  # a VLM's image patches: at the bound and none
        out = [v.with_(training=replace(v.training, vlm=replace(v.training.vlm, patches=n)))
               for v in out for n in ("bound", "none")]
    if vlm is not None and vlm.graph_bound is None:  # what a graphed ViT layer's backward keeps: at most, at least
        out = [v.with_(training=replace(v.training, vlm=replace(v.training.vlm, graph_bound=b)))
               for v in out for b in ("upper", "lower")]
    frozen = inputs.training.frozen_lm if inputs.training else None
    if frozen is not None and frozen.bound is None:  # what frozen MTP/shared/gated layers keep: at most, at least
        out = [v.with_(training=replace(v.training, frozen_lm=replace(frozen, bound=b)))
               for v in out for b in ("upper", "lower")]
    if inputs.short_tokens is not None:  # a VLM micro-batch as long as the data makes it: padded, and the fewest
        out = [replace(v, short_tokens=None) for v in out] + \
            [replace(v, model=replace(v.model, seq_length=inputs.short_tokens), short_tokens=None) for v in out]
    if inputs.other_seq_length is None:
        return out
    other = inputs.other_seq_length[1]
    return [replace(v, model=replace(v.model, seq_length=other), other_seq_length=None) for v in out] + \
        [replace(v, other_seq_length=None) for v in out]


# What is open about a VLM whose language model trains (inputs.TrainedVLM.patches): a verdict only where no image and
# every token a vision token agree.
IMAGE_PATCHES = ("the image patches a micro-batch holds (how many the Hugging Face processor makes of the dataset's "
                 "images is not read)")
# What is open about a Qwen3-VL micro-batch the training step does not pad (Inputs.short_tokens): a verdict only where
# the padded and the shortest agree.
MICRO_BATCH_TOKENS = ("the tokens a micro-batch holds (the tree's Qwen3-VL step pads to seq_length only under a "
                      "condition this layout does not meet, else to the longest sample, which offlint does not read)")
# What is open about a trained tower under vision CUDA graphs (inputs.TrainedVLM.graph_bound, frozen_lm.graph_parts):
# a verdict only where both bounds agree.
GRAPH_BACKWARD = ("what one graphed ViT layer's backward keeps reserved in the vision CUDA graphs' pool beyond its "
                  "static grad inputs (activation gradients and kernel workspaces are not read)")
# What is open about a frozen language model with MTP, shared-expert or gated-attention layers (inputs.FrozenLM.bound,
# frozen_lm.LOWER_BOUND_DROPS): a verdict only where both bounds agree.
FROZEN_KEEPS = ("what the frozen language model's MTP, shared-expert and gated-attention layers keep (their frozen "
                "saved tensors are not checked one by one)")


def _open_labels(inputs: Inputs) -> tuple[str, list[str]]:
    """What is open about `inputs` (for a message) and one label per architectures() variant, in their order."""
    facts, labels = _open(inputs)
    return " and ".join(what for _, what in facts), labels


def open_facts(inputs: Inputs) -> list[str]:
    """The short name of each fact open about `inputs` ("the image patches a micro-batch holds"), for a summary."""
    return list(dict.fromkeys(name for name, _ in _open(inputs)[0]))


def _open(inputs: Inputs) -> tuple[list[tuple[str, str]], list[str]]:
    """Each open fact as (short name, what a message says of it), and one label per architectures() variant."""
    lp = inputs.training.low_precision if inputs.training else None
    arch = lp is not None and lp.transpose is None
    whats, labels = [], [""]
    if arch:
        whats.append(("the GPU's architecture", "per-tensor FP8 on a GPU whose architecture offlint does not know"))
        labels = ["with Hopper's FP8 weight transposes", "without them (Blackwell)"]
    budget = inputs.training.expert_budget if inputs.training else None
    if budget is not None and budget.fused is None:
        whats.append(("the GPU's architecture", "moe_paged_stash on a GPU whose compute capability offlint does not "
                      "know (Transformer Engine's fused grouped MLP, whose saved tensors the stash takes, runs only on "
                      "10.x)"))
        labels = [f"{label} {stash}".strip() for label in labels
                  for stash in ("with the stash (10.x)", "with padded expert tensors (no fused grouped MLP)")]
    if inputs.parallel is not None and inputs.parallel.etp_open:
        tp = inputs.parallel.tp
        whats.append(("the default expert TP size of the Bridge version", f"an unset expert_tensor_parallel_size "
                      f"(megatron-core takes TP's {tp}, Megatron Bridge since July 2026 1 with EP > 1)"))
        labels = [f"{label} {etp}".strip() for label in labels for etp in (f"at ETP{tp}", "at ETP1")]
    vlm = inputs.training.vlm if inputs.training else None
    if vlm is not None and vlm.patches is None:
        whats.append(("the image patches a micro-batch holds", IMAGE_PATCHES))
        most = (f"with images (the tower padded to {vlm.graph_patches} patches for its CUDA graphs)"
                if vlm.graph_patches else "with every token a vision token (the most image patches)")
        labels = [f"{label} {n}".strip() for label in labels for n in (most, "with no image patches")]
    if vlm is not None and vlm.graph_bound is None:
        whats.append(("what the vision graphs' backward keeps", GRAPH_BACKWARD))
        labels = [f"{label} {b}".strip() for label in labels
                  for b in ("with a gradient of every saved tensor in the graphs' pool (at most)",
                            "with only the static grad inputs there (at least)")]
    frozen = inputs.training.frozen_lm if inputs.training else None
    if frozen is not None and frozen.bound is None:
        whats.append(("what the frozen layers keep", FROZEN_KEEPS))
        labels = [f"{label} {b}".strip() for label in labels
                  for b in ("with the frozen layers keeping what trained ones keep (at most)",
                            "with them keeping no frozen linear's input (at least)")]
    if inputs.short_tokens is not None:
        whats.append(("the tokens a micro-batch holds", MICRO_BATCH_TOKENS))
        labels = [f"{label} {n}".strip() for n in (f"with every micro-batch padded to {inputs.model.seq_length} "
                                                   f"tokens", f"with the shortest ({plural(inputs.short_tokens, 'token')})")
                  for label in labels]
    if inputs.other_seq_length is not None:
        key, other = inputs.other_seq_length
        model = inputs.model.seq_length
        whats.append(("the sequence length the launcher runs", f"model.seq_length={model} and {key}={other}, which "
                      f"differ (Bridge's validate asserts they match: its training scripts set the model's to the "
                      f"dataset's, its performance overrides the dataset's to the model's)"))
        runs = ((other, "as Bridge's training scripts run it"), (model, "as its performance scripts run it"))
        labels = [f"{label} at sequence length {n} ({how})".strip() for n, how in runs for label in labels]
    return whats, labels


@dataclass(frozen=True)
class Alternative:
    """One way a fact offlint cannot know may go (architectures): its label for a message ("at sequence length
    4096 (...)"; "" when nothing is open), the inputs and their estimate."""
    label: str
    inputs: Inputs
    result: Estimate


def alternatives(inputs: Inputs, world: int | None = None) -> tuple[str, list[Alternative]]:
    """What is open about `inputs` ("" when nothing is) and each alternative estimated (at `world` GPUs, else the
    lower bound), the one to show first."""
    variants = architectures(inputs)
    results = [estimate(v, world) if world else bound(v) for v in variants]
    if len(variants) == 1:
        return "", [Alternative("", variants[0], results[0])]
    what, labels = _open_labels(inputs)
    return what, [Alternative(label, v, r) for label, v, r in zip(labels, variants, results)]


def either_way(inputs: Inputs, judge: Callable[[Inputs, Estimate], object],
               world: int | None = None) -> tuple[Inputs, Estimate, str, str]:
    """Estimate `inputs` on each of its open alternatives (architectures; at `world` GPUs, else the lower bound)
    and judge each: (the inputs and estimate to show; why there is no verdict, "" when the judgements agree; the
    note that the verdict holds either way, "" when nothing is open)."""
    return judged(inputs, *alternatives(inputs, world), judge)


def judged(inputs: Inputs, what: str, alts: list[Alternative],
           judge: Callable[[Inputs, Estimate], object]) -> tuple[Inputs, Estimate, str, str]:
    """either_way's answer for alternatives already estimated (`what`, `alts`: alternatives(inputs, ...))."""
    if len(alts) == 1:
        return alts[0].inputs, alts[0].result, "", ""
    verdicts = [judge(a.inputs, a.result) for a in alts]
    labels, results = [a.label for a in alts], [a.result for a in alts]
    figures = [f"{r.peak.total / GIB:.1f} GiB {label}" for label, r in zip(labels, results)]
    if any(v != verdicts[0] for v in verdicts):
        advice = "pass --gpu" if inputs.other_seq_length is None else "set both to the length the run uses"
        return alts[0].inputs, results[0], f"{what}, and the verdict depends on it: {', '.join(figures)}; {advice}", ""
    others = ", ".join(f"{label} {r.peak.total / GIB:.1f} GiB" for label, r in zip(labels[1:], results[1:]))
    return alts[0].inputs, results[0], "", f"{what}: shown {labels[0]}; {others}; the verdict holds either way"


VERDICTS = ("oom", "risk", "pp1")  # what the rules decide from one estimate: OFL303, OFL305, OFL304


def _check_verdicts(lookup: Lookup, dev: Device):
    """What the rules decide from one estimate (VERDICTS, in order), for each alternative."""
    with_expandable = expandable(lookup)
    return lambda inputs, result: (oom_verdict(result, dev), risk_verdict(result, dev, with_expandable),
                                   agreed(lambda d: model_state_at_pp1(inputs) > d.usable_bytes, dev, None))


def inputs_for(lookup: Lookup, unit_name: str, gpu: str = "",
               launch_gpus: int = 0) -> tuple[Inputs | None, list[str], frozenset[str]]:
    """The unit's inputs when every size is known and the model covers it (else None: an unknown verdict), the
    unknown keys worth naming, and the VERDICTS that depend on what is open about it. Where something is open
    (architectures: the GPU's architecture, an unset expert TP, the image patches), the inputs shown first; a rule
    decides only when its own verdict holds for every alternative (one verdict that varies does not silence the
    others: Qwen3-VL 235B's SFT recipe is an OOM at every ETP, while whether PP=1 would fit depends on it).
    `gpu`: as device_for; `launch_gpus`: as read_inputs."""
    inputs = read_inputs(lookup, unit_name, fp8_transpose=fp8_transpose(unit_name, gpu), sizes_first=True,
                         launch_gpus=launch_gpus)
    if not inputs.complete:
        named = [k for k in SIZE_KEYS if k in inputs.unknown] or sorted(inputs.unknown)[:5]
        return None, named, frozenset()
    p, m = inputs.parallel, inputs.model
    if params.layer_ranges(m, p) is None or m.num_attention_heads % p.tp:
        return None, [], frozenset()
    if len(architectures(inputs)) == 1:
        return inputs, [], frozenset()
    _, alts = alternatives(inputs)
    judge = _check_verdicts(lookup, device_for(unit_name, gpu))
    verdicts = [judge(a.inputs, a.result) for a in alts]
    varying = frozenset(name for i, name in enumerate(VERDICTS) if any(v[i] != verdicts[0][i] for v in verdicts))
    return alts[0].inputs, [], varying


def bound_size(inputs: Inputs) -> str:
    """How the estimate sized the job: "on 16 GPUs", "on up to 64 GPUs (the most its batch sizes allow)", or
    "at any data-parallel size"."""
    world = inputs.parallel.world_size
    if world:
        return f"on {plural(world, 'GPU')}"
    allowed, smallest = _batch_world(inputs), inputs.parallel.min_world_size()
    if allowed is None:
        return "at any data-parallel size"
    if allowed < smallest:
        return f"on {plural(smallest, 'GPU')} (the fewest its layout runs on; its batch sizes allow fewer)"
    return f"on up to {plural(largest_world(inputs), 'GPU')} (the most its global and micro batch sizes allow)"


def has_no_answer(lookup: Lookup, unit_name: str, gpu: str = "", launch_gpus: int = 0) -> bool:
    """True when the model cannot estimate this unit whatever the unknown values are: it uses a feature the model
    does not cover, or a layout it does not split (known values, so no "possible" finding either)."""
    inputs = read_inputs(lookup, unit_name, fp8_transpose=fp8_transpose(unit_name, gpu), launch_gpus=launch_gpus)
    if inputs.unsupported:
        return True
    if inputs.unknown:
        return False
    p, m = inputs.parallel, inputs.model
    if params.layer_ranges(m, p) is None or m.num_attention_heads % p.tp:
        return True
    return bool(_architecture_split(lookup, unit_name, inputs, gpu))


def _architecture_split(lookup: Lookup, unit_name: str, inputs: Inputs, gpu: str = "") -> str:
    """Why OFL303's verdict depends on what is open about the unit ("" when it does not, or there is no device)."""
    if len(architectures(inputs)) == 1:
        return ""
    dev = device_for(unit_name, gpu)
    return either_way(inputs, lambda _, result: oom_verdict(result, dev))[2]


def no_verdict_reason(lookup: Lookup, unit_name: str, gpu: str = "", launch_gpus: int = 0) -> str:
    """Why a unit's memory estimate has no verdict, for a "possible" finding's message."""
    inputs = read_inputs(lookup, unit_name, fp8_transpose=fp8_transpose(unit_name, gpu), launch_gpus=launch_gpus)
    if inputs.unsupported:
        return f"it uses {', '.join(inputs.unsupported)}, which the memory model does not cover"
    if inputs.unknown:
        return "it needs values offlint cannot read"
    p, m = inputs.parallel, inputs.model
    if params.layer_ranges(m, p) is None or m.num_attention_heads % p.tp:
        return "its layout does not split (pipeline stages megatron-core would refuse, or heads not divisible by TP)"
    return f"it uses {_architecture_split(lookup, unit_name, inputs, gpu)}"


def oom_message(result: Estimate | None, dev: Device | None, lookup: Lookup, unit_name: str,
                gpu_count: str, gpu: str = "", launch_gpus: int = 0) -> str:
    """OFL303's message: the estimate against the device and what the verdict rests on."""
    if result is None or dev is None:
        return f"the memory estimate has no verdict: {no_verdict_reason(lookup, unit_name, gpu, launch_gpus)}"
    dev = ends(dev)[-1]  # an OOM is claimed only where it holds at the high end of a bracketed capacity
    usable, floor = dev.usable_bytes, floor_bytes(result)
    # A finding is made only when the floor exceeds the device (oom_verdict "oom"), so that is what it rests on.
    return (f"estimated peak memory {result.peak.total / GIB:.1f} GiB per GPU {gpu_count} exceeds the "
            f"{usable / GIB:.1f} GiB usable on {dev.name}\n"  # the short message; what it rests on is detail
            f"(even the calibrated floor, model state plus {activation_floor(result):.0%} of the activations, needs "
            f"{floor / GIB:.1f} GiB)")


def bound(inputs: Inputs) -> Estimate:
    """The estimate at the configuration's GPU count, or the lower bound over every data-parallel size it can run
    at."""
    if inputs.parallel.world_size:
        return estimate(inputs)
    t = inputs.training
    floor = inputs.with_(training=replace(t, global_batch_size=t.global_batch_size or t.micro_batch_size))
    return estimate(floor, largest_world(inputs))


def largest_world(inputs: Inputs) -> int:
    """The most GPUs the configuration can run on, for the lower bound where it does not say how many: megatron-core
    splits the global batch into micro-batches over the data-parallel ranks (global / (micro x DP) of them, a whole
    number, at least one), so DP is at most global / micro; the world is a multiple of the fewest GPUs the layout
    tiles. Without a global batch size, any size (the optimizer shard shrinks towards nothing). A Qwen3-VL 235B
    recipe with global 32, micro 2 runs on at most 16-way DP; at any DP its bound fell 0.5 GiB under an H100."""
    smallest, allowed = inputs.parallel.min_world_size(), _batch_world(inputs)
    if allowed is None:
        return smallest * _ANY_DP
    return max(smallest, allowed - allowed % smallest)


def _batch_world(inputs: Inputs) -> int | None:
    """TP x PP x CP x (global / micro): the GPUs the batch sizes allow at most; None without both batch sizes."""
    t = inputs.training
    if not t.global_batch_size or not t.micro_batch_size or t.global_batch_size < t.micro_batch_size:
        return None
    return inputs.parallel.model_parallel * (t.global_batch_size // t.micro_batch_size)


def model_state_at_pp1(inputs: Inputs) -> float:
    """Weights, gradients and optimizer states of one GPU with the pipeline folded into PP=1 (what activation
    offloading forces), on the same number of GPUs when it is known."""
    p = inputs.parallel
    world = p.world_size
    # one stage holds every layer: an uneven split's stage sizes or layout no longer apply
    one_stage = inputs.with_(parallel=replace(p, pp=1, vpp=None, world_size=world, layout=None,
                                              first_stage_layers=None, last_stage_layers=None,
                                              account_for_embedding=False, account_for_loss=False))
    # bound(one_stage)'s: at the known GPU count, else at any data-parallel size (its floor's batch size is no
    # part of the model state)
    return model_state(one_stage, None if world else largest_world(one_stage))


def largest_parts(result: Estimate, n: int = 3) -> str:
    parts = sorted(result.peak.parts, key=lambda p: p.bytes, reverse=True)[:n]
    return ", ".join(f"{p.name} {p.bytes / GIB:.1f} GiB" for p in parts)


def offload_savings(inputs: Inputs, dev: Device) -> str:
    """The memory knobs that save the most, best first: "optimizer offload fraction 1 saves 22.4 GiB; ..."."""
    from offlint.estimate.whatif import what_if

    result = bound(inputs)
    world = result.world_size
    # a finding names knobs, not other layouts; by the memory they save, not their step time
    options = what_if(inputs, dev, world, layouts=False, timed=False)
    base = options[0].peak_bytes
    best: dict[str, tuple[float, str]] = {}
    for option in options[1:]:
        saving = base - option.peak_bytes
        if saving >= 0.05 * GIB and saving > best.get(option.group, (0.0, ""))[0]:
            best[option.group] = (saving, f"{option.group} {option.label} saves {saving / GIB:.1f} GiB")
    ranked = sorted(best.values(), reverse=True)
    # (the settings the model covers for this kind of model: Wan's recompute, for one, is not modelled)
    return "; ".join(text for _, text in ranked) or "none of the offload or recompute settings offlint models for " \
                                                    "it saves memory here"


def state_bytes(stage) -> float:
    return stage.of("weights") + stage.of("grads") + stage.of("optimizer")


def activation_floor(result: Estimate) -> float:
    """The share of the modelled activations the floor counts: ACTIVATION_FLOOR, for gated-delta-net models too.
    (a5fb6ed counted none for them, reading Bridge's Qwen3.5-35B-A3B text recipe note, micro-batch 4 suitable for
    force-balanced benchmarking, as an 8-GPU run; Bridge's measured 8-GPU GB200 runs of the same language model
    agree with the estimate instead: docs/estimate.md, "Gated delta net: the estimate against Bridge's runs".)"""
    del result  # one share for every model; kept as a function for its callers' messages
    return ACTIVATION_FLOOR


def floor_bytes(result: Estimate) -> float:
    """The calibrated lower bound of the peak: the largest stage's model state plus activation_floor of its
    modelled activations, without the allowance for workspaces and fragmentation."""
    share = activation_floor(result)
    return max(state_bytes(s) + share * s.of("activations") for s in result.stages)


def oom_verdict(result: Estimate, dev: Device) -> str:
    """"oom" (the floor exceeds the device), "uncalibrated" (only the full estimate does, or the verdict differs
    between the ends of a bracketed capacity), or "fits"."""
    def judge(d: Device) -> str:
        if result.peak.total <= d.usable_bytes:
            return "fits"
        return "oom" if floor_bytes(result) > d.usable_bytes else "uncalibrated"

    return agreed(judge, dev, "uncalibrated")


# The variables torch's caching allocator reads its options from (CUDAAllocatorConfig: the HIP name on ROCm builds)
ALLOCATOR_ENV_KEYS = ("env.PYTORCH_CUDA_ALLOC_CONF", "env.PYTORCH_ALLOC_CONF", "env.PYTORCH_HIP_ALLOC_CONF")


def expandable(lookup: Lookup) -> bool | None:
    """Whether the launch sets expandable_segments:True (None: its environment is not known)."""
    unknown = False
    for key in ALLOCATOR_ENV_KEYS:
        value = lookup(key)
        if value.is_unknown:
            unknown = True
        elif expandable_segments_on(value.value):
            return True
    return None if unknown else False


def expandable_segments_on(options) -> bool:
    """Whether allocator options (a PYTORCH_CUDA_ALLOC_CONF value) turn expandable segments on, as PyTorch reads
    them: the last `expandable_segments` entry decides. So `max_split_size_mb:256, expandable_segments: True` turns
    them on, which a search for the text `expandable_segments:True` missed. (megatron-core's own refusals compare
    the text as written: the rules that mirror them keep doing so.)"""
    entries = expandable_segments_entries(options)
    return bool(entries) and entries[-1][0] == "True"


def expandable_segments_entries(options) -> list[tuple[str, str]]:
    """The `expandable_segments` entries of allocator options, as (its value, the entry as written): `name:value`
    entries between commas, blanks around each part ignored (c10's ConfigTokenizer, and the CUDA allocator's
    lexArgs before it); [] for options that are no string (unknown, unset)."""
    found = []
    for entry in options.split(",") if isinstance(options, str) else ():
        name, colon, setting = entry.partition(":")
        if colon and name.strip() == "expandable_segments":
            found.append((setting.strip(), entry.strip()))
    return found


def risk_verdict(result: Estimate, dev: Device, with_expandable: bool | None) -> str:
    """For a peak that fits: "at risk" (even the floor leaves less headroom than the margin), "possible" (it
    depends on the launch environment, which is unknown: the floor is at risk without expandable_segments and not
    with it), "uncalibrated" (only the full estimate leaves less than the margin, or the verdict differs between the
    ends of a bracketed capacity), or "no"."""
    return agreed(lambda d: _risk_at(result, d, with_expandable), dev, "uncalibrated")


def _risk_at(result: Estimate, dev: Device, with_expandable: bool | None) -> str:
    usable, peak, floor = dev.usable_bytes, result.peak.total, floor_bytes(result)
    if peak > usable:
        return "no"  # OFL303's case
    if with_expandable is None:  # at risk with or without expandable_segments, or it depends on which
        if floor > usable - margin_bytes(dev, True):
            return "at risk"
        if floor > usable - margin_bytes(dev, False):
            return "possible"
        return "uncalibrated" if peak > usable - margin_bytes(dev, False) else "no"
    margin = margin_bytes(dev, with_expandable)
    if peak <= usable - margin:
        return "no"
    return "at risk" if floor > usable - margin else "uncalibrated"


def compatibility(lookup: Lookup) -> tuple[str, str]:
    """(why expandable_segments cannot be suggested, or ''; what must go with it, or '')."""
    def on(key: str) -> bool:
        value = lookup(key)
        return value.state == "known" and value.value not in (None, False, "none", "")

    if on("ddp.nccl_ub"):
        return "NCCL user-buffer registration (ddp.nccl_ub) cannot use the expandable allocator", ""
    if on("ddp.use_megatron_fsdp"):
        return "Megatron-FSDP recipes leave it off (Bridge's Megatron-FSDP perf recipes omit it)", ""
    graphs = on("model.enable_cuda_graph") or on("model.external_cuda_graph") or on("model.cuda_graph_impl")
    register = lookup("env.NCCL_GRAPH_REGISTER")
    if graphs and not (register.state == "known" and str(register.value) == "0"):
        return "", "NCCL_GRAPH_REGISTER=0 (CUDA graphs assert with expandable segments otherwise)"
    return "", ""


def cheapest_fix(inputs: Inputs, dev: Device, lookup: Lookup, with_expandable: bool | None,
                 result: Estimate | None = None) -> str:
    """The cheapest way to restore the at-risk margin: expandable_segments where it is compatible and enough,
    else the what-if option with the smallest step time whose peak leaves the margin."""
    from offlint.estimate.whatif import what_if

    result = result or bound(inputs)
    blocked, needs = compatibility(lookup)
    usable, use_expandable = dev.usable_bytes, with_expandable is True or not blocked
    out = []
    if with_expandable is not True and not blocked:
        setting = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" + (f" with {needs}" if needs else "")
        if max(floor_bytes(result), result.peak.total) <= usable - margin_bytes(dev, True):
            return f"set {setting} (zero cost; its {margin_bytes(dev, True) / GIB:.1f} GiB margin is then met)"
        out.append(f"set {setting}" + ("" if with_expandable is False else " if the launch does not")
                   + f", and to leave its {margin_bytes(dev, True) / GIB:.1f} GiB margin:")
    elif blocked:
        out.append(f"not expandable_segments ({blocked})")
    target = usable - margin_bytes(dev, use_expandable)
    options = [o for o in what_if(inputs, dev, result.world_size, layouts=False)[1:]
               if o.peak_bytes <= target]
    if options:
        best = min(options, key=lambda o: (round(o.relative_time, 2), o.peak_bytes))
        out.append(f"{best.group} {best.label} ({best.peak_bytes / GIB:.1f} GiB, {best.relative_time:.2f}x "
                   f"step time)")
    else:
        out.append("no offload or recompute setting leaves the margin")
    return " ".join(out) if out[0].endswith(":") else "; ".join(out)


# ---- what --strict says once per run instead of a "possible" OOM per recipe ---------------------------------

_NOT_IN_TABLE = " is not in offlint's table of public models"  # the reason sources/hf_models gives an unsized id


def unsized_notes(units) -> list[str]:
    """One line per model that left OOM estimates (OFL303/OFL304/OFL305) without a number: the models loaded by
    Hugging Face id that offlint cannot size (not in offlint/data/hf_models.json, no local config.json). Each names
    how many units it affects, where it is first named, and what to add. Not findings: nothing is wrong with the
    configuration. (Every GPU a Bridge recipe name gives has a capacity, measured or stated: devices.py.)"""
    models: dict[str, list] = {}
    for unit in units:
        if unit.checked_through_callers:
            continue  # reported through its callers, which are units of their own
        for assignment in unit.all_assignments():
            reason = getattr(assignment.value, "reason", "")
            if assignment.key == "model.num_layers" and isinstance(reason, str) and _NOT_IN_TABLE in reason:
                models.setdefault(reason.split(_NOT_IN_TABLE)[0], []).append(assignment.location)
                break
    notes = []
    for model_id, places in sorted(models.items()):
        first = _first(places)
        beside = posixpath.join(posixpath.dirname(first.path), model_id, "config.json")
        verb = "loads" if len(places) == 1 else "load"
        notes.append(f"no memory estimate for {plural(len(places), 'unit')} that {verb} {model_id} (first at "
                     f"{first.path}:{first.line}): offlint does not know its sizes; put its config.json at {beside}, or add "
                     f"it to offlint/data/hf_models.json with the public source of each size")
    return notes


def _first(places: list):
    return min(places, key=lambda loc: (loc.path, loc.line, loc.col))
