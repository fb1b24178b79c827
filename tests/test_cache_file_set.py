"""A Python file added to the tree or removed from it re-reads only the files whose imports (or other questions of
the set of files) it answers differently (module_index): the cache is no longer keyed by the set of files, which
read the whole tree again after any file was added. A cached run still answers what a run without the cache does."""

from pathlib import Path

import pytest

from offlint.changed import _lookups_changed
from offlint.discover import SourceFile
from offlint.sources.module_index import (ModuleIndex, file_lookup, function_lookup, lookup_state, lookups_of,
                                          module_lookup, package_lookup, package_lookup_matches)
from offlint.sources.python_project import PythonProject
from tests.test_cache_parts import _findings, _reads

COMMON = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common(layers=8):
    return ConfigContainer(model=GPTModelProvider(num_layers=layers, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
# Reads its layer count from a module the tree does not have yet: unknown until it is added.
NEEDS_EXTRA = '''
from megatron.bridge.training.config import ConfigContainer
from recipes.common import _pretrain_common
from recipes.extra import LAYERS


def needs_extra_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model.num_layers = LAYERS
    return cfg
'''
PLAIN = '''
from recipes.common import _pretrain_common


def plain_config():
    cfg = _pretrain_common()
    cfg.model.num_layers = 6
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")  # file arguments: changed-files mode
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "common.py").write_text(COMMON)
    (tmp_path / "recipes" / "needs_extra.py").write_text(NEEDS_EXTRA)
    (tmp_path / "recipes" / "plain.py").write_text(PLAIN)
    return tmp_path


def _split_refused(findings: list[tuple]) -> set[str]:
    """The units whose layers do not divide over their pipeline (OFL218)."""
    return {unit for code, _, _, unit, *_ in findings if code == "OFL218"}


def test_an_added_module_re_reads_the_file_importing_it_and_nothing_else(tree: Path, monkeypatch):
    cold = _findings(tree, ["."], cache=True)
    assert _split_refused(cold) == {"plain_config"}  # 6 layers do not divide over 4 stages; LAYERS is unknown yet
    read = _reads(monkeypatch)
    (tree / "recipes" / "extra.py").write_text("LAYERS = 10\n")
    warm = _findings(tree, ["."], cache=True)
    assert sorted(read) == ["recipes/extra.py", "recipes/needs_extra.py"]
    assert warm == _findings(tree, ["."], cache=False)
    assert _split_refused(warm) == {"plain_config", "needs_extra_config"}  # 10 layers over 4 stages, now known


def test_a_removed_module_re_reads_the_file_importing_it(tree: Path, monkeypatch):
    (tree / "recipes" / "extra.py").write_text("LAYERS = 10\n")
    assert _split_refused(_findings(tree, ["."], cache=True)) == {"plain_config", "needs_extra_config"}
    read = _reads(monkeypatch)
    (tree / "recipes" / "extra.py").unlink()
    warm = _findings(tree, ["."], cache=True)
    assert read == ["recipes/needs_extra.py"]
    assert warm == _findings(tree, ["."], cache=False)
    assert _split_refused(warm) == {"plain_config"}


def test_an_unrelated_file_added_reads_that_file_alone(tree: Path, monkeypatch):
    cold = _findings(tree, ["."], cache=True)
    read = _reads(monkeypatch)
    (tree / "tools").mkdir()
    (tree / "tools" / "report.py").write_text("def summarize(rows):\n    return len(rows)\n")
    assert _findings(tree, ["."], cache=True) == cold
    assert read == ["tools/report.py"]


def test_a_second_file_claiming_a_module_name_re_reads_its_importers(tree: Path, monkeypatch):
    """`recipes.common` answered by two files (a vendored copy of the tree beside it): the importers are read again,
    and the copy nearest to each importer decides, as without the cache."""
    cold = _findings(tree, ["."], cache=True)
    read = _reads(monkeypatch)
    (tree / "vendor" / "recipes").mkdir(parents=True)
    (tree / "vendor" / "recipes" / "__init__.py").write_text("")
    (tree / "vendor" / "recipes" / "common.py").write_text(COMMON.replace("layers=8", "layers=5"))
    warm = _findings(tree, ["."], cache=True)
    assert {"recipes/needs_extra.py", "recipes/plain.py"} <= set(read)
    assert warm == _findings(tree, ["."], cache=False)
    assert _split_refused(warm) == _split_refused(cold)  # each importer still takes the copy next to it


def test_a_pre_commit_run_on_an_added_module_reads_the_files_importing_it_again(tree: Path, monkeypatch):
    _findings(tree, ["."], cache=True)
    (tree / "recipes" / "extra.py").write_text("LAYERS = 10\n")
    read = _reads(monkeypatch)
    cached = _findings(tree, ["recipes/extra.py"], cache=True)
    assert sorted(read) == ["recipes/extra.py", "recipes/needs_extra.py"]  # chosen by the lookup it noted
    assert cached == _findings(tree, ["recipes/extra.py"], cache=False)
    read.clear()
    assert _split_refused(_findings(tree, ["."], cache=True)) == {"plain_config", "needs_extra_config"}
    assert read == []  # the pre-commit run refreshed the entry the added file concerned


def test_each_question_of_the_set_of_files_notes_its_lookup():
    paths = ["a/recipes/common.py", "a/models/x_bridge.py", "a/models/provider.py", "b/run.py"]
    texts = {"a/recipes/common.py": "def base():\n    pass\n", "b/run.py": "def main():\n    pass\n"}
    project = PythonProject(paths, texts.get)
    with project.tracking() as used:
        assert project.path_of("recipes.common") == "a/recipes/common.py"
        assert project.paths_in_package("a.models", "_bridge.py") == ["a/models/x_bridge.py"]
        assert project.function_paths("main", "b/run.py") == ["b/run.py"]
        assert project.knows("b/run.py") and not project.knows("b/missing.py")
    assert used == {module_lookup("recipes.common"), package_lookup("a.models", "_bridge.py"),
                    function_lookup("main"), file_lookup("b/run.py"), file_lookup("b/missing.py")}


def test_a_lookup_s_state_changes_exactly_when_its_answer_may():
    texts = {"r/common.py": "def base():\n    pass\n", "m/x_bridge.py": "", "m/p.py": ""}
    before = ModuleIndex(sorted(texts), texts.get)
    keys = [module_lookup("r.common"), module_lookup("common"), package_lookup("m", "_bridge.py"),
            function_lookup("base"), file_lookup("m/p.py")]
    states = {key: lookup_state(key, before) for key in keys}

    def changed(added: dict[str, str]) -> set[str]:
        now = {**texts, **added}
        index = ModuleIndex(sorted(now), now.get)
        return {key for key in keys if lookup_state(key, index) != states[key]}

    assert changed({"other/unrelated.py": "X = 1\n"}) == set()
    assert changed({"m/y_provider.py": ""}) == set()  # not a `_bridge.py`: the listing is the same
    assert changed({"m/y_bridge.py": ""}) == {package_lookup("m", "_bridge.py")}
    assert changed({"v/common.py": ""}) == {module_lookup("common")}  # `r.common` is still one file's alone
    assert changed({"v/r/common.py": ""}) == {module_lookup("r.common"), module_lookup("common")}
    assert changed({"t/tools.py": "def base():\n    return 1\n"}) == {function_lookup("base")}
    after = dict(texts)
    del after["m/p.py"]
    index = ModuleIndex(sorted(after), after.get)
    assert lookup_state(file_lookup("m/p.py"), index) != states[file_lookup("m/p.py")]


def test_lookups_of_a_file_cover_what_its_adding_changes():
    text = "def alpha():\n    pass\n\n\ndef beta(x):\n    return x\n"
    assert set(lookups_of("src/pkg/mod.py", text)) == {
        file_lookup("src/pkg/mod.py"), module_lookup("src.pkg.mod"), module_lookup("pkg.mod"), module_lookup("mod"),
        function_lookup("alpha"), function_lookup("beta")}
    assert set(lookups_of("src/pkg/__init__.py", "")) == {
        file_lookup("src/pkg/__init__.py"), module_lookup("src.pkg"), module_lookup("pkg")}
    assert package_lookup_matches(package_lookup("pkg", "_bridge.py"), "src/pkg/sub/llama_bridge.py")
    assert not package_lookup_matches(package_lookup("pkg", "_bridge.py"), "src/pkg/sub/provider.py")
    assert not package_lookup_matches(package_lookup("pkg", ""), "src/other/pkg.py")


def test_a_pre_commit_run_seeds_the_files_whose_lookups_its_targets_change():
    dependents = {module_lookup("recipes.extra"): ["recipes/needs_extra.py"],
                  function_lookup("alpha"): ["launch.sh"], function_lookup("gamma"): ["other.sh"],
                  package_lookup("models", "_bridge.py"): ["recipes/auto.py"], module_lookup("mod"): ["x.py"]}
    data = {"recipes/extra.py": b"LAYERS = 1\n", "models/new_bridge.py": b"", "pkg/mod.py": b"def alpha():\n  pass\n"}
    new = [SourceFile("recipes/extra.py", "python", True), SourceFile("models/new_bridge.py", "python", True)]
    assert set(_lookups_changed(new, {}, dependents, data)) == {module_lookup("recipes.extra"),
                                                                package_lookup("models", "_bridge.py")}
    edited = [SourceFile("pkg/mod.py", "python", True)]  # read before: its module names answer as they did
    assert _lookups_changed(edited, {"pkg/mod.py": {}}, dependents, data) == [function_lookup("alpha")]
