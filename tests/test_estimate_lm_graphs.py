"""The language model's Transformer Engine CUDA graphs (cuda_graph_impl="transformer_engine"): what they keep beyond
eager execution (offlint/estimate/lm_graphs.py; docs/estimate.md "Language-model CUDA graphs"): one static bool
attention mask [b, 1, s/CP, s] per graphed attention and micro-batch in flight, one static layer output per layer
whose graph ends the layer and whose next layer's graph starts at its input, and one shared grad output. Fixtures of
this file's own: small GPT and hybrid models."""

from __future__ import annotations

import pytest

from offlint.estimate import lm_graphs, memory, params
from offlint.estimate.inputs import read_inputs
from offlint.types import Unknown
from tests.estimate_helpers import lookup

_GPT = {"model.num_layers": 6, "model.hidden_size": 512, "model.num_attention_heads": 8,
        "model.num_query_groups": 4, "model.kv_channels": 64, "model.ffn_hidden_size": 1536,
        "model.vocab_size": 4096, "model.seq_length": 2048, "train.micro_batch_size": 2,
        "train.global_batch_size": 64, "model.cuda_graph_impl": "transformer_engine"}

_HYBRID = {"model.hidden_size": 512, "model.num_attention_heads": 8, "model.num_query_groups": 4,
           "model.kv_channels": 64, "model.ffn_hidden_size": 1024, "model.vocab_size": 2048,
           "model.seq_length": 1024, "model.hybrid_layer_pattern": "ME*MEME", "model.mamba_num_heads": 16,
           "model.mamba_head_dim": 64, "model.mamba_num_groups": 4, "model.mamba_state_dim": 64,
           "model.num_moe_experts": 16, "model.moe_ffn_hidden_size": 256, "model.moe_router_topk": 4,
           "model.moe_token_dispatcher_type": "alltoall", "model.cuda_graph_impl": "transformer_engine",
           "model.cuda_graph_scope": ["attn", "mamba", "moe_router", "moe_preprocess"],
           "train.micro_batch_size": 1, "train.global_batch_size": 32}


def _read(base, **changes):
    inputs = read_inputs(lookup({**base, **changes}))
    assert inputs.complete, (inputs.unsupported, inputs.unknown)
    return inputs


def _parts(inputs, stage=0, in_flight=1.0):
    m, p, t = inputs.model, inputs.parallel, inputs.training
    return dict(lm_graphs.parts(m, p, t, params.layer_ranges(m, p)[stage], 0, in_flight))


def _figures(inputs, stage=0, in_flight=1.0):
    """(mask bytes, static output and grad output bytes)."""
    got = list(_parts(inputs, stage, in_flight).values())
    return (got[0], got[1]) if got else (0.0, 0.0)


HIDDEN = 2 * 2048 * 2 * 512  # one [s, b, h] bf16 tensor of _GPT
MASK = 2 * 2048 * 2048  # one bool [b, 1, s, s]


@pytest.mark.parametrize("scope", ["full", [], None])
def test_whole_layers_keep_a_mask_per_layer_and_every_output_but_each_chunks_last(scope):
    changes = {} if scope is None else {"model.cuda_graph_scope": scope}  # None: megatron-core's default "full"
    inputs = _read(_GPT, **changes)
    assert inputs.training.te_graph_modules == ()
    masks, outputs = _figures(inputs)
    assert masks == 6 * MASK
    assert outputs == 5 * HIDDEN + HIDDEN  # layers 0-4 feed a graphed layer's input copy; one grad output


def test_attention_graphs_keep_masks_and_no_outputs():
    masks, outputs = _figures(_read(_GPT, **{"model.cuda_graph_scope": ["attn"]}))
    assert masks == 6 * MASK
    assert outputs == HIDDEN  # the eager MLP's norm saves each graph's output: only the shared grad output


def test_mlp_graphs_keep_no_mask_and_no_copied_output():
    # The MLP graph ends the layer, but the next layer's eager attention (its norm) takes and saves that output.
    masks, outputs = _figures(_read(_GPT, **{"model.cuda_graph_scope": ["mlp"]}))
    assert (masks, outputs) == (0.0, HIDDEN)


def test_attention_and_mlp_graphs_are_whole_layers_for_the_copies():
    masks, outputs = _figures(_read(_GPT, **{"model.cuda_graph_scope": ["attn", "mlp"]}))
    assert (masks, outputs) == (6 * MASK, 6 * HIDDEN)


def test_micro_batches_in_flight_multiply_masks_and_outputs():
    inputs = _read(_GPT, **{"model.pipeline_model_parallel_size": 2, "model.cuda_graph_scope": []})
    masks, outputs = _figures(inputs, stage=0, in_flight=2.0)
    assert masks == 2 * 3 * MASK  # 3 layers per stage, 2 micro-batches in flight on stage 0
    assert outputs == 2 * 2 * HIDDEN + HIDDEN


def test_context_and_sequence_parallelism_shape_the_buffers():
    inputs = _read(_GPT, **{"model.cuda_graph_scope": [], "model.context_parallel_size": 2,
                            "model.tensor_model_parallel_size": 2, "model.sequence_parallel": True})
    masks, outputs = _figures(inputs)
    assert masks == 6 * 2 * 1024 * 2048  # [b, 1, s/CP, s]
    assert outputs == 6 * HIDDEN / 4  # [s/CP/TP, b, h]


def test_hybrid_layers_copy_outputs_into_graphs_that_start_at_their_input():
    # M E * M E M E: a Mamba graph ends its layer and the MoE layer's graph (router scope) starts at its input (3
    # times); the attention layer's graph ends it and the next Mamba graph starts at its input (once); the MoE
    # graphs stop at the router. One mask: the one attention layer.
    inputs = _read(_HYBRID)
    masks, outputs = _figures(inputs)
    hidden = 2 * 1024 * 1 * 512
    assert masks == 1 * 1024 * 1024
    assert outputs == 4 * hidden + hidden


def test_hybrid_without_the_router_in_scope():
    masks, outputs = _figures(_read(_HYBRID, **{"model.cuda_graph_scope": ["attn", "mamba"]}))
    hidden = 2 * 1024 * 512
    assert masks == 1024 * 1024
    # the MoE layers run eagerly and their norms save the Mamba outputs; the attention layer's output still goes
    # into the next Mamba graph's input copy
    assert outputs == hidden + hidden


@pytest.mark.parametrize("impl", ["none", "local", "full_iteration"])
def test_other_implementations_add_nothing(impl):
    inputs = _read(_GPT, **{"model.cuda_graph_impl": impl, "model.cuda_graph_scope": []})
    assert inputs.training.te_graph_modules is None
    assert _parts(inputs) == {}
    assert not any(x.name.startswith("LM CUDA graphs") for s in memory.estimate(inputs).stages for x in s.parts)


def test_an_unknown_implementation_leaves_the_estimate_unknown():
    inputs = read_inputs(lookup({**_GPT, "model.cuda_graph_impl": Unknown("a launcher argument")}))
    assert "model.cuda_graph_impl" in inputs.unknown
    assert not inputs.complete


def test_an_unknown_scope_leaves_the_estimate_unknown():
    inputs = read_inputs(lookup({**_GPT, "model.cuda_graph_scope": Unknown("a launcher argument")}))
    assert "model.cuda_graph_scope" in inputs.unknown


def test_the_estimate_counts_the_graph_buffers_on_every_stage():
    on = _read(_GPT, **{"model.pipeline_model_parallel_size": 2, "model.cuda_graph_scope": []})
    off = _read(_GPT, **{"model.pipeline_model_parallel_size": 2, "model.cuda_graph_impl": "none"})
    with_graphs, without = memory.estimate(on), memory.estimate(off)
    for stage, (a, b) in enumerate(zip(with_graphs.stages, without.stages)):
        graphs = sum(x.bytes for x in a.parts if x.name.startswith("LM CUDA graphs"))
        in_flight = memory.microbatches_in_flight(on.parallel, stage, 32)
        assert graphs == sum(_figures(on, stage, in_flight))
        assert graphs > 0
        # the allowance grows with the subtotal, so the stage grows by at least the graphs' buffers
        assert a.total - b.total >= graphs


def _graph_parts(estimate):
    return {x.name: x.bytes for s in estimate.stages for x in s.parts if x.name.startswith("LM CUDA graphs")}


def test_an_mtp_depth_is_graphed_with_its_attention():
    with_mtp = _read(_GPT, **{"model.cuda_graph_scope": ["attn"], "model.mtp_num_layers": 1})
    masks = [v for k, v in _graph_parts(memory.estimate(with_mtp)).items() if "masks" in k]
    assert masks == [7 * MASK]  # six decoder layers and the MTP depth's layer
    routed = _read(_GPT, **{"model.cuda_graph_scope": ["mlp"], "model.mtp_num_layers": 1})
    assert not any("masks" in k for k in _graph_parts(memory.estimate(routed)))


def test_a_hybrid_mtp_depth_is_not_graphed():
    inputs = _read(_HYBRID)
    m, p, t = inputs.model, inputs.parallel, inputs.training
    without = lm_graphs.parts(m, p, t, params.layer_ranges(m, p)[0], 0, 1.0)
    assert lm_graphs.parts(m, p, t, params.layer_ranges(m, p)[0], 2, 1.0) == without
