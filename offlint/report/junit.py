"""JUnit XML, which most CI systems (GitLab, Jenkins, Azure) show as a test report: one failure per finding."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from offlint.report.concise import label
from offlint.report.escape import printable

if TYPE_CHECKING:
    from offlint.types import Finding

# Characters XML 1.0 cannot carry at all, even escaped; ElementTree would write them and break the file.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _ILLEGAL.sub("\ufffd", printable(text, keep="\t\n\r"))


def render(findings: list[Finding]) -> str:
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.location.path, []).append(f)
    n = str(len(findings))
    root = ET.Element("testsuites", name="offlint", tests=n, failures=n, errors="0")
    for path, group in by_file.items():
        k = str(len(group))
        suite = ET.SubElement(
            root, "testsuite", name=_clean(path), tests=k, disabled="0", errors="0", failures=k, package="offlint"
        )
        for f in group:
            loc = f.location
            case = ET.SubElement(suite, "testcase", name=f"offlint.{f.code}", classname=_clean(path))
            case.set("line", str(loc.line))
            case.set("column", str(loc.col))
            failure = ET.SubElement(case, "failure", message=_clean(label(f)), type=f.severity.value)
            failure.text = _clean(f"line {loc.line}, col {loc.col}, {label(f)}")
    ET.indent(root, space="    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
