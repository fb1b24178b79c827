"""settings.suggestion answers from a memo per key (keys.closest_field): the same answer as working it out, whatever
was asked before, for the same field under each section."""

from __future__ import annotations

from offlint import keys
from offlint.conditions import Scope
from offlint.conditions.settings import suggestion
from offlint.types import Value
from offlint.versions import parse_version

KEYS = ["model.cpu_ofloading", "optimizer.cpu_ofloading", "ddp.cpu_ofloading", "model.recompute_granulrity",
        "optimizer.optimizer_cpu_ofload", "model.optimizer_cpu_ofload", "ddp.overlap_grad_reduc",
        "model.overlap_grad_reduc", "train.cpu_ofloading", "model.hf_id", "model.nothing_like_any_field_at_all"]


def test_memoised_suggestions_are_the_worked_out_ones():
    keys.closest_field.cache_clear()
    scope = Scope(lambda key: Value(key, "default"), parse_version("0.20.0"))
    asked = [suggestion(scope, key) for key in KEYS + KEYS[::-1] + KEYS]
    worked_out = [keys.closest_field.__wrapped__(key) for key in KEYS + KEYS[::-1] + KEYS]
    assert asked == worked_out
    by_key = dict(zip(KEYS, asked))
    assert by_key["model.cpu_ofloading"] == "model.cpu_offloading"
    assert by_key["optimizer.optimizer_cpu_ofload"] == "optimizer.optimizer_cpu_offload"
    assert by_key["train.cpu_ofloading"] == ""  # a section without a field list
    # each answer is in its own section: a memo keyed by the field alone would give the first section's
    assert all(answer == "" or answer.split(".")[0] == key.split(".")[0] for key, answer in by_key.items())
    assert len({by_key[f"{s}.cpu_ofloading"] for s in ("model", "optimizer", "ddp")} - {""}) >= 1
