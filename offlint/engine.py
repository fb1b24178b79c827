"""The rule engine: evaluates every selected rule's checks on resolved units and builds findings.

Unit-scope rules read effective values (`model.cpu_offloading`); assignment-scope rules look at each
assignment as written (`source`, `key`, `value`, `text`: the OFL0xx spelling rules). Builtin rules
(duplicates, unused suppressions) are computed here and in `api` from data the sources keep.
"""

from __future__ import annotations

import ast
import functools
import itertools
import posixpath
import re
from dataclasses import replace

from offlint import gpus, keys
from offlint.conditions import COMPARE, UNKNOWN, Scope, evaluate, truth
from offlint.resolve import ResolvedUnit, for_version
from offlint.rules import Check, Rule
from offlint.sources import mlm_flags
from offlint.sources.bridge_checks import NOT_CONFIG_FIELDS
from offlint.types import (UNREAD_SPLIT, YAML_LAYER, YAML_LAYER_MAYBE_PYYAML, Assignment, ByVersion, Defaults, Finding,
                           Location, OneOf, Related, Severity, Source, Unit, UnitKind, Unknown, Value)

_TEMPLATE = re.compile(r"\{([^{}]+)\}")


def internal_error(unit: Unit, exc: Exception) -> str:
    """The one-line file error for a bug in checking `unit`: its file is reported (exit 2), the other files are still
    checked. A ValueError escaping a rule (a YAML string where a count was expected) had ended the whole check with
    a message naming no file."""
    text = " ".join(str(exc).split())
    return f"internal error while checking {unit.name} ({type(exc).__name__}: {text[:200]}); please report it"


def check_unit(resolved: ResolvedUnit, rules: list[Rule], strict: bool) -> list[Finding]:
    findings: list[Finding] = []
    plan = _plan(rules, resolved.version)
    by_assignment: dict[str, list[Finding]] | None = None
    names: dict | None = None
    for rule, checks in plan.rules:
        if rule.scope == "unit":
            if not resolved.unit.checked_through_callers:  # a helper: its callers' units report what it sets
                names = names or unit_names(resolved.unit)
                findings.extend(_unit_rule(rule, resolved, strict, names, checks))
        elif rule.scope == "assignment":
            if by_assignment is None:
                by_assignment = _assignment_findings(plan.assignment_rules, resolved, plan.assignment_sources,
                                                     plan.assignment_checks)
            findings.extend(by_assignment[rule.code])
        elif rule.code == "OFL004":
            findings.extend(_duplicates(rule, resolved.unit))
        elif rule.code == "OFL007":
            findings.extend(_unknown_flags(rule, resolved.unit))
        elif rule.code == "OFL008":
            findings.extend(_unbraced(rule, resolved.unit))
        elif rule.code == "OFL009":
            findings.extend(_crlf(rule, resolved.unit))
    if resolved.unit.loop_passes:  # (a launch in an unrolled `for` loop: api._dedupe merges its passes' findings)
        findings = [replace(finding, passes=resolved.unit.loop_passes) for finding in findings]
    at = resolved.unit.written_at
    if at is not None:  # (a launch a called script writes: api._dedupe merges it with that script's own finding)
        findings = [replace(f, command_at=at) if f.location == resolved.unit.location else f for f in findings]
    return findings


class _Plan:
    """What check_unit does for a run's rules and version: the rules that apply, in order, each with its checks for
    the version and their guards (a unit rule's; () for the others); the assignment-scope rules among them and the
    sources of the assignments they may fire on (_firing_sources), and each one's checks for the version with the
    guards that read only the assignment as written (_assignment_guards)."""

    def __init__(self, rules: tuple[Rule, ...], version):
        self.rules = [(rule, tuple((check, _guards(check.condition)) for check in rule.checks_for(version))
                       if rule.scope == "unit" else ()) for rule in rules if rule.applies_to(version)]
        self.assignment_rules = [rule for rule, _ in self.rules if rule.scope == "assignment"]
        self.assignment_sources = _firing_sources(self.assignment_rules, version)
        self.assignment_checks = {rule.code: tuple((check, _assignment_guards(check.condition))
                                                   for check in rule.checks_for(version))
                                  for rule in self.assignment_rules}


# (rules, version, their _Plan): a run asks for the same
_LAST_PLAN: tuple = ((), None, None)


def _plan(rules: list[Rule], version) -> _Plan:
    """The plan for a run's rules and its version, worked out once for them, not once per unit (sixty
    version-range tests a unit, 1,300 units a cold check of Megatron Bridge)."""
    global _LAST_PLAN
    given = tuple(rules)  # (compared item by item, by identity first: a list changed in place is seen)
    last_rules, last_version, plan = _LAST_PLAN
    if plan is None or given != last_rules or version != last_version:
        plan = _Plan(given, version)
        _LAST_PLAN = (given, version, plan)
    return plan


def prepare(rules: list[Rule], version) -> None:
    """Do now what each process's first unit check does once for a run: the plan (_plan), the megatron-core
    version's data and Megatron-LM's flag tables (resolve), the GPU `[tool.offlint]` configures (the memory model's
    device, Transformer Engine's). A cold check that calls this before it forks its workers does it once, not in
    each worker and again in the parent for the launch commands (Megatron Bridge: about 0.02 s of CPU in each).
    It only fills memos: every answer is the one the first check would have worked out."""
    from pathlib import Path

    from offlint import resolve as resolving, te_support
    from offlint.estimate import devices

    _plan(rules, version)
    keys.version_data(version)
    resolving._mlm_flag_defaults(version)
    keys.mlm_flag_dests(version)
    cwd = str(Path.cwd())
    devices.configured_device(cwd)
    te_support._configured_gpu(cwd)


def _applying(rules: list[Rule], version) -> list[Rule]:
    """The rules that apply to `version`, in order (_plan's)."""
    return [rule for rule, _ in _plan(rules, version).rules]


# A unit condition's guards: the parts of its top-level `and` that read one name or key and test it alone
# (`model.cpu_offloading`, `not optimizer.optimizer_cpu_offload`, `model.cuda_graph_impl == "none"`). When one of
# them is false for a unit, the whole condition is False there (Kleene `and`: False and anything is False) and its
# check is skipped without building a scope or evaluating the rest: most offload rules' master switch is off in
# most units. Each guard: (the name or key, whether it is a dotted key, how it is tested: _TRUTHY, _NOT or a
# comparison, the constant compared).
_TRUTHY, _NOT = "truthy", "not"
_COMPARISONS = COMPARE  # the evaluator's own comparison of each operator


@functools.lru_cache(maxsize=None)
def _guards(condition: str) -> tuple[tuple[str, object, object], ...]:
    try:
        tree = ast.parse(condition.strip(), mode="eval").body
    except SyntaxError:
        return ()
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    out = []
    for part in parts:
        test: object = _TRUTHY
        operand = None
        if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not):
            test, part = _NOT, part.operand
        elif isinstance(part, ast.Compare) and len(part.ops) == 1 and type(part.ops[0]) in _COMPARISONS:
            operand = _constant(part.comparators[0])
            if operand is _NOT_CONSTANT:
                continue
            test, part = _COMPARISONS[type(part.ops[0])], part.left
        name = _read_name(part)
        if name:
            out.append((name, "." in name, test, operand))
    return tuple(out)


_NOT_CONSTANT = object()


def _constant(node: ast.AST) -> object:
    """A constant as the evaluator makes it (a tuple or list of constants a list, a set a set), else _NOT_CONSTANT."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts):
        items = [e.value for e in node.elts]
        try:
            return set(items) if isinstance(node, ast.Set) else items
        except TypeError:
            return _NOT_CONSTANT
    return _NOT_CONSTANT


def _read_name(node: ast.AST) -> str:
    """The name or dotted key an expression node reads by itself ("" for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _guarded_out(guards: tuple, resolved: ResolvedUnit, names: dict) -> bool:
    """Whether one of a check's guards is false for the unit (its condition then is False), computed as the
    condition's evaluator computes that part: a name of the unit's first, else the key's effective value; an
    unknown value decides nothing."""
    for name, dotted, test, operand in guards:
        if dotted or name not in names:
            if not dotted and name not in keys.KEYS:
                continue  # (the evaluator raises on an unknown name: left to it)
            read = resolved.get(name)
            if read.state == "unknown":  # (Value.is_unknown)
                continue
            value = read.value
        else:
            value = names[name]
        if value is UNKNOWN:
            continue
        if test is _TRUTHY:
            holds = bool(value)
        elif test is _NOT:
            holds = not value
        else:
            try:
                holds = bool(test(value, operand))
            except TypeError:
                holds = False  # as the evaluator's comparison: the condition is not met
        if not holds:
            return True
    return False


def unit_names(unit: Unit) -> dict:
    """The names a unit's rule conditions read besides its keys; made once per unit, for every rule."""
    gpu, gpu_from = gpus.unit_gpu(unit.name, unit.card_gpu, unit.location.path)
    return {"launches_training": unit.launches_training, "evaluates_only": unit.evaluates_only,
            "builds_no_optimizer": builds_no_optimizer(unit),
            "meant_by_typo": _meant_by_typo(unit), "unit_kind": unit.kind.value, "unit_name": unit.name,
            "unit_path": unit.location.path, "unit_gpu": gpu or "", "unit_gpu_from": gpu_from,
            "launch_gpus": unit.launch_gpus, "checkout_flags": unit.checkout_flags,
            "deepspeed_pipeline": any(flag == "--deepspeed" for flag, *_ in unit.launch_flags),
            "before_2023_flag": unit.before_2023_flag,
            "container_image": unit.container_image, "pinned_torch": unit.pinned_torch, "newer_torch": unit.newer_torch,
            "old_torch": unit.old_torch,
            "defaults": unit.defaults.value, "framework": unit.framework, "accelerator": unit.accelerator}


def builds_no_optimizer(unit: Unit) -> bool:
    """A Megatron-LM style launch that builds no optimizer: its entry script's code reaches no call that does
    (Unit.builds_optimizer), or, where its code does not say, its script's name and flags say it does not train
    (launch.trains_by_flags). Megatron-LM builds OptimizerConfig and the optimizer only in training's setup, so the
    rules about the optimizer's build and steps do not apply (a converter given a training job's flags)."""
    if unit.kind != UnitKind.COMMAND or unit.defaults != Defaults.MLM_CLI:
        return False
    return unit.builds_optimizer is False or unit.builds_optimizer is None and not unit.launches_training


def _meant_by_typo(unit: Unit) -> frozenset[str]:
    """The keys a unit's own misspelt keys and flags were likely meant to be, where OFL003 and OFL007 report the
    typo with that suggestion (Hydra and YAML keys, Megatron-LM flags): a setting such a switch governs is not inert
    but waiting for the typo's fix (OFL202 would remove it). A Python recipe's misspelt attribute is reported by
    nothing else, so OFL202 stays its one sign."""
    meant = {mlm_flags.FLAG_KEYS[closest].name for _, _, closest, _ in unit.unknown_flags
             if closest in mlm_flags.FLAG_KEYS}
    for layer in unit.layers:
        if not layer.inherited:
            for a in layer.assignments:
                if a.source not in _SPELLED_SOURCES:
                    continue
                key = a.key.lstrip("+~")
                if keys.unknown_field(key):
                    meant.add(keys.closest_field(key))
    meant.discard("")
    return frozenset(meant)


_SPELLED_SOURCES = (Source.HYDRA, Source.YAML)


def _unit_rule(rule: Rule, resolved: ResolvedUnit, strict: bool, names: dict,
               checks: tuple | None = None) -> list[Finding]:
    out = []
    if checks is None:
        checks = tuple((check, _guards(check.condition)) for check in rule.checks_for(resolved.version))
    for check, guards in checks:
        if guards and _guarded_out(guards, resolved, names):
            continue
        scope = Scope(resolved.get, resolved.version, names=names)  # (read only: one dict per unit, not per check)
        verdict = truth(evaluate(check.condition, scope))
        condition = ""
        flags: tuple[str, ...] = ()
        undecided = [scope]  # the evaluations that came out unknown
        if verdict is UNKNOWN and any(isinstance(v.value, OneOf) for v in scope.read):
            verdict, scope, condition, undecided, flags = _by_path(check, resolved, names, scope)
        if verdict is True:
            finding = _finding(rule, check, resolved, scope, possible=False, condition=condition)
            if flags:  # it holds only on paths the user's own flags choose: about those flags, not the code
                finding = replace(finding, severity=min(finding.severity, Severity.WARNING, key=_rank),
                                  message=f"{finding.message}\n(only with the user's choice of {', '.join(flags)})")
            out.append(_for_caller(finding, rule, scope, resolved))
        elif verdict is UNKNOWN and strict:
            if any(resolved.overridden(v.key) for s in undecided for v in s.read):
                out.extend(replace(finding, possible=True, message=f"{finding.message}\n{_AS_THE_CODE_SETS}")
                           for finding in _unit_rule(rule, resolved.before_catch_all(), strict, names,
                                                     ((check, guards),)))
            elif any(_could_hold(check, resolved, names, s) for s in undecided):
                out.append(_finding(rule, check, resolved, scope, possible=True))
    return out


_AS_THE_CODE_SETS = ("(with the values this unit's code sets; the overrides it applies by field names offlint cannot "
                     "read may change them)")


def _rank(severity: Severity) -> int:
    return severity.rank


def _for_caller(finding: Finding, rule: Rule, scope: Scope, resolved: ResolvedUnit) -> Finding:
    """A finding about the launch environment (a rule reading `env.*`) that points into a helper the unit
    called names the unit: the environment is the caller's, and each caller that lacks a variable is its own
    mistake (reported once per caller, not merged)."""
    if not any(key.startswith("env.") for key in rule.keys):
        return finding
    for value in scope.read:
        a = value.assignment
        calls = [step for step in a.via if step.startswith("via ")] if a is not None else []
        if calls and a.location == finding.location and not value.key.startswith("env."):
            return replace(finding, message=f"{finding.message}\n(the launch environment of {resolved.unit.name}, "
                                            f"which runs this line {calls[0]})")
    return finding


# The master switch of each offload rule family. Nothing turns one on but code that sets it (a recipe, a helper,
# a flag, an override), and offlint reads that code wherever it is in the tree. The same holds for the settings
# under them (`cpu_offloading_num_layers`, `optimizer_offload_fraction`, ...), which the rules about inert or
# out-of-range settings (OFL202, OFL203, OFL205, OFL209) fire on, and for the other opt-in features the rules
# pair them with: activation recompute and CUDA graphs. The optimizer's lower-precision dtypes are the
# precision-aware optimizer's settings (OFL122 fires on one left without it): fp32 unless code sets them.
MASTER_SWITCHES = frozenset({"model.cpu_offloading", "model.fine_grained_activation_offloading",
                             "optimizer.optimizer_cpu_offload", "optimizer.use_precision_aware_optimizer"})
_OPT_IN_WORDS = ("offload", "recompute", "cuda_graph")
_UNDER_SWITCHES = frozenset({"overlap_cpu_optimizer_d2h_h2d", "pin_cpu_grads", "pin_cpu_params", "main_grads_dtype",
                             "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"})


def is_opt_in_setting(key: str) -> bool:
    """A setting of an opt-in feature (offloading, recompute, CUDA graphs): it keeps its default unless code
    sets it."""
    field_name = key.rsplit(".", 1)[-1]
    return key in MASTER_SWITCHES or (key.startswith(("model.", "optimizer.")) and (
        any(word in field_name for word in _OPT_IN_WORDS) or field_name in _UNDER_SWITCHES))


def _could_hold(check: Check, resolved: ResolvedUnit, names: dict, scope: Scope) -> bool:
    """--strict: whether a verdict that depends on unknown values is worth a "possible" finding.

    Not when it reads a section the unit never builds (a function that only builds an OptimizerConfig has no
    model: the rule does not apply to it). Not when it needs a master switch that nothing this unit runs sets:
    a switch (or another opt-in setting) that is unknown only from a generic cause (a section built by code
    offlint does not read, a call it does not follow, `**kwargs`, the recipe a YAML file overrides when offlint
    cannot find it) keeps its default here; one that some code of the unit sets to a value offlint cannot read
    (a parameter, a user flag, a branch) stays unknown, and the finding is reported."""
    pinned: dict[str, Value] = {}
    current = scope
    for _ in range(4):
        unseen = []
        for value in current.read:
            if not value.is_unknown or value.assignment is not None or value.key in pinned:
                continue
            if not resolved.builds(value.key):
                return False
            if is_opt_in_setting(value.key):
                unseen.append(value.key)
        if not unseen:
            return True
        pinned.update({key: Value(key, "default", resolved.default(key)) for key in unseen})
        lookup = scope.lookup
        current = Scope(lambda key: pinned.get(key) or lookup(key), resolved.version, names=dict(names))
        if truth(evaluate(check.condition, current)) is False:
            return False
    return True


MAX_COMBINATIONS = 64  # of paths, across the branch-dependent keys one condition reads


class _OnePath:
    """A unit's values with the branch-dependent keys pinned to one path."""

    def __init__(self, resolved: ResolvedUnit, pinned: dict[str, Value]):
        self._resolved = resolved
        self._pinned = pinned

    def get(self, key: str) -> Value:
        return self._pinned.get(key) or self._resolved.get(key)


def _by_path(check: Check, resolved: ResolvedUnit, names: dict,
             first: Scope) -> tuple[object, Scope, str, list[Scope], tuple[str, ...]]:
    """A condition that read values depending on which branch ran, evaluated once per consistent combination
    of paths (two values decided by the same `if` take the same branch of it).

    True on every combination: the rule holds (reported plainly). True on some: reported with the conditions
    of the first such combination, and with the command-line flags that choose them when every such path is
    one only a user's own flags choose; unknown (possible) when every such path needs two or more undecided
    branches at once, none of them a user's flag. Otherwise unknown if any combination is (with the scopes of those
    combinations), else False. A combination's evaluation may read further branch-dependent keys
    (short-circuits), which are then split as well."""
    split = [v.key for v in first.read if isinstance(v.value, OneOf)]
    for _ in range(4):
        per_key = [resolved.paths(key) for key in split]
        combinations = list(itertools.islice(itertools.product(*per_key), MAX_COMBINATIONS + 1))
        if len(combinations) > MAX_COMBINATIONS:
            return UNKNOWN, first, "", [first], ()
        results = []
        more: set[str] = set()
        for combination in combinations:
            taken = _consistent([steps for _, steps in combination])
            if taken is None:
                continue
            scope = Scope(_OnePath(resolved, {v.key: v for v, _ in combination}).get, resolved.version,
                          names=dict(names))
            verdict = truth(evaluate(check.condition, scope))
            results.append((verdict, scope, taken))
            more |= {v.key for v in scope.read if isinstance(v.value, OneOf)} - set(split)
        if not more:
            break
        split += sorted(more)
    else:
        return UNKNOWN, first, "", [first], ()
    fired = [(scope, taken) for verdict, scope, taken in results if verdict is True]
    if fired and len(fired) == len(results):
        return True, fired[0][0], "", [], ()
    if fired and all(unread or absent or len(conditions) >= _JOINT_SPLITS and not flags
                     for _, (conditions, flags, unread, absent) in fired):
        # Only where two or more undecided branches go one way together (`if settings.a is not None:` ... `if
        # settings.b is not None:` on one object offlint cannot read), on a branch whose condition offlint does
        # not read (UNREAD_SPLIT), or where a launch script's branches leave flags out (a path the script may rule
        # out otherwise: Pai-Megatron-Patch's launchers choose `--use-distributed-optimizer` by a parameter, and
        # force it on first when the optimizer is offloaded): whether a run takes it is as unknown as the values it
        # tests, so the finding is possible (--strict), not certain. One branch of the code (a recipe's option, or
        # a launch script's branch giving flags together) is a path someone wrote to be taken: that stays a
        # finding (Bridge PR 1891's false OFL103).
        return UNKNOWN, first, "", [scope for scope, _ in fired], ()
    if fired:
        scope, (conditions, _, _, _) = fired[0]
        more = len(fired) - 1
        others = f", and on {more} other path{'s' if more > 1 else ''}" if more else ""
        flags = [taken[1] for _, taken in fired]
        user_only = tuple(dict.fromkeys(f for chosen in flags for f in chosen)) if all(flags) else ()
        return True, scope, f"{' and '.join(conditions)}{others}", [], user_only
    undecided = [scope for verdict, scope, _ in results if verdict is UNKNOWN]
    return (UNKNOWN if undecided else False), first, "", undecided, ()


_JOINT_SPLITS = 2  # undecided branches a path needs before its finding is only possible


def _consistent(per_value: list[tuple[tuple, ...]]) -> tuple[list[str], tuple[str, ...], bool, bool] | None:
    """The conditions of a combination of paths, in order and once each, the command-line flags that choose it
    when every one of its splits is decided by user flags alone (else ()), whether one of its splits is one
    whose condition offlint does not read (UNREAD_SPLIT), and whether each of its steps is a launch script's branch
    leaving a flag out (a fifth item, True: launch._on_alternatives); None when two of its paths took different
    branches of the same split (that combination cannot happen)."""
    branch_of: dict[str, int] = {}
    conditions: list[str] = []
    flags: list[str] = []
    user_only = True
    unread = False
    absent = any(per_value)  # (until a step that is no flag left out; a combination without steps: False)
    for steps in per_value:
        for step in steps:
            split_id, index, condition = step[:3]
            if branch_of.setdefault(split_id, index) != index:
                return None
            if condition not in conditions:
                conditions.append(condition)
            chosen = step[3] if len(step) > 3 else ()
            user_only = user_only and bool(chosen)
            flags.extend(chosen)
            unread = unread or split_id.startswith(UNREAD_SPLIT)
            absent = absent and len(step) > 4 and step[4] is True
    return conditions, tuple(dict.fromkeys(flags)) if user_only and flags else (), unread, absent


def _with_unknowns(message: str, read: list[Value], because: list[str]) -> str:
    """A possible finding's message with the unknown values it rests on, the keys of one reason named together
    ("ddp.nccl_ub, model.cuda_graph_impl: set by the recipe this command runs", not the reason once per key), then
    what else its condition's helpers found unknown (Scope.unknown_because)."""
    keys_of: dict[str, list[str]] = {}
    for v in read:
        if v.is_unknown and isinstance(v.value, Unknown):
            keys_of.setdefault(v.value.reason, []).append(v.key)
    named = "; ".join([f"{', '.join(keys)}: {reason}" for reason, keys in keys_of.items()]
                      + list(dict.fromkeys(because)))
    return f"{message}\n(depends on unknown values: {named})" if named else message


def _finding(rule: Rule, check: Check, resolved: ResolvedUnit, scope: Scope, possible: bool,
             condition: str = "") -> Finding:
    read = list(scope.read)
    message = render_message(check.message, scope)
    anchor = _anchor(rule, read, resolved, message)
    conditions = [c for c in (resolved.unit.path_condition, condition) if c]
    if conditions:
        message = f"{message}\n(on the path where {' and '.join(conditions)})"
    if possible:
        message = _with_unknowns(message, read, scope.unknown_because)
    # (the tree's Bridge code noted as keys is no setting: OFL217 listed "bridge_expert_tp_default = ConfigContainer(...)")
    settings = [v for v in read if v.assignment is not None and v.key not in NOT_CONFIG_FIELDS]
    related = tuple(_related(v) for v in settings if v.assignment.location != anchor)
    return Finding(code=rule.code, slug=rule.slug, severity=check.severity, message=message, location=anchor,
                   unit=resolved.unit.name, related=tuple(dict.fromkeys(related)), fix=check.fix or rule.fix,
                   possible=possible, url=rule.url, stage=check.stage, unit_path=resolved.unit.location.path,
                   written=tuple(dict.fromkeys((v.key, v.assignment.location) for v in settings)),
                   on_command_line=tuple(dict.fromkeys(v.key for v in settings
                                                       if v.assignment.source in _COMMAND_LINE_SOURCES)))


_COMMAND_LINE_SOURCES = (Source.HYDRA, Source.MLM)


def _anchor(rule: Rule, read: list[Value], resolved: ResolvedUnit, message: str = "") -> Location:
    """Where a finding points: the first of the rule's keys that the unit sets (with `anchor: named`, the first that
    the message names too: OFL202 pointed at `offload_modules = None`, the first of its keys a Bridge fork's PEFT
    recipe set, where its message listed another), else any key it read."""
    by_key = {v.key: v for v in read}
    set_keys = [by_key[key] for key in rule.keys if key in by_key and by_key[key].assignment is not None]
    if set_keys:
        chosen = set_keys[0]
        if rule.anchor == "named":
            chosen = next((v for v in set_keys if re.search(rf"\b{re.escape(v.key.rsplit('.', 1)[-1])}\b", message)),
                          chosen)
        return chosen.assignment.location
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


# An assignment-scope rule's verdict that depends only on the assignment as written (most of them: spelling,
# types) is the same wherever the same text sets the same key; a tree repeats them thousands of times. Per set of
# rules, the assignment as written -> one verdict per rule, _PER_UNIT where the verdict read the unit's values
# (computed for each unit), or () when no rule fires whatever the unit.
_ASSIGNMENT_VERDICTS: dict[tuple[str, ...], dict[tuple, tuple]] = {}
_PER_UNIT = object()


def _assignment_findings(rules: list[Rule], resolved: ResolvedUnit, sources: dict[str, tuple[Source, ...]],
                         checks: dict[str, tuple]) -> dict[str, list[Finding]]:
    """The findings of each assignment-scope rule on the assignments the unit itself writes (as they act on the
    version), in one pass over them: each assignment looks up the verdicts of every rule at once. `sources`: per
    kind of write, the sources of the assignments a rule may fire on (_firing_sources), the others skipped;
    `checks`: each rule's checks with their guards (_Plan.assignment_checks)."""
    out: dict[str, list[Finding]] = {rule.code: [] for rule in rules}
    memo = _ASSIGNMENT_VERDICTS.setdefault(tuple(out), {})
    version = resolved.version
    version_key = (version.major, version.minor, version.patch)  # a plain tuple: hashed in C, not by a dataclass
    for layer in resolved.unit.layers:
        if layer.inherited:
            continue
        for written in layer.assignments:
            if written.source not in sources[written.op]:
                continue
            assignment = written
            if type(written.value) is ByVersion:  # (for_version's test without isinstance's __class__ look-up)
                assignment = for_version(written, version)
                if assignment is None:
                    continue
            elif type(written.value) is OneOf:
                assignment = _as_written(written)
            value = assignment.value
            unknown = isinstance(value, Unknown)
            as_written = (version_key, assignment.key, type(value).__name__, "?" if unknown else repr(value),
                          assignment.text, assignment.source, assignment.op)
            verdicts = memo.get(as_written)
            names = None
            if verdicts is None:
                names = _names(assignment, version)
                verdicts = tuple(_assignment_verdict(rule, names, resolved, checks[rule.code]) for rule in rules)
                memo[as_written] = () if all(v is None and not read for v, read in verdicts) else \
                    tuple(_PER_UNIT if read_keys else verdict for verdict, read_keys in verdicts)
                verdicts = tuple(verdict for verdict, _ in verdicts)
            for rule, verdict in zip(rules, verdicts):
                if verdict is _PER_UNIT:
                    names = names or _names(assignment, version)
                    verdict = _assignment_verdict(rule, names, resolved, checks[rule.code])[0]
                if verdict is not None:
                    out[rule.code].append(_assignment_finding(rule, verdict, assignment, resolved))
    return out


def _as_written(assignment: Assignment) -> Assignment:
    """A launch's flag or override that one alternative of an undecided branch gives (launch._on_alternatives) as
    its word writes it: what a spelling rule judges, on whichever path it is given."""
    for on_path, _steps, where, text in assignment.value.paths:
        if where == assignment.location and text == assignment.text:
            return replace(assignment, value=on_path)
    return assignment


# The kinds of write an assignment is (Assignment.op)
_OPS = ("set", "add", "force", "delete")


def _firing_sources(rules: list[Rule], version) -> dict[str, tuple[Source, ...]]:
    """For each kind of write (Assignment.op), the sources of the assignments of that kind on which one of the
    assignment-scope `rules` may fire: each check's guards on `source` and `op` (_guards: `source in ("hydra",
    "yaml")`, `source == "python" and op == "add"`) rule out the others, whatever the assignment and the unit (the
    spelling rules are about YAML, command lines and a Python write of an attribute no config class has; most
    assignments of a tree are Python writes of fields). A check without such a guard may fire on any. Keyed by
    the kind, a string, and holding tuples: asked once per assignment, by a subscript and an identity test in C."""
    firing: dict[str, list[Source]] = {op: [] for op in _OPS}
    for source in Source:
        for rule in rules:
            for check in rule.checks_for(version):
                guards = tuple(g for g in _guards(check.condition) if g[0] in ("source", "op"))
                for op in _OPS:
                    if source not in firing[op] and not _guarded_out(guards, None, {"source": source.value, "op": op}):
                        firing[op].append(source)
    return {op: tuple(sources) for op, sources in firing.items()}


# The names an assignment-scope condition sees besides the unit's keys (_names'), which one assignment as written
# decides alone.
_ASSIGNMENT_NAMES = frozenset({"key", "value", "text", "source", "key_type", "op"})


@functools.lru_cache(maxsize=None)
def _assignment_guards(condition: str) -> tuple[tuple[str, object, object], ...]:
    """An assignment-scope condition's guards (_guards) that read only the assignment's own names (`source in
    ("hydra", "yaml")`, `key_type == "list"`, `value == "None"`): one of them false makes the condition False for
    every unit, so the check is skipped and the verdict kept for every unit with that assignment (the memo of
    _assignment_findings). A guard on a unit's key is left to the evaluator: the verdict then depends on the unit."""
    return tuple(guard for guard in _guards(condition) if guard[0] in _ASSIGNMENT_NAMES)


def _names(assignment: Assignment, version) -> dict:
    """What an assignment-scope condition sees besides the unit's keys."""
    value = assignment.value
    return {"key": assignment.key, "value": UNKNOWN if isinstance(value, Unknown) else value,
            "text": assignment.text, "source": assignment.source.value,
            "key_type": keys.key_type(assignment.key, version), "op": assignment.op}


def _assignment_verdict(rule: Rule, names: dict, resolved: ResolvedUnit,
                        checks: tuple) -> tuple[tuple[Check, str] | None, bool]:
    """The first of the rule's checks that fires on the assignment (with its message), or None; and whether the
    evaluation read any of the unit's values (else the verdict holds for every unit). `checks`: the rule's checks
    for the version, each with its _assignment_guards: one of them false skips the check."""
    read_keys = False
    for check, guards in checks:
        if guards and _guarded_out(guards, resolved, names):
            continue  # False for every unit: a part of its top-level `and` about the assignment alone is false
        scope = Scope(resolved.get, resolved.version, names=names)
        fired = truth(evaluate(check.condition, scope)) is True
        read_keys = read_keys or bool(scope.read)
        if fired:
            return (check, render_message(check.message, scope)), read_keys or bool(scope.read)
    return None, read_keys


def _assignment_finding(rule: Rule, verdict: tuple[Check, str], assignment: Assignment,
                        resolved: ResolvedUnit) -> Finding:
    check, message = verdict
    if resolved.unit.path_condition:
        message = f"{message}\n(on the path where {resolved.unit.path_condition})"
    return Finding(code=rule.code, slug=rule.slug, severity=check.severity, message=message,
                   location=assignment.location, unit=resolved.unit.name, fix=check.fix or rule.fix,
                   url=rule.url, stage=check.stage, unit_path=resolved.unit.location.path,
                   written=((assignment.key, assignment.location),))


def _unknown_flags(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL007: a Megatron-LM launch flag its entry script's parser does not have (Unit.unknown_flags). One that only
    an alternative of an undecided branch gives stops the job on that path only, which the user's input chooses:
    a warning naming it (as engine's path-conditioned findings are)."""
    script = posixpath.basename(unit.entry_script)
    chosen = "\n(on the path where {})\n(only with the user's choice of {})"
    # (argparse reports the required options not given before the arguments it does not know)
    stop = f"\"the following arguments are required: {', '.join(unit.missing_required)}\" when it starts, before " \
        f"it would name the unrecognized arguments" if unit.missing_required else ""
    return [Finding(code=rule.code, slug=rule.slug, location=where, unit=unit.name,
                    severity=min(rule.severity, Severity.WARNING, key=_rank) if path else rule.severity,
                    unit_path=unit.location.path, fix=rule.fix, url=rule.url,
                    message=f"{flag} is not an option of {script}'s argument parser in this checkout"
                            + (f" (did you mean {closest}?)" if closest else "") + ": argparse stops the job with "
                            + (stop or f"\"unrecognized arguments: {unit.unrecognized or flag}\" when it starts")
                            + (chosen.format(path, flag) if path else ""))
            for flag, where, closest, path in unit.unknown_flags]


def _unbraced(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL008: a launch word expanding an array without braces (Unit.unbraced)."""
    out = []
    for written, where, value in unit.unbraced:
        name = written[1:written.index("[")]
        gets = f"the word `{value}`" if value else "a word ending in the literal subscript"
        out.append(Finding(code=rule.code, slug=rule.slug, severity=rule.severity, location=where, unit=unit.name,
                           unit_path=unit.location.path, fix=rule.fix, url=rule.url,
                           message=f"`{written}` is the first element of {name} followed by a literal "
                                   f"`{written[written.index('['):]}` to bash, not the array (`${{{name}[@]}}` is): "
                                   f"the launch gets {gets} and none of the array's other elements"))
    return out


def _crlf(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL009: a launch in a script file with CRLF line endings (Unit.crlf_line)."""
    if not unit.crlf_line:
        return []
    return [Finding(code=rule.code, slug=rule.slug, severity=rule.severity, location=unit.location, unit=unit.name,
                    unit_path=unit.location.path, fix=rule.fix, url=rule.url,
                    message=f"this script has CRLF line endings (line {unit.crlf_line} is the first to end in "
                            f"a carriage return): bash keeps each `\\r`, so a `\\` ending a line does not continue "
                            f"the command (the words on the lines after it are not this launch's) and each line's "
                            f"last word ends in `\\r`")]


# (a constant: an Enum member's lookup costs a third of a microsecond, and OFL004 looks at every assignment of every
# unit, about 100,000 in a cold check of Megatron Bridge)
_DUPLICATE_SOURCES = (Source.YAML, Source.HYDRA, Source.MLM)


def _written_together(unit: Unit, first: Location, then: Location) -> bool:
    """Whether a launch command's two words were written together: both on the command itself, or both in one
    variable's assignment (an array's words keep their places there; a string's, split at its unquoted expansion,
    are all at that expansion: Unit.expanded_at). A flag given in two variables, or in one and again on the command, is layered on purpose:
    a model's defaults array overridden by the run's own (THUDM/slime's `--moe-token-dispatcher-type alltoall` in
    its model file, then `flex` with DeepEP; 8 such OFL004 warnings). Other units' words are always together."""
    return unit.kind != UnitKind.COMMAND or _word_group(unit, first) == _word_group(unit, then)


def _word_group(unit: Unit, at: Location) -> object:
    if at.path != unit.location.path:
        return at.path, at.line
    if at in unit.expanded_at:  # (a string variable's words, split where it is expanded: its assignment's)
        return "expanded", at
    inside = [(end, start) for start, end in unit.assignment_spans if start <= (at.line, at.col) <= end]
    if inside:
        return min(inside)  # (the innermost: `A="$(B=1 ...)"`)
    return "command" if at.line >= unit.location.line else at.line  # a `source` line's words are that file's


def _duplicates(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL004: one YAML mapping or one command line sets a key twice with different values; or an override file
    Bridge reads with OmegaConf.load repeats a key in one mapping, whatever its values (the file is refused)."""
    out = []
    for layer in unit.layers:
        seen: dict[str, Assignment] = {}
        refused = layer.name == YAML_LAYER  # (Bridge's OmegaConf.load, no PyYAML copy in between)
        for a in layer.assignments:
            if a.source not in _DUPLICATE_SOURCES or a.op == "delete" or a.source == Source.YAML and layer.inherited:
                continue  # (a launch's copy of its YAML file's layer: the file's own unit reports its repeats)
            first = seen.get(a.key)
            seen[a.key] = a
            if first is None or first.location == a.location:
                continue
            if unit.repeated_sections and _two_occurrences(unit, first.location, a.location):
                continue  # (in two mappings of a repeated section: _repeated_section_findings reports the section)
            flag = _flag_written(first, a)
            if refused and a.source == Source.YAML:
                severity = Severity.ERROR
                message = (f"{a.key} is given twice in one mapping (line {first.location.line}, then line "
                           f"{a.location.line}): Megatron Bridge reads override files with OmegaConf.load, which "
                           f"refuses this one (\"found duplicate key\"), so the job stops before training")
            elif first.value != a.value and _written_together(unit, first.location, a.location) and flag:
                severity = rule.severity  # (a Megatron-LM flag named as the script writes it, with its words)
                message = (f"{flag} is given twice with different values ({first.text} at line "
                           f"{first.location.line}, then {a.text}); argparse keeps the last one silently")
            elif first.value != a.value and _written_together(unit, first.location, a.location):
                severity = rule.severity
                message = (f"{a.key} is set twice with different values ({first.text or first.value!r} at line "
                           f"{first.location.line}, then {a.text or a.value!r}); the last one wins silently")
                if a.source == Source.YAML:  # (YAML_LAYER_MAYBE_PYYAML)
                    message += (" where a launch's script loads the file with PyYAML first; where Bridge's "
                                "OmegaConf.load reads it, the file is refused (\"found duplicate key\")")
                if a.source == Source.MLM and a.text in mlm_flags.AFTER_PARSING:  # (wherever it is written)
                    message = (f"{a.key} is set twice with different values ({first.text or first.value!r} at line "
                               f"{first.location.line}, and {a.text} at line {a.location.line}): "
                               f"{mlm_flags.AFTER_PARSING[a.text]}, so {first.text or first.value!r} has no effect")
            else:
                continue
            name = flag or a.key
            out.append(Finding(code=rule.code, slug=rule.slug, severity=severity, message=message,
                               location=a.location, unit=unit.name, unit_path=unit.location.path,
                               related=(Related(first.location, f"{name} = {first.text} (first)"),),
                               fix=rule.fix, url=rule.url, written=((a.key, a.location),)))
    out.extend(_repeated_section_findings(rule, unit))
    return out


def _flag_written(first: Assignment, then: Assignment) -> str:
    """The Megatron-LM flag two command-line values of one key were given with ("" where they are not two such
    values, written out: a switch's, a value offlint cannot read, a flag validate_args rewrites)."""
    if then.source != Source.MLM or first.source != Source.MLM or not (first.text and then.text) or \
            then.text in mlm_flags.AFTER_PARSING:
        return ""
    return mlm_flags.FLAG_OF_KEY.get(then.key, "")


def _two_occurrences(unit: Unit, first: Location, then: Location) -> bool:
    """Whether a YAML key's two places lie in two occurrences of a repeated top-level section, each running from its
    own `section:` line to the next one (a flattened key in two blocks is its section's, however Bridge names it)."""
    starts = {at.line for _, *places in unit.repeated_sections for at in places}
    return sum(line <= first.line for line in starts) != sum(line <= then.line for line in starts)


def _repeated_section_findings(rule: Rule, unit: Unit) -> list[Finding]:
    """OFL004 on an override file's top-level section given twice (Unit.repeated_sections): OmegaConf.load refuses
    the file as it refuses any repeated key; PyYAML, where a launch's script loads it first, keeps the second mapping
    only, dropping the first one's keys."""
    if not unit.repeated_sections:
        return []
    by_pyyaml = any(layer.name == YAML_LAYER_MAYBE_PYYAML for layer in unit.layers)
    out = []
    for name, first, then in unit.repeated_sections:
        given = f"`{name}:` is given twice at the top level (line {first.line}, then line {then.line})"
        if by_pyyaml:
            severity, message = rule.severity, (
                f"{given}: where a launch's script loads the file with PyYAML first, the second mapping replaces the "
                f"first, whose keys are dropped silently; where Bridge's OmegaConf.load reads it, the file is refused "
                f"(\"found duplicate key\")")
        else:
            severity, message = Severity.ERROR, (
                f"{given}: Megatron Bridge reads override files with OmegaConf.load, which refuses this one (\"found "
                f"duplicate key\"), so the job stops before training")
        out.append(Finding(code=rule.code, slug=rule.slug, severity=severity, message=message, location=then,
                           unit=unit.name, unit_path=unit.location.path,
                           related=(Related(first, f"`{name}:` (first)"),), fix=rule.fix, url=rule.url))
    return out
