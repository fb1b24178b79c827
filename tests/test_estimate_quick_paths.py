"""The memory model's quick paths give the answers of the plain ones they stand for: a `filled` dataclass's __init__
builds the object the generated one builds (and `rebuilt` dataclasses.replace's), read_inputs' `sizes_first` names
the unknown sizes the whole reading names, model_state the figures of the whole one-stage estimate, and a stage's
parameter count by kind the sum layer by layer."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import replace

import pytest

from offlint.estimate import activations, memory, oom, params
from offlint.estimate.inputs import read_inputs
from offlint.estimate.shapes import (ExpertBudget, FrozenLM, Inputs, LowPrecision, ModelShape, Parallelism, Peft,
                                     TrainedVLM, Training, WanShape, filled, rebuilt)
from offlint.types import Unknown
from tests.estimate_helpers import lookup, vlm_dense, vlm_train

FILLED = (ModelShape, WanShape, Parallelism, LowPrecision, ExpertBudget, Peft, FrozenLM, TrainedVLM, Training,
          params.Split, params.Stage, activations.LayerActivations)


@pytest.mark.parametrize("cls", FILLED, ids=lambda cls: cls.__name__)
def test_a_filled_init_takes_the_fields_and_builds_what_the_generated_one_builds(cls):
    own = dataclasses.fields(cls)
    signature = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [(p.name, p.default) for p in signature] == \
        [(f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default) for f in own]
    given = {f.name: (f"<{f.name}>" if f.default is dataclasses.MISSING else f.default) for f in own}
    made = cls(**given)
    expected = object.__new__(cls)
    for name, value in given.items():  # what the generated __init__ of a frozen dataclass does, field by field
        object.__setattr__(expected, name, value)
    assert made == expected and made.__dict__ == expected.__dict__ and list(made.__dict__) == list(given)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, own[0].name, 1)
    with pytest.raises(TypeError):
        cls(**given, not_a_field=1)
    changed = {own[-1].name: "<changed>"}
    assert rebuilt(made, changed).__dict__ == replace(made, **changed).__dict__
    assert type(rebuilt(made, changed)) is cls and made.__dict__ == expected.__dict__  # (the original unchanged)


def test_filled_refuses_what_its_init_would_not_build():
    @dataclasses.dataclass(frozen=True)
    class Later:
        a: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True)
    class Factory:
        a: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class Hidden:
        a: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True)
    class Named:
        made: int

    for cls in (Later, Factory, Hidden, Named):
        with pytest.raises(TypeError):
            filled(cls)


SIZES = {"model.num_layers": 4, "model.hidden_size": 128, "model.num_attention_heads": 4, "model.vocab_size": 1024,
         "model.seq_length": 256}
WAN = {"model.crossattn_emb_size": 4096, "model.text_dim": 4096, "model.in_channels": 16, "model.out_channels": 16}


@pytest.mark.parametrize("values", [
    SIZES,
    {**SIZES, "model.hidden_size": Unknown("a parameter")},
    {**SIZES, "model.num_layers": Unknown("a parameter"), "model.vocab_size": Unknown("a parameter")},
    {k: v for k, v in SIZES.items() if k != "model.num_attention_heads"},
    {**SIZES, "model.vocab_size": Unknown("a parameter"), "optimizer.optimizer_cpu_offload": Unknown("a flag")},
    # A Wan model: read_wan drops the unknown vocabulary and sequence, so only the hidden size is named
    {**SIZES, **WAN, "model.hidden_size": Unknown("a parameter"), "model.vocab_size": Unknown("a parameter"),
     "model.seq_length": Unknown("a parameter")},
    {**SIZES, "model.crossattn_emb_size": Unknown("a parameter"), "model.hidden_size": Unknown("a parameter")},
    {**SIZES, "model.hybrid_override_pattern": "M*M*", "model.hidden_size": Unknown("a parameter")},
], ids=["complete", "hidden", "layers-vocab", "heads-unset", "vocab-only", "wan", "wan-unknown", "hybrid"])
def test_sizes_first_names_the_unknown_sizes_the_whole_reading_names(values):
    whole = read_inputs(lookup(values), "llama3_8b_pretrain_8gpu_h100_bf16_config")
    quick = read_inputs(lookup(values), "llama3_8b_pretrain_8gpu_h100_bf16_config", sizes_first=True)
    assert quick.complete is whole.complete
    if quick.model is None:  # stopped after the model
        assert any(key in whole.unknown for key in ("model.num_layers", "model.hidden_size",
                                                     "model.num_attention_heads"))
    else:
        assert repr(quick) == repr(whole)
    assert [k for k in oom.SIZE_KEYS if k in quick.unknown] == [k for k in oom.SIZE_KEYS if k in whole.unknown]
    expected = (None, [k for k in oom.SIZE_KEYS if k in whole.unknown] or sorted(whole.unknown)[:5], frozenset()) \
        if not whole.complete else None
    got = oom.inputs_for(lookup(values), "llama3_8b_pretrain_8gpu_h100_bf16_config")
    if expected is not None:
        assert got == expected


def _folded_plainly(inputs: Inputs) -> float:
    """model_state_at_pp1 as it was worked out: the whole estimate of the layout folded into one stage."""
    p = inputs.parallel
    one = inputs.with_(parallel=replace(p, pp=1, vpp=None, layout=None, first_stage_layers=None,
                                        last_stage_layers=None, account_for_embedding=False, account_for_loss=False))
    peak = oom.bound(one).peak
    return peak.of("weights") + peak.of("grads") + peak.of("optimizer")


MOE = replace(vlm_dense(), num_moe_experts=8, moe_ffn_hidden_size=256, moe_router_topk=2)


@pytest.mark.parametrize("model, parallel, training", [
    (vlm_dense(), Parallelism(pp=2), vlm_train()),
    (vlm_dense(), Parallelism(tp=2, pp=2, world_size=16), vlm_train()),
    (MOE, Parallelism(pp=4, ep=2, world_size=64), vlm_train()),
    (MOE, Parallelism(tp=2, ep=4, etp=1, pp=2), replace(vlm_train(), distributed_optimizer=False)),
    (vlm_dense(), Parallelism(pp=2, world_size=8), replace(vlm_train(), optimizer_cpu_offload=True,
                                                           optimizer_offload_fraction=0.5, precision_aware=True)),
    (vlm_dense(), Parallelism(world_size=8), replace(vlm_train(), fsdp="optim_grads_params")),
    (vlm_dense(), Parallelism(pp=2, world_size=8), replace(vlm_train(), peft=Peft(("linear_qkv", "linear_proj"), 16))),
    (vlm_dense(), Parallelism(pp=2), replace(vlm_train(), low_precision=LowPrecision("delayed", amax_history=1024))),
    (vlm_dense(), Parallelism(pp=2, world_size=8), replace(vlm_train(), low_precision=LowPrecision("mxfp8",
                                                                                                   params=True))),
])
def test_model_state_at_pp1_is_the_whole_folded_estimate_s(model, parallel, training):
    inputs = Inputs(model, parallel, training)
    assert oom.model_state_at_pp1(inputs) == _folded_plainly(inputs)  # the same floats, not approximately
    one = inputs.with_(parallel=replace(parallel, pp=1))
    for world in (None, 8, 1 << 20):
        peak = memory.estimate(one, world).peak
        assert memory.model_state(one, world) == peak.of("weights") + peak.of("grads") + peak.of("optimizer")


@pytest.mark.parametrize("by_kind, kinds", [
    ({"a": params.Split(3, 1, 0), "b": params.Split(5, 2, 7)}, ["a", "b", "a", "a", "b"]),
    ({"a": params.Split(10**30 + 1, 1, 2)}, ["a"] * 7),
    ({"a": params.Split(0.1, 0.2, 0.3), "b": params.Split(0.7, 0.1, 0.0)}, ["a", "b", "a"] * 5),  # floats: in turn
    ({}, []),
])
def test_a_stage_s_layers_sum_to_the_layer_by_layer_sum(by_kind, kinds):
    expected = params.Split()
    for kind in kinds:
        expected = expected + by_kind[kind]
    got = params._layers_sum(kinds, by_kind)
    assert [(n, type(n)) for n in (got.tp, got.replicated, got.expert)] == \
        [(n, type(n)) for n in (expected.tp, expected.replicated, expected.expert)]


# ---- the lower bound where the GPU count is unknown: DP at most global / micro ----------------------------------


def test_the_largest_world_a_configuration_runs_on():
    training = vlm_train()  # micro 2, global 16: at most 8-way data parallelism
    assert oom.largest_world(Inputs(vlm_dense(), Parallelism(tp=2, pp=2), training)) == 4 * 8
    # a MoE layout tiles the world in multiples of its fewest GPUs (lcm(TP x CP, ETP x EP) x PP = 16)
    moe = Inputs(MOE, Parallelism(tp=2, pp=2, ep=8), training)
    assert moe.parallel.min_world_size() == 16 and oom.largest_world(moe) == 32
    # a batch too small for the layout: its fewest GPUs; no global batch size: any data-parallel size
    assert oom.largest_world(Inputs(MOE, Parallelism(tp=2, pp=2, ep=64), training)) == 128
    unbounded = replace(training, global_batch_size=None)
    assert oom.largest_world(Inputs(vlm_dense(), Parallelism(tp=2, pp=2), unbounded)) == 4 * oom._ANY_DP


def test_the_bound_keeps_the_optimizer_shard_the_batch_sizes_leave():
    """Qwen3-VL 235B's SFT recipe (Bridge 0de165ffc-318c5ff03): global 32, micro 2. At any DP its bound fell 0.5
    GiB under an H100's usable 78.6 GiB and the real OOM went unreported; DP cannot exceed 16 there."""
    capped = Inputs(vlm_dense(), Parallelism(tp=2, pp=2), vlm_train())
    unbounded = capped.with_(training=replace(vlm_train(), global_batch_size=None))
    capped_peak, unbounded_peak = oom.bound(capped).peak, oom.bound(unbounded).peak
    assert capped_peak.of("optimizer") > unbounded_peak.of("optimizer") > 0
    assert oom.bound(capped).world_size == 32


def test_a_finding_says_how_the_bound_sized_the_job():
    training = vlm_train()  # micro 2, global 16
    assert oom.bound_size(Inputs(vlm_dense(), Parallelism(tp=2, pp=2), training)) == \
        "on up to 32 GPUs (the most its global and micro batch sizes allow)"
    assert oom.bound_size(Inputs(MOE, Parallelism(tp=2, pp=2, ep=64), training)) == \
        "on 128 GPUs (the fewest its layout runs on; its batch sizes allow fewer)"
    unbounded = replace(training, global_batch_size=None)
    assert oom.bound_size(Inputs(vlm_dense(), Parallelism(tp=2, pp=2), unbounded)) == "at any data-parallel size"
    assert oom.bound_size(Inputs(vlm_dense(), Parallelism(tp=2, pp=2, world_size=8), training)) == "on 8 GPUs"

