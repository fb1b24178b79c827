"""LoRA on a frozen base in the memory model (offlint/estimate/lora.py). Adapter sizes are checked against the
megatron-core linears Bridge's ParallelLinearAdapter builds, on the shapes of a real GPTModel's layers; the rest
is derived from the parameter counts and the rules docs/estimate.md ("PEFT (LoRA)") cites. The PEFT config is
read from recipes in Bridge's shapes (fixtures of our own).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint.estimate import activations, lora, memory, params
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Peft, Training, read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

MODEL = ModelShape(num_layers=4, hidden_size=1024, ffn_hidden_size=3584, num_attention_heads=8, num_query_groups=2,
                   kv_channels=128, vocab_size=32000, seq_length=2048, gated_linear_unit=True, tied_embeddings=False,
                   rms_norm=True, add_bias_linear=False)
TRAIN = Training(micro_batch_size=1, global_batch_size=64, distributed_optimizer=True, grads_fp32=True)
ALL = Peft(lora.TARGETS, 16)


def test_adapters_are_bridges_parallel_linear_adapter_on_the_real_layer_shapes(model_parallel):
    """ParallelLinearAdapter (Bridge peft/utils.py): linear_in ColumnParallelLinear(in, dim) for column-parallel
    bases (QKV, fc1) or RowParallelLinear(in, dim) for row-parallel ones (proj, fc2), linear_out
    ColumnParallelLinear(dim, out), no biases; in/out are the base linear's unsharded features."""
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from test_estimate_params import CASES, _build, _shape

    shape = _shape(CASES["gqa-rmsnorm-swiglu-untied"])
    model = _build(shape)
    config = ModelParallelConfig(use_cpu_initialization=True, perform_initialization=False)
    real_layer = dict(model.decoder.layers[0].named_modules())
    bases = {"linear_qkv": "self_attention.linear_qkv", "linear_proj": "self_attention.linear_proj",
             "linear_fc1": "mlp.linear_fc1", "linear_fc2": "mlp.linear_fc2"}
    dim = 8
    for target, path in bases.items():
        out_features, in_features = real_layer[path].weight.shape
        row = target in ("linear_proj", "linear_fc2")
        linear_in = (RowParallelLinear(in_features, dim, config=config, init_method=None, bias=False,
                                       input_is_parallel=True, skip_bias_add=True) if row else
                     ColumnParallelLinear(in_features, dim, config=config, init_method=None, bias=False,
                                          gather_output=True))
        linear_out = ColumnParallelLinear(dim, out_features, config=config, init_method=None, bias=False)
        real = sum(p.numel() for p in (*linear_in.parameters(), *linear_out.parameters()))
        assert lora.adapter_params(shape, Peft((target,), dim)) == real, target


def _peak(training: Training, parallel=Parallelism(world_size=8)) -> memory.StageMemory:
    return memory.estimate(Inputs(MODEL, parallel, training)).peak


def _named(stage: memory.StageMemory, prefix: str) -> float:
    return sum(p.bytes for p in stage.parts if p.name.startswith(prefix))


@pytest.mark.parametrize("tp", [1, 2])
def test_only_the_adapters_get_gradients_and_optimizer_states(tp):
    parallel = Parallelism(tp=tp, world_size=8)
    stage = _peak(replace(TRAIN, peft=ALL), parallel)
    adapters = MODEL.num_layers * lora.adapter_params(MODEL, ALL) / tp
    dp = 8 // tp
    full = _peak(TRAIN, parallel)
    assert _named(stage, "LoRA adapters") == pytest.approx(2 * adapters)
    assert stage.of("weights") == pytest.approx(full.of("weights") + 2 * adapters)  # the frozen base stays
    assert stage.of("grads") == pytest.approx(4 * adapters)  # fp32 main grads of the adapters only
    # fp32 master + two fp32 moments of the adapters, sharded over DP by the distributed optimizer
    assert stage.of("optimizer") == pytest.approx(12 * adapters / dp)


@pytest.mark.parametrize("sp", [False, True])
def test_frozen_linears_keep_no_inputs_and_adapters_keep_theirs(sp):
    tp = 2
    parallel = Parallelism(tp=tp, sequence_parallel=sp, world_size=8)
    n, h, f, dim = MODEL.seq_length, MODEL.hidden_size, MODEL.ffn_hidden_size, 16
    bf16 = activations.layer_terms(MODEL, parallel, TRAIN, False).terms
    qkv_only = activations.layer_terms(MODEL, parallel, replace(TRAIN, peft=Peft(("linear_qkv",), dim)),
                                       False).terms
    # The adapter keeps the gathered layernorm output (full sequence per TP rank) and its rank-dim output.
    assert qkv_only["qkv_input"] == 2 * n * h
    assert qkv_only["lora_linear_qkv_intermediate"] == 2 * n * dim
    # Frozen fc1 and fc2 keep no inputs; what attention, the norms and the activation keep is unchanged.
    assert qkv_only["fc1_input"] == 0 and qkv_only["act_output"] == 0
    for name in ("attn_norm_input", "core_attn_qkv", "core_attn_out", "mlp_norm_input", "fc1_output"):
        assert qkv_only[name] == bf16[name], name
    every = activations.layer_terms(MODEL, parallel, replace(TRAIN, peft=Peft(lora.TARGETS, dim)), False).terms
    assert every["fc1_input"] == 2 * n * h and every["act_output"] == bf16["act_output"] == 2 * n * f / tp
    assert sum(v for k, v in every.items() if k.startswith("lora_")) == 4 * 2 * n * dim


class _Record:
    def __init__(self, name="LoRA", **fields):
        self.name = name
        self.fields = {"target_modules": ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"], "dim": 32,
                       "alpha": 32, "dropout": 0.0, "lora_dtype": None, "sequence_parallel_input_regather": False,
                       **fields}


SIZES = {"model.num_layers": 4, "model.hidden_size": 1024, "model.num_attention_heads": 8, "model.vocab_size": 32000,
         "model.seq_length": 2048}


def test_a_lora_config_is_read():
    inputs = read_inputs(lookup({**SIZES, "peft": _Record(target_modules=["linear_qkv"], dim=16)}), "x_config")
    assert inputs.training.peft == Peft(("linear_qkv",), 16) and not inputs.unsupported


@pytest.mark.parametrize(("values", "why"), [
    ({"peft": _Record(name="DoRA")}, "only LoRA"),
    ({"peft": _Record(target_modules=["in_proj", "out_proj"])}, "only the dense layers"),
    ({"peft": _Record(target_modules=["*.layers.0.*.linear_qkv"])}, "only the dense layers"),
    ({"peft": _Record(dropout=0.1)}, "dropout"),
    ({"peft": _Record(), "model.num_moe_experts": 8}, "MoE"),
    ({"peft": _Record(), "mixed_precision": "bf16_with_mxfp8_mixed"}, "FP8"),
    ({"peft": _Record(), "model.recompute_granularity": "selective", "model.recompute_modules": ["mlp"]},
     "selective recompute"),
    ({"peft": _Record(), "model.sequence_parallel": True, "comm_overlap.tp_comm_overlap": True}, "overlap"),
    ({"peft": "default_peft_config(load_scheme())"}, "does not evaluate"),
])
def test_what_peft_settings_get_no_verdict(values, why):
    inputs = read_inputs(lookup({**SIZES, **values}), "x_config", fp8_transpose=False)
    assert any(why in reason for reason in inputs.unsupported), inputs.unsupported


def test_an_unknown_lora_field_makes_the_estimate_unknown():
    inputs = read_inputs(lookup({**SIZES, "peft": _Record(dim=Unknown("computed"))}), "x_config")
    assert "peft" in inputs.unknown and not inputs.complete


LORA = '''\
from dataclasses import dataclass, field
from typing import List


@dataclass
class LoRA:
    target_modules: List[str] = field(default_factory=lambda: ["linear_qkv", "linear_proj", "linear_fc1",
                                                               "linear_fc2"])
    dim: int = 32
    alpha: int = 32
    dropout: float = 0.0
'''

HELPER = '''\
from megatron.bridge.peft.lora import LoRA


def default_peft_config(peft_scheme, **kwargs):
    if peft_scheme is None:
        return None
    if isinstance(peft_scheme, str) and peft_scheme.lower() == "lora":
        return LoRA(**kwargs)
    raise ValueError(peft_scheme)
'''

RECIPES = '''\
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.recipes.utils import default_peft_config


def llama_peft_config(peft_scheme="lora"):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8))
    peft_cfg = default_peft_config(peft_scheme)
    cfg.peft = peft_cfg
    peft_cfg.dim = 8
    cfg.peft.target_modules = ["linear_qkv"]
    return cfg
'''


def test_bridges_peft_recipe_shape_is_read(tmp_path, monkeypatch):
    """`cfg.peft = default_peft_config("lora")` (an in-tree helper returning the LoRA dataclass with its
    default_factory targets), a write through the alias (`peft_cfg.dim = 8`) and one through the container
    (`cfg.peft.target_modules = [...]`) all reach the config the estimate reads."""
    from offlint.units import load_unit

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    bridge = tmp_path / "src" / "megatron" / "bridge"
    for folder in ("peft", "recipes"):
        (bridge / folder).mkdir(parents=True)
    (bridge / "peft" / "lora.py").write_text(LORA)
    (bridge / "recipes" / "utils.py").write_text(HELPER)
    (bridge / "recipes" / "llama.py").write_text(RECIPES)
    resolved = load_unit("src/megatron/bridge/recipes/llama.py", "llama_peft_config", mcore_version="0.20.0").resolved
    fields = resolved.get("peft").value.fields
    assert (fields["target_modules"], fields["dim"]) == (["linear_qkv"], 8)
    peft = read_inputs(resolved.get, "llama_peft_config").training.peft
    assert peft == Peft(("linear_qkv",), 8)


def test_the_base_still_counts_every_parameter():
    stage = _peak(replace(TRAIN, peft=ALL), Parallelism(world_size=1))
    assert _named(stage, "weights") == pytest.approx(2 * params.total(MODEL))
