"""A boolean key given a string in a Bridge YAML override file (`cpu_offloading: "false"`, or `y`/`n`, which YAML
does not read as booleans) is a string after OmegaConf.load, which Bridge merges into its untyped copy of the
config and sets on the dataclass as it is: megatron-core then tests a non-empty string for truth, so the feature is
ON. OFL005 had covered Hydra's yes/no words only (the seeded-mistake study's M-YAML, session 65)."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check


def _bridge_value(text: str):
    """The value Bridge's process_config_with_overrides sets: OmegaConf.load's, merged into the config's dict."""
    omegaconf = pytest.importorskip("omegaconf")
    merged = omegaconf.OmegaConf.merge(omegaconf.OmegaConf.create({"model": {"cpu_offloading": False}}),
                                       omegaconf.OmegaConf.create(text))
    return omegaconf.OmegaConf.to_container(merged)["model"]["cpu_offloading"]


@pytest.mark.parametrize("written, on_with_it", [
    ('"false"', "the opposite"), ("'False'", "the opposite"), ("n", "the opposite"), ('"true"', ""), ("y", ""),
])
def test_a_string_for_a_boolean_in_yaml_is_reported(tmp_path, written, on_with_it):
    text = f"model:\n  cpu_offloading: {written}\n"
    value = _bridge_value(text)
    assert isinstance(value, str) and bool(value)  # what megatron-core then tests: ON
    (tmp_path / "override.yaml").write_text(text)
    findings = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL005"])).findings
    assert [(f.code, f.location.line) for f in findings] == [("OFL005", 2)], findings
    assert "is ON" in findings[0].message and ("the opposite" in findings[0].message) == bool(on_with_it)


@pytest.mark.parametrize("written", ["false", "no", "off", "True", "ON"])
def test_a_yaml_boolean_is_none(tmp_path, written):
    text = f"model:\n  cpu_offloading: {written}\n"
    assert isinstance(_bridge_value(text), bool)
    (tmp_path / "override.yaml").write_text(text)
    assert check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL005"])).findings == []


def test_the_fix_writes_the_boolean_the_word_means(tmp_path):
    from click.testing import CliRunner

    from offlint.cli import main

    (tmp_path / "override.yaml").write_text('model:\n  cpu_offloading: "false"  # off for now\n')
    result = CliRunner().invoke(main, ["check", str(tmp_path / "override.yaml"), "--fix", "--no-cache",
                                       "--select", "OFL005"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "override.yaml").read_text() == "model:\n  cpu_offloading: false  # off for now\n"
