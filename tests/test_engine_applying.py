"""engine._applying: the rules that apply to a version, worked out once per run's rules and version."""

from offlint import engine
from offlint.rules import load_rules
from offlint.versions import parse_version


def _plain(rules, version):
    return [rule for rule in rules if rule.applies_to(version)]


def test_applying_follows_the_version_and_the_rules():
    rules = list(load_rules().values())
    old, new = parse_version("0.16.1"), parse_version("0.20.0")
    assert engine._applying(rules, new) == _plain(rules, new)
    assert engine._applying(rules, old) == _plain(rules, old)
    assert engine._applying(rules, new) == _plain(rules, new)
    assert _plain(rules, old) != _plain(rules, new)  # (the rules do differ by version)
    rules.pop(0)  # the same list, changed in place
    assert engine._applying(rules, new) == _plain(rules, new)
    rules[0] = rules[-1]  # same length, another rule
    assert engine._applying(rules, new) == _plain(rules, new)
    assert engine._applying([], new) == []
