"""The public measurements the step-time model (cost.py) is calibrated against, and its predictions for them.

Each case is a measured configuration from Megatron Bridge's docs and skill cards (067f987) or the seed
documents, written out with its model and layout: a ratio of two step times of one workload (a memory knob
turned), or an absolute throughput (model TFLOP/s per GPU). `predict` recomputes the model's figure from the
constants in cost.py; docs/estimate.md holds the table and tests/test_estimate_calibration.py checks that the
table is what this module computes and that every ratio is within 25% of its measurement. A case marked "fit"
set a constant (docs/estimate.md says which); the others are checks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offlint.estimate import cost, memory
from offlint.estimate.devices import DEVICES
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training

QWEN3_30B_A3B = ModelShape(num_layers=48, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32,
                           num_query_groups=4, kv_channels=128, vocab_size=151936, seq_length=4096,
                           gated_linear_unit=True, tied_embeddings=False, rms_norm=True, add_bias_linear=False,
                           qk_layernorm=True, num_moe_experts=128, moe_ffn_hidden_size=768, moe_router_topk=8)
QWEN3_8B = ModelShape(num_layers=36, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32,
                      num_query_groups=8, kv_channels=128, vocab_size=151936, seq_length=4096, gated_linear_unit=True,
                      tied_embeddings=False, rms_norm=True, add_bias_linear=False, qk_layernorm=True)
LLAMA3_70B = ModelShape(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                        num_query_groups=8, kv_channels=128, vocab_size=128256, seq_length=4096,
                        gated_linear_unit=True, tied_embeddings=False, rms_norm=True, add_bias_linear=False)

_BF16 = Training(micro_batch_size=1, distributed_optimizer=True, params_bytes=2, grads_fp32=True)
# The GPU validation's 1.35B GPT (fixtures/replay/gpt_1b_recipes.py as replayed: megatron-core's local spec,
# whose attention is unfused with an fp32 softmax and dropout, an untied output layer, bf16 gradients).
GPT_1B_REPLAY = ModelShape(num_layers=24, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16,
                           num_query_groups=16, kv_channels=128, vocab_size=32768, seq_length=4096,
                           tied_embeddings=False, learned_position_embeddings=True, hidden_dropout=0.1,
                           unfused_score_bytes=7)


@dataclass(frozen=True)
class Workload:
    model: ModelShape
    parallel: Parallelism
    training: Training
    gpus: int
    global_batch: int
    device: str = "h100-80gb"

    def inputs(self) -> Inputs:
        return Inputs(self.model, replace(self.parallel, world_size=self.gpus),
                      replace(self.training, global_batch_size=self.global_batch))

    def seconds(self) -> float:
        inputs = self.inputs()
        return cost.step_seconds(inputs, memory.estimate(inputs, self.gpus), DEVICES[self.device])

    def with_(self, parallel: dict | None = None, **training) -> "Workload":
        return replace(self, parallel=replace(self.parallel, **(parallel or {})),
                       training=replace(self.training, **training))


@dataclass(frozen=True)
class Case:
    name: str  # what the table calls it
    measured: float
    source: str
    base: Workload
    variant: Workload | None = None  # a ratio: variant / base step time; None: an absolute figure of base
    role: str = "check"  # "check", or "fit: CONSTANT"
    absolute: str = "TFLOP/s"  # without a variant: "TFLOP/s" (model FLOPs per GPU) or "seconds" (per step)

    @property
    def kind(self) -> str:
        return "ratio" if self.variant is not None else self.absolute


def model_flops_per_token(m: ModelShape) -> float:
    """Megatron Bridge's model FLOPs per token (training/utils/flop_utils.py for GQA/MoE without MLA): forward
    and backward of the projections, causal attention, the (routed) MLP and the logits; recompute not counted."""
    h, q, kv = m.hidden_size, m.num_attention_heads * m.kv_channels, m.num_query_groups * m.kv_channels
    gate = 3 if m.gated_linear_unit else 2
    attention = h * (q + 2 * kv) + q * h + q * m.seq_length
    if m.num_moe_experts:
        mlp = m.moe_router_topk * h * (m.moe_ffn_hidden_size or m.ffn_hidden_size) * gate
    else:
        mlp = h * m.ffn_hidden_size * gate
    return 6 * (m.num_layers * (attention + mlp) + h * m.vocab_size)


def predict(case: Case) -> float:
    if case.variant is not None:
        return case.variant.seconds() / case.base.seconds()
    w = case.base
    if case.absolute == "seconds":
        return w.seconds()
    tokens = w.global_batch * w.model.seq_length
    return model_flops_per_token(w.model) * tokens / w.seconds() / w.gpus / 1e12


# Qwen3-30B-A3B optimizer offloading (cpu-offloading card and docs/training/cpu-offloading.md, seed 002):
# TP2 PP2 EP4 ETP1 with sequence parallelism on 16 H100s (2 nodes), sequence 4096, GBS 8 MBS 1, full uniform
# recompute of 1 layer, bf16 with fp32 gradients, distributed optimizer, DeepEP dispatch without CUDA graphs.
QWEN_OFFLOAD = Workload(QWEN3_30B_A3B, Parallelism(tp=2, pp=2, ep=4, etp=1, sequence_parallel=True),
                        replace(_BF16, recompute_granularity="full", recompute_method="uniform",
                                recompute_num_layers=1), gpus=16, global_batch=8)
# Llama3 70B SFT, FP8 current scaling (memory-tuning and activation-recompute cards, Bridge PR 3107, seed 003):
# TP4 PP4 VPP5 DP2 with sequence parallelism on 32 H100s, sequence 4096, GBS 32 MBS 1, selective recompute of
# core_attn; ratios are step times (the inverse of the measured TFLOP/s at the same global batch).
LLAMA_SFT = Workload(LLAMA3_70B, Parallelism(tp=4, pp=4, vpp=5, sequence_parallel=True),
                     replace(_BF16, compute_dtype="fp8", recompute_granularity="selective",
                             recompute_modules=("core_attn",)), gpus=32, global_batch=32)


# One H200, one process (the replay runs its only rank without torchrun), GBS 1 MBS 1, Adam on the GPU side
# through torch's AdamW (no Transformer Engine on that machine).
GPT_1B_H200 = Workload(GPT_1B_REPLAY, Parallelism(), replace(_BF16, grads_fp32=False), gpus=1, global_batch=1,
                       device="h200")


# The same model as the second GPU validation replayed it: the output layer tied to the embedding (1.28B).
GPT_1B_TIED_H200 = replace(GPT_1B_H200, model=replace(GPT_1B_REPLAY, tied_embeddings=True))


def _offload(fraction: float, overlap: bool = False) -> Workload:
    return QWEN_OFFLOAD.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=fraction,
                              overlap_cpu_optimizer_d2h_h2d=overlap)


CPU_OFFLOAD = "skills/nemo-mbridge-perf-cpu-offloading/card.yaml (996 ms baseline)"
GPU_VALIDATION = "docs/gpu-validation.md (H200, megatron-core 0.19.2, 2026-11-30; 332 ms baseline)"
GPU_VALIDATION_2 = "docs/gpu-validation.md (H200, megatron-core 0.19.2, 2026-12-04; 848 ms without overlap)"
MEMORY_TUNING = "skills/nemo-mbridge-perf-memory-tuning/card.yaml (704 TFLOP/s baseline)"
RECOMPUTE = "skills/nemo-mbridge-perf-activation-recompute/card.yaml (704 TFLOP/s baseline)"

CASES: tuple[Case, ...] = (
    Case("Qwen3-30B-A3B offload baseline step (no offload)", 0.996, CPU_OFFLOAD, QWEN_OFFLOAD,
         role="fit: MOE_HOST_SECONDS (eager)", absolute="seconds"),
    Case("Qwen3-30B-A3B optimizer offload 25%", 1871 / 996, CPU_OFFLOAD, QWEN_OFFLOAD, _offload(0.25)),
    Case("Qwen3-30B-A3B optimizer offload 50%", 2484 / 996, CPU_OFFLOAD, QWEN_OFFLOAD, _offload(0.5)),
    Case("Qwen3-30B-A3B optimizer offload 75%", 3187 / 996, CPU_OFFLOAD, QWEN_OFFLOAD, _offload(0.75)),
    Case("Qwen3-30B-A3B optimizer offload 100%", 4189 / 996, CPU_OFFLOAD, QWEN_OFFLOAD, _offload(1.0),
         role="fit: CPU_ADAM_PARAMS_PER_S"),
    Case("Qwen3-30B-A3B offload 100%, overlap_cpu_optimizer_d2h_h2d on / off", 3877 / 4189, CPU_OFFLOAD,
         _offload(1.0), _offload(1.0, overlap=True)),
    Case("H200 GPT 1.35B replay baseline step, unfused attention, 1 GPU", 0.332, GPU_VALIDATION, GPT_1B_H200,
         role="check: UNFUSED_SCORE_TRAFFIC_BYTES (counted)", absolute="seconds"),
    Case("H200 GPT 1.35B replay, optimizer offload 50%", 0.575 / 0.332, GPU_VALIDATION, GPT_1B_H200,
         GPT_1B_H200.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=0.5)),
    Case("H200 GPT 1.35B replay, optimizer offload 100%", 0.872 / 0.332, GPU_VALIDATION, GPT_1B_H200,
         GPT_1B_H200.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0),
         role="fit: ONE_PROCESS_HOST_SPEEDUP (its optimizer step, 0.569 s)"),
    Case("H200 GPT 1.35B replay, optimizer offload 100%, precision-aware", 1.484 / 0.332, GPU_VALIDATION,
         GPT_1B_H200, GPT_1B_H200.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,
                                        precision_aware=True),
         role="fit: HOST_CONVERSIONS_PER_S (its optimizer step, 1.183 s)"),
    Case("H200 GPT 1.28B replay, offload 100%, overlap_cpu_optimizer_d2h_h2d on / off", 0.711 / 0.848,
         GPU_VALIDATION_2, GPT_1B_TIED_H200.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0),
         GPT_1B_TIED_H200.with_(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,
                                overlap_cpu_optimizer_d2h_h2d=True)),
    Case("Llama3 70B recompute mlp / core_attn", 704 / 593.6, RECOMPUTE, LLAMA_SFT,
         LLAMA_SFT.with_(recompute_modules=("mlp",))),
    Case("Llama3 70B recompute mlp,core_attn / core_attn", 704 / 586.8, RECOMPUTE, LLAMA_SFT,
         LLAMA_SFT.with_(recompute_modules=("mlp", "core_attn"))),
    Case("Llama3 70B recompute core_attn,layernorm / core_attn", 704 / 702, RECOMPUTE, LLAMA_SFT,
         LLAMA_SFT.with_(recompute_modules=("core_attn", "layernorm"))),
    Case("Llama3 70B PP4 -> PP8 (DP2 -> DP1)", 704 / 668.0, MEMORY_TUNING, LLAMA_SFT, LLAMA_SFT.with_({"pp": 8})),
    Case("Llama3 70B TP4 -> TP8 (DP2 -> DP1)", 704 / 508.7, MEMORY_TUNING, LLAMA_SFT, LLAMA_SFT.with_({"tp": 8})),
    Case("Qwen3-8B pretrain, TP1 PP1 DP16, GBS 1024 MBS 1, seq 4096, 16 H100", 512.7,
         "examples/model_verification_cards/qwen3-8b/card.yaml (pretrain H100)",
         Workload(QWEN3_8B, Parallelism(), _BF16, gpus=16, global_batch=1024), role="fit: GEMM_EFFICIENCY"),
    Case("Qwen3-30B-A3B pretrain, TP1 EP16, GBS 1024 MBS 1, seq 4096, HybridEP, graphed router, 16 H100",
         244.039, "skills/nemo-mbridge-perf-moe-hardware-configs/card.yaml (qwen3_30b_h100_16, before EP overlap)",
         Workload(QWEN3_30B_A3B, Parallelism(ep=16, etp=1), replace(_BF16, grads_fp32=False, precision_aware=True,
                                                                    moe_router_graphed=True),
                  gpus=16, global_batch=1024), role="fit: MOE_HOST_SECONDS (graphed)"),
    Case("Qwen3-30B-A3B pretrain, TP1 EP8 EDP4, GBS 256 MBS 4, seq 4096, full recompute, DeepEP, 32 H100", 210.0,
         "skills/nemo-mbridge-perf-moe-hardware-configs/card.yaml (qwen3_30b_h100_32)",
         Workload(QWEN3_30B_A3B, Parallelism(ep=8, etp=1),
                  replace(_BF16, micro_batch_size=4, recompute_granularity="full", recompute_method="uniform",
                          recompute_num_layers=1), gpus=32, global_batch=256)),
    Case("Llama3 70B SFT FP8, TP4 PP4 VPP5 DP2, GBS 32 MBS 1, seq 4096, 32 H100", 704.0, MEMORY_TUNING, LLAMA_SFT),
)

# Public measurements of knobs or models the step-time model does not cover, and why (docs/estimate.md lists them).
NOT_REPRODUCED = (
    ("Moonlight 16B selective recompute core_attn / mla_up_proj / mla_up_proj,mlp / moe_act / layernorm,moe_act: "
     "+3.85% / +5.19% / +8.65% / +1.99% / +10.79%", "multi-latent attention is not modelled",
     "skills/nemo-mbridge-perf-activation-recompute/card.yaml"),
    ("Nemotron 3 Nano recompute moe,layernorm / moe: +3.07%", "hybrid Mamba layers are not modelled",
     "skills/nemo-mbridge-perf-activation-recompute/card.yaml"),
    ("Qwen3-30B-A3B TE-scoped CUDA graphs 623 -> 484 ms (22%); GPT-OSS-20B 16-24%",
     "only CUDA graphs' effect on the MoE host overhead is modelled in the step time; their memory (Transformer "
     "Engine's static masks and copied layer outputs) in the estimate, not here",
     "skills/nemo-mbridge-perf-cuda-graphs/card.yaml"),
    ("Qwen3-30B-A3B expert-parallel communication overlap +17.7% throughput",
     "communication overlap knobs are not modelled", "skills/nemo-mbridge-perf-expert-parallel-overlap/card.yaml"),
    ("LoRA sequence-parallel input re-gather -0.34% to -6.74% throughput", "PEFT is not modelled",
     "skills/nemo-mbridge-perf-memory-tuning/card.yaml"),
    ("Qwen3-VL 235B MBS 4 nearly doubles 3D-parallel throughput vs MBS 1",
     "vision tower not modelled; sequence length not stated", "skills/nemo-mbridge-perf-moe-vlm-training/card.yaml"),
)


TOLERANCE = 0.25  # a prediction within 25% of its measurement (issue 15)
TABLE_START, TABLE_END = "<!-- calibration-table: python -m offlint.estimate.calibration -->", \
    "<!-- /calibration-table -->"


def row(case: Case) -> str:
    """One row of the table in docs/estimate.md: ratios to 3 decimals, throughput to whole TFLOP/s."""
    predicted = predict(case)
    fmt = "{:.0f}" if case.kind == "TFLOP/s" else "{:.3f}"
    return (f"| {case.name} | {case.kind} | {fmt.format(case.measured)} | {fmt.format(predicted)} | "
            f"{predicted / case.measured - 1:+.1%} | {case.role} | {case.source} |")


def table() -> str:
    lines = ["| measurement (H100 unless named) | kind | measured | predicted | error | role | source |",
             "|---|---|---:|---:|---:|---|---|"]
    lines += [row(case) for case in CASES]
    return "\n".join([TABLE_START, *lines, TABLE_END])


if __name__ == "__main__":
    print(table())
