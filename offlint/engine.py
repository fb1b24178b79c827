"""The rule engine: evaluates every selected rule's checks on resolved units and builds findings.

Unit-scope rules read effective values (`model.cpu_offloading`); assignment-scope rules look at each
assignment as written (`source`, `key`, `value`, `text`: the OFL0xx spelling rules). Builtin rules
(duplicates, unused suppressions) are computed here and in `api` from data the sources keep.
"""

from __future__ import annotations

import itertools
import re

from offlint import keys
from offlint.conditions import UNKNOWN, Scope, evaluate, truth
from offlint.resolve import ResolvedUnit, for_version
from offlint.rules import Check, Rule
from offlint.types import Assignment, Finding, Location, OneOf, Related, Source, Unit, Unknown, Value

_TEMPLATE = re.compile(r"\{([^{}]+)\}")


def check_unit(resolved: ResolvedUnit, rules: list[Rule], strict: bool) -> list[Finding]:
    findings: list[Finding] = []
    own: list[tuple[Assignment, tuple]] | None = None
    for rule in rules:
        if not rule.applies_to(resolved.version):
            continue
        if rule.scope == "unit":
            findings.extend(_unit_rule(rule, resolved, strict))
        elif rule.scope == "assignment":
            own = own if own is not None else _own_assignments(resolved)
            findings.extend(_assignment_rule(rule, resolved, own))
        elif rule.code == "OFL004":
            findings.extend(_duplicates(rule, resolved.unit))
    return findings


def _unit_rule(rule: Rule, resolved: ResolvedUnit, strict: bool) -> list[Finding]:
    out = []
    unit = resolved.unit
    names = {"launches_training": unit.launches_training, "unit_kind": unit.kind.value, "unit_name": unit.name,
             "defaults": unit.defaults.value}
    for check in rule.checks_for(resolved.version):
        scope = Scope(resolved.get, resolved.version, names=dict(names))
        verdict = truth(evaluate(check.condition, scope))
        condition = ""
        if verdict is UNKNOWN and any(isinstance(v.value, OneOf) for v in scope.read):
            verdict, scope, condition = _by_path(check, resolved, names, scope)
        if verdict is True:
            out.append(_finding(rule, check, resolved, scope, possible=False, condition=condition))
        elif verdict is UNKNOWN and strict:
            out.append(_finding(rule, check, resolved, scope, possible=True))
    return out


MAX_COMBINATIONS = 64  # of paths, across the branch-dependent keys one condition reads


class _OnePath:
    """A unit's values with the branch-dependent keys pinned to one path."""

    def __init__(self, resolved: ResolvedUnit, pinned: dict[str, Value]):
        self._resolved = resolved
        self._pinned = pinned

    def get(self, key: str) -> Value:
        return self._pinned.get(key) or self._resolved.get(key)


def _by_path(check: Check, resolved: ResolvedUnit, names: dict, first: Scope) -> tuple[object, Scope, str]:
    """A condition that read values depending on which branch ran, evaluated once per consistent combination
    of paths (two values decided by the same `if` take the same branch of it).

    True on every combination: the rule holds (reported plainly). True on some: reported with the conditions
    of the first such combination. Otherwise unknown if any combination is, else False. A combination's
    evaluation may read further branch-dependent keys (short-circuits), which are then split as well."""
    split = [v.key for v in first.read if isinstance(v.value, OneOf)]
    for _ in range(4):
        per_key = [resolved.paths(key) for key in split]
        combinations = list(itertools.islice(itertools.product(*per_key), MAX_COMBINATIONS + 1))
        if len(combinations) > MAX_COMBINATIONS:
            return UNKNOWN, first, ""
        results = []
        more: set[str] = set()
        for combination in combinations:
            taken = _consistent([steps for _, steps in combination])
            if taken is None:
                continue
            scope = Scope(_OnePath(resolved, {v.key: v for v, _ in combination}).get, resolved.version,
                          names=dict(names))
            verdict = truth(evaluate(check.condition, scope))
            results.append((verdict, scope, " and ".join(taken)))
            more |= {v.key for v in scope.read if isinstance(v.value, OneOf)} - set(split)
        if not more:
            break
        split += sorted(more)
    else:
        return UNKNOWN, first, ""
    fired = [(scope, condition) for verdict, scope, condition in results if verdict is True]
    if fired and len(fired) == len(results):
        return True, fired[0][0], ""
    if fired:
        scope, condition = fired[0]
        more = len(fired) - 1
        others = f", and on {more} other path{'s' if more > 1 else ''}" if more else ""
        return True, scope, f"{condition}{others}"
    return (UNKNOWN if any(verdict is UNKNOWN for verdict, _, _ in results) else False), first, ""


def _consistent(per_value: list[tuple[tuple[str, int, str], ...]]) -> list[str] | None:
    """The conditions of a combination of paths, in order and once each; None when two of its paths took
    different branches of the same split (that combination cannot happen)."""
    branch_of: dict[str, int] = {}
    conditions: list[str] = []
    for steps in per_value:
        for split_id, index, condition in steps:
            if branch_of.setdefault(split_id, index) != index:
                return None
            if condition not in conditions:
                conditions.append(condition)
    return conditions


def _finding(rule: Rule, check: Check, resolved: ResolvedUnit, scope: Scope, possible: bool,
             condition: str = "") -> Finding:
    read = list(scope.read)
    anchor = _anchor(rule, read, resolved)
    message = render_message(check.message, scope)
    if condition:
        message = f"{message} (on the path where {condition})"
    if possible:
        unknowns = [v for v in read if v.is_unknown]
        named = "; ".join(f"{v.key}: {v.value.reason}" for v in unknowns if isinstance(v.value, Unknown))
        message = f"{message} (depends on unknown values: {named})" if named else message
    related = tuple(_related(v) for v in read if v.assignment is not None and v.assignment.location != anchor)
    return Finding(code=rule.code, slug=rule.slug, severity=check.severity, message=message, location=anchor,
                   unit=resolved.unit.name, related=tuple(dict.fromkeys(related)), fix=check.fix or rule.fix,
                   possible=possible, url=rule.url, stage=check.stage)


def _anchor(rule: Rule, read: list[Value], resolved: ResolvedUnit) -> Location:
    """Where a finding points: the first of the rule's keys that the unit sets, else any key it read."""
    by_key = {v.key: v for v in read}
    for key in rule.keys:
        value = by_key.get(key)
        if value is not None and value.assignment is not None:
            return value.assignment.location
    if rule.keys and rule.keys[0].startswith("env.") and any(v.key == rule.keys[0] for v in read):
        # A rule about a missing variable (OFL301) points where the environment is defined, not at the other
        # settings it consulted (CUDA graphs, NCCL user buffers).
        return resolved.unit.env_location or resolved.unit.location
    for value in read:
        if value.assignment is not None:
            return value.assignment.location
    if resolved.unit.env_location is not None and any(v.key.startswith("env.") for v in read):
        return resolved.unit.env_location  # an unset variable: point at where the environment is defined
    return resolved.unit.location


def _related(value: Value) -> Related:
    a = value.assignment
    assert a is not None
    how = {Source.HYDRA: "on the command line", Source.YAML: "in YAML", Source.MLM: "as a Megatron-LM flag",
           Source.ENV: "in the environment", Source.PERF: "as a performance-script flag"}.get(a.source, "")
    shown = a.text or repr(a.value)
    note = f"{value.key} = {shown}" + (f" {how}" if how else "")
    if a.via:
        note += " " + " ".join(a.via)
    return Related(a.location, note)


def render_message(template: str, scope: Scope) -> str:
    def substitute(match: re.Match) -> str:
        value = evaluate(match.group(1), scope)
        if value is UNKNOWN:
            return "?"
        if isinstance(value, (list, tuple, set)):
            return "[" + ", ".join(str(v) for v in value) + "]"
        return str(value)

    return _TEMPLATE.sub(substitute, template)


def _own_assignments(resolved: ResolvedUnit) -> list[tuple[Assignment, tuple]]:
    """The assignments the unit itself writes (as they act on the version), each with what an assignment-scope
    verdict depends on when it reads no other key: the assignment as written."""
    out = []
    for layer in resolved.unit.layers:
        if layer.inherited:
            continue
        for written in layer.assignments:
            assignment = for_version(written, resolved.version)
            if assignment is not None:
                value = assignment.value
                as_written = (resolved.version, assignment.key, type(value).__name__,
                              "?" if isinstance(value, Unknown) else repr(value), assignment.text, assignment.source,
                              assignment.op)
                out.append((assignment, as_written))
    return out


def _assignment_rule(rule: Rule, resolved: ResolvedUnit, own: list[tuple[Assignment, tuple]]) -> list[Finding]:
    out = []
    for assignment, as_written in own:
        verdict = _assignment_verdict(rule, assignment, as_written, resolved)
        if verdict is not None:
            check, message = verdict
            out.append(Finding(code=rule.code, slug=rule.slug, severity=check.severity, message=message,
                               location=assignment.location, unit=resolved.unit.name, fix=check.fix or rule.fix,
                               url=rule.url, stage=check.stage))
    return out


# Assignment-scope verdicts that depend only on the assignment as written (most of them: spelling, types) are
# the same wherever the same text sets the same key; a tree repeats them thousands of times.
_ASSIGNMENT_VERDICTS: dict[tuple, tuple[Check, str] | None] = {}


def _assignment_verdict(rule: Rule, assignment: Assignment, as_written: tuple,
                        resolved: ResolvedUnit) -> tuple[Check, str] | None:
    memo_key = (rule.code, as_written)
    if memo_key in _ASSIGNMENT_VERDICTS:
        return _ASSIGNMENT_VERDICTS[memo_key]
    value = UNKNOWN if isinstance(assignment.value, Unknown) else assignment.value
    names = {"key": assignment.key, "value": value, "text": assignment.text, "source": assignment.source.value,
             "key_type": keys.key_type(assignment.key, resolved.version), "op": assignment.op}
    verdict = None
    read_keys = False
    for check in rule.checks_for(resolved.version):
        scope = Scope(resolved.get, resolved.version, names=names)
        fired = truth(evaluate(check.condition, scope)) is True
        read_keys = read_keys or bool(scope.read)
        if fired:
            verdict = (check, render_message(check.message, scope))
            read_keys = read_keys or bool(scope.read)
            break
    if not read_keys:  # the unit's values played no part: the verdict holds for every unit
        _ASSIGNMENT_VERDICTS[memo_key] = verdict
    return verdict


def _duplicates(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL004: one YAML mapping or one command line sets a key twice with different values."""
    out = []
    for layer in unit.layers:
        seen: dict[str, Assignment] = {}
        for a in layer.assignments:
            if a.source not in (Source.YAML, Source.HYDRA, Source.MLM) or a.op == "delete":
                continue
            first = seen.get(a.key)
            if first is not None and first.value != a.value and first.location != a.location:
                message = (f"{a.key} is set twice with different values ({first.text or first.value!r} at line "
                           f"{first.location.line}, then {a.text or a.value!r}); the last one wins silently")
                out.append(Finding(code=rule.code, slug=rule.slug, severity=rule.severity, message=message,
                                   location=a.location, unit=unit.name,
                                   related=(Related(first.location, f"{a.key} = {first.text} (first)"),),
                                   fix=rule.fix, url=rule.url))
            seen[a.key] = a
    return out
