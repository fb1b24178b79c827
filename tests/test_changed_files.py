"""Changed-files mode (pre-commit passes file names): re-check the units the files affect, report what concerns them."""

from pathlib import Path

from offlint.api import CheckOptions, check

BASE = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
MIDDLE = '''
from recipes.common import _pretrain_common


def _llama_common():
    cfg = _pretrain_common()
    cfg.model.num_layers = 16
    return cfg
'''
RECIPE = '''
from recipes.llama_common import _llama_common


def llama_offload_config():
    cfg = _llama_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
UNRELATED = '''
from megatron.bridge.models import GPTModelProvider


def other_config():
    return GPTModelProvider(num_layers=4, pipeline_model_parallel_size=2, cpu_offloading=True,
                            cpu_offloading_num_layers=1)
'''
LAUNCH = '''#!/bin/bash
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
python scripts/training/run_recipe.py --recipe llama_offload_config model.cpu_offloading_num_layers=3
'''


def _tree(root: Path) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (root / "recipes").mkdir()
    (root / "recipes" / "__init__.py").write_text("")
    (root / "recipes" / "common.py").write_text(BASE)
    (root / "recipes" / "llama_common.py").write_text(MIDDLE)
    (root / "recipes" / "llama.py").write_text(RECIPE)
    (root / "recipes" / "other.py").write_text(UNRELATED)
    (root / "launch").mkdir()
    (root / "launch" / "train_llama.sh").write_text(LAUNCH)


def _found(root: Path, paths: list[str]) -> list[tuple[str, str, int]]:
    result = check(paths, CheckOptions(root=root, select=["OFL102"], cache=False))
    assert not result.errors
    return sorted((f.code, f.location.path, f.location.line) for f in result.findings)


def test_a_base_builder_two_levels_down_re_checks_the_recipes_that_inherit_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    whole_tree = _found(tmp_path, ["."])
    assert whole_tree == [("OFL102", "recipes/llama.py", 7), ("OFL102", "recipes/other.py", 6)]
    # The base builder sets PP=4: the finding it takes part in points at the recipe that turns offloading on.
    result = check(["recipes/common.py"], CheckOptions(root=tmp_path, select=["OFL102"], cache=False))
    [finding] = result.findings
    assert (finding.location.path, finding.location.line) == ("recipes/llama.py", 7)
    assert finding.units == 2  # the recipe, and the launch script that runs it
    assert "recipes/common.py" in {r.location.path for r in finding.related}
    # Reported under the unit the finding's file defines; the launch that shares it is named beside it.
    assert finding.unit_path == "recipes/llama.py"
    assert [name.startswith("run_recipe.py at line 3") for name in finding.shared_with] == [True]


def test_a_changed_recipe_reports_only_its_own_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    assert _found(tmp_path, ["recipes/llama.py"]) == [("OFL102", "recipes/llama.py", 7)]
    assert _found(tmp_path, ["recipes/other.py"]) == [("OFL102", "recipes/other.py", 6)]


def test_a_changed_launch_script_is_checked_on_top_of_the_recipe_it_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    result = check(["launch/train_llama.sh"], CheckOptions(root=tmp_path, select=["OFL102"], cache=False))
    [finding] = result.findings
    assert (finding.location.path, finding.location.line) == ("recipes/llama.py", 7)
    assert finding.unit.startswith("run_recipe.py at line 3") and finding.units == 1
    assert result.files_checked == 1


def test_an_unrelated_change_reports_nothing_and_errors_elsewhere_do_not_fail_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "recipes" / "broken.py").write_text("def f(:\n")
    (tmp_path / "notes.py").write_text("X = 1\n")
    result = check(["notes.py"], CheckOptions(root=tmp_path, cache=False))
    assert result.findings == [] and result.errors == []


def test_shared_findings_are_reported_once_with_the_unit_count(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipes.py").write_text('''
from megatron.bridge.models import GPTModelProvider


def _common():
    return GPTModelProvider(num_layers=4, pipeline_model_parallel_size=2, cpu_offloading=True,
                            cpu_offloading_num_layers=1)


def a_config():
    cfg = _common()
    cfg.num_layers = 4
    return cfg


def b_config():
    cfg = _common()
    cfg.num_layers = 4
    return cfg
''')
    result = check(["recipes.py"], CheckOptions(root=tmp_path, select=["OFL102"], cache=False))
    [finding] = result.findings
    assert finding.units == 2  # a_config and b_config (the private _common runs only as part of them)
    assert (finding.unit, finding.shared_with) == ("a_config", ("b_config",))


def test_a_change_with_many_dependents_gives_the_same_answer_in_worker_processes(tmp_path, monkeypatch):
    """Enough dependents for the pre-commit run to fork workers (which inherit the changed file's readers from
    the parent): the findings, units and related locations equal those of a single process."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    for index in range(24):
        (tmp_path / "recipes" / f"variant_{index}.py").write_text(
            "from recipes.llama import llama_offload_config\n\n\n"
            f"def variant_{index}_config():\n    cfg = llama_offload_config()\n"
            f"    cfg.model.cpu_offloading_num_layers = {index % 3 + 1}\n    return cfg\n")
    answers = []
    for workers in (1, 2):
        result = check(["recipes/common.py"], CheckOptions(root=tmp_path, select=["OFL102"], cache=False,
                                                           workers=workers))
        assert not result.errors
        answers.append((result.units, [(f.code, f.location, f.units, f.related) for f in result.findings]))
    assert answers[0] == answers[1]
    assert answers[0][1][0][2] == 26  # the recipe, its launch script and the 24 variants share one finding


def test_a_check_restores_the_garbage_collector():
    import gc

    from offlint.api import CheckOptions as Options

    assert gc.isenabled()
    check(["-"], Options(cache=False), stdin=("recipe.py", "x = 1\n"))
    assert gc.isenabled()
    gc.disable()
    try:
        check(["-"], Options(cache=False), stdin=("recipe.py", "x = 1\n"))
        assert not gc.isenabled()  # a caller's choice is kept too
    finally:
        gc.enable()


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_a_neighbouring_trees_launch_links_to_its_own_recipe_in_a_cached_run(tmp_path, monkeypatch):
    """Two trees side by side define a recipe of the same name; one tree's launch runs it. A change to the other
    tree's recipe chooses that launch (it runs a name the changed file defines), and the launch must still be
    linked to the definition nearest it, as a whole-tree run links it: with a cache, the files that defined the
    name last time are read too. Linked to the changed file's recipe instead, it reported a false OFL206 there."""
    root = tmp_path / "trees"  # the cache (conftest) outside it
    for part in ("bad/recipes/llama_offload.py", "good/recipes/llama_offload.py", "good/cards/card.yaml"):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (root / part).write_text((FIXTURES / part).read_text())
    (root / "pyproject.toml").write_text("[project]\nname = 'trees'\n")
    monkeypatch.chdir(root)

    def found(paths: list[str], cache: bool) -> set[tuple[str, str, int]]:
        result = check(paths, CheckOptions(root=root, cache=cache))
        assert not result.errors
        return {(f.code, f.location.path, f.location.line) for f in result.findings}

    whole = found(["."], cache=True)  # the reference, and the cache a pre-commit hook's first run leaves
    assert not {f for f in whole if f[1].startswith("good/")}
    changed = "bad/recipes/llama_offload.py"
    assert found([changed], cache=True) == found([changed], cache=False) == \
        {f for f in whole if f[1] == changed}
