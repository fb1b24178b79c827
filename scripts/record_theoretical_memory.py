"""Record Megatron-LM's own theoretical memory numbers for offlint's comparison tests.

Runs the real `compute_weight_and_optimizer_memory`, `compute_activation_memory` (sequence parallel with
selective recompute) and `compute_activation_memory_without_sp` from a Megatron-LM tree's
`megatron/training/theoretical_memory_usage.py` over the configurations below, and writes them with their
results and provenance to `tests/data/theoretical_memory.json`.

    python scripts/record_theoretical_memory.py --mlm-src /path/to/Megatron-LM [--commit SHA]

Importing `megatron.training` runs the whole training stack's `__init__` (it needs Python 3.12 and CUDA-era
dependencies), so the module file is loaded on its own. Its two imports from `megatron.training.utils`
(`print_rank_0`, `is_hybrid_model`) are only used by `report_theoretical_memory`, which this script does not
call; they are provided as plain stand-ins. The three functions recorded run unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

MODULE = "megatron/training/theoretical_memory_usage.py"
_PACKAGE = "_offlint_mlm_theoretical"
OUTPUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "theoretical_memory.json"


def _dense(name, layers, hidden, heads, vocab, seq, mbs, tp, pp, world, nmb, *, vpp=None, sp=True,
           distopt=True, groups=None, ffn=None, swiglu=False, untied=False, rms=False, kv=None, compare=("weights",
                                                                                                           "activations")):
    return {
        "name": name,
        "model": {"num_layers": layers, "hidden_size": hidden, "ffn_hidden_size": ffn or 4 * hidden,
                  "num_attention_heads": heads, "num_query_groups": groups or heads,
                  "kv_channels": kv or hidden // heads, "vocab_size": vocab, "seq_length": seq,
                  "gated_linear_unit": swiglu, "tied_embeddings": not untied, "rms_norm": rms,
                  "add_bias_linear": False, "learned_position_embeddings": False, "hidden_dropout": 0.1},
        "parallel": {"tp": tp, "pp": pp, "vpp": vpp, "sequence_parallel": sp, "world_size": world},
        "training": {"micro_batch_size": mbs, "distributed_optimizer": distopt, "params_bytes": 2,
                     "grads_fp32": True, "recompute_granularity": "selective"},
        "num_microbatches": nmb,
        "compare": list(compare),
    }


def _moe(name, base: dict, experts, moe_ffn, topk, ep, etp=1, shared=None, freq=1):
    config = json.loads(json.dumps(base))
    config["name"] = name
    config["model"].update({"num_moe_experts": experts, "moe_ffn_hidden_size": moe_ffn, "moe_router_topk": topk,
                            "moe_shared_expert_intermediate_size": shared, "moe_layer_freq": freq})
    config["parallel"].update({"ep": ep, "etp": etp})
    config["compare"] = ["weights"]
    return config


def _mla(name, base: dict, q_lora, kv_lora, qk, pe, v):
    """Multi-latent attention (Megatron-LM counts its q/kv norms, as offlint does with qk_layernorm)."""
    config = json.loads(json.dumps(base))
    config["name"] = name
    config["model"].update({"multi_latent_attention": True, "q_lora_rank": q_lora, "kv_lora_rank": kv_lora,
                            "qk_head_dim": qk, "qk_pos_emb_head_dim": pe, "v_head_dim": v, "qk_layernorm": True})
    config["compare"] = ["weights"]
    return config


def _mtp(name, base: dict, depths):
    config = json.loads(json.dumps(base))
    config["name"] = name
    config["model"]["mtp_num_layers"] = depths
    config["compare"] = ["weights"]
    return config


# Activations are compared where Megatron-LM's formulas apply: multi-head attention, a non-gated MLP with
# ffn = 4h and dropout (the paper's GPT). GQA, SwiGLU and MoE configurations compare weights and optimizer only.
CONFIGS = [
    _dense("gpt-2.7b-tp2-sp-selective", 32, 2560, 32, 51200, 2048, 2, 2, 1, 8, 16),
    _dense("gpt-13b-tp4-pp2-sp", 40, 5120, 40, 50304, 2048, 1, 4, 2, 32, 8),
    _dense("gpt-13b-tp4-pp2-sp-few-microbatches", 40, 5120, 40, 50304, 2048, 1, 4, 2, 32, 1),
    _dense("gpt-22b-tp8-pp4-vpp3-sp", 48, 6144, 48, 51200, 2048, 1, 8, 4, 64, 16, vpp=3),
    _dense("gpt-7b-tp2-pp4-no-sp", 32, 4096, 32, 50304, 4096, 1, 2, 4, 16, 8, sp=False, distopt=False),
    _dense("gpt-7b-tp4-pp2-no-sp-distopt", 32, 4096, 32, 50304, 2048, 2, 4, 2, 32, 16, sp=False),
    _dense("llama3-8b-shape-tp1", 32, 4096, 32, 128256, 8192, 1, 1, 1, 8, 64, groups=8, ffn=14336, swiglu=True,
           untied=True, rms=True, compare=("weights",)),
    _dense("llama3-70b-shape-tp4-pp4-vpp5", 80, 8192, 64, 128256, 8192, 1, 4, 4, 64, 32, vpp=5, groups=8,
           ffn=28672, swiglu=True, untied=True, rms=True, compare=("weights",)),
    _dense("dense-no-distopt-tp8", 24, 4096, 32, 32000, 4096, 1, 8, 1, 16, 4, distopt=False, groups=4,
           ffn=11008, swiglu=True, untied=True, rms=True, compare=("weights",)),
    _moe("qwen3-30b-a3b-shape-ep8", _dense("", 48, 2048, 32, 151936, 4096, 1, 1, 1, 16, 32, groups=4, kv=128,
                                             ffn=6144, swiglu=True, untied=True, rms=True), 128, 768, 8, 8),
    _moe("moe-shared-tp2-pp2-ep4", _dense("", 16, 2048, 16, 102400, 4096, 1, 2, 2, 32, 8, groups=16, ffn=10944,
                                            swiglu=True, untied=True, rms=True), 64, 1408, 6, 4, shared=2816),
    _moe("moe-freq-list-pp1", _dense("", 8, 1024, 16, 32000, 2048, 1, 2, 1, 16, 8, ffn=4096, swiglu=True,
                                       untied=False, rms=True), 16, 512, 2, 8, freq=[0, 1, 1, 1, 1, 1, 1, 1]),
    # MLA and MTP at TP1 (Megatron-LM splits all of MLA over TP; the Transformer Engine spec duplicates the down
    # projections, as offlint counts them) and MTP at PP1 (Megatron-LM puts the MTP block on the first stage's
    # "most loaded shard"; megatron-core builds it on the last).
    _mla("mla-deepseek-v2-lite-shape-no-q-lora", _moe("", _dense("", 27, 2048, 16, 102400, 4096, 1, 1, 1, 8, 8,
                                                                   ffn=10944, swiglu=True, untied=True, rms=True),
                                                       64, 1408, 6, 8, shared=2816, freq=[0] + [1] * 26),
         None, 512, 128, 64, 128),
    _mla("mla-q-lora-dense-pp2", _dense("", 8, 2048, 16, 32000, 4096, 1, 1, 2, 8, 8, ffn=5632, swiglu=True,
                                          untied=True, rms=True), 768, 256, 64, 32, 64),
    _mtp("mtp-two-depths-dense-tp2", _dense("", 8, 2048, 16, 32000, 4096, 1, 2, 1, 8, 8, ffn=5632, swiglu=True,
                                              untied=True, rms=True), 2),
    _mtp("mtp-mla-moe-last-layer", _mla("", _moe("", _dense("", 6, 1024, 8, 32000, 4096, 1, 1, 1, 8, 8, ffn=2816,
                                                              swiglu=True, untied=True, rms=True),
                                                  16, 512, 4, 4, shared=512, freq=[0, 1, 1, 1, 1, 1]),
                                        384, 128, 64, 32, 64), 1),
]


def mlm_args(config: dict) -> argparse.Namespace:
    """The argparse namespace Megatron-LM's functions read, for one configuration."""
    m, p, t = config["model"], config["parallel"], config["training"]
    tp, pp = p["tp"], p["pp"]
    return argparse.Namespace(
        num_layers=m["num_layers"], hidden_size=m["hidden_size"], ffn_hidden_size=m["ffn_hidden_size"],
        num_attention_heads=m["num_attention_heads"], kv_channels=m["kv_channels"],
        group_query_attention=m["num_query_groups"] != m["num_attention_heads"],
        num_query_groups=m["num_query_groups"], swiglu=m["gated_linear_unit"],
        normalization="RMSNorm" if m["rms_norm"] else "LayerNorm",
        multi_latent_attention=m.get("multi_latent_attention", False), q_lora_rank=m.get("q_lora_rank"),
        kv_lora_rank=m.get("kv_lora_rank"), qk_head_dim=m.get("qk_head_dim"),
        qk_pos_emb_head_dim=m.get("qk_pos_emb_head_dim"), v_head_dim=m.get("v_head_dim"),
        padded_vocab_size=m["vocab_size"], untie_embeddings_and_output_weights=not m["tied_embeddings"],
        add_bias_linear=m["add_bias_linear"], num_experts=m.get("num_moe_experts"),
        moe_ffn_hidden_size=m.get("moe_ffn_hidden_size"), moe_router_topk=m.get("moe_router_topk", 2),
        moe_shared_expert_intermediate_size=m.get("moe_shared_expert_intermediate_size"),
        moe_layer_freq=m.get("moe_layer_freq", 1), moe_latent_size=None, moe_shared_expert_gate=False,
        mtp_num_layers=m.get("mtp_num_layers"), seq_length=m["seq_length"], micro_batch_size=t["micro_batch_size"],
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=p["vpp"], context_parallel_size=1,
        expert_model_parallel_size=p.get("ep", 1), expert_tensor_parallel_size=p.get("etp", 1),
        world_size=p["world_size"], data_parallel_size=p["world_size"] // (tp * pp),
        use_distributed_optimizer=t["distributed_optimizer"], sequence_parallel=p["sequence_parallel"],
        recompute_granularity=t["recompute_granularity"],
    )


def load_module(mlm_src: Path) -> types.ModuleType:
    """Load theoretical_memory_usage.py from a Megatron-LM tree without running megatron.training's __init__."""
    path = mlm_src / MODULE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; pass --mlm-src pointing at a Megatron-LM checkout")
    # A private parent package, so the module's `from .utils import ...` finds the stand-ins and nothing named
    # `megatron` is touched (the real megatron-core may be imported in the same process).
    package = types.ModuleType(_PACKAGE)
    package.__path__ = []
    sys.modules[_PACKAGE] = package
    utils = types.ModuleType(f"{_PACKAGE}.utils")
    utils.print_rank_0 = lambda *args, **kwargs: None
    utils.is_hybrid_model = lambda args: False
    sys.modules[f"{_PACKAGE}.utils"] = utils
    spec = importlib.util.spec_from_file_location(f"{_PACKAGE}.theoretical_memory_usage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(module: types.ModuleType, config: dict) -> dict:
    nmb = config["num_microbatches"]
    result = {"weight_and_optimizer_bytes": module.compute_weight_and_optimizer_memory(mlm_args(config))}
    if "activations" in config["compare"]:
        if config["parallel"]["sequence_parallel"]:
            result["activation_bytes"] = module.compute_activation_memory(mlm_args(config), nmb)
            result["activation_function"] = "compute_activation_memory"
        else:
            result["activation_bytes"] = module.compute_activation_memory_without_sp(mlm_args(config), nmb)
            result["activation_function"] = "compute_activation_memory_without_sp"
    return result


def _commit(mlm_src: Path, given: str | None) -> str:
    if given:
        return given
    try:
        return subprocess.run(["git", "-C", str(mlm_src), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout; pass --commit)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlm-src", type=Path, required=True, help="a Megatron-LM source tree")
    parser.add_argument("--commit", help="the tree's commit, when it is not a git checkout")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    module = load_module(args.mlm_src)
    source = (args.mlm_src / MODULE).read_bytes()
    records = [{"config": config, "megatron_lm": run(module, config)} for config in CONFIGS]
    data = {
        "provenance": {
            "repository": "NVIDIA/Megatron-LM",
            "commit": _commit(args.mlm_src, args.commit),
            "file": MODULE,
            "file_sha256": hashlib.sha256(source).hexdigest(),
            "functions": ["compute_weight_and_optimizer_memory", "compute_activation_memory",
                          "compute_activation_memory_without_sp"],
            "recorded_by": "scripts/record_theoretical_memory.py",
        },
        "records": records,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} configurations to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
