"""The lint and validate probes' own process: one configuration at one commit -> a JSON verdict file.

    python -m offlint.bisect.child lint|validate --root WORKTREE --config PATH [--recipe NAME]
        [--override K=V ...] [--select CODES] [--mcore-src DIR] --result-json PATH

Runs in a subprocess (with a timeout and a log) like every other probe, so a hang or a crash of the code
under test cannot take the bisect down. The verdict uses offlint's outcome classes: a configuration that
megatron-core rejects (validate) or that offlint's rules predict to fail (lint) is `crash`, with its
signature; a configuration that cannot be read at this commit is `build-failure` (a skip).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from offlint.outcomes import Outcome
from offlint.rules import load_rules, select_rules
from offlint.types import Severity, Unknown
from offlint.units import UnitSelectionError, load_unit

SECTIONS = ("model", "optimizer")


class Unjudged(Exception):
    """The probe's environment cannot judge the configuration (no Transformer Engine, say)."""


def verdict(outcome: Outcome, signature: str | None = None, rules=(), detail: str = "", **extra) -> dict:
    return {"outcome": outcome.value, "signature": signature, "rules": sorted(rules), "detail": detail, **extra}


def lint_verdict(config: str, recipe: str | None, overrides, select, root: Path,
                 mcore_version: str | None = None) -> dict:
    """offlint's rules on one unit: `crash` with the rule codes as signature when any chosen rule fires."""
    from offlint.engine import check_unit

    try:
        loaded = load_unit(config, recipe, overrides, mcore_version, root=root)
    except UnitSelectionError as exc:
        return verdict(Outcome.BUILD_FAILURE, detail=f"cannot read the configuration here: {exc}")
    all_rules = load_rules()
    chosen = select_rules(all_rules, select, [], [])
    rules = [all_rules[c] for c in sorted(chosen) if all_rules[c].scope != "builtin"]
    findings = check_unit(loaded.resolved, rules, strict=False)
    if not select:
        findings = [f for f in findings if f.severity == Severity.ERROR]
    if not findings:
        return verdict(Outcome.PASS, detail=f"no findings (megatron-core {loaded.version.version})")
    codes = sorted({f.code for f in findings})
    first = findings[0]
    return verdict(Outcome.CRASH, " ".join(codes), codes, f"{first.code} at {first.location}: {first.message}")


def section_values(resolved, section: str) -> dict | None:
    """Every `section.name` key the unit set (not nested ones), or None when one of them is unknown."""
    out = {}
    for key, assignment in resolved.values.items():
        head, _, name = key.partition(".")
        if head != section or "." in name:
            continue
        if isinstance(assignment.value, Unknown):
            return None
        out[name] = assignment.value
    return out


def validate_verdict(config: str, recipe: str | None, overrides, root: Path, mcore_src: str,
                     mcore_version: str | None = None) -> dict:
    """The configuration built by the real megatron-core (installed, or the source tree `mcore_src`)."""
    from offlint.validate import Environment, MegatronCore, ProbeError, rules_for_error

    try:
        loaded = load_unit(config, recipe, overrides, mcore_version, root=root)
    except UnitSelectionError as exc:
        return verdict(Outcome.BUILD_FAILURE, detail=f"cannot read the configuration here: {exc}")
    sections = {s: section_values(loaded.resolved, s) for s in SECTIONS}
    unknown = [s for s, values in sections.items() if values is None]
    if unknown:
        return verdict(Outcome.BUILD_FAILURE, detail=f"unknown values in {', '.join(unknown)}: cannot validate")
    try:
        core = MegatronCore(Environment(sys.executable, mcore_src))
    except ProbeError as exc:
        return verdict(Outcome.BUILD_FAILURE, detail=str(exc))
    dropped: list[str] = []
    with core:
        try:
            error = _first_error(core, sections, dropped)
        except Unjudged as exc:
            return verdict(Outcome.BUILD_FAILURE, detail=f"megatron-core {core.version_text} cannot judge it in this "
                                                         f"environment: {exc}")
    extra = {"mcore_version": core.version_text, "dropped_keys": dropped}
    if error is None:
        return verdict(Outcome.PASS, detail=f"megatron-core {core.version_text} accepts it", **extra)
    rules = rules_for_error(error, load_rules())
    return verdict(Outcome.CRASH, error, rules, f"megatron-core {core.version_text} rejects it", **extra)


def _first_error(core, sections: dict, dropped: list[str]) -> str | None:
    """megatron-core's first error, None when it accepts the configuration; the fields this release lacks, which
    the probe leaves out, are noted in `dropped`. Raises Unjudged when this environment cannot judge it."""
    from offlint.validate import read_answer

    answer = core.ask(sections["model"] or None, sections["optimizer"] or None)
    for part, section in (("model", "model"), ("optimizer", "optimizer")):
        dropped += [f"{section}.{key}" for key in (answer.get(part) or {}).get("ignored", [])]
    errors, unjudged = read_answer(answer)
    if unjudged:
        raise Unjudged(unjudged[0])
    return errors[0] if errors else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offlint.bisect.child")
    parser.add_argument("probe", choices=("lint", "validate"))
    parser.add_argument("--root", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--recipe")
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--select", action="append", default=[])
    parser.add_argument("--mcore-src", default="")
    parser.add_argument("--mcore-version", default=None)  # whose defaults the configuration is read with
    parser.add_argument("--result-json", required=True)
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        if args.probe == "lint":
            result = lint_verdict(args.config, args.recipe, args.override, args.select, root, args.mcore_version)
        else:
            result = validate_verdict(args.config, args.recipe, args.override, root, args.mcore_src,
                                      args.mcore_version)
    except Exception as exc:  # offlint could not read this commit's files: cannot test here, not a verdict
        result = verdict(Outcome.BUILD_FAILURE, detail=f"offlint failed on this commit: {type(exc).__name__}: {exc}")
    Path(args.result_json).write_text(json.dumps(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
