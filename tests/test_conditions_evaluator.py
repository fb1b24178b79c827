"""The condition evaluator's three-valued answers through the per-arity call evaluators and the inline truth test
of `and`/`or` (conditions/language.py _compile_call, _compile_bool_op): a helper gets its arguments, or UNKNOWN where one is
unknown and it does not take unknowns; a name the scope gives is read from it (even a falsy one) before the keys;
and the graph and recompute module checks read their names once per version (_names_known)."""

from __future__ import annotations

import pytest

from offlint import keys
from offlint.conditions import FUNCTIONS, UNKNOWN, Scope, evaluate
from offlint.conditions.module_names import _names_known
from offlint.types import Unknown, Value
from offlint.versions import parse_version

V = parse_version("0.20.0")
VALUES = {"model.num_layers": 4, "model.hidden_size": 0, "model.recompute_granularity": "selective",
          "model.cpu_offloading": True, "model.fp16": Unknown("a parameter")}


def _scope(names: dict | None = None) -> Scope:
    def get(key: str) -> Value:
        if key not in VALUES:
            return Value(key, "default", keys.default_for(key, V))
        value = VALUES[key]
        return Value(key, "unknown" if isinstance(value, Unknown) else "known", value)
    return Scope(get, V, names=dict(names or {}))


@pytest.mark.parametrize("condition, expected", [
    ("known(model.fp16)", False),  # one argument, a helper that takes unknowns
    ("known(model.num_layers)", True),
    ("as_list(model.fp16)", UNKNOWN),  # one argument, unknown: not called
    ("as_list(model.num_layers)", [4]),
    ("is_default('model.fp16')", UNKNOWN),  # one argument and the scope
    ("is_default('model.num_layers')", False),
    ("is_default('model.fp8')", True),
    ("listing('a', model.fp16, 'b')", "a, b"),  # several arguments, a helper that takes unknowns
    ("listing(model.fp16)", "?"),
    ("version_at_least('0.16')", True),
    ("allowed_offload_modules() == allowed_offload_modules()", True),  # none: the helper itself
    ("model.num_layers and model.hidden_size", False),  # truth as bool(): 4 and 0
    ("model.hidden_size or model.num_layers", True),
    ("model.fp16 and model.hidden_size", False),  # Kleene: unknown and false
    ("model.fp16 or model.cpu_offloading", True),
    ("model.fp16 and model.cpu_offloading", UNKNOWN),
    ("not model.fp16 or model.hidden_size", UNKNOWN),
    ("model.num_layers > 2 and model.recompute_granularity == 'selective'", True),
    ("unit_name == '' and launches_training is None", True),  # names the scope gives, falsy ones too
])
def test_conditions_evaluate_three_valued(condition, expected):
    got = evaluate(condition, _scope({"unit_name": "", "launches_training": None}))
    assert got is expected if expected is UNKNOWN or isinstance(expected, bool) else got == expected


def test_a_helper_without_arguments_is_called_with_the_scope_alone():
    seen = []

    def probe(scope):
        seen.append(scope)
        return 3

    probe.needs_scope = True
    FUNCTIONS["_probe_for_test"] = probe
    try:
        scope = _scope()
        assert evaluate("_probe_for_test() + 1", scope) == 4 and seen == [scope]
    finally:
        del FUNCTIONS["_probe_for_test"]


def test_a_name_neither_given_nor_a_key_is_refused():
    from offlint.conditions import ConditionError

    with pytest.raises(ConditionError):
        evaluate("no_such_name_here", _scope())


@pytest.mark.parametrize("field", ["cuda_graph_names", "recompute_module_names"])
@pytest.mark.parametrize("version", ["0.16.1", "0.18.0", "0.20.0", "0.21.0"])
def test_names_known_once_is_keys_names_known(field, version):
    expected = keys.names_known(parse_version(version), field)
    got = _names_known(parse_version(version), field)
    assert (got is None) is (expected is None) and (got is None or got == expected)
    assert got is _names_known(parse_version(version), field)
