"""recipe-patterns.md section 7, patterns 1-17: each resolved from fixtures/patterns, value and provenance asserted."""

from pathlib import Path

import pytest

from offlint.units import load_unit

TREE = Path(__file__).resolve().parent.parent / "fixtures" / "patterns"
RECIPES = "bridge/recipes/llama.py"


@pytest.fixture(autouse=True)
def _in_tree(monkeypatch):
    monkeypatch.chdir(TREE)


def value(path, recipe, key, version="0.20.0"):
    resolved = load_unit(path, recipe=recipe, root=TREE, mcore_version=version).resolved
    return resolved.get(key)


def where(v):
    return f"{v.assignment.location.path}:{v.assignment.location.line}"


def test_1_literal_assignment():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "optimizer.optimizer_offload_fraction")
    assert (v.value, where(v), v.assignment.via) == (0.5, f"{RECIPES}:16", ())


def test_2_env_vars_dict_with_a_spread_of_a_constant_from_another_module():
    spread = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "env.CUDA_DEVICE_MAX_CONNECTIONS")
    assert (spread.value, where(spread)) == ("1", "bridge/recipes/common.py:5")
    explicit = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "env.PYTORCH_CUDA_ALLOC_CONF")
    assert (explicit.value, where(explicit)) == ("expandable_segments:True", f"{RECIPES}:24")


def test_3_inherited_recipe_and_the_alias_layout():
    v = value(RECIPES, "llama3_8b_deterministic_config", "model.tensor_model_parallel_size")
    assert (v.value, where(v)) == (2, f"{RECIPES}:14")
    assert v.assignment.via == (f"via llama3_8b_pretrain_8gpu_config() at {RECIPES}:30",)
    launch = value("launch/train_llama.sh", None, "model.cuda_graph_impl")
    assert (launch.value, where(launch)) == ("transformer_engine", f"{RECIPES}:19")


def test_4_base_builder_and_a_tuple_returned_by_a_helper():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "optimizer.use_distributed_optimizer")
    assert (v.value, where(v)) == (True, "bridge/recipes/common.py:9")
    assert v.assignment.via == ("via _pretrain_common() in bridge/recipes/common.py, called at "
                                "bridge/recipes/llama.py:10", "via _adam_with_cosine() at bridge/recipes/common.py:15")


def test_5_in_place_helper_with_a_branch_decided_by_its_default():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.recompute_granularity")
    assert (v.state, v.value, where(v)) == ("known", None, "bridge/recipes/common.py:29")
    assert v.assignment.via == ("via _benchmark_common() in bridge/recipes/common.py, called at "
                                "bridge/recipes/llama.py:17",)


def test_6_model_sizes_from_the_hugging_face_id():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.num_layers")
    assert (v.value, where(v)) == (32, f"{RECIPES}:12")
    assert v.assignment.via == ("sizes of meta-llama/Llama-3.1-8B from offlint's table of public models",)
    # Keys the Hugging Face config does not map keep the provider's defaults.
    assert value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.cpu_offloading").state == "default"


def test_7_hydra_tokens_in_a_shell_array():
    v = value("launch/train_llama.sh", None, "model.tensor_model_parallel_size")
    assert (v.value, where(v), v.assignment.source.value) == (4, "launch/train_llama.sh:6", "hydra")


def test_8_constructor_keyword_arguments():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "train.micro_batch_size")
    assert (v.value, where(v)) == (1, "bridge/recipes/common.py:20")


@pytest.mark.parametrize("version, modules, scope", [("0.20.0", ["attn"], None), ("0.16.1", None, ["attn"])])
def test_9_library_mutators_by_megatron_core_version(version, modules, scope):
    graph_modules = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.cuda_graph_modules", version)
    graph_scope = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.cuda_graph_scope", version)
    assert (graph_modules.value, graph_scope.value) == (modules, scope)
    assert graph_scope.assignment.via == (f"by set_cuda_graph_modules() at {RECIPES}:20",)
    determinism = value(RECIPES, "llama3_8b_deterministic_config", "env.NCCL_ALGO", version)
    assert (determinism.value, where(determinism)) == ("Ring", f"{RECIPES}:31")


def test_10_shell_export_beats_cfg_env_vars():
    v = value("launch/train_llama.sh", None, "env.PYTORCH_CUDA_ALLOC_CONF")
    assert (v.value, where(v)) == ("expandable_segments:True", "launch/train_llama.sh:3")


def test_11_local_receiver_alias_returned_to_the_caller():
    v = value(RECIPES, "moonlight_16b_config", "model.num_layers")
    assert (v.value, where(v), v.assignment.via) == (27, f"{RECIPES}:40",
                                                     (f"via _moonlight_provider() at {RECIPES}:47",))


def test_12_value_through_a_keyword_only_parameter():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.pipeline_model_parallel_size")
    assert (v.value, where(v)) == (2, "bridge/recipes/common.py:26")


def test_13_conditional_branch_decided_by_the_recipe_default():
    v = value(RECIPES, "llama3_8b_deterministic_config", "optimizer.optimizer_offload_fraction")
    assert (v.value, where(v)) == (1.0, f"{RECIPES}:34")


def test_14_chained_assignment():
    v = value(RECIPES, "llama3_8b_pretrain_8gpu_config", "model.use_te_rng_tracker")
    assert (v.value, where(v)) == (True, f"{RECIPES}:22")


def test_15_nested_yaml_layered_by_config_file():
    v = value("launch/train_llama.sh", None, "optimizer.optimizer_offload_fraction")
    assert (v.value, where(v), v.assignment.source.value) == (0.75, "conf/override.yaml:5", "yaml")


def test_16_performance_script_flags_win_over_hydra_and_carry_their_semantics():
    pp = value("launch/perf_llama.sh", None, "model.pipeline_model_parallel_size")
    assert (pp.value, pp.assignment.via) == (1, ("by -pp",))  # the Hydra token on the same line said 2
    offload = value("launch/perf_llama.sh", None, "model.cpu_offloading")
    layers = value("launch/perf_llama.sh", None, "model.cpu_offloading_num_layers")
    assert (offload.value, layers.value, offload.assignment.text) == (True, 4, "-ol 4")
    recompute = value("launch/perf_llama.sh", None, "model.recompute_granularity")
    assert (recompute.value, recompute.assignment.via) == ("selective", ("by --recompute_modules",))


def test_17_typed_dict_kwargs_with_recommended_kwargs():
    legacy = "bridge/recipes/legacy_llama.py"
    default = value(legacy, "llama3_8b_legacy_config", "model.pipeline_model_parallel_size")
    assert (default.value, default.assignment.via) == (4, (f"via _llama_common() at {legacy}:26",))
    user = value(legacy, "llama3_8b_legacy_offload_config", "model.cpu_offloading")
    assert (user.value, user.assignment.via) == (True, (f"via llama3_8b_legacy_config() at {legacy}:30",
                                                        f"via _llama_common() at {legacy}:26"))


def test_17_workload_dataclass_constants_and_replace():
    workloads = "bridge/perf/workloads.py"
    v = value(workloads, "llama3_8b_h100_perf_config", "model.cpu_offloading_num_layers")
    assert (v.value, where(v), v.assignment.via) == (2, f"{workloads}:23",
                                                     (f"via set_workload_base_configs() at {workloads}:30",
                                                      f"from replace(...) at {workloads}:16"))
    layout = value(workloads, "llama3_8b_h100_perf_config", "model.pipeline_model_parallel_size")
    assert layout.assignment.via == (f"via set_workload_base_configs() at {workloads}:30",
                                     f"from replace(...) at {workloads}:16",
                                     f"from WorkloadBaseConfig(...) at {workloads}:15")


def test_3_a_launch_by_a_legacy_alias_runs_the_real_recipe():
    v = value("launch/train_alias.sh", None, "optimizer.optimizer_offload_fraction")
    assert (v.value, where(v)) == (0.5, f"{RECIPES}:16")


@pytest.mark.slow
def test_3_alias_linking_in_a_whole_tree_check():
    """Linked through the alias, the command's cpu_offloading=true meets the recipe's PP=2 (OFL102)."""
    from offlint.api import CheckOptions, check

    result = check(["."], CheckOptions(root=TREE, cache=False, select=["OFL102"]))
    assert not result.errors
    [finding] = [f for f in result.findings if f.location.path == "launch/train_alias.sh"]
    assert "--recipe llama3_8b_pretrain_config" in finding.unit
    assert [f"{r.location.path}:{r.location.line}" for r in finding.related] == ["bridge/recipes/common.py:26"]
