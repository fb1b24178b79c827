"""Launches of the performance entry scripts are read from the scripts in the tree (perf_scripts): the tree's
argument parser binds the flags, its selection code names the recipe the launch builds, and its
`set_user_overrides` gives the flags their meaning; without the scripts, the built-in model applies.

The trees are written here in the shapes Megatron Bridge uses (fixtures of our own, not Bridge code): the same
launch, `-pp 2 -ol 0`, crashes when the tree's `_set_recompute_overrides` tests `is not None` (Bridge before
3853c34cf) and is fine when it tests `> 0`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from offlint.units import load_unit

ARGUMENT_PARSER = '''\
import argparse

VALID_SCOPES = ["attn", "mlp", "moe", "full_iteration"]

NUM_GPUS_PER_NODE_MAP = {"h100": 8, "gb200": 4}


def list_of_strings(arg):
    return arg.split(",")


def bool_arg(arg):
    if arg.lower() in ["true", "1", "yes"]:
        return True
    elif arg.lower() in ["false", "0", "no"]:
        return False
    raise ValueError(arg)


def scope_list(arg):
    scopes = arg.split(",")
    if all(s in VALID_SCOPES for s in scopes):
        return scopes
    raise ValueError(arg)


def parse_cli_args():
    parser = argparse.ArgumentParser(argument_default=None)
    parser.add_argument("-m", "--model_family_name", type=str, required=True)
    parser.add_argument("-mr", "--model_recipe_name", type=str, required=True)
    parser.add_argument("-ng", "--num_gpus", type=int, required=True)
    parser.add_argument("-g", "--gpu", type=str, required=True)
    parser.add_argument("-gn", "--gpus_per_node", type=int, default=None)
    parser.add_argument("-c", "--compute_dtype", type=str, default="bf16")
    parser.add_argument("--task", default="pretrain")
    _parallelism(parser)
    return parser


def _parallelism(parser):
    group = parser.add_argument_group("performance")
    group.add_argument("-pp", "--pipeline_model_parallel_size", type=int)
    group.add_argument("-vp", "--virtual_pipeline_model_parallel_size",
                       type=lambda x: None if x == "None" else int(x), default=-1)
    group.add_argument("-ol", "--activation_offload_layers", type=int)
    group.add_argument("-rl", "--recompute_num_layers", type=int)
    group.add_argument("--recompute_modules", type=list_of_strings)
    group.add_argument("--cuda_graph_scope", type=scope_list)
    group.add_argument("--use_megatron_fsdp", type=bool_arg, default=False)
    group.add_argument("--dryrun", action="store_true")
'''

OVERRIDES = '''\
def _set_recompute_overrides(recipe, cpu_offloading_num_layers=None, recompute_num_layers=None,
                             recompute_modules=None):
    if cpu_offloading_num_layers is not None{guard}:
        recipe.model.cpu_offloading = True
        recipe.model.cpu_offloading_weights = False
        recipe.model.cpu_offloading_num_layers = cpu_offloading_num_layers
    if recompute_num_layers is not None:
        recipe.model.recompute_granularity = "full"
        recipe.model.recompute_method = "block"
        recipe.model.recompute_num_layers = recompute_num_layers
    if recompute_modules is not None:
        recipe.model.recompute_modules = recompute_modules
        recipe.model.recompute_granularity = "selective"
    return recipe


def set_user_overrides(recipe, args):
    if args.use_megatron_fsdp:
        recipe.ddp.use_megatron_fsdp = True
    _set_recompute_overrides(recipe, cpu_offloading_num_layers=args.activation_offload_layers,
                             recompute_num_layers=args.recompute_num_layers,
                             recompute_modules=args.recompute_modules)
    if args.pipeline_model_parallel_size is not None:
        recipe.model.pipeline_model_parallel_size = args.pipeline_model_parallel_size
    if args.virtual_pipeline_model_parallel_size != -1:
        recipe.model.virtual_pipeline_model_parallel_size = args.virtual_pipeline_model_parallel_size
    if recipe.ddp.use_megatron_fsdp:
        recipe.ddp.average_in_collective = False
    recipe.logger.log_interval = 1
    return recipe
'''

UTILS = '''\
import importlib

_PRECISIONS = {"bf16": "bf16", "fp8_cs": "fp8cs"}


def _recipe_function_name(*, model_recipe_name, task, num_gpus, gpu, precision):
    precision_name = _PRECISIONS.get(precision.lower(), precision.lower().replace("_", ""))
    return f"{model_recipe_name}_{task}_{num_gpus}gpu_{gpu}_{precision_name}_config"


def get_perf_recipe_by_name(model_recipe_name, task, num_gpus, gpu, precision):
    name = _recipe_function_name(model_recipe_name=model_recipe_name, task=task, num_gpus=num_gpus, gpu=gpu,
                                 precision=precision)
    module = importlib.import_module("megatron.bridge.perf_recipes")
    return getattr(module, name)()
'''

RUN_SCRIPT = '''\
from argument_parser import parse_cli_args
from utils.utils import get_perf_recipe_by_name

from megatron.bridge.training.pretrain import pretrain


def _prepare(args, cli_overrides):
    from utils.overrides import set_user_overrides

    recipe = get_perf_recipe_by_name(model_recipe_name=args.model_recipe_name, task=args.task,
                                     num_gpus=args.num_gpus, gpu=args.gpu, precision=args.compute_dtype)
    return set_user_overrides(recipe, args)


def main():
    args, cli_overrides = parse_cli_args().parse_known_args()
    pretrain(config=_prepare(args, cli_overrides), forward_step_func=None)
'''

SETUP_EXPERIMENT = '''\
from argument_parser import parse_cli_args


def main():
    args, unknown = parse_cli_args().parse_known_args()
    run_script_on_cluster("run_script.py", args, unknown)
'''

PERF_RECIPES = '''\
def llama3_8b_pretrain_8gpu_h100_bf16_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, hidden_size=4096, num_attention_heads=32),
                          optimizer=OptimizerConfig(use_distributed_optimizer=True),
                          ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.recompute_granularity = None
    cfg.env_vars = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    return cfg


def llama3_8b_pretrain_16gpu_h100_bf16_config():
    cfg = llama3_8b_pretrain_8gpu_h100_bf16_config()
    cfg.model.tensor_model_parallel_size = 2
    return cfg
'''

LAUNCH = '''\
#!/bin/bash
python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g h100 -c bf16 -ng 8 -pp 2 -ol 0
python scripts/performance/run_script.py --model_family_name llama --model_recipe_name llama3_8b -g h100 \\
    -ng 16 --recompute_modules core_attn,mlp --use_megatron_fsdp=true model.recompute_granularity=full
python scripts/performance/setup_experiment.py --model llama3-8b --moe_a2a_overlap
'''


def write_tree(root, guard: str):
    perf = root / "scripts" / "performance"
    (perf / "utils").mkdir(parents=True)
    (perf / "argument_parser.py").write_text(ARGUMENT_PARSER)
    (perf / "utils" / "overrides.py").write_text(OVERRIDES.format(guard=guard))
    (perf / "utils" / "utils.py").write_text(UTILS)
    (perf / "run_script.py").write_text(RUN_SCRIPT)
    (perf / "setup_experiment.py").write_text(SETUP_EXPERIMENT)
    recipes = root / "src" / "megatron" / "bridge" / "perf_recipes" / "llama" / "h100"
    recipes.mkdir(parents=True)
    (recipes / "llama3.py").write_text(PERF_RECIPES)
    (root / "launch").mkdir()
    (root / "launch" / "perf.sh").write_text(LAUNCH)
    (root / "pyproject.toml").write_text("")


@pytest.fixture()
def parent(tmp_path, monkeypatch):
    """The tree before the fix: any `-ol N` that is given turns CPU offloading on, 0 included."""
    write_tree(tmp_path, "")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture()
def fixed(tmp_path, monkeypatch):
    write_tree(tmp_path, " and cpu_offloading_num_layers > 0")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def launch(line: int):
    return load_unit("launch/perf.sh", f"setup_experiment.py at line {line}" if line != 3 else
                     "run_script.py at line 3", mcore_version="0.20.0").resolved


def check(*args) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "offlint", "check", *args, "--output-format", "json",
                           "--mcore-version", "0.20.0", "--no-cache"], capture_output=True, text=True, timeout=300)
    return json.loads(done.stdout)


def test_the_flags_mean_what_the_trees_overrides_say(parent):
    unit = launch(2)
    offload = unit.get("model.cpu_offloading")
    assert offload.value is True  # `-ol 0` turns it on in this tree
    assert offload.assignment.location.line == 2 and offload.assignment.text == "True"
    assert offload.assignment.via[0] == "by `-ol 0`"
    assert "scripts/performance/utils/overrides.py:4" in offload.assignment.via[1]
    assert unit.get("model.cpu_offloading_num_layers").value == 0
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    found = {(f["code"], f["filename"]) for f in check("launch/perf.sh")}
    assert ("OFL102", "launch/perf.sh") in found


def test_the_fixed_tree_gives_the_same_launch_no_offloading(fixed):
    unit = launch(2)
    assert unit.get("model.cpu_offloading").state == "default"
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    assert not [f for f in check("launch/perf.sh") if f["code"] in ("OFL102", "OFL210")]


def test_the_launch_is_linked_to_the_recipe_the_trees_selection_names(fixed):
    unit = launch(2)
    assert unit.unit.name == ("setup_experiment.py at line 2 (recipe llama3_8b_pretrain_8gpu_h100_bf16_config, "
                              "chosen by the performance scripts)")
    assert unit.get("model.num_layers").value == 32  # from the recipe
    assert unit.get("env.PYTORCH_CUDA_ALLOC_CONF").value == "expandable_segments:True"
    other = launch(3)
    assert "llama3_8b_pretrain_16gpu_h100_bf16_config" in other.unit.name
    assert other.get("model.tensor_model_parallel_size").value == 2


def test_flag_types_defaults_and_the_recipes_own_values_are_read_from_the_tree(fixed):
    unit = launch(3)
    # list_of_strings and bool_arg are the tree's own converters; the flags win over the Hydra override.
    assert unit.get("model.recompute_modules").value == ["core_attn", "mlp"]
    assert unit.get("model.recompute_granularity").value == "selective"
    assert unit.get("ddp.use_megatron_fsdp").value is True
    assert unit.get("ddp.average_in_collective").value is False  # decided on the recipe's config
    # -vp not given: its default -1 means "keep the recipe's"; no write happens.
    assert unit.get("model.virtual_pipeline_model_parallel_size").assignment is None or \
        unit.get("model.virtual_pipeline_model_parallel_size").assignment.source.value != "perf"


def test_a_command_the_parser_refuses_builds_no_recipe_and_launches_nothing(fixed):
    """argparse exits before anything runs: no job, so no training environment for OFL301 to judge (a skill card
    in two Bridge forks gave `setup_experiment.py --model qwen3-30b-a3b --moe_a2a_overlap` a possible OFL301)."""
    unit = launch(5)
    assert unit.unit.recipe == ""
    assert "refuses this command" in unit.get("model.num_layers").value.reason
    assert not unit.unit.launches_training


def test_without_the_scripts_the_built_in_model_applies(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "perf.sh").write_text("python run_script.py -m llama -mr llama3_8b -g h100 -ng 8 -pp 2 -ol 0\n")
    monkeypatch.chdir(tmp_path)
    unit = load_unit("perf.sh", mcore_version="0.20.0").resolved
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    assert unit.get("model.cpu_offloading").is_unknown  # today's scripts: -ol 0 sets nothing; the recipe decides


def test_the_bisect_lint_probe_judges_each_commit_by_its_own_scripts(tmp_path, monkeypatch):
    """`offlint bisect --probe lint` reads each commit's tree: the same launch is a crash at the parent and
    passes at the fix."""
    from offlint.bisect.child import lint_verdict

    verdicts = {}
    for name, guard in (("parent", ""), ("fixed", " and cpu_offloading_num_layers > 0")):
        root = tmp_path / name
        root.mkdir()
        write_tree(root, guard)
        monkeypatch.chdir(root)
        (root / "launch" / "one.sh").write_text("python scripts/performance/setup_experiment.py -m llama "
                                                "-mr llama3_8b -g h100 -ng 8 -pp 2 -ol 0\n")
        verdicts[name] = lint_verdict("launch/one.sh", None, [], ["OFL102"], root)
    assert verdicts["parent"]["outcome"] == "crash" and verdicts["parent"]["rules"] == ["OFL102"]
    assert verdicts["fixed"]["outcome"] == "pass"


LEGACY_UTILS = '''\
import importlib


def get_perf_optimized_recipe(model_family_name, model_recipe_name, train_task, gpu, compute_dtype):
    module = importlib.import_module(f"configs.{model_family_name}")
    recipe_builder = getattr(module, f"{model_recipe_name}_{train_task}_config_{gpu}")
    return recipe_builder(precision=compute_dtype)
'''

LEGACY_RUN_SCRIPT = '''\
from argument_parser import parse_cli_args
from utils.overrides import set_user_overrides
from utils.utils import get_perf_optimized_recipe


def main():
    args, cli_overrides = parse_cli_args().parse_known_args()
    recipe = get_perf_optimized_recipe(model_family_name=args.model_family_name,
                                       model_recipe_name=args.model_recipe_name, train_task=args.task,
                                       gpu=args.gpu, compute_dtype=args.compute_dtype)
    recipe = set_user_overrides(recipe, args)
'''

LEGACY_CONFIGS = '''\
def llama3_8b_pretrain_config_h100(precision: str = "bf16", mock: bool = True):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    if precision == "fp8_cs":
        cfg.model.cuda_graph_impl = "local"
        cfg.model.cuda_graph_modules = "full"
    else:
        cfg.model.cuda_graph_impl = "none"
    return cfg
'''


def test_the_recipe_is_built_with_the_arguments_the_selection_code_passes(tmp_path, monkeypatch):
    """The older layout: `getattr(importlib.import_module(f"configs.{family}"), name)(precision=...)` builds the
    recipe with the launch's precision, so the launch gets the fp8 branch, not the function's default."""
    write_tree(tmp_path, " and cpu_offloading_num_layers > 0")
    perf = tmp_path / "scripts" / "performance"
    (perf / "utils" / "utils.py").write_text(LEGACY_UTILS)
    (perf / "run_script.py").write_text(LEGACY_RUN_SCRIPT)
    (perf / "configs" / "llama").mkdir(parents=True)
    (perf / "configs" / "llama" / "__init__.py").write_text(
        "try:\n    import megatron.bridge\n    HAVE_BRIDGE = True\nexcept ImportError:\n    HAVE_BRIDGE = False\n\n"
        "if HAVE_BRIDGE:\n    from .llama3_llm_pretrain import llama3_8b_pretrain_config_h100\n")
    (perf / "configs" / "llama" / "llama3_llm_pretrain.py").write_text(LEGACY_CONFIGS)
    (tmp_path / "launch" / "fp8.sh").write_text(
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g h100 -c fp8_cs -ng 8\n")
    monkeypatch.chdir(tmp_path)
    unit = load_unit("launch/fp8.sh", mcore_version="0.20.0").resolved
    assert "recipe llama3_8b_pretrain_config_h100" in unit.unit.name
    assert unit.get("model.cuda_graph_impl").value == "local"
    assert unit.get("model.cuda_graph_modules").value == "full"
    assert [f["code"] for f in check("launch/fp8.sh") if f["code"] == "OFL215"] == ["OFL215"]


def test_the_jobs_gpu_count_is_the_launchs_num_gpus_where_it_fills_whole_nodes(fixed):
    # setup_experiment asks for ceil(num_gpus / gpus_per_node) nodes of gpus_per_node tasks: -ng is the world size
    # only where it fills its nodes; gpus_per_node is -gn, else the parser module's table entry for -g.
    assert launch(2).unit.launch_gpus == 8
    assert launch(3).unit.launch_gpus == 16
    (fixed / "launch" / "counts.sh").write_text(
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g h100 -ng 12\n"
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g h100 -ng 12 -gn 4\n"
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g gb200 -ng 12\n"
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -g a100 -ng 8\n")
    counts = [load_unit("launch/counts.sh", f"setup_experiment.py at line {line}",
                        mcore_version="0.20.0").resolved.unit.launch_gpus for line in (1, 2, 3, 4)]
    assert counts == [0, 12, 12, 0]  # 12 on 8-GPU nodes runs 16 tasks; a100 is not in the tree's table


def test_the_memory_estimate_sizes_a_launch_on_its_own_gpu_count(fixed):
    from offlint.estimate.inputs import read_inputs

    resolved = launch(2)
    assert "8gpu" in resolved.unit.name
    named = read_inputs(resolved.get, "llama3_8b_pretrain_4gpu_h100_bf16_config")
    assert (named.parallel.world_size, named.world_size_source) == (4, "the recipe name (4gpu)")
    launched = read_inputs(resolved.get, "llama3_8b_pretrain_4gpu_h100_bf16_config", launch_gpus=16)
    assert (launched.parallel.world_size, launched.world_size_source) == (16, "the launch command")
    given = read_inputs(resolved.get, "llama3_8b_pretrain_4gpu_h100_bf16_config", 32, launch_gpus=16)
    assert (given.parallel.world_size, given.world_size_source) == (32, "--gpus")


def test_a_launch_through_bootstrap_py_is_read_as_the_run_script_it_execs(parent):
    """Bridge's scripts/performance/bootstrap.py parses the same command line, applies the recipe's environment and
    execs run_script.py (run_recipe.py with --use_recipes) with the same arguments; rubin_launch_interactive.sh
    starts jobs with it. Its launches had been read as Hydra overrides only: `-pp 2 -ol 0` went unjudged (a
    seeded-mistake study, session 64, H09)."""
    (parent / "scripts" / "performance" / "bootstrap.py").write_text("import sys\n")
    (parent / "launch" / "boot.sh").write_text(
        "#!/bin/bash\npython scripts/performance/bootstrap.py -m llama -mr llama3_8b -g h100 -c bf16 -ng 8 -pp 2 -ol 0\n")
    found = {(f["code"], f["filename"]) for f in check("launch/boot.sh")}
    assert ("OFL102", "launch/boot.sh") in found
