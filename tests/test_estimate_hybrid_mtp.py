"""Multi-token prediction in hybrid Mamba models (megatron-core's HybridModel with a "<main>/<depth>/..." pattern,
which Bridge's HybridModelProvider writes from mtp_hybrid_override_pattern): how the configuration is read, what
is refused and why, the parameters (checked against real megatron-core HybridModels built on CPU) and what each
depth saves per micro-batch.

megatron-core 0.16.1, the installed one, has no MTP in its MambaModel; the parameter checks build a HybridModel of
the megatron-core 0.19.2 source unpacked under .mcore/ (scripts/fetch_mcore_sdist.py 0.19.2; its hybrid and MTP
modules are those of Bridge 067f987's megatron-core 2a75ac12 but for inference-only changes) in a subprocess, and
are skipped without it. The stand-ins are those of tests/test_estimate_params_hybrid.py (mamba_ssm, causal_conv1d
and Transformer Engine are not installed): each holds exactly the parameters of what it replaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from offlint.estimate import activations as act
from offlint.estimate import params, precision
from offlint.estimate.inputs import ModelShape, Parallelism, read_inputs
from offlint.estimate.memory import estimate
from offlint.types import Unknown
from tests.estimate_helpers import located_lookup

# A small Nemotron-3-like hybrid (Mamba, attention and MoE layers) as a Bridge recipe sets it: the provider's
# fields, with the MTP depths given as mtp_hybrid_override_pattern.
_MAIN = "MEM*EM"
_RECIPE = {"model.hidden_size": 256, "model.num_attention_heads": 8, "model.num_query_groups": 2,
           "model.kv_channels": 32, "model.ffn_hidden_size": 384, "model.vocab_size": 1024,
           "model.seq_length": 512, "model.hybrid_layer_pattern": _MAIN, "model.mamba_num_heads": 16,
           "model.mamba_head_dim": 32, "model.mamba_num_groups": 2, "model.mamba_state_dim": 32,
           "model.num_moe_experts": 8, "model.moe_ffn_hidden_size": 128, "model.moe_router_topk": 2,
           "model.moe_shared_expert_intermediate_size": 256,
           "model.mtp_num_layers": 2, "model.mtp_hybrid_override_pattern": "*E", "model.mtp_use_repeated_layer": True,
           "train.micro_batch_size": 1, "train.global_batch_size": 8}


_lookup = located_lookup


def _read(**changes):
    values = {k: v for k, v in (_RECIPE | changes).items() if v is not _UNSET}
    return read_inputs(_lookup(values))


_UNSET = object()  # a key the recipe leaves at the provider's default


# Reading: HybridModelProvider.finalize (Bridge 067f987 models/hybrid/hybrid_provider.py:198-233) and HybridModel.

def test_bridges_override_pattern_gives_the_depths():
    inputs = _read()
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert (m.hybrid_pattern, m.num_layers, m.hybrid_mtp_pattern) == (_MAIN, 6, "*E")
    assert (m.mtp_num_layers, m.mtp_repeated_layer) == (2, True)


@pytest.mark.parametrize("changes,expected", [
    # one copy of the pattern per depth, each its own weights; the provider sets mtp_num_layers to the copies
    ({"model.mtp_use_repeated_layer": False}, (2, False, "*E")),
    # a repeated layer with mtp_num_layers None: one copy, and finalize sets mtp_num_layers to it
    ({"model.mtp_num_layers": None}, (1, True, "*E")),
    # no copies without a repeated layer: "<main>/" has no depths
    ({"model.mtp_use_repeated_layer": False, "model.mtp_num_layers": _UNSET}, (0, False, None)),
    # depths written into the pattern, as many as mtp_num_layers
    ({"model.mtp_hybrid_override_pattern": _UNSET, "model.mtp_use_repeated_layer": False,
      "model.hybrid_layer_pattern": _MAIN + "/M-/M-"}, (2, False, "M-")),
    # ... or a repeated layer run mtp_num_layers times whatever the count of depths
    ({"model.mtp_hybrid_override_pattern": _UNSET, "model.hybrid_layer_pattern": _MAIN + "/*E"}, (2, True, "*E")),
    # the override replaces the depths the written pattern has
    ({"model.hybrid_layer_pattern": _MAIN + "/M/M", "model.mtp_use_repeated_layer": False}, (2, False, "*E")),
    # mtp_num_layers None: mtp_on_this_rank is False and HybridModel builds no MTP block
    ({"model.mtp_hybrid_override_pattern": _UNSET, "model.hybrid_layer_pattern": _MAIN + "/*E/*E",
      "model.mtp_num_layers": None}, (0, False, None)),
    # MTP depths without depths in the pattern: HybridModel builds none
    ({"model.mtp_hybrid_override_pattern": _UNSET}, (0, False, None)),
])
def test_the_depths_hybrid_model_builds(changes, expected):
    inputs = _read(**changes)
    assert inputs.complete, (inputs.unknown, inputs.unsupported)
    m = inputs.model
    assert (m.mtp_num_layers, m.mtp_num_layers > 0 and m.mtp_repeated_layer, m.hybrid_mtp_pattern) == expected
    assert (m.hybrid_pattern, m.num_layers) == (_MAIN, 6)


@pytest.mark.parametrize("changes,reason", [
    ({"model.mtp_num_layers": _UNSET}, "asserts mtp_num_layers > 0"),  # repeated layer, provider default 0
    ({"model.mtp_num_layers": 0}, "asserts mtp_num_layers > 0"),
    ({"model.mtp_hybrid_override_pattern": _UNSET, "model.mtp_use_repeated_layer": False, "model.mtp_num_layers": 3,
      "model.hybrid_layer_pattern": _MAIN + "/*E/*E"}, "mtp_num_layers=3 with 2 MTP depths"),
    ({"model.mtp_hybrid_override_pattern": _UNSET, "model.hybrid_layer_pattern": _MAIN + "/*E/M"}, "differ"),
    ({"model.mtp_hybrid_override_pattern": "*G"}, "MTP layer symbols 'G'"),
    ({"model.mtp_hybrid_override_pattern": "*|E"}, "MTP layer symbols '|'"),
    ({"model.moe_paged_stash": True}, "moe_paged_stash with hybrid MTP depths"),
    ({"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": 2},
     "asserts recompute_num_layers == 1"),
])
def test_what_is_not_modelled_is_refused_with_its_reason(changes, reason):
    inputs = _read(**changes)
    assert any(reason in why for why in inputs.unsupported), inputs.unsupported


def test_unknown_depths_leave_the_estimate_unknown():
    inputs = _read(**{"model.mtp_num_layers": Unknown("helper")})
    assert "model.mtp_num_layers" in inputs.unknown and not inputs.complete
    inputs = _read(**{"model.mtp_hybrid_override_pattern": Unknown("helper")})
    assert "model.mtp_hybrid_override_pattern" in inputs.unknown


# Parameters: the depth's norms, eh_proj and layers; where they sit in the pipeline.

def _shape(**changes) -> ModelShape:
    return replace(_read().model, **changes)


def test_a_depth_holds_its_norms_eh_proj_and_the_layers_of_its_pattern():
    m = _shape(mtp_repeated_layer=False)
    h = m.hidden_size
    depth = params.Split(tp=2 * h * h, replicated=3 * h) + params.hybrid_attention(m) + params.moe_block(m)
    assert params.mtp_block(m) == depth * 2
    assert params.mtp_block(replace(m, mtp_repeated_layer=True)) == depth  # one set of weights for every depth
    # MoE parameters a token passes through: top-k of each depth's experts as of the decoder's
    unused = (m.num_moe_experts - m.moe_router_topk) * params.routed_expert(m)
    decoder_moe = m.hybrid_pattern.count("E")
    assert params.active(m) == params.total(m) - unused * (decoder_moe + 2)


def test_the_depths_the_embedding_copy_and_the_final_norm_are_on_the_last_stage():
    m = _shape(hybrid_pattern="MEM|*EM", tied_embeddings=True)
    first, last = params.stages(m, Parallelism(pp=2))
    decoder = [sum((params.layer(m, i) for i in range(3 * s, 3 * s + 3)), params.Split()) for s in (0, 1)]
    assert first.params == decoder[0] + params.embedding(m) and not first.mtp_layers
    # HybridStack's final norm is where post_process is (not with the last decoder layer, as a GPT model's with
    # MTP); the MTP stage builds an embedding and, not being the first, allocates the tied output weight
    assert last.params == decoder[1] + params.final_norm(m) + params.output_layer(m) + params.mtp_block(m) + \
        params.embedding(m)
    assert last.mtp_layers == 2
    # a last stage of no decoder layers (an empty segment after the pipe): the final norm is still there
    m = replace(m, hybrid_pattern="MEM*EM|")
    first, last = params.stages(m, Parallelism(pp=2))
    assert last.layers == 0 and first.params == sum((params.layer(m, i) for i in range(6)), params.embedding(m))
    assert last.params == params.final_norm(m) + params.output_layer(m) + params.mtp_block(m) + params.embedding(m)


# The same against megatron-core's own HybridModel (0.19.2 source), built on CPU in a subprocess.
SDISTS = [tree for tree in sorted((Path(__file__).resolve().parent.parent / ".mcore").glob("megatron_core-*"))
          if (tree / "megatron/core/models/hybrid/hybrid_model.py").is_file()]
PROBE = r"""
import contextlib, json, socket, sys
import torch
import torch.distributed as dist
import torch.nn.functional as F

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
from megatron.core import parallel_state
parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)

import megatron.core.models.hybrid.hybrid_block as block
import megatron.core.ssm.mamba_context_parallel as context_parallel
import megatron.core.ssm.mamba_mixer as mixer
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
from megatron.core.transformer.torch_norm import WrappedTorchNorm


class NoParams(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()


class Column(ColumnParallelLinear):  # TEColumnParallelLinear (eh_proj)
    def __init__(self, input_size, output_size, *, config, init_method, gather_output, bias, skip_bias_add,
                 is_expert, tp_comm_buffer_name=None, tp_group=None, **kwargs):
        super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                         gather_output=gather_output, skip_bias_add=skip_bias_add, is_expert=is_expert,
                         tp_group=tp_group)


class NormColumn(Column):  # TELayerNormColumnParallelLinear: the fused norm's weight (and bias) over the input
    def __init__(self, input_size, output_size, *, config, **kwargs):
        super().__init__(input_size, output_size, config=config, **kwargs)
        self.layer_norm_weight = torch.nn.Parameter(torch.ones(input_size))
        if config.normalization == "LayerNorm":
            self.layer_norm_bias = torch.nn.Parameter(torch.zeros(input_size))


class Row(RowParallelLinear):  # TERowParallelLinear
    def __init__(self, input_size, output_size, *, config, init_method, bias, input_is_parallel, skip_bias_add,
                 is_expert, tp_comm_buffer_name=None, tp_group=None, **kwargs):
        super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                         input_is_parallel=input_is_parallel, skip_bias_add=skip_bias_add, is_expert=is_expert,
                         tp_group=tp_group)


class GatedNorm(torch.nn.Module):  # mamba_ssm's gated RMSNorm: one weight over its width
    def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=False, device=None, dtype=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))


class NoFork:
    @staticmethod
    def fork(*args):
        return contextlib.nullcontext()


torch.cuda.current_device = lambda: "cpu"
mixer.HAVE_MAMBA_SSM = mixer.HAVE_EINOPS = context_parallel.HAVE_EINOPS = True
mixer.ExtendedRMSNorm, mixer.get_cuda_rng_tracker = GatedNorm, NoFork
block.TENorm = WrappedTorchNorm  # the decoder's final norm

from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
from megatron.core.models.hybrid.hybrid_block import HybridStack, HybridStackSubmodules
from megatron.core.models.hybrid.hybrid_model import HybridModel
from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
from megatron.core.ssm.mlp_layer import MLPLayer
from megatron.core.transformer import TransformerConfig
from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.mlp import MLP, MLPSubmodules
from megatron.core.transformer.multi_token_prediction import (
    MultiTokenPredictionBlock, MultiTokenPredictionBlockSubmodules, MultiTokenPredictionLayer,
    MultiTokenPredictionLayerSubmodules)
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_layer import (MoETransformerLayer, TransformerLayer,
                                                         TransformerLayerSubmodules)


def spec(experts):
    # The shape of megatron-core's hybrid_stack_spec (models/hybrid/hybrid_layer_specs.py) with the stand-ins,
    # its MTP block spec included: enorm, hnorm, eh_proj and final_layernorm around the depth's HybridStack.
    return ModuleSpec(module=HybridStack, submodules=HybridStackSubmodules(
        mamba_layer=ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
            mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(in_proj=NormColumn, out_proj=Row)),
            mamba_bda=get_bias_dropout_add)),
        attention_layer=ModuleSpec(module=TransformerLayer, submodules=TransformerLayerSubmodules(
            self_attention=ModuleSpec(module=SelfAttention, params={"attn_mask_type": AttnMaskType.causal},
                                      submodules=SelfAttentionSubmodules(linear_qkv=NormColumn,
                                                                         core_attention=NoParams, linear_proj=Row)),
            self_attn_bda=get_bias_dropout_add)),
        mlp_layer=ModuleSpec(module=MLPLayer, submodules=TransformerLayerSubmodules(
            mlp=ModuleSpec(module=MLP, submodules=MLPSubmodules(linear_fc1=NormColumn, linear_fc2=Row)),
            mlp_bda=get_bias_dropout_add)),
        moe_layer=ModuleSpec(module=MoETransformerLayer, submodules=TransformerLayerSubmodules(
            pre_mlp_layernorm=WrappedTorchNorm,
            mlp=get_moe_module_spec(use_te=False, num_experts=experts or 8, moe_grouped_gemm=False),
            mlp_bda=get_bias_dropout_add)),
        mtp_block_spec=ModuleSpec(module=MultiTokenPredictionBlock, submodules=MultiTokenPredictionBlockSubmodules(
            layer_specs=[ModuleSpec(module=MultiTokenPredictionLayer, submodules=MultiTokenPredictionLayerSubmodules(
                enorm=WrappedTorchNorm, hnorm=WrappedTorchNorm, eh_proj=Column, mtp_model_layer=None,
                layer_norm=WrappedTorchNorm))])),
    ))


out = []
for case in json.loads(sys.argv[1]):
    s = case["shape"]
    config = TransformerConfig(
        num_layers=s["num_layers"], hidden_size=s["hidden_size"], ffn_hidden_size=s["ffn_hidden_size"],
        num_attention_heads=s["num_attention_heads"], num_query_groups=s["num_query_groups"],
        kv_channels=s["kv_channels"], add_bias_linear=s["add_bias_linear"], activation_func=F.gelu,
        normalization="RMSNorm" if s["rms_norm"] else "LayerNorm", use_cpu_initialization=True,
        mamba_num_heads=s["mamba_num_heads"], mamba_head_dim=s["mamba_head_dim"],
        mamba_num_groups=s["mamba_num_groups"], mamba_state_dim=s["mamba_state_dim"],
        num_moe_experts=s["num_moe_experts"], moe_ffn_hidden_size=s["moe_ffn_hidden_size"],
        moe_router_topk=s["moe_router_topk"],
        moe_shared_expert_intermediate_size=s["moe_shared_expert_intermediate_size"],
        mtp_num_layers=s["mtp_num_layers"], mtp_use_repeated_layer=s["mtp_repeated_layer"])
    model = HybridModel(config=config, hybrid_stack_spec=spec(s["num_moe_experts"]), vocab_size=s["vocab_size"],
                        max_sequence_length=s["seq_length"], hybrid_layer_pattern=case["pattern"],
                        pre_process=case["pre_process"], share_embeddings_and_output_weights=s["tied_embeddings"],
                        position_embedding_type="none")
    counts = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        key = ".".join(parts[:3] if parts[0] == "mtp" else parts[:2] if parts[1] == "final_norm" else parts[:1])
        counts[key] = counts.get(key, 0) + p.numel()
        if parts[0] == "mtp" and parts[3] == "mtp_model_layer":
            inner = ".".join(parts[:6])
            counts[inner] = counts.get(inner, 0) + p.numel()
    out.append(counts)
print(json.dumps(out))
"""

_SMALL = dict(num_layers=4, hidden_size=64, ffn_hidden_size=96, num_attention_heads=4, num_query_groups=2,
              kv_channels=16, vocab_size=100, seq_length=16, gated_linear_unit=False, add_bias_linear=False,
              rms_norm=True, tied_embeddings=False, learned_position_embeddings=False, hybrid_pattern="ME*M",
              mamba_num_heads=8, mamba_head_dim=16, mamba_num_groups=2, mamba_state_dim=8, num_moe_experts=4,
              moe_ffn_hidden_size=40, moe_router_topk=2, moe_shared_expert_intermediate_size=48)
CASES = {  # name: (shape, the pattern HybridModel is given, pre_process)
    "nano-like-two-depths": (_SMALL | dict(mtp_num_layers=2, hybrid_mtp_pattern="*E"), "ME*M/*E/*E", True),
    "repeated-layer": (_SMALL | dict(mtp_num_layers=2, mtp_repeated_layer=True, hybrid_mtp_pattern="*E"),
                       "ME*M/*E/*E", True),
    "mamba-mlp-depth-layernorm": (_SMALL | dict(mtp_num_layers=1, hybrid_mtp_pattern="M-", rms_norm=False),
                                  "ME*M/M-", True),
    # the last of two stages: the MTP stage builds an embedding and the tied output weight
    "last-stage-tied": (_SMALL | dict(mtp_num_layers=1, hybrid_mtp_pattern="*E", tied_embeddings=True),
                        "ME*M/*E", False),
}


@pytest.fixture(scope="module")
def built():
    if not SDISTS:
        pytest.skip("no megatron-core source tree with models/hybrid under .mcore/ (scripts/fetch_mcore_sdist.py "
                    "0.19.2)")
    pytest.importorskip("torch", reason="torch is needed to build real megatron-core models")
    cases = [dict(shape=ModelShape(**shape).__dict__ | {"mtp_repeated_layer": shape.get("mtp_repeated_layer", False)},
                  pattern=pattern, pre_process=pre) for shape, pattern, pre in CASES.values()]
    env = {**os.environ, "PYTHONPATH": str(SDISTS[-1])}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cases)], capture_output=True, text=True,
                         env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(zip(CASES, json.loads(out.stdout.strip().splitlines()[-1])))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_parameters_equal_megatron_cores_hybrid_model(name, built):
    shape, _, pre_process = CASES[name]
    m, real = ModelShape(**shape), built[name]
    depths = 1 if m.mtp_repeated_layer else m.mtp_num_layers
    assert sum(v for k, v in real.items() if k.count(".") == 2) == params.mtp_block(m).total
    assert len([k for k in real if k.count(".") == 2]) == depths
    for j, kind in enumerate(m.hybrid_mtp_pattern):  # each layer of a depth as the decoder's layer of its kind
        assert real[f"mtp.layers.0.mtp_model_layer.layers.{j}"] == params.HYBRID_LAYERS[kind](m).total, kind
    if pre_process:
        assert real["embedding"] + real["decoder"] + real["decoder.final_norm"] + real["output_layer"] + \
            params.mtp_block(m).total == params.total(m)
    else:  # what offlint puts on the last of two stages besides its decoder layers
        two = replace(m, hybrid_pattern="ME|*M")
        last = params.stages(two, Parallelism(pp=2))[-1]
        layers = sum((params.layer(two, i) for i in (2, 3)), params.Split())
        assert last.params.total - layers.total == real["embedding"] + real["output_layer"] + \
            real["decoder.final_norm"] + params.mtp_block(m).total


# Activations: what one depth saves per micro-batch.

def test_a_depth_saves_its_inputs_its_layers_and_its_logits():
    inputs = _read()
    m, p, t = inputs.model, inputs.parallel, inputs.training
    n, h = m.seq_length, m.hidden_size
    depth = act.mtp_depth(m, p, t).terms
    assert depth["mtp_embedding"] == act.embedding_terms(m, p, t) == 8 * n  # the shifted token ids
    assert depth["mtp_norm_inputs"] == 2 * 2 * n * h  # enorm's and hnorm's inputs
    assert depth["mtp_eh_proj_input"] == 2 * n * 2 * h  # the two normed tensors concatenated
    assert depth["mtp_output"] == act.output_terms(m, p, t)  # final norm, output layer input, fp32 logits
    attention = act.layer_terms(m, p, t, False, hybrid="*").terms
    moe = act.layer_terms(m, p, t, True, hybrid="E").terms
    assert {k: v for k, v in depth.items() if k.startswith("mtp_0*_")} == {f"mtp_0*_{k}": v for k, v in
                                                                           attention.items()}
    assert {k: v for k, v in depth.items() if k.startswith("mtp_1E_")} == {f"mtp_1E_{k}": v for k, v in moe.items()}
    assert sum(depth.values()) == pytest.approx(8 * n + 8 * n * h + sum(attention.values()) + sum(moe.values()) +
                                                act.output_terms(m, p, t))


def _part(stage, name):
    return next(x.bytes for x in stage.parts if x.name.startswith(name))


def test_the_last_stage_holds_every_depth_and_its_weights():
    inputs = _read(**{"model.hybrid_layer_pattern": "MEM|*EM", "model.pipeline_model_parallel_size": 2})
    assert inputs.complete, inputs.unsupported
    m, p, t = inputs.model, inputs.parallel, inputs.training
    first, last = estimate(inputs, world_size=2).stages
    assert not any(x.name.startswith("activations: multi-token") for x in first.parts)
    assert _part(last, "activations: multi-token prediction (2 depths)") == pytest.approx(
        2 * act.mtp_depth(m, p, t).total)
    # fp32 weights (no mixed precision in this fixture): the stage's parameters with one set for both depths
    stage = params.stages(m, p)[-1]
    assert _part(last, "weights") == pytest.approx(sum(stage.params.per_rank(p)) * 4)


def test_full_recompute_keeps_a_depths_inputs_and_rebuilds_one_layer_at_a_time():
    inputs = _read(**{"model.recompute_granularity": "full", "model.recompute_method": "uniform",
                      "model.recompute_num_layers": 1})
    assert inputs.complete, inputs.unsupported
    m, p, t = inputs.model, inputs.parallel, inputs.training
    n, h = m.seq_length, m.hidden_size
    kept = act.mtp_depth(m, p, t).terms
    assert kept == {"mtp_embedding": 8 * n, "mtp_checkpoint_inputs": 4 * n * h,
                    "mtp_output": act.output_terms(m, p, t) - 2 * n * h}
    plain = replace(t, recompute_granularity=None)
    layers = [act.layer_terms(m, p, plain, kind == "E", hybrid=kind).total for kind in "*E"]
    # norms' and eh_proj's inputs, the depth's HybridStack checkpointing each layer's input again, the final
    # norm's input, and the layer being rebuilt
    assert act.mtp_rebuilt(m, p, t) == 4 * n * h + 4 * n * h + 2 * 2 * n * h + 2 * n * h + max(layers)
    assert act.mtp_rebuilt(m, p, t) < act.mtp_depth(m, p, plain).total
    stage = estimate(inputs).stages[0]
    assert _part(stage, "activations: recompute working set") >= act.mtp_rebuilt(m, p, t)


def test_block_recompute_checkpoints_only_the_depths_first_layers():
    inputs = _read(**{"model.recompute_granularity": "full", "model.recompute_method": "block",
                      "model.recompute_num_layers": 1})
    assert inputs.complete, inputs.unsupported
    m, p, t = inputs.model, inputs.parallel, inputs.training
    depth = act.mtp_depth(m, p, t).terms
    assert depth["mtp_0*_checkpoint_input"] == 2 * m.seq_length * m.hidden_size
    assert not any(k.startswith("mtp_0*_") and k != "mtp_0*_checkpoint_input" for k in depth)
    plain = replace(t, recompute_granularity=None)
    moe = act.layer_terms(m, p, plain, True, hybrid="E").terms
    assert {k: v for k, v in depth.items() if k.startswith("mtp_1E_")} == {f"mtp_1E_{k}": v for k, v in moe.items()}
    assert act.mtp_rebuilt(m, p, t) == act.layer_terms(m, p, plain, False, hybrid="*").total


def test_fp8_quantizes_every_depths_gemms_and_saved_inputs():
    inputs = _read(**{"mixed_precision": "bf16_with_fp8_current_scaling_mixed"})
    assert inputs.complete, inputs.unsupported
    m, p, t = inputs.model, inputs.parallel, inputs.training
    h = m.hidden_size
    dense, replicated, expert = precision.mtp_gemm_weights(m)
    attention, moe = precision.gemm_weights(m, False, "*"), precision.gemm_weights(m, True, "E")
    assert (dense, replicated, expert) == (2 * h * h + attention[0] + moe[0], attention[1] + moe[1],
                                           attention[2] + moe[2])  # one set: the repeated layer
    depth = act.mtp_depth(m, p, t).terms
    assert depth["mtp_eh_proj_input"] == 4 * m.seq_length * h / 2  # 1 byte per element
    quantized = act.layer_terms(m, p, t, True, fp8=True, hybrid="E").terms
    assert {k: v for k, v in depth.items() if k.startswith("mtp_1E_")} == {f"mtp_1E_{k}": v for k, v in
                                                                           quantized.items()}


def test_a_mamba_depth_brings_the_scan_working_set_to_its_stage():
    inputs = _read(**{"model.hybrid_layer_pattern": "M*-|E-E", "model.pipeline_model_parallel_size": 2,
                      "model.mtp_hybrid_override_pattern": "M-"})
    assert inputs.complete, inputs.unsupported
    assert any(x.name.startswith("Mamba chunked-scan states") for x in estimate(inputs, world_size=2).stages[1].parts)
