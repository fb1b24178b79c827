"""Reporter output, pinned tightly enough that a format change shows up as a test failure."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import click
import jsonschema
import pytest

from offlint.report import FORMATS, RuleInfo, render, render_statistics
from offlint.types import Finding, Location, Related, Severity

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


@dataclass(frozen=True)
class Rule:
    code: str
    slug: str
    severity: Severity
    summary: str
    explanation: str
    fix: str
    url: str


RULES: dict[str, RuleInfo] = {
    r.code: r
    for r in (
        Rule("OFL101", "offload-without-layers", Severity.ERROR, "Offload needs layers", "Long text.", "Set it.",
             "https://example.org/rules/OFL101"),
        Rule("OFL205", "offload-fraction", Severity.WARNING, "Fraction too high", "", "", ""),
        Rule("OFL301", "env-missing", Severity.INFO, "Env var missing", "Why.", "", "https://example.org/rules/OFL301"),
        Rule("OFL999", "unused-rule", Severity.ERROR, "Never fires", "", "", ""),
    )
}

A = "recipes/a.py"
B = "conf/x,y: z.yaml"  # a comma, a colon and a space: every escaping path gets exercised

FINDINGS = sorted(
    [
        Finding("OFL101", "offload-without-layers", Severity.ERROR, 'cpu_offloading "on" with <2 layers',
                Location(A, 3, 5), unit="llama3_8b()",
                related=(Related(Location(A, 1, 1), "set here via cfg.model"),
                         Related(Location(B, 2, 3), "num_layers comes from <yaml>")),
                fix="set cpu_offloading_num_layers >= 1", url="https://example.org/rules/OFL101"),
        Finding("OFL205", "offload-fraction", Severity.WARNING, "100% offload\nmay OOM", Location(A, 12, 2),
                possible=True),
        Finding("OFL301", "env-missing", Severity.INFO, "a & b < c", Location(B, 2, 3)),
        Finding("OFL101", "offload-without-layers", Severity.ERROR, "again", Location(B, 4, 1)),
    ],
    key=Finding.sort_key,
)

SOURCES = {A: "import x\n\ndef f():\n    cfg.cpu_offloading = True\n" + "\n" * 7 + "\tfrac = 1.0\n"}


def test_formats_listed() -> None:
    assert FORMATS == ("concise", "full", "json", "sarif", "github", "junit")
    with pytest.raises(ValueError):
        render("xml", FINDINGS, RULES, SOURCES)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_findings(fmt: str) -> None:
    out = render(fmt, [], RULES, {})
    assert out == "" or out.endswith("\n")


def test_concise() -> None:
    """One line per finding with the message's first line only: the detail lines after it ("may OOM" here) are
    for full and json (test_full, test_json)."""
    assert render("concise", FINDINGS, RULES, SOURCES).splitlines() == [
        "conf/x,y: z.yaml:2:3: OFL301 a & b < c",
        "conf/x,y: z.yaml:4:1: OFL101 again",
        'recipes/a.py:3:5: OFL101 cpu_offloading "on" with <2 layers',
        "recipes/a.py:12:2: OFL205 possible: 100% offload",
    ]


def test_concise_and_full_colour_only_when_asked() -> None:
    plain = render("concise", FINDINGS, RULES, SOURCES)
    assert "\x1b[" not in plain and "\x1b[" not in render("full", FINDINGS, RULES, SOURCES)
    coloured = render("concise", FINDINGS, RULES, SOURCES, color=True)
    assert "\x1b[" in coloured and click.unstyle(coloured) == plain
    assert click.unstyle(render("full", FINDINGS, RULES, SOURCES, color=True)) == \
        render("full", FINDINGS, RULES, SOURCES)
    for fmt in ("json", "sarif", "github", "junit"):  # machine formats never
        assert "\x1b[" not in render(fmt, FINDINGS, RULES, SOURCES, color=True)


def test_full() -> None:
    out = render("full", FINDINGS, RULES, SOURCES)
    assert out == (
        "OFL301 a & b < c\n"
        " --> conf/x,y: z.yaml:2:3\n"
        "\n"
        "OFL101 again\n"
        " --> conf/x,y: z.yaml:4:1\n"
        "\n"
        'OFL101 cpu_offloading "on" with <2 layers\n'
        " --> recipes/a.py:3:5\n"
        "  |\n"
        "3 | def f():\n"
        "  |     ^\n"
        "  |\n"
        "  = note: set here via cfg.model (recipes/a.py:1:1)\n"
        "  = note: num_layers comes from <yaml> (conf/x,y: z.yaml:2:3)\n"
        "help: set cpu_offloading_num_layers >= 1\n"
        "\n"
        "OFL205 possible: 100% offload\n"
        "       may OOM\n"
        "  --> recipes/a.py:12:2\n"
        "   |\n"
        "12 | \tfrac = 1.0\n"
        "   | \t^\n"
        "   |\n"
    )


def test_json() -> None:
    data = json.loads(render("json", FINDINGS, RULES, SOURCES))
    assert [d["code"] for d in data] == ["OFL301", "OFL101", "OFL101", "OFL205"]
    keys = {"code", "slug", "severity", "message", "filename", "location", "end_location", "unit", "unit_path",
            "units", "shared_with", "related", "fix", "possible", "url"}
    assert all(set(d) == keys for d in data)
    first = data[2]
    assert first["message"] == 'cpu_offloading "on" with <2 layers'
    assert first["severity"] == "error"
    assert first["location"] == first["end_location"] == {"row": 3, "column": 5}
    assert first["related"][1] == {"filename": B, "row": 2, "column": 3, "note": "num_layers comes from <yaml>"}
    assert first["fix"] == "set cpu_offloading_num_layers >= 1"
    assert first["unit"] == "llama3_8b()"
    assert data[3]["possible"] is True and data[3]["fix"] is None and data[3]["url"] is None
    assert data[3]["message"] == "100% offload\nmay OOM"
    assert data[0]["url"] == "https://example.org/rules/OFL301"  # falls back to the rule's URL


def test_sarif_validates_against_official_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "sarif-schema-2.1.0" in schema["$id"]
    log = json.loads(render("sarif", FINDINGS, RULES, SOURCES))
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(log))
    assert not errors, [e.message for e in errors]


def test_sarif_content() -> None:
    log = json.loads(render("sarif", FINDINGS, RULES, SOURCES))
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json" and log["version"] == "2.1.0"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "offlint" and driver["version"]
    assert [r["id"] for r in driver["rules"]] == ["OFL101", "OFL205", "OFL301"]  # OFL999 never fired
    assert driver["rules"][0]["name"] == "offload-without-layers"
    assert driver["rules"][0]["helpUri"] == "https://example.org/rules/OFL101"
    assert [r["defaultConfiguration"]["level"] for r in driver["rules"]] == ["error", "warning", "note"]
    results = run["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        ("OFL301", 2, "note"), ("OFL101", 0, "error"), ("OFL101", 0, "error"), ("OFL205", 1, "warning")]
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc == {"artifactLocation": {"uri": "conf/x,y%3A%20z.yaml", "uriBaseId": "%SRCROOT%"},
                   "region": {"startLine": 2, "startColumn": 3}}
    related = results[2]["relatedLocations"]
    assert [(r["id"], r["message"]["text"]) for r in related] == [
        (0, "set here via cfg.model"), (1, "num_layers comes from <yaml>")]
    assert results[3]["properties"]["possible"] is True
    assert results[3]["message"]["text"] == "possible: 100% offload\nmay OOM"
    assert "properties" not in results[1] or "possible" not in results[1]["properties"]
    prints = [r["partialFingerprints"]["offlint/v1"] for r in results]
    assert len(set(prints)) == 4
    again = json.loads(render("sarif", FINDINGS, RULES, SOURCES))["runs"][0]["results"]
    assert [r["partialFingerprints"]["offlint/v1"] for r in again] == prints


def test_github() -> None:
    assert render("github", FINDINGS, RULES, SOURCES).splitlines() == [
        "::notice file=conf/x%2Cy%3A z.yaml,line=2,col=3,title=offlint (OFL301)::"
        "conf/x,y: z.yaml:2:3: OFL301 a & b < c",
        "::error file=conf/x%2Cy%3A z.yaml,line=4,col=1,title=offlint (OFL101)::conf/x,y: z.yaml:4:1: OFL101 again",
        "::error file=recipes/a.py,line=3,col=5,title=offlint (OFL101)::"
        'recipes/a.py:3:5: OFL101 cpu_offloading "on" with <2 layers',
        "::warning file=recipes/a.py,line=12,col=2,title=offlint (OFL205)::"
        "recipes/a.py:12:2: OFL205 possible: 100%25 offload%0Amay OOM",
    ]


def test_junit() -> None:
    text = render("junit", FINDINGS, RULES, SOURCES)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(text.split("\n", 1)[1])
    assert root.tag == "testsuites" and root.get("name") == "offlint"
    assert root.get("tests") == root.get("failures") == "4"
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [(B, "2", "2"), (A, "2", "2")]
    cases = root.findall("testsuite/testcase")
    assert [(c.get("name"), c.get("classname"), c.get("line"), c.get("column")) for c in cases] == [
        ("offlint.OFL301", B, "2", "3"), ("offlint.OFL101", B, "4", "1"),
        ("offlint.OFL101", A, "3", "5"), ("offlint.OFL205", A, "12", "2")]
    failures = [c.find("failure") for c in cases]
    assert all(f is not None for f in failures)
    assert failures[2].get("message") == 'cpu_offloading "on" with <2 layers'
    assert failures[3].get("message") == "possible: 100% offload\nmay OOM"  # newline survives attribute escaping
    assert failures[0].text == "line 2, col 3, a & b < c"


def test_junit_survives_control_characters() -> None:
    bad = [Finding("OFL101", "x", Severity.ERROR, "bell\x07here", Location(A, 1, 1))]
    ET.fromstring(render("junit", bad, RULES, {}).split("\n", 1)[1])


def test_statistics() -> None:
    assert render_statistics(FINDINGS, RULES) == (
        "2\tOFL101\toffload-without-layers\n"
        "1\tOFL205\toffload-fraction\n"
        "1\tOFL301\tenv-missing\n"
    )
    assert render_statistics([], RULES) == ""


def test_a_finding_at_a_shared_helper_line_names_its_unit_in_concise_and_full():
    """A finding located outside the file that defines its unit (a base builder's line) says which recipe it
    comes from; one that several units share says how many, and the full format names them."""
    helper = Location("recipes/common.py", 7, 5)
    own = Finding("OFL101", "offload-without-layers", Severity.ERROR, "m", Location(A, 3, 5), unit="a_config",
                  unit_path=A)
    elsewhere = Finding("OFL101", "offload-without-layers", Severity.ERROR, "m", helper, unit="a_config",
                        unit_path=A)
    shared = Finding("OFL101", "offload-without-layers", Severity.ERROR, "m", helper, unit="a_config", unit_path=A,
                     shared_with=("b", "c", "d", "e", "f", "g"))
    concise = render("concise", [own, elsewhere, shared], RULES, {}).splitlines()
    assert concise[0].endswith("OFL101 m")
    assert concise[1].endswith(f"OFL101 m [in a_config ({A})]")
    assert concise[2].endswith("OFL101 m [in 7 units]")
    full = render("full", [shared], RULES, {})
    assert "= note: in units a_config, b, c, d, e and 2 more" in full
    assert json.loads(render("json", [shared], RULES, {}))[0]["shared_with"] == ["b", "c", "d", "e", "f", "g"]
    assert json.loads(render("json", [elsewhere], RULES, {}))[0]["unit_path"] == A
