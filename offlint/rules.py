"""The rule catalog: loads `rules/*.yaml` (one file per rule) and validates each file's shape.

A rule file holds code, slug, severity, the megatron-core versions it applies to, one or more checks
(condition + message), the keys it reads (the first set one is where a finding points), a fix hint, the
megatron-core error text it mirrors (so a crash log maps back to a rule), and valid/invalid examples in each
source form. The rules directory is `rules/` in a source checkout and `offlint/_rules/` inside the wheel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from offlint.fix import spec as fix_spec
from offlint.types import Severity
from offlint.versions import VersionError, in_range, parse_version

DOCS_URL = "https://github.com/offlint/offlint/blob/main/rules/{file}"
SCOPES = ("unit", "assignment", "builtin")
FORMS = ("python", "yaml", "hydra", "mlm", "shell", "card")
_CODE = re.compile(r"^OFL\d{3}$")


class RuleFileError(ValueError):
    pass


STAGES = ("config", "optimizer-build", "model-build", "bridge", "cli", "runtime", "silent")


@dataclass(frozen=True)
class Check:
    condition: str
    message: str
    severity: Severity
    versions: str = "all"
    mirrors: str = ""  # the megatron-core error text this check mirrors
    # Where megatron-core (or Bridge, or the Megatron-LM CLI) acts on it: "config" = TransformerConfig /
    # OptimizerConfig construction, ... "silent" = accepted without error. The conformance suite compares
    # "config" and "optimizer-build" checks with the real package.
    stage: str = "silent"
    fix: str = ""  # this check's own fix hint, when it differs from the rule's (empty: the rule's `fix`)
    autofix: tuple = ()  # this check's own fix as data (fix/spec.py), when it differs from the rule's


@dataclass(frozen=True)
class Example:
    form: str
    code: str
    valid: bool
    version: str = ""  # megatron-core version to check the example against (default: the newest known)
    strict: bool = False
    # Other files of the tree the example is checked in, (relative path, text): a rule about what the linted tree's
    # own code does (OFL223 reads Megatron Bridge's validate check) fires only where the tree holds that code
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Rule:
    code: str
    slug: str
    severity: Severity
    summary: str
    explanation: str
    fix: str
    versions: str
    scope: str
    keys: tuple[str, ...]
    checks: tuple[Check, ...]
    mirrors: tuple[dict, ...]
    examples: tuple[Example, ...]
    file: str
    forms: tuple[str, ...] = field(default=())
    autofix: tuple = ()  # the fix as data, for `check --fix` (fix/spec.py AutoFix entries)
    # where a finding points (engine._anchor): "first-set", the first of `keys` the unit sets; "named", the first
    # the unit sets that the message names (OFL202 lists the inert settings it knows among many keys)
    anchor: str = "first-set"

    @property
    def url(self) -> str:
        return DOCS_URL.format(file=self.file)

    def applies_to(self, version) -> bool:
        return in_range(version, self.versions)

    def checks_for(self, version) -> list[Check]:
        """The checks that apply to `version` (asked once per unit, so kept per version)."""
        memo = self.__dict__.setdefault("_checks_by_version", {})
        if version not in memo:
            memo[version] = [c for c in self.checks if in_range(version, c.versions)]
        return memo[version]


def rules_dir() -> Path:
    packaged = resources.files("offlint") / "_rules"
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parent.parent / "rules"
    if source.is_dir():
        return source
    raise RuleFileError("offlint's rules directory is missing: reinstall offlint")


_LOADED: list[dict[str, Rule]] = []  # the catalog, once loaded in this process


def load_rules(warm=None) -> dict[str, Rule]:
    """The rule catalog, loaded once per process: from `warm` (a warm_start.WarmStart: the catalog as a run of the
    same offlint code and rules kept it) when it holds it, else from the rule files (then kept in `warm`)."""
    if not _LOADED:
        catalog = warm.rules() if warm is not None else None
        if catalog is None:
            catalog = _parse_rules()
            if warm is not None:
                warm.keep_rules(catalog)
        _LOADED.append(catalog)
    elif warm is not None and not warm.holds_rules():
        warm.keep_rules(_LOADED[0])
    return _LOADED[0]


def rule_files() -> list[Path]:
    return sorted(rules_dir().glob("OFL*.yaml"))


def _parse_rules() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for path in rule_files():
        rule = parse_rule_file(path)
        if rule.code in rules:
            raise RuleFileError(f"{path}: duplicate rule code {rule.code}")
        rules[rule.code] = rule
    return rules


@lru_cache(maxsize=1)
def rules_codec():
    """The JSON form of a catalog (cache_format's: data only, the classes named)."""
    from offlint.cache_format import Codec

    return Codec((Rule, Check, Example, Severity, fix_spec.AutoFix))


def parse_rule_file(path: Path) -> Rule:
    import yaml  # here: a run whose catalog was kept (warm_start.py) does not import it (nor conditions)

    from offlint.conditions import ConditionError

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: rules load 5x faster
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise RuleFileError(f"{path}: cannot read rule file: {exc}") from None
    try:
        return _build(data, path.name)
    except (KeyError, TypeError, ValueError, ConditionError, VersionError) as exc:
        raise RuleFileError(f"{path}: {exc}") from None


def _build(data: dict, file: str) -> Rule:
    from offlint.conditions import compile_condition

    code = data["code"]
    if not _CODE.match(code) or not file.startswith(code + "-"):
        raise ValueError(f"rule code {code!r} must look like OFL123 and match the file name")
    if file != f"{code}-{data['slug']}.yaml":
        raise ValueError(f"file must be named {code}-{data['slug']}.yaml")
    severity = Severity(data["severity"])
    versions = str(data.get("versions", "all"))
    in_range(parse_version("0.16.1"), versions)  # validates the range syntax
    scope = data.get("scope", "unit")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}")
    raw_checks = data.get("checks") or ([{"condition": data["condition"], "message": data["message"]}]
                                        if "condition" in data else [])
    if scope != "builtin" and not raw_checks:
        raise ValueError("a rule needs `condition` and `message`, or `checks`")
    checks = []
    default_stage = data.get("stage", "config" if code.startswith("OFL1") else "silent")
    for raw in raw_checks:
        stage = raw.get("stage", default_stage)
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, not {stage!r}")
        if not isinstance(raw.get("mirrors", ""), str):
            raise ValueError("a check's `mirrors` names the constraint IDs it mirrors, as text (\"F-6, OB-7\"); the "
                             "error texts go in the rule's `mirrors` list")
        compile_condition(raw["condition"])
        for expression in re.findall(r"\{([^{}]+)\}", raw["message"]):
            compile_condition(expression)  # message templates are expressions too: fail at load, not mid-run
        checks.append(Check(raw["condition"], raw["message"].strip(), Severity(raw.get("severity", severity)),
                            str(raw.get("versions", "all")), raw.get("mirrors", ""), stage,
                            str(raw.get("fix", "")).strip(), fix_spec.parse(raw.get("autofix"), "check")))
    examples = []
    for raw in data.get("examples", []):
        form = raw["form"]
        if form not in FORMS:
            raise ValueError(f"example form {form!r} is not one of {FORMS}")
        files = raw.get("files", {})
        if not isinstance(files, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and not k.startswith("/") and ".." not in k.split("/")
                for k, v in files.items()):
            raise ValueError("an example's `files` maps relative paths inside the example's tree to their texts")
        for kind in ("valid", "invalid"):
            if kind in raw:
                examples.append(Example(form, raw[kind], kind == "valid", str(raw.get("version", "")),
                                        bool(raw.get("strict", False)), tuple(sorted(files.items()))))
    anchor = data.get("anchor", "first-set")
    if anchor not in ("first-set", "named"):
        raise ValueError(f"anchor must be first-set or named, not {anchor!r}")
    forms = tuple(dict.fromkeys(e.form for e in examples))
    for form in forms:
        kinds = {e.valid for e in examples if e.form == form}
        if kinds != {True, False}:
            raise ValueError(f"form {form!r} needs at least one valid and one invalid example")
    return Rule(
        code=code, slug=data["slug"], severity=severity, summary=data["summary"].strip(),
        explanation=str(data.get("explanation", "")).strip(), fix=str(data.get("fix", "")).strip(),
        versions=versions, scope=scope, keys=tuple(data.get("keys", ())), checks=tuple(checks),
        mirrors=tuple(data.get("mirrors", ())), examples=tuple(examples), file=file, forms=forms,
        autofix=fix_spec.parse(data.get("autofix"), "rule"), anchor=anchor,
    )


def select_rules(all_rules: dict[str, Rule], select, ignore, extend_select) -> set[str]:
    """ruff semantics: codes or prefixes (`OFL1`, `OFL102`, `ALL`); unknown selectors raise ValueError."""

    def expand(selectors) -> set[str]:
        out: set[str] = set()
        for selector in selectors or ():
            selector = selector.strip().upper()
            if not selector:
                continue
            matched = set(all_rules) if selector == "ALL" else {c for c in all_rules if c.startswith(selector)}
            if not matched:
                raise ValueError(f"unknown rule selector `{selector}` (see `offlint rules`)")
            out |= matched
        return out

    chosen = expand(select) if select else set(all_rules)
    chosen |= expand(extend_select)
    chosen -= expand(ignore)
    return chosen
