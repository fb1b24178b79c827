"""OFL007 on Megatron-LM's functional test cases: the entry script is the one the tree's CI recipes run the case
with (sources/mlm_ci_recipes.py), and a flag its parser does not have is reported in the case's model_config.yaml.

Megatron-LM a6d6dc6a85 and 2cc0736f04: three `--inference-dynamic-batching-*` flags removed from the parser in
November 2025 stayed in three (four) dynamic-inference cases that the recipes list under the `mr-broken` and
`flaky` scopes; those jobs stop with "unrecognized arguments". At d98e8a6, 248 of 333 cases are listed by a recipe
and none has an unknown flag. The trees below are our own, in the shapes Megatron-LM writes its recipes and cases.
"""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.linking import _tree_reader
from offlint.sources import mlm_ci_recipes

from tests.test_mlm_arguments import PRETRAIN, _tree

RECIPE = """\
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  nodes: 1
  gpus: 8
  script: |-
    set -euo pipefail
    cd /opt/megatron-lm
    ARGUMENTS=(
        "DATA_PATH=/mnt/artifacts"
        "TRAINING_SCRIPT_PATH=@SCRIPT@"
        "TRAINING_PARAMS_PATH=./tests/functional_tests/test_cases/{model}/{test_case}/model_config.yaml"
        "GOLDEN_VALUES_PATH=./tests/functional_tests/test_cases/{model}/{test_case}/golden_values_{environment}.json"
    )
    bash ./tests/functional_tests/shell_test_utils/run_ci_test.sh ${{ARGUMENTS[@]}}
products:
  - test_case: [gpt3_tp1_pp2]
    products:
      - environment: [dev]
        scope: [mr]
  - test_case: [gpt3_stale_flag, gpt3_other]
    products:
      - environment: [dev]
        scope: [mr-broken]
  # - test_case: [gpt3_commented_out]
  #   products:
  #     - environment: [dev]
"""

CASE = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 8
  --hidden-size: 512
  --recompute-granularity: full
  FLAG
TEST_TYPE: regular
"""

CASES = "tests/functional_tests/test_cases/gpt"


def _ci_tree(root, recipe: str = RECIPE, script: str = "pretrain_gpt.py", extra: dict | None = None) -> None:
    _tree(root, {"tests/test_utils/recipes/h100/gpt.yaml": recipe.replace("@SCRIPT@", script), **(extra or {})})
    for case, flag in [("gpt3_tp1_pp2", "--use-flash: true"), ("gpt3_stale_flag", "--recompute-granularty: full"),
                       ("gpt3_other", "--num-layers-x: 2"), ("gpt3_commented_out", "--hidden-sise: 4")]:
        path = root / CASES / case / "model_config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CASE.replace("FLAG", flag))


def _ofl007(root, paths=("tests/functional_tests",), cache=False) -> list[tuple[str, int, str]]:
    result = check(list(paths), CheckOptions(select=["OFL007"], root=root, cache=cache))
    assert not result.errors
    return [(f.location.path.split("/")[-2], f.location.line, f.message.split(":")[0]) for f in result.findings]


def test_a_flag_the_recipes_script_does_not_take_is_reported_in_the_case(tmp_path, monkeypatch):
    _ci_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _ofl007(tmp_path) == [
        ("gpt3_other", 7, "--num-layers-x is not an option of pretrain_gpt.py's argument parser in this checkout "
                          "(did you mean --num-layers?)"),
        ("gpt3_stale_flag", 7, "--recompute-granularty is not an option of pretrain_gpt.py's argument parser in this "
                               "checkout (did you mean --recompute-granularity?)")]
    # a pre-commit run on the case alone reads the recipes too
    assert _ofl007(tmp_path, [f"{CASES}/gpt3_stale_flag/model_config.yaml"]) == [
        ("gpt3_stale_flag", 7, "--recompute-granularty is not an option of pretrain_gpt.py's argument parser in this "
                               "checkout (did you mean --recompute-granularity?)")]


def test_the_script_the_recipe_names_decides(tmp_path, monkeypatch):
    """The recipe runs the cases with the multimodal script, whose provider adds --vision-model-type: a case flag
    that only that provider has is no finding there, and is one when the recipe runs pretrain_gpt.py."""
    _ci_tree(tmp_path, script="./examples/multimodal/train.py")
    (tmp_path / CASES / "gpt3_other" / "model_config.yaml").write_text(CASE.replace("FLAG", "--vision-model-type: x"))
    monkeypatch.chdir(tmp_path)
    assert [case for case, _, _ in _ofl007(tmp_path)] == ["gpt3_stale_flag"]
    _ci_tree(tmp_path)
    (tmp_path / CASES / "gpt3_other" / "model_config.yaml").write_text(CASE.replace("FLAG", "--vision-model-type: x"))
    assert [case for case, _, _ in _ofl007(tmp_path)] == ["gpt3_other", "gpt3_stale_flag"]


@pytest.mark.parametrize("change", [
    "a case no recipe lists", "two recipes, two scripts", "a templated script", "a script in a variable",
    "no params path", "a params path elsewhere"])
def test_no_finding_where_the_recipes_do_not_say_the_script_for_certain(tmp_path, monkeypatch, change):
    recipe, extra = RECIPE, {}
    if change == "a case no recipe lists":
        recipe = RECIPE.replace("gpt3_stale_flag, gpt3_other", "gpt3_tp1_pp2")
    elif change == "two recipes, two scripts":
        extra = {"tests/test_utils/recipes/gb200/gpt.yaml": RECIPE.replace("@SCRIPT@", "pretrain_vlm.py"),
                 "pretrain_vlm.py": PRETRAIN}
    elif change == "a templated script":
        recipe = RECIPE.replace("@SCRIPT@", '\\"nemo llm pretrain -y --factory {nemo_model}\\"')
    elif change == "a script in a variable":
        recipe = RECIPE.replace("@SCRIPT@", "${TRAINING_SCRIPT}")
    elif change == "no params path":
        recipe = "\n".join(line for line in RECIPE.splitlines() if "TRAINING_PARAMS_PATH" not in line)
    else:
        recipe = RECIPE.replace("test_cases/{model}/{test_case}", "test_cases/{test_case}")
    _ci_tree(tmp_path, recipe=recipe, extra=extra)
    monkeypatch.chdir(tmp_path)
    found = [case for case, _, _ in _ofl007(tmp_path)]
    assert "gpt3_stale_flag" not in found
    assert "gpt3_commented_out" not in found  # a commented-out recipe entry lists nothing


def test_the_checkouts_own_path_and_a_second_recipe_with_the_same_script(tmp_path, monkeypatch):
    """`/opt/megatron-lm/tests/...` is the checkout the recipe's script `cd`s into; a second recipe (another GPU's)
    listing the case with the same script agrees."""
    _ci_tree(tmp_path, recipe=RECIPE.replace("./tests/functional_tests/test_cases/{model}/{test_case}/model",
                                             "/opt/megatron-lm/tests/functional_tests/test_cases/{model}/{test_case}/"
                                             "model"),
             extra={"tests/test_utils/recipes/gb200/gpt.yaml": RECIPE.replace("@SCRIPT@", "pretrain_gpt.py")})
    monkeypatch.chdir(tmp_path)
    assert [case for case, _, _ in _ofl007(tmp_path)] == ["gpt3_other", "gpt3_stale_flag"]


def test_a_recipe_edit_is_seen_by_the_next_run_with_a_cache(tmp_path, monkeypatch):
    """The case's findings depend on the recipes, which are not its file: they are linked again on every run, not
    kept from the last (a recipe that stops listing the case takes its findings away)."""
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    tree.mkdir()
    _ci_tree(tree)
    monkeypatch.chdir(tree)
    assert [case for case, _, _ in _ofl007(tree, cache=True)] == ["gpt3_other", "gpt3_stale_flag"]
    (tree / "tests/test_utils/recipes/h100/gpt.yaml").write_text(
        RECIPE.replace("@SCRIPT@", "pretrain_gpt.py").replace("gpt3_stale_flag, gpt3_other", "gpt3_other"))
    assert [case for case, _, _ in _ofl007(tree, cache=True)] == ["gpt3_other"]


def test_hostile_recipes_give_no_script_and_no_error(tmp_path, monkeypatch):
    """A recipe that is not YAML, an alias bomb, a symlinked recipe folder: read within bounds or not at all."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9))
    _ci_tree(tmp_path, extra={"tests/test_utils/recipes/h100/bad.yaml": "spec: [unclosed\n",
                              "tests/test_utils/recipes/h100/bomb.yaml": bomb})
    (tmp_path / "tests/test_utils/recipes/loop").symlink_to(tmp_path / "tests/test_utils/recipes")
    monkeypatch.chdir(tmp_path)
    assert [case for case, _, _ in _ofl007(tmp_path)] == ["gpt3_other", "gpt3_stale_flag"]


def test_entry_script_names_the_trees_file(tmp_path, monkeypatch):
    _ci_tree(tmp_path, script="./examples/multimodal/train.py")
    monkeypatch.chdir(tmp_path)
    memo: dict = {}
    tree_text = _tree_reader([])
    case = f"{CASES}/gpt3_stale_flag/model_config.yaml"
    assert mlm_ci_recipes.entry_script(case, tree_text, memo) == "examples/multimodal/train.py"
    assert mlm_ci_recipes.entry_script(f"{CASES}/gpt3_commented_out/model_config.yaml", tree_text, memo) is None
    assert mlm_ci_recipes.entry_script("examples/gpt3/model_config.yaml", tree_text, memo) is None
    assert mlm_ci_recipes.entry_script(f"{CASES}/gpt3_stale_flag/golden_values.yaml", tree_text, memo) is None
    assert mlm_ci_recipes.entry_script(str(tmp_path / case), tree_text, {}) == \
        str(tmp_path / "examples/multimodal/train.py")
