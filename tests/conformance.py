"""Conformance support: random offload configurations, rendered in every source form, judged by offlint and by
the real megatron-core. Used by test_conformance.py (property-based) and by the broken-rule test."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

from offlint import keys
from offlint.engine import check_unit
from offlint.resolve import resolve
from offlint.rules import Rule, load_rules
from offlint.sources import read_source
from offlint.validate import COMPARED_STAGES, MegatronCore, read_answer, rules_for_error
from offlint.versions import Version, parse_version

FORMS = ("python", "yaml", "hydra", "mlm")


def has(key: str, version: Version) -> bool:
    return keys.key_exists(key, version)


@st.composite
def configs(draw, version: Version) -> dict:
    """A configuration over the keys of rules.md, biased towards the boundaries megatron-core checks."""
    c: dict = {}
    layers = draw(st.sampled_from([4, 8]))
    c["model.num_layers"] = layers
    c["model.pipeline_model_parallel_size"] = draw(st.sampled_from([1, 1, 2, 4, 8]))
    c["model.cpu_offloading"] = draw(st.booleans())
    c["model.cpu_offloading_num_layers"] = draw(st.sampled_from([-1, 0, 1, layers - 1, layers, layers + 1]))
    c["model.cpu_offloading_activations"] = draw(st.booleans())
    c["model.cpu_offloading_weights"] = draw(st.booleans())
    granularity = draw(st.sampled_from([None, None, "full", "selective"]))
    c["model.recompute_granularity"] = granularity
    c["model.recompute_method"] = draw(st.sampled_from(["uniform", "block"])) if granularity == "full" else None
    c["model.recompute_num_layers"] = 1 if granularity == "full" else None
    experts = draw(st.sampled_from([None, None, 4]))
    c["model.num_moe_experts"] = experts
    modules = ["core_attn", "layernorm", "mlp"] + (["moe", "moe_act"] if experts else [])
    c["model.recompute_modules"] = draw(st.lists(st.sampled_from(modules), unique=True, min_size=1, max_size=3)) \
        if granularity == "selective" else None
    c["model.moe_layer_recompute"] = draw(st.booleans()) if experts and granularity != "full" else False
    impls = ["none", "none", "local", "transformer_engine"] + (["full_iteration"] if has(
        "model.cuda_graph_modules", version) else [])
    impl = draw(st.sampled_from(impls))
    c["model.cuda_graph_impl"] = impl  # full recompute beside per-layer graphs: CG-8, OFL225
    legacy = draw(st.sampled_from([None, None, "enable_cuda_graph", "external_cuda_graph"])) if impl == "none" \
        else None
    if impl != "none" or legacy:
        # CG-9: graphed recompute refuses dropout (OFL226); graph_recompute_configs draws it, kept out here.
        c["model.attention_dropout"] = c["model.hidden_dropout"] = 0.0
    c["model.enable_cuda_graph"] = legacy == "enable_cuda_graph"
    c["model.external_cuda_graph"] = legacy == "external_cuda_graph"
    c["model.fine_grained_activation_offloading"] = draw(st.booleans())
    names = sorted(keys.allowed(keys.OFFLOAD_MODULES, version)) + ["mlp"]
    c["model.offload_modules"] = draw(st.one_of(st.none(), st.lists(st.sampled_from(names), unique=True,
                                                                      max_size=3)))
    c["model.min_offloaded_tensor_size"] = draw(st.sampled_from([-5, 0, 1024]))
    if has("model.activation_offload_fraction", version):
        c["model.activation_offload_fraction"] = draw(st.sampled_from([-0.5, 0.0, 0.5, 1.0, 1.5]))
        c["model.delta_offload_bytes_across_pp_ranks"] = draw(st.sampled_from([-1, 0, 100]))
        c["model.use_transformer_engine_op_fuser"] = draw(st.booleans())
    c["model.transformer_impl"] = draw(st.sampled_from(["transformer_engine", "local"]))
    bf16 = draw(st.booleans())
    c["model.bf16"] = c["optimizer.bf16"] = bf16
    if experts:  # MoE expert-parallel communication overlap and what megatron-core asserts beside it (OFL224)
        c["model.overlap_moe_expert_parallel_comm"] = draw(st.booleans())
        c["model.expert_model_parallel_size"] = draw(st.sampled_from([1, 2, 2]))
        c["model.moe_token_dispatcher_type"] = draw(st.sampled_from(["allgather", "alltoall", "alltoall", "flex"]))
        c["model.moe_shared_expert_overlap"] = draw(st.sampled_from([False, False, True]))
        c["model.mtp_num_layers"] = draw(st.sampled_from([None, None, 0, 1, 2]))
        c["model.delay_wgrad_compute"] = draw(st.sampled_from([False, False, True]))
    c["optimizer.optimizer"] = draw(st.sampled_from(["adam", "adam", "sgd"]))
    c["optimizer.optimizer_cpu_offload"] = draw(st.booleans())
    c["optimizer.optimizer_offload_fraction"] = draw(st.sampled_from([-0.5, 0.0, 0.25, 1.0, 1.5]))
    c["optimizer.overlap_cpu_optimizer_d2h_h2d"] = draw(st.booleans())
    c["optimizer.use_torch_optimizer_for_cpu_offload"] = draw(st.booleans())
    c["optimizer.decoupled_weight_decay"] = draw(st.booleans())
    c["optimizer.use_precision_aware_optimizer"] = draw(st.booleans())
    distributed = draw(st.booleans())
    c["optimizer.use_distributed_optimizer"] = c["ddp.use_distributed_optimizer"] = distributed
    if experts and has("model.moe_paged_stash", version):  # MoE paged stashing (0.18 on): AO-6 and FG-14 (OFL106)
        c["model.moe_paged_stash"] = paged = draw(st.sampled_from([False, True]))
        if paged:  # what the paged-stash block's own checks and the capacity factor's need (a flex dispatcher)
            c["model.moe_expert_rank_capacity_factor"] = 1.0
            c["model.moe_token_dispatcher_type"] = "flex"
            c["model.moe_flex_dispatcher_backend"] = "ncclep"
    return c


@st.composite
def ep_overlap_configs(draw, version: Version) -> dict:
    """A MoE configuration with expert-parallel communication overlap mostly on and no offloading, over what
    megatron-core asserts beside the overlap (OFL224): pipeline and virtual stages, EP size, dispatcher,
    recompute, precision, shared-expert overlap, MTP depth, CUDA graphs, delayed weight gradients. (The offload
    keys `configs` draws are checked before the overlap block, so there they rarely reach it.)"""
    c = draw(configs(version))
    c.update({"model.cpu_offloading": False, "model.cpu_offloading_num_layers": 0,
              "model.cpu_offloading_activations": True, "model.cpu_offloading_weights": False,
              "model.fine_grained_activation_offloading": False, "model.offload_modules": None,
              "model.moe_layer_recompute": False, "model.enable_cuda_graph": False, "model.external_cuda_graph": False,
              "optimizer.optimizer_cpu_offload": False, "optimizer.use_precision_aware_optimizer": False,
              "model.num_moe_experts": 4, "model.moe_grouped_gemm": True})
    layers = c["model.num_layers"] = 8
    pp = c["model.pipeline_model_parallel_size"] = draw(st.sampled_from([1, 2, 2]))
    c["model.virtual_pipeline_model_parallel_size"] = draw(st.sampled_from([None, None, 2])) if pp > 1 else None
    if pp > 1 and c["model.virtual_pipeline_model_parallel_size"] is None:  # a layout gives the virtual size
        c["model.pipeline_model_parallel_layout"] = draw(st.sampled_from(
            [None, "Et*4|t*4L", "Et*2|t*2|t*2|t*2L", "Et*2|t*2|t*2|t*2L"]))
    granularity = draw(st.sampled_from([None, "selective", "selective", "full"]))
    c["model.recompute_granularity"] = granularity
    c["model.recompute_method"] = draw(st.sampled_from([None, "uniform"])) if granularity == "full" else None
    c["model.recompute_num_layers"] = 1 if c["model.recompute_method"] else None
    c["model.recompute_modules"] = draw(st.lists(st.sampled_from(["core_attn", "moe", "moe_act", "layernorm"]),
                                                 unique=True, min_size=1, max_size=2)) \
        if granularity == "selective" else None
    bf16 = draw(st.sampled_from([True, True, True, False]))
    c["model.bf16"] = c["optimizer.bf16"] = bf16
    impl = draw(st.sampled_from(["none", "none", "local"]))
    c["model.cuda_graph_impl"] = impl
    c["model.attention_dropout"] = c["model.hidden_dropout"] = 0.0
    c["model.overlap_moe_expert_parallel_comm"] = draw(st.sampled_from([True, True, True, False]))
    c["model.expert_model_parallel_size"] = draw(st.sampled_from([1, 2, 2, 2, 2]))
    c["model.moe_token_dispatcher_type"] = draw(st.sampled_from(["allgather", "alltoall", "alltoall", "alltoall"]))
    c["model.moe_shared_expert_overlap"] = draw(st.sampled_from([False, False, False, False, True]))
    c["model.mtp_num_layers"] = draw(st.sampled_from([None, None, None, 0, 1, 2]))
    c["model.delay_wgrad_compute"] = draw(st.sampled_from([False, False, True]))
    assert layers % pp == 0
    return c


def _draw_graphs(draw, c: dict, version: Version, impls: list[str]) -> tuple[str, bool, bool]:
    """A CUDA-graph implementation drawn from `impls` (and "full_iteration" where the version has it), written into
    `c` as it is or, a quarter of the time, as its deprecated switch: (the implementation, whether as the switch,
    whether the version has cuda_graph_modules)."""
    modern = has("model.cuda_graph_modules", version)
    impl = draw(st.sampled_from(impls + ["full_iteration"] * modern))
    legacy = draw(st.sampled_from([None, None, None, "legacy"])) is not None
    c["model.cuda_graph_impl"] = "none" if legacy else impl
    c["model.enable_cuda_graph"] = legacy and impl == "local"
    c["model.external_cuda_graph"] = legacy and impl != "local"
    return impl, legacy, modern


@st.composite
def graph_recompute_configs(draw, version: Version) -> dict:
    """Selective recompute beside CUDA graphs, with no offloading: the modules recomputed and graphed, dropout and
    MoE input jitter, over what TransformerConfig's graph block asserts about them (OFL226, CG-9) and
    full recompute beside them (OFL225). Graphed module lists stay within what the block accepts for the model
    (the MoE router graphed on a MoE model only, never beside a graphed MoE), so most configurations compare."""
    c = draw(configs(version))
    experts = draw(st.sampled_from([None, 4]))
    c.update({"model.cpu_offloading": False, "model.cpu_offloading_num_layers": 0,
              "model.cpu_offloading_activations": True, "model.cpu_offloading_weights": False,
              "model.fine_grained_activation_offloading": False, "model.offload_modules": None,
              "model.moe_layer_recompute": False, "optimizer.optimizer_cpu_offload": False,
              "model.num_moe_experts": experts, "model.pipeline_model_parallel_size": 1})
    for key in ("model.overlap_moe_expert_parallel_comm", "model.expert_model_parallel_size",
                "model.moe_token_dispatcher_type", "model.moe_shared_expert_overlap", "model.mtp_num_layers",
                "model.delay_wgrad_compute", "model.moe_input_jitter_eps"):
        c.pop(key, None)
    granularity = draw(st.sampled_from(["selective", "selective", "selective", "full"]))
    c["model.recompute_granularity"] = granularity
    c["model.recompute_method"] = "uniform" if granularity == "full" else None
    c["model.recompute_num_layers"] = 1 if granularity == "full" else None
    recomputable = ["core_attn", "mlp", "layernorm"] if not experts else ["core_attn", "moe", "moe_act", "layernorm"]
    named = granularity == "selective" and draw(st.sampled_from([True, True, True, False]))  # (else unset:
    c["model.recompute_modules"] = draw(st.lists(st.sampled_from(recomputable), unique=True, min_size=1,  # ["core_
                                                 max_size=2)) if named else None  # attn"] in megatron-core)
    impl, legacy, modern = _draw_graphs(draw, c, version, ["local", "transformer_engine", "transformer_engine"])
    graphable = [["attn"], ["mlp"], ["attn", "mlp"]] if not experts else \
        [["attn"], ["moe_router"], ["attn", "moe_router"], ["moe_router", "moe_preprocess"]]
    graphed = [] if impl == "full_iteration" and not legacy else draw(st.sampled_from([[], *graphable]))
    c["model.cuda_graph_modules" if modern else "model.cuda_graph_scope"] = graphed
    c["model.attention_dropout"] = draw(st.sampled_from([0.0, 0.0, 0.1]))  # (checked first: rarer, so that the
    c["model.hidden_dropout"] = draw(st.sampled_from([0.0, 0.1]))  # hidden-dropout and jitter asserts are reached)
    if experts:
        c["model.moe_input_jitter_eps"] = draw(st.sampled_from([None, None, 0.01]))
        c["model.moe_token_dispatcher_type"] = "alltoall"
    return c


@st.composite
def fine_grained_graph_configs(draw, version: Version) -> dict:
    """Fine-grained activation offloading beside CUDA graphs, with no other offloading or recompute, over what
    TransformerConfig's graph block asserts about them from 0.18 (OFL121, CG-11 to CG-16): the implementation, the
    modules offloaded and graphed, warm-up steps, the in-flight limit of a full-iteration graph. Offloaded lists
    stay within what the fine-grained block itself accepts, so most configurations reach the graph block."""
    c = draw(configs(version))
    experts = draw(st.sampled_from([None, 4, 4]))
    c.update({"model.cpu_offloading": False, "model.cpu_offloading_num_layers": 0,
              "model.cpu_offloading_activations": True, "model.cpu_offloading_weights": False,
              "model.fine_grained_activation_offloading": draw(st.sampled_from([True, True, True, False])),
              "model.recompute_granularity": None, "model.recompute_method": None, "model.recompute_num_layers": None,
              "model.recompute_modules": None, "model.moe_layer_recompute": False,
              "model.num_moe_experts": experts, "model.pipeline_model_parallel_size": 1,
              "model.transformer_impl": "transformer_engine", "model.min_offloaded_tensor_size": 1024,
              "model.attention_dropout": 0.0, "model.hidden_dropout": 0.0,
              "optimizer.optimizer_cpu_offload": False, "optimizer.use_precision_aware_optimizer": False})
    for key in ("model.overlap_moe_expert_parallel_comm", "model.expert_model_parallel_size",
                "model.moe_token_dispatcher_type", "model.moe_shared_expert_overlap", "model.mtp_num_layers",
                "model.delay_wgrad_compute", "model.moe_paged_stash", "model.moe_expert_rank_capacity_factor",
                "model.moe_flex_dispatcher_backend"):
        c.pop(key, None)
    if experts:
        c["model.moe_token_dispatcher_type"] = "alltoall"
    offloadable = [["core_attn"], ["core_attn", "attn_proj"], ["attn_norm", "mlp_norm"]] + (
        [["expert_fc1"], ["moe_act"], ["expert_fc1", "moe_act"], ["expert_fc1", "core_attn"]] if experts else [])
    c["model.offload_modules"] = draw(st.sampled_from(offloadable))
    if "model.activation_offload_fraction" in c:
        c["model.activation_offload_fraction"], c["model.delta_offload_bytes_across_pp_ranks"] = 1.0, 0
        c["model.use_transformer_engine_op_fuser"] = False
    impl, legacy, modern = _draw_graphs(draw, c, version, ["local", "local", "transformer_engine"])
    graphable = [["attn"], ["mlp"]] if not experts else [["attn"], ["moe_router"], ["attn", "moe_router"], ["moe"],
                                                          ["attn", "moe"], ["moe_router", "moe_preprocess"]]
    graphed = [] if impl == "full_iteration" and not legacy else draw(st.sampled_from([[], *graphable]))
    c["model.cuda_graph_modules" if modern else "model.cuda_graph_scope"] = graphed
    if "moe" in graphed:  # (a graphed MoE must drop and pad tokens: "moe cuda graph is only supported with ...")
        c["model.moe_expert_capacity_factor"], c["model.moe_pad_expert_input_to_capacity"] = 1.0, True
    c["model.cuda_graph_warmup_steps"] = draw(st.sampled_from([3, 3, 1, 0]))
    if has("model.fine_grained_offloading_max_inflight_offloads", version):
        c["model.fine_grained_offloading_max_inflight_offloads"] = draw(st.sampled_from([None, 0, 1, 1, -1]))
    return c


@st.composite
def optimizer_dtype_configs(draw, version: Version) -> dict:
    """The optimizer's dtypes with the precision-aware optimizer on or off (OFL122, OC-8; beside it OFL116's OC-2/OC-3
    and OFL208). Adam and the distributed optimizer mostly, so that most configurations reach the dtype checks; the
    precision-aware optimizer is judged on this CPU machine only with optimizer offloading (OC-5 skips the probe of
    Transformer Engine's FusedAdam)."""
    c = draw(configs(version))
    c.update({"model.cpu_offloading": False, "model.cpu_offloading_num_layers": 0,  # (a model megatron-core takes)
              "model.cpu_offloading_activations": True, "model.cpu_offloading_weights": False,
              "model.fine_grained_activation_offloading": False, "model.offload_modules": None,
              "model.min_offloaded_tensor_size": 1024, "model.recompute_granularity": None,
              "model.recompute_method": None, "model.recompute_num_layers": None, "model.recompute_modules": None,
              "model.moe_layer_recompute": False, "model.cuda_graph_impl": "none", "model.enable_cuda_graph": False,
              "model.external_cuda_graph": False, "model.pipeline_model_parallel_size": 1,
              "model.num_moe_experts": None})
    for key in (*_EP_OVERLAP_KEYS, "model.moe_paged_stash", "model.moe_expert_rank_capacity_factor",
                "model.moe_flex_dispatcher_backend"):
        c.pop(key, None)
    c["optimizer.optimizer"] = draw(st.sampled_from(["adam", "adam", "adam", "sgd"]))
    distributed = draw(st.sampled_from([True, True, True, False]))
    c["optimizer.use_distributed_optimizer"] = c["ddp.use_distributed_optimizer"] = distributed
    aware = c["optimizer.use_precision_aware_optimizer"] = draw(st.booleans())
    c["optimizer.optimizer_cpu_offload"] = aware or draw(st.booleans())
    c["optimizer.decoupled_weight_decay"] = True
    for key, lower in (("optimizer.main_grads_dtype", ["torch.bfloat16"]),
                       ("optimizer.main_params_dtype", ["torch.float16"]),
                       ("optimizer.exp_avg_dtype", ["torch.bfloat16", "torch.float16"]),
                       ("optimizer.exp_avg_sq_dtype", ["torch.bfloat16", "torch.float16"])):
        c[key] = draw(st.sampled_from(["torch.float32"] * 3 + lower))
    return c


# ---- rendering -------------------------------------------------------------------------------------------


def _py(value) -> str:
    if isinstance(value, str) and value.startswith("torch."):
        return value
    return repr(value)


_EP_OVERLAP_KEYS = ("model.overlap_moe_expert_parallel_comm", "model.expert_model_parallel_size",
                    "model.moe_token_dispatcher_type", "model.moe_shared_expert_overlap", "model.mtp_num_layers",
                    "model.delay_wgrad_compute")


def render_python(config: dict) -> str:
    lines = ["def recipe():",
             "    cfg = ConfigContainer(model=TransformerConfig(), optimizer=OptimizerConfig(),",
             "                          ddp=DistributedDataParallelConfig())"]
    lines += [f"    cfg.{key} = {_py(value)}" for key, value in config.items()]
    lines.append("    return cfg")
    return "\n".join(lines) + "\n"


def _yaml_scalar(value) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def render_yaml(config: dict) -> str:
    sections: dict[str, list[str]] = {}
    top = [f"{key}: {_yaml_scalar(value)}\n" for key, value in config.items() if "." not in key]
    for key, value in config.items():
        if "." not in key:
            continue
        section, name = key.split(".", 1)
        sections.setdefault(section, []).append(f"  {name}: {_yaml_scalar(value)}")
    return "".join(top) + "".join(f"{section}:\n" + "\n".join(lines) + "\n" for section, lines in sections.items())


def _hydra_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(_hydra_item(v) for v in value) + "]"
    return _hydra_item(value)


def _hydra_item(value) -> str:
    """A string Hydra's grammar does not take unquoted (a space, `|`, `(`, `*`: a pipeline layout) is quoted."""
    text = str(value)
    return f"'{text}'" if isinstance(value, str) and re.search(r"[^\w.\-/:+@]", text) else text


def render_hydra(config: dict) -> str:
    tokens = [f"{key}={_hydra_value(value)}" for key, value in config.items()]
    tokens = [f'"{token}"' if re.search(r"[^\w.=\-/,:\[\]+@]", token) else token for token in tokens]  # a word
    return "python scripts/training/run_recipe.py --recipe some_recipe_config \\\n  " + " \\\n  ".join(tokens) + "\n"


def mlm_variant(config: dict) -> dict:
    """The nearest configuration Megatron-LM's flags can express (CLI-6 and the flags that exist)."""
    c = dict(config)
    c["model.cpu_offloading"] = c["model.cpu_offloading_num_layers"] > 0
    c["model.cpu_offloading_activations"], c["model.cpu_offloading_weights"] = True, False
    if c["model.num_moe_experts"]:
        c["model.num_moe_experts"], c["model.moe_layer_recompute"] = None, False
        for key in _EP_OVERLAP_KEYS:
            c.pop(key, None)
        if c["model.recompute_modules"]:
            c["model.recompute_modules"] = [m for m in c["model.recompute_modules"] if m not in ("moe", "moe_act")] \
                or ["core_attn"]
    c["optimizer.decoupled_weight_decay"] = True
    c["ddp.use_distributed_optimizer"] = c["optimizer.use_distributed_optimizer"]
    if c["model.offload_modules"] is None:
        c["model.offload_modules"] = []
    return c


def render_mlm(config: dict, version: Version) -> str | None:
    """Megatron-LM flags for the configuration, or None when the CLI cannot express it exactly."""
    c = config
    if c["model.cpu_offloading"] != (c["model.cpu_offloading_num_layers"] > 0):
        return None  # CLI-6: only --cpu-offloading-num-layers N>0 turns offloading on
    if not c["model.cpu_offloading_activations"] or c["model.cpu_offloading_weights"]:
        return None  # not CLI flags
    if c["model.num_moe_experts"] or not c["optimizer.decoupled_weight_decay"]:
        return None
    if c["optimizer.use_distributed_optimizer"] != c["ddp.use_distributed_optimizer"]:
        return None
    flags = ["--num-layers", str(c["model.num_layers"]),
             "--pipeline-model-parallel-size", str(c["model.pipeline_model_parallel_size"]),
             "--cpu-offloading-num-layers", str(c["model.cpu_offloading_num_layers"]),
             "--cuda-graph-impl", c["model.cuda_graph_impl"], "--transformer-impl", c["model.transformer_impl"],
             "--min-offloaded-tensor-size", str(c["model.min_offloaded_tensor_size"]),
             "--optimizer", c["optimizer.optimizer"],
             "--optimizer-offload-fraction", str(c["optimizer.optimizer_offload_fraction"])]
    if c["model.recompute_granularity"]:
        flags += ["--recompute-granularity", c["model.recompute_granularity"]]
    if c["model.recompute_method"]:
        flags += ["--recompute-method", c["model.recompute_method"],
                  "--recompute-num-layers", str(c["model.recompute_num_layers"])]
    if c["model.recompute_modules"]:
        flags += ["--recompute-modules", *c["model.recompute_modules"]]
    if c["model.offload_modules"]:
        flags += ["--offload-modules", *c["model.offload_modules"]]
    elif c["model.offload_modules"] is None:
        return None  # the CLI default is [], it cannot say None
    for key in ("model.activation_offload_fraction", "model.delta_offload_bytes_across_pp_ranks",
                "model.cuda_graph_warmup_steps", "model.fine_grained_offloading_max_inflight_offloads"):
        if c.get(key) is not None:
            flags += [keys.KEYS[key].flag, str(c[key])]
    for key, flag in (("model.attention_dropout", "--attention-dropout"), ("model.hidden_dropout", "--hidden-dropout")):
        if key in c:
            flags += [flag, str(c[key])]
    for key in ("model.cuda_graph_scope", "model.cuda_graph_modules"):
        if c.get(key):
            flags += [keys.KEYS[key].flag, *c[key]]
    for key in ("optimizer.main_grads_dtype", "optimizer.main_params_dtype", "optimizer.exp_avg_dtype",
                "optimizer.exp_avg_sq_dtype"):
        if key in c:  # (the CLI's spellings, which its map_dtype turns into torch dtypes)
            flags += [keys.KEYS[key].flag, _CLI_DTYPES[c[key]]]
    switches = {"model.moe_layer_recompute": "--moe-layer-recompute", "model.enable_cuda_graph": "--enable-cuda-graph",
                "model.external_cuda_graph": "--external-cuda-graph",
                "model.fine_grained_activation_offloading": "--fine-grained-activation-offloading",
                "model.use_transformer_engine_op_fuser": "--use-transformer-engine-op-fuser",
                "model.bf16": "--bf16", "optimizer.optimizer_cpu_offload": "--optimizer-cpu-offload",
                "optimizer.overlap_cpu_optimizer_d2h_h2d": "--overlap-cpu-optimizer-d2h-h2d",
                "optimizer.use_torch_optimizer_for_cpu_offload": "--use-torch-optimizer-for-cpu-offload",
                "optimizer.use_precision_aware_optimizer": "--use-precision-aware-optimizer",
                "optimizer.use_distributed_optimizer": "--use-distributed-optimizer"}
    flags += [flag for key, flag in switches.items() if c.get(key)]
    return "torchrun --nproc-per-node 8 pretrain_gpt.py " + " ".join(flags) + "\n"


_CLI_DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


RENDER = {"python": ("recipe.py", "python", render_python), "yaml": ("o.yaml", "yaml", render_yaml),
          "hydra": ("launch.sh", "shell", render_hydra)}


# ---- verdicts --------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    form: str
    fired: set[str]  # codes of compared-stage checks that fired
    values: dict = field(default_factory=dict)  # resolved values of the configuration's keys


def offlint_verdict(form: str, config: dict, version: Version, rules: list[Rule]) -> Verdict | None:
    if form == "mlm":
        text = render_mlm(config, version)
        if text is None:
            return None
        path, kind = "launch.sh", "shell"
    else:
        path, kind, render = RENDER[form]
        # YAML files and Hydra overrides inherit unset keys from a recipe offlint cannot see: write out every
        # key the rules read, with megatron-core's defaults where the configuration leaves it unset.
        text = render(config if form == "python" else complete(config, version))
    (unit,) = read_source(path, kind, text)
    resolved = resolve(unit, version)
    findings = check_unit(resolved, rules, strict=False)
    fired = {f.code for f in findings if f.stage in COMPARED_STAGES}
    values = {key: resolved.get(key).value for key in config}
    return Verdict(form, fired, values)


def complete(config: dict, version: Version) -> dict:
    """`config` with every other key the rules read at its megatron-core default: the configuration megatron-core
    judges (a plain TransformerConfig; a field the version lacks, such as Bridge's hybrid layer pattern, is None)."""
    read = {key for rule in load_rules().values() for key in rule.keys}
    full = {name: keys.default_for(name, version) for name in sorted(set(keys.KEYS) | read)
            if name.split(".", 1)[0] in ("model", "optimizer", "ddp") and keys.key_exists(name, version)}
    done = {**full, **config}
    # Megatron Bridge applies its comm_overlap section's switches over the model's (False where None) and a
    # mixed-precision recipe over the model's bf16/fp16: write them as the configuration has them.
    done["comm_overlap.overlap_moe_expert_parallel_comm"] = done["model.overlap_moe_expert_parallel_comm"]
    done["comm_overlap.delay_wgrad_compute"] = done["model.delay_wgrad_compute"]
    done["mixed_precision"] = None
    return done


def mcore_request(config: dict) -> tuple[dict, dict]:
    model = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("model.")}
    optimizer = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("optimizer.")}
    return model, optimizer


@dataclass
class Comparison:
    outcome: str  # "accepted", "rejected", "other-error"
    error: str = ""
    expected: set[str] = field(default_factory=set)  # rules mirroring megatron-core's error
    problems: list[str] = field(default_factory=list)


def compare(config: dict, mcore: MegatronCore, rules: dict[str, Rule], forms=FORMS) -> Comparison:
    """Judge one configuration with megatron-core and with offlint in every form; list disagreements."""
    errors, unjudged = read_answer(mcore.ask(*mcore_request(config)))
    if unjudged:  # the probe's environment, not the configuration (offlint.mcore_probe.ENVIRONMENT_TEXTS)
        return Comparison("other-error", unjudged[0])
    selected = [rule for rule in rules.values() if rule.scope == "unit"]
    compared = {r.code: r for r in selected if any(c.stage in COMPARED_STAGES for c in r.checks)}
    result = Comparison("accepted" if not errors else "rejected")
    for error in errors:
        mapped = rules_for_error(error, compared)
        if not mapped:
            result.outcome = "other-error"
        result.expected |= mapped
    result.error = "; ".join(errors)
    for form in forms:
        if form == "mlm" and mlm_variant(config) != config:
            variant = compare(mlm_variant(config), mcore, rules, forms=("mlm",))
            result.problems.extend(f"{p} (Megatron-LM variant {describe(mlm_variant(config))})"
                                   for p in variant.problems)
            continue
        verdict = offlint_verdict(form, config, mcore.version, selected)
        if verdict is None:
            continue
        if form != "mlm":
            wrong = {k: (config[k], v) for k, v in verdict.values.items() if v != config[k] or type(v) is not type(
                config[k])}
            if wrong:
                result.problems.append(f"{form}: read back differently: {wrong}")
        if result.outcome == "accepted" and verdict.fired:
            result.problems.append(f"{form}: offlint fires {sorted(verdict.fired)} but megatron-core accepts")
        missing = result.expected - verdict.fired
        if missing:
            result.problems.append(f"{form}: megatron-core raises {result.error!r}, offlint misses {sorted(missing)}")
    return result


def describe(config: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())


def version_of(text: str) -> Version:
    return parse_version(text)
