"""The bundled fixtures: good files give no findings; each bad file gives exactly the codes its comments expect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.versions import NEWEST_KNOWN

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BAD_FILES = sorted(p for p in (FIXTURES / "bad").rglob("*") if p.is_file())


def _check(path: Path):
    return check([str(path)], CheckOptions(mcore_version=NEWEST_KNOWN, root=FIXTURES))


@pytest.mark.slow
def test_good_fixtures_are_clean():
    result = _check(FIXTURES / "good")
    assert not result.errors
    assert result.units >= 8
    assert result.findings == [], [f"{f.location}: {f.code} {f.message}" for f in result.findings]


@pytest.mark.slow
@pytest.mark.parametrize("path", BAD_FILES, ids=[p.relative_to(FIXTURES).as_posix() for p in BAD_FILES])
def test_bad_fixture_gives_exactly_its_expected_codes(path):
    expected = set()
    for line in path.read_text().splitlines():
        if "expect:" in line or (expected and line.lstrip().startswith("#") and "OFL" in line):
            expected |= set(re.findall(r"OFL\d{3}", line))
    assert expected, f"{path} declares no expected codes"
    # Check the whole bad tree (launch commands link to recipes by name), then keep this file's findings.
    result = _check(FIXTURES / "bad")
    assert not result.errors
    found = {f.code for f in result.findings if Path(f.location.path).resolve() == path.resolve()}
    assert found == expected
