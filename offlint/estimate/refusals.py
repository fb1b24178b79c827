"""Why a configuration cannot run at all, so that its memory is moot: `offlint estimate`'s "cannot run" verdict.

The answer is `offlint check`'s own: the findings of the catalog's error checks that name a stage where
megatron-core, Megatron Bridge, the Megatron-LM CLI or Transformer Engine refuses or fails the configuration
(`rules.Check.stage` other than "silent": the config's construction, the optimizer's or the model's build, Bridge's
validation, the argument parser, or the run's start). A warning, or an error about a setting that is accepted and
does the wrong thing ("silent"), leaves the estimate to speak. Only certain findings count (not `--strict`'s
"possible" ones), so the verdict is the one `offlint check` reports for the same unit.
"""

from __future__ import annotations

from offlint.engine import check_unit
from offlint.resolve import ResolvedUnit
from offlint.rules import Rule, load_rules
from offlint.types import Finding, Severity

# OFL216 judges the GPU count a Bridge recipe's name gives; `offlint estimate --gpus N` sizes another job.
_NAMED_GPU_COUNT = "OFL216"


def _refusing(check) -> bool:
    return check.severity is Severity.ERROR and check.stage != "silent"


def refusing_rules(rules: dict[str, Rule] | None = None) -> list[Rule]:
    """The unit rules with at least one check that refuses (see the module docstring)."""
    catalog = load_rules() if rules is None else rules
    return [rule for rule in catalog.values() if rule.scope == "unit" and any(map(_refusing, rule.checks))]


def refusals(resolved: ResolvedUnit, gpus: int | None = None, rules: list[Rule] | None = None) -> list[Finding]:
    """The findings that say `resolved` cannot run; `gpus`: the job's GPU count when given (--gpus), which
    replaces the one OFL216 reads from the recipe's name."""
    findings = check_unit(resolved, refusing_rules() if rules is None else rules, strict=False)
    return [f for f in findings if f.severity is Severity.ERROR and f.stage not in ("", "silent")
            and not f.possible and not (gpus and f.code == _NAMED_GPU_COUNT)]
