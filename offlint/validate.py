"""Run the real megatron-core on resolved configurations (`check --validate`, the conformance suite, bisect).

megatron-core runs in a child process (`offlint/mcore_probe.py`) so that any installed version, or any
Megatron-LM source tree (`OFFLINT_MCORE_SRC=/path/to/Megatron-LM`), can be asked; offlint itself never
imports it. Only values offlint resolved are sent, as JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from offlint import keys
from offlint.resolve import ResolvedUnit
from offlint.rules import Rule
from offlint.types import Finding, Related, Severity, Unknown
from offlint.versions import Version, parse_version

PROBE = Path(__file__).resolve().parent / "mcore_probe.py"
SRC_VARIABLE = "OFFLINT_MCORE_SRC"


class ProbeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Environment:
    """Where a megatron-core can be imported: a Python executable plus an optional source tree."""

    python: str
    source: str = ""  # a Megatron-LM tree put on PYTHONPATH; empty = the installed package

    def describe(self) -> str:
        return f"source tree {self.source}" if self.source else f"installed megatron-core ({self.python})"


def environments(explicit_first: bool = False) -> list[Environment]:
    """The installed megatron-core (if any) and every tree in OFFLINT_MCORE_SRC (os.pathsep-separated), the installed
    one first unless `explicit_first` (`check --validate` asks the first: a tree the user names is the one meant)."""
    installed = [Environment(sys.executable)] if importlib.util.find_spec("megatron") is not None and \
        _has_core() else []
    named = [Environment(sys.executable, str(Path(tree).resolve()))
             for tree in filter(None, os.environ.get(SRC_VARIABLE, "").split(os.pathsep))]
    return named + installed if explicit_first else installed + named


def _has_core() -> bool:
    try:
        return importlib.util.find_spec("megatron.core") is not None
    except (ImportError, ValueError):
        return False


class MegatronCore:
    """A running probe process; `ask` sends one configuration and returns megatron-core's verdicts."""

    def __init__(self, environment: Environment):
        self.environment = environment
        env = dict(os.environ)
        if environment.source:
            env["PYTHONPATH"] = environment.source + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("NO_VCS_VERSION", "1")
        # Run the probe file with -c: running it as a script would put offlint/ first on sys.path, where
        # offlint/types.py would shadow the standard library's `types`.
        bootstrap = f"import runpy; runpy.run_path({str(PROBE)!r}, run_name='__main__')"
        self.process = subprocess.Popen([environment.python, "-c", bootstrap], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                        cwd=environment.source or str(PROBE.parent.parent))
        first = json.loads(self.process.stdout.readline() or '{"error": "the probe exited"}')
        if "error" in first:
            self.close()
            raise ProbeError(f"{environment.describe()}: {first['error']}")
        self.version_text = first["version"]
        self.version: Version = parse_version(first["version"])
        self._next = 0

    def ask(self, model: dict | None, optimizer: dict | None) -> dict:
        self._next += 1
        request = {"id": self._next, "model": model, "optimizer": optimizer}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise ProbeError(f"{self.environment.describe()}: the megatron-core probe stopped answering")
        return json.loads(line)

    def close(self) -> None:
        """End the probe and close both pipes (its answers' pipe too: left to the collector, each probe left an
        open file behind it, with a ResourceWarning)."""
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if not pipe.closed:
                pipe.close()

    def __enter__(self) -> "MegatronCore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def section_kwargs(resolved: ResolvedUnit, section: str) -> dict | None:
    """The constructor kwargs of one section, from every key the unit set, or None if any is unknown.

    Keys that are not fields of that megatron-core release's dataclass (Bridge provider fields) are left out.
    """
    fields = (keys.version_data(resolved.version) or {}).get("sections", {}).get(section, {})
    out = {}
    for key, assignment in resolved.values.items():
        head, _, name = key.partition(".")
        if head != section or "." in name or name not in fields:
            continue
        if isinstance(assignment.value, Unknown):
            return None
        out[name] = assignment.value
    return out


def known_section(resolved: ResolvedUnit, section: str) -> dict | None:
    """A section's kwargs when every value of it is known (the unit built it, and nothing in it is unknown)."""
    if section not in resolved.unit.default_sections:
        return None
    return section_kwargs(resolved, section)


def mirror_prefixes(rule: Rule) -> list[str]:
    """The fixed start of each megatron-core error text a rule mirrors (up to the first placeholder)."""
    out = []
    for mirror in rule.mirrors:
        text = str(mirror.get("error", ""))
        if str(mirror.get("id", "")) == "CG-4" or str(mirror.get("id", "")).startswith(("BR-", "CLI-")):
            continue  # a general check (CG-4: any invalid impl) or not megatron-core's own
        out.append(text.split("{", 1)[0].strip())
    return out


def rules_for_error(error: str, rules: dict[str, Rule]) -> set[str]:
    """Which rules mirror this megatron-core error ("ValueError: message")."""
    matched = set()
    for code, rule in rules.items():
        for prefix in mirror_prefixes(rule):
            if ":" not in prefix:  # a bare assert with an empty message (FG-2): "AssertionError: "
                if prefix and error.strip() == prefix + ":":
                    matched.add(code)
            elif error.startswith(prefix):
                matched.add(code)
    return matched


COMPARED_STAGES = ("config", "optimizer-build")
PARTS = ("model", "optimizer", "optimizer_build")


def read_answer(answer: dict) -> tuple[list[str], list[str]]:
    """A probe answer's (errors, what its environment could not judge), over the parts it was asked
    (offlint.mcore_probe: a verdict's ok is True, False with an error, or None with the environment's reason)."""
    verdicts = [answer[part] for part in PARTS if answer.get(part)]
    return ([v["error"] for v in verdicts if v["ok"] is False],
            [v["environment"] for v in verdicts if v["ok"] is None])


def validate_units(resolved_units: list, findings: list[Finding], rules: dict[str, Rule],
                   core: MegatronCore) -> list[Finding]:
    """OFL900 findings: megatron-core's own verdict on every fully known unit, and any disagreement with rules."""
    rule = rules["OFL900"]
    by_unit: dict[str, list[Finding]] = {}
    for finding in findings:
        by_unit.setdefault(finding.unit, []).append(finding)
    out: list[Finding] = []
    compared = {c: r for c, r in rules.items() if any(k.stage in COMPARED_STAGES for k in r.checks)}
    version = core.version_text
    for resolved in resolved_units:
        model, optimizer = known_section(resolved, "model"), known_section(resolved, "optimizer")
        if model is None and optimizer is None:
            continue
        errors, unjudged = read_answer(core.ask(model, optimizer))
        if unjudged:
            continue  # this environment cannot judge it (no Transformer Engine, say): no verdict either way
        fired = {f.code: f for f in by_unit.get(resolved.unit.name, []) if f.stage in COMPARED_STAGES}
        location = resolved.unit.location
        for error in errors:
            mirrored = rules_for_error(error, compared)
            agreeing = sorted(mirrored & set(fired))
            if agreeing:
                note = f" (offlint's {', '.join(agreeing)} reports the same)"
                location = fired[agreeing[0]].location
            else:
                note = " (no offlint rule predicted this: please report it)"
            out.append(Finding(rule.code, rule.slug, Severity.ERROR,
                               f"megatron-core {version} rejects this configuration: {error}{note}", location,
                               unit=resolved.unit.name, fix=rule.fix, url=rule.url, stage="config"))
        if not errors:
            for code, finding in sorted(fired.items()):
                out.append(Finding(rule.code, rule.slug, Severity.WARNING,
                                   f"megatron-core {version} accepts this configuration, but offlint's {code} says "
                                   f"it fails: one of them is wrong (please report it)", finding.location,
                                   unit=resolved.unit.name, related=(Related(finding.location, finding.message),),
                                   fix=rule.fix, url=rule.url, stage="config"))
    return out
