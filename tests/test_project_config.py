"""pyproject.toml read as a project's offlint configuration: every shape of [tool.offlint] that TOML can parse is
either taken or refused with a ConfigError naming the file and the key (the CLI prints it as one line, exit 2),
never another exception."""

from __future__ import annotations

import pytest

from offlint.config import ConfigError, load_config


@pytest.mark.parametrize(("text", "message"), [
    ("tool = 5\n", "`tool` must be a table ([tool.offlint] goes in it), not int"),
    ("tool = ['offlint']\n", "`tool` must be a table ([tool.offlint] goes in it), not list"),
    ("[tool]\nofflint = 5\n", "[tool.offlint] must be a table"),
    ("[tool.offlint]\nfail-on = []\n", "fail-on must be one of"),
    ("[tool.offlint]\nstrict = 'yes'\n", "strict must be true or false"),
    ("[tool.offlint]\nselect = 'OFL1'\n", "select must be a list of rule codes"),
    ("[tool.offlint]\nexclude = [1]\n", "exclude must be a list of glob patterns"),
    ("[tool.offlint]\nslurm = 5\n", "[tool.offlint.slurm] must be a table"),
    ("[tool.offlint]\ngpu = [80]\n", "gpu must be a device name"),
])
def test_a_malformed_configuration_is_a_config_error(tmp_path, text, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path / 'pyproject.toml'}: ")
    assert message in str(raised.value)


def test_a_pyproject_without_tool_offlint_is_the_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.ruff]\nline-length = 120\n")
    config = load_config(tmp_path)
    assert config.path == tmp_path / "pyproject.toml" and config.select == [] and not config.strict
