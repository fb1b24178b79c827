"""Inputs of Bridge's Wan video diffusion transformer: its provider's and dataset's sizes (docs/estimate.md, "Wan").
"""

from __future__ import annotations

from dataclasses import replace

from offlint.types import Unknown
from offlint.estimate.reader import Reader, positive_int
from offlint.estimate.shapes import LowPrecision, ModelShape, Parallelism, Training, WanShape

# Bridge's Wan diffusion transformer (offlint/estimate/diffusion.py; docs/estimate.md "Wan"). WanModelProvider's
# own defaults (diffusion/models/wan/wan_provider.py:35-73 at Bridge 067f987) for the fields the model reads: the
# reader gives a provider's unset fields megatron-core's TransformerConfig defaults instead.
WAN_PROVIDER_DEFAULTS = {"model.in_channels": 16, "model.out_channels": 16, "model.patch_spatial": 2,
                         "model.patch_temporal": 1, "model.freq_dim": 256, "model.text_dim": 4096,
                         "model.layernorm_across_heads": True, "model.add_qkv_bias": True,
                         "model.add_bias_linear": True, "model.gated_linear_unit": False, "model.qkv_format": "thd"}
# WanDatasetConfig's defaults (diffusion/data/wan/wan_energon_datamodule.py:53-68): the mock batch's sizes.
WAN_DATASET_DEFAULTS = {"dataset.path": None, "dataset.F_latents": 24, "dataset.H_latents": 104,
                        "dataset.W_latents": 60, "dataset.patch_spatial": 2, "dataset.patch_temporal": 1,
                        "dataset.number_packed_samples": 1, "dataset.context_seq_len": 512,
                        "dataset.context_embeddings_dim": 4096}
_MOCK_LATENT_CHANNELS = 16  # wan_mock_datamodule.py:49: torch.randn(16, F, H, W)
_WAN_KEY = "model.crossattn_emb_size"


def read_wan(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
              fsdp: str | None) -> tuple[ModelShape, str]:
    """(the model, with its Wan shape and the mock batch's token count as seq_length where it is Wan; why there is
    no verdict, or ""). A model is Wan where `crossattn_emb_size` is set (only WanModelProvider has it); inputs
    that cannot be read are recorded in `r.unknown`."""
    value = r.lookup(_WAN_KEY)
    if value.is_unknown:
        reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
        r.unknown[_WAN_KEY] = f"{reason} (the memory model would need to know whether the model is Wan)"
        return m, ""
    if not (value.state == "known" and positive_int(value.value)):
        return m, ""
    # A Wan model has no vocabulary and its own sequence: the language-model readings do not apply.
    for key in ("model.vocab_size", "model.seq_length"):
        r.unknown.pop(key, None)
    r.other_seq_length = None

    def get(key: str) -> object:
        value = r.lookup(key)
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[key] = f"{reason} (the Wan memory model needs it)"
            return None
        if value.state == "known":
            return value.value
        return {**WAN_PROVIDER_DEFAULTS, **WAN_DATASET_DEFAULTS}.get(key, value.value)

    # Only Bridge's diffusion dataset configs have packing_buffer_size (WanDatasetConfig requires it set,
    # wan_energon_datamodule.py:70-72); offlint sees no class name, so that field tells the Wan dataset apart.
    packing = r.lookup("dataset.packing_buffer_size")
    if packing.is_unknown:
        get("dataset.packing_buffer_size")
        return m, ""
    if not (packing.state == "known" and positive_int(packing.value)):
        return m, ("a Wan diffusion transformer whose dataset offlint does not read as WanDatasetConfig (no "
                   "packing_buffer_size set): the sequence is the mock batch's or the packed videos' tokens")
    path = get("dataset.path")
    if "dataset.path" in r.unknown:
        return m, ""
    if path not in (None, "", []):
        return m, ("Wan with a real dataset (dataset.path set): a packed micro-batch's tokens depend on the videos "
                   "(first-fit packing to seq_length, a longer video packed alone), which offlint cannot see")
    sizes = {k: get(k) for k in ("model.in_channels", "model.out_channels", "model.patch_spatial",
                                 "model.patch_temporal", "model.freq_dim", "model.text_dim", "dataset.F_latents",
                                 "dataset.H_latents", "dataset.W_latents", "dataset.patch_spatial",
                                 "dataset.patch_temporal", "dataset.number_packed_samples",
                                 "dataset.context_seq_len", "dataset.context_embeddings_dim")}
    flags = {k: get(k) for k in ("model.layernorm_across_heads", "model.add_qkv_bias", "model.add_bias_linear",
                                 "model.gated_linear_unit", "model.qkv_format")}
    if any(k in r.unknown for k in (*sizes, *flags)):
        return m, ""
    bad = [k for k, v in sizes.items() if not positive_int(v)]
    if bad:
        return m, f"Wan with {bad[0]}={sizes[bad[0]]!r} (offlint reads a positive int)"
    pt, ps = sizes["model.patch_temporal"], sizes["model.patch_spatial"]
    frames, height, width = sizes["dataset.F_latents"], sizes["dataset.H_latents"], sizes["dataset.W_latents"]
    packs, context = sizes["dataset.number_packed_samples"], sizes["dataset.context_seq_len"]
    wan = WanShape(crossattn_emb_size=int(r.lookup(_WAN_KEY).value), text_dim=sizes["model.text_dim"],
                   in_channels=sizes["model.in_channels"], out_channels=sizes["model.out_channels"],
                   patch_temporal=pt, patch_spatial=ps, freq_dim=sizes["model.freq_dim"],
                   sample_tokens=(frames // pt) * (height // ps) * (width // ps), context_tokens=context,
                   packed_samples=packs, layernorm_across_heads=bool(flags["model.layernorm_across_heads"]))
    m = replace(m, wan=wan, seq_length=packs * wan.sample_tokens, add_qkv_bias=bool(flags["model.add_qkv_bias"]),
                add_bias_linear=bool(flags["model.add_bias_linear"]),
                gated_linear_unit=bool(flags["model.gated_linear_unit"]), hidden_dropout=0.0)
    return m, _wan_refused(m, p, t, low, fsdp, sizes, flags)


def _wan_refused(m: ModelShape, p: Parallelism, t: Training, low, fsdp, sizes: dict, flags: dict) -> str:
    w = m.wan
    if (sizes["dataset.patch_temporal"], sizes["dataset.patch_spatial"]) != (w.patch_temporal, w.patch_spatial) \
            or w.in_channels != _MOCK_LATENT_CHANNELS or w.out_channels != _MOCK_LATENT_CHANNELS \
            or sizes["dataset.context_embeddings_dim"] != w.text_dim:
        return ("Wan whose mock batch does not fit the model (the dataset's patch sizes, its 16 latent channels and "
                "text embedding width must be the model's patch sizes, in/out_channels and text_dim)")
    if any(size % patch for size, patch in ((sizes["dataset.F_latents"], w.patch_temporal),
                                            (sizes["dataset.H_latents"], w.patch_spatial),
                                            (sizes["dataset.W_latents"], w.patch_spatial))):
        return "Wan latents that the patch sizes do not divide (patchify asserts)"
    if flags["model.qkv_format"] != "thd":
        return f"Wan with qkv_format={flags['model.qkv_format']!r} (its packed batches run in 'thd'; not modelled)"
    if m.num_query_groups != m.num_attention_heads:
        return "Wan with grouped-query attention (megatron-core's CrossAttention raises)"
    if p.pp > 1 or (p.vpp or 1) > 1:
        return ("Wan with pipeline parallelism (the P2P buffers take seq_length while the mock batch's tokens come "
                "from the latent sizes; not modelled)")
    if p.cp > 1 and (w.sample_tokens % (2 * p.cp) or w.context_tokens % (2 * p.cp)):
        return (f"Wan with CP{p.cp} and {w.sample_tokens} video or {w.context_tokens} text tokens per sample, not a "
                f"multiple of 2 x CP (Transformer Engine's context parallelism asserts it; the mock batch is not "
                f"padded)")
    if p.sequence_parallel and (m.seq_length // p.cp) % p.tp:
        return f"Wan with sequence parallelism and {m.seq_length // p.cp} tokens per CP rank, not a multiple of TP"
    if m.num_moe_experts or m.multi_latent_attention or m.mtp_num_layers or m.hybrid_pattern is not None \
            or m.linear_attention_freq is not None:
        return "Wan with MoE, multi-latent attention, MTP, Mamba or gated-delta-net settings (not modelled)"
    if low is not None or fsdp or t.peft or t.cpu_offloading or t.fine_grained_offloading:
        return "Wan with FP8/FP4, Megatron-FSDP, LoRA or activation offloading (not modelled)"
    if t.recompute_granularity == "selective" and set(t.recompute_modules) - {"core_attn"}:
        return "Wan with selective recompute beyond core_attn (not modelled)"
    return ""
