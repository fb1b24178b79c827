"""SARIF 2.1.0, the format GitHub code scanning and most IDE result viewers ingest."""

from __future__ import annotations

import hashlib
import os
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Mapping
from urllib.parse import quote

from offlint.report.concise import label
from offlint.report.escape import json_dumps
from offlint.report.json_format import rule_url

if TYPE_CHECKING:
    from offlint.report.rule_info import RuleInfo
    from offlint.types import Finding, Location

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# Where the tool lives; SARIF viewers link the tool name here.
INFORMATION_URI = "https://pypi.org/project/offlint/"
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _version() -> str:
    import offlint

    return str(getattr(offlint, "__version__", "0"))


def _physical(loc: Location) -> dict:
    """Relative paths stay relative to %SRCROOT% so results are portable between checkouts. Only "/" separates
    directories: a backslash is a separator on Windows alone, elsewhere a character of the name (%5C). A name
    that is not UTF-8 keeps its own bytes, percent-encoded."""
    path = loc.path.replace("\\", "/") if os.sep == "\\" else loc.path
    data = path.encode("utf-8", "surrogateescape")
    if PurePosixPath(path).is_absolute() or (os.sep == "\\" and PureWindowsPath(path).is_absolute()):
        artifact = {"uri": ("file://" if path.startswith("/") else "file:///") + quote(data, safe="/:")}
    else:  # `:` is escaped too, or `a:b.py` would read as a URI with scheme `a`
        artifact = {"uri": quote(data, safe="/@!$&'()*+,;="), "uriBaseId": "%SRCROOT%"}
    return {"artifactLocation": artifact, "region": {"startLine": loc.line, "startColumn": loc.col}}


def fingerprint(f: Finding) -> str:
    """Stable across runs and unrelated edits (no line numbers), so code scanning can track alerts."""
    text = "\0".join((f.code, f.location.path, f.message))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _descriptor(rule: RuleInfo) -> dict:
    d = {
        "id": rule.code,
        "name": rule.slug,
        "shortDescription": {"text": rule.summary or rule.slug},
        "fullDescription": {"text": rule.explanation or rule.summary or rule.slug},
        "help": {"text": rule.fix or rule.explanation or rule.summary or rule.slug},
        "defaultConfiguration": {"level": _LEVELS[rule.severity.value]},
    }
    if rule.url:
        d["helpUri"] = rule.url
    return d


def _result(f: Finding, index: dict[str, int], rules: Mapping[str, RuleInfo]) -> dict:
    r: dict = {"ruleId": f.code}
    if f.code in index:
        r["ruleIndex"] = index[f.code]
    r["level"] = _LEVELS[f.severity.value]
    r["message"] = {"text": label(f)}  # viewers show only the text, so `possible: ` stays in it
    r["locations"] = [{"physicalLocation": _physical(f.location)}]
    if f.related:
        r["relatedLocations"] = [
            {"id": i, "physicalLocation": _physical(rel.location), "message": {"text": rel.note}}
            for i, rel in enumerate(f.related)
        ]
    r["partialFingerprints"] = {"offlint/v1": fingerprint(f)}
    props: dict = {}
    if f.possible:
        props["possible"] = True
    if f.unit:
        props["unit"] = f.unit
    if f.fix:
        props["fix"] = f.fix
    url = rule_url(f, rules)
    if url and url != getattr(rules.get(f.code), "url", None):
        props["url"] = url
    if props:
        r["properties"] = props
    return r


def render(findings: list[Finding], rules: Mapping[str, RuleInfo]) -> str:
    used = sorted({f.code for f in findings if f.code in rules})
    index = {code: i for i, code in enumerate(used)}
    driver = {
        "name": "offlint",
        "informationUri": INFORMATION_URI,
        "version": _version(),
        "rules": [_descriptor(rules[code]) for code in used],
    }
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": [_result(f, index, rules) for f in findings],
            }
        ],
    }
    return json_dumps(log) + "\n"
