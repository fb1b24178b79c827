"""A followed call with plain arguments (a base builder, an inherited recipe) runs once per project and every caller
gets its own copy of what it returned, with the provenance and the dependencies the run itself gives
(PythonProject.followed_call); a call with an effect besides its value, or whose result the call depth limit
shaped, runs again for each caller, as without the reuse.

The trees are written here (fixtures of our own, in the shapes Megatron Bridge uses).
"""

from __future__ import annotations

import pytest

from offlint.sources import python_following
from offlint.sources.python_project import MODULE, PythonProject
from offlint.sources.python_records import MARK

COMMON = '''\
from pkg.sizes import LAYERS, learning_rate


def _pretrain_common():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=LAYERS),
                          optimizer=OptimizerConfig(lr=learning_rate()),
                          ddp=DistributedDataParallelConfig())
    cfg.model.recompute_granularity = "selective"
    cfg.env_vars = {"NCCL_NVLS_ENABLE": "0"}
    return cfg
'''

SIZES = '''\
LAYERS = 32


def learning_rate():
    return 3e-4


def unused():
    return 1
'''

RECIPES = '''\
from pkg.common import _pretrain_common


def first_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.num_layers = 8
    cfg.optimizer.optimizer_cpu_offload = True
    return cfg


def second_pretrain_config():
    cfg = _pretrain_common()
    cfg.model.pipeline_model_parallel_size = 2
    return cfg
'''

# A module constant holding a config object: a call that writes into it has an effect besides its value.
EFFECTS = '''\
SHARED = {"optimizer": OptimizerConfig(lr=1e-4)}


def _bump():
    opt = SHARED["optimizer"]
    opt.lr = 2e-4
    return 1


def _optimizers():
    return {"adam": OptimizerConfig(lr=1e-4), "sgd": OptimizerConfig(lr=2e-4)}


def first_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=_bump()))
    opts = _optimizers()
    return cfg


def second_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=_bump()))
    opts = _optimizers()
    return cfg
'''

# _b6() run from a recipe is 4 calls deep; the same call from deep_config starts 6 deep, where the innermost call
# (`_set_layers`) is one too deep to follow, so the result differs.
DEPTH = '''\
def _set_layers(cfg):
    cfg.model.num_layers = 2


def _leaf(cfg):
    _set_layers(cfg)


def _b7():
    cfg = ConfigContainer(model=GPTModelProvider())
    _leaf(cfg)
    return cfg


def _b6():
    return _b7()


def _b5():
    return _b6()


def _b4():
    return _b5()


def _b3():
    return _b4()


def _b2():
    return _b3()


def _b1():
    return _b2()


def shallow_config():
    cfg = _b6()
    cfg.model.pipeline_model_parallel_size = 1
    return cfg


def deep_config():
    cfg = _b1()
    cfg.model.pipeline_model_parallel_size = 1
    return cfg
'''


def _project(texts: dict[str, str]) -> PythonProject:
    return PythonProject(sorted(texts), texts.get)


def _units(project: PythonProject, path: str) -> dict:
    with project.tracking():
        units = project.reader(path).units()
    return {unit.name: unit for unit in units}


def _values(unit) -> dict:
    return {a.key: a for layer in unit.layers for a in layer.assignments}


@pytest.fixture
def runs(monkeypatch):
    """How many times each function of the tree ran (PythonReader.run_function)."""
    counts: dict[str, int] = {}
    real = python_following.CallFollowing.run_function

    def counted(self, fn, positional, keywords, depth, given=None):
        counts[fn.name] = counts.get(fn.name, 0) + 1
        return real(self, fn, positional, keywords, depth, given)

    monkeypatch.setattr(python_following.CallFollowing, "run_function", counted)
    return counts


def _without_reuse(monkeypatch) -> None:
    """Every followed call runs (the reference: what the reading gives without reusing a call's result)."""
    monkeypatch.setattr(PythonProject, "followed_call",
                        lambda self, key, depth, compute, keep, record=None: (compute(), False, False))


def _used(project: PythonProject, unit: tuple) -> set:
    """What a unit's reading used, each call record in it (python_records: it stands for the function's part and
    what its run used) replaced by what the recorded run used."""
    out: set = set()
    for dep in project.unit_used[unit]:
        record = project.records.get(dep) if isinstance(dep, tuple) and dep[:1] == (MARK,) else None
        out |= record.all_deps() if record is not None else {dep}
    return out


TREE = {"pkg/common.py": COMMON, "pkg/sizes.py": SIZES, "pkg/recipes.py": RECIPES}


def test_a_base_builder_runs_once_and_each_caller_changes_its_own_copy(runs):
    project = _project(TREE)
    units = _units(project, "pkg/recipes.py")
    assert runs["_pretrain_common"] == 1
    first, second = _values(units["first_pretrain_config"]), _values(units["second_pretrain_config"])
    assert first["model.num_layers"].value == 8 and first["optimizer.optimizer_cpu_offload"].value is True
    assert second["model.num_layers"].value == 32  # the first caller's write is not in the second's copy
    assert "optimizer.optimizer_cpu_offload" not in second
    assert "model.pipeline_model_parallel_size" not in first
    assert second["model.pipeline_model_parallel_size"].value == 2
    # A third caller, after both changed theirs, still gets the builder's own result.
    third = project.reader("pkg/recipes.py")._call(*project.reader("pkg/common.py")._find_function(
        "_pretrain_common"), _call_node("_pretrain_common()"), python_following.Frame(depth=0))
    assert third.child("model").values["num_layers"].value == 32
    assert "pipeline_model_parallel_size" not in third.child("model").values
    assert "optimizer_cpu_offload" not in third.child("optimizer").values
    assert runs["_pretrain_common"] == 1


def _call_node(text: str):
    import ast

    return ast.parse(text).body[0].value


def test_a_reused_result_has_the_provenance_and_dependencies_of_a_run(monkeypatch):
    project = _project(TREE)
    units = _units(project, "pkg/recipes.py")
    first, second = _values(units["first_pretrain_config"]), _values(units["second_pretrain_config"])
    for values, line in ((first, 5), (second, 12)):
        assert values["model.recompute_granularity"].via == (
            f"via _pretrain_common() in pkg/common.py, called at pkg/recipes.py:{line}",)
        assert values["env.NCCL_NVLS_ENABLE"].via == values["model.recompute_granularity"].via
    used_first = _used(project, ("pkg/recipes.py", "first_pretrain_config"))
    used_second = _used(project, ("pkg/recipes.py", "second_pretrain_config"))
    assert {("pkg/common.py", "_pretrain_common"), ("pkg/sizes.py", "learning_rate"),
            ("pkg/sizes.py", MODULE)} <= used_second
    assert ("pkg/sizes.py", "unused") not in used_second
    assert used_first - {("pkg/recipes.py", "first_pretrain_config")} == \
        used_second - {("pkg/recipes.py", "second_pretrain_config")}
    # The same as every call run again: units, provenance and what each unit used.
    _without_reuse(monkeypatch)
    again = _project(TREE)
    assert _units(again, "pkg/recipes.py") == units
    assert _used(again, ("pkg/recipes.py", "first_pretrain_config")) == used_first
    assert _used(again, ("pkg/recipes.py", "second_pretrain_config")) == used_second


def test_a_call_with_an_effect_or_a_result_out_of_a_copys_reach_runs_for_every_caller(runs):
    project = _project({"pkg/effects.py": EFFECTS})
    units = _units(project, "pkg/effects.py")
    assert set(units) == {"first_config", "second_config"}
    assert runs["_bump"] == 2  # it writes into a config object a module constant holds
    assert runs["_optimizers"] == 2  # config objects in a list: a copy of the result would share them
    assert not any(key[1] in ("_bump", "_optimizers") for key in project._calls)


def test_a_call_the_depth_limit_cuts_short_is_not_reused_at_another_depth(monkeypatch, runs):
    project = _project({"pkg/depth.py": DEPTH})
    units = _units(project, "pkg/depth.py")
    shallow, deep = _values(units["shallow_config"]), _values(units["deep_config"])
    assert shallow["model.num_layers"].value == 2
    assert "model.num_layers" not in deep or deep["model.num_layers"].value != 2  # `_set_layers` not followed
    assert runs["_b6"] == 2
    _without_reuse(monkeypatch)
    assert _units(_project({"pkg/depth.py": DEPTH}), "pkg/depth.py") == units


def test_a_keyword_whose_value_is_unknown_leaves_the_other_parameters_theirs(tmp_path):
    """`def x_config(**user_kwargs): combined = {**recommended, **user_kwargs}; return _common(**combined)` called
    with `seq_length=args.seq_length` (a value offlint cannot read): only seq_length is unknown. The whole
    `**user_kwargs` had been, so `_common`'s every parameter was (okoge-kaz/Megatron-Bridge's Qwen3-VL launcher:
    its `peft=None` default became unknown and the memory estimate stopped there)."""
    from offlint.sources.python import read_python
    from offlint.sources.python_project import PythonProject

    recipe = ("import os\nfrom megatron.bridge.training.config import ConfigContainer\n"
              "from megatron.bridge.models import GPTModelProvider\n\n\n"
              "def _common(num_layers=4, seq_length=2048, peft=None):\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=num_layers, seq_length=seq_length), peft=peft)\n"
              "    return cfg\n\n\n"
              "def x_pretrain_config(**user_kwargs):\n"
              "    recommended = {'num_layers': 8}\n"
              "    combined = {**recommended, **user_kwargs}\n"
              "    return _common(**combined)\n\n\n"
              "def launch_config():\n"
              "    cfg = x_pretrain_config(seq_length=int(os.environ['SEQ']))\n"
              "    cfg.model.pipeline_model_parallel_size = 1\n"
              "    return cfg\n")
    (tmp_path / "r.py").write_text(recipe)
    project = PythonProject(["r.py"], lambda path: (tmp_path / path).read_text())
    import os
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        units = {u.name: u for u in read_python("r.py", recipe, project=project)}
    finally:
        os.chdir(cwd)
    assert "launch_config" in units, list(units)
    values = {a.key: a.value for a in units["launch_config"].all_assignments()}
    assert values["model.num_layers"] == 8 and values["peft"] is None
    assert not isinstance(values["model.num_layers"], str)
    from offlint.types import Unknown
    assert isinstance(values["model.seq_length"], Unknown)
