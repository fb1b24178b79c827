"""The Python reader: which values each recipe sets, from where, through which same-file calls."""

from __future__ import annotations

from offlint.resolve import resolve
from offlint.sources.python import read_python
from offlint.types import Unknown
from offlint.versions import parse_version

V = parse_version("0.20.0")

SOURCE = '''\
from megatron.bridge.recipes.common import _pretrain_common

COMMON = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
PP = 4


def _topology(cfg, *, pipeline_model_parallel_size: int = 1):
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size


def _base():
    return ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(lr=1e-4),
                           ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))


def inherits_unknown():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    return cfg


def helpers_and_spreads():
    cfg = _base()
    _topology(cfg, pipeline_model_parallel_size=PP)
    cfg.rng.te_rng_tracker = cfg.model.use_te_rng_tracker = True
    cfg.env_vars = {**COMMON, "CUDA_DEVICE_MAX_CONNECTIONS": 32}
    return cfg


def branches(kind):
    cfg = _base()
    if kind == "adam":
        cfg.optimizer.optimizer = "adam"
        cfg.model.recompute_granularity = None
    else:
        cfg.optimizer.optimizer = "sgd"
        cfg.model.recompute_granularity = None
    return cfg


def branches_on_a_default(kind="sgd", fast=True):
    cfg = _base()
    cfg.model.recompute_granularity = None
    if kind == "adam" and fast:
        cfg.optimizer.optimizer = "adam"
    elif not fast:
        cfg.optimizer.optimizer = "adamw"
    else:
        cfg.optimizer.optimizer = "sgd"
    return cfg


def local_receivers():
    model_cfg = GPTModelProvider(num_layers=4)
    model_cfg.pipeline_model_parallel_size = 2
    opt_config = OptimizerConfig(optimizer_cpu_offload=True)
    opt_config.optimizer_offload_fraction = 0.5
    return model_cfg, opt_config
'''


def units():
    return {u.name: resolve(u, V) for u in read_python("r.py", SOURCE)}


def test_unresolved_base_builder_makes_unset_keys_unknown():
    unit = units()["inherits_unknown"]
    assert unit.get("model.cpu_offloading").value is True
    pp = unit.get("model.pipeline_model_parallel_size")
    assert pp.is_unknown and "_pretrain_common" in pp.value.reason


def test_same_file_helper_parameter_constant_and_provenance():
    unit = units()["helpers_and_spreads"]
    pp = unit.get("model.pipeline_model_parallel_size")
    assert pp.value == 4 and pp.assignment.location.line == 8
    assert pp.assignment.via == ("via _topology() at r.py:24",)
    assert unit.get("model.num_layers").value == 8  # from _base(), a same-file base builder
    assert unit.get("ddp.use_distributed_optimizer").value is True
    assert unit.get("model.use_te_rng_tracker").value is True  # chained assignment
    assert unit.get("env.PYTORCH_CUDA_ALLOC_CONF").value == "expandable_segments:True"  # ** spread
    assert unit.get("env.CUDA_DEVICE_MAX_CONNECTIONS").value == "32"  # env values are strings
    assert unit.get("env.NVTE_CPU_OFFLOAD_V1").state == "default"  # the environment is known: unset
    assert unit.get("model.cpu_offloading").state == "default" and unit.get("model.cpu_offloading").value is False


def test_branches_agreeing_stay_known_and_disagreeing_become_unknown():
    unit = units()["branches"]
    assert unit.get("model.recompute_granularity").state == "known"
    optimizer = unit.get("optimizer.optimizer")
    assert optimizer.is_unknown and 'if kind == "adam"' in optimizer.value.reason


def test_a_branch_decided_by_literal_parameter_defaults_runs_alone():
    optimizer = units()["branches_on_a_default"].get("optimizer.optimizer")
    assert optimizer.state == "known" and optimizer.value == "sgd" and optimizer.assignment.location.line == 49  # the else branch


def test_local_provider_and_optimizer_receivers():
    unit = units()["local_receivers"]
    assert unit.get("model.pipeline_model_parallel_size").value == 2
    assert unit.get("optimizer.optimizer_offload_fraction").value == 0.5
    assert unit.get("optimizer.optimizer_cpu_offload").value is True


def test_helper_unit_with_parameter_receiver_has_unknown_base():
    unit = units()["_topology"]
    assert unit.get("model.pipeline_model_parallel_size").value == 1  # the parameter default
    assert unit.get("model.cpu_offloading").is_unknown


def test_non_literal_env_vars_make_the_environment_unknown():
    text = "from x import ENV\n\ndef r():\n    cfg = ConfigContainer(model=GPTModelProvider())\n" \
           "    cfg.env_vars = {**ENV}\n    return cfg\n"
    unit = resolve(read_python("r.py", text)[0], V)
    assert isinstance(unit.get("env.PYTORCH_CUDA_ALLOC_CONF").value, Unknown)


def test_env_vars_with_an_unreadable_spread_keep_their_own_entries():
    text = ("from x import ENV\n\ndef r():\n    cfg = ConfigContainer(model=GPTModelProvider())\n"
            "    cfg.env_vars = {**ENV, 'NVTE_CPU_OFFLOAD_V1': 1}\n    return cfg\n")
    unit = resolve(read_python("r.py", text)[0], V)
    assert unit.get("env.NVTE_CPU_OFFLOAD_V1").value == "1"
    assert unit.get("env.PYTORCH_CUDA_ALLOC_CONF").is_unknown


def test_env_vars_spreading_their_own_earlier_value_keep_it():
    # Bridge PR 5554's deepseek_v4 recipe: `cfg.env_vars = {**cfg.env_vars, ...}` over what its parent builder set
    text = ("def base():\n    cfg = ConfigContainer(model=GPTModelProvider())\n"
            "    cfg.env_vars = {'NVTE_CPU_OFFLOAD_V1': '1', 'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}\n"
            "    return cfg\n\n"
            "def r():\n    cfg = base()\n    cfg.env_vars = {**cfg.env_vars, 'CUDA_DEVICE_MAX_CONNECTIONS': '32'}\n"
            "    return cfg\n\n"
            "def fresh():\n    cfg = ConfigContainer(model=GPTModelProvider())\n"
            "    cfg.env_vars = {**cfg.env_vars, 'CUDA_DEVICE_MAX_CONNECTIONS': '32'}\n    return cfg\n")
    units = {u.name: resolve(u, V) for u in read_python("r.py", text)}
    kept = units["r"].get("env.NVTE_CPU_OFFLOAD_V1")
    assert (kept.value, kept.assignment.location.line) == ("1", 3)  # at the place that set it
    assert units["r"].get("env.CUDA_DEVICE_MAX_CONNECTIONS").value == "32"
    assert units["r"].unit.env_known
    # a container never given env_vars holds Bridge's empty default: the rest is known absent
    fresh = units["fresh"]
    assert fresh.unit.env_known and fresh.get("env.NVTE_CPU_OFFLOAD_V1").state != "unknown"


def test_a_receiver_first_seen_inside_an_if_is_conditional():
    text = ("def f(recipe, n):\n    if n is not None and n > 0:\n        recipe.model.cpu_offloading = True\n"
            "    if n is not None:\n        recipe.model.recompute_granularity = 'selective'\n    return recipe\n")
    unit = resolve(read_python("r.py", text)[0], V)
    assert unit.get("model.cpu_offloading").is_unknown and unit.get("model.recompute_granularity").is_unknown
    # With `n=None` as its default, the helper run on its own takes neither branch and configures nothing.
    assert read_python("r.py", text.replace("(recipe, n)", "(recipe, n=None)")) == []


def test_imports_aliases_reexports_and_base_builders_across_files(tmp_path, monkeypatch):
    """recipe-patterns.md 3, 4, 5 and 2 across modules: an inherited recipe through an alias and a package
    re-export, a base builder and an env constant imported from other modules, an imported helper."""
    from offlint.api import CheckOptions, check

    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "bridge" / "recipes"
    (pkg / "llama").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(
        "from bridge.recipes.env import ENV\n\n"
        "def _pretrain_common():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=16), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.env_vars = {**ENV}\n    return cfg\n\n"
        "def _set_pp(cfg, *, pp):\n    cfg.model.pipeline_model_parallel_size = pp\n")
    (pkg / "env.py").write_text("ENV = {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}\n")
    (pkg / "llama" / "__init__.py").write_text("from .h100 import base_config as llama_config\n")
    (pkg / "llama" / "h100.py").write_text(
        "from ..common import _pretrain_common, _set_pp\n\n"
        "def base_config():\n    cfg = _pretrain_common()\n    _set_pp(cfg, pp=4)\n    return cfg\n")
    (tmp_path / "perf.py").write_text(
        "from bridge.recipes.llama import llama_config\n\n"
        "def perf_config():\n    cfg = llama_config()\n    cfg.model.cpu_offloading = True\n"
        "    cfg.model.cpu_offloading_num_layers = 2\n    return cfg\n")
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path))
    assert not result.errors
    (finding,) = [f for f in result.findings if f.code == "OFL102"]
    assert finding.location.path == "perf.py" and finding.location.line == 5
    (related,) = [r for r in finding.related if "pipeline_model_parallel_size" in r.note]
    assert related.location.path == "bridge/recipes/common.py"
    assert "via base_config() in bridge/recipes/llama/h100.py, called at perf.py:4" in related.note
    assert "via _set_pp() in bridge/recipes/common.py, called at bridge/recipes/llama/h100.py:5" in related.note
    assert not [f for f in result.findings if f.code == "OFL301"]  # the env constant was followed


def test_comparisons_of_known_values_and_typing_cast_are_evaluated():
    text = ("from typing import cast\n"
            "def adam(precision='bf16-mixed'):\n"
            "    return OptimizerConfig(optimizer='adam', bf16=precision == 'bf16-mixed', fp16=precision == '16-mixed')\n"
            "def recipe_config():\n"
            "    cfg = ConfigContainer(model=cast(GPTModelProvider, GPTModelProvider(num_layers=4)), optimizer=adam())\n"
            "    return cfg\n")
    unit = {u.name: resolve(u, V) for u in read_python("r.py", text)}["recipe_config"]
    assert unit.get("optimizer.bf16").value is True and unit.get("optimizer.fp16").value is False
    assert unit.get("model.num_layers").value == 4


def test_an_unknown_hugging_face_model_leaves_its_sizes_unknown_and_the_rest_at_defaults():
    text = ("def recipe_config():\n"
            "    cfg = ConfigContainer(model=None, optimizer=OptimizerConfig())\n"
            "    cfg.model = AutoBridge.from_hf_pretrained('example/not-a-known-model').get_model_config()\n"
            "    cfg.model.pipeline_model_parallel_size = 2\n"
            "    return cfg\n")
    unit = resolve(read_python("r.py", text)[0], V)
    layers = unit.get("model.num_layers")
    assert layers.is_unknown and "example/not-a-known-model is not in offlint's table" in layers.value.reason
    assert unit.get("model.cpu_offloading").state == "default"
    assert unit.get("model.pipeline_model_parallel_size").value == 2


def test_a_private_builder_does_not_define_the_launch_environment():
    text = ("def _build_config():\n"
            "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=4, fine_grained_activation_offloading=True))\n"
            "    cfg.env_vars = {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}\n"
            "    return cfg\n"
            "def public_config():\n"
            "    cfg = _build_config()\n"
            "    cfg.env_vars = {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True', 'NVTE_CPU_OFFLOAD_V1': '1'}\n"
            "    return cfg\n")
    units = {u.name: u for u in read_python("r.py", text)}
    private, public = units["_build_config"], units["public_config"]
    assert not private.launches_training and "private builder" in private.unknown_sections["env"]
    assert resolve(private, V).get("env.NVTE_CPU_OFFLOAD_V1").is_unknown
    assert public.launches_training and resolve(public, V).get("env.NVTE_CPU_OFFLOAD_V1").value == "1"


def test_a_training_entry_point_ends_the_configuration_and_is_not_read(tmp_path, monkeypatch):
    """`pretrain(cfg, ...)` of megatron.bridge.training is where a script's configuration ends: its body (the
    training loop, which may touch the config at run time) is neither followed nor a dependency, and the config
    handed to it is not treated as changed by an unknown call."""
    from offlint.units import load_unit
    from offlint.sources.python_project import PythonProject
    from offlint.sources.python import read_python

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    training = tmp_path / "src" / "megatron" / "bridge" / "training"
    training.mkdir(parents=True)
    (training / "pretrain.py").write_text(
        "def pretrain(config, forward_step_func):\n    config.model.cpu_offloading = True\n")
    (tmp_path / "run.py").write_text(
        "from megatron.bridge.training.pretrain import pretrain\n\n"
        "def main():\n    cfg = ConfigContainer(model=GPTModelProvider(num_layers=4))\n"
        "    cfg.model.pipeline_model_parallel_size = 2\n    pretrain(cfg, None)\n")
    loaded = load_unit("run.py", "main", mcore_version="0.20.0")
    assert loaded.resolved.get("model.cpu_offloading").state == "default"  # not set by the training loop
    assert loaded.resolved.get("model.num_layers").value == 4  # not tainted as "may be changed by pretrain()"

    paths = ["run.py", "src/megatron/bridge/training/pretrain.py"]
    project = PythonProject(paths, lambda p: (tmp_path / p).read_text())
    with project.tracking() as touched:
        read_python("run.py", (tmp_path / "run.py").read_text(), project)
    assert "src/megatron/bridge/training/pretrain.py" not in touched

    # The same function name outside Bridge's training package is an ordinary helper, and is followed.
    (tmp_path / "helpers.py").write_text("def pretrain(config, step):\n    config.model.cpu_offloading = True\n")
    (tmp_path / "run.py").write_text((tmp_path / "run.py").read_text().replace(
        "megatron.bridge.training.pretrain", "helpers"))
    assert load_unit("run.py", "main", mcore_version="0.20.0").resolved.get("model.cpu_offloading").value is True


BRANCHY = '''\
def only_on_one_path(fast: bool):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, pipeline_model_parallel_size=4),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    if fast:
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
    return cfg


def on_every_path(mode: str):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, pipeline_model_parallel_size=4),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    if mode == "a":
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 1
    elif mode == "b":
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
    else:
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 3
    return cfg


def through_a_local(fast: bool):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, pipeline_model_parallel_size=1),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    granularity = None
    if fast:
        granularity = "full"
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    cfg.model.recompute_granularity = granularity
    return cfg


def elif_paths(a: bool, b: bool):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, pipeline_model_parallel_size=1),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    if a:
        cfg.model.recompute_granularity = "full"
    elif b:
        cfg.model.recompute_granularity = "selective"
    return cfg


def never(fast: bool):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=32, pipeline_model_parallel_size=4),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    if fast:
        cfg.model.pipeline_model_parallel_size = 1
        cfg.model.cpu_offloading = True
        cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''


def _branchy_findings():
    from offlint.engine import check_unit
    from offlint.rules import load_rules

    rules = list(load_rules().values())
    found = {}
    for unit in read_python("branchy.py", BRANCHY):
        found[unit.name] = [(f.code, f.message, f.location.line) for f in check_unit(resolve(unit, V), rules, False)]
    return found


def test_a_value_set_on_some_paths_is_one_of_its_paths_values_with_their_conditions():
    from offlint.types import KEY_DEFAULT, OneOf

    unit = resolve({u.name: u for u in read_python("branchy.py", BRANCHY)}["only_on_one_path"], V)
    value = unit.get("model.cpu_offloading")
    assert isinstance(value.value, OneOf) and value.is_unknown  # still unknown to code that does not look inside
    assert [(v, steps[0][2], where.line if where else None) for v, steps, where, _ in value.value.paths] == [
        (True, "`if fast` (branchy.py:4) is true", 5), (KEY_DEFAULT, "`if fast` (branchy.py:4) is false", None)]
    on_paths = unit.paths("model.cpu_offloading")
    assert [(v.state, v.value) for v, _ in on_paths] == [("known", True), ("default", False)]
    assert on_paths[0][0].assignment.location.line == 5


def test_a_rule_that_holds_on_some_paths_is_reported_with_the_condition_of_the_path():
    findings = _branchy_findings()["only_on_one_path"]
    assert ("OFL102", findings[0][1], 5) in findings
    (message,) = [m for code, m, _ in findings if code == "OFL102"]
    assert message.endswith("(on the path where `if fast` (branchy.py:4) is true)")
    # cpu_offloading and cpu_offloading_num_layers are decided by the same `if`: the impossible mixes
    # (offloading on with the layer count of the other path, and the reverse) are not reported.
    assert not [code for code, _, _ in findings if code in ("OFL210", "OFL202")]


def test_a_rule_that_holds_on_every_path_is_reported_plainly():
    (message,) = [m for code, m, _ in _branchy_findings()["on_every_path"] if code == "OFL102"]
    assert "on the path" not in message


def test_a_local_variable_assigned_on_some_paths_carries_its_paths_into_a_key():
    findings = _branchy_findings()["through_a_local"]
    (message,) = [m for code, m, _ in findings if code == "OFL103"]
    assert message.endswith("(on the path where `if fast` (branchy.py:29) is true)")


def test_a_rule_that_holds_on_no_path_is_not_reported():
    assert not [code for code, _, _ in _branchy_findings()["never"] if code.startswith("OFL1")]


def test_a_rule_that_holds_on_several_paths_names_the_first_and_counts_the_others():
    (message,) = [m for code, m, _ in _branchy_findings()["elif_paths"] if code == "OFL103"]
    assert message.endswith("(on the path where `if a` (branchy.py:42) is true, and on 1 other path)")


def test_a_recipe_that_only_calls_helpers_is_a_unit():
    """Bridge's old-layout Qwen3.5-VL PEFT recipe (qwen35_vl.py at 0de165ffc) builds its config by helpers alone:
    its text named no key and no config class, so it was never read as a unit, and its refused batch sizes
    (OFL217) went unreported. A function annotated to return a ConfigContainer is a recipe."""
    text = ("from megatron.bridge.training.config import ConfigContainer\n\n"
            "def _common():\n    cfg = ConfigContainer(model=GPTModelProvider())\n"
            "    cfg.model.tensor_model_parallel_size = 2\n    return cfg\n\n"
            "def _apply(cfg, ep):\n    cfg.model.expert_model_parallel_size = ep\n\n"
            "def peft_config(hf_path: str = 'x') -> ConfigContainer:\n    cfg = _common()\n    _apply(cfg, ep=32)\n"
            "    return cfg\n")
    units = {u.name: resolve(u, V) for u in read_python("r.py", text)}
    assert units["peft_config"].get("model.expert_model_parallel_size").value == 32


def test_a_dict_read_back_from_the_config_is_assigned_again():
    """`cfg.dataset.dataset_kwargs = cfg.dataset.dataset_kwargs or {}` (Bridge's Qwen3-Next finetune example): the
    value read back holds plain values, not a dict literal's entries; it was an internal error, exit 2."""
    text = ("def recipe() -> ConfigContainer:\n"
            "    cfg = ConfigContainer(dataset=FinetuningDatasetConfig(dataset_kwargs={'chat': True}))\n"
            "    cfg.dataset.dataset_kwargs = cfg.dataset.dataset_kwargs or {}\n    return cfg\n")
    unit = resolve(read_python("r.py", text)[0], V)
    assert unit.get("dataset.dataset_kwargs").value == {"chat": True}
