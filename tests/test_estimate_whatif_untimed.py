"""whatif.what_if without step times (timed=False, what oom.offload_savings asks for): the same options, the same
memory, only no step time."""

from __future__ import annotations

import pytest

from offlint.estimate import cost
from offlint.estimate.devices import parse_device
from offlint.estimate.inputs import Inputs, ModelShape, Parallelism, Training
from offlint.estimate.whatif import what_if

DENSE = ModelShape(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                   num_query_groups=8, kv_channels=128, vocab_size=128256, seq_length=8192, gated_linear_unit=True,
                   tied_embeddings=False, rms_norm=True, add_bias_linear=False)
MOE = ModelShape(num_layers=8, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
                 kv_channels=128, vocab_size=151936, seq_length=4096, gated_linear_unit=True, tied_embeddings=False,
                 rms_norm=True, add_bias_linear=False, num_moe_experts=64, moe_ffn_hidden_size=768, moe_router_topk=8)


@pytest.mark.parametrize("model", [DENSE, MOE], ids=["dense", "moe"])
@pytest.mark.parametrize("layouts", [False, True])
def test_untimed_options_have_the_timed_ones_memory(model, layouts, monkeypatch):
    inputs = Inputs(model, Parallelism(world_size=8), Training(micro_batch_size=1, global_batch_size=0,
                                                               distributed_optimizer=True))
    device = parse_device("h100-80gb")
    timed = what_if(inputs, device, 8, layouts=layouts)
    calls = []
    monkeypatch.setattr(cost, "step_seconds", lambda *a: calls.append(a) or 1.0)
    untimed = what_if(inputs, device, 8, layouts=layouts, timed=False)
    assert not calls
    assert [(o.group, o.label, o.peak_bytes, o.fits, o.at_risk, o.baseline) for o in untimed] == \
        [(o.group, o.label, o.peak_bytes, o.fits, o.at_risk, o.baseline) for o in timed]
    assert {o.relative_time for o in untimed} == {1.0}
    assert len({round(o.relative_time, 6) for o in timed}) > 1  # (the timed table does model step times)
