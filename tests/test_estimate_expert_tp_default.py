"""An unset expert_tensor_parallel_size with EP > 1 and TP > 1 is TP's value in megatron-core
(ModelParallelConfig.__post_init__) and 1 in Megatron Bridge since 6f2f546ef (July 2026,
`_set_moe_expert_tensor_parallel_default`): the estimate is made at both (oom.architectures) and has a verdict
only where they agree; where TP's value cannot tile the recipe's GPUs, only Bridge's runs."""

from __future__ import annotations

from offlint.estimate import oom
from offlint.estimate.inputs import read_inputs
from offlint.estimate.memory import estimate
from tests.estimate_helpers import lookup

MOE = {"model.num_layers": 8, "model.hidden_size": 2048, "model.ffn_hidden_size": 6144,
       "model.num_attention_heads": 16, "model.num_query_groups": 4, "model.kv_channels": 128,
       "model.vocab_size": 32000, "model.seq_length": 4096, "model.gated_linear_unit": True,
       "model.add_bias_linear": False, "model.normalization": "RMSNorm", "model.hidden_dropout": 0.0,
       "model.share_embeddings_and_output_weights": False, "model.position_embedding_type": "rope",
       "model.num_moe_experts": 64, "model.moe_ffn_hidden_size": 1024, "model.moe_router_topk": 4,
       "model.tensor_model_parallel_size": 2, "model.expert_model_parallel_size": 8}


def _inputs(name: str = "moe_pretrain_config", **changes):
    return read_inputs(lookup(MOE | {f"model.{k}": v for k, v in changes.items()}), name)


def test_an_unset_expert_tp_is_estimated_at_tp_and_at_one():
    inputs = _inputs()
    assert inputs.complete and inputs.parallel.etp_open and inputs.parallel.etp == 2
    at_tp, at_one = oom.architectures(inputs)
    assert (at_tp.parallel.etp, at_one.parallel.etp) == (2, 1)
    assert not at_tp.parallel.etp_open and not at_one.parallel.etp_open
    # ETP 1: every rank of the expert group holds whole experts, so the expert weights per GPU are TP times larger
    assert estimate(at_one, 16).peak.of("weights") > estimate(at_tp, 16).peak.of("weights")
    what, labels = oom._open_labels(inputs)
    assert "unset expert_tensor_parallel_size" in what and labels == ["at ETP2", "at ETP1"]


def test_a_written_expert_tp_or_no_expert_parallelism_leaves_nothing_open():
    assert not _inputs(expert_tensor_parallel_size=2).parallel.etp_open
    assert not _inputs(expert_model_parallel_size=1).parallel.etp_open
    assert not _inputs(tensor_model_parallel_size=1).parallel.etp_open


def test_where_tps_value_cannot_tile_the_named_gpus_only_bridges_runs():
    # 16 GPUs: TP2 x EP8 = 16 tiles them; at PP2 only ETP1 x EP8 x PP2 does (ETP2 would need 32)
    tiles = _inputs("moe_pretrain_16gpu_h100_bf16_config")
    assert tiles.parallel.etp_open
    only_one = _inputs("moe_pretrain_16gpu_h100_bf16_config", pipeline_model_parallel_size=2)
    assert not only_one.parallel.etp_open and only_one.parallel.etp == 1
    assert len(oom.architectures(only_one)) == 1


def test_the_verdict_is_given_only_where_both_agree():
    inputs = _inputs()
    low, high = sorted(estimate(v, 16).peak.total for v in oom.architectures(inputs))
    _, _, why, note = oom.either_way(inputs, lambda _, r: r.peak.total > 2 * high, 16)  # both fit
    assert why == "" and "unset expert_tensor_parallel_size" in note and "holds either way" in note
    between = (low + high) / 2  # a capacity between the two splits them
    _, _, why, _ = oom.either_way(inputs, lambda _, r: r.peak.total > between, 16)
    assert "unset expert_tensor_parallel_size" in why and "the verdict depends on it" in why
