"""The parallel layout: the GPU count a recipe's name gives (OFL216), the batch it divides (OFL217), the pipeline split
and layout megatron-core refuses (OFL218, OFL221)."""

from __future__ import annotations

from offlint import keys, pipeline_layout
from offlint.conditions.scope import UNKNOWN, Scope, needs_scope
from offlint.conditions.settings import before_2023_flag, checkout_lacks
from offlint.conditions.values import fmt, is_positive_count, is_whole
from offlint.estimate.inputs import gpus_in_name
from offlint.estimate.shapes import Parallelism
from offlint.sources.bridge_checks import EVAL_BATCH_CHECK, EXPERT_TP_DEFAULT, NO_DEFAULT
from offlint.sources.mcore_source import OVERSIZED
from offlint.types import Defaults, OneOf, Source
from offlint.versions import parse_version


@needs_scope
def layout_division(scope: Scope) -> object:
    """Why the unit's parallel layout cannot run on the GPU count its name gives (Bridge's `..._64gpu_...`), or a
    launch on the one its launcher starts (torchrun's `--nproc-per-node` x `--nnodes`, a performance launch's `-ng`),
    in megatron-core's words (Megatron-LM's, whose validate_args asserts first); "" when it can, or when neither says
    (a launch's world size is its own, whatever its recipe's name: a model-verification card runs a 416-GPU recipe
    on 352 GPUs at PP11). initialize_model_parallel raises when
    TP x PP x CP does not divide the world size, then when ETP x EP x PP does not. An unset ETP is TP's value in
    megatron-core (ModelParallelConfig.__post_init__) but 1 with EP > 1 in Megatron Bridge since 6f2f546ef
    (July 2026, transformer_config._set_moe_expert_tensor_parallel_default): read from the tree's Bridge, and where
    the tree has none the finding must hold for both. "" when a size it needs is unknown: no crash is claimed on a
    layout offlint cannot read."""
    if scope.names.get("unit_kind") == "recipe":
        world = gpus_in_name(str(scope.names.get("unit_name", "")))
        said = f"the recipe name says {world}"
    else:  # a launch runs on its own world size, whatever recipe it names: the one its launcher states
        world = int(scope.names.get("launch_gpus", 0))
        said = f"the launch starts {world}"
    dense = _dense_layout(scope) if world else None
    if dense is None:
        return ""  # no crash is claimed on a layout offlint cannot read (as no OOM without a number)
    tp, pp, cp = dense
    mlm = scope.names.get("defaults") == Defaults.MLM_CLI.value
    if mlm and _run_smaller(scope, tp, pp, world):
        return ""
    if mlm and checkout_lacks(scope, "mlm-world-size"):
        # (without, megatron-core's initialize_model_parallel still refuses it)
        if _fork_lays_out_ranks(scope):
            return ""
        mlm = False
    if world % (tp * pp * cp):
        if mlm and checkout_lacks(scope, "mlm-world-size-words"):  # (its assert, in other words: not quoted)
            stop = (f"its checkout's validate_args asserts that the world size ({world}) is divisible by TP x PP x CP "
                    f"({tp * pp * cp})")
        elif mlm:  # its validate_args asserts first (0.14 on)
            stop = (f"Megatron-LM's validate_args asserts \"world size ({world}) is not divisible by total_model_size "
                    f"(total_model_size={tp * pp * cp})\"")
        else:
            stop = f"megatron-core raises \"world_size ({world}) is not divisible by {tp * pp * cp}\""
        return f"TP{tp} x PP{pp} x CP{cp} needs a multiple of {tp * pp * cp} GPUs, and {said}: {stop}"
    ep, etp = scope.key("model.expert_model_parallel_size"), scope.key("model.expert_tensor_parallel_size")
    if UNKNOWN in (ep, etp) or not (_size_read(ep) and _size_read(etp)):
        return ""
    ep = ep or 1
    # TP's value or 1: a world size that 1 x EP x PP does not divide, TP x EP x PP does not divide either
    etp = _fewest_etp(etp, ep, tp, scope)
    if world % (etp * ep * pp):
        return (f"the expert layout ETP{etp} x EP{ep} x PP{pp} needs a multiple of {etp * ep * pp} GPUs, and {said}: "
                f"megatron-core raises \"world_size ({world}) is not divisible by "
                f"expert_tensor_model_pipeline_parallel size ({etp * ep * pp})\"")
    return ""


def _dense_layout(scope: Scope) -> tuple[int, int, int] | None:
    """(TP, PP, CP) as the unit sets them, an unset size 1; None where one is unknown or no size (_size_read)."""
    dense = [scope.key(f"model.{name}") for name in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")]
    if UNKNOWN in dense or not all(_size_read(v) for v in dense):
        return None
    tp, pp, cp = (v or 1 for v in dense)
    return tp, pp, cp


def _fork_lays_out_ranks(scope: Scope) -> bool:
    """Whether a Megatron-LM launch's checkout may lay its ranks out otherwise: its validate_args does not check the
    world size, and the launch passes options of the fork's own parser that no release has (OpenSQZ/MegatronApp's
    --forward-backward-disaggregating takes a rank out of the layout)."""
    if not checkout_lacks(scope, "mlm-world-size"):
        return False
    release = keys.mlm_flag_dests(scope.version)
    return any(flag not in release for flag in scope.names.get("checkout_flags", ()))


def _size_read(value) -> bool:
    """Whether a parallel size is one the layout can be judged with: unset (None, 0: the default of 1 as these rules
    read it) or a whole positive number. A fraction, a negative count or a word is no layout megatron-core tiles, and
    no claim is made on it (a mutated recipe's `expert_model_parallel_size = 0.5` had ended its check in a division
    by zero)."""
    return not value or is_positive_count(value)


def _fewest_etp(etp, ep: int, tp: int, scope: Scope) -> int:
    """The expert TP that needs the fewest GPUs: the one set; else, with EP > 1, 1 where the tree's Bridge defaults it
    so (since July 2026) or the tree has no Bridge of its own (it may), TP's where its Bridge does not
    (bridge_checks.EXPERT_TP_DEFAULT: megatron-core takes TP's value); else TP's."""
    if etp:
        return etp
    return tp if ep <= 1 or scope.key(EXPERT_TP_DEFAULT) == NO_DEFAULT else 1


@needs_scope
def batch_division(scope: Scope) -> object:
    """Why megatron-core's micro-batch calculator refuses the recipe's batch sizes, in its words; "" when it does
    not, or offlint does not judge it. Bridge's initialize (and Megatron-LM's) builds a
    ConstantNumMicroBatchesCalculator (num_microbatches_calculator.py) with DP = world / (TP x PP x CP): it asserts
    "global batch size (G) is not divisible by micro batch size (M) times data parallel size (D)", or with
    decrease_batch_size_if_needed rounds G down to a multiple of M x D and asserts "number of microbatches should
    be at least 1". Judged where the world is known from the recipe: at the GPU count its name gives (as OFL216: a
    launch's world size is its own), and where even the fewest GPUs its layout tiles (an unset ETP: 1, as Bridge
    takes it with EP > 1, the fewer) leave more data-parallel ranks than the global batch has micro-batches: then
    no scale runs it. Not with a batch-size ramp-up or schedule (another calculator); "" when a value it needs is
    unknown or the global batch size is unset (megatron-core then takes M x D). Not for Bridge's performance
    recipes (`perf_recipes/`): the performance launcher that runs them rescales the global batch size with the
    data-parallel size of the launch (scripts/performance/utils/overrides.py, set_post_overrides)."""
    if scope.names.get("unit_kind") != "recipe":
        return _launch_batch_division(scope) if scope.names.get("defaults") == Defaults.MLM_CLI.value else ""
    if "/perf_recipes/" in "/" + str(scope.names.get("unit_path", "")):
        return ""
    names = ("global_batch_size", "micro_batch_size", "rampup_batch_size", "step_batch_size_schedule",
             "decrease_batch_size_if_needed")
    gbs, mbs, rampup, schedule, decrease = (scope.key(f"train.{name}") for name in names)
    sizes = [scope.key(f"model.{name}") for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                     "context_parallel_size", "expert_model_parallel_size",
                                                     "expert_tensor_parallel_size")]
    if UNKNOWN in (gbs, mbs, rampup, schedule, decrease, *sizes) or rampup or schedule:
        return ""

    if not (is_positive_count(gbs) and is_positive_count(mbs)) or \
            not all(v is None or is_positive_count(v) for v in sizes):
        return ""
    tp, pp, cp, ep = (v or 1 for v in sizes[:4])
    etp = _fewest_etp(sizes[4], ep, tp, scope)
    dense = tp * pp * cp
    world = gpus_in_name(str(scope.names.get("unit_name", "")))
    where = " when training starts"
    check = scope.key(EVAL_BATCH_CHECK)  # (the tree's ConfigContainer.validate, before the calculator is built)
    if isinstance(check, str) and check:  # (the reader does not follow `validation`: the clause says "where")
        where += (f"; Megatron Bridge's ConfigContainer.validate ({check}) makes the same division of the evaluation "
                  f"batch sizes and, where those are left unset (they then default to these), stops the job first")
    if world and world % dense == 0 and not world % (etp * ep * pp):  # (OFL216 reports a layout that does not)
        dp = world // dense
        if not decrease and gbs % (mbs * dp):
            return (f"global batch size {gbs} with micro batch size {mbs} on the {world} GPUs the recipe name gives "
                    f"(TP{tp} x PP{pp} x CP{cp}: DP{dp}): megatron-core asserts \"global batch size ({gbs}) is not "
                    f"divisible by micro batch size ({mbs}) times data parallel size ({dp})\"" + where)
        if gbs < mbs * dp:
            return (f"global batch size {gbs} with micro batch size {mbs} on the {world} GPUs the recipe name gives "
                    f"(TP{tp} x PP{pp} x CP{cp}: DP{dp}) is less than one micro-batch per data-parallel rank: "
                    f"decrease_batch_size_if_needed rounds it to 0, and megatron-core asserts \"number of "
                    f"microbatches should be at least 1, got 0.\"" + where)
        return ""
    fewest = Parallelism(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp).min_world_size()
    dp = fewest // dense
    if gbs < mbs * dp:
        return (f"global batch size {gbs} with micro batch size {mbs} is less than one micro-batch for each of the "
                f"{dp} data-parallel ranks of the fewest GPUs the layout runs on ({fewest}: TP{tp} x PP{pp} x CP{cp}"
                + (_expert_layout(ep, etp, sizes[4], scope.key(EXPERT_TP_DEFAULT) != NO_DEFAULT) if ep > 1 else "")
                + "), so no GPU count runs it: megatron-core asserts "
                + (f"\"number of microbatches should be at least 1, got 0.\"" if decrease else
                   f"\"global batch size ({gbs}) is not divisible by micro batch size ({mbs}) times data parallel "
                   f"size ({dp})\"") + where)
    return ""


def _launch_batch_division(scope: Scope) -> str:
    """batch_division for a Megatron-LM launch, on the world size its launcher states (`torchrun --nproc-per-node 8
    --nnodes 1`): DP = world / (TP x PP x CP). From 0.18 (d85365bd23, 2026-04-13) validate_args divides the
    evaluation batch sizes, which default to the training ones, by the same micro-batch x DP first and asserts
    "eval_global_batch_size (G) must be divisible by eval_micro_batch_size (M) * data_parallel_size (D)", whether or
    not `--decrease-batch-size-if-needed` is given; then set_global_variables builds the calculator, which asserts as
    for a recipe (megatron-core's since 2024; a checkout from before, and Megatron-DeepSpeed, have their own in
    megatron/microbatches.py, in the same words: the message says "its micro-batch calculator"). Not judged where
    the world size is the environment's, OFL216 reports the layout, the checkout clamps a layout larger than the
    world (_run_smaller), `--rampup-batch-size` or `--step-batch-size-schedule` is given (another calculator),
    `--global-batch-size` is not (validate_args takes M x D), or a value it needs is unknown (a flag offlint does not
    read, a word it cannot)."""
    world = int(scope.names.get("launch_gpus", 0))
    dense = _dense_layout(scope) if world else None
    if dense is None:
        return ""
    tp, pp, cp = dense
    if world % (tp * pp * cp) or _run_smaller(scope, tp, pp, world) or _fork_lays_out_ranks(scope):
        return ""
    gbs, mbs, rampup, schedule, decrease = (scope.key(f"train.{name}") for name in (
        "global_batch_size", "micro_batch_size", "rampup_batch_size", "step_batch_size_schedule",
        "decrease_batch_size_if_needed"))
    eval_gbs, eval_mbs = (scope.key(f"validation.eval_{name}") for name in ("global_batch_size", "micro_batch_size"))
    if UNKNOWN in (gbs, mbs, rampup, schedule, decrease, eval_gbs, eval_mbs) or rampup or schedule or \
            not (is_positive_count(gbs) and is_positive_count(mbs)) or \
            not all(v is None or is_positive_count(v) for v in (eval_gbs, eval_mbs)):
        return ""
    dp = world // (tp * pp * cp)
    layout = f"on the {world} GPUs the launch starts (TP{tp} x PP{pp} x CP{cp}: DP{dp})"
    given = eval_gbs is not None or eval_mbs is not None  # (else they default to the training ones)
    eval_gbs, eval_mbs = eval_gbs or gbs, eval_mbs or mbs
    if scope.version >= parse_version("0.18") and not checkout_lacks(scope, "mlm-eval-batch") and \
            eval_gbs % (eval_mbs * dp):
        return ((f"evaluation batch size {eval_gbs} with micro batch size {eval_mbs} {layout}" if given else
                 f"global batch size {gbs} with micro batch size {mbs} {layout}, which the evaluation batch sizes "
                 f"default to")
                + f": Megatron-LM's validate_args asserts \"eval_global_batch_size ({eval_gbs}) must be divisible by "
                  f"eval_micro_batch_size ({eval_mbs}) * data_parallel_size ({dp})\" when the job starts")
    if not decrease and gbs % (mbs * dp):
        return (f"global batch size {gbs} with micro batch size {mbs} {layout}: its micro-batch calculator asserts "
                f"\"global batch size ({gbs}) is not divisible by micro batch size ({mbs}) times data parallel size "
                f"({dp})\" when training starts")
    if decrease and gbs < mbs * dp:
        return (f"global batch size {gbs} with micro batch size {mbs} {layout} is less than one micro-batch per "
                f"data-parallel rank: --decrease-batch-size-if-needed rounds it to 0, and its micro-batch calculator "
                f"asserts \"number of microbatches should be at least 1, got 0.\" when training starts")
    return ""


def _expert_layout(ep: int, etp: int, given, bridge_default: bool) -> str:
    """The experts' part of a layout as OFL217 names it; an expert TP the recipe leaves unset says whose it is (Bridge's
    1 under expert parallelism, or TP's, as megatron-core takes it: _fewest_etp): "128: TP4 x PP1 x CP1, EP32" had
    left the reader to guess the 4."""
    if given:
        return f", ETP{etp} x EP{ep}"
    return f", ETP{etp} x EP{ep} (expert TP unset: {'Bridge' if bridge_default else 'TP'}'s {etp})"


@needs_scope
def pipeline_split_refusal(scope: Scope) -> object:
    """Why megatron-core refuses to split the decoder's layers over the pipeline stages, in its words; "" when it
    does not, or when offlint does not judge the split. Only the even split is judged: no custom
    `pipeline_model_parallel_layout` and no first/last-stage layer counts (their own checks are not read here),
    and not a hybrid model (its stages come from its layer pattern). Then TransformerBlock's
    get_num_layers_to_build asserts that the layers, plus one each for an embedding or loss counted in the split,
    divide by PP (transformer_block.py in 0.16.1 and 0.19.2: in plain words in 0.16, naming the values from 0.17;
    TransformerConfig.__post_init__ raises first for the counted cases), and that each rank's layers divide by a
    virtual pipeline size (a VPP offlint cannot read claims nothing). "" when a value it needs is unknown: no
    crash is claimed on a split offlint cannot read, nor on a Bridge launch whose PP or VP the recipe's layout
    builder meets (_layout_rebuilt).
    Unknown where the sizes are known on each path of a branch (a OneOf: a launch that gives
    `--pipeline-model-parallel-size 16` on one alternative of an `if` only): the engine judges each path."""
    if _layout_rebuilt(scope):
        return ""  # the recipe's layout builder splits the layers for the command line's PP and VP
    pp, layers = scope.key("model.pipeline_model_parallel_size"), scope.key("model.num_layers")
    others = [scope.key(f"model.{name}") for name in (
        "pipeline_model_parallel_layout", "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
        "hybrid_layer_pattern", "hybrid_override_pattern")]
    counted = [scope.key(f"model.account_for_{part}_in_pipeline_split") for part in ("embedding", "loss")]
    if UNKNOWN in (pp, layers, *others, *counted) or any(v not in (None, "") for v in others):
        unknown = [v for v in scope.read if v.state == "unknown"]
        by_path = unknown and all(isinstance(v.value, OneOf) and v.key in (
            "model.pipeline_model_parallel_size", "model.num_layers") for v in unknown)
        return UNKNOWN if by_path and not any(v not in (None, "", UNKNOWN) for v in others) else ""
    if not isinstance(pp, int) or not isinstance(layers, int) or isinstance(pp, bool) or pp <= 1 or layers <= 0:
        return ""
    if scope.names.get("defaults") == Defaults.MLM_CLI.value and _clamps(scope):
        tp, world = scope.key("model.tensor_model_parallel_size"), int(scope.names.get("launch_gpus", 0))
        if not world or not is_whole(tp) or _run_smaller(scope, tp, pp, world):
            return ""  # (where the world size is unknown, so is the PP the checkout runs)
    if scope.names.get("deepspeed_pipeline") and (not scope.version.source_names
                                                  or checkout_lacks(scope, "mlm-layers-split")):
        # Megatron-DeepSpeed (`--deepspeed`) builds a DeepSpeed PipelineModule, which partitions the layers over the
        # stages as they come (70 over PP8: 9 x 6 + 8 x 2), and its validate_args does not check the split
        # (microsoft's; the bigscience forks'; a checkout in the tree that does check it is judged): lumi-llm-scaling's
        # 175B launch had been told of an assert
        return ""
    total = layers + sum(1 for v in counted if v)
    extra = f" plus {total - layers} for the embedding/loss counted in the split" if total != layers else ""
    if total % pp == 0:
        vpp, per = scope.key("model.virtual_pipeline_model_parallel_size"), total // pp
        if not is_whole(vpp) or vpp <= 1 or per % vpp == 0:
            return ""
        return (f"{layers} layers{extra} over PP{pp} are {per} per rank, which do not split into VPP{vpp} virtual "
                f"stages: megatron-core's TransformerBlock asserts \"num_layers_per_pipeline_rank {per} should be "
                f"divisible by vp_size {vpp}\" when it builds the model")
    first_check = _mlm_pipeline_check(scope)
    if first_check:
        return f"{layers} layers{extra} do not divide over PP{pp}: {first_check}"
    if checkout_lacks(scope, "block-layers-split"):
        return ""  # (the checkout's TransformerBlock does not check it: mTuner's floor-divides the layers)
    # (0.16 writes a plain text; from 0.17 an f-string with `=` names the values)
    said = "num_layers should be divisible by pipeline_model_parallel_size" if scope.version < parse_version(
        "0.17") else f"num_layers={total} should be divisible by config.pipeline_model_parallel_size={pp}"
    return (f"{layers} layers{extra} do not divide over PP{pp}: megatron-core's TransformerBlock asserts "
            f"\"{said}\" when it builds the model")


def _run_smaller(scope: Scope, tp: int, pp: int, world: int) -> bool:
    """Whether the checkout runs a layout larger than the world smaller (mcore_source.OVERSIZED: before 2024-08,
    validate_args clamped TP to the world size and PP to what TP leaves of it): the layout written is not refused,
    and the one run is not the one written (a Pai-Megatron-Patch fork's vendored upstream examples, TP8 x PP16 on 8
    GPUs, run at PP1)."""
    if not _clamps(scope):
        return False
    clamped = min(tp, world)
    return (clamped, min(pp, world // clamped)) != (tp, pp)


def _clamps(scope: Scope) -> bool:
    """Whether the Megatron-LM that runs the launch clamps a layout larger than the world: its checkout's
    validate_args does (mcore_source.OVERSIZED; a tree older than megatron-core, its own: Version.own_clamp), or,
    where no checkout was read, the launch passes an option only a Megatron-LM from before 2023-09 runs with
    (mlm_flags.BEFORE_2023_FLAGS: BigScience's `--checkpoint-activations` launches of 2021)."""
    return checkout_lacks(scope, OVERSIZED) or bool(scope.version.own_clamp) or bool(before_2023_flag(scope))


def _mlm_pipeline_check(scope: Scope) -> str:
    """For a Megatron-LM launch, the check that refuses layers not dividing over PP before the model is built:
    validate_args asserts it when the job starts (megatron/training/arguments.py, the same from 0.16.1 to
    d98e8a6), unless the virtual stages come from `--num-virtual-stages-per-pipeline-rank` (then only
    TransformerBlock's check is left); "" for another unit."""
    if scope.names.get("defaults") != Defaults.MLM_CLI.value or scope.version < parse_version("0.16"):
        return ""
    vpp = scope.lookup("model.virtual_pipeline_model_parallel_size").assignment
    if vpp is not None and not vpp.text.startswith("--num-layers-per-virtual-pipeline-stage"):
        return ""
    text = "number of layers of the model must be divisible pipeline model parallel size" if vpp is not None \
        else "Number of layers should be divisible by the pipeline-model-parallel size"
    if checkout_lacks(scope, "mlm-layers-split-vpp" if vpp is not None else "mlm-layers-split"):
        return ""
    return f"Megatron-LM's validate_args asserts \"{text}\" when the job starts"


@needs_scope
def uneven_split_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the unit's first/last-stage layer counts (`num_layers_in_first_pipeline_stage`,
    `num_layers_in_last_pipeline_stage`), in its words; "" when it accepts them. TransformerConfig.__post_init__
    (the same code in 0.16.1 and 0.20.0, "Uneven PP") refuses them beside an embedding or loss counted in the split,
    then takes each set count (positive, divisible by a set VPP) and its stage off the layers and PP, and asserts
    that middle layers and middle stages come together, divide, and divide by VPP per rank. Not judged with a
    custom layout (OFL221's) or for hybrid models (their layer pattern decides), and "" when a value it needs is
    unknown. A Bridge launch or override file is judged unless its command line changes PP or VP without setting
    every count it keeps: Bridge's runner then drops counts that no longer fit (`sync_model_pipeline_layout`,
    scripts/training/recipe_runner.py)."""
    names = ("pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "num_layers",
             "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
             "pipeline_model_parallel_layout", "hybrid_layer_pattern", "hybrid_override_pattern",
             "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
    pp, vpp, layers, first, last, layout, hybrid, override, embedding, loss = (
        scope.key(f"model.{name}") for name in names)
    if UNKNOWN in (pp, vpp, layers, first, last, layout, hybrid, override, embedding, loss):
        return ""
    if (first is None and last is None) or layout not in (None, "") or hybrid not in (None, "") or \
            override not in (None, ""):
        return ""

    if not is_whole(pp) or not is_whole(layers) or not all(v is None or is_whole(v) for v in (vpp, first, last)):
        return ""
    if scope.names.get("unit_kind") in ("yaml", "command") and scope.names.get("defaults") != "mlm-cli":
        counts = [f"model.num_layers_in_{part}_pipeline_stage" for part, v in (("first", first), ("last", last))
                  if v is not None]
        if any(_by_command_line(scope, key) for key in _TOPOLOGY) and \
                not all(_by_command_line(scope, key) for key in counts):
            return ""
    where = " when it builds the config"
    if embedding or loss:
        return ("num_layers_in_first/last_pipeline_stage with an embedding or loss counted in the split: "
                "megatron-core's TransformerConfig raises \"num_layers_in_first_pipeline_stage and "
                "num_layers_in_last_pipeline_stage cannot beset at the same time with "
                "account_for_embedding_in_pipeline_splitand account_for_loss_in_pipeline_split\"" + where)
    middle_layers, middle_stages = layers, pp
    for part, count in (("first", first), ("last", last)):
        if count is None:
            continue
        if count <= 0:
            return (f"num_layers_in_{part}_pipeline_stage={count}: megatron-core's TransformerConfig raises "
                    f"\"num_layers_in_{part}_pipeline_stage must be larger than 0\"" + where)
        if vpp is not None and count % vpp:
            return (f"num_layers_in_{part}_pipeline_stage={count} with VPP{vpp}: megatron-core's TransformerConfig "
                    f"raises \"number of layers at {part} stage: {count}must be divisible by virtual pipelineparallel "
                    f"degree {vpp}\"" + where)
        middle_layers, middle_stages = middle_layers - count, middle_stages - 1
    counts = ", ".join(f"num_layers_in_{part}_pipeline_stage={v}" for part, v in (("first", first), ("last", last))
                       if v is not None)
    if bool(middle_layers) != bool(middle_stages):
        return (f"{counts} with PP{pp} and {layers} layers leave {middle_layers} layers for {middle_stages} middle "
                f"stages: megatron-core's TransformerConfig raises \"Mismatch: {middle_layers} middle layers "
                f"remaining but {middle_stages} middle PP stages available.\"" + where)
    if middle_stages and middle_layers % middle_stages:
        return (f"{counts} with PP{pp} and {layers} layers leave {middle_layers} layers for {middle_stages} middle "
                f"stages: megatron-core's TransformerConfig raises \"number of layers at middle stage: "
                f"{middle_layers} must be divisible bythe middle pipeline model parallel size {middle_stages}\""
                + where)
    if middle_stages and vpp is not None and (middle_layers // middle_stages) % vpp:
        per_rank = middle_layers // middle_stages
        return (f"{counts} with PP{pp}, VPP{vpp} and {layers} layers leave {per_rank} layers per middle rank: "
                f"megatron-core's TransformerConfig raises \"number of layers on each middle pipeline rank:{per_rank} "
                f"must be divisible by virtualpipeline parallel degree {vpp}\"" + where)
    return ""


# What Bridge's training runner rebuilds a recipe's pipeline split after (recipe_runner.sync_model_pipeline_layout)
_TOPOLOGY = ("model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size")
# What a recipe registers for the runner to build its layout again with the sizes the command line gives
_LAYOUT_BUILDER = "model._pipeline_model_parallel_layout_builder"


def _by_command_line(scope: Scope, key: str) -> bool:
    """Whether `key`'s effective value is written by a Hydra override on the unit's command line."""
    scope.key(key)
    written = scope.lookup(key).assignment
    return written is not None and written.source is Source.HYDRA


def _topology_by_command_line(scope: Scope) -> bool:
    """Whether a Bridge launch or override file's command line changes PP or VP without setting the layout: what
    makes Bridge's training runner ask the recipe's layout builder again (recipe_runner.sync_model_pipeline_layout
    returns early otherwise)."""
    return scope.names.get("unit_kind") in ("yaml", "command") and scope.names.get("defaults") != "mlm-cli" and \
        any(_by_command_line(scope, key) for key in _TOPOLOGY) and \
        not _by_command_line(scope, "model.pipeline_model_parallel_layout")


def _builder_registered(scope: Scope) -> bool:
    """Whether the recipe registered a layout builder (`cfg.model._pipeline_model_parallel_layout_builder = ...`,
    read from the tree), which the runner calls after PP/VP overrides. Without one it leaves the recipe's layout as
    it was built, for the old sizes (Bridge PRs 5578 and 5708 fixed GLM-4.5V's and Moonlight's recipes, whose
    layouts were stale after a PP override, by registering one)."""
    scope.key(_LAYOUT_BUILDER)
    builder = scope.lookup(_LAYOUT_BUILDER).assignment
    return builder is not None and builder.value is not None


@needs_scope
def virtual_stages_without_pipeline(scope: Scope) -> object:
    """Whether a Megatron Bridge unit sets virtual_pipeline_model_parallel_size at pipeline size 1: Bridge's
    initialization hands both to megatron-core's initialize_model_parallel (training/initialize.py), which raises
    "pipeline-model-parallel size should be greater than 1 with interleaved schedule" for any VPP that is not None
    (parallel_state.py, 0.16.1 to Megatron-LM main), before the model is built. Not with dist.use_decentralized_pg
    (Bridge builds its process groups itself), nor for Megatron-LM's flags (validate_args checks interleaving
    first) or a plain megatron-core program (it calls initialize_model_parallel itself); nor where a custom layout
    gives the stages (TransformerConfig derives VPP from it). Judged on known values only: a virtual size offlint
    cannot read is common (a unit that leaves it to a recipe it does not follow), and is no sign of a mistake."""
    if scope.names.get("defaults") == Defaults.MLM_CLI.value or scope.names.get("framework") == "megatron-core" or \
            scope.names.get("unit_kind") == "recipe" and scope.lookup("train.micro_batch_size").state == "unknown":
        return False  # (a recipe that builds no ConfigContainer, whose train section is Bridge's alone: some program)
    vpp, pp = scope.key("model.virtual_pipeline_model_parallel_size"), scope.key("model.pipeline_model_parallel_size")
    if vpp in (None, UNKNOWN) or not isinstance(pp, int) or isinstance(pp, bool) or pp > 1:
        return False
    layout = scope.key("model.pipeline_model_parallel_layout")
    return layout in (None, "") and _own_process_groups(scope) is False


def _own_process_groups(scope: Scope) -> object:
    """Whether Bridge builds the process groups itself (dist.use_decentralized_pg; DistributedInitConfig's default is
    False, and a unit that does not set it has the default); UNKNOWN where the unit sets it to a value offlint
    cannot read."""
    value = scope.lookup("dist.use_decentralized_pg")  # (not noted as read: its default is known)
    if value.assignment is None:
        return False
    return True if value.value is True else UNKNOWN if value.is_unknown else False


def _layout_rebuilt(scope: Scope) -> bool:
    """Whether the layout megatron-core gets is one the recipe's builder makes for the command line's PP and VP, not
    the one offlint read."""
    return _topology_by_command_line(scope) and _builder_registered(scope)


@needs_scope
def pipeline_layout_refusal(scope: Scope) -> object:
    """Why megatron-core refuses the unit's custom pipeline layout (`pipeline_model_parallel_layout`), in its words;
    "" when it accepts it. TransformerConfig.__post_init__ raises when the layout comes with first/last-stage counts
    or a split that counts the embedding or loss, then parses it (PipelineParallelLayerLayout) and checks it against
    PP, VPP, num_layers and mtp_num_layers (validate_layer_layout; offlint/pipeline_layout.py mirrors both). Not
    judged for hybrid models (their layer pattern decides), and "" when a value it needs is unknown or the layout
    is not one offlint reads: no crash is claimed on a layout offlint cannot read. Judged where the layout reaches
    megatron-core as written: Megatron-LM's flags, plain megatron-core programs and Megatron Bridge's recipe
    functions; in a Bridge launch or override file, a layout it writes itself, and a recipe's or YAML file's
    layout that the command line's PP or VP meets: Bridge's training runner keeps a layout the command line sets
    (as its performance overrides do for DeepSeek-V3 and Kimi K2) and, after PP/VP overrides, builds the layout
    again only through the recipe's registered builder (`sync_model_pipeline_layout`,
    scripts/training/recipe_runner.py; _layout_rebuilt); a recipe's layout with the recipe's own sizes is judged
    in the recipe's unit."""
    if scope.names.get("defaults") != "mlm-cli" and scope.names.get("framework") != "megatron-core" and \
            scope.names.get("unit_kind") != "recipe":
        if scope.names.get("unit_kind") not in ("yaml", "command"):
            return ""
        scope.key("model.pipeline_model_parallel_layout")
        written = scope.lookup("model.pipeline_model_parallel_layout").assignment
        if written is None:
            return ""
        topology = _topology_by_command_line(scope)
        if topology and _builder_registered(scope):
            return ""  # PP/VP from the command line: the recipe's builder makes the layout again
        if written.source not in (Source.HYDRA, Source.YAML) and not topology:
            return ""  # the recipe's own layout with the recipe's own sizes: judged in the recipe's unit

    layout = scope.key("model.pipeline_model_parallel_layout")
    if layout is UNKNOWN or layout in (None, ""):
        return ""
    pp, vpp, layers, mtp = (scope.key(f"model.{name}") for name in (
        "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "num_layers", "mtp_num_layers"))
    hybrid = [scope.key(f"model.{name}") for name in ("hybrid_layer_pattern", "hybrid_override_pattern")]
    others = [scope.key(f"model.{name}") for name in ("num_layers_in_first_pipeline_stage",
                                                      "num_layers_in_last_pipeline_stage",
                                                      "account_for_embedding_in_pipeline_split",
                                                      "account_for_loss_in_pipeline_split")]
    if not is_whole(pp) or pp < 1 or vpp is UNKNOWN or not (vpp is None or is_whole(vpp)):
        return ""
    if any(v is not UNKNOWN and v for v in others):
        return ("pipeline_model_parallel_layout is set with first/last-stage layer counts or an embedding/loss "
                "counted in the split: megatron-core's TransformerConfig raises \"ValueError: "
                "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments.\"")
    # The counts need the sizes, and no hybrid layer pattern; the stages against PP and VPP, the embedding and the
    # loss are refused whatever they are (or the other pipeline arguments, if set, raise first).
    counts = is_whole(layers) and (mtp is None or is_whole(mtp)) and all(v in (None, "") for v in hybrid) and \
        UNKNOWN not in others
    stages = pipeline_layout.stages_of(layout)
    why, counted = pipeline_layout.refusal(stages, pp, vpp, layers, mtp, counts) if stages is not None else ("", "")
    if not why or why in pipeline_layout.MTP_REFUSALS and checkout_lacks(scope, "layout-mtp-count"):
        return ""  # (a checkout from before the MTP checks: MTP layers on the last stage, whatever the layout says)
    sizes = [f"PP{pp}"] + [f"VPP{vpp}"] * (vpp is not None) + [f"num_layers={layers}"] * is_whole(layers) + \
        [f"mtp_num_layers={mtp}"] * (mtp is not UNKNOWN)
    return (f"pipeline_model_parallel_layout {fmt(layout)} with {', '.join(sizes)}" + (f" ({counted})" if counted
            else "") + f": megatron-core's TransformerConfig asserts \"{why}\" when it builds the config")
