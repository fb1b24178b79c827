"""A checkout's own megatron-core source decides which module names it allows (sources/mcore_source.py): Megatron-LM
PR 6365 added "mhc" to the recompute modules at version 0.19.0, and offlint's 0.19 table made OFL222 an error on the
PR's own test case. Fixtures of our own, in the shape of Megatron-LM's transformer_config.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from offlint.sources.mcore_source import allowed_names, graph_names
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


ENUMS = '''
import enum


class CudaGraphModule(enum.Enum):
    """Named capture regions for per-layer CUDA graphs."""

    attn = 1  # attention
    mlp = 2
    moe = 3
    shortcut_block = 7


class CudaGraphScope(enum.Enum):
    full_iteration = 1
    attn = 2
'''
GRAPH_CONFIG = '''
CUDA_GRAPH_MODULES_DEPRECATIONS = {
    'full_iteration': ('cuda_graph_impl', 'full_iteration'),
    "full_iteration_inference": ('inference_cuda_graph_scope', InferenceCudaGraphScope.block),
}
'''
GRAPH_CASE = MLM_CASE.format(env="", args="  --cuda-graph-impl: transformer_engine\n  --cuda-graph-modules: {modules}\n")


def test_the_cuda_graph_names_are_the_checkouts_enum_members():
    """CudaGraphModule's members (CudaGraphScope's where a release has no CudaGraphModule), "full", and the
    deprecated spellings TransformerConfig migrates."""
    assert graph_names(ENUMS, GRAPH_CONFIG) == {"attn", "mlp", "moe", "shortcut_block", "full", "full_iteration",
                                                "full_iteration_inference"}
    older = ENUMS.split("class CudaGraphModule")[0] + "class CudaGraphScope" + ENUMS.split("class CudaGraphScope")[1]
    assert graph_names(older, None) == {"full_iteration", "attn", "full"}
    assert graph_names("x = 1\n", GRAPH_CONFIG) is None and graph_names(None, None) is None


def _graph_refused(root) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--output-format", "json"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return [f["message"] for f in json.loads(done.stdout) if f["code"] == "OFL220"]


def test_a_cuda_graph_module_the_checkouts_enum_has_is_no_error(checkout):
    """Megatron-LM PR 6541 added `shortcut_block` to CudaGraphModule; offlint's table of the release called it
    unknown (an OFL220 error on the PR's own configuration)."""
    root, case = checkout
    transformer = root / "megatron" / "core" / "transformer"
    (transformer / "enums.py").write_text(ENUMS)
    (transformer / "cuda_graph_config.py").write_text(GRAPH_CONFIG)
    case.write_text(GRAPH_CASE.replace("{modules}", "shortcut_block"))
    assert _graph_refused(root) == []
    case.write_text(GRAPH_CASE.replace("{modules}", "moe_router"))  # the release has it, this checkout does not
    (message,) = _graph_refused(root)
    assert "'moe_router'" in message and "attn, full_iteration, full_iteration_inference, mlp, moe, shortcut_block" \
        in message


def test_checks_added_between_releases_are_read_from_the_checkouts_words():
    """Megatron-LM main refuses fine-grained offloading with 'mhc' recomputed, and gdp_qkv offloaded with gdp_in_proj
    recomputed (PR 6553), at the same version number as Bridge's pin, which does not: the checkout's text decides."""
    from offlint.sources.mcore_source import checks_made

    text = CONFIG + '''
        if self.fine_grained_activation_offloading and "gdp_qkv" in self.offload_modules:
            raise ValueError(
                "gdp_qkv cannot be set in offload_modules together with gdp_in_proj in "
                "recompute_modules, because ..."
            )
'''
    assert checks_made(text) == {"gdp-qkv-offload-with-in-proj-recompute"}
    assert checks_made(CONFIG) == frozenset() and checks_made(None) == frozenset()


def test_gdp_qkv_offloaded_with_gdp_in_proj_recomputed_where_the_checkout_refuses_it(checkout):
    root, case = checkout
    config = root / "megatron" / "core" / "transformer" / "transformer_config.py"
    args = ("  --fine-grained-activation-offloading: true\n  --offload-modules: \"[gdp_qkv]\"\n"
            "  --recompute-granularity: selective\n  --recompute-modules: \"[gdp_in_proj]\"\n")
    case.write_text(MLM_CASE.format(env="", args=args))

    def refused():
        done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--output-format", "json"], cwd=root,
                              capture_output=True, text=True)
        assert done.returncode in (0, 1), done.stderr
        return [f["message"] for f in json.loads(done.stdout) if f["code"] == "OFL120"]

    allowing = CONFIG.replace('"mhc",', '"mhc", "gdp_in_proj",').replace('{"core_attn", "attn_proj"}',
                                                                         '{"core_attn", "attn_proj", "gdp_qkv"}')
    config.write_text(allowing)
    assert refused() == []  # this checkout does not make the check
    config.write_text(allowing + '\n# "gdp_qkv cannot be set in offload_modules together with gdp_in_proj in "\n')
    (message,) = refused()
    assert "gdp_qkv is offloaded while gdp_in_proj is recomputed" in message
