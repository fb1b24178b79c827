"""A finding must be about something that would run (issue 14): pytest code, private functions and helpers that
change a config they are given are checked through what runs them; a path only a user's own flags choose is at
most a warning naming the flags; under --strict a rule does not apply to a section the unit never builds, and a
master switch that nothing the unit runs sets keeps its default.

The trees are small fixtures of our own in the shapes Megatron Bridge writes them (tests/unit_tests/...,
perf_recipes/<model>/common.py helpers, scripts/performance/{argument_parser,run_script,utils/overrides}.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.resolve import resolve
from offlint.sources.python import read_python
from offlint.sources.python_project import PythonProject
from offlint.types import Severity
from offlint.versions import parse_version
from tests.check_helpers import write_tree

V = parse_version("0.20.0")

RECIPE = '''\
def llama_pretrain_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=16, hidden_size=1024), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.cpu_offloading = True
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    return cfg
'''

UNIT_TEST = '''\
import pytest
from bridge.recipes.llama import llama_pretrain_config


def test_recipe_builds_with_pipeline_parallelism():
    cfg = llama_pretrain_config()
    cfg.model.recompute_granularity = "full"
    assert cfg.model.pipeline_model_parallel_size == 2


class TestRuntimeConfigUpdate:
    def test_recipe_environment_is_applied(self):
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=2), optimizer=OptimizerConfig(),
                              ddp=DistributedDataParallelConfig())
        cfg.model.fine_grained_activation_offloading = True
        cfg.env_vars = {"NCCL_DEBUG": "INFO"}
        runtime_config_update(cfg)


def _make_config():
    return ConfigContainer(model=GPTModelProvider(num_layers=2, cpu_offloading=True,
                                                  pipeline_model_parallel_size=4))
'''

CONFTEST = '''\
import pytest


@pytest.fixture
def offloaded_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=2), optimizer=OptimizerConfig(optimizer_cpu_offload=True))
    cfg.env_vars = {}
    return cfg
'''


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    write_tree(tmp_path, files)
    return tmp_path


def _check(tree: Path, monkeypatch, strict: bool = False):
    monkeypatch.chdir(tree)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tree, strict=strict, cache=False))
    assert not result.errors, result.errors
    return result.findings


# ---- D2/D6: pytest code is not a unit ------------------------------------------------------------------------


def test_test_code_gives_no_units():
    for name in ("tests/unit_tests/training/test_config.py", "scripts/foo_test.py", "conftest.py",
                 "tests/unit_tests/recipes/recipe_test_utils.py", "/abs/project/test_x.py"):
        assert read_python(name, UNIT_TEST + CONFTEST) == []
    # The same code in a module outside tests/ that pytest does not collect is read as usual, as is one whose
    # absolute path merely passes through a directory called tests.
    for name in ("scripts/helpers.py", "/home/ci/tests/checkout/scripts/helpers.py"):
        names = {u.name for u in read_python(name, UNIT_TEST)}
        assert "TestRuntimeConfigUpdate.test_recipe_environment_is_applied" in names


def test_test_code_is_parsed_for_its_syntax_errors_only():
    """A test module is never run: the modules it imports are not read for it; a syntax error is still one."""
    texts = {"bridge/recipes/llama.py": RECIPE, "tests/unit_tests/recipes/test_llama_recipes.py": UNIT_TEST}
    project = PythonProject(sorted(texts), texts.get)
    with project.tracking() as touched:
        assert read_python("tests/unit_tests/recipes/test_llama_recipes.py", UNIT_TEST, project) == []
    assert not touched and not project.has_reader("bridge/recipes/llama.py")
    with pytest.raises(SyntaxError):
        read_python("tests/unit_tests/recipes/test_broken.py", "def test_x(:\n    pass\n", project)


def test_a_walked_tree_does_not_parse_its_test_code(tmp_path, monkeypatch):
    """Found by walking a directory, a test module is not parsed (like a file naming no key the rules read);
    named on the command line, its syntax error is reported."""
    broken = "def test_offload(:\n    cfg.model.cpu_offloading = True\n"
    tree = _tree(tmp_path, {"bridge/recipes/llama.py": RECIPE, "tests/unit_tests/test_broken.py": broken})
    monkeypatch.chdir(tree)
    walked = check(["."], CheckOptions(mcore_version="0.20.0", root=tree, cache=False))
    assert not walked.errors and walked.files_checked == 2
    named = check(["tests/unit_tests/test_broken.py"], CheckOptions(mcore_version="0.20.0", root=tree, cache=False))
    assert [e.path for e in named.errors] == ["tests/unit_tests/test_broken.py"]
    assert "syntax error" in named.errors[0].message


def test_a_recipe_is_reported_once_and_never_through_its_tests(tmp_path, monkeypatch):
    tree = _tree(tmp_path, {"bridge/__init__.py": "", "bridge/recipes/__init__.py": "",
                            "bridge/recipes/llama.py": RECIPE,
                            "tests/unit_tests/recipes/test_llama_recipes.py": UNIT_TEST,
                            "tests/unit_tests/conftest.py": CONFTEST})
    for strict in (False, True):
        findings = _check(tree, monkeypatch, strict)
        assert not [f for f in findings if f.location.path.startswith("tests/")]
        assert not [f for f in findings if "test" in f.unit.lower() or f.code == "OFL301"]
        (pipeline,) = [f for f in findings if f.code == "OFL102"]  # cpu_offloading with PP=2
        assert pipeline.unit == "llama_pretrain_config" and pipeline.units == 1
        assert pipeline.location.path == "bridge/recipes/llama.py"


# ---- D8: a private builder's launch environment is its callers' ----------------------------------------------

COMMON = '''\
def _apply_deepseek_fsdp_configs(cfg):
    cfg.model.fine_grained_activation_offloading = True
    cfg.model.offload_modules = ["core_attn"]
    cfg.ddp.use_megatron_fsdp = True
'''

CALLERS = '''\
from bridge.perf_recipes.deepseek.common import _apply_deepseek_fsdp_configs


def deepseek_pretrain_64gpu_bf16_fsdp_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    _apply_deepseek_fsdp_configs(cfg)
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NVTE_CPU_OFFLOAD_V1": "1"}
    return cfg


def deepseek_pretrain_64gpu_fp8_fsdp_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    _apply_deepseek_fsdp_configs(cfg)
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NVTE_CPU_OFFLOAD_V1": "1"}
    return cfg
'''


def _deepseek_tree(tmp_path: Path, callers: str) -> Path:
    return _tree(tmp_path, {"bridge/__init__.py": "", "bridge/perf_recipes/__init__.py": "",
                            "bridge/perf_recipes/deepseek/__init__.py": "",
                            "bridge/perf_recipes/deepseek/common.py": COMMON,
                            "bridge/perf_recipes/deepseek/gb300/deepseek_v3.py": callers})


def test_a_private_builder_whose_callers_all_set_the_variable_is_clean(tmp_path, monkeypatch):
    findings = _check(_deepseek_tree(tmp_path, CALLERS), monkeypatch)
    assert not [f for f in findings if f.code == "OFL112"]
    # The private builder is read (its values, for estimates and the property tests) but not checked on its own.
    (helper,) = read_python("common.py", COMMON)
    assert "private" in helper.checked_through_callers


def test_a_caller_without_the_variable_is_reported_at_the_helper_naming_that_caller(tmp_path, monkeypatch):
    lacking = CALLERS.replace('''"expandable_segments:True", "NVTE_CPU_OFFLOAD_V1": "1"}
    return cfg
''', '''"expandable_segments:True"}
    return cfg
''', 1)
    assert lacking != CALLERS
    findings = _check(_deepseek_tree(tmp_path, lacking), monkeypatch)
    (finding,) = [f for f in findings if f.code == "OFL112"]
    assert finding.severity == Severity.ERROR
    assert finding.location.path == "bridge/perf_recipes/deepseek/common.py" and finding.location.line == 2
    assert finding.unit == "deepseek_pretrain_64gpu_bf16_fsdp_config"
    assert "launch environment of deepseek_pretrain_64gpu_bf16_fsdp_config, which runs this line via " \
        "_apply_deepseek_fsdp_configs() in bridge/perf_recipes/deepseek/common.py, called at " in finding.message


# ---- D9: paths only a user's flags choose; functions nothing reaches -----------------------------------------

ARGUMENT_PARSER = '''\
import argparse


def parse_cli_args():
    parser = argparse.ArgumentParser(description="performance runner")
    parser.add_argument("-ol", "--activation_offload_layers", type=int, default=None)
    parser.add_argument("-rl", "--recompute_num_layers", type=int, default=None)
    parser.add_argument("--recompute_modules", type=str, default=None)
    return parser
'''

OVERRIDES = '''\
def _set_recompute_overrides(recipe, cpu_offloading_num_layers=None, recompute_num_layers=None,
                             recompute_modules=None):
    if cpu_offloading_num_layers is not None and cpu_offloading_num_layers > 0:
        recipe.model.cpu_offloading = True
        recipe.model.cpu_offloading_weights = False
        recipe.model.cpu_offloading_num_layers = cpu_offloading_num_layers
    if recompute_num_layers is not None:
        recipe.model.recompute_granularity = "full"
        recipe.model.recompute_num_layers = recompute_num_layers
    if recompute_modules is not None:
        recipe.model.recompute_modules = recompute_modules
        recipe.model.recompute_granularity = "selective"
    return recipe


def set_workload_base_configs(cfg, settings):
    _set_recompute_overrides(cfg, cpu_offloading_num_layers=settings.cpu_offloading_num_layers,
                             recompute_modules=settings.recompute_modules)
    return cfg


def set_user_overrides(recipe, args):
    _set_recompute_overrides(recipe, cpu_offloading_num_layers=args.activation_offload_layers,
                             recompute_num_layers=args.recompute_num_layers,
                             recompute_modules=args.recompute_modules)
    return recipe
'''

RUN_SCRIPT = '''\
from argument_parser import parse_cli_args
from utils.overrides import set_user_overrides


def main():
    parser = parse_cli_args()
    args, cli_overrides = parser.parse_known_args()
    recipe = ConfigContainer(model=GPTModelProvider(num_layers=16), optimizer=OptimizerConfig(),
                             ddp=DistributedDataParallelConfig())
    recipe.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    recipe = set_user_overrides(recipe, args)
    pretrain(recipe)


if __name__ == "__main__":
    main()
'''


def test_a_path_only_user_flags_choose_is_a_warning_naming_the_flags(tmp_path, monkeypatch):
    tree = _tree(tmp_path, {"scripts/performance/argument_parser.py": ARGUMENT_PARSER,
                            "scripts/performance/utils/overrides.py": OVERRIDES,
                            "scripts/performance/run_script.py": RUN_SCRIPT})
    findings = _check(tree, monkeypatch)
    (finding,) = [f for f in findings if f.code == "OFL103"]
    assert finding.severity == Severity.WARNING  # the rule's own severity is error
    assert finding.location.path == "scripts/performance/utils/overrides.py" and finding.location.line == 4
    assert finding.unit == "main"
    assert "-ol/--activation_offload_layers" in finding.message and "--recompute_modules" in finding.message
    # Neither helper is reported on its own: set_user_overrides through main, set_workload_base_configs not at all
    # (nothing calls it), _set_recompute_overrides (private) only through them.
    assert {f.unit for f in findings} == {"main"}
    assert not [f for f in findings if f.severity == Severity.ERROR]


def test_argparse_options_are_looked_for_only_in_modules_that_declare_some():
    """A module imported from is parsed for its argparse options only when its text says `add_argument`."""
    texts = {"scripts/performance/argument_parser.py": ARGUMENT_PARSER,
             "scripts/performance/utils/overrides.py": OVERRIDES,
             "scripts/performance/run_script.py": "from argument_parser import parse_cli_args\n"
                                                  "from utils.overrides import set_user_overrides\n"}
    project = PythonProject(sorted(texts), texts.get)
    with project.tracking() as touched:
        options = project.reader("scripts/performance/run_script.py")._declared_options()
    assert options["activation_offload_layers"] == ("-ol", "--activation_offload_layers")
    assert project.has_reader("scripts/performance/argument_parser.py")
    assert not project.has_reader("scripts/performance/utils/overrides.py")
    assert "scripts/performance/utils/overrides.py" in touched  # its text decided: an edit may change the options


def test_the_same_combination_written_in_code_stays_an_error(tmp_path, monkeypatch):
    fixed = RUN_SCRIPT.replace("recipe = set_user_overrides(recipe, args)",
                               "recipe.model.cpu_offloading = True\n"
                               "    recipe.model.recompute_granularity = 'selective'")
    findings = _check(_tree(tmp_path, {"scripts/performance/argument_parser.py": ARGUMENT_PARSER,
                                       "scripts/performance/run_script.py": fixed}), monkeypatch)
    (finding,) = [f for f in findings if f.code == "OFL103"]
    assert finding.severity == Severity.ERROR and "flags" not in finding.message


BACKBONES = '''\
import os

_BACKBONES = {"moe-30b": {"is_moe": True, "ckpt": os.environ.get("CKPT_30B", "/ckpt/30b")},
              "dense-4b": {"is_moe": False, "ckpt": "/ckpt/4b"}}


def _backbone(name):
    return dict(_BACKBONES[name.strip().lower()])


def ov_midtrain_config(backbone="MoE-30B"):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    is_moe = _backbone(backbone)["is_moe"]
    adamw = os.environ.get("USE_MUON", "0") != "1" and (is_moe or os.getenv("FORCE_ADAMW") == "1")
    if adamw:
        cfg.optimizer.optimizer = "adam"
    else:
        cfg.optimizer.optimizer = "dist_muon"
    cfg.optimizer.optimizer_cpu_offload = True
    cfg.optimizer.optimizer_offload_fraction = 1.0
    return cfg
'''


def test_a_path_only_the_environment_chooses_is_a_warning_naming_the_variables(tmp_path, monkeypatch):
    """LLaVA-OneVision-2's recipes choose Muon or AdamW from `os.environ.get(...)` and the backbone's row of a table
    (`dict(_BACKBONES[name.strip().lower()])`). A recipe is read once for all its launches, whose environments
    differ: a variable it reads is the user's choice, as a flag is: the path to Muon is a warning naming the
    variables. Where the table alone decides, the dense backbone's Muon is an error as before."""
    def ofl204(text: str) -> list:
        return [f for f in _check(_tree(tmp_path, {"recipes.py": text}), monkeypatch) if f.code == "OFL204"]

    (finding,) = ofl204(BACKBONES)
    assert finding.severity == Severity.WARNING  # the rule's own severity is error
    assert finding.message.endswith("(only with the user's choice of $USE_MUON, $FORCE_ADAMW)")
    (finding,) = ofl204(BACKBONES.replace('backbone="MoE-30B"', 'backbone="dense-4b"'))
    assert finding.severity == Severity.WARNING
    (finding,) = ofl204(BACKBONES.replace('os.environ.get("USE_MUON", "0") != "1"',
                                          'os.environ.get("OPTIMIZER") not in ("muon", "dist_muon")'))
    assert finding.message.endswith("(only with the user's choice of $OPTIMIZER, $FORCE_ADAMW)")
    # nothing but the table decides: the MoE backbone takes AdamW, the dense one Muon, whatever the environment
    assert ofl204(BACKBONES.replace('os.environ.get("USE_MUON", "0") != "1" and (is_moe or os.getenv("FORCE_ADAMW") == "1")',
                                    "is_moe")) == []
    (finding,) = ofl204(BACKBONES.replace('os.environ.get("USE_MUON", "0") != "1" and (is_moe or os.getenv("FORCE_ADAMW") == "1")',
                                          "is_moe").replace('backbone="MoE-30B"', 'backbone="dense-4b"'))
    assert finding.severity == Severity.ERROR and "only with" not in finding.message


def test_a_branch_and_a_value_read_the_same_test_alike(tmp_path, monkeypatch):
    """The test of a branch and a test assigned as a value take the same operands as the user's choice: a literal
    tuple beside an environment read (`in ("muon", "dist_muon")`) left the branch an error while the same test,
    assigned first, was a warning; a table's item beside a flag neither decides the branch."""
    def ofl204(condition: str) -> list:
        text = BACKBONES.replace('    if adamw:\n', f'    if {condition}:\n')
        return [f for f in _check(_tree(tmp_path, {"recipes.py": text}), monkeypatch) if f.code == "OFL204"]

    for condition in ('os.environ.get("OPTIMIZER") not in ("muon", "dist_muon")',
                      'os.environ.get("OPTIMIZER") not in ["muon", "dist_muon"]',
                      'os.environ["OPTIMIZER"] != "muon"'):
        (finding,) = ofl204(condition)
        assert finding.severity == Severity.WARNING, condition
        assert finding.message.endswith("(only with the user's choice of $OPTIMIZER)"), condition
    # the table's row (known) beside the environment: still the environment's choice alone
    (finding,) = ofl204('_BACKBONES["dense-4b"]["is_moe"] or os.getenv("FORCE_ADAMW") == "1"')
    assert finding.message.endswith("(only with the user's choice of $FORCE_ADAMW)")
    # a call among the operands is not run to know the test: the rule's own severity
    (finding,) = ofl204('os.environ.get("OPTIMIZER") not in allowed_optimizers()')
    assert finding.severity == Severity.ERROR and "only with" not in finding.message


def test_a_branch_on_something_else_than_user_input_keeps_its_severity(tmp_path, monkeypatch):
    text = ("def recipe_config(fast):\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
            "                          ddp=DistributedDataParallelConfig())\n"
            "    cfg.model.recompute_granularity = 'full'\n"
            "    if fast:\n"
            "        cfg.model.cpu_offloading = True\n"
            "    return cfg\n")
    findings = _check(_tree(tmp_path, {"recipes.py": text}), monkeypatch)
    (finding,) = [f for f in findings if f.code == "OFL103"]
    assert finding.severity == Severity.ERROR and "on the path where `if fast`" in finding.message


def test_a_helper_given_its_config_is_checked_through_its_callers():
    text = ("def apply_flex_dispatcher_backend(model_cfg, backend=None):\n"
            "    model_cfg.cpu_offloading = True\n"
            "    model_cfg.recompute_granularity = 'full'\n"
            "def recipe_config():\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
            "                          ddp=DistributedDataParallelConfig())\n"
            "    apply_flex_dispatcher_backend(cfg.model)\n"
            "    return cfg\n")
    units = {u.name: u for u in read_python("r.py", text)}
    assert "parameter `model_cfg`" in units["apply_flex_dispatcher_backend"].checked_through_callers
    assert not units["recipe_config"].checked_through_callers
    from offlint.engine import check_unit
    from offlint.rules import load_rules

    rules = list(load_rules().values())
    assert not [f for f in check_unit(resolve(units["apply_flex_dispatcher_backend"], V), rules, strict=True)
                if f.code == "OFL103"]
    (finding,) = [f for f in check_unit(resolve(units["recipe_config"], V), rules, strict=False)
                  if f.code == "OFL103"]
    assert finding.location.line == 2 and finding.unit == "recipe_config"


# ---- --strict: not applicable, and master switches nothing sets ----------------------------------------------


def _possible(text: str, name: str = "r.py") -> list:
    from offlint.engine import check_unit
    from offlint.rules import load_rules

    rules = list(load_rules().values())
    return [f for u in read_python(name, text) for f in check_unit(resolve(u, V), rules, strict=True)
            if f.possible]


def test_a_section_the_unit_never_builds_gives_no_possible_findings():
    text = ("def adam_optimizer(lr=3e-4):\n"
            "    return OptimizerConfig(optimizer='adam', lr=lr, use_distributed_optimizer=True)\n")
    possible = _possible(text)
    assert not [f for f in possible if "model." in f.message or "ddp." in f.message], possible
    assert possible == []


def test_a_master_switch_unknown_only_from_an_unfollowed_call_keeps_its_default():
    text = ("def qwen_pretrain_config():\n"
            "    cfg = ConfigContainer(model=None, optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
            "    cfg.model = build_provider_from_somewhere()\n"
            "    cfg.model.recompute_granularity = 'full'\n"
            "    cfg.model.cuda_graph_impl = 'transformer_engine'\n"
            "    return cfg\n")
    assert not [f for f in _possible(text) if f.code in ("OFL103", "OFL104", "OFL209", "OFL202")]


def test_a_master_switch_some_code_sets_to_an_unreadable_value_stays_possible():
    text = ("def qwen_pretrain_config(offload_layers=None):\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
            "                          ddp=DistributedDataParallelConfig())\n"
            "    cfg.model.recompute_granularity = 'full'\n"
            "    cfg.model.cpu_offloading = offload_layers > 0\n"
            "    return cfg\n")
    assert [f for f in _possible(text) if f.code == "OFL103"]


def test_a_key_a_branch_leaves_unset_on_an_unknown_base_keeps_its_default():
    text = ("def main(hf_path=None):\n"
            "    cfg = ConfigContainer(model=None, optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
            "    cfg.model = load_provider(hf_path)\n"
            "    if hf_path:\n"
            "        cfg.model.fine_grained_activation_offloading = False\n"
            "        cfg.model.offload_modules = None\n"
            "    return cfg\n")
    assert not [f for f in _possible(text) if f.code in ("OFL107", "OFL110", "OFL111", "OFL112", "OFL202")]
