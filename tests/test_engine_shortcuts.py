"""The rule engine's shortcuts give the findings a full evaluation gives.

engine._guards: a check whose condition's top-level `and` has a part reading one key or name alone that is false
for a unit is skipped (the condition is False there). engine._firing_sources: assignments of a source no
assignment-scope rule can fire on are skipped. resolve's shared default Values: one per version, kind of defaults
and key. Each test compares units that differ in exactly what the shortcut looks at.
"""

from __future__ import annotations

import ast
import operator

import pytest

from offlint import engine
from offlint.resolve import resolve
from offlint.rules import load_rules
from offlint.types import Assignment, Defaults, Layer, Location, Source, Unit, UnitKind, Unknown
from offlint.versions import parse_version

V = parse_version("0.20.0")
RULES = list(load_rules().values())
SECTIONS = frozenset({"model", "optimizer", "ddp", "env", "checkpoint", "train", "dataset", "logger"})


def _unit(name: str, settings: dict, source: Source = Source.PYTHON, defaults: Defaults = Defaults.MCORE) -> Unit:
    assignments = [Assignment(key, value, Location("recipe.py", line, 5), source, text=repr(value))
                   for line, (key, value) in enumerate(settings.items(), start=2)]
    return Unit(name, UnitKind.RECIPE, Location("recipe.py", 1, 1), layers=[Layer("recipe", assignments)],
                defaults=defaults, default_sections=SECTIONS, launches_training=True, env_known=True)


def _without_shortcuts(monkeypatch):
    monkeypatch.setattr(engine, "_guarded_out", lambda guards, resolved, names: False)
    monkeypatch.setattr(engine, "_firing_sources", lambda rules, version: dict.fromkeys(engine._OPS, tuple(Source)))
    monkeypatch.setattr(engine, "_LAST_PLAN", ((), None, None))


BASE = {"model.num_layers": 8, "model.hidden_size": 1024, "model.num_attention_heads": 16,
        "model.cpu_offloading_num_layers": -1, "optimizer.optimizer_offload_fraction": 0.0,
        "model.cuda_graph_scope": ["attn"], "model.virtual_pipeline_model_parallel_size": 2,
        "env.PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}

# Pairs of units that differ in exactly one guard's key (or a source), and the rule that tells them apart.
PAIRS = [
    ("OFL101", {"model.cpu_offloading": True}, {"model.cpu_offloading": False}, Source.PYTHON),
    ("OFL201", {"optimizer.optimizer_cpu_offload": True}, {"optimizer.optimizer_cpu_offload": False}, Source.PYTHON),
    ("OFL214", {"model.cuda_graph_impl": "none"}, {"model.cuda_graph_impl": "transformer_engine"}, Source.PYTHON),
    ("OFL301", {"ddp.nccl_ub": False}, {"ddp.nccl_ub": True}, Source.PYTHON),
    ("OFL001", {"model.recompute_granularity": "None"}, {"model.recompute_granularity": "None"}, None),
]


def _findings(unit: Unit, strict: bool):
    return engine.check_unit(resolve(unit, V), RULES, strict)


@pytest.mark.parametrize(("code", "fires", "quiet", "source"), PAIRS, ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("strict", [False, True])
def test_units_differing_in_a_guard_key_get_what_full_evaluation_gives(code, fires, quiet, source, strict,
                                                                       monkeypatch):
    units = [_unit("recipe_a", {**BASE, **fires}, source or Source.HYDRA),
             _unit("recipe_b", {**BASE, **quiet}, source or Source.PYTHON),
             # the guard's key unknown: it decides nothing, the condition is evaluated
             _unit("recipe_c", {**BASE, **{k: Unknown("a parameter") for k in fires}}, source or Source.HYDRA)]
    shortcut = [_findings(u, strict) for u in units]
    assert code in [f.code for f in shortcut[0]]
    assert code not in [f.code for f in shortcut[1]]
    _without_shortcuts(monkeypatch)
    assert [_findings(u, strict) for u in units] == shortcut


@pytest.mark.parametrize("strict", [False, True])
def test_python_writes_differing_in_their_kind_get_what_full_evaluation_gives(strict, monkeypatch):
    """A Python write of a misspelt field is judged where it gives the object a new attribute (op "add"), and the
    same write of a field (op "set") is skipped unevaluated."""
    def unit(name: str, op: str) -> Unit:
        made = _unit(name, BASE)
        typo = Assignment("model.cpu_offloading_num_layer", 2, Location("recipe.py", 20, 5), Source.PYTHON, "2",
                          op=op)
        made.layers[0].assignments.append(typo)
        return made

    units = [unit("recipe_a", "add"), unit("recipe_b", "set")]
    shortcut = [_findings(u, strict) for u in units]
    assert "OFL003" in [f.code for f in shortcut[0]]
    assert "OFL003" not in [f.code for f in shortcut[1]]
    _without_shortcuts(monkeypatch)
    assert [_findings(u, strict) for u in units] == shortcut


def test_guards_are_the_parts_of_the_top_level_and_that_read_one_name():
    condition = ('model.cpu_offloading and not optimizer.optimizer_cpu_offload and model.cuda_graph_impl == "none" '
                 'and source in ("hydra", "yaml") and len(as_list(model.offload_modules)) > 0 '
                 'and model.num_layers > model.hidden_size and launches_training')
    assert engine._guards(condition) == (
        ("model.cpu_offloading", True, engine._TRUTHY, None),
        ("optimizer.optimizer_cpu_offload", True, engine._NOT, None),
        ("model.cuda_graph_impl", True, operator.eq, "none"),
        ("source", False, engine._COMPARISONS[ast.In], ["hydra", "yaml"]),
        ("launches_training", False, engine._TRUTHY, None))
    assert engine._guards("model.cpu_offloading or optimizer.optimizer_cpu_offload") == ()
    assert engine._guards("model.cpu_offloading") == (("model.cpu_offloading", True, engine._TRUTHY, None),)
    # a top-level key without a dot is read as the unit's key when it is not one of the unit's names
    top = resolve(_unit("a", {"mixed_precision": "bf16_mixed"}), V)
    assert not engine._guarded_out(engine._guards("mixed_precision"), top, {})
    assert engine._guarded_out(engine._guards("not mixed_precision"), top, {})
    assert engine._guarded_out(engine._guards("mixed_precision"), top, {"mixed_precision": ""})


def test_a_guard_decides_only_on_a_known_false_part():
    guards = engine._guards("model.cpu_offloading and model.cpu_offloading_num_layers < 0")
    names = {"launches_training": True}
    on = resolve(_unit("a", {"model.cpu_offloading": True, "model.cpu_offloading_num_layers": 2}), V)
    off = resolve(_unit("b", {"model.cpu_offloading": False, "model.cpu_offloading_num_layers": -2}), V)
    unknown = resolve(_unit("c", {"model.cpu_offloading": Unknown("x"), "model.cpu_offloading_num_layers": -2}), V)
    default = resolve(_unit("d", {"model.cpu_offloading_num_layers": -2}), V)
    assert engine._guarded_out(guards, on, names)  # 2 < 0 is false
    assert engine._guarded_out(guards, off, names)
    assert not engine._guarded_out(guards, unknown, names)
    assert engine._guarded_out(guards, default, names)  # the default, False
    # a type error in a comparison is the evaluator's False
    odd = resolve(_unit("e", {"model.cpu_offloading": True, "model.cpu_offloading_num_layers": "two"}), V)
    assert engine._guarded_out(guards, odd, names)


def test_firing_sources_follow_the_rules_guards():
    assignment_rules = [r for r in RULES if r.scope == "assignment"]
    # (OFL003 alone judges a Python write, where it gives an object an attribute its class lacks)
    firing = engine._firing_sources(assignment_rules, V)
    assert {op: set(sources) for op, sources in firing.items()} == {
        "set": {Source.HYDRA, Source.YAML}, "add": {Source.HYDRA, Source.YAML, Source.PYTHON},
        "force": {Source.HYDRA, Source.YAML}, "delete": {Source.HYDRA, Source.YAML}}
    assert engine._firing_sources([], V) == dict.fromkeys(engine._OPS, ())


def test_default_values_are_per_kind_of_defaults_and_version():
    key = "optimizer.optimizer_offload_fraction"
    mcore = resolve(_unit("a", {}), V).get(key)
    mlm = resolve(_unit("b", {}, defaults=Defaults.MLM_CLI), V).get(key)
    assert (mcore.state, mcore.value, mlm.state, mlm.value) == ("default", 0.0, "default", 1.0)
    assert resolve(_unit("c", {}), V).get(key) == mcore  # and again, from the shared store
    old = parse_version("0.16.1")
    assert resolve(_unit("d", {}), V).get("model.cuda_graph_scope").value is None
    assert resolve(_unit("e", {}), old).get("model.cuda_graph_scope").value == "full"
    assert resolve(_unit("f", {}), V).get("model.cuda_graph_scope").value is None
    # a section the unit does not build: unknown, not a default
    unbuilt = Unit("g", UnitKind.RECIPE, Location("recipe.py", 1, 1), layers=[], default_sections=frozenset({"model"}))
    assert resolve(unbuilt, V).get(key).state == "unknown"
