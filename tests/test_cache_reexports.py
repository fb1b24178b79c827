"""A recipe re-exported under another name (`from .x import a_config as b_config`, Bridge's alias modules such as
recipes/nemotronh/nemotron_3_nano.py) may be run by that name from a launch. A pre-commit run with a cache chooses
the files to read by the dependencies the last run recorded; without a cache, by text search. Both must answer
the same, however the name reaches the recipe: a module that only re-exports it, one that also defines a recipe
of its own, a package `__init__.py` in between, two aliases in a row, `import x as y`, `__all__`, and a launch
in a shell script or a YAML card."""

import pytest

from tests.test_cache_deferred import COMMON, LAUNCH, QUIET, _answer

OWN = '''from recipes.common import _pretrain_common


def own_config():
    cfg = _pretrain_common()
    cfg.model.num_layers = 24
    return cfg
'''
CARD = '''script: >-
  python scripts/training/run_recipe.py --recipe {name} model.cpu_offloading=True model.cpu_offloading_num_layers=1
'''
# layout -> (files besides common.py and quiet.py, the name a launch runs, whether linking reaches the recipe)
LAYOUTS = {
    "pure-alias": ({"recipes/legacy.py": "from recipes.quiet import quiet_config as legacy_config\n"},
                   "legacy_config", True),
    "alias-beside-own-recipe": ({"recipes/legacy.py": "from recipes.quiet import quiet_config as legacy_config\n"
                                 + OWN}, "legacy_config", True),
    "relative-alias": ({"recipes/legacy.py": "from .quiet import quiet_config as legacy_config\n"},
                       "legacy_config", True),
    "alias-of-package-re-export": ({"recipes/__init__.py": "from recipes.quiet import quiet_config\n\n"
                                    "__all__ = ['quiet_config']\n",
                                    "recipes/legacy.py": "from recipes import quiet_config as legacy_config\n"},
                                   "legacy_config", True),
    "package-init-alias": ({"recipes/__init__.py": "from .quiet import quiet_config as legacy_config\n\n"
                            "__all__ = ['legacy_config']\n"}, "legacy_config", True),
    "two-aliases": ({"recipes/legacy.py": "from recipes.quiet import quiet_config as legacy_config\n",
                     "recipes/older.py": "from recipes.legacy import legacy_config as older_config\n"},
                    "older_config", False),  # linking follows one alias (linking.link_commands)
    "all-only": ({"recipes/legacy.py": "from recipes.quiet import quiet_config\n\n__all__ = ['quiet_config']\n"},
                 "quiet_config", True),
    "module-alias": ({"recipes/legacy.py": "import recipes.quiet as legacy_module\n"}, "legacy_module", False),
}
# file -> an edit a pre-commit run is made on; either way the launch's finding (CPU offloading with pipeline
# parallelism) then points into the edited file
EDITS = {
    "recipes/common.py": lambda text: text.replace("pipeline_model_parallel_size=4", "pipeline_model_parallel_size=8"),
    "recipes/quiet.py": lambda text: text.replace("    cfg.model.num_layers = 16\n", "    cfg.model.num_layers = 16\n"
                                                  "    cfg.model.pipeline_model_parallel_size = 2\n"),
}


def _tree(root, layout: str, launch: str):
    files, name, _ = LAYOUTS[layout]
    (root / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (root / "recipes").mkdir()
    (root / "launch").mkdir()
    written = {"recipes/__init__.py": "", "recipes/common.py": COMMON, "recipes/quiet.py": QUIET, **files}
    if launch == "shell":
        written["launch/train.sh"] = LAUNCH.format(name=name, n=1)
    else:
        written["launch/train.yaml"] = CARD.format(name=name)
    for path, text in written.items():
        (root / path).write_text(text)
    return "launch/train.sh" if launch == "shell" else "launch/train.yaml"


@pytest.mark.parametrize("launch", ["shell", "yaml"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("edited", sorted(EDITS))
def test_a_re_exported_recipe_is_chosen_with_a_cache_as_without(tmp_path, monkeypatch, layout, launch, edited):
    root = tmp_path / "tree"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "cache"))
    script = _tree(root, layout, launch)
    _answer(root, ["."], cache=True)
    path = root / edited
    text = path.read_text()
    assert EDITS[edited](text) != text
    path.write_text(EDITS[edited](text))
    uncached = _answer(root, [edited], cache=False)
    assert _answer(root, [edited], cache=True) == uncached
    name, linked = LAYOUTS[layout][1], LAYOUTS[layout][2]
    # not vacuous: where linking reaches the recipe, the launch's finding drawing on the edited file is reported
    assert any(f"--recipe {name}" in finding and script in finding for finding in uncached[0]) == linked
    # and again, the cache refreshed by that run, with the launch edited too
    assert _answer(root, [edited], cache=True) == uncached
    (root / script).write_text((root / script).read_text() + "\n")
    assert _answer(root, [edited, script], cache=True) == _answer(root, [edited, script], cache=False)


def test_the_dependents_of_chosen_files_are_chosen_with_their_own_kind(tmp_path, monkeypatch):
    """changed.expand with the cache's dependencies: the files depending on a chosen file, however far (the module
    re-exporting a recipe depends on the recipe's module only), each read as what it is (a launch whose reading
    used a Python file is read as a launch)."""
    from offlint import changed
    from offlint.discover import discover

    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "common.py").write_text(COMMON)
    (tmp_path / "recipes" / "quiet.py").write_text(QUIET)
    (tmp_path / "recipes" / "legacy.py").write_text("from recipes.quiet import quiet_config as legacy_config\n")
    (tmp_path / "recipes" / "alone.py").write_text("def alone_config():\n    return None\n")
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "train.sh").write_text(LAUNCH.format(name="alone_config", n=1))
    tree_files, _ = discover(["."], tmp_path)
    targets = [f for f in tree_files if f.path == "recipes/common.py"]
    deps = {"launch/train.sh": {"recipes/legacy.py": "x"}, "recipes/legacy.py": {"recipes/quiet.py": "x"},
            "recipes/quiet.py": {"recipes/common.py": "x"}, "recipes/alone.py": {}}  # the farthest first
    _, files = changed.expand(targets, tmp_path, lambda path: (tmp_path / path).read_text(), deps, tree_files)
    assert {f.path: f.kind for f in files} == {"recipes/common.py": "python", "recipes/quiet.py": "python",
                                               "recipes/legacy.py": "python", "launch/train.sh": "shell"}
