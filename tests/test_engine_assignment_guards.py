"""engine._assignment_guards: an assignment-scope check whose top-level `and` has a part about the assignment alone
(`source`, `key_type`, `value`, `op`, ...) that is false is skipped, and the verdict kept for every unit that writes
the same assignment. These tests compare the findings with the full evaluation on assignments that differ in
exactly what a guard reads, and show that a part about the unit's own keys is never such a guard.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from offlint import engine
from offlint.resolve import resolve
from offlint.rules import load_rules
from offlint.types import Assignment, Layer, Location, Source, Unit, UnitKind, Unknown
from offlint.versions import parse_version

V = parse_version("0.20.0")
CATALOG = load_rules()
ASSIGNMENT_RULES = [r for r in CATALOG.values() if r.scope == "assignment"]
SECTIONS = frozenset({"model", "optimizer", "ddp", "env", "checkpoint", "train", "dataset", "logger"})


def _unit(name: str, recipe: dict, written: list[tuple[str, object, Source, str]]) -> Unit:
    """A recipe layer (inherited: not the unit's own writing) and the unit's own assignments."""
    base = [Assignment(key, value, Location("recipe.py", line, 5), Source.PYTHON, text=repr(value))
            for line, (key, value) in enumerate(recipe.items(), start=2)]
    own = [Assignment(key, value, Location("run.sh", line, 1), source, text=str(value), op=op)
           for line, (key, value, source, op) in enumerate(written, start=2)]
    return Unit(name, UnitKind.COMMAND, Location("run.sh", 1, 1),
                layers=[Layer("recipe", base, inherited=True), Layer("command line", own)],
                default_sections=SECTIONS, launches_training=True, env_known=True)


# Assignments that differ in exactly one guarded name: source, value, key_type (the key), op
WRITTEN = [
    ("model.recompute_granularity", "None", Source.HYDRA, "set"),  # OFL001
    ("model.recompute_granularity", "None", Source.PYTHON, "set"),  # the same, a source no guard lets through
    ("model.recompute_granularity", "full", Source.HYDRA, "set"),  # another value
    ("model.recompute_modules", "core_attn", Source.HYDRA, "set"),  # OFL002: a list key given a string
    ("model.recompute_method", "core_attn", Source.HYDRA, "set"),  # the same text, a key of another type
    ("model.cpu_ofloading", True, Source.HYDRA, "set"),  # OFL003: a misspelt key
    ("model.cpu_ofloading", True, Source.HYDRA, "add"),  # another op
    ("model.cpu_ofloading", True, Source.HYDRA, "delete"),  # an op no check names
    ("model.cpu_offloading", "yes", Source.HYDRA, "set"),  # OFL005
    ("model.cpu_offloading", "yes", Source.YAML, "set"),
    ("model.cpu_offloading", Unknown("a flag"), Source.HYDRA, "set"),  # an unknown value decides nothing
]


def _findings(units: list[Unit], rules) -> list[list[str]]:
    return [[f"{f.code} {f.location.line} {f.message}" for f in engine.check_unit(resolve(u, V), rules, False)]
            for u in units]


def _fresh(monkeypatch):
    monkeypatch.setattr(engine, "_ASSIGNMENT_VERDICTS", {})
    monkeypatch.setattr(engine, "_LAST_PLAN", ((), None, None))


@pytest.mark.parametrize("granularity", ["selective", "full"])
def test_assignment_rules_give_what_full_evaluation_gives(granularity, monkeypatch):
    units = [_unit("a", {"model.recompute_granularity": granularity}, WRITTEN),
             _unit("b", {"model.recompute_granularity": granularity, "model.moe_layer_recompute": True}, WRITTEN)]
    _fresh(monkeypatch)
    shortcut = _findings(units, ASSIGNMENT_RULES)
    codes = {finding.split()[0] for found in shortcut for finding in found}
    assert codes == {"OFL001", "OFL002", "OFL003", "OFL005"} if granularity == "full" else codes >= {"OFL001"}
    _fresh(monkeypatch)
    monkeypatch.setattr(engine, "_guarded_out", lambda guards, resolved, names: False)
    assert _findings(units, ASSIGNMENT_RULES) == shortcut


def test_only_the_assignments_own_names_guard():
    condition = 'source == "hydra" and model.cpu_offloading and value == "None" and not mixed_precision'
    assert [g[0] for g in engine._guards(condition)] == ["source", "model.cpu_offloading", "value", "mixed_precision"]
    assert [g[0] for g in engine._assignment_guards(condition)] == ["source", "value"]


def test_a_part_about_the_units_keys_keeps_the_verdict_per_unit(monkeypatch):
    """Two units write the same assignment; the condition's part about a unit key is false for the first checked
    and true for the second: were that part taken for a guard about the assignment, the first unit's verdict
    would be kept for the second, which would lose its finding."""
    template = CATALOG["OFL001"]
    check = replace(template.checks[0],
                    condition='source == "hydra" and model.cpu_offloading and value == "None"',
                    message="{key} is None while offloading")
    rule = replace(template, code="OFL998", slug="test-only", checks=(check,))
    written = [("model.recompute_granularity", "None", Source.HYDRA, "set")]
    off = _unit("off", {"model.cpu_offloading": False}, written)
    on = _unit("on", {"model.cpu_offloading": True}, written)
    _fresh(monkeypatch)
    assert _findings([off, on, off], [rule]) == [
        [], ["OFL998 2 model.recompute_granularity is None while offloading"], []]
    python = _unit("python", {"model.cpu_offloading": True}, [("model.recompute_granularity", "None", Source.YAML,
                                                                "set")])
    assert _findings([python], [rule]) == [[]]  # the source guard: false for every unit
