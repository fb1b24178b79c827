"""The Python reader on the literals Bridge's pipeline-layout helpers are made of: dicts keyed by (PP, VPP) tuples,
looked up with a tuple, and stage lists built by repeating a list (`["decoder"] * 16`). Fixtures of our own in
that shape; repetition stays bounded (MAX_LITERAL) for hostile input."""

from __future__ import annotations

from offlint.resolve import resolve
from offlint.sources.python import read_python
from offlint.versions import parse_version

V = parse_version("0.20.0")

SOURCE = '''\
def _layout(pp_size, vp_size):
    last = ["mtp"] + ["loss"]
    table = {
        (1, 1): None,
        (2, 1): [["embedding"] + ["decoder"] * 3, ["decoder"] * 2 + last],
        (2, 2): [["embedding", "decoder"], ["decoder"], 2 * ["decoder"], ["decoder"] + last],
    }
    effective = 1 if vp_size is None else vp_size
    if (pp_size, effective) not in table:
        raise ValueError("unknown layout")
    return table[(pp_size, effective)]


def two_stages_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=5, mtp_num_layers=1))
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.pipeline_model_parallel_layout = _layout(2, None)
    return cfg


def interleaved_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=5, mtp_num_layers=1))
    cfg.model.pipeline_model_parallel_layout = _layout(2, 2)
    return cfg


def hostile_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=5))
    cfg.model.pipeline_model_parallel_layout = [["decoder"] * 1000000000]
    cfg.model.seq_length = {([1], 2): 3}[([1], 2)]
    return cfg
'''


def _units():
    return {u.name: resolve(u, V) for u in read_python("layouts.py", SOURCE)}


def test_a_tuple_keyed_table_and_repeated_lists_give_the_layout():
    units = _units()
    two = units["two_stages_config"].get("model.pipeline_model_parallel_layout")
    assert two.state == "known"
    assert two.value == [["embedding", "decoder", "decoder", "decoder"], ["decoder", "decoder", "mtp", "loss"]]
    interleaved = units["interleaved_config"].get("model.pipeline_model_parallel_layout").value
    assert interleaved[2] == ["decoder", "decoder"] and interleaved[3] == ["decoder", "mtp", "loss"]


def test_an_unbounded_repetition_or_an_unhashable_key_stays_unknown():
    """A billion-element repetition is refused before it is built (MAX_LITERAL), not built and dropped."""
    hostile = _units()["hostile_config"]
    assert hostile.get("model.pipeline_model_parallel_layout").is_unknown
    assert hostile.get("model.seq_length").is_unknown
