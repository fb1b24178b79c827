"""changed.expand chooses the launch scripts that run a recipe a chosen Python file defines: by `def`, by an `as`
re-export, whatever the name's length, and not a launch whose recipe no chosen file defines."""

from pathlib import Path

from offlint import changed
from offlint.discover import discover

BASE = "def _common():\n    return None\n"
RECIPES = '''from recipes.base import _common
from recipes.elsewhere import far_config as near_config


def plain_config():
    return _common()


class Holder:
    pass


def xy():
    return _common()
'''
# no other name a launch runs: its `as` is searched for only because `ab` is too short to be a word
SHORT = "from recipes.base import _common\nfrom recipes.elsewhere import other as ab\n"
UNRELATED = ("def far_config():\n    return None\n\n\ndef other():\n    return None\n\n\n"
             "def lonely_config():\n    pass\n")
LAUNCHES = {
    "plain.sh": "plain_config",  # a def of a chosen file
    "alias.sh": "near_config",  # an `as` re-export in a chosen file
    "short_alias.sh": "ab",  # the same, a name shorter than the word search's words
    "short_def.sh": "xy",  # a def with a two-letter name
    "klass.sh": "Holder",  # a class counts as a definition
    "far.sh": "far_config",  # defined only in a file nothing chosen imports: not chosen
    "lonely.sh": "lonely_config",
}


def _tree(root: Path) -> None:
    (root / "recipes").mkdir()
    (root / "recipes" / "__init__.py").write_text("")
    (root / "recipes" / "base.py").write_text(BASE)
    (root / "recipes" / "llama.py").write_text(RECIPES)
    (root / "recipes" / "short.py").write_text(SHORT)
    (root / "recipes" / "elsewhere.py").write_text(UNRELATED)
    (root / "launch").mkdir()
    for name, recipe in LAUNCHES.items():
        (root / "launch" / name).write_text(f"python run_recipe.py --recipe {recipe} train.train_iters=5\n")


def _chosen(root: Path, known_deps) -> set[str]:
    tree_files, _ = discover(["."], root)
    targets = [f for f in tree_files if f.path == "recipes/base.py"]
    _, files = changed.expand(targets, root, lambda path: (root / path).read_text(), known_deps, tree_files)
    return {f.path for f in files}


def test_launches_running_a_recipe_of_a_chosen_file_are_chosen(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    launches = {f"launch/{name}" for name in ("plain.sh", "alias.sh", "short_alias.sh", "short_def.sh", "klass.sh")}
    by_text = _chosen(tmp_path, None)
    assert by_text == {"recipes/base.py", "recipes/llama.py", "recipes/short.py"} | launches
    deps = {"recipes/llama.py": {"recipes/base.py": "x"}, "recipes/short.py": {"recipes/base.py": "x"},
            "recipes/elsewhere.py": {}}
    by_deps = _chosen(tmp_path, deps)
    assert by_deps == by_text


VARIABLE_LAUNCHES = {
    "default.sh": ('RECIPE=${RECIPE:-plain_config}\npython run_recipe.py --recipe "${RECIPE}" a=1\n', True),
    "built.sh": ("for SIZE in plain other; do\n  python run_recipe.py --recipe ${SIZE}_config\ndone\n", True),
    "exported.sh": ('export RECIPE_NAME="far_config"\ntorchrun run_recipe.py --recipe $RECIPE_NAME\n', True),
    "argument.sh": ("RECIPE=$1\npython run_recipe.py --recipe $RECIPE\n", False),  # not known from the file
    # a default built from another variable (LLaVA-OneVision-2's gpt_oss Slurm scripts)
    "nested.sh": ('MODEL=plain\nRECIPE="${RECIPE:-${MODEL}_config}"\npython run_recipe.py --recipe ${RECIPE}\n', True),
    "nested_argument.sh": ('RECIPE="${RECIPE:-${1}_config}"\npython run_recipe.py --recipe ${RECIPE}\n', False),
}


def test_a_changed_launch_naming_its_recipe_through_variables_brings_the_recipe(tmp_path, monkeypatch):
    """A changed launch whose `--recipe` is built from shell variables set to literal words in the file: the files
    defining the names they make are read with it (the reader resolves the variables and links the recipe); a
    variable the file does not set to a word brings nothing."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    for name, (text, _) in VARIABLE_LAUNCHES.items():
        (tmp_path / "launch" / name).write_text(text)
    tree_files, _ = discover(["."], tmp_path)
    for name, (_, brings) in VARIABLE_LAUNCHES.items():
        targets = [f for f in tree_files if f.path == f"launch/{name}"]
        _, files = changed.expand(targets, tmp_path, lambda path: (tmp_path / path).read_text(), None,
                                  list(tree_files))
        chosen = {f.path for f in files}
        defining = "recipes/elsewhere.py" if name == "exported.sh" else "recipes/llama.py"
        assert (defining in chosen) is brings, (name, chosen)


def test_a_recipe_change_chooses_the_launches_that_build_its_name_from_variables(tmp_path, monkeypatch):
    """The other direction: base.py changed, the launches running a recipe of a file that imports it are chosen
    when their `--recipe` is built from variables the launch sets to literal words, and not otherwise."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    for name, (text, _) in VARIABLE_LAUNCHES.items():
        (tmp_path / "launch" / name).write_text(text)
    chosen = _chosen(tmp_path, None)
    assert {"launch/default.sh", "launch/built.sh"} <= chosen  # plain_config: recipes/llama.py imports base.py
    assert "launch/exported.sh" not in chosen  # far_config: recipes/elsewhere.py imports nothing changed
    assert "launch/argument.sh" not in chosen
    deps = {"recipes/llama.py": {"recipes/base.py": "x"}, "recipes/short.py": {"recipes/base.py": "x"},
            "recipes/elsewhere.py": {}}
    assert _chosen(tmp_path, deps) == chosen
