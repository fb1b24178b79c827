"""Inputs of PEFT: Bridge's LoRA adapters, their targets and rank, and what is not modelled with them
(docs/estimate.md, "PEFT (LoRA)").
"""

from __future__ import annotations

from offlint.types import Unknown
from offlint.estimate.reader import Reader, positive_int
from offlint.estimate.shapes import LowPrecision, ModelShape, Peft, Training

_LORA_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


def read_peft(r: Reader, m: ModelShape, t: Training, low: LowPrecision | None,
               fsdp: str | None) -> tuple[Peft | None, str]:
    """(the LoRA adapters, or None for full training; why there is no verdict, or ""). Bridge's `cfg.peft` is a
    LoRA(...) dataclass (peft/lora.py: target_modules, dim); offlint models plain LoRA on the dense layers'
    four linears."""
    value = r.lookup("peft")
    if value.is_unknown:
        r.unknown["peft"] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
            " (the memory model would need to know the PEFT config)"
        return None, ""
    if value.state != "known" or value.value is None:
        return None, ""
    if isinstance(value.value, str):  # the text of a config offlint did not evaluate
        return None, f"PEFT with a config offlint does not evaluate (`{value.value}`)"
    fields = getattr(value.value, "fields", None)
    name = getattr(value.value, "name", "")
    if name != "LoRA" or not isinstance(fields, dict):
        return None, f"the PEFT scheme {name or value.value!r} (only LoRA is modelled)"
    targets, dim = fields.get("target_modules"), fields.get("dim")
    for key, field_value in (("target_modules", targets), ("dim", dim)):
        if isinstance(field_value, Unknown):
            r.unknown["peft"] = f"`{key}` of the LoRA config: {field_value.reason}"
            return None, ""
    if not isinstance(targets, (list, tuple)) or not targets or not set(targets) <= set(_LORA_TARGETS) \
            or not positive_int(dim):
        return None, (f"LoRA on {targets!r} (only the dense layers' linear_qkv, linear_proj, linear_fc1 and "
                      f"linear_fc2 are modelled)")
    settings = {"exclude_modules": (None, []), "lora_dtype": (None,), "dropout": (0, 0.0),
                "sequence_parallel_input_regather": (False,)}
    for key, allowed in settings.items():  # a field the record lacks has the dataclass's default (allowed[0])
        if fields.get(key, allowed[0]) not in allowed:
            return None, f"LoRA with {key}={fields[key]!r} (not modelled)"
    if m.num_moe_experts or m.multi_latent_attention or m.mtp_num_layers:
        return None, "LoRA on a MoE, multi-latent-attention or MTP model (its adapter layouts are not modelled)"
    if low is not None or fsdp:
        return None, "LoRA with FP8 or Megatron-FSDP (frozen quantized or sharded base weights are not modelled)"
    recompute = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if recompute - {"core_attn"} or t.fine_grained_offloading:
        return None, ("LoRA with selective recompute beyond core_attn or fine-grained activation offloading (what "
                      "the adapters keep then is not modelled)")
    if t.optimizer_cpu_offload:
        return None, "LoRA with optimizer offload (not modelled)"
    overlap = r.lookup("comm_overlap.tp_comm_overlap")
    if r.get("model.sequence_parallel", False) and not (overlap.state in ("known", "default") and not overlap.value):
        return None, ("LoRA with sequence parallelism and TP communication overlap (or an overlap setting offlint "
                      "cannot read): the adapters' saved inputs are then not gathered by Transformer Engine")
    return Peft(tuple(dict.fromkeys(targets)), int(dim)), ""
