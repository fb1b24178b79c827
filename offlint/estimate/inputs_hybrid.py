"""Inputs of hybrid Mamba models (Nemotron-H, Nemotron 3) and gated-delta-net layers (Qwen3-Next, Qwen3.5): their
layer pattern, MTP depths, and the settings the memory model does not cover for them (docs/estimate.md, "Hybrid
Mamba models", "Gated delta net").
"""

from __future__ import annotations

import re
from typing import Callable

from offlint.types import Source, Unknown
from offlint.estimate.reader import Reader, positive_int
from offlint.estimate.shapes import LowPrecision, ModelShape, Parallelism, Training

_HYBRID_KEYS = ("model.hybrid_layer_pattern", "model.hybrid_override_pattern")


def read_hybrid(r: Reader, hidden: int) -> dict:
    """A hybrid model's layer pattern and Mamba sizes ({} for a GPT model). Bridge's HybridModelProvider takes
    `hybrid_layer_pattern`, or the deprecated `hybrid_override_pattern` in its place, and megatron-core's
    TransformerConfig the Mamba sizes (defaults: head dim 64, 8 groups, state 128; heads = 2 x hidden / head dim
    when mamba_num_heads is unset, MambaMixer's expand=2). The pattern is kept as written; `hybrid_unsupported`
    refuses what offlint does not model."""
    pattern = None
    for key in _HYBRID_KEYS:
        value = r.lookup(key)
        if value.is_unknown:
            r.unknown[key] = (value.value.reason if isinstance(value.value, Unknown) else "unknown") + \
                " (the memory model would need the hybrid layer pattern)"
            return {}
        if value.state == "known" and isinstance(value.value, str) and value.value:
            pattern = value.value
            break
    if pattern is None:
        return {}
    head_dim = r.optional_int("model.mamba_head_dim") or 64
    return dict(hybrid_pattern=pattern.split(_MTP_SEPARATOR)[0], **_hybrid_mtp(r, pattern)[0],
                mamba_head_dim=head_dim,
                mamba_num_heads=r.optional_int("model.mamba_num_heads") or (2 * hidden // head_dim),
                mamba_num_groups=r.optional_int("model.mamba_num_groups") or 8,
                mamba_state_dim=r.optional_int("model.mamba_state_dim") or 128,
                mamba_chunk_size=r.optional_int("model.mamba_chunk_size") or 128,
                mamba_mem_eff_path=r.get("model.use_mamba_mem_eff_path", True) is not False)


# Bridge's HybridModelProvider (models/hybrid/hybrid_provider.py at 067f987) overrides these megatron-core
# TransformerConfig defaults; offlint's reader gives a provider's unset fields megatron-core's defaults.
HYBRID_PROVIDER_DEFAULTS = {"model.share_embeddings_and_output_weights": False, "model.normalization": "RMSNorm",
                            "model.add_bias_linear": False, "model.hidden_dropout": 0.0,
                            "model.position_embedding_type": "none"}


def hybrid_provider_get(r: Reader) -> Callable[[str, object], object]:
    """`r.get` for a hybrid model: a field left at its default takes HybridModelProvider's default where the
    pattern was set in Python (megatron-core's TransformerConfig has no pattern field, so that is Bridge's
    provider or a subclass); a Megatron-LM launch (--hybrid-layer-pattern) keeps argparse's defaults."""
    pattern = next((v for v in map(r.lookup, _HYBRID_KEYS) if v.state == "known"), None)
    bridge = pattern is not None and (pattern.assignment is None or pattern.assignment.source != Source.MLM)

    def get(key: str, fallback: object = None) -> object:
        if bridge and key in HYBRID_PROVIDER_DEFAULTS and r.lookup(key).state == "default":
            return HYBRID_PROVIDER_DEFAULTS[key]
        return r.get(key, fallback)

    return get


def hybrid_num_layers(pattern: str) -> int:
    """Bridge's HybridModelProvider.finalize takes num_layers from the pattern (asserting an explicit one agrees)."""
    return len(pattern.split(_MTP_SEPARATOR)[0].replace("|", ""))


_MTP_SEPARATOR = "/"  # megatron-core's Symbols.MTP_SEPARATOR (models/hybrid/hybrid_layer_allocation.py)


def _hybrid_mtp(r: Reader, written: str) -> tuple[dict, str]:
    """A hybrid model's MTP depths as Bridge 067f987 and its megatron-core 2a75ac12 build them (line numbers of
    megatron-core 0.19.2, the same code): the ModelShape fields ({} without depths) and why there is no verdict
    ("" when there is one). HybridModelProvider.finalize
    (models/hybrid/hybrid_provider.py:198-233) rewrites the pattern as "<main>/<mtp>/<mtp>..." with
    mtp_hybrid_override_pattern repeated mtp_num_layers times (at least once with mtp_use_repeated_layer; no
    copies, no depths), and sets mtp_num_layers to the copies unless the layer is repeated. A pattern written
    with "/" (and no override) keeps mtp_num_layers as set (the provider's default is 0). megatron-core's
    HybridModel (models/hybrid/hybrid_model.py:199-226) builds the MTP block only where the pattern has depths
    and mtp_num_layers is not None; MultiTokenPredictionBlock builds one layer with mtp_use_repeated_layer, else
    one per "/" part, and runs mtp_num_layers of them (transformer/multi_token_prediction.py:1699-1750, 1825-1826)."""
    _, *tails = written.split(_MTP_SEPARATOR)
    keys = ("model.mtp_hybrid_override_pattern", "model.mtp_num_layers", "model.mtp_use_repeated_layer")
    values = [r.lookup(k) for k in keys]
    for value in values:
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[value.key] = f"{reason} (the memory model would need the hybrid model's MTP depths)"
            return {}, ""
    override, depths, repeated = values
    bridge = next((v for v in map(r.lookup, _HYBRID_KEYS) if v.state == "known"), None)
    bridge = bridge is not None and (bridge.assignment is None or bridge.assignment.source != Source.MLM)
    n = depths.value if depths.state == "known" else (0 if bridge else None)  # HybridModelProvider: 0
    if not (n is None or isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        return {}, f"mtp_num_layers={n!r} in a hybrid model (not a number of depths)"
    repeated = repeated.state == "known" and bool(repeated.value)
    if override.state == "known" and isinstance(override.value, str) and override.value:
        copies = max(1, n or 0) if repeated else (n or 0)
        if not copies:
            return {}, ""  # "<main>/" with nothing after: no depths
        pattern, built = override.value, copies
        n = copies if not repeated or n is None else n
    elif any(tails):
        if len(set(tails)) > 1:
            return {}, (f"MTP depth patterns {sorted(set(tails))} differ (megatron-core's parse_hybrid_pattern "
                        "requires every depth's to be the same)")
        pattern, built = tails[0], len(tails)
        if n is None:
            return {}, ""  # mtp_on_this_rank(mtp_num_layers=None) is False: no MTP block is built
    else:
        return {}, ""  # no depths in the pattern: HybridModel builds none, whatever mtp_num_layers says
    if not n:
        return {}, (f"a hybrid pattern with MTP depths ({pattern!r}) and mtp_num_layers=0 (HybridModel builds the "
                    "MTP block but asserts mtp_num_layers > 0 in its forward)")
    if not repeated and n != built:
        return {}, (f"mtp_num_layers={n} with {built} MTP depths in the hybrid pattern (MultiTokenPredictionBlock "
                    "builds one layer per depth and runs mtp_num_layers of them; not modelled)")
    bad = set(pattern) - (_HYBRID_SYMBOLS - {"|"})
    if bad:
        return {}, (f"MTP layer symbols {''.join(sorted(bad))!r} (only Mamba 'M', attention '*', MLP '-' and MoE "
                    "'E' layers are modelled; megatron-core refuses '|' there)")
    return dict(mtp_num_layers=n, mtp_repeated_layer=repeated, hybrid_mtp_pattern=pattern), ""


_HYBRID_SYMBOLS = frozenset("M*-E|")


# Megatron-LM's entry scripts for hybrid models; offlint's flag table does not read their --hybrid-*/--mamba-*
# flags, so without this the model would be read as a GPT model.
_MLM_HYBRID_SCRIPTS = re.compile(r"^pretrain_(mamba|hybrid)\.py\b")
_MAMBA_KEYS = ("model.mamba_num_heads", "model.mamba_head_dim", "model.mamba_num_groups", "model.mamba_state_dim",
               "model.hybrid_attention_ratio", "model.hybrid_mlp_ratio")


def hybrid_unread(r: Reader, unit_name: str) -> str:
    """Why a hybrid model offlint cannot see as one has no verdict ("" when there is no sign of one): a Megatron-LM
    hybrid launch, or Mamba sizes or hybrid ratios set without a layer pattern (HybridModelProvider then builds
    its layers from the ratios, or Mamba layers only)."""
    if _MLM_HYBRID_SCRIPTS.match(unit_name):
        return (f"a Megatron-LM hybrid model launch ({unit_name.split()[0]}: its --hybrid-* and --mamba-* flags "
                "are not read)")
    if any(v.is_unknown or (v.state == "known" and v.value) for v in map(r.lookup, _HYBRID_KEYS)):
        return ""  # a pattern (or an unknown one, recorded by read_hybrid)
    if any(r.lookup(k).state == "known" and r.lookup(k).value for k in _MAMBA_KEYS):
        return ("Mamba sizes or hybrid ratios without a hybrid layer pattern (layers from ratios, or Mamba "
                "layers only: not modelled)")
    return ""


def hybrid_unsupported(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                        fsdp: str | None) -> str:
    """Why a hybrid model has no verdict ("" when it is modelled, or not hybrid)."""
    pattern = m.hybrid_pattern
    if pattern is None:
        return ""
    mtp_why = _hybrid_mtp_unsupported(r, m, t, low)
    if mtp_why:
        return mtp_why
    if set(pattern) - _HYBRID_SYMBOLS:
        return (f"hybrid layer symbols {''.join(sorted(set(pattern) - _HYBRID_SYMBOLS))!r} (only Mamba 'M', "
                "attention '*', MLP '-' and MoE 'E' layers are modelled)")
    explicit = r.lookup("model.num_layers")
    if explicit.state == "known" and positive_int(explicit.value) and explicit.value != m.num_layers:
        return (f"num_layers={explicit.value} with a hybrid pattern of {m.num_layers} layers (Bridge's "
                "HybridModelProvider asserts they agree)")
    if m.mamba_num_heads % p.tp or m.mamba_num_groups % p.tp or m.mamba_num_heads % m.mamba_num_groups:
        return (f"{m.mamba_num_heads} Mamba heads in {m.mamba_num_groups} groups over TP{p.tp} (MambaMixer asserts "
                "that TP divides heads and groups, and groups divide heads)")
    if "E" in pattern and not m.num_moe_experts:
        return "a hybrid pattern with MoE layers ('E') but no num_moe_experts"
    if m.multi_latent_attention:  # latent MoE is modelled: an 'E' layer is megatron-core's MoELayer, as in GPT
        return "a hybrid Mamba model with multi-latent attention (not modelled)"
    width = 2 * m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads
    if low is not None and low.recipe == "nvfp4" and (
            width // p.tp % 16 or m.mamba_d_inner // p.tp % 16 or m.hidden_size % 16):
        return (f"NVFP4 with a Mamba in_proj {width // p.tp} and out_proj {m.mamba_d_inner // p.tp} wide per TP "
                f"rank and hidden {m.hidden_size}, not all multiples of 16 (Transformer Engine casts NVFP4 in "
                "16-element blocks along both dims, nvfp4_tensor.py is_quantizable; not modelled)")
    if low is not None and low.recipe != "nvfp4" and width % 16:
        return (f"FP8 with a Mamba in_proj {width} wide (MambaMixer asserts that FP8's in_proj width is a multiple "
                "of 16)")
    if t.peft:  # Megatron-FSDP is modelled (memory._fsdp_buffers: every hybrid layer is an FSDP unit)
        return "LoRA on a hybrid Mamba model (not modelled)"
    if t.cpu_offloading:
        return ("layer-level activation offloading (cpu_offloading) of a hybrid Mamba model (megatron-core's "
                "HybridStack, unlike TransformerBlock, opens no CPU-offload context: not modelled)")
    return _hybrid_offload_unsupported(r, m, t) or _hybrid_recompute_unsupported(r, m, t, low)


def cuda_graphs(r: Reader, needs: str) -> tuple[object, set[str]] | None:
    """The CUDA graph implementation and the module names its scope captures (the last dotted part of each
    `cuda_graph_modules` / `cuda_graph_scope` entry), or None when one of them is unknown: that is recorded as
    unknown with what the memory model would need to know (`needs`)."""
    looked = [r.lookup(k) for k in ("model.cuda_graph_impl", "model.cuda_graph_modules", "model.cuda_graph_scope")]
    for value in looked:
        if value.is_unknown:
            reason = value.value.reason if isinstance(value.value, Unknown) else "unknown"
            r.unknown[value.key] = f"{reason} (the memory model would need to know {needs})"
            return None
    impl = looked[0].value if looked[0].state in ("known", "default") else None
    names: set[str] = set()
    for value in looked[1:]:
        if value.state == "known" and value.value:
            items = value.value if isinstance(value.value, (list, tuple)) else str(value.value).split(",")
            names |= {str(item).rsplit(".", 1)[-1].strip() for item in items}
    return impl, names


def _hybrid_offload_unsupported(r: Reader, m: ModelShape, t: Training) -> str:
    """Fine-grained activation offloading in a hybrid model, modelled for the MoE experts' `expert_fc1` and
    `moe_act` (megatron-core 0.19.2 transformer/moe/experts.py:253-261, 792-805: the experts offload from the
    config alone, whatever layer holds them; HybridModel sets up the offload manager,
    models/hybrid/hybrid_model.py:351-371, 439-440). A MambaLayer offloads nothing (ssm/ has no offload hooks).
    The experts' delayed offload (`delay_offload_until_cuda_graph`) waits only for a commit made inside a
    Transformer Engine graph replay (pipeline_parallel/fine_grained_activation_offload.py:1228), so it is refused
    where graphs capture the experts; megatron-core asserts the op-fuser MoE off with these offloads
    (experts.py:286-289, 349-350)."""
    if not t.fine_grained_offloading:
        return ""
    other = sorted(set(t.offload_modules) - {"expert_fc1", "moe_act"})
    if other:
        return (f"fine-grained activation offloading of {', '.join(map(repr, other))} in a hybrid Mamba model (only "
                "the MoE experts' 'expert_fc1' and 'moe_act' are modelled there)")
    if not t.offload_modules or "E" not in (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or ""):
        return ""
    if r.get("model.use_transformer_engine_op_fuser", False):
        return ("fine-grained expert_fc1/moe_act offloading with use_transformer_engine_op_fuser (megatron-core's "
                "experts assert 'Fused GroupedMLP is not supported for this configuration': these offloads are only "
                "supported unfused)")
    graphs = cuda_graphs(r, "whether CUDA graphs capture the MoE experts, whose tensors fine-grained offloading "
                              "moves")
    if graphs is None:
        return ""
    impl, names = graphs
    if impl not in (None, "none", "") and (impl == "full_iteration" or not names or "moe" in names):
        return (f"fine-grained offloading of the MoE experts' tensors with the experts CUDA-graphed "
                f"(cuda_graph_impl={impl!r}; the offloads then run inside graph replays: not modelled)")
    return ""


def _hybrid_recompute_unsupported(r: Reader, m: ModelShape, t: Training, low: LowPrecision | None) -> str:
    """Selective recompute in a hybrid model is modelled per layer kind (activations.HYBRID_RECOMPUTE_DROPS) where
    megatron-core 2a75ac12 decides it from the configuration alone. Refused: what its TransformerConfig raises
    for, a recomputed module inside a CUDA-graphed part (the graph's static buffers then hold what it saves), and
    with local graphs `moe`, which MoELayer leaves to MoETransformerLayer's partial graphs (moe_layer.py). With the
    MoE router captured TransformerLayer keeps or drops the pre-MLP norm's recompute by the configuration:
    modelled (pre_mlp_norm_recomputed)."""
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if t.moe_layer_recompute:
        modules.add("moe")
    if low is not None and low.recipe == "delayed" and modules & {"layernorm", "moe_act"}:
        return ("selective recompute of 'layernorm' or 'moe_act' with FP8 delayed scaling (megatron-core's "
                "TransformerConfig raises: 'Delayed scaling does not support moe_act and layernorm recompute')")
    acting = modules - {"core_attn"}  # recomputing flash attention drops nothing
    if not acting:
        return ""
    graphs = cuda_graphs(r, "which layer parts CUDA graphs capture, which decides what selective recompute drops "
                              "in a hybrid model")
    if graphs is None:
        return ""
    impl, names = graphs
    moe = "E" in (m.hybrid_pattern or "")
    if impl not in (None, "none", ""):
        # transformer_config.py: "full_cudagraph means either full_iteration impl or an empty per-layer scope
        # (which captures the whole layer)"
        whole = impl == "full_iteration" or not names
        graphed = {"mlp": {"mlp"}, "moe": {"moe"}, "moe_act": {"moe"}, "shared_experts": {"moe"}}
        inside = sorted(mod for mod in acting if whole or names & graphed.get(mod, set()))
        if inside:
            return (f"selective recompute of {', '.join(map(repr, inside))} inside CUDA-graphed layer parts of a "
                    f"hybrid model (cuda_graph_impl={impl!r}; not modelled)")
    if moe and "moe" in modules and impl == "transformer_engine" and "moe_router" in names:
        return ("selective recompute of 'moe' with the MoE router CUDA-graphed by Transformer Engine (megatron-core's "
                "TransformerConfig asserts: 'moe recompute is not supported with moe_router CUDA graph')")
    if moe and "moe" in modules and impl == "local":
        return ("selective recompute of 'moe' in a hybrid model with megatron-core's local CUDA graphs (MoELayer "
                "leaves it to MoETransformerLayer's partial graphs; not modelled)")
    # 'layernorm' with the MoE router captured: megatron-core decides from the configuration whether the pre-MLP
    # norm is recomputed (pre_mlp_norm_recomputed, read_inputs)
    return ""


def pre_mlp_norm_recomputed(r: Reader, m: ModelShape, t: Training) -> bool:
    """Whether a hybrid model's MoE layer recomputes its pre-MLP norm under selective 'layernorm' recompute
    (megatron-core 0.20.0 transformer/transformer_layer.py:481-527, the same at Bridge's pin 2a75ac12 :456-500,
    can_recompute_pre_mlp_layernorm_for_cudagraph): always, unless CUDA graphs (not megatron-core's local ones)
    capture the MoE router (:482-488); then not with an overlapped shared expert (:489-503: its input, the norm's
    output, is outside the graph), and only where the graphs also capture `moe_preprocess` with the alltoall
    dispatcher or latent MoE (:504-513); otherwise the norm's output is a graph output in a static buffer (:510-512,
    :521) and the layer keeps it (activations.HYBRID_RECOMPUTE_DROPS 'E' then drops nothing for 'layernorm')."""
    modules = set(t.recompute_modules) if t.recompute_granularity == "selective" else set()
    if "layernorm" not in modules or "E" not in (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or ""):
        return True
    graphs = cuda_graphs(r, "which layer parts CUDA graphs capture, which decides what selective recompute drops "
                              "in a hybrid model")
    if graphs is None:
        return True
    impl, names = graphs
    if impl in (None, "none", "", "local") or "moe_router" not in names:
        return True
    if m.moe_shared_expert_intermediate_size and r.get("model.moe_shared_expert_overlap", False) is True:
        return False
    return "moe_preprocess" in names and (
        r.get("model.moe_token_dispatcher_type", "allgather") == "alltoall" or bool(m.moe_latent_size))


def _hybrid_mtp_unsupported(r: Reader, m: ModelShape, t: Training, low: LowPrecision | None) -> str:
    """Why a hybrid model's MTP depths have no verdict ("" when modelled, or there are none)."""
    written = next(v.value for v in map(r.lookup, _HYBRID_KEYS)
                   if v.state == "known" and isinstance(v.value, str) and v.value)
    why = _hybrid_mtp(r, written)[1]
    if why or not m.hybrid_mtp_pattern:
        return why
    if r.get("model.moe_paged_stash", False):
        return "moe_paged_stash with hybrid MTP depths (the MTP MoE layers' stashed tensors are not modelled)"
    if t.recompute_granularity == "full" and t.recompute_method != "block" and (t.recompute_num_layers or 1) != 1:
        return (f"full uniform recompute of {t.recompute_num_layers} layers with MTP depths (megatron-core's "
                "MultiTokenPredictionLayer asserts recompute_num_layers == 1)")
    return ""


_GDN_VARIANTS = ("gdn", "gated_delta_net")  # megatron-core normalizes the old name to "gdn"
_VARIANT_KEY = "model.experimental_attention_variant"


def read_gdn(r: Reader) -> dict:
    """A gated-delta-net model's layer mix and GDN sizes ({} without GDN; `gdn_unsupported` says why one has no
    verdict). Bridge's Qwen3NextBridge sets the variant, `linear_attention_freq` (the Hugging Face config's
    full_attention_interval) and the linear_* sizes; unset sizes take megatron-core's TransformerConfig defaults
    (conv kernel 4, head dims 128, 16 key and 32 value heads)."""
    variant = r.lookup(_VARIANT_KEY)
    if variant.state != "known" or variant.value not in _GDN_VARIANTS:
        return {}
    freq = r.lookup("model.linear_attention_freq")
    value = freq.value
    if isinstance(value, str) and value.strip().isdigit():  # Megatron-LM's --linear-attention-freq (la_freq_type)
        value = int(value)
    if freq.state != "known" or not (positive_int(value) or (
            isinstance(value, (list, tuple)) and all(v in (0, 1) for v in value))):
        return {}
    return dict(linear_attention_freq=value if isinstance(value, int) else tuple(value),
                gdn_key_heads=r.optional_int("model.linear_num_key_heads") or 16,
                gdn_value_heads=r.optional_int("model.linear_num_value_heads") or 32,
                gdn_key_head_dim=r.optional_int("model.linear_key_head_dim") or 128,
                gdn_value_head_dim=r.optional_int("model.linear_value_head_dim") or 128,
                gdn_conv_kernel=r.optional_int("model.linear_conv_kernel_dim") or 4)


def gdn_unsupported(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                     fsdp: str | None) -> str:
    """Why a model with an experimental attention variant, or with the softmax attention's output gate (Qwen3-Next
    has both), has no verdict ("" when it is modelled, or has neither)."""
    variant = r.lookup(_VARIANT_KEY)
    if variant.is_unknown:
        reason = variant.value.reason if isinstance(variant.value, Unknown) else "unknown"
        r.unknown[_VARIANT_KEY] = f"{reason} (the memory model would need to know the attention variant)"
        return ""
    why = _variant_unsupported(r, m, p, t, low, fsdp, variant.value) if variant.state == "known" else ""
    if not why and m.attention_output_gate and (m.multi_latent_attention or (low is not None and low.attention)
                                                or t.fine_grained_offloading):
        return ("an attention output gate with multi-latent attention, FP8 attention or fine-grained activation "
                "offloading (not modelled)")
    return why


def _variant_unsupported(r: Reader, m: ModelShape, p: Parallelism, t: Training, low: LowPrecision | None,
                         fsdp: str | None, variant: object) -> str:
    """Only megatron-core's GatedDeltaNet in a GPT model is modelled, with what megatron-core 2a75ac12 (Bridge
    067f987's) accepts and offlint has read (docs/estimate.md, "Gated delta net")."""
    if variant in (None, "", False):
        return ""
    if variant not in _GDN_VARIANTS:
        return (f"the experimental attention variant {variant!r} (DSA and GatedDeltaNet2 are not modelled; "
                "gated delta net 'gdn' is)")
    freq = r.lookup("model.linear_attention_freq")
    if freq.is_unknown:
        reason = freq.value.reason if isinstance(freq.value, Unknown) else "unknown"
        r.unknown[freq.key] = f"{reason} (the memory model would need the gated-delta-net layer pattern)"
        return ""
    if m.linear_attention_freq is None:
        return (f"gated delta net with linear_attention_freq={freq.value!r} (offlint reads a positive int or a 0/1 "
                "list per layer; megatron-core asserts it is set)")
    if isinstance(m.linear_attention_freq, tuple) and len(m.linear_attention_freq) != m.num_layers:
        return (f"a linear_attention_freq list of {len(m.linear_attention_freq)} layers for {m.num_layers} layers "
                "(megatron-core asserts they agree)")
    if m.hybrid_pattern is not None or m.multi_latent_attention:
        return "gated delta net in a hybrid Mamba model or with multi-latent attention (not modelled)"
    if m.mtp_num_layers and m.is_gdn_layer(m.num_layers - 1):
        return ("multi-token prediction after a gated-delta-net last layer (megatron-core asserts that the MTP "
                "layer's attention has a causal mask type)")
    keys, values = m.gdn_key_heads, m.gdn_value_heads
    if values % keys or keys % (p.tp * p.cp) or values % (p.tp * p.cp):
        return (f"{keys} key and {values} value gated-delta-net heads over TP{p.tp} x CP{p.cp} (megatron-core "
                "asserts that TP x CP divides both and key heads divide value heads)")
    if r.get("model.deterministic_mode", False):
        return ("gated delta net in deterministic mode (megatron-core then runs its torch-native delta rule, whose "
                "saved tensors are not modelled)")
    if low is not None and low.recipe == "nvfp4":
        return "NVFP4 training of a gated-delta-net model (not modelled)"
    in_proj = 2 * keys * m.gdn_key_head_dim + 2 * values * m.gdn_value_head_dim + 2 * values
    align = 32 if low is not None and low.recipe == "mxfp8" else 16  # megatron-core's get_fp8_align_size
    if low is not None and in_proj % align:
        return (f"FP8 with a gated-delta-net in_proj {in_proj} wide (megatron-core asserts that FP8's in_proj width "
                f"is a multiple of {align})")
    if fsdp or t.peft:
        return "Megatron-FSDP or LoRA on a gated-delta-net model (not modelled)"
    if t.cpu_offloading or t.fine_grained_offloading:
        return "activation offloading of a gated-delta-net model (not modelled)"
    return ""
