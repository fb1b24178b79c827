"""What a pre-commit run does not do twice: parse the changed file (once for its definition digests, once more for
its reader; on Megatron Bridge the records of the examples that call an edited recipe ask for the digests first);
the spelling of module names without pathlib; and the relocation of kept units through containers (a moved
location inside dict keys and values, sets, lists and tuples copied; the rest kept as is)."""

import ast
from pathlib import PurePosixPath

import pytest

from offlint.api import CheckOptions, check
from offlint.cache import FileOutcome
from offlint.cache_format import VALUE_CLASSES, Codec
from offlint.relocation import relocate
from offlint.sources.module_index import ModuleIndex, module_parts as _module_parts
from offlint.sources.python_values import PartialDict
from offlint.types import Assignment, Layer, Location, Source, Unit, UnitKind

COMMON = '''
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def _pretrain_common():
    return ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4),
                           optimizer=OptimizerConfig(optimizer="adam"))
'''
TWO = '''
from recipes.common import _pretrain_common


def first_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


def second_config():
    cfg = _pretrain_common()
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 1
    return cfg
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / ".cache"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")  # file arguments: changed-files mode
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "__init__.py").write_text("")
    (tmp_path / "recipes" / "common.py").write_text(COMMON)
    (tmp_path / "recipes" / "two.py").write_text(TWO)
    return tmp_path


def _findings(paths: list[str], cache: bool) -> list[tuple]:
    result = check(paths, CheckOptions(mcore_version="0.20.0", cache=cache, workers=1))
    assert not result.errors
    return sorted((f.code, str(f.location), f.message, f.unit, tuple(str(r.location) for r in f.related))
                  for f in result.findings)


@pytest.mark.parametrize("edit", [
    lambda text: text.replace("def first_config():\n", "def first_config():\n    layers = 2\n"),  # lines move
    lambda text: text.replace("cpu_offloading_num_layers = 2", "cpu_offloading_num_layers = 3"),  # in place
], ids=["insert", "in-place"])
def test_a_changed_file_is_parsed_once_in_a_pre_commit_run(tree, monkeypatch, edit):
    _findings(["."], cache=True)
    edited = edit(TWO)
    (tree / "recipes" / "two.py").write_text(edited)
    parses = []
    original = ast.parse

    def counting(source, *args, **kwargs):
        if source == edited:
            parses.append(kwargs.get("filename"))
        return original(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    cached = _findings(["recipes/two.py"], cache=True)
    assert len(parses) == 1, parses  # (where its definition digests are needed, its reader takes that tree)
    monkeypatch.setattr(ast, "parse", original)
    assert cached == _findings(["recipes/two.py"], cache=False)
    assert any(code == "OFL102" for code, *_ in cached)  # the check read something


def test_a_reader_takes_the_tree_parsed_for_definition_digests(tree):
    from offlint.job import Texts
    from offlint.outcome_reuse import DefinitionDigests, Verifier

    texts = Texts(lambda path: ((tree / path).read_text(), ""))
    definitions = DefinitionDigests(texts)
    assert "first_config" in definitions.get("recipes/two.py")
    parsed = definitions.modules["recipes/two.py"]

    class Job:
        python_paths = ["recipes/__init__.py", "recipes/common.py", "recipes/two.py"]

        def index(self):
            return ModuleIndex(self.python_paths, self.texts.get)

    Job.texts = texts
    verifier = Verifier(Job(), {}, definitions.modules)
    project = verifier.shared()
    assert project.reader("recipes/two.py").module is parsed  # not parsed again
    assert project.reader("recipes/common.py").module is not parsed


@pytest.mark.parametrize("path", ["a.py", "recipes/llama/llama3.py", "pkg/__init__.py", ".py", "x/.py", "../a.py",
                                  "a/../b.py", "./a.py", "a/./b.py", "a//b.py", "/abs/a.py", "a..py", "x/.h.py",
                                  "a.b.py", "..py", "a/...py", "a\\b.py", "a.PY", "a/b"])
def test_module_parts_are_pathlibs(path):
    assert _module_parts(path) == list(PurePosixPath(path).with_suffix("").parts)


def test_relocate_moves_locations_inside_containers_and_copies_only_what_moved():
    codec = Codec(VALUE_CLASSES + (FileOutcome,))
    moved_here, kept_here = Location("a.py", 10, 5), Location("b.py", 10, 5)
    value = {moved_here: [1, "x", (moved_here, kept_here)], "k": PartialDict({"p": moved_here}, "why"),
             "s": frozenset({moved_here}), "same": (kept_here, 2.5, None, True)}
    unit = Unit("u", UnitKind.RECIPE, Location("a.py", 3, 1), layers=[Layer("recipe", [
        Assignment("k", value, kept_here, Source.PYTHON)])])
    [moved], [] = relocate(codec, [unit], [], {"a.py": {3: 3, 10: 12}})
    new = moved.layers[0].assignments[0].value
    there = Location("a.py", 12, 5)
    assert list(new) == [there, "k", "s", "same"]
    assert new[there] == [1, "x", (there, kept_here)]
    assert type(new["k"]) is PartialDict and new["k"] == {"p": there} and new["k"].reason == "why"
    assert new["s"] == frozenset({there})
    assert new["same"] is value["same"] and moved.location is unit.location  # nothing moved in them: kept
    assert unit.layers[0].assignments[0].value is value and moved_here.line == 10  # the values given: unchanged
