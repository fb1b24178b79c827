"""Resolution: a unit's layered assignments become one effective, three-valued value per key.

Layers apply in order (recipe < YAML < command line, then the environment); within a layer the last
assignment wins. A key no layer sets takes the defaults of its source (megatron-core dataclass defaults, or
Megatron-LM argparse defaults for flag-based launches) when the unit constructed that section, and is
unknown otherwise: unknown is never treated as default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from offlint import keys
from offlint.named_precision import PRECISION_RECIPES, configured
from offlint.sources import bridge_finalize, launch, mlm_flags
from offlint.sources.python_values import Record
from offlint.types import (ABSENT, BELOW, KEY_DEFAULT, AnyField, Assignment, ByVersion, Defaults, OneOf, Unit,
                           UnitKind, Unknown, Value)
from offlint.versions import Version

# Megatron-LM's argparse defaults where they differ from the dataclass default (CLI-3; checked against the
# real parser by the conformance tests; see offlint/data/*.json "mlm_flags").
MLM_CLI_DEFAULTS = {
    "optimizer.optimizer_offload_fraction": 1.0,
}



@dataclass
class ResolvedUnit:
    unit: Unit
    version: Version
    values: dict[str, Assignment] = field(default_factory=dict)  # key -> winning assignment
    _seen: dict[str, Value] = field(default_factory=dict, repr=False)  # every rule asks for the same keys
    _assigned_sections: set[str] | None = field(default=None, repr=False)
    # key -> its default Value, shared by every unit of this version and kind of defaults (_DEFAULT_VALUES)
    _defaults: dict[str, Value] | None = field(default=None, repr=False)
    # field name -> the first of the unit's unread flags that sets it (_unread_flag), made at its first question
    _unread_fields: dict | None = field(default=None, repr=False)
    _path_fields: dict | None = field(default=None, repr=False)  # the same for Unit.path_flags (_path_flag)
    _before: ResolvedUnit | None = field(default=None, repr=False)  # before_catch_all's, made at its first question

    def get(self, key: str) -> Value:
        value = self._seen.get(key)
        if value is None:
            value = self._seen[key] = self._value(key)
        return value

    def paths(self, key: str) -> list[tuple[Value, tuple[tuple[str, int, str], ...]]]:
        """(the key's value on one path, that path's steps) for each path of a value that depends on which
        branch ran (a OneOf); [(its value, ())] for any other value."""
        value = self.get(key)
        if not isinstance(value.value, OneOf) or value.assignment is None:
            return [(value, ())]
        written = value.assignment
        out = []
        for on_path, steps, where, text in value.value.paths:
            if on_path is KEY_DEFAULT:
                pinned = Value(key, "default", self._default(key))
            elif on_path is BELOW:  # (no layer below set it: the key as the unit leaves it unset)
                pinned = self._unassigned(key)
            elif isinstance(on_path, Unknown):  # no assignment where the path leaves it unset (an unknown base)
                pinned = Value(key, "unknown", on_path, written if text is not None else None)
            else:
                pinned = Value(key, "known", on_path, replace(written, value=on_path, location=where or written.location,
                                                              text=text or written.text))
            out.append((pinned, steps))
        return out

    def _value(self, key: str) -> Value:
        if key == PRECISION_RECIPES:
            held = self.unit.precision_file
            return Value(key, "known", (held, dict(self.unit.precision_recipes))) if held else Value(key, "default")
        assignment = self.values.get(key)
        if assignment is not None:
            value = assignment.value
            return _value_of(key, "unknown" if isinstance(value, Unknown) else "known", value, assignment)
        return self._unassigned(key)

    def _unassigned(self, key: str) -> Value:
        """The value of a key no layer sets: its section's default where the unit builds it, else unknown."""
        section = _SECTIONS.get(key) or _section(key)
        if section in self.unit.default_sections:
            flag = self._unread_flag(key) if self.unit.unread_flags else ""
            if flag:
                return Value(key, "unknown", Unknown(f"set by `{flag}`, which offlint does not read"))
            flag = self._path_flag(key) if self.unit.path_flags else ""
            if flag:
                return Value(key, "unknown", Unknown(f"`{flag}` sets it on some of the script's paths"))
            # (a word after the script is an argument: it may give any flag, not an environment variable)
            if self.unit.opaque_words and self.unit.defaults == Defaults.MLM_CLI and section != "env" and \
                    mlm_flags.flag_may_set(key, self.version):
                return Value(key, "unknown", Unknown(f"not given, but the command's word "
                                                     f"{launch.unreadable(self.unit.opaque_words)} cannot be read "
                                                     f"and may give it"))
            defaults = self._defaults
            if defaults is None:
                defaults = self._defaults = _DEFAULT_VALUES.setdefault((self.version, self.unit.defaults), {})
            value = defaults.get(key)
            if value is None:
                value = defaults[key] = Value(key, "default", self._default(key))
            return value
        reason = self.unit.unknown_sections.get(section) or self._not_set(key)
        return _value_of(key, "unknown", Unknown(reason), None)

    def _not_set(self, key: str) -> str:
        """Why a key the unit does not set is unknown. A launch's name, `pretrain_qwen.py at line 503`, names the
        line of the script that launches it, not of pretrain_qwen.py: the launch is named by its own place."""
        unit = self.unit
        if unit.kind is UnitKind.COMMAND:
            return f"`{key}` is not set by the launch at {unit.location.path}:{unit.location.line}"
        return f"`{key}` is not set in {unit.name}"

    def builds(self, key: str) -> bool:
        """Whether the unit builds the section `key` lives in (constructed, received, or assigned to at all):
        a key of a section it never builds is not unknown but not applicable."""
        section = _section(key)
        if section in self.unit.default_sections or section in self.unit.unknown_sections:
            return True
        if self._assigned_sections is None:
            self._assigned_sections = {_section(assigned) for assigned in self.values}
        return section in self._assigned_sections

    def _unread_flag(self, key: str) -> str:
        """The flag of a Megatron-LM style command that sets `key`'s field but that offlint does not read."""
        if not self.unit.unread_flags or self.unit.defaults != Defaults.MLM_CLI:
            return ""
        by_field = self._unread_fields
        if by_field is None:  # once per unit, not once per key (a Megatron-LM launch asks about a hundred)
            by_field = self._unread_fields = _by_field(self.unit.unread_flags, self.version)
        return by_field.get(key.split(".", 1)[-1], "")

    def _path_flag(self, key: str) -> str:
        """The flag a word of a Megatron-LM style command gives on some of its script's paths only (Unit.path_flags)
        that sets `key`'s field, by the parser's dests and by offlint's own flag table."""
        if self.unit.defaults != Defaults.MLM_CLI:
            return ""
        if self._path_fields is None:
            self._path_fields = _by_field(self.unit.path_flags, self.version)
            for flag in self.unit.path_flags:
                for mapped in mlm_flags.keys_of(flag):
                    self._path_fields.setdefault(mapped.split(".", 1)[-1], flag)
        return self._path_fields.get(key.split(".", 1)[-1], "")

    def before_catch_all(self) -> ResolvedUnit:
        """This unit with every key that a write by a field name offlint cannot read may have replaced (AnyField: a
        user's overrides applied in a loop) as the unit's own code had set it; itself where no key was so written.
        --strict asks a rule of it (engine._unit_rule): such a write may set any field, this one no more than the
        others, so the question worth asking is whether the code's own values could break the rule."""
        if self._before is None:
            values = {key: _before_writes(assignment) for key, assignment in self.values.items()}
            unit = self.unit
            if all(values[key] is held for key, held in self.values.items()) and not unit.overridden_sections:
                self._before = self
            else:
                if unit.overridden_sections:  # (their unset keys: the defaults)
                    unit = replace(unit, default_sections=unit.default_sections | unit.overridden_sections,
                                   unknown_sections={s: r for s, r in unit.unknown_sections.items()
                                                     if s not in unit.overridden_sections},
                                   overridden_sections=frozenset())
                before = replace(self, unit=unit, values={k: a for k, a in values.items() if a is not None},
                                 _seen={}, _before=None, _assigned_sections=None, _unread_fields=None,
                                 _path_fields=None)
                self._before = before._before = before
        return self._before

    def overridden(self, key: str) -> bool:
        """Whether a write by a field name offlint cannot read may have replaced `key` (before_catch_all differs)."""
        before = self.before_catch_all()
        if before is self:
            return False
        if before.values.get(key) is not self.values.get(key):
            return True
        return key not in self.values and (_SECTIONS.get(key) or _section(key)) in self.unit.overridden_sections

    def default(self, key: str) -> object:
        """The default of `key` in this unit (megatron-core's, or the Megatron-LM flag's for flag launches)."""
        return self._default(key)

    def _default(self, key: str) -> object:
        if self.unit.defaults == Defaults.MLM_CLI:
            mlm = mlm_default(key, self.version)
            if mlm is not _MISSING:
                return mlm
        return keys.default_for(key, self.version)


_new = object.__new__


def _value_of(key: str, state: str, value: object, assignment: Assignment | None) -> Value:
    """Value(key, state, value, assignment), its fields put in its __dict__ where the frozen dataclass's __init__
    puts them with one object.__setattr__ call each, in about half the time: a unit's first read of each key it sets or
    cannot know makes one, a hundred a unit for the memory model alone (tests/test_resolve_value_of.py: the same
    object as the __init__'s)."""
    made = _new(Value)
    fields = made.__dict__
    fields["key"] = key
    fields["state"] = state
    fields["value"] = value
    fields["assignment"] = assignment
    return made


def _before_writes(assignment: Assignment) -> Assignment | None:
    """`assignment` as it was before catch-all writes (AnyField) replaced its value, on every path of a OneOf;
    None where the key was unset then; `assignment` itself where no such write reached it."""
    value = assignment.value
    if isinstance(value, AnyField):
        held, at, text = _held(value), value.at, value.text
    elif isinstance(value, OneOf) and _reaches(value):
        held, at, text = _held(value), None, None
    else:
        return assignment
    if isinstance(held, OneOf) and held.paths and _all_alike(held.paths):  # (every path left it as it was)
        held, _, at, text = held.paths[0]
    if held is KEY_DEFAULT:
        return None
    return replace(assignment, value=held, location=at or assignment.location,
                   text=text if text is not None else assignment.text)


def _all_alike(paths: tuple) -> bool:
    first = paths[0][0]
    return not isinstance(first, Unknown) and all(_alike(held, first) for held, *_ in paths[1:])


def _held(value: object) -> object:
    """What `value` was before catch-all writes replaced it, on each of its paths."""
    if isinstance(value, AnyField):
        return _held(value.before)
    if not (isinstance(value, OneOf) and _reaches(value)):
        return value
    written = [_held(on_path.before) for on_path, *_ in value.paths if isinstance(on_path, AnyField)]
    if written and all(b == written[0] for b in written[1:]) and all(
            _one_of(path, written[0]) for path in value.paths if not isinstance(path[0], AnyField)):
        return written[0]  # loops of such writes: where they ran, the key holds what it held where they did not
    paths = []
    for on_path, steps, where, text in value.paths:
        before = _held(on_path)
        if before is on_path:
            paths.append((on_path, steps, where, text))
        elif isinstance(before, OneOf):  # (it depended on an earlier branch: that branch's paths, after this one)
            paths.extend((held, steps + more, at, written) for held, more, at, written in before.paths)
        else:
            paths.append((before, steps, on_path.at, on_path.text))
    return replace(value, paths=tuple(paths))


def _one_of(path: tuple, before: object) -> bool:
    """Whether a OneOf's `path` is one of the paths of `before` (its value, on its own steps and maybe others)."""
    held, steps = path[0], set(path[1])
    if not isinstance(before, OneOf):
        return _alike(held, before)
    return any(_alike(held, other) and steps.issuperset(more) for other, more, *_ in before.paths)


def _alike(a: object, b: object) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _reaches(value: OneOf) -> bool:
    """Whether a catch-all write set a path of `value` (or of a value it held before)."""
    return any(isinstance(on_path, AnyField) or (isinstance(on_path, OneOf) and _reaches(on_path))
               for on_path, *_ in value.paths)


def _section(key: str) -> str:
    """The section a key lives in. Top-level ConfigContainer keys (mixed_precision) are built with the container,
    as the model section is."""
    section = _SECTIONS[key] = key.split(".", 1)[0] if "." in key else "model"
    return section


_SECTIONS: dict[str, str] = {}  # key -> _section(key): a check asks for about a hundred keys of each unit

# A key's default depends only on the megatron-core version and the kind of defaults (megatron-core's dataclass or
# Megatron-LM's argparse), not on the unit: (version, Defaults) -> key -> its Value (frozen, so shared by the units
# of a run: a cold check of Megatron Bridge made 50,000 of them for 1,000 units).
_DEFAULT_VALUES: dict[tuple[Version, Defaults], dict[str, Value]] = {}


_MISSING = object()


def mlm_default(key: str, version: Version) -> object:
    """The Megatron-LM argparse default of the flag that sets `key`, from the real parser's data when shipped."""
    defaults = _mlm_flag_defaults(version)
    field_name = key.split(".", 1)[-1]
    if field_name in defaults:
        default = defaults[field_name]
        info = keys.key_info(key)
        if info is not None and info.type == "dtype" and isinstance(default, str):
            from offlint.sources.mlm_flags import normalize_dtype

            return normalize_dtype(default)
        return default
    return MLM_CLI_DEFAULTS.get(key, _MISSING)


@lru_cache(maxsize=None)
def _mlm_flag_defaults(version: Version) -> dict[str, object]:
    """dest -> argparse default of the real Megatron-LM parser (first flag per dest, as argparse keeps it)."""
    out: dict[str, object] = {}
    for flag in (keys.version_data(version) or {}).get("mlm_flags") or ():
        if not isinstance(flag.get("default"), dict):
            out.setdefault(flag.get("dest"), flag.get("default"))
    return out


def _by_field(flags: tuple[str, ...], version: Version) -> dict[str, str]:
    """field name -> the first of `flags` that sets it, by the real parser's dests. A flag no Megatron-LM parser
    has that is named for layers (`--num-layer-list`, `--noop-layers`: an extension of the tree's, such as Ascend's
    MindSpeed-LLM, whose plugin patches validate_args and get_num_layers_to_build) lays the layers out its own way:
    taken as setting the pipeline layout, which leaves the split unjudged (OFL218)."""
    dests = keys.mlm_flag_dests(version)
    out: dict[str, str] = {}
    for flag in flags:
        dest = dests.get(flag)
        if dest is None and {"layer", "layers"} & set(flag.lstrip("-").split("-")):
            dest = "pipeline_model_parallel_layout"
        out.setdefault(dest, flag)
    return out


def resolve(unit: Unit, version: Version) -> ResolvedUnit:
    resolved = ResolvedUnit(unit, version)
    values = resolved.values
    for layer in unit.layers:
        for assignment in layer.assignments:
            if assignment.op == "delete":
                # `~key` removes the key from the override dict; Bridge then keeps the recipe's value.
                continue
            # for_version's test, inline, as a type test: isinstance looks up each other value's __class__ too, and
            # this runs for each of a tree's assignments in each unit (no subclass: tests/test_resolve_value_of.py)
            if type(assignment.value) is ByVersion:
                assignment = for_version(assignment, version)
                if assignment is None:
                    continue
            elif type(assignment.value) is OneOf and assignment.key in values:
                assignment = _over(assignment, values[assignment.key])
            values[assignment.key] = assignment
    program = values.get(bridge_finalize.KEY)
    if program is not None and type(program.value) is tuple:
        _finalize(resolved, program)
    return resolved


def _over(assignment: Assignment, below: Assignment) -> Assignment:
    """A launch's override given on some paths only (its OneOf holds BELOW on the others), over the layers' earlier
    assignment `below`: on those other paths, `below`'s value where it set it (each of its own paths, after the
    launch's, where it depends on a branch of the recipe's)."""
    if not any(on_path is BELOW for on_path, *_ in assignment.value.paths):
        return assignment
    paths = []
    for on_path, steps, where, text in assignment.value.paths:
        if on_path is not BELOW:
            paths.append((on_path, steps, where, text))
        elif type(below.value) is OneOf:  # (a path's text None: it leaves the key unset, or set before the split)
            paths.extend((held, steps + more, at or below.location,
                          below.text if written is None and _set(held) else written)
                         for held, more, at, written in below.value.paths)
        else:
            paths.append((below.value, steps, below.location, below.text))
    return replace(assignment, value=replace(assignment.value, paths=tuple(paths)))


def _set(held: object) -> bool:
    """Whether a OneOf's path value is one its assignment set (not the key left unset or unreadable there)."""
    return held is not KEY_DEFAULT and not isinstance(held, Unknown)


def _finalize(resolved: ResolvedUnit, program: Assignment) -> None:
    """Megatron Bridge runs `cfg.model.finalize()` when the run starts, after every override: the provider's
    finalize program (sources/bridge_finalize.py, read from the tree by the Python reader) runs over the resolved
    values, and what it changes is written as the last assignment of its key (its provenance names the provider's
    line). A field a named precision recipe sets when the run starts (MixedPrecisionConfig.setup, before validate)
    reads as that recipe sets it."""
    values = resolved.values
    precision = _precision_fields(resolved)
    fields = (keys.version_data(resolved.version) or {}).get("sections", {}).get("model", {})
    defaults = "model" in resolved.unit.default_sections

    def read(field: str) -> object:
        key = f"model.{field}"
        if isinstance(precision, Unknown):
            if _PRECISION_FIELD.search(field):
                return Unknown(f"`{key}` may be set by the mixed_precision recipe when the run starts: "
                               f"{precision.reason}")
        elif field in precision:  # (what MixedPrecisionConfig.setup copies over the model, a default too)
            return _plain(key, precision[field])
        assignment = values.get(key)
        if assignment is not None:
            return _plain(key, assignment.value)
        if not defaults:
            return Unknown(f"`{key}` is not known before finalize()")
        return resolved._default(key) if field in fields else bridge_finalize.NOT_SET

    for field_name, (value, where, text) in bridge_finalize.run(program.value, read).items():
        key = f"model.{field_name}"
        before = values.get(key)
        # at the unit's own place (its assignment of the key, else where it builds the provider), so that a finding
        # stays in the files that configure the run; the provider's line is in the provenance
        values[key] = Assignment(key, value, (before or program).location, program.source, text or repr(value),
                                 (*(before.via if before else program.via), bridge_finalize.by(where)))


_PLAIN = frozenset((bool, int, float, str, tuple, list))


def _plain(key: str, value: object) -> object:
    """A value as a finalize program reads it: a literal, else unknown (a OneOf, a record, an Unknown)."""
    return value if value is None or type(value) in _PLAIN else Unknown(f"`{key}` is not a plain value")
# The kinds of field a MixedPrecisionConfig has (Bridge training/mixed_precision.py: params_dtype, pipeline_dtype,
# autocast_*, bf16/fp16/fp32, fp8*, fp4*, *loss_scale*, hysteresis, grad_reduce_in_fp32, num_layers_at_*_in_bf16):
# what a recipe offlint cannot read may set when the run starts.
_PRECISION_FIELD = re.compile(r"dtype|autocast|bf16|fp16|fp32|fp8|fp4|loss_scale|hysteresis|grad_reduce")


def _precision_fields(resolved: ResolvedUnit) -> dict | Unknown:
    """The fields the unit's `mixed_precision` sets on the model when the run starts, before finalize (a named
    recipe as the tree builds it, named_precision.configured): {} without one, an Unknown when offlint cannot say."""
    given = resolved.values.get("mixed_precision")
    if given is None or given.value is None:
        return {}
    mixed, _ = configured(resolved.get)
    if mixed.state == "known" and isinstance(mixed.value, Record):
        return mixed.value.fields
    return Unknown(mixed.value.reason if isinstance(mixed.value, Unknown) else "not a record offlint can read")


def for_version(assignment: Assignment, version: Version) -> Assignment | None:
    """The assignment as it acts on `version`: a ByVersion value picked, None when it leaves the key alone."""
    if not isinstance(assignment.value, ByVersion):
        return assignment
    value = assignment.value.pick(version)
    return None if value is ABSENT else replace(assignment, value=value)
