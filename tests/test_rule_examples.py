"""Every rule's valid and invalid examples, in every source form, run through the real pipeline.

An invalid example must produce the rule's code; a valid one must not. This is how rules are tested: the
examples in rules/*.yaml are the test cases (as Fixit's VALID/INVALID, but data).
"""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.rules import load_rules
from offlint.versions import NEWEST_KNOWN

FILE_NAMES = {"python": "recipe.py", "yaml": "override.yaml", "card": "card.yaml", "hydra": "launch.sh",
              "mlm": "launch.sh", "shell": "launch.sh"}

CASES = [
    pytest.param(rule, example, id=f"{rule.code}-{example.form}-{'valid' if example.valid else 'invalid'}-{i}")
    for rule in load_rules().values()
    for i, example in enumerate(rule.examples)
]


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_rule_example(rule, example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / FILE_NAMES[example.form]
    path.write_text(example.code, encoding="utf-8")
    for name, text in example.files:  # the rest of the example's tree, a project (pyproject.toml) whose files its
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)  # imports may name
        (tmp_path / name).write_text(text, encoding="utf-8")
    if example.files and not (tmp_path / "pyproject.toml").exists():
        (tmp_path / "pyproject.toml").write_text("")
    options = CheckOptions(select=[rule.code], strict=example.strict, mcore_version=example.version or NEWEST_KNOWN,
                           root=tmp_path)
    result = check([path.name], options)
    assert not result.errors, result.errors
    codes = [f.code for f in result.findings if not f.possible or example.strict]
    if example.valid:
        assert rule.code not in codes, [f"{f.location}: {f.message}" for f in result.findings]
    else:
        assert rule.code in codes, f"{rule.code} did not fire on its invalid {example.form} example"


def test_every_rule_in_the_catalog_has_a_file():
    expected = {f"OFL{n:03d}" for n in list(range(1, 7)) + list(range(101, 117)) + list(range(201, 216))
                + [301, 302]}
    assert expected <= set(load_rules())


def test_every_non_builtin_rule_has_examples_in_a_form():
    for rule in load_rules().values():
        if rule.code == "OFL900":
            continue  # needs megatron-core at lint time: tests/test_validate.py
        assert rule.examples, f"{rule.code} has no examples"
        for form in rule.forms:
            kinds = {e.valid for e in rule.examples if e.form == form}
            assert kinds == {True, False}, (rule.code, form)
