"""Expert-parallel communication overlap: on a model without a schedule plan (OFL219), and what megatron-core's
TransformerConfig refuses beside it (OFL224)."""

from __future__ import annotations

from typing import Callable

from offlint import keys, pipeline_layout
from offlint.conditions.module_names import graph_modules, graph_names
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope
from offlint.conditions.values import as_list, is_whole
from offlint.named_precision import configured
from offlint.sources.bridge_schedule import KEY as SCHEDULE_KEY
from offlint.types import Unknown
from offlint.versions import Version, parse_version


def _ep_overlap_on(scope: Scope) -> object:
    """(True, the key that turns it on) when Bridge runs with overlap_moe_expert_parallel_comm, (False, "") when it
    does not, UNKNOWN (_comm_overlap_field)."""
    return _comm_overlap_field(scope, "overlap_moe_expert_parallel_comm")


_PACKING = "Energon packing (dataset.packing_buffer_size), which turns EP overlap off,"


def _energon_packing(scope: Scope) -> object:
    """Whether Bridge turns EP overlap and delayed weight-gradient compute off for native Energon packing
    (ConfigContainer._disable_native_energon_packing_moe_overlap, before comm_overlap's setup): the dataset sets
    packing_buffer_size. True, False or UNKNOWN."""
    if scope.lookup("dataset.packing_buffer_size").assignment is None:
        return False
    held = scope.key("dataset.packing_buffer_size")
    return UNKNOWN if held is UNKNOWN else held is not None


def _comm_overlap_field(scope: Scope, name: str) -> object:
    """(True, the key that turns it on) when the model runs with the switch `name` on, (False, "") when not,
    UNKNOWN. Bridge's CommOverlapConfig.setup applies the section's value to the model, False where the section
    leaves it None (training/comm_overlap.py: _get_model_comm_overlap_cfgs, _override_user_cfgs, _apply_cfgs); a
    container without the section (it reads None, so does its required tp_comm_overlap) keeps the model's, as do
    Megatron-LM's flags and a plain megatron-core program (one that builds megatron-core's own config classes)."""
    if scope.names.get("framework") != "megatron-core" and scope.names.get("defaults") != "mlm-cli":
        section = scope.key(f"comm_overlap.{name}")
        if section is UNKNOWN:
            return UNKNOWN
        if section is not None:
            return (True, f"comm_overlap.{name}") if section is True else (False, "")
        present = scope.key("comm_overlap.tp_comm_overlap")
        if present is UNKNOWN:
            return UNKNOWN
        if present is not None:
            return False, ""
    model = scope.key(f"model.{name}")
    if model is UNKNOWN:
        return UNKNOWN
    return (True, f"model.{name}") if model is True else (False, "")


# The asserts of TransformerConfig.__post_init__'s `if self.overlap_moe_expert_parallel_comm:` block, in its order,
# as each megatron-core release has them (read in the release tags of Megatron-LM: core_v0.16.1 to core_v0.19.0 and
# main d98e8a6): what each says; _ep_overlap_asserts gives the versions each is in.
_EP_VPP = "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when " \
    "pipeline_model_parallel_size > 1"


_EP_SIZE = "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"


_EP_DISPATCHER = "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"


_EP_FULL = "disable full recomputation when enabling overlap_moe_expert_parallel_comm"


_EP_METHOD = "disable recomputation method when enabling overlap_moe_expert_parallel_comm"


_EP_LAYERS = "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm"


_EP_MOE = "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"  # from 0.17


_EP_HALF = "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"


_EP_SHARED = "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"


_EP_MTP_OLD = "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."  # before 0.19


_EP_MTP = "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."  # from 0.19: 0 allowed


_EP_MTP_PP = "Pipeline model parallel size must be larger than 1 when enabling overlap_moe_expert_parallel_comm " \
    "with MTP layer."  # before 0.18


_EP_NCCLEP = "overlap_moe_expert_parallel_comm with ncclep does not support offloading 'expert_fc1': it forces " \
    "expert FC1 to save the raw bf16 input, which the overlap path eagerly frees."  # from 0.19


_EP_GRAPH = "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"


_EP_DELAY = "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"


def _float16_model(scope: Scope) -> object:
    """Whether the model runs in bf16 or fp16 when TransformerConfig checks it: Bridge's `mixed_precision` (a
    recipe name, built as the tree builds it: named_precision, or a MixedPrecisionConfig) is copied over the
    model's bf16/fp16 before comm_overlap's setup and finalize (runtime_config_update); else the model's own."""
    mixed = scope.key("mixed_precision")
    if mixed is UNKNOWN:
        return UNKNOWN
    if mixed is not None:
        built = configured(scope.lookup)[0] if isinstance(mixed, str) else scope.lookup("mixed_precision")
        fields = getattr(built.value, "fields", None) if built.state == "known" else None
        if not isinstance(fields, dict):
            return UNKNOWN
        half = [fields.get(name, False) for name in ("bf16", "fp16")]
        if any(isinstance(v, Unknown) for v in half):
            return UNKNOWN
        return any(v is True for v in half)
    half = [scope.key("model.bf16"), scope.key("model.fp16")]
    if any(v is True for v in half):
        return True
    return UNKNOWN if UNKNOWN in half else False


def _ep_overlap_asserts(scope: Scope) -> list[tuple[str, object]]:
    """(what megatron-core asserts, whether the unit fails it: True, False or UNKNOWN), in __post_init__'s order,
    for the unit's version: each assert is a function of a few model fields. Where the version is only a guess (the
    tree's pin not checked out), an assert the newest release does not fail the unit on is not certain: the tree may
    run that one (Bridge 067f987 at the installed 0.16.1: 5 OFL224 errors on 0.16's CUDA-graph assert, which its pin
    does not make)."""
    found = _ep_overlap_asserts_at(scope, scope.version)
    if not scope.version.guessed:
        return found
    newest = dict(_ep_overlap_asserts_at(scope, keys.newest_known()))
    return [(text, UNKNOWN if verdict is True and newest.get(text) is not True else verdict)
            for text, verdict in found]


def _ep_overlap_asserts_at(scope: Scope, v: Version) -> list[tuple[str, object]]:
    k = scope.key
    checks: list[tuple[str, Callable[[], object]]] = [
        (_EP_VPP, lambda: _no_virtual_stages(scope)),
        (_EP_SIZE, lambda: _fails(k("model.expert_model_parallel_size"), lambda ep: not (is_whole(ep) and ep > 1))),
        (_EP_DISPATCHER, lambda: _fails(k("model.moe_token_dispatcher_type"),
                                        lambda d: d not in ("alltoall", "flex"))),
        (_EP_FULL, lambda: _fails(k("model.recompute_granularity"), lambda g: g == "full")),
        (_EP_METHOD, lambda: _fails(k("model.recompute_method"), lambda m: m is not None)),
        (_EP_LAYERS, lambda: _fails(k("model.recompute_num_layers"), lambda n: n is not None)),
    ]
    if v >= parse_version("0.17"):  # moe_layer_recompute is rewritten to 'moe' recomputed before this block
        checks.append((_EP_MOE, lambda: _either(
            _fails(k("model.recompute_modules"), lambda m: "moe" in (m if isinstance(m, str) else as_list(m))),
            _fails(k("model.moe_layer_recompute"), lambda r: r is True))))
    checks += [(_EP_HALF, lambda: _negated(_float16_model(scope))),
               (_EP_SHARED, lambda: _fails(k("model.moe_shared_expert_overlap"), lambda s: bool(s)))]
    if v >= parse_version("0.19"):
        checks.append((_EP_MTP, lambda: _fails(k("model.mtp_num_layers"), lambda n: n not in (None, 0, 1))))
        checks.append((_EP_NCCLEP, lambda: _fails(k("model.moe_token_dispatcher_type"), lambda d: d == "flex")
                       and _fails(k("model.moe_flex_dispatcher_backend"), lambda b: b == "ncclep")
                       and _fails(k("model.fine_grained_activation_offloading"), lambda f: bool(f))
                       and _fails(k("model.offload_modules"), lambda m: "expert_fc1" in as_list(m))))
    else:
        checks.append((_EP_MTP_OLD, lambda: _fails(k("model.mtp_num_layers"), lambda n: n not in (None, 1))))
        if v < parse_version("0.18"):
            checks.append((_EP_MTP_PP, lambda: _fails(k("model.mtp_num_layers"), lambda n: n == 1)
                           and _fails(k("model.pipeline_model_parallel_size"), lambda pp: not (is_whole(pp) and pp > 1))))
    checks.append((_EP_GRAPH, lambda: _graph_refused(scope, v)))
    return [(text, test()) for text, test in checks]


def _no_virtual_stages(scope: Scope) -> object:
    """A pipeline (PP > 1) without virtual stages when the overlap block runs: a custom layout set before it gives
    the virtual size itself (its stages over PP, when more than one: TransformerConfig's layout block, as
    Megatron-LM's validate_args does for its flag)."""
    pp = scope.key("model.pipeline_model_parallel_size")
    if pp is UNKNOWN or not (is_whole(pp) and pp > 1):
        return UNKNOWN if pp is UNKNOWN else False
    vpp = scope.key("model.virtual_pipeline_model_parallel_size")
    if vpp is UNKNOWN or vpp is not None:
        return UNKNOWN if vpp is UNKNOWN else False
    layout = scope.key("model.pipeline_model_parallel_layout")
    if layout is UNKNOWN or layout in (None, ""):
        return UNKNOWN if layout is UNKNOWN else True
    stages = pipeline_layout.stages_of(layout)
    if stages is None or len(stages) % pp:
        return UNKNOWN  # a layout offlint cannot read, or one the layout block refuses first (OFL221)
    return len(stages) // pp == 1


def _fails(value, refused: Callable[[object], bool]) -> object:
    """Kleene: UNKNOWN for an unknown value, else whether the assert refuses it."""
    if value is UNKNOWN:
        return UNKNOWN
    try:
        return bool(refused(value))
    except TypeError:  # a value of a type megatron-core's own assert would raise on first
        return UNKNOWN


def _either(a, b) -> object:
    """Kleene `or`."""
    if a is True or b is True:
        return True
    return UNKNOWN if UNKNOWN in (a, b) else False


def _negated(value) -> object:
    return UNKNOWN if value is UNKNOWN else not value


def _graph_refused(scope: Scope, version: Version) -> object:
    """The CUDA graph assert: before 0.18 any graph but Transformer Engine's without moe/mlp in cuda_graph_scope;
    from 0.18 (the graph API split into full_iteration, inference scope and per-layer modules) only Transformer
    Engine graphs of moe or mlp, as the modules megatron-core ends up with (graph_modules)."""
    impl = scope.key("model.cuda_graph_impl")
    if impl is UNKNOWN:
        return UNKNOWN
    if impl in (None, "none"):
        return False
    if version < parse_version("0.18"):
        if impl != "transformer_engine":
            return True
        names = scope.key("model.cuda_graph_scope")
        return UNKNOWN if names is UNKNOWN else bool({"moe", "mlp"} & set(graph_names(names)))
    if impl != "transformer_engine":
        return False
    names = graph_modules(scope.key("model.cuda_graph_scope"), scope.key("model.cuda_graph_modules"))
    return UNKNOWN if names is UNKNOWN else bool({"moe", "mlp"} & set(names))


@needs_scope
def ep_overlap_refusal(scope: Scope) -> object:
    """OFL224: what megatron-core's TransformerConfig asserts about a run with MoE expert-parallel communication
    overlap ("" when nothing, UNKNOWN when offlint cannot tell): the first assert of its overlap block the unit
    certainly fails (an earlier one offlint cannot decide is named), or delay_wgrad_compute without the overlap.
    A unit whose overlap switch is unknown gives no finding, not even with --strict (most units fail some overlap
    assert by default). Megatron Bridge's comm_overlap setup makes most of the same checks first, in its own
    words (training/comm_overlap.py); megatron-core makes them again when the model config is finalized."""
    return _ep_overlap(scope)[0]


@needs_scope
def ep_overlap_open(scope: Scope) -> str:
    """For a "possible" OFL224 (ep_overlap_refusal UNKNOWN): what is open, and what megatron-core asserts."""
    return _ep_overlap(scope)[1]


def _ep_overlap(scope: Scope) -> tuple[object, str]:
    """(ep_overlap_refusal's answer, what is open when it is UNKNOWN)."""
    on = _ep_overlap_on(scope)
    if on is UNKNOWN:  # most units fail an overlap assert by default (EP 1, the allgather dispatcher): no claim
        return "", ""
    packing = _energon_packing(scope)
    if packing is True:
        return "", ""
    if not on[0]:
        delay = _comm_overlap_field(scope, "delay_wgrad_compute")
        if delay is UNKNOWN or not delay[0]:
            return "", ""
        if packing is UNKNOWN:
            return UNKNOWN, f"{delay[1]}=True without the overlap, and whether {_PACKING} is used is not known"
        return (f"{delay[1]}=True{_written_at(scope, delay[1])} without overlap_moe_expert_parallel_comm: "
                f"megatron-core's TransformerConfig asserts \"{_EP_DELAY}\""), ""
    results = _ep_overlap_asserts(scope)
    texts = [text for text, _ in results]
    failed = [text for text, verdict in results if verdict is True]
    undecided = [text for text, verdict in results if verdict is UNKNOWN]
    head = f"{on[1]}=True{_written_at(scope, on[1])}"
    if packing is UNKNOWN and failed:
        return UNKNOWN, f"{head}, and whether {_PACKING} is used is not known; with it not, \"{failed[0]}\""
    if not failed:
        if not undecided:
            return "", ""
        return UNKNOWN, (f"{head}, and whether megatron-core's overlap asserts hold is not known: "
                         f"\"{undecided[0]}\"" + (f" and {len(undecided) - 1} more" if len(undecided) > 1 else ""))
    earlier = [text for text in undecided if texts.index(text) < texts.index(failed[0])]
    return (f"{head}: megatron-core's TransformerConfig asserts \"{failed[0]}\"" +
            (f" (and {len(failed) - 1} more of its overlap asserts fail)" if len(failed) > 1 else "") +
            (f"; an earlier assert offlint cannot decide may raise first: \"{earlier[0]}\"" if earlier else "")), ""


def _written_at(scope: Scope, key: str) -> str:
    where = scope.lookup(key).assignment
    return f" at {where.location.path}:{where.location.line}" if where is not None else ""


@needs_scope
def ep_overlap_schedule_refusal(scope: Scope) -> object:
    """What megatron-core raises at the first training forward when EP overlap runs a model whose class (read from
    the provider's provide() in the tree: sources/bridge_schedule.py) defines no build_schedule_plan; "" when it
    does not apply (no provider read, EP overlap off, a layout TransformerConfig refuses first: EP 1, or a pipeline
    without virtual stages), UNKNOWN when offlint cannot tell and one of the two is established (EP overlap on, or a
    model class known to lack the method): a recipe where both are unknown stays quiet even with --strict."""
    return _ep_overlap_schedule(scope)[0]


@needs_scope
def ep_overlap_schedule_open(scope: Scope) -> str:
    """For a "possible" OFL219 (ep_overlap_schedule_refusal UNKNOWN): what is open, and what follows if it goes the
    wrong way."""
    return _ep_overlap_schedule(scope)[1]


_PLAN_RAISES = ("the first forward raises \"RuntimeError: _get_attr_wrapped_model couldn't find attribute "
                "build_schedule_plan\"")


def _ep_overlap_schedule(scope: Scope) -> tuple[object, str]:
    """(ep_overlap_schedule_refusal's answer, what is open when it is UNKNOWN)."""
    built = scope.lookup(SCHEDULE_KEY)
    if built.assignment is None:  # not a model section built from a provider offlint read
        return "", ""
    on = _ep_overlap_on(scope)
    if on is not UNKNOWN and not on[0]:
        return "", ""
    if on is UNKNOWN and not (isinstance(built.value, str) and built.value):
        return "", ""  # "possible" only for a model class known to lack the method
    lacking = f"{built.value}, which defines no build_schedule_plan" if isinstance(built.value, str) else ""
    experts = scope.key("model.num_moe_experts")
    if experts is not UNKNOWN and not experts:
        # EP overlap needs EP > 1, and TransformerConfig raises "num_moe_experts must be non None to use
        # expert-parallel" for that first (NVIDIA-NeMo/DFM's Flux and Wan: no MoE, both left to user overrides)
        return "", ""
    packing = _energon_packing(scope)
    if packing is not False:
        return (UNKNOWN, f"whether {_PACKING} is used is not known") if packing is UNKNOWN else ("", "")
    pp, vpp = scope.key("model.pipeline_model_parallel_size"), scope.key("model.virtual_pipeline_model_parallel_size")
    ep = scope.key("model.expert_model_parallel_size")
    if UNKNOWN in (pp, vpp, ep):
        return UNKNOWN, ("the pipeline or expert-parallel size is not known (with EP 1, or a pipeline without virtual "
                         "stages, TransformerConfig refuses EP overlap first)")
    if not isinstance(ep, int) or ep <= 1 or (isinstance(pp, int) and pp > 1 and vpp is None):
        return "", ""
    model = scope.key(SCHEDULE_KEY)
    if on is UNKNOWN:
        return UNKNOWN, (f"whether EP overlap (comm_overlap.overlap_moe_expert_parallel_comm) is on is not known; "
                         f"{lacking}, so with it on {_PLAN_RAISES}")
    where = scope.lookup(on[1]).assignment
    at = f" at {where.location.path}:{where.location.line}" if where is not None else " by default"
    if model is UNKNOWN or not model:
        return ("", "") if model == "" else (UNKNOWN, f"{on[1]}=True{at}, and whether the model class defines "
                                                      f"build_schedule_plan is not known")
    return (f"{on[1]}=True{at} sends every training forward through megatron-core's combined 1F1B schedule, which "
            f"asks the model for build_schedule_plan (combined_1f1b.py get_attr_wrapped_model); {model}, which "
            f"defines none, so {_PLAN_RAISES}"), ""
