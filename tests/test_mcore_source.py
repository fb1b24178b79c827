"""A checkout's own megatron-core source decides which module names it allows (sources/mcore_source.py): Megatron-LM
PR 6365 added "mhc" to the recompute modules at version 0.19.0, and offlint's 0.19 table made OFL222 an error on the
PR's own test case. Fixtures of our own, in the shape of Megatron-LM's transformer_config.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from offlint.sources.mcore_source import allowed_names
from tests.test_mlm_history_cases import BASE as MLM_CASE

CONFIG = '''
from dataclasses import dataclass


@dataclass
class TransformerConfig:
    recompute_granularity: str = None
    recompute_modules: list = None
    offload_modules: list = None

    def __post_init__(self):
        if self.recompute_granularity == "selective":
            if len(self.recompute_modules) > 0:
                allowed_modules = {
                    "core_attn",
                    "mlp",
                    "layernorm",
                    "mhc",
                }
                invalid_modules = set(self.recompute_modules) - allowed_modules
                assert not invalid_modules, f"Invalid choices for recompute_modules: {invalid_modules}"
        if self.offload_modules:
            allowed_modules = {"core_attn", "attn_proj"}
            invalid_modules = set(self.offload_modules or []) - allowed_modules
            assert not invalid_modules, f"Invalid choices for offload_modules: {invalid_modules}"
'''
PACKAGE_INFO = "MAJOR = 0\nMINOR = 19\nPATCH = 0\n"
# a Megatron-LM functional test case (tests/test_mlm_history_cases.py's shape) with a selective recompute
CASE = MLM_CASE.format(env="", args="  --recompute-granularity: selective\n  --recompute-modules: \"[{modules}]\"\n")


def test_the_lists_the_source_checks_are_read_each_from_its_own_assignment():
    names = allowed_names(CONFIG)
    assert names == {"recompute_module_names": {"core_attn", "mlp", "layernorm", "mhc"},
                     "offload_module_names": {"core_attn", "attn_proj"}}  # the same variable name, twice
    built = CONFIG.replace('allowed_modules = {"core_attn", "attn_proj"}', "allowed_modules = set(OFFLOADABLE)")
    assert "offload_module_names" not in allowed_names(built)  # a set offlint cannot read: the table applies
    assert allowed_names("def f(:\n") == {} and allowed_names(None) == {}


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / ".git").mkdir()
    core = tmp_path / "megatron" / "core"
    (core / "transformer").mkdir(parents=True)
    (core / "package_info.py").write_text(PACKAGE_INFO)
    (core / "transformer" / "transformer_config.py").write_text(CONFIG)
    case = tmp_path / "tests" / "functional_tests" / "test_cases" / "gpt" / "demo" / "model_config.yaml"
    case.parent.mkdir(parents=True)
    return tmp_path, case


def _refused(root, *args: str) -> list[str]:
    """OFL222's messages for `offlint check .` in the checkout (its own version unless `args` give one)."""
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--output-format", "json", *args],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return [f["message"] for f in json.loads(done.stdout) if f["code"] == "OFL222"]


def test_a_name_the_checkouts_source_allows_is_no_error(checkout):
    root, case = checkout
    case.write_text(CASE.replace("{modules}", "mhc"))
    assert _refused(root) == []  # offlint's 0.19 table does not have "mhc"; the checkout's TransformerConfig does
    case.write_text(CASE.replace("{modules}", "gdn_norm_out"))  # the 0.19 release has it, this checkout does not
    (message,) = _refused(root)
    assert "'gdn_norm_out'" in message and "the modules are core_attn, layernorm, mhc, mlp" in message


def test_the_source_is_read_again_when_it_changes(checkout):
    root, case = checkout
    case.write_text(CASE.replace("{modules}", "mhc"))
    assert _refused(root) == []
    config = root / "megatron" / "core" / "transformer" / "transformer_config.py"
    config.write_text(CONFIG.replace('                    "mhc",\n', ""))
    assert len(_refused(root)) == 1  # the cache is keyed by what the source allows


def test_a_version_given_on_the_command_line_reads_the_checkout_only_where_it_is_that_version(checkout):
    """The checkout is 0.19.0: naming that version keeps its own lists (a pin between releases allows names no
    release table has: Bridge PR 5449 advanced its pin to one allowing `gdn_in_proj_conv`, and a gate run with
    --mcore-version refused it); naming another takes offlint's table of that version."""
    root, case = checkout
    case.write_text(CASE.replace("{modules}", "mhc"))
    assert _refused(root, "--mcore-version", "0.19.0") == []  # the checkout's TransformerConfig allows it
    assert len(_refused(root, "--mcore-version", "0.18.0")) == 1  # the table of the version named does not
