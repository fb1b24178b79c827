"""resolve's quick paths give what the plain ones gave: a Value built through its __dict__ (_value_of) is the one its
__init__ builds, a layer's assignments act in order with ByVersion told apart by its type, and a Megatron-LM command's
unread flag of a key is the first one whose dest is the key's field (ResolvedUnit._unread_flag's per-unit table)."""

from __future__ import annotations

import dataclasses

import pytest

from offlint.keys import mlm_flag_dests
from offlint.resolve import ResolvedUnit, _value_of, for_version, resolve
from offlint.types import (ABSENT, Assignment, ByVersion, Defaults, Layer, Location, OneOf, Source, Unit, UnitKind,
                           Unknown, Value)
from offlint.versions import parse_version

V = parse_version("0.20.0")
AT = Location("recipe.py", 3, 5)


@pytest.mark.parametrize("state, value, assignment", [
    ("known", 4, Assignment("model.num_layers", 4, AT, Source.PYTHON)),
    ("known", ["attn", "mlp"], Assignment("model.cuda_graph_scope", ["attn", "mlp"], AT, Source.YAML, text="[attn]")),
    ("unknown", Unknown("a parameter"), Assignment("model.hidden_size", Unknown("a parameter"), AT, Source.PYTHON)),
    ("unknown", Unknown("`model.x` is not set in r"), None),
])
def test_value_of_is_the_value_its_init_builds(state, value, assignment):
    key = assignment.key if assignment else "model.x"
    made, built = _value_of(key, state, value, assignment), Value(key, state, value, assignment)
    assert type(made) is Value and made == built and repr(made) == repr(built)
    assert made.__dict__ == built.__dict__ and list(made.__dict__) == list(built.__dict__)
    if assignment is None or not isinstance(value, list):
        assert hash(made) == hash(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.value = 5
    assert [f.name for f in dataclasses.fields(Value)] == ["key", "state", "value", "assignment"]
    assert not hasattr(Value, "__post_init__")  # (what _value_of would have to call)


def test_by_version_has_no_subclass():
    """resolve tells a ByVersion value apart by its type (isinstance looks up every other value's __class__)."""
    assert ByVersion.__subclasses__() == []


def test_a_layer_acts_in_order_deletes_and_versioned_values_among_plain_ones():
    at = [Location("helper.py", line, 5) for line in range(1, 9)]
    layer = [Assignment("model.a", 1, at[0], Source.HYDRA),
             Assignment("model.b", 2, at[1], Source.HYDRA),
             Assignment("model.a", 3, at[2], Source.HYDRA, op="delete"),  # `~a`: the recipe's value stays
             Assignment("model.c", ByVersion(((">=0.18", 5), ("<0.18", ABSENT))), at[3], Source.PYTHON),
             Assignment("model.b", ByVersion((("<0.18", 6),)), at[4], Source.PYTHON),  # absent here: b stays 2
             Assignment("model.d", OneOf("A or B depending on `if x` (line 4)"), at[5], Source.PYTHON),
             Assignment("model.c", 7, at[6], Source.HYDRA, op="force")]
    recipe = [Assignment("model.a", 0, Location("recipe.py", 1, 1), Source.PYTHON)]
    unit = Unit("u", UnitKind.RECIPE, Location("recipe.py", 1, 1), layers=[Layer("r", recipe), Layer("h", layer)])
    resolved = resolve(unit, V)
    expected: dict = {}
    for each in unit.layers:
        for a in each.assignments:  # the plain loop: last wins, a delete skipped, ByVersion as for_version says
            a = None if a.op == "delete" else for_version(a, V)
            if a is not None:
                expected[a.key] = a
    assert resolved.values == expected and list(resolved.values) == list(expected)
    assert [resolved.values[k].value for k in ("model.a", "model.b", "model.c")] == [1, 2, 7]


def test_an_unread_flag_is_the_first_of_the_unit_s_that_sets_the_field():
    dests = mlm_flag_dests(V)
    twins = next(flags for flags in _by_dest(dests).values() if len(flags) > 1)  # two spellings of one dest
    flags = ("--not-a-flag-of-megatron-lm", twins[1], "--recompute-granularity", twins[0])
    unit = Unit("train.sh at line 3", UnitKind.COMMAND, Location("train.sh", 3, 1), defaults=Defaults.MLM_CLI,
                default_sections=frozenset({"model", "optimizer", "ddp"}), unread_flags=flags)
    resolved = ResolvedUnit(unit, V)
    for dest in {*filter(None, dests.values()), "no_such_field"}:
        key = f"model.{dest}"
        first = next((flag for flag in flags if dests.get(flag) == dest), "")  # what it was worked out as per key
        assert resolved._unread_flag(key) == first
        if first:
            assert resolved.get(key) == Value(key, "unknown", Unknown(f"set by `{first}`, which offlint does not read"))
    assert resolved._unread_flag(f"model.{dests[twins[0]]}") == twins[1]
    plain = ResolvedUnit(Unit("u", UnitKind.COMMAND, Location("train.sh", 3, 1), unread_flags=flags), V)
    assert plain._unread_flag("model.recompute_granularity") == ""  # megatron-core defaults: no flag table


def _by_dest(dests: dict) -> dict:
    out: dict = {}
    for flag, dest in dests.items():
        out.setdefault(dest, []).append(flag)
    return out


def test_a_key_a_launch_does_not_set_is_said_to_be_unset_by_the_launch_at_its_own_line():
    """A launch unit is named `pretrain_qwen.py at line 503`, the line of the shell script that runs it: "not set in
    pretrain_qwen.py at line 503" read as a line of the Python file (a Pai-Megatron-Patch fork's OFL306)."""
    launch = Unit("pretrain_qwen.py at line 503", UnitKind.COMMAND, Location("examples/run.sh", 503, 1))
    recipe = Unit("llama3_8b_config", UnitKind.RECIPE, Location("recipes/llama.py", 3, 1))
    assert resolve(launch, V).get("train.manual_gc").value.reason == \
        "`train.manual_gc` is not set by the launch at examples/run.sh:503"
    assert resolve(recipe, V).get("train.manual_gc").value.reason == \
        "`train.manual_gc` is not set in llama3_8b_config"
