"""A rule's fix as data: what `check --fix` edits, read from the `autofix:` list of the rule's YAML file.

This module imports nothing heavy (no libcst), so loading rules and `offlint rule CODE` stay fast; the editors
that carry a fix out live in the other modules of this package and are imported only under `--fix`/`--diff`.

An entry: `{title, applicability: safe|unsafe, action, ...}`. Actions:
- `set`: give `key` (default: the key of the finding's own assignment) the value `value`, or the value
  `transform` computes from the one written (`null`: the null spelling; `bool`: yes/on/y -> true, no/off/n ->
  false; `list`: the scalar wrapped in a one-element list). Where the unit leaves `key` unset (a default), the
  assignment is inserted next to the unit's other assignments to the same config section.
- `remove`: delete the assignments of `keys` that the finding read and its unit writes.
- `rename`: correct the spelling of the finding's key to `suggestion(key)` (only when it is unambiguous).
- `add-env`: make the launch environment's variable `name` contain `option` (appended with a comma to a value
  already written, else a new entry or VAR=value prefix), and set each variable of `also`.
- `drop-suppression`: delete the unused `# offlint: ignore[...]` comment.
A check's own `autofix` replaces the rule's for the findings of that check (matched by the check's `fix` text).
Safe fixes keep what the run does; unsafe ones change it (memory, speed, parallel layout): ruff's meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ACTIONS = ("set", "remove", "rename", "add-env", "drop-suppression")
TRANSFORMS = ("null", "bool", "list")
APPLICABILITIES = ("safe", "unsafe")
_UNSET = object()


@dataclass(frozen=True)
class AutoFix:
    title: str
    applicability: str
    action: str
    key: str = ""  # `set`: the key to set (empty: the finding's own key)
    value: object = None  # `set`: the new value (None is null)
    transform: str = ""  # `set`: computed from the written value instead of `value`
    keys: tuple[str, ...] = ()  # `remove`: the keys whose assignments go
    name: str = ""  # `add-env`: the variable
    option: str = ""  # `add-env`: what its value must contain
    also: tuple[tuple[str, str], ...] = field(default=())  # `add-env`: further variables to set

    @property
    def safe(self) -> bool:
        return self.applicability == "safe"

    def describe(self) -> str:
        """One line for `offlint rule CODE`."""
        if self.action == "set":
            what = (f"set {self.key or 'the key'} to " +
                    (f"<{self.transform}>" if self.transform else _literal(self.value)))
        elif self.action == "remove":
            what = "remove " + ", ".join(self.keys)
        elif self.action == "rename":
            what = "rename the key to the suggested field"
        elif self.action == "add-env":
            what = f"add {self.option} to {self.name}" + "".join(f", set {k}={v}" for k, v in self.also)
        else:
            what = "delete the suppression comment"
        return f"{self.title} ({self.applicability}: {what})"


def _literal(value: object) -> str:
    return "null" if value is None else ("true" if value is True else "false" if value is False else repr(value))


def parse(raw: object, where: str) -> tuple[AutoFix, ...]:
    """The `autofix:` list of a rule or check; ValueError names what is wrong (rules.py reports the file)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{where}: autofix must be a list")
    out = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: each autofix entry must be a mapping")
        unknown = set(entry) - {"title", "applicability", "action", "key", "value", "transform", "keys", "name",
                                "option", "also"}
        if unknown:
            raise ValueError(f"{where}: unknown autofix field(s) {sorted(unknown)}")
        action = entry.get("action")
        if action not in ACTIONS:
            raise ValueError(f"{where}: autofix action must be one of {ACTIONS}, not {action!r}")
        applicability = entry.get("applicability")
        if applicability not in APPLICABILITIES:
            raise ValueError(f"{where}: autofix applicability must be safe or unsafe")
        transform = str(entry.get("transform", ""))
        if transform and transform not in TRANSFORMS:
            raise ValueError(f"{where}: autofix transform must be one of {TRANSFORMS}")
        if action == "set" and not transform and "value" not in entry:
            raise ValueError(f"{where}: a `set` autofix needs `value` or `transform`")
        if action == "remove" and not entry.get("keys"):
            raise ValueError(f"{where}: a `remove` autofix needs `keys`")
        if action == "add-env" and not (entry.get("name") and entry.get("option")):
            raise ValueError(f"{where}: an `add-env` autofix needs `name` and `option`")
        also = entry.get("also") or {}
        out.append(AutoFix(title=str(entry.get("title") or action), applicability=applicability, action=action,
                           key=str(entry.get("key", "")), value=entry.get("value"), transform=transform,
                           keys=tuple(entry.get("keys") or ()), name=str(entry.get("name", "")),
                           option=str(entry.get("option", "")),
                           also=tuple((str(k), str(v)) for k, v in also.items())))
    return tuple(out)


def autofixes(finding, rules: dict) -> tuple[AutoFix, ...]:
    """The fixes a finding's rule declares for it: its check's own (matched by the check's fix text), else the
    rule's. A 'possible' finding (--strict) depends on unknown values: it gets no fix."""
    rule = rules.get(finding.code)
    if rule is None or finding.possible:
        return ()
    for check in rule.checks:
        if check.autofix and check.fix and check.fix == finding.fix:
            return check.autofix
    return rule.autofix
