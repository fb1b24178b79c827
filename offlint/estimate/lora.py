"""LoRA fine-tuning on a frozen base (Megatron Bridge's peft/lora.py), for dense transformer layers.

What changes against full training (sources in docs/estimate.md, "PEFT (LoRA)"):

- Parameters: the base keeps its weights, but megatron-core's DDP allocates gradient buffers, and its optimizer
  states, only for parameters that require gradients (distributed_data_parallel.py, optimizer/__init__.py): the
  adapters. Each target linear gets Bridge's ParallelLinearAdapter: linear_in (in x dim) and linear_out
  (dim x out), no bias, in the model's dtype, both split over tensor parallelism (column- or row-parallel
  linear_in, column-parallel linear_out), so dim x (in + out) / TP per rank.
- Saved activations: a frozen Transformer Engine linear does not save its input (`backward_needs_input` is
  `weight.requires_grad`); the input of a target linear is saved by the adapter's linear_in instead. For the
  LayerNorm-fused QKV and fc1 that input is the layernorm output Bridge asks TE to return, gathered over the
  sequence-parallel group (`return_layernorm_output_gathered`), so the full sequence on every TP rank. The output
  projection's input is flash attention's output, which attention keeps anyway; fc2's is the activation output.
  Each adapter also saves its rank-`dim` intermediate for linear_out's weight gradient.
"""

from __future__ import annotations

from offlint.estimate.inputs import ModelShape, Parallelism, Peft

TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


def features(m: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each target linear of a dense layer, unsharded."""
    q = m.num_attention_heads * m.kv_channels
    kv = m.num_query_groups * m.kv_channels
    gate = 2 if m.gated_linear_unit else 1
    return {"linear_qkv": (m.hidden_size, q + 2 * kv), "linear_proj": (q, m.hidden_size),
            "linear_fc1": (m.hidden_size, m.ffn_hidden_size * gate), "linear_fc2": (m.ffn_hidden_size, m.hidden_size)}


def adapter_params(m: ModelShape, peft: Peft) -> int:
    """Adapter parameters of one layer, unsharded."""
    shapes = features(m)
    return sum(peft.dim * sum(shapes[name]) for name in peft.targets)


def frozen_terms(terms: dict[str, float], m: ModelShape, p: Parallelism, peft: Peft, n: float) -> dict[str, float]:
    """A dense layer's saved tensors with a frozen base and adapters on `peft.targets` (`n`: tokens per CP rank
    and micro-batch)."""
    out = dict(terms)
    h = m.hidden_size
    out["qkv_input"] = 2 * n * h if "linear_qkv" in peft.targets else 0.0  # gathered layernorm output
    out["fc1_input"] = 2 * n * h if "linear_fc1" in peft.targets else 0.0
    if "linear_fc2" not in peft.targets:
        out["act_output"] = 0.0
    for name in peft.targets:
        out[f"lora_{name}_intermediate"] = 2 * n * peft.dim
    return out
