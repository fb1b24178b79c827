"""Issue 14, D1 and two message defects, in the shapes Megatron Bridge writes them (fixtures/launch_env).

OFL301 must never advise `expandable_segments:True` where it breaks the run (NCCL user buffers) or where the
project opted out on purpose (Megatron-FSDP), and under CUDA graphs its fix must name NCCL_GRAPH_REGISTER=0,
without which megatron-core asserts. OFL208 names only the settings that are really ignored; OFL213 reports
`recompute_modules` without selective recompute, and OFL002 says so instead of claiming a crash. The environment
the performance launcher builds (its executor plugin, read from the tree) is the launch's environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.units import load_unit

TREE = Path(__file__).resolve().parent.parent / "fixtures" / "launch_env"


@pytest.fixture(scope="module")
def findings():
    result = check([str(TREE)], CheckOptions(mcore_version="0.20.0", root=TREE, strict=True))
    assert not result.errors, result.errors
    return result.findings


def of(findings, code: str, unit: str, possible: bool | None = None):
    return [f for f in findings if f.code == code and f.unit == unit
            and (possible is None or f.possible == possible)]


@pytest.mark.parametrize("unit", ["moe_pretrain_8gpu_gb300_bf16_config",  # ddp.nccl_ub from a shared helper
                                  "dense_pretrain_64gpu_gb200_bf16_config",  # Megatron-FSDP
                                  "moe_pretrain_8gpu_b200_bf16_config"])  # graphs, both variables set
def test_no_allocator_advice_where_it_breaks_or_is_set(findings, unit):
    assert of(findings, "OFL301", unit) == []  # not even a possible finding under --strict: the values are known


def test_cuda_graphs_the_fix_names_the_partner_variable(findings):
    (finding,) = of(findings, "OFL301", "moe_pretrain_8gpu_h100_bf16_config")
    assert not finding.possible
    assert "NCCL_GRAPH_REGISTER=0" in finding.fix and "expandable_segments:True" in finding.fix
    assert "cuda_graph_impl='transformer_engine'" in finding.message
    # It points where the recipe defines its environment, not at the graph helper it consulted.
    assert (Path(finding.location.path).name, finding.location.line) == ("moe.py", 24)


def test_without_graphs_or_with_the_partner_already_set_the_fix_is_the_allocator_option_alone(findings):
    (plain,) = of(findings, "OFL301", "dense_pretrain_8gpu_h100_bf16_config")
    assert "max_split_size_mb:256" in plain.message
    assert plain.severity.value == "info"  # options the launch chose, perhaps against expandable segments: no gate
    (partnered,) = of(findings, "OFL301", "dense_pretrain_8gpu_b200_bf16_config")  # local graphs, int 0
    for finding in (plain, partnered):
        assert not finding.possible
        assert "expandable_segments:True" in finding.fix and "NCCL_GRAPH_REGISTER" not in finding.fix


def test_every_allocator_advice_is_safe_for_its_unit(findings):
    """Over the whole tree: no OFL301 for a unit with nccl_ub or Megatron-FSDP, and every one under graphs
    names the partner variable."""
    graph_units = {"moe_pretrain_8gpu_h100_bf16_config"}
    reported = {f.unit for f in findings if f.code == "OFL301" and not f.possible}
    assert reported == {"moe_pretrain_8gpu_h100_bf16_config", "dense_pretrain_8gpu_h100_bf16_config",
                        "dense_pretrain_8gpu_b200_bf16_config"}
    for finding in (f for f in findings if f.code == "OFL301" and not f.possible):
        assert ("NCCL_GRAPH_REGISTER=0" in finding.fix) == (finding.unit in graph_units)


def test_megatron_lm_flags_nccl_user_buffers_and_graphs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "pretrain.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --use-nccl-ub\n"
                      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --cuda-graph-impl local\n")
    result = check([script.name], CheckOptions(select=["OFL301"], mcore_version="0.16.1", root=tmp_path,
                                               strict=True))
    (finding,) = result.findings
    assert finding.location.line == 2 and "NCCL_GRAPH_REGISTER=0" in finding.fix


def test_precision_aware_message_lists_only_ignored_settings(findings):
    (finding,) = [f for f in findings if f.code == "OFL208" and not f.possible]
    assert "exp_avg_dtype=bf16, exp_avg_sq_dtype=bf16, main_params_dtype=fp16:" in finding.message
    assert "store_param_remainders" not in finding.message  # True, the default: what the fix says to keep


def test_recompute_modules_without_selective(findings):
    (finding,) = of(findings, "OFL213", "moe_pretrain_config_gb200", possible=False)
    assert "recompute_granularity is never set" in finding.message and "layernorm, moe_act" in finding.message
    assert (Path(finding.location.path).name, finding.location.line) == ("moe_workloads.py", 6)
    assert of(findings, "OFL213", "moe_pretrain_config_b200") == []  # selective
    assert of(findings, "OFL213", "moe_pretrain_config_b300") == []  # granularity set to None on purpose


def _override_findings(tmp_path, text: str):
    path = tmp_path / "override.yaml"
    path.write_text(text)
    result = check([str(path)], CheckOptions(select=["OFL002"], mcore_version="0.20.0", root=tmp_path))
    assert not result.errors
    return result.findings


def test_scalar_recompute_modules_message_when_megatron_core_never_reads_it(tmp_path):
    (inert,) = _override_findings(tmp_path, "model:\n  recompute_granularity: full\n  recompute_method: block\n"
                                            "  recompute_num_layers: 2\n  recompute_modules: core_attn\n")
    assert inert.severity.value == "warning"
    assert "does nothing now" in inert.message and "iterates" not in inert.message
    (read,) = _override_findings(tmp_path, "model:\n  recompute_granularity: selective\n"
                                           "  recompute_modules: core_attn\n")
    assert read.severity.value == "error" and "iterates the characters" in read.message


# ---- the performance launcher's environment (clarifications: executor.env_vars in perf_plugins.py) ---------


def launch_env(line: int, root: Path = TREE, script: str = "launch/perf_sweep.sh"):
    resolved = load_unit(str(root / script), recipe=f"setup_experiment.py at line {line}", mcore_version="0.20.0",
                         root=root).resolved
    return {key: (resolved.get(f"env.{key}").state, resolved.get(f"env.{key}").value)
            for key in ("PYTORCH_CUDA_ALLOC_CONF", "NCCL_GRAPH_REGISTER", "NVTE_NORM_FWD_USE_CUDNN",
                        "CUDA_DEVICE_MAX_CONNECTIONS", "TORCH_NCCL_HIGH_PRIORITY")}


def test_the_launcher_environment_is_read_per_workload(monkeypatch):
    monkeypatch.chdir(TREE)
    moe_h100 = launch_env(3)  # the plugin's branch for this family, recipe, GPU and precision
    assert moe_h100["PYTORCH_CUDA_ALLOC_CONF"] == ("known", "expandable_segments:True")
    assert moe_h100["NCCL_GRAPH_REGISTER"] == ("known", "0")
    assert moe_h100["NVTE_NORM_FWD_USE_CUDNN"][0] == "default"  # popped by the plugin
    assert moe_h100["TORCH_NCCL_HIGH_PRIORITY"] == ("known", "1")  # PERF_ENV_VARS, utils/executors.py
    assert moe_h100["CUDA_DEVICE_MAX_CONNECTIONS"][0] == "unknown"  # depends on the workload's TP size
    moe_b200 = launch_env(4)  # no branch sets the allocator: known to be unset
    assert moe_b200["PYTORCH_CUDA_ALLOC_CONF"] == ("default", None)
    dense = launch_env(5)  # -c and --task at their argparse defaults (bf16, pretrain)
    assert dense["PYTORCH_CUDA_ALLOC_CONF"] == ("known", "expandable_segments:True")
    assert dense["NVTE_NORM_FWD_USE_CUDNN"] == ("known", "1")
    own = launch_env(6)  # the launch adds variables of its own (-ce): nothing is known
    assert {state for state, _ in own.values()} == {"unknown"}


def test_a_launch_the_launcher_leaves_without_the_allocator_option_is_judged(findings):
    """The environment is known now; the verdict waits only for the workload's own settings."""
    possible = [f for f in findings if f.code == "OFL301" and f.unit == "setup_experiment.py at line 4"]
    assert possible  # one per check (with and without CUDA graphs) that the workload could take
    for finding in possible:
        assert finding.possible and "PYTORCH_CUDA_ALLOC_CONF unset" in finding.message
        unknown = finding.message.split("depends on unknown values:", 1)[1]
        assert "ddp.nccl_ub" in unknown and "env." not in unknown
        # the keys one reason leaves unknown are named together, the reason once
        assert unknown.count("set by the recipe this command runs") == 1, unknown
        assert "ddp.nccl_ub, ddp.use_megatron_fsdp, " in unknown, unknown
    assert not [f for f in findings if f.code == "OFL301" and f.unit in ("setup_experiment.py at line 3",
                                                                        "setup_experiment.py at line 5")]


def _copy_tree(tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "tree"
    shutil.copytree(TREE, target)
    (target / ".git").mkdir()  # its own project
    return target


def test_no_launcher_environment_when_the_launcher_also_takes_the_recipes(tmp_path, monkeypatch):
    tree = _copy_tree(tmp_path)
    (tree / "scripts" / "performance" / "run_recipe.py").write_text(
        "def apply(recipe, environ):\n    for name, value in recipe.env_vars.items():\n"
        "        environ[name] = str(value)\n")
    monkeypatch.chdir(tree)
    assert launch_env(3, root=tree)["PYTORCH_CUDA_ALLOC_CONF"][0] == "unknown"


def test_only_the_script_that_builds_the_executor_gets_its_environment(tmp_path, monkeypatch):
    tree = _copy_tree(tmp_path)
    (tree / "launch" / "in_job.sh").write_text(
        "python scripts/performance/run_script.py -m moe -mr moe_16b -g h100 -c fp8_cs -ng 16\n")
    monkeypatch.chdir(tree)
    resolved = load_unit(str(tree / "launch" / "in_job.sh"), mcore_version="0.20.0", root=tree).resolved
    assert resolved.get("env.PYTORCH_CUDA_ALLOC_CONF").state == "unknown"


def test_an_environment_change_the_reader_does_not_model_makes_every_variable_unknown(tmp_path, monkeypatch):
    tree = _copy_tree(tmp_path)
    plugins = tree / "scripts" / "performance" / "perf_plugins.py"
    plugins.write_text(plugins.read_text().replace(
        "        keep_cudnn_norm = family == \"dense\"\n",
        "        executor.env_vars.update(extra_env_for(family))\n        keep_cudnn_norm = family == \"dense\"\n"))
    monkeypatch.chdir(tree)
    assert {state for state, _ in launch_env(4, root=tree).values()} == {"unknown"}


def test_a_plugin_too_large_to_run_leaves_the_environment_unknown(tmp_path, monkeypatch):
    """Hostile input stays linear: nested loops over long literals stop at the step budget."""
    tree = _copy_tree(tmp_path)
    plugins = tree / "scripts" / "performance" / "perf_plugins.py"
    items = ", ".join(["0"] * 3000)
    plugins.write_text(plugins.read_text().replace(
        "        keep_cudnn_norm = family == \"dense\"\n",
        f"        for a in ({items}):\n            for b in ({items}):\n"
        "                executor.env_vars[\"X\"] = \"1\"\n        keep_cudnn_norm = family == \"dense\"\n"))
    monkeypatch.chdir(tree)
    assert {state for state, _ in launch_env(4, root=tree).values()} == {"unknown"}


# ---- the launch's own variables (-ce A=1,B=2; -E K=V), Bridge's argument_parser.py types --------------------

_OWN_FLAGS = (
    'def to_dict(arg):\n    return dict(item.split("=") for item in arg.split(","))\n\n\n'
    'def parse_kv(s):\n    key, value = s.split("=", 1)\n    return key, value\n\n\n')


def _own_flags_tree(tmp_path: Path, launches: str) -> Path:
    tree = _copy_tree(tmp_path)
    parser = tree / "scripts" / "performance" / "argument_parser.py"
    text = parser.read_text().replace("def parse_cli_args():", _OWN_FLAGS + "def parse_cli_args():")
    parser.write_text(text.replace(
        'parser.add_argument("-ce", "--custom_env_vars", type=str, default={})',
        'parser.add_argument("-ce", "--custom_env_vars", type=to_dict, default={})\n'
        '    parser.add_argument("-E", "--env", action="append", type=parse_kv)\n'
        '    parser.add_argument("--dump_env", action="store_true")'))
    (tree / "launch" / "own.sh").write_text("#!/bin/bash\n" + launches)
    return tree


def _own_env(tree: Path, line: int, *names: str) -> dict:
    resolved = load_unit(str(tree / "launch" / "own.sh"), recipe=f"setup_experiment.py at line {line}",
                         mcore_version="0.20.0", root=tree).resolved
    return {name: (resolved.get(f"env.{name}").state, resolved.get(f"env.{name}").value) for name in names}


def test_the_launchs_own_variables_join_the_launchers_environment(tmp_path, monkeypatch):
    tree = _own_flags_tree(tmp_path, "python scripts/performance/setup_experiment.py -m moe -mr moe_16b -g h100 "
                                     "-c fp8_cs -ng 16 -ce A=1,B=2 -E NVTE_CPU_OFFLOAD_V1=1 -E A=3\n")
    monkeypatch.chdir(tree)
    env = _own_env(tree, 2, "A", "B", "NVTE_CPU_OFFLOAD_V1", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_NCCL_HIGH_PRIORITY")
    assert env["A"] == ("known", "3")  # -E over -ce, as setup_experiment.py merges them
    assert env["B"] == ("known", "2") and env["NVTE_CPU_OFFLOAD_V1"] == ("known", "1")
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == ("known", "expandable_segments:True")  # the plugin still runs
    assert env["TORCH_NCCL_HIGH_PRIORITY"] == ("known", "1")


def test_the_launchs_own_variables_reach_the_job_where_the_recipe_gives_the_rest(tmp_path, monkeypatch):
    """Bridge from 2026-07: the launcher takes the recipe's env_vars and exports only the launch's own (-E): a false
    OFL112 error said NVTE_CPU_OFFLOAD_V1 was unset on such a launch (Bridge PR 4824's DeepSeek-V4 launch)."""
    tree = _own_flags_tree(tmp_path, "python scripts/performance/setup_experiment.py -m moe -mr moe_16b -g h100 "
                                     "-ng 16 -E NVTE_CPU_OFFLOAD_V1=1 --dump_env\n"
                                     "python scripts/performance/setup_experiment.py -m moe -mr moe_16b -g h100 "
                                     "-ng 16 -E NVTE_CPU_OFFLOAD_V1\n"
                                     "python -u -m scripts.performance.setup_experiment -m moe -mr moe_16b -g h100 "
                                     "-ng 16 -E NVTE_CPU_OFFLOAD_V1=1\n")
    (tree / "scripts" / "performance" / "run_recipe.py").write_text(
        "def apply(recipe, environ):\n    for name, value in recipe.env_vars.items():\n"
        "        environ[name] = str(value)\n")
    monkeypatch.chdir(tree)
    # (--dump_env only names the environment: it adds nothing)
    assert _own_env(tree, 2, "NVTE_CPU_OFFLOAD_V1")["NVTE_CPU_OFFLOAD_V1"] == ("known", "1")
    # a value the parser's type refuses: what the launch exports is not known
    assert _own_env(tree, 3, "NVTE_CPU_OFFLOAD_V1")["NVTE_CPU_OFFLOAD_V1"][0] == "unknown"
    # the launcher run as a module (`python -m scripts.performance.setup_experiment`, PR 4824's launch script)
    assert _own_env(tree, 4, "NVTE_CPU_OFFLOAD_V1")["NVTE_CPU_OFFLOAD_V1"] == ("known", "1")

